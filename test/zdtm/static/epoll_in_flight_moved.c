/*
 * An epoll in flight whose watched file is no longer at the number it was registered
 * under (moved with dup2, the old number closed): restore could register it only under
 * that number, so the dump refuses it, and the process runs on with the epoll intact.
 */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SK_SEND 40
#define SK_RECV 41
#define EFD 42
#define EFD_MOVED 50

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 };
	uint64_t one = 1;
	int sk[2], ep, got;

	test_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || dup2(sk[0], SK_SEND) != SK_SEND ||
	    dup2(sk[1], SK_RECV) != SK_RECV || dup2(eventfd(0, 0), EFD) != EFD)
		test_fail_errno("socketpair, eventfd");
	ep = epoll_create1(0);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, EFD, &ev))
		test_fail_errno("epoll");
	test_send_fds(SK_SEND, &ep, 1, "epoll");
	close(ep);
	if (dup2(EFD, EFD_MOVED) != EFD_MOVED || close(EFD))
		test_fail_errno("move the eventfd");

	test_ready();
	test_wait_sigterm();

	if (test_recv_fds(SK_RECV, &got, "epoll") != 1)
		test_fail("the epoll in flight is gone");
	if (write(EFD_MOVED, &one, sizeof(one)) != sizeof(one))
		test_fail_errno("write");
	if (epoll_wait(got, &ev, 1, 0) != 1 || ev.data.u64 != 7)
		test_fail("the epoll no longer reports the eventfd");
	test_pass();
}
