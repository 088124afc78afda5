/*
 * Options that give recvmsg() ancillary data and that CRIU's images have no field for
 * (this criu keeps them in inetsk-ext.img): a UDP socket on 127.0.0.1 with IP_RECVTTL,
 * IP_RECVTOS, IP_RECVORIGDSTADDR, IP_RECVERR, IP_RECVOPTS, IP_RECVFRAGSIZE, and a
 * dual-stack UDP one on [::] with IPV6_RECVHOPLIMIT, IPV6_RECVTCLASS, IPV6_RECVORIGDSTADDR,
 * IPV6_RECVERR, IPV6_RECVPATHMTU, and the IPv4 IP_PKTINFO and IP_RECVTTL (for its
 * IPv4-mapped datagrams); the socket's own SO_TIMESTAMPNS on the first, SO_TIMESTAMP_NEW
 * and SO_RXQ_OVFL on the second; and a listening TCP socket with IP_RECVERR and SO_TIMESTAMP
 * (set on the restored socket before it listens again). After restore each reads back as set, and recvmsg() gives
 * each datagram its TTL, TOS, destination and timestamp (hop limit, traffic class,
 * destination and timestamp; packet info and TTL of an IPv4 one), and a datagram sent to a
 * closed port queues the ICMP error (port unreachable) that recvmsg(MSG_ERRQUEUE) reads with
 * its IP_RECVERR (IPV6_RECVERR).
 * $ZDTM_RECV_OPTS_LOST: restored (or dumped) by CRIU, which loses them: each reads back as
 * off, the datagrams still arrive, without those control messages.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define UDP4 80 /* UDP, 127.0.0.1:P */
#define UDP6 81 /* UDP, [::]:P, dual-stack */
#define TCP4 82 /* TCP, 127.0.0.1:P, listening */

/* What the senders set, for the receivers' control messages to carry. */
#define SENT_TTL 33
#define SENT_TOS 0x20

static const struct opt {
	int fd, level, name;
	const char *what;
} opts[] = {
	{ UDP4, SOL_IP, IP_RECVTTL, "IP_RECVTTL of UDP4" },
	{ UDP4, SOL_IP, IP_RECVTOS, "IP_RECVTOS of UDP4" },
	{ UDP4, SOL_IP, IP_RECVORIGDSTADDR, "IP_RECVORIGDSTADDR of UDP4" },
	{ UDP4, SOL_IP, IP_RECVERR, "IP_RECVERR of UDP4" },
	{ UDP4, SOL_IP, IP_RECVOPTS, "IP_RECVOPTS of UDP4" },
	{ UDP4, SOL_IP, IP_RECVFRAGSIZE, "IP_RECVFRAGSIZE of UDP4" },
	{ UDP4, SOL_SOCKET, SO_TIMESTAMPNS_OLD, "SO_TIMESTAMPNS of UDP4" },
	{ UDP6, SOL_IPV6, IPV6_RECVHOPLIMIT, "IPV6_RECVHOPLIMIT of UDP6" },
	{ UDP6, SOL_IPV6, IPV6_RECVTCLASS, "IPV6_RECVTCLASS of UDP6" },
	{ UDP6, SOL_IPV6, IPV6_RECVORIGDSTADDR, "IPV6_RECVORIGDSTADDR of UDP6" },
	{ UDP6, SOL_IPV6, IPV6_RECVERR, "IPV6_RECVERR of UDP6" },
	{ UDP6, SOL_IPV6, IPV6_RECVPATHMTU, "IPV6_RECVPATHMTU of UDP6" },
	{ UDP6, SOL_IP, IP_PKTINFO, "IP_PKTINFO of UDP6" },
	{ UDP6, SOL_IP, IP_RECVTTL, "IP_RECVTTL of UDP6" },
	{ UDP6, SOL_SOCKET, SO_TIMESTAMP_NEW, "SO_TIMESTAMP_NEW of UDP6" },
	{ UDP6, SOL_SOCKET, SO_RXQ_OVFL, "SO_RXQ_OVFL of UDP6" },
	{ TCP4, SOL_IP, IP_RECVERR, "IP_RECVERR of TCP4" },
	{ TCP4, SOL_SOCKET, SO_TIMESTAMP_OLD, "SO_TIMESTAMP of TCP4" },
};
#define NR_OPTS (sizeof(opts) / sizeof(opts[0]))

static bool lost;

static void set_int(int fd, int level, int name, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		test_fail_errno(what);
}

static void setup(void)
{
	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, UDP4);
	bind_inet(UDP4, AF_INET, "127.0.0.1");
	socket_at(AF_INET6, SOCK_DGRAM, IPPROTO_UDP, UDP6);
	set_int(UDP6, SOL_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY");
	bind_inet(UDP6, AF_INET6, "::");
	socket_at(AF_INET, SOCK_STREAM, IPPROTO_TCP, TCP4);
	bind_inet(TCP4, AF_INET, "127.0.0.1");
	if (listen(TCP4, 1))
		test_fail_errno("listen");
	for (size_t i = 0; i < NR_OPTS; i++)
		set_int(opts[i].fd, opts[i].level, opts[i].name, 1, opts[i].what);
}

static void expect_opts(void)
{
	for (size_t i = 0; i < NR_OPTS; i++) {
		socklen_t len = sizeof(int);
		int val;

		if (getsockopt(opts[i].fd, opts[i].level, opts[i].name, &val, &len))
			test_fail_errno(opts[i].what);
		if (val != !lost)
			test_fail("%s is %d, not %d", opts[i].what, val, !lost);
	}
}

static socklen_t sockaddr_of(int family, const char *addr, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = family;
	if (family == AF_INET) {
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)ss)->sin_addr);
		((struct sockaddr_in *)ss)->sin_port = htons(port);
		return sizeof(struct sockaddr_in);
	}
	inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)ss)->sin6_addr);
	((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	return sizeof(struct sockaddr_in6);
}

static void send_from(int fd, const char *addr, int port, const char *payload)
{
	struct sockaddr_storage ss;
	int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	socklen_t len = sockaddr_of(family, addr, port, &ss);

	if (sendto(fd, payload, strlen(payload), 0, (struct sockaddr *)&ss, len) !=
	    (ssize_t)strlen(payload))
		test_fail_errno("sendto");
}

/* payload to addr, port from a new socket with TTL (hop limit) and TOS (traffic class) set. */
static void send_marked(const char *addr, int port, const char *payload)
{
	bool v6 = strchr(addr, ':');
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		test_fail_errno("socket");
	if (v6) {
		set_int(fd, SOL_IPV6, IPV6_UNICAST_HOPS, SENT_TTL, "IPV6_UNICAST_HOPS");
		set_int(fd, SOL_IPV6, IPV6_TCLASS, SENT_TOS, "IPV6_TCLASS");
	} else {
		set_int(fd, SOL_IP, IP_TTL, SENT_TTL, "IP_TTL");
		set_int(fd, SOL_IP, IP_TOS, SENT_TOS, "IP_TOS");
	}
	send_from(fd, addr, port, payload);
	close(fd);
}

static int port_of(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		test_fail_errno("getsockname");
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
					       ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* A port of family's loopback that no socket has: one a socket had, closed. */
static int closed_port(int family, const char *addr)
{
	int fd = socket(family, SOCK_DGRAM, 0), port;

	if (fd < 0)
		test_fail_errno("socket");
	bind_inet(fd, family, addr);
	port = port_of(fd);
	close(fd);
	return port;
}

static char cbuf[1024];
static struct msghdr mh;

/* The next message on fd (its error queue with MSG_ERRQUEUE): its data, control in mh. */
static void recv_one(int fd, int flags, const char *payload, const char *what)
{
	static char data[512];
	static struct iovec iov = { data, sizeof(data) };
	struct pollfd pfd = { .fd = fd, .events = flags & MSG_ERRQUEUE ? 0 : POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, 5000) != 1)
		test_fail("%s: nothing arrived", what);
	mh = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	n = recvmsg(fd, &mh, flags | MSG_DONTWAIT);
	if (n < 0)
		test_fail_errno(what);
	if ((size_t)n != strlen(payload) || memcmp(data, payload, n))
		test_fail("%s: %zd bytes came, not \"%s\"", what, n, payload);
}

/* The data of mh's control message level, type, at least len bytes; NULL if none. */
static const void *cmsg_of(int level, int type, size_t len, const char *what)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != level || c->cmsg_type != type)
			continue;
		if (c->cmsg_len < CMSG_LEN(len))
			test_fail("%s: a cmsg of %zu bytes", what, (size_t)c->cmsg_len);
		return CMSG_DATA(c);
	}
	return NULL;
}

static const void *expect_cmsg(int level, int type, size_t len, const char *what)
{
	const void *data = cmsg_of(level, type, len, what);

	if (!data)
		test_fail("%s: no such cmsg came with the datagram", what);
	return data;
}

static void expect_int_cmsg(int level, int type, int want, const char *what)
{
	int got;

	memcpy(&got, expect_cmsg(level, type, sizeof(got), what), sizeof(got));
	if (got != want)
		test_fail("%s: %d, not %d", what, got, want);
}

static void expect_dst(int family, const char *addr, int port, const void *data,
		       const char *what)
{
	struct sockaddr_storage want, got;
	socklen_t len = sockaddr_of(family, addr, port, &want);

	memcpy(&got, data, len);
	if (memcmp(&got, &want, len))
		test_fail("%s: not %s port %d", what, addr, port);
}

static void check_udp4(void)
{
	int port = port_of(UDP4);
	unsigned char tos;

	send_marked("127.0.0.1", port, "udp4");
	recv_one(UDP4, 0, "udp4", "UDP4");
	if (lost) {
		if (mh.msg_controllen)
			test_fail("UDP4: %zu bytes of cmsg", (size_t)mh.msg_controllen);
		return;
	}
	expect_int_cmsg(SOL_IP, IP_TTL, SENT_TTL, "UDP4's IP_TTL");
	memcpy(&tos, expect_cmsg(SOL_IP, IP_TOS, 1, "UDP4's IP_TOS"), 1);
	if (tos != SENT_TOS)
		test_fail("UDP4's IP_TOS: %#x, not %#x", tos, SENT_TOS);
	expect_dst(AF_INET, "127.0.0.1", port,
		   expect_cmsg(SOL_IP, IP_ORIGDSTADDR, sizeof(struct sockaddr_in),
			       "UDP4's IP_ORIGDSTADDR"),
		   "UDP4's IP_ORIGDSTADDR");
	expect_cmsg(SOL_SOCKET, SO_TIMESTAMPNS_OLD, sizeof(struct timespec),
		    "UDP4's SO_TIMESTAMPNS");
}

static void check_udp6(void)
{
	int port = port_of(UDP6);
	struct in_pktinfo pi;
	struct in_addr lo;

	send_marked("::1", port, "udp6");
	recv_one(UDP6, 0, "udp6", "UDP6");
	if (!lost) {
		expect_int_cmsg(SOL_IPV6, IPV6_HOPLIMIT, SENT_TTL, "UDP6's IPV6_HOPLIMIT");
		expect_int_cmsg(SOL_IPV6, IPV6_TCLASS, SENT_TOS, "UDP6's IPV6_TCLASS");
		expect_dst(AF_INET6, "::1", port,
			   expect_cmsg(SOL_IPV6, IPV6_ORIGDSTADDR, sizeof(struct sockaddr_in6),
				       "UDP6's IPV6_ORIGDSTADDR"),
			   "UDP6's IPV6_ORIGDSTADDR");
		/* struct __kernel_sock_timeval: two 64-bit words. */
		expect_cmsg(SOL_SOCKET, SO_TIMESTAMP_NEW, 16, "UDP6's SO_TIMESTAMP_NEW");
	} else if (mh.msg_controllen) {
		test_fail("UDP6: %zu bytes of cmsg", (size_t)mh.msg_controllen);
	}

	/* An IPv4 datagram, which the socket gets IPv4-mapped. */
	send_marked("127.0.0.1", port, "mapped");
	recv_one(UDP6, 0, "mapped", "UDP6 (IPv4)");
	if (lost) {
		if (mh.msg_controllen)
			test_fail("UDP6 (IPv4): %zu bytes of cmsg", (size_t)mh.msg_controllen);
		return;
	}
	expect_int_cmsg(SOL_IP, IP_TTL, SENT_TTL, "UDP6's IP_TTL");
	memcpy(&pi, expect_cmsg(SOL_IP, IP_PKTINFO, sizeof(pi), "UDP6's IP_PKTINFO"),
	       sizeof(pi));
	inet_pton(AF_INET, "127.0.0.1", &lo);
	if (pi.ipi_addr.s_addr != lo.s_addr)
		test_fail("UDP6's IP_PKTINFO: to %#x", ntohl(pi.ipi_addr.s_addr));
}

/*
 * A datagram from fd to a closed port of addr: the ICMP port unreachable it gets back is
 * queued as an error of origin and type, code, read with recvmsg(MSG_ERRQUEUE).
 */
static void check_error_queue(int fd, int family, const char *addr, int level, int type,
			      uint8_t origin, uint8_t icmp_type, uint8_t icmp_code,
			      const char *what)
{
	struct sock_extended_err ee;

	send_from(fd, addr, closed_port(family, addr), "lost");
	recv_one(fd, MSG_ERRQUEUE, "lost", what);
	memcpy(&ee, expect_cmsg(level, type, sizeof(ee), what), sizeof(ee));
	if (ee.ee_errno != ECONNREFUSED || ee.ee_origin != origin || ee.ee_type != icmp_type ||
	    ee.ee_code != icmp_code)
		test_fail("%s: errno %u, origin %u, ICMP type %u code %u", what, ee.ee_errno,
			  ee.ee_origin, ee.ee_type, ee.ee_code);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	setup();

	test_ready();
	test_wait_sigterm();

	lost = getenv("ZDTM_RECV_OPTS_LOST");
	expect_opts();
	check_udp4();
	check_udp6();
	/* Last: the error also sets the socket's pending error, which recvmsg() would give. */
	if (!lost) {
		check_error_queue(UDP4, AF_INET, "127.0.0.1", SOL_IP, IP_RECVERR,
				  SO_EE_ORIGIN_ICMP, 3, 3, "UDP4's IP_RECVERR");
		check_error_queue(UDP6, AF_INET6, "::1", SOL_IPV6, IPV6_RECVERR,
				  SO_EE_ORIGIN_ICMP6, 1, 4, "UDP6's IPV6_RECVERR");
	}
	test_pass();
}
