/* Options of one criu run, as parsed from the command line (crtools.c). */
#ifndef CR_OPTIONS_H
#define CR_OPTIONS_H

#include <stdbool.h>
#include <sys/types.h>

struct cr_options {
	pid_t tree_pid; /* -t */
	char *imgs_dir; /* -D */
	char *work_dir; /* -W */
	char *log_file; /* -o */
	int loglevel; /* -v */
	bool shell_job; /* -j */
	bool leave_running; /* -R */
	bool restore_detach; /* -d */
	bool restore_sibling;
	char *pidfile;
	unsigned int timeout; /* seconds; 0: none */
	char *libdir; /* -L */
	bool display_stats;
	char *check_feature; /* check --feature */
};

extern struct cr_options opts;

#endif
