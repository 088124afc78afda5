/*
 * A child made with CLONE_FILES shares its parent's fd table, which restore cannot give
 * back: the dump is refused and both keep running, still sharing it (an fd the child
 * opens is the parent's too).
 */
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SHARED_FD 77

static char child_stack[64 << 10] __attribute__((aligned(16)));
static int to_child[2];

static int child_main(void *arg)
{
	char cmd;

	(void)arg;
	/* One command after the failed dump: open SHARED_FD, which the parent then sees. */
	if (read(to_child[0], &cmd, 1) != 1 || dup2(to_child[0], SHARED_FD) != SHARED_FD)
		_exit(1);
	_exit(0);
}

int main(int argc, char **argv)
{
	int status;
	pid_t child;

	test_init(argc, argv);
	if (pipe(to_child))
		test_fail_errno("pipe");
	child = clone(child_main, child_stack + sizeof(child_stack), CLONE_FILES | SIGCHLD, NULL);
	if (child < 0)
		test_fail_errno("clone(CLONE_FILES)");
	test_ready();
	test_wait_sigterm();

	if (write(to_child[1], "o", 1) != 1 || waitpid(child, &status, 0) != child)
		test_fail_errno("the child after the failed dump");
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("the child failed: status %#x", status);
	if (fcntl(SHARED_FD, F_GETFD) < 0)
		test_fail("fd %d the child opened is not in the shared table", SHARED_FD);
	test_pass();
}
