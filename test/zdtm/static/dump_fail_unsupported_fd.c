/*
 * A dump that fails (this process holds a netlink socket, a kind the dumper does not
 * support) leaves the process untouched: it keeps running, its memory, sigmask and the
 * socket itself (the kernel's answer queued in it, unread) are intact.
 */
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define AREA_SIZE (8ul << 20)

int main(int argc, char **argv)
{
	static char queued[8192], received[8192];
	struct {
		struct nlmsghdr nlh;
		struct ifinfomsg ifi;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.ifi = { .ifi_family = AF_UNSPEC, .ifi_index = 1 }, /* lo */
	};
	sigset_t mask_before, mask_after;
	unsigned char *area;
	ssize_t len;
	int nl;

	test_init(argc, argv);

	area = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(area, AREA_SIZE, 140);
	nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (nl < 0)
		test_fail_errno("socket");
	if (send(nl, &req, sizeof(req), 0) != sizeof(req))
		test_fail_errno("ask for the loopback link");
	len = recv(nl, queued, sizeof(queued), MSG_PEEK);
	if (len <= 0)
		test_fail_errno("peek at the answer");
	if (sigprocmask(SIG_BLOCK, NULL, &mask_before))
		test_fail_errno("sigprocmask");

	test_ready();
	test_wait_sigterm();

	pattern_expect(area, AREA_SIZE, 140, "memory after the failed dump");
	if (sigprocmask(SIG_BLOCK, NULL, &mask_after) ||
	    memcmp(&mask_before, &mask_after, sizeof(mask_before)))
		test_fail("the blocked mask changed");
	if (recv(nl, received, sizeof(received), MSG_DONTWAIT) != len ||
	    memcmp(received, queued, len))
		test_fail("the queued answer is gone or changed");
	if (send(nl, &req, sizeof(req), 0) != sizeof(req) ||
	    recv(nl, received, sizeof(received), 0) <= 0)
		test_fail("the netlink socket no longer works");
	test_pass();
}
