/*
 * Netlink sockets come back with their protocol, port id, groups and peer: a route socket
 * bound to a port id of its own with a group from bind() and one past 32 from
 * NETLINK_ADD_MEMBERSHIP, an autobound one connect()ed to the first (what it sends there
 * arrives), and a never-bound uevent socket with O_NONBLOCK and a receive buffer set. One
 * description is shared with a child, which checks it too.
 * With ZDTM_NETLINK_UPSTREAM set (cross tests) no group past 32 is joined: upstream criu
 * refuses those.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BOUND_FD     40 /* NETLINK_ROUTE, bound, groups 1 and HIGH_GROUP; shared */
#define CONNECTED_FD 41 /* NETLINK_ROUTE, connected to BOUND_FD's port */
#define PLAIN_FD     42 /* NETLINK_KOBJECT_UEVENT, never bound, O_NONBLOCK */
#define HIGH_GROUP   33
#define RCVBUF	     65536
#define MESSAGE	     "zdtm netlink"

static uint32_t bound_port, high_groups = 1u << (HIGH_GROUP - 33);

static struct sockaddr_nl address(int fd, bool peer)
{
	struct sockaddr_nl addr = {};
	socklen_t len = sizeof(addr);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&addr, &len))
		test_fail_errno("getsockname/getpeername");
	return addr;
}

static int int_opt(int fd, int level, int opt)
{
	int val = 0;
	socklen_t len = sizeof(val);

	if (getsockopt(fd, level, opt, &val, &len))
		test_fail_errno("getsockopt");
	return val;
}

static void expect_bound(const char *who)
{
	struct sockaddr_nl own = address(BOUND_FD, false);
	uint32_t groups[8] = {};
	socklen_t len = sizeof(groups);

	if (own.nl_pid != bound_port || own.nl_groups != RTMGRP_LINK)
		test_fail("%s: bound socket: port %u groups %#x, expected %u %#x", who, own.nl_pid,
			  own.nl_groups, bound_port, RTMGRP_LINK);
	if (getsockopt(BOUND_FD, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, groups, &len))
		test_fail_errno("NETLINK_LIST_MEMBERSHIPS");
	if (groups[0] != RTMGRP_LINK || groups[1] != high_groups)
		test_fail("%s: bound socket: groups %#x %#x", who, groups[0], groups[1]);
	if (int_opt(BOUND_FD, SOL_SOCKET, SO_PROTOCOL) != NETLINK_ROUTE)
		test_fail("%s: bound socket: protocol changed", who);
}

static void child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	expect_bound("child");
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK };
	int group = HIGH_GROUP, rcvbuf = RCVBUF;
	char buf[64];
	uint32_t autobound;
	pid_t child;

	test_init(argc, argv);
	socket_at(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, BOUND_FD);
	bound_port = 0x7a000000 | getpid();
	addr.nl_pid = bound_port;
	addr.nl_groups = RTMGRP_LINK;
	if (getenv("ZDTM_NETLINK_UPSTREAM"))
		high_groups = 0;
	if (bind(BOUND_FD, (struct sockaddr *)&addr, sizeof(addr)) ||
	    (high_groups &&
	     setsockopt(BOUND_FD, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group))))
		test_fail_errno("bind and join");
	socket_at(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, CONNECTED_FD);
	addr.nl_groups = 0;
	if (connect(CONNECTED_FD, (struct sockaddr *)&addr, sizeof(addr)))
		test_fail_errno("connect");
	autobound = address(CONNECTED_FD, false).nl_pid;
	socket_at(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, PLAIN_FD);
	if (fcntl(PLAIN_FD, F_SETFL, O_NONBLOCK) ||
	    setsockopt(PLAIN_FD, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)))
		test_fail_errno("O_NONBLOCK, SO_RCVBUF");
	rcvbuf = int_opt(PLAIN_FD, SOL_SOCKET, SO_RCVBUF);
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	test_children_verdict(&child, 1, "parent");
	expect_bound("parent");
	if (address(CONNECTED_FD, false).nl_pid != autobound ||
	    address(CONNECTED_FD, true).nl_pid != bound_port)
		test_fail("connected socket: port %u peer %u, expected %u %u",
			  address(CONNECTED_FD, false).nl_pid, address(CONNECTED_FD, true).nl_pid,
			  autobound, bound_port);
	if (send(CONNECTED_FD, MESSAGE, sizeof(MESSAGE), 0) != sizeof(MESSAGE) ||
	    recv(BOUND_FD, buf, sizeof(buf), MSG_DONTWAIT) != sizeof(MESSAGE) ||
	    memcmp(buf, MESSAGE, sizeof(MESSAGE)))
		test_fail("what the connected socket sent did not reach its peer: %s",
			  strerror(errno));
	if (address(PLAIN_FD, false).nl_pid || address(PLAIN_FD, true).nl_pid ||
	    int_opt(PLAIN_FD, SOL_SOCKET, SO_PROTOCOL) != NETLINK_KOBJECT_UEVENT)
		test_fail("plain socket: bound, connected or another protocol");
	if (!(fcntl(PLAIN_FD, F_GETFL) & O_NONBLOCK) ||
	    int_opt(PLAIN_FD, SOL_SOCKET, SO_RCVBUF) != rcvbuf)
		test_fail("plain socket: O_NONBLOCK or SO_RCVBUF %d lost", rcvbuf);
	test_pass();
}
