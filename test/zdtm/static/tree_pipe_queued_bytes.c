/*
 * A pipe between parent and child holding unread bytes comes back as one pipe: the child
 * reads exactly the bytes queued at dump (the head it consumed before gone), then what
 * the parent writes after restore, then EOF once the parent closes its end (no copy of
 * the write end is left anywhere in the tree).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define WRITE_FD  40 /* the parent's end */
#define READ_FD	  41 /* the child's end */
#define PIPE_SIZE (256 << 10)
#define WRITTEN	  100000 /* before dump, seed 21 */
#define CONSUMED  1000	 /* read by the child before dump */
#define LATER	  4096	 /* written by the parent after restore, seed 22 */

static unsigned char queued[WRITTEN], later[LATER];

static void __attribute__((noreturn)) child_main(void)
{
	static unsigned char got[WRITTEN];
	char extra;
	ssize_t n;

	close(WRITE_FD);
	read_exact(READ_FD, got, CONSUMED, "child: head before dump");
	test_barrier_done();
	test_wait_sigterm();

	read_exact(READ_FD, got + CONSUMED, WRITTEN - CONSUMED, "child: bytes queued at dump");
	if (memcmp(got, queued, WRITTEN))
		test_fail("child: the bytes queued at dump differ");
	read_exact(READ_FD, got, LATER, "child: bytes the parent wrote after restore");
	if (memcmp(got, later, LATER))
		test_fail("child: the bytes written after restore differ");
	n = read(READ_FD, &extra, 1);
	if (n != 0)
		test_fail("child: expected EOF after the parent closed its end, read returned %zd "
			  "(%s)",
			  n, n < 0 ? strerror(errno) : "a byte too many");
	exit(0);
}

int main(int argc, char **argv)
{
	int ends[2];
	pid_t child;

	test_init(argc, argv);
	pattern_fill(queued, sizeof(queued), 21);
	pattern_fill(later, sizeof(later), 22);
	if (pipe(ends) || dup2(ends[1], WRITE_FD) != WRITE_FD || dup2(ends[0], READ_FD) != READ_FD)
		test_fail_errno("pipe and dup2");
	close(ends[0]);
	close(ends[1]);
	if (fcntl(WRITE_FD, F_SETPIPE_SZ, PIPE_SIZE) < PIPE_SIZE)
		test_fail_errno("F_SETPIPE_SZ");
	if (write(WRITE_FD, queued, WRITTEN) != WRITTEN)
		test_fail_errno("write");
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	close(READ_FD);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	if (fcntl(WRITE_FD, F_GETPIPE_SZ) != PIPE_SIZE)
		test_fail("parent: pipe size is %d, not %d", fcntl(WRITE_FD, F_GETPIPE_SZ),
			  PIPE_SIZE);
	if (write(WRITE_FD, later, LATER) != LATER)
		test_fail_errno("parent: write after restore");
	close(WRITE_FD);
	test_children_verdict(&child, 1, "parent");
	test_pass();
}
