/* The commands: each pipeline's entry point. */
#ifndef CR_CRTOOLS_H
#define CR_CRTOOLS_H

#include <stdbool.h>
#include <sys/types.h>

/* Dump the tree rooted at pid into the images dir (Documentation/design.md §3). 0 or -1. */
int cr_dump_tasks(pid_t pid);
/* criu pre-dump: the tree's private anonymous pages, its writes tracked for the next dump. */
int cr_pre_dump_tasks(pid_t pid);
/*
 * Restore the tree from the images dir (Documentation/design.md §4). -1 on failure; else
 * 0 with -d, or the restored root's exit status when criu waits for it.
 */
int cr_restore_tasks(void);
/* The root pid of the tree cr_restore_tasks() forked last (as criu sees it), or 0. */
pid_t cr_restore_root_pid(void);
/* What `criu check` is asked: one feature, or the required ones and these groups. */
struct check_request {
	const char *feature; /* --feature NAME; NULL: the groups */
	bool extra; /* --extra */
	bool experimental; /* --experimental */
};

/* criu check: "NAME is supported" or "Looks good." on stdout and 0, else -1. */
int cr_check(const struct check_request *req);

/*
 * --status-fd: the run succeeded (dump: images written and the tree released; restore:
 * the tree runs): writes one \0 and closes it. Called once; no-op without the option.
 */
void report_status_ready(void);

/*
 * The daemons (lazy-pages, page-server), once they listen: -d forks, the caller gets its
 * prompt back; --pidfile names the daemon. 0 in the daemon, -1 after one line.
 */
int daemonize(void);

/* The commands' lines of criu --help. */
void print_commands(void);

#endif
