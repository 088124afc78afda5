/*
 * --status-fd, and the daemons' fork and pidfile: what a long-running criu tells whoever
 * started it (daemon.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cr_options.h"
#include "daemon.h"
#include "log.h"

int prepare_status_fd(void)
{
	if (opts.status_fd < 0)
		return 0;
	if (fcntl(opts.status_fd, F_SETFD, FD_CLOEXEC)) {
		fprintf(stderr, "Error: --status-fd %d: %s\n", opts.status_fd, strerror(errno));
		return -1;
	}
	return 0;
}

void report_status_ready(void)
{
	static bool reported; /* the fd is closed after its one byte */

	if (opts.status_fd < 0 || reported)
		return;
	if (write(opts.status_fd, "", 1) != 1)
		pr_warn("cannot write to --status-fd %d: %s\n", opts.status_fd, strerror(errno));
	close(opts.status_fd);
	reported = true;
}

int daemonize(void)
{
	pid_t pid;
	FILE *f;

	if (!opts.restore_detach && !opts.pidfile)
		return 0;
	pid = opts.restore_detach ? fork() : getpid();
	if (pid < 0) {
		pr_perror("cannot fork the daemon");
		return -1;
	}
	if (opts.restore_detach && pid == 0) {
		setsid();
		return 0;
	}
	if (opts.pidfile) {
		f = fopen(opts.pidfile, "w");
		if (!f || fprintf(f, "%d", pid) < 0 || fclose(f)) {
			pr_perror("cannot write pidfile %s", opts.pidfile);
			if (opts.restore_detach)
				kill(pid, SIGKILL);
			return -1;
		}
	}
	if (opts.restore_detach)
		_exit(0);
	return 0;
}
