/*
 * The lazy-pages daemon's state (uffd.c), which its guardian (uffd-guard.c) reads too: the
 * tasks it serves, where their pages come from, what epoll watches.
 */
#ifndef CR_UFFD_DAEMON_H
#define CR_UFFD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lazy-copy.h"
#include "task-image.h"

/*
 * --page-server: the connection to the dump's source. Background chunks are asked for
 * ahead, one per copy job (asked, oldest first); the source answers in order, each answer
 * read straight into its job's buffer and handed to the copiers. A fault's request queues
 * behind them: its answer is the one after theirs.
 */
struct lazy_remote {
	int sk;	      /* -1: no --page-server */
	uint8_t *buf; /* FAULT_CHUNK bytes: a fault's pages (never more are asked for) */
	struct lazy_copy_job *asked, **asked_tail;
	uint64_t requests, bytes;
};

/*
 * Where a task's pages come from, shared with the children it forks: its pages image,
 * mapped once, for runs stored in the images; the dump's source (remote, NULL without
 * --page-server), which knows the task by its pid in the images, for runs left there.
 */
struct lazy_src {
	unsigned int refs;
	const uint8_t *addr;
	uint64_t len;
	pid_t pid;
	struct lazy_remote *remote;
};

struct lazy_daemon;
struct lazy_task;

/*
 * One kind of run's pages. fetch(): the data of [addr, addr + *len) of run r, readable
 * now at *data, *len possibly cut short (never to 0), for a fault. queue(): the job's
 * chunk of run r on its way to the copiers, at once or once its pages came. 0 or -errno
 * (logged).
 */
struct lazy_src_ops {
	int (*fetch)(struct lazy_daemon *d, struct lazy_task *t, const struct page_run *r,
		     uint64_t addr, uint64_t *len, const void **data);
	int (*queue)(struct lazy_daemon *d, struct lazy_copy_job *job, const struct page_run *r);
};

/* What epoll reports: the listening socket, a task's connection or its uffd, the copiers. */
enum lazy_watch_kind { WATCH_LISTEN, WATCH_SOCK, WATCH_UFFD, WATCH_COPIERS, WATCH_REMOTE };

struct lazy_watch {
	enum lazy_watch_kind kind;
	struct lazy_task *task;
};

/*
 * Background chunks are taken in address order from bg_from on; a chunk stays in runs
 * until its copy is done, so a fault on it is served (again) at once and an event of the
 * task moves or cuts it with the rest. Its uffd is read only while none of its chunks is
 * being copied (the copier would write where the event's change just left something
 * else); a chunk asked of the source before an event (gen) is dropped when it comes.
 */
struct lazy_task {
	struct lazy_task *next;
	pid_t pid;	/* in the images; 0: forked while its pages came in */
	pid_t peer_pid; /* the connected task as the daemon sees it (SO_PEERCRED) */
	uint64_t id;	/* names it to the guardian */
	int sock;	/* until the uffd came; -1 after */
	bool has_msg;	/* the connection's lazy_msg was read */
	int uffd;	/* -1 until it came */
	struct lazy_watch sock_watch, uffd_watch;
	struct lazy_src *src;
	struct page_run *runs; /* still to copy, by address */
	unsigned int nr_runs, cap_runs;
	uint64_t *retry; /* faults that met a changing address space (EAGAIN) */
	unsigned int nr_retry, cap_retry;
	uint64_t bg_from; /* the next background chunk starts at or after it */
	uint32_t gen;	  /* counts the task's events that moved or cut its runs */
	bool blocked;	  /* a chunk met no mapping: none is taken until an event or a pause */
	unsigned int asked, copying; /* its chunks asked of the source, in the copiers */
	bool gone;		     /* a copier found it gone */
	int job_err;		     /* a copier's error, for the loop to report */
	uint64_t faults, copied;
};

struct lazy_daemon {
	int ep;
	struct lazy_watch listen_watch, copiers_watch, remote_watch;
	struct lazy_task *tasks;
	bool restore_done; /* criu restore said no task comes any more */
	unsigned int nr_served;
	struct lazy_remote remote;
	struct lazy_copiers copiers;
	int guardian_sock; /* to the guardian (its messages below) */
	pid_t guardian_pid;
	uint64_t next_id;
};

/*
 * uffd-guard.c. The guardian, forked off the daemon (listen_fd and the source's socket
 * closed in it): 0, or -1 after one line.
 */
int lazy_guard_start(struct lazy_daemon *d, int listen_fd);
/* A clean exit: the guardian lets go of what it holds, killing nothing. */
void lazy_guard_stop(struct lazy_daemon *d);
/* A task's uffd arrived: the guardian gets a copy and a pidfd before any page is served. */
int lazy_guard_task(struct lazy_daemon *d, struct lazy_task *t);
/* All of t's pages are in: the guardian lets go of its uffd. */
void lazy_guard_done(struct lazy_daemon *d, struct lazy_task *t);

#endif
