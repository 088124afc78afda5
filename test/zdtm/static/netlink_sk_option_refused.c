/*
 * A netlink socket with NETLINK_PKTINFO on (an option the image cannot carry) is refused
 * at dump, and the test runs on with its socket as it was.
 */
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SK_FD 40

int main(int argc, char **argv)
{
	int on = 1, val = 0, fd;
	socklen_t len = sizeof(val);

	test_init(argc, argv);
	fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (fd < 0 || dup2(fd, SK_FD) != SK_FD)
		test_fail_errno("netlink socket");
	close(fd);
	if (setsockopt(SK_FD, SOL_NETLINK, NETLINK_PKTINFO, &on, sizeof(on)))
		test_fail_errno("NETLINK_PKTINFO");

	test_ready();
	test_wait_sigterm();

	if (getsockopt(SK_FD, SOL_NETLINK, NETLINK_PKTINFO, &val, &len) || !val)
		test_fail("NETLINK_PKTINFO is off after the failed dump");
	test_pass();
}
