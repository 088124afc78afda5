/*
 * Files in flight (SCM_RIGHTS) come back in the queues with their data: a pipe's read
 * end that no fd holds any more (its bytes still in the pipe), and a file the process
 * also holds, in a datagram socketpair; a socket of another pair, in a stream whose
 * sender is closed. Received after restore, each is the same description as before:
 * the pipe gives its bytes, the file shares its offset with the process's own fd, the
 * socket is still connected to its peer. And sockets in flight in their own pair: one
 * the process still holds, and one whose only reference is in flight (left out when
 * ZDTM_UNIX_UPSTREAM_RESTORE is in the environment: upstream criu's restore fails on it,
 * on its own dump too).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define DG_SENDER   100
#define DG_RECEIVER 101
#define ST_RECEIVER 102 /* its sender is closed */
#define PIPE_WRITE  103 /* the pipe's read end is in flight only */
#define FILE_FD	    104 /* also in flight, in the same message */
#define PAIR_KEPT   105 /* the other end of this pair is in flight */
#define SELF_A	    106 /* in flight in SELF_B's queue, which it sent */
#define SELF_B	    107
#define ALONE_PEER  108 /* its peer is in flight in its own queue only */
#define PIPE_BYTES  "queued in the pipe"

static void place(int fd, int at)
{
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("dup2");
	close(fd);
}

static void setup(void)
{
	int dg[2], st[2], p[2], pair[2], fds[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) || socketpair(AF_UNIX, SOCK_STREAM, 0, st) ||
	    pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, pair))
		test_fail_errno("socketpair and pipe");
	place(dg[0], DG_SENDER);
	place(dg[1], DG_RECEIVER);
	place(st[1], ST_RECEIVER);
	place(p[1], PIPE_WRITE);
	place(pair[0], PAIR_KEPT);
	place(open("in-flight.file", O_RDWR | O_CREAT | O_TRUNC, 0600), FILE_FD);
	if (write(PIPE_WRITE, PIPE_BYTES, strlen(PIPE_BYTES)) != strlen(PIPE_BYTES) ||
	    write(FILE_FD, "0123456789", 10) != 10)
		test_fail_errno("write");

	fds[0] = p[0];
	fds[1] = FILE_FD;
	test_send_fds(DG_SENDER, fds, 2, "pipe and file");
	close(p[0]);
	test_send_fds(st[0], &pair[1], 1, "a socket");
	close(pair[1]);
	if (send(PAIR_KEPT, "to the socket in flight", 23, 0) != 23)
		test_fail_errno("send");
	close(st[0]);

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair))
		test_fail_errno("socketpair");
	place(pair[0], SELF_A);
	place(pair[1], SELF_B);
	fds[0] = SELF_A;
	test_send_fds(SELF_A, fds, 1, "myself");
	if (getenv("ZDTM_UNIX_UPSTREAM_RESTORE"))
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair))
		test_fail_errno("socketpair");
	place(pair[1], ALONE_PEER);
	test_send_fds(pair[0], &pair[0], 1, "alone");
	close(pair[0]);
}

static void expect_same_file(int a, int b, const char *what)
{
	struct stat sa, sb;

	if (fstat(a, &sa) || fstat(b, &sb) || sa.st_ino != sb.st_ino)
		test_fail("%s: fd %d is not the same socket as fd %d", what, a, b);
}

static void check(void)
{
	char got[32];
	int fds[2];

	if (test_recv_fds(DG_RECEIVER, fds, "pipe and file") != 2)
		test_fail("not two files in flight with the datagram");
	read_exact(fds[0], got, strlen(PIPE_BYTES), "the pipe in flight");
	if (memcmp(got, PIPE_BYTES, strlen(PIPE_BYTES)))
		test_fail("the pipe in flight gave other bytes");
	if (write(PIPE_WRITE, "x", 1) != 1 || read(fds[0], got, 1) != 1 || got[0] != 'x')
		test_fail("the pipe in flight is not the process's pipe");
	if (lseek(fds[1], 0, SEEK_CUR) != 10 || lseek(FILE_FD, 3, SEEK_SET) != 3 ||
	    lseek(fds[1], 0, SEEK_CUR) != 3)
		test_fail("the file in flight does not share its offset with fd %d", FILE_FD);

	if (test_recv_fds(ST_RECEIVER, fds, "a socket") != 1)
		test_fail("not one file in flight with the stream");
	read_exact(fds[0], got, 23, "the socket in flight");
	if (memcmp(got, "to the socket in flight", 23))
		test_fail("the socket in flight received other bytes");
	if (write(fds[0], "y", 1) != 1 || read(PAIR_KEPT, got, 1) != 1 || got[0] != 'y')
		test_fail("the socket in flight is no longer connected to its peer");
	if (read(ST_RECEIVER, got, 1) != 0)
		test_fail("the stream whose sender closed does not end");

	if (test_recv_fds(SELF_B, fds, "myself") != 1)
		test_fail("not one file in flight with 'myself'");
	expect_same_file(fds[0], SELF_A, "the socket sent over itself");
	if (getenv("ZDTM_UNIX_UPSTREAM_RESTORE"))
		return;
	if (test_recv_fds(ALONE_PEER, fds, "alone") != 1)
		test_fail("not one file in flight with 'alone'");
	if (write(fds[0], "z", 1) != 1 || read(ALONE_PEER, got, 1) != 1 || got[0] != 'z')
		test_fail("the socket whose only reference was in flight is not its peer's");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	setup();

	test_ready();
	test_wait_sigterm();

	check();
	test_pass();
}
