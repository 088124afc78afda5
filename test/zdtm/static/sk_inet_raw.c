/*
 * Raw INET sockets: an ICMP one on IPv4 with IP_HDRINCL off, an ICMP type filter that
 * lets only echo replies through, bound to 127.0.0.1; an IPPROTO_RAW one (IP_HDRINCL on by
 * the kernel) with IP_NODEFRAG; a UDP one with IP_HDRINCL set, connected to 127.0.0.2; an
 * ICMPv6 one with an ICMPV6_FILTER, bound to ::1; an IPv6 one of protocol 253 with
 * IPV6_HDRINCL, connected to ::1. After restore each has its addresses, peer and options
 * (read back with getsockopt, filters word for word), and works: an echo request sent on
 * loopback through the IPv4 ICMP socket comes back to it as its reply (the request itself
 * is filtered out), a packet of protocol 253 sent to ::1 arrives at the IPv6 one.
 * $ZDTM_RAW_UPSTREAM (dumped or restored by upstream criu, which keeps neither IP_NODEFRAG
 * nor IPV6_HDRINCL): neither is set.
 * $ZDTM_RAW_UPSTREAM_RESTORE (restored by upstream criu, which binds no raw socket again):
 * the addresses are not compared.
 * $ZDTM_RAW_CHECKSUM: the IPv6 one has IPV6_CHECKSUM at offset 2, which the image has no
 * field for: its dump fails (and the test goes on, checking it as set).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define ICMP4  70 /* IPPROTO_ICMP, 127.0.0.1, filter */
#define RAW4   71 /* IPPROTO_RAW, IP_NODEFRAG */
#define UDP4   72 /* IPPROTO_UDP, IP_HDRINCL, connected to 127.0.0.2 */
#define ICMP6  73 /* IPPROTO_ICMPV6, ::1, filter */
#define PROTO6 74 /* protocol 253, IPV6_HDRINCL, connected to ::1 */
#define NR_FDS 5

#define TEST_PROTO 253
#ifndef SOL_RAW
#define SOL_RAW 255
#endif
#ifndef IP_NODEFRAG
#define IP_NODEFRAG 22
#endif
#ifndef IPV6_HDRINCL
#define IPV6_HDRINCL 36
#endif
#define ICMP_FILTER 1
#define ICMPV6_FILTER 1
#define SOL_ICMPV6 58

/* Bits set: types blocked. Everything but the echo reply (0) on IPv4. */
static const uint32_t icmp_filter = ~(1u << ICMP_ECHOREPLY);
static const uint32_t icmp6_filter[8] = { 0xffffffff, 0x00ff00ff, 0, 0, 0, 0, 0, 0x80000001 };

static bool upstream(void)
{
	return getenv("ZDTM_RAW_UPSTREAM") != NULL;
}

static void set_int(int fd, int level, int name, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		test_fail_errno(what);
}

static void connect_to(int fd, int family, const char *addr)
{
	struct sockaddr_storage ss = { .ss_family = family };
	socklen_t len;

	if (family == AF_INET) {
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
		len = sizeof(struct sockaddr_in);
	} else {
		inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr);
		len = sizeof(struct sockaddr_in6);
	}
	if (connect(fd, (struct sockaddr *)&ss, len))
		test_fail_errno("connect");
}

static void setup(void)
{
	socket_at(AF_INET, SOCK_RAW, IPPROTO_ICMP, ICMP4);
	bind_inet(ICMP4, AF_INET, "127.0.0.1");
	if (setsockopt(ICMP4, SOL_RAW, ICMP_FILTER, &icmp_filter, sizeof(icmp_filter)))
		test_fail_errno("ICMP_FILTER");

	socket_at(AF_INET, SOCK_RAW, IPPROTO_RAW, RAW4);
	if (!upstream())
		set_int(RAW4, SOL_IP, IP_NODEFRAG, 1, "IP_NODEFRAG");

	socket_at(AF_INET, SOCK_RAW, IPPROTO_UDP, UDP4);
	set_int(UDP4, SOL_IP, IP_HDRINCL, 1, "IP_HDRINCL");
	connect_to(UDP4, AF_INET, "127.0.0.2");

	socket_at(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6, ICMP6);
	bind_inet(ICMP6, AF_INET6, "::1");
	if (setsockopt(ICMP6, SOL_ICMPV6, ICMPV6_FILTER, icmp6_filter, sizeof(icmp6_filter)))
		test_fail_errno("ICMPV6_FILTER");

	socket_at(AF_INET6, SOCK_RAW, TEST_PROTO, PROTO6);
	if (!upstream())
		set_int(PROTO6, SOL_IPV6, IPV6_HDRINCL, 1, "IPV6_HDRINCL");
	if (getenv("ZDTM_RAW_CHECKSUM"))
		set_int(PROTO6, SOL_IPV6, IPV6_CHECKSUM, 2, "IPV6_CHECKSUM");
	connect_to(PROTO6, AF_INET6, "::1");
}

struct names {
	struct sockaddr_storage addr[NR_FDS], peer[NR_FDS];
};

static void save_names(struct names *n)
{
	memset(n, 0, sizeof(*n));
	for (int i = 0; i < NR_FDS; i++) {
		socklen_t len = sizeof(n->addr[i]);

		if (getsockname(ICMP4 + i, (struct sockaddr *)&n->addr[i], &len))
			test_fail_errno("getsockname");
		len = sizeof(n->peer[i]);
		if (getpeername(ICMP4 + i, (struct sockaddr *)&n->peer[i], &len) &&
		    errno != ENOTCONN)
			test_fail_errno("getpeername");
	}
}

static const struct int_opt {
	int fd, level, name, val;
	bool ours; /* not kept by upstream criu */
	const char *what;
} int_opts[] = {
	{ ICMP4, SOL_IP, IP_HDRINCL, 0, false, "IP_HDRINCL of ICMP4" },
	{ RAW4, SOL_IP, IP_HDRINCL, 1, false, "IP_HDRINCL of RAW4" },
	{ RAW4, SOL_IP, IP_NODEFRAG, 1, true, "IP_NODEFRAG of RAW4" },
	{ UDP4, SOL_IP, IP_HDRINCL, 1, false, "IP_HDRINCL of UDP4" },
	{ UDP4, SOL_IP, IP_NODEFRAG, 0, false, "IP_NODEFRAG of UDP4" },
	{ PROTO6, SOL_IPV6, IPV6_HDRINCL, 1, true, "IPV6_HDRINCL of PROTO6" },
	{ PROTO6, SOL_IPV6, IPV6_CHECKSUM, -1, false, "IPV6_CHECKSUM of PROTO6" },
};

static void expect_opts(void)
{
	uint32_t f4, f6[8];
	socklen_t len;

	for (size_t i = 0; i < sizeof(int_opts) / sizeof(int_opts[0]); i++) {
		const struct int_opt *o = &int_opts[i];
		int val, want = o->val;

		len = sizeof(val);
		if (o->ours && upstream())
			continue;
		if (o->name == IPV6_CHECKSUM && getenv("ZDTM_RAW_CHECKSUM"))
			want = 2;
		if (getsockopt(o->fd, o->level, o->name, &val, &len))
			test_fail_errno(o->what);
		if (val != want)
			test_fail("%s is %d, not %d", o->what, val, want);
	}
	len = sizeof(f4);
	if (getsockopt(ICMP4, SOL_RAW, ICMP_FILTER, &f4, &len) || f4 != icmp_filter)
		test_fail("the ICMP filter is %#x, not %#x", f4, icmp_filter);
	len = sizeof(f6);
	if (getsockopt(ICMP6, SOL_ICMPV6, ICMPV6_FILTER, f6, &len) || len != sizeof(f6) ||
	    memcmp(f6, icmp6_filter, sizeof(f6)))
		test_fail("the ICMPv6 filter changed");
}

static void expect_packet(int fd, const void *want, size_t skip, size_t size, const char *what)
{
	char buf[256];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, 5000) != 1)
		test_fail("%s: nothing arrived", what);
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n != (ssize_t)(skip + size) || memcmp(buf + skip, want, size))
		test_fail("%s: received %zd bytes, not the %zu expected", what, n, skip + size);
	if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) != -1 || errno != EAGAIN)
		test_fail("%s: a packet more than expected (the filter let it through)", what);
}

/* The internet checksum of an ICMP header without data. */
static uint16_t icmp_checksum(const struct icmphdr *h)
{
	const uint16_t *w = (const uint16_t *)h;
	uint32_t sum = 0;

	for (size_t i = 0; i < sizeof(*h) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	return ~(sum + (sum >> 16));
}

/*
 * An echo request to 127.0.0.1: the filter drops the request that the socket sees coming
 * in, the reply arrives (after its 20-byte IP header).
 */
static void expect_echo(void)
{
	struct icmphdr req = { .type = ICMP_ECHO, .un.echo.id = htons(0x4242),
			       .un.echo.sequence = htons(7) };
	struct icmphdr reply = req;
	struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	req.checksum = icmp_checksum(&req);
	if (sendto(ICMP4, &req, sizeof(req), 0, (struct sockaddr *)&lo, sizeof(lo)) != sizeof(req))
		test_fail_errno("sendto ICMP4");
	reply.type = ICMP_ECHOREPLY;
	reply.checksum = icmp_checksum(&reply);
	expect_packet(ICMP4, &reply, 20, sizeof(reply), "echo reply");
}

/* A packet of TEST_PROTO to ::1 through a new socket arrives at PROTO6 (no header on IPv6). */
static void expect_proto6(void)
{
	static const char payload[] = "raw six";
	struct sockaddr_in6 lo = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_RAW, TEST_PROTO);

	if (fd < 0 || sendto(fd, payload, sizeof(payload), 0, (struct sockaddr *)&lo,
			     sizeof(lo)) != sizeof(payload))
		test_fail_errno("sendto ::1");
	close(fd);
	expect_packet(PROTO6, payload, 0, sizeof(payload), "protocol 253 packet");
}

/* An address as hex bytes, for a failure's message (two at a time). */
static const char *show(const struct sockaddr_storage *ss)
{
	static char buf[2][2 * sizeof(struct sockaddr_in6) + 1];
	static int which;
	char *out = buf[which ^= 1];

	for (size_t i = 0; i < sizeof(struct sockaddr_in6); i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)ss)[i]);
	return out;
}

int main(int argc, char **argv)
{
	struct names before, after;

	test_init(argc, argv);
	setup();
	save_names(&before);

	test_ready();
	test_wait_sigterm();

	save_names(&after);
	for (int i = 0; i < NR_FDS; i++)
		if (!getenv("ZDTM_RAW_UPSTREAM_RESTORE") &&
		    (memcmp(&before.addr[i], &after.addr[i], sizeof(after.addr[i])) ||
		     memcmp(&before.peer[i], &after.peer[i], sizeof(after.peer[i]))))
			test_fail("fd %d: its address or peer changed (address %s, was %s)", ICMP4 + i,
				  show(&after.addr[i]), show(&before.addr[i]));
	expect_opts();
	expect_echo();
	/* A checksum offset makes the kernel drop the packet: its checksum is not computed. */
	if (!getenv("ZDTM_RAW_CHECKSUM"))
		expect_proto6();
	test_pass();
}
