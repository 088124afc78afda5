/*
 * Datagram INET sockets: a UDP server bound on IPv4 loopback with SO_BROADCAST and a
 * classic BPF filter that lets only datagrams starting with 'A' through, a UDP client
 * connected to it, a UDP-Lite socket on IPv6 connected to itself and shut down for
 * writing, ICMP ping sockets on IPv4 (bound, connected) and IPv6, an unbound UDP socket.
 * $ZDTM_INET_UPSTREAM (dumped or restored by upstream criu, which keeps only the peers
 * with a port and, restoring, does not give a ping socket its address back): the IPv4
 * ping socket is neither bound nor connected.
 * $ZDTM_INET_USERNS: in pid, net and user namespaces of its own, the ping sockets made for
 * a gid of the namespace's ping_group_range.
 * Each comes back with its addresses, peer, options (TTLs and TOS too) and shutdown state,
 * and works; the filter still filters. Queued datagrams are not restored (as CRIU): none is queued at dump.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif

#define SERVER	70 /* UDP 127.0.0.1, filtered, SO_BROADCAST */
#define CLIENT	71 /* UDP connected to SERVER */
#define LITE	72 /* UDP-Lite ::1, connected to itself, SHUT_WR */
#define PING4	73 /* ICMP 127.0.0.1, identifier bound, connected to 127.0.0.1 */
#define PING6	74 /* ICMPv6, unbound */
#define UNBOUND 75

/* Accepts datagrams whose first byte is 'A' (after the 8 bytes of UDP header), drops the others. */
static struct sock_filter filter[] = {
	{ BPF_LD | BPF_B | BPF_ABS, 0, 0, 8 },
	{ BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 'A' },
	{ BPF_RET | BPF_K, 0, 0, 0xffff },
	{ BPF_RET | BPF_K, 0, 0, 0 },
};

static socklen_t addr_of(int fd, bool peer, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	memset(ss, 0, sizeof(*ss));
	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)ss, &len))
		test_fail_errno(peer ? "getpeername" : "getsockname");
	return len;
}

static void connect_to_name_of(int fd, int target)
{
	struct sockaddr_storage ss;
	socklen_t len = addr_of(target, false, &ss);

	if (connect(fd, (struct sockaddr *)&ss, len))
		test_fail_errno("connect");
}

static void setup(void)
{
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
	int one = 1;

	/* Ping sockets are for the groups in this range; root's group 0 included. */
	write_file("/proc/sys/net/ipv4/ping_group_range", "0 0", 3);

	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, SERVER);
	bind_inet(SERVER, AF_INET, "127.0.0.1");
	if (setsockopt(SERVER, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    setsockopt(SERVER, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)))
		test_fail_errno("setsockopt");
	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, CLIENT);
	connect_to_name_of(CLIENT, SERVER);

	socket_at(AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE, LITE);
	bind_inet(LITE, AF_INET6, "::1");
	connect_to_name_of(LITE, LITE);
	if (shutdown(LITE, SHUT_WR))
		test_fail_errno("shutdown");

	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_ICMP, PING4);
	if (!getenv("ZDTM_INET_UPSTREAM")) {
		bind_inet(PING4, AF_INET, "127.0.0.1");
		connect_to_name_of(PING4, SERVER); /* its address: 127.0.0.1 */
	}
	socket_at(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6, PING6);
	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, UNBOUND);
}

struct names {
	struct sockaddr_storage addr[6], peer[6];
};

static void save_names(struct names *n)
{
	memset(n, 0, sizeof(*n));
	for (int i = 0; i < 6; i++) {
		addr_of(SERVER + i, false, &n->addr[i]);
		if (SERVER + i == CLIENT || SERVER + i == LITE ||
		    (SERVER + i == PING4 && !getenv("ZDTM_INET_UPSTREAM")))
			addr_of(SERVER + i, true, &n->peer[i]);
	}
}

static void expect_recv(int fd, const char *want)
{
	char buf[32];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (want && (n != (ssize_t)strlen(want) || memcmp(buf, want, n)))
		test_fail("fd %d: received %zd bytes, expected '%s'", fd, n, want);
	if (!want && (n != -1 || errno != EAGAIN))
		test_fail("fd %d: received %zd bytes, expected none", fd, n);
}

/* An echo request from the ping socket comes back as its reply, with its identifier. */
static void expect_ping(void)
{
	struct icmphdr req = { .type = ICMP_ECHO, .un.echo.sequence = htons(7) };
	struct icmphdr reply;
	struct pollfd pfd = { .fd = PING4, .events = POLLIN };

	struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	if (sendto(PING4, &req, sizeof(req), 0, (struct sockaddr *)&lo, sizeof(lo)) != sizeof(req))
		test_fail_errno("ping");
	if (poll(&pfd, 1, 5000) != 1 || recv(PING4, &reply, sizeof(reply), 0) != sizeof(reply) ||
	    reply.type != ICMP_ECHOREPLY || reply.un.echo.sequence != htons(7))
		test_fail("no echo reply to the restored ping socket");
}

/*
 * What the packets carry, set on some sockets: IP_TTL and IP_TOS on IPv4, their IPv6 ones
 * (upstream criu keeps only the IPv4 ones); an unset TTL reads as the default, 64.
 */
static const struct packet_opt {
	int fd, level, name, val;
	bool v6;
	const char *what;
} packet_opts[] = {
	{ SERVER, SOL_IP, IP_TTL, 17, false, "IP_TTL" },
	{ CLIENT, SOL_IP, IP_TOS, 0x10, false, "IP_TOS" },
	{ CLIENT, SOL_IP, IP_TTL, 64, false, "IP_TTL (unset)" },
	{ LITE, SOL_IPV6, IPV6_UNICAST_HOPS, 9, true, "IPV6_UNICAST_HOPS" },
	{ LITE, SOL_IPV6, IPV6_TCLASS, 0x20, true, "IPV6_TCLASS" },
};

static bool packet_opt_used(const struct packet_opt *o)
{
	return !o->v6 || !getenv("ZDTM_INET_UPSTREAM");
}

static void set_packet_opts(void)
{
	for (size_t i = 0; i < sizeof(packet_opts) / sizeof(packet_opts[0]); i++) {
		const struct packet_opt *o = &packet_opts[i];

		if (packet_opt_used(o) && o->val != 64 &&
		    setsockopt(o->fd, o->level, o->name, &o->val, sizeof(o->val)))
			test_fail_errno(o->what);
	}
}

static void expect_packet_opts(void)
{
	for (size_t i = 0; i < sizeof(packet_opts) / sizeof(packet_opts[0]); i++) {
		const struct packet_opt *o = &packet_opts[i];
		int val;
		socklen_t len = sizeof(val);

		if (!packet_opt_used(o))
			continue;
		if (getsockopt(o->fd, o->level, o->name, &val, &len))
			test_fail_errno(o->what);
		if (val != o->val)
			test_fail("fd %d: %s is %d, not %d", o->fd, o->what, val, o->val);
	}
}

static void check(const struct names *before)
{
	struct names after;
	int val;
	socklen_t len = sizeof(val);

	save_names(&after);
	for (int i = 0; i < 6; i++)
		if (memcmp(&before->addr[i], &after.addr[i], sizeof(after.addr[i])) ||
		    memcmp(&before->peer[i], &after.peer[i], sizeof(after.peer[i])))
			test_fail("fd %d: its address or peer changed", SERVER + i);
	if (getsockopt(SERVER, SOL_SOCKET, SO_BROADCAST, &val, &len) || val != 1)
		test_fail("SO_BROADCAST is off");
	if (send(LITE, "x", 1, MSG_DONTWAIT) != -1 || errno != EPIPE)
		test_fail("the UDP-Lite socket sends: it was shut down for writing");
	expect_packet_opts();

	if (send(CLIENT, "Bad", 3, 0) != 3 || send(CLIENT, "All", 3, 0) != 3)
		test_fail_errno("send");
	usleep(10000);
	expect_recv(SERVER, "All"); /* "Bad" filtered out */
	expect_recv(SERVER, NULL);
	expect_ping();
}

int main(int argc, char **argv)
{
	struct names before;

	test_init(argc, argv);
	if (getenv("ZDTM_INET_USERNS"))
		test_launch_netns_root(true);
	setup();
	set_packet_opts();
	save_names(&before);

	test_ready();
	test_wait_sigterm();

	check(&before);
	test_pass();
}
