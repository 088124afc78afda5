/*
 * An fd on a namespace no task of the tree lives in (a UTS namespace its reaped child
 * made) cannot be restored: the dump is refused, and the test runs on with the fd still
 * naming that namespace, not its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NS_FD 40

int main(int argc, char **argv)
{
	int ready[2], status;
	struct stat st, own, before;
	char path[64], c;
	pid_t child;

	test_init(argc, argv);
	/* The child lives only until the fd is open: it is no task of the dumped tree. */
	if (pipe(ready))
		test_fail_errno("pipe");
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		c = unshare(CLONE_NEWUTS) ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(ready[0], &c, 1) != 1 || c != 'y')
		test_fail("the child could not make a UTS namespace");
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", child);
	open_fd_at(path, O_RDONLY, NS_FD);
	if (kill(child, SIGKILL) || waitpid(child, &status, 0) != child)
		test_fail_errno("reaping the child");
	close(ready[0]);
	close(ready[1]);
	if (fstat(NS_FD, &before))
		test_fail_errno("fstat");

	test_ready();
	test_wait_sigterm();

	if (fstat(NS_FD, &st) || stat("/proc/self/ns/uts", &own))
		test_fail_errno("stat");
	if (st.st_ino != before.st_ino || st.st_ino == own.st_ino)
		test_fail("fd %d names inode %lu after the failed dump, expected %lu (own %lu)",
			  NS_FD, (unsigned long)st.st_ino, (unsigned long)before.st_ino,
			  (unsigned long)own.st_ino);
	test_pass();
}
