/*
 * A cwd and an fd in the /proc directories of processes that are gone (children that
 * were reaped): after restore the cwd is again a dead process's directory (getcwd()
 * fails with ENOENT, /proc/self/cwd names it as deleted, under the same pid), the fd
 * too, and the helpers restore used to re-create those pids are gone, reaped by no one
 * of ours (the test has no child).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define DIR_FD 40

/* A child that waits to be killed; its pid. */
static pid_t start_child(void)
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	if (!pid) {
		pause();
		_exit(0);
	}
	return pid;
}

static void end_child(pid_t pid)
{
	if (kill(pid, SIGKILL) || waitpid(pid, NULL, 0) != pid)
		test_fail_errno("kill and reap the child");
}

static void read_link(const char *link, char *buf, size_t len)
{
	ssize_t n = readlink(link, buf, len - 1);

	if (n < 0)
		test_fail_errno("readlink");
	buf[n] = '\0';
}

int main(int argc, char **argv)
{
	char cwd_before[64], fd_before[64], now[64], buf[PATH_MAX], dir[32];
	pid_t cwd_pid, fd_pid;
	int fd;

	test_init(argc, argv);
	cwd_pid = start_child();
	fd_pid = start_child();
	snprintf(dir, sizeof(dir), "/proc/%d", cwd_pid);
	if (chdir(dir))
		test_fail_errno("chdir");
	snprintf(dir, sizeof(dir), "/proc/%d", fd_pid);
	fd = open(dir, O_PATH | O_DIRECTORY);
	if (fd < 0 || dup2(fd, DIR_FD) != DIR_FD)
		test_fail_errno("open");
	close(fd);
	end_child(cwd_pid);
	end_child(fd_pid);
	read_link("/proc/self/cwd", cwd_before, sizeof(cwd_before));
	read_link("/proc/self/fd/40", fd_before, sizeof(fd_before));

	test_ready();
	test_wait_sigterm();

	if (getcwd(buf, sizeof(buf)) || errno != ENOENT)
		test_fail("getcwd: %s", getcwd(buf, sizeof(buf)) ? buf : strerror(errno));
	read_link("/proc/self/cwd", now, sizeof(now));
	if (strcmp(now, cwd_before))
		test_fail("cwd is '%s', was '%s'", now, cwd_before);
	read_link("/proc/self/fd/40", now, sizeof(now));
	if (strcmp(now, fd_before))
		test_fail("fd %d is '%s', was '%s'", DIR_FD, now, fd_before);
	if (!kill(cwd_pid, 0) || !kill(fd_pid, 0))
		test_fail("a helper with pid %d or %d is still there", cwd_pid, fd_pid);
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
		test_fail("the test has a child after restore");
	test_pass();
}
