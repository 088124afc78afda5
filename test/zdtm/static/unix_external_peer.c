/*
 * A dump that must be refused: the process holds one end of a stream socketpair whose
 * other end is held by W, a live process outside the dumped tree (forked by a child that
 * exited: W went to the runner, a subreaper). The dump fails naming the socket; the
 * process runs on, the data queued both ways is intact and the pair still works.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define OURS 80

/* W: echoes every byte back, then a queued greeting; exits at the end of the stream. */
static void __attribute__((noreturn)) run_w(int sk)
{
	char byte;

	while (read(sk, &byte, 1) == 1)
		if (write(sk, &byte, 1) != 1)
			break;
	_exit(0);
}

static pid_t fork_outside_peer(int sk)
{
	int report[2], status;
	pid_t q, w;

	if (pipe(report))
		test_fail_errno("pipe");
	q = fork();
	if (q < 0)
		test_fail_errno("fork Q");
	if (q == 0) {
		w = fork();
		if (w == 0) {
			close(OURS);
			run_w(sk);
		}
		if (w < 0 || write(report[1], &w, sizeof(w)) != sizeof(w))
			_exit(1);
		_exit(0);
	}
	if (waitpid(q, &status, 0) != q || status)
		test_fail("Q did not exit cleanly (status %#x)", status);
	if (read(report[0], &w, sizeof(w)) != sizeof(w))
		test_fail_errno("read W's pid");
	close(report[0]);
	close(report[1]);
	return w;
}

/* W is the runner's child: once it exited, the runner reaps it. */
static void wait_exited(pid_t w)
{
	char path[32], stat[1024], *state;
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", w);
	for (;;) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return;
		len = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (len <= 0)
			return;
		stat[len] = '\0';
		state = strrchr(stat, ')');
		if (state && state[1] == ' ' && state[2] == 'Z')
			return;
		sched_yield();
	}
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
	w = fork_outside_peer(sk[1]);
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
	wait_exited(w);
	test_pass();
}
