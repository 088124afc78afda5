/*
 * A shell job whose child shares the terminal fds it inherited: after a --shell-job
 * restore, parent and child still hold one open file description per stdio fd (kcmp
 * KCMP_FILE says they are the same file), each fd still on the terminal.
 */
#include <linux/kcmp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

static void expect_stdio_shared_with(pid_t child)
{
	for (int fd = 0; fd < 3; fd++) {
		long same = syscall(SYS_kcmp, getpid(), child, KCMP_FILE, fd, fd);

		if (same < 0)
			test_fail_errno("kcmp");
		if (same != 0)
			test_fail("fd %d: parent and child hold different descriptions", fd);
		if (!isatty(fd))
			test_fail("fd %d is not a terminal", fd);
	}
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		test_barrier_done();
		test_wait_sigterm();
		for (int fd = 0; fd < 3; fd++)
			if (!isatty(fd))
				test_fail("child: fd %d is not a terminal", fd);
		exit(0);
	}
	test_barrier_wait();
	expect_stdio_shared_with(child);
	test_ready();
	test_wait_sigterm();

	expect_stdio_shared_with(child);
	test_children_verdict(&child, 1, "parent");
	test_pass();
}
