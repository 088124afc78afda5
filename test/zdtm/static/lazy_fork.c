/*
 * A task that forks right after a lazy restore: each child but the last reads the whole
 * buffer (faulting on its own copy of the missing pages) and writes a part of it, which
 * the parent, reading the buffer too, must not see; the last child exits at once, before
 * its pages are in.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BUF_SIZE (128ul << 20)
#define NR_CHILDREN 3
#define CHILD_PART (1ul << 20)

static void child_main(unsigned char *buf, int nr)
{
	if (nr == NR_CHILDREN - 1)
		_exit(0);
	pattern_expect(buf, BUF_SIZE, 11, "buffer in a child forked during the lazy restore");
	pattern_fill(buf + nr * CHILD_PART, CHILD_PART, 100 + nr);
	pattern_expect(buf + nr * CHILD_PART, CHILD_PART, 100 + nr, "the child's own writes");
	_exit(0);
}

int main(int argc, char **argv)
{
	pid_t children[NR_CHILDREN];
	unsigned char *buf;
	int i, status;

	test_init(argc, argv);
	buf = test_map_pattern(BUF_SIZE, 11);

	test_ready();
	test_wait_lazy_restore(buf + BUF_SIZE - 1);
	for (i = 0; i < NR_CHILDREN; i++) {
		children[i] = fork();
		if (children[i] < 0)
			test_fail_errno("fork");
		if (children[i] == 0)
			child_main(buf, i);
	}
	pattern_expect(buf, BUF_SIZE, 11, "buffer in the parent while its children run");
	for (i = 0; i < NR_CHILDREN; i++) {
		if (waitpid(children[i], &status, 0) != children[i])
			test_fail_errno("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			test_fail("child %d ended with status %#x", i, status);
	}
	test_wait_sigterm();
	pattern_expect(buf, BUF_SIZE, 11, "buffer after the children");
	test_pass();
}
