/*
 * Socketpairs shared across a process tree: a stream pair with one end in the parent and
 * the other in the child, a datagram pair whose ends both tasks hold, a seqpacket pair
 * made by the child alone. Each comes back connected across the tasks, with the data
 * queued in both directions, and still works.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STREAM_PARENT 40
#define STREAM_CHILD  41
#define DGRAM_X	      42 /* both ends in both tasks */
#define DGRAM_Y	      43
#define SEQ_A	      44 /* the child's own pair */
#define SEQ_B	      45
#define TO_CHILD      3000 /* seed 50 */
#define TO_PARENT     2000 /* seed 51 */
#define NR_DGRAMS     8

static unsigned char to_child[TO_CHILD], to_parent[TO_PARENT];

static void make_pair(int type, int a, int b)
{
	int sk[2];

	if (socketpair(AF_UNIX, type, 0, sk) || dup2(sk[0], a) != a || dup2(sk[1], b) != b)
		test_fail_errno("socketpair");
	close(sk[0]);
	close(sk[1]);
}

static void send_dgrams(int fd, int seed)
{
	unsigned char buf[100];

	for (int i = 0; i < NR_DGRAMS; i++) {
		pattern_fill(buf, 10 + i, seed + i);
		if (send(fd, buf, 10 + i, 0) != 10 + i)
			test_fail_errno("send a datagram");
	}
}

static void expect_dgrams(int fd, int seed, const char *who)
{
	unsigned char want[100], got[100];

	for (int i = 0; i < NR_DGRAMS; i++) {
		ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);

		pattern_fill(want, 10 + i, seed + i);
		if (n != 10 + i || memcmp(got, want, n))
			test_fail("%s: datagram %d: %zd bytes (%s)", who, i, n,
				  n < 0 ? strerror(errno) : "other bytes");
	}
}

static void expect_bytes(int fd, const unsigned char *want, size_t len, const char *who)
{
	static unsigned char got[TO_CHILD];

	read_exact(fd, got, len, who);
	if (memcmp(got, want, len))
		test_fail("%s: other bytes", who);
}

static void __attribute__((noreturn)) child_main(void)
{
	unsigned char c = 'c';

	close(STREAM_PARENT);
	if (write(STREAM_CHILD, to_parent, TO_PARENT) != TO_PARENT)
		test_fail_errno("child: write");
	make_pair(SOCK_SEQPACKET, SEQ_A, SEQ_B);
	send_dgrams(SEQ_A, 70);
	send_dgrams(SEQ_B, 80);
	test_barrier_done();
	test_wait_sigterm();

	expect_bytes(STREAM_CHILD, to_child, TO_CHILD, "child: stream from the parent");
	expect_dgrams(DGRAM_Y, 60, "child: datagrams X -> Y");
	expect_dgrams(SEQ_B, 70, "child: seqpacket A -> B");
	expect_dgrams(SEQ_A, 80, "child: seqpacket B -> A");
	if (write(STREAM_CHILD, &c, 1) != 1)
		test_fail_errno("child: write after restore");
	exit(0);
}

int main(int argc, char **argv)
{
	unsigned char c;
	pid_t child;

	test_init(argc, argv);
	pattern_fill(to_child, sizeof(to_child), 50);
	pattern_fill(to_parent, sizeof(to_parent), 51);
	make_pair(SOCK_STREAM, STREAM_PARENT, STREAM_CHILD);
	make_pair(SOCK_DGRAM, DGRAM_X, DGRAM_Y);
	if (write(STREAM_PARENT, to_child, TO_CHILD) != TO_CHILD)
		test_fail_errno("write");
	send_dgrams(DGRAM_X, 60);
	send_dgrams(DGRAM_Y, 65);
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	close(STREAM_CHILD);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	expect_bytes(STREAM_PARENT, to_parent, TO_PARENT, "parent: stream from the child");
	expect_dgrams(DGRAM_X, 65, "parent: datagrams Y -> X");
	test_children_verdict(&child, 1, "parent");
	if (read(STREAM_PARENT, &c, 1) != 1 || c != 'c')
		test_fail("parent: the child's byte after restore did not arrive");
	test_pass();
}
