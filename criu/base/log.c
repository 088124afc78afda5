/*
 * The log: messages at or below the chosen level go to the log file; errors and
 * LOG_MSG also go to stderr so a failing command says why in one line.
 */
#include <fcntl.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int log_fd = -1;
/* The log file's directory and name, when the log is a file (log_to_pid_file()). */
static int log_dir_fd = -1;
static char log_path[4096];
static int log_level = DEFAULT_LOGLEVEL;
static struct timespec log_start;
static const char *log_prefix = "";
static bool log_echo_errors = true;
static bool log_error_shown;
/* The first error line of the run, without its "Error (file:line): " header (RPC answers). */
static char first_error[512];

static int open_log_file(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);

	if (fd < 0) {
		int err = errno;

		fprintf(stderr, "Error: cannot open log file %s: %s\n", path, strerror(err));
		return -err;
	}
	return fd;
}

int log_init(int dirfd, const char *path, int level)
{
	log_level = level;
	clock_gettime(CLOCK_MONOTONIC, &log_start);
	if (!path || !path[0])
		return 0;
	if (path[0] == '-' && path[1] == '\0') {
		log_fd = dup(STDERR_FILENO);
		return log_fd < 0 ? -errno : 0;
	}
	log_fd = open_log_file(dirfd, path);
	if (log_fd < 0)
		return log_fd;
	/* Kept for log_to_pid_file(): tasks forked later open their own files there. */
	snprintf(log_path, sizeof(log_path), "%s", path);
	log_dir_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	return 0;
}

int log_to_pid_file(pid_t pid)
{
	char path[sizeof(log_path) + 16];
	int fd;

	if (log_dir_fd < 0)
		return 0;
	snprintf(path, sizeof(path), "%s.%d", log_path, pid);
	fd = open_log_file(log_dir_fd, path);
	if (fd < 0)
		return fd;
	close(log_fd);
	log_fd = fd;
	return 0;
}

void log_fini(void)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
	if (log_dir_fd >= 0)
		close(log_dir_fd);
	log_dir_fd = -1;
}

int log_get_fd(void)
{
	return log_fd;
}

/*
 * A restore task moves the log to a service fd; from then on its stderr may be the
 * restored program's, so errors go only to the log (criu's main process reports them).
 */
void log_set_task_fd(int fd)
{
	log_fd = fd;
	log_echo_errors = false;
}

bool log_error_was_shown(void)
{
	return log_error_shown;
}

int log_get_level(void)
{
	return log_level;
}

/* Restored tasks log with their pid so interleaved lines stay readable. */
void log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

/* A failed log write has nowhere left to be reported: drop it. */
static void log_write(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n <= 0)
			return;
		buf += n;
		len -= n;
	}
}

static void keep_first_error(const char *line)
{
	const char *text = line;
	size_t len;

	/* pr_err()'s header names the source line; the reader of the answer wants the reason. */
	if (!strncmp(text, "Error (", 7) && strstr(text, "): "))
		text = strstr(text, "): ") + 3;
	snprintf(first_error, sizeof(first_error), "%s", text);
	len = strlen(first_error);
	while (len && first_error[len - 1] == '\n')
		first_error[--len] = '\0';
}

const char *log_first_error(void)
{
	return first_error;
}

static int first_errno;

void log_forget_errors(void)
{
	first_error[0] = '\0';
	first_errno = 0;
}

void log_set_errno(int err)
{
	if (!first_errno)
		first_errno = err;
}

int log_get_errno(void)
{
	return first_errno;
}

void print_on_level(int level, const char *fmt, ...)
{
	char buf[4096];
	struct timespec now;
	int hdr, len;
	va_list args;

	if (level > log_level && level != LOG_MSG)
		return;

	clock_gettime(CLOCK_MONOTONIC, &now);
	double secs = (now.tv_sec - log_start.tv_sec) + (now.tv_nsec - log_start.tv_nsec) / 1e9;
	hdr = snprintf(buf, sizeof(buf), "(%08.6f) %s", secs, log_prefix);

	va_start(args, fmt);
	len = vsnprintf(buf + hdr, sizeof(buf) - hdr, fmt, args);
	va_end(args);
	if (len < 0)
		return;
	len += hdr;
	if (len >= (int)sizeof(buf))
		len = sizeof(buf) - 1;

	if (level == LOG_ERROR && !first_error[0])
		keep_first_error(buf + hdr);
	if (log_fd >= 0 && log_fd != STDERR_FILENO)
		log_write(log_fd, buf, len);
	/* Errors reach the user on stderr, plain messages on stdout, without the timestamp. */
	if (level == LOG_MSG)
		log_write(STDOUT_FILENO, buf + hdr, len - hdr);
	else if (log_echo_errors && (level <= LOG_ERROR || log_fd < 0)) {
		log_write(STDERR_FILENO, buf + hdr, len - hdr);
		log_error_shown |= level == LOG_ERROR;
	}
}
