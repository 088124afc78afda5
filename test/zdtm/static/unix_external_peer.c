/*
 * A dump that must be refused: the process holds one end of a stream socketpair whose
 * other end is held by W, a live process outside the dumped tree (forked by a child that
 * exited: W went to the runner, a subreaper). The dump fails naming the socket; the
 * process runs on, the data queued both ways is intact and the pair still works.
 */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define OURS 80

/* W: echoes every byte back; exits at the end of the stream. */
static void run_w(int ready, void *arg)
{
	int sk = *(int *)arg;
	char byte;

	close(OURS);
	if (write(ready, "r", 1) != 1)
		_exit(1);
	while (read(sk, &byte, 1) == 1)
		if (write(sk, &byte, 1) != 1)
			break;
	_exit(0);
}

int main(int argc, char **argv)
{
	char got[8];
	int sk[2];
	pid_t w;

	test_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sk) || dup2(sk[0], OURS) != OURS)
		test_fail_errno("socketpair");
	close(sk[0]);
	w = test_fork_outside(run_w, &sk[1]);
	close(sk[1]);
	/* Queued both ways at the dump: W's echo of "ab" waits in ours. */
	if (write(OURS, "ab", 2) != 2)
		test_fail_errno("write");
	read_exact(OURS, got, 1, "the first echo");

	test_ready();
	test_wait_sigterm();

	read_exact(OURS, got + 1, 1, "the echo queued at the dump");
	if (write(OURS, "c", 1) != 1)
		test_fail_errno("write after the failed dump");
	read_exact(OURS, got + 2, 1, "the echo after the failed dump");
	if (memcmp(got, "abc", 3))
		test_fail("the echoes are '%.3s', not 'abc'", got);
	close(OURS);
	test_wait_outside_exited(w);
	test_pass();
}
