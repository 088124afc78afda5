/*
 * An fd on a file inside the /proc directory of a process gone (a reaped child's
 * mountinfo, whose link keeps its name: only the directory is marked deleted) comes back
 * on that file of a dead process again: same link, on procfs, read-only, and it reads (the
 * open file holds its mount namespace). The helper restore made with that pid is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FILE_FD	    40
#define PROC_MAGIC  0x9fa0

int main(int argc, char **argv)
{
	char path[64], before[64], now[64], buf[256];
	struct statfs sfs;
	pid_t child;

	test_init(argc, argv);
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (!child) {
		pause();
		_exit(0);
	}
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", child);
	open_fd_at(path, O_RDONLY, FILE_FD);
	if (kill(child, SIGKILL) || waitpid(child, NULL, 0) != child)
		test_fail_errno("kill and reap the child");
	fd_link(FILE_FD, before, sizeof(before));
	if (strcmp(before, path))
		test_fail("fd %d links to %s before the dump, expected %s", FILE_FD, before, path);

	test_ready();
	test_wait_sigterm();

	fd_link(FILE_FD, now, sizeof(now));
	if (strcmp(now, before))
		test_fail("fd %d links to %s, was %s", FILE_FD, now, before);
	if (fstatfs(FILE_FD, &sfs) || sfs.f_type != PROC_MAGIC)
		test_fail("fd %d is not on procfs", FILE_FD);
	if (read(FILE_FD, buf, sizeof(buf)) <= 0)
		test_fail("fd %d does not read as a mountinfo", FILE_FD);
	if ((fcntl(FILE_FD, F_GETFL) & O_ACCMODE) != O_RDONLY)
		test_fail("fd %d is not read-only", FILE_FD);
	if (!kill(child, 0))
		test_fail("a helper with pid %d is still there", child);
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
		test_fail("the test has a child after restore");
	test_pass();
}
