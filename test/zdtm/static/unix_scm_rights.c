/*
 * A dump that must be refused: a file is in flight in a socket's queue (SCM_RIGHTS). The
 * dump fails naming the socket; the process runs on and receives the file, still open on
 * what was sent, with the bytes sent along.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SENDER	 83
#define RECEIVER 84

static void send_fd(int sk, int fd)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = "fd", .iov_len = 2 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sk, &msg, 0) != 2)
		test_fail_errno("sendmsg");
}

static int recv_fd(int sk)
{
	char control[CMSG_SPACE(sizeof(int))], data[4];
	struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sk, &msg, MSG_DONTWAIT) != 2 || memcmp(data, "fd", 2))
		test_fail("the message with the file is gone");
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		test_fail("the file in flight is gone");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

int main(int argc, char **argv)
{
	struct stat want, got;
	int sk[2], fd;

	test_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || dup2(sk[0], SENDER) != SENDER ||
	    dup2(sk[1], RECEIVER) != RECEIVER)
		test_fail_errno("socketpair");
	close(sk[0]);
	close(sk[1]);
	fd = open("/dev/null", 0);
	if (fd < 0 || fstat(fd, &want))
		test_fail_errno("open /dev/null");
	send_fd(SENDER, fd);
	close(fd);

	test_ready();
	test_wait_sigterm();

	fd = recv_fd(RECEIVER);
	if (fstat(fd, &got) || got.st_ino != want.st_ino || got.st_rdev != want.st_rdev)
		test_fail("the file received is not the one sent");
	test_pass();
}
