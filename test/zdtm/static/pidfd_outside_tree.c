/*
 * A pidfd on a process outside the dumped tree (the test's parent, the runner) cannot be
 * restored: the dump is refused, and the test runs on with its pidfd as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PARENT_FD 40

int main(int argc, char **argv)
{
	pid_t parent;
	char want[32], got[32];
	int fd;

	test_init(argc, argv);
	parent = getppid();
	fd = syscall(SYS_pidfd_open, parent, 0);
	if (fd < 0 || dup2(fd, PARENT_FD) != PARENT_FD)
		test_fail_errno("pidfd_open(parent)");
	close(fd);

	test_ready();
	test_wait_sigterm();

	snprintf(want, sizeof(want), "%d", parent);
	fdinfo_field(PARENT_FD, "Pid", got, sizeof(got));
	if (strcmp(got, want))
		test_fail("fd %d names pid %s after the failed dump, expected %s", PARENT_FD, got,
			  want);
	if (syscall(SYS_pidfd_send_signal, PARENT_FD, 0, NULL, 0))
		test_fail_errno("pidfd_send_signal(0) to the parent");
	test_pass();
}
