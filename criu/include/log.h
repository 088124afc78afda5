/*
 * Logging at CRIU's levels (-v0..-v4): errors always, then warnings, info, debug.
 * Messages go to the log file (-o, relative to the work dir) and errors also to stderr.
 */
#ifndef CR_LOG_H
#define CR_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

enum {
	LOG_MSG = 0, /* printed whatever the level */
	LOG_ERROR = 1,
	LOG_WARN = 2,
	LOG_INFO = 3,
	LOG_DEBUG = 4,
};

#define DEFAULT_LOGLEVEL LOG_WARN

int log_init(int dirfd, const char *path, int level);
void log_fini(void);
/*
 * --log-pid: from now on this process (a restored task) logs to the log file's name
 * with ".PID" appended, in the same directory. No-op when the log is not a file.
 */
int log_to_pid_file(pid_t pid);
int log_get_fd(void);
void log_set_task_fd(int fd);
/* Whether an error line already reached the user on stderr. */
bool log_error_was_shown(void);
int log_get_level(void);
/*
 * The first error line logged since the start (or log_forget_errors()), without its
 * header and newline; "" when none. What the RPC service answers a failure with.
 */
const char *log_first_error(void);
void log_forget_errors(void);
/*
 * The errno a failure stands for, where the code that saw it knows one a caller can act
 * on (EEXIST: a pid to restore is taken): the RPC's cr_errno. The first one set counts;
 * 0 when none. log_forget_errors() clears it.
 */
void log_set_errno(int err);
int log_get_errno(void);
void log_set_prefix(const char *prefix);
void print_on_level(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifndef LOG_PREFIX
#define LOG_PREFIX ""
#endif

#define pr_msg(fmt, ...) print_on_level(LOG_MSG, fmt, ##__VA_ARGS__)
#define pr_err(fmt, ...) \
	print_on_level(LOG_ERROR, "Error (%s:%d): " LOG_PREFIX fmt, __FILE__, __LINE__, ##__VA_ARGS__)
#define pr_warn(fmt, ...) print_on_level(LOG_WARN, "Warn: " LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) print_on_level(LOG_INFO, LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) print_on_level(LOG_DEBUG, LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_perror(fmt, ...) pr_err(fmt ": %s\n", ##__VA_ARGS__, strerror(errno))

#endif
