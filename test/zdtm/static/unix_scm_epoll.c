/*
 * An epoll in flight (SCM_RIGHTS) that no fd holds, watching the very socket in whose
 * queue it waits: after restore the task receives the epoll, which still watches the
 * socket (restore registers it once the socket is back at its number).
 */
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SENDER	 110
#define RECEIVER 111

int main(int argc, char **argv)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 }, data[4];
	struct epoll_event ev = { .events = EPOLLIN };
	struct iovec iov = { .iov_base = "ep", .iov_len = 2 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int sk[2], ep;

	test_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || dup2(sk[0], SENDER) != SENDER ||
	    dup2(sk[1], RECEIVER) != RECEIVER)
		test_fail_errno("socketpair");
	close(sk[0]);
	close(sk[1]);
	ep = epoll_create1(0);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, RECEIVER, &ev))
		test_fail_errno("epoll");
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &ep, sizeof(int));
	if (sendmsg(SENDER, &msg, 0) != 2)
		test_fail_errno("sendmsg");
	close(ep);

	test_ready();
	test_wait_sigterm();

	iov.iov_base = data;
	iov.iov_len = sizeof(data);
	msg.msg_controllen = sizeof(control);
	if (recvmsg(RECEIVER, &msg, MSG_DONTWAIT) != 2 || !(c = CMSG_FIRSTHDR(&msg)) ||
	    c->cmsg_type != SCM_RIGHTS)
		test_fail("the epoll in flight is gone");
	memcpy(&ep, CMSG_DATA(c), sizeof(int));
	if (send(SENDER, "x", 1, 0) != 1 || epoll_wait(ep, &ev, 1, 0) != 1)
		test_fail("the epoll no longer watches the socket");
	test_pass();
}
