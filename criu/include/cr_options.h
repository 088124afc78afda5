/*
 * Options of one criu run, as parsed from configuration files and the command line
 * (config.c). Every option upstream CRIU knows is parsed; those this criu cannot honour
 * are refused there, so what is here is what the pipelines act on.
 */
#ifndef CR_OPTIONS_H
#define CR_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* --inherit-fd fd[N]:KEY: restore opens nothing for the file KEY names, it takes fd N. */
struct inherit_fd {
	int fd;	   /* criu's descriptor, as given */
	char *key; /* pipe:[INODE] or a path */
};

struct cr_options {
	pid_t tree_pid;	      /* -t */
	char *imgs_dir;	      /* -D */
	char *work_dir;	      /* -W */
	char *log_file;	      /* -o */
	int loglevel;	      /* -v */
	bool log_pid;	      /* each restored task logs to LOG.PID */
	bool shell_job;	      /* -j */
	bool leave_running;   /* -R */
	bool leave_stopped;   /* -s: after dump or restore the tree is left stopped */
	bool restore_detach;  /* -d */
	bool restore_sibling; /* -S */
	char *pidfile;
	int timeout;  /* seconds; 0: none; -1: not given (dump: 10, restore: none) */
	char *libdir; /* -L */
	bool display_stats;
	int status_fd;	       /* -1: none */
	char **action_scripts; /* --action-script, in the order given */
	unsigned int nr_action_scripts;
	struct inherit_fd *inherit_fds;
	unsigned int nr_inherit_fds;
	bool link_remap; /* a file whose name was removed, other links left, is linked back */
	bool file_locks; /* dump the file locks the tree holds (restore takes them regardless) */
	bool ext_unix_sk; /* -x: unix sockets may have peers outside the tree (sk-unix.c) */
	bool force_irmap; /* every watched inode gets a path in the images (irmap.h) */
	char **irmap_scan_paths; /* --irmap-scan-path, where irmap looks first */
	unsigned int nr_irmap_scan_paths;
	bool file_validation_size; /* --file-validation filesize: a size change fails restore */
	uint64_t ghost_limit;	   /* bytes of a deleted file's contents a dump may save */
	char *check_feature;	   /* check --feature */
	bool check_extra;	   /* check --extra (--all) */
	bool check_experimental;   /* check --experimental (--all) */
	bool pre_dump_read;	   /* --pre-dump-mode read (for pre-dump) */
	bool lazy_pages;	   /* restore: private memory comes from `criu lazy-pages` (uffd.h) */
	bool no_default_config;
	char *config_file; /* --config */
};

extern struct cr_options opts;

/* Upstream's default for --ghost-limit: 1 MiB. */
#define DEFAULT_GHOST_LIMIT (1ULL << 20)
/* Upstream's default for --timeout on dump: seconds to seize the tree. */
#define DEFAULT_DUMP_TIMEOUT 10

/*
 * Reads the configuration files and the command line into opts. Returns the index in
 * argv of the first positional argument (the command), or -1 after one error line on
 * stderr. -h and -V print and exit(0).
 */
int parse_options(int argc, char **argv);
/* The error line parse_options() printed last ("" when none), for the log file. */
const char *parse_error_line(void);
/* The usage text of criu --help, options from the table. */
void print_usage(void);

#endif
