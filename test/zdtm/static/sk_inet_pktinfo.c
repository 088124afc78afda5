/*
 * IP_PKTINFO and IPV6_RECVPKTINFO: a UDP socket bound to port P of every IPv4 address with
 * IP_PKTINFO, a UDP one on IPv6 with IPV6_RECVPKTINFO, raw ones (protocol 252, unbound)
 * with each, and a UDP one with neither. After restore the options read back as set, and
 * recvmsg() on each socket that has one returns the datagram with its IP_PKTINFO (the link
 * it came in on, loopback's index, the address it was sent to and the local one) or
 * IPV6_PKTINFO (the link and the address it was sent to); the one without gets no cmsg.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define UDP4  70 /* UDP, 0.0.0.0:P, IP_PKTINFO */
#define UDP6  71 /* UDP, [::1]:P, IPV6_RECVPKTINFO */
#define RAW4  72 /* raw, protocol 252, IP_PKTINFO */
#define RAW6  73 /* raw, protocol 252, IPV6_RECVPKTINFO */
#define PLAIN 74 /* UDP, 127.0.0.1:P, neither */

#define TEST_PROTO 252
/* The addresses datagrams are sent to: loopback's, which the sockets see as their target. */
#define DST4 "127.0.0.5"
#define DST6 "::1"

static const struct opt {
	int fd, level, name, val;
	const char *what;
} opts[] = {
	{ UDP4, SOL_IP, IP_PKTINFO, 1, "IP_PKTINFO of UDP4" },
	{ UDP6, SOL_IPV6, IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO of UDP6" },
	{ UDP6, SOL_IP, IP_PKTINFO, 0, "IP_PKTINFO of UDP6" },
	{ RAW4, SOL_IP, IP_PKTINFO, 1, "IP_PKTINFO of RAW4" },
	{ RAW6, SOL_IPV6, IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO of RAW6" },
	{ PLAIN, SOL_IP, IP_PKTINFO, 0, "IP_PKTINFO of PLAIN" },
};

static void set_int(int fd, int level, int name, int val)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		test_fail_errno("setsockopt");
}

static void setup(void)
{
	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, UDP4);
	bind_inet(UDP4, AF_INET, "0.0.0.0");
	socket_at(AF_INET6, SOCK_DGRAM, IPPROTO_UDP, UDP6);
	bind_inet(UDP6, AF_INET6, "::1");
	socket_at(AF_INET, SOCK_RAW, TEST_PROTO, RAW4);
	socket_at(AF_INET6, SOCK_RAW, TEST_PROTO, RAW6);
	socket_at(AF_INET, SOCK_DGRAM, IPPROTO_UDP, PLAIN);
	bind_inet(PLAIN, AF_INET, "127.0.0.1");
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].val)
			set_int(opts[i].fd, opts[i].level, opts[i].name, opts[i].val);
}

static void expect_opt(const struct opt *o)
{
	int val;
	socklen_t len = sizeof(val);

	if (getsockopt(o->fd, o->level, o->name, &val, &len))
		test_fail_errno(o->what);
	if (val != o->val)
		test_fail("%s is %d, not %d", o->what, val, o->val);
}

static void expect_opts(void)
{
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		expect_opt(&opts[i]);
}

/* Sends payload from a new socket of type and protocol to addr, port (a raw one: none). */
static void send_to(int family, int type, int proto, const char *addr, int port,
		    const char *payload)
{
	struct sockaddr_storage ss = { .ss_family = family };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) :
					    sizeof(struct sockaddr_in6);
	int fd = socket(family, type, proto);

	if (family == AF_INET) {
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	} else {
		inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr);
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	}
	if (fd < 0 || sendto(fd, payload, strlen(payload), 0, (struct sockaddr *)&ss, len) !=
			      (ssize_t)strlen(payload))
		test_fail_errno("sendto");
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

/*
 * The next datagram on fd whose data (after skip bytes of IP header) is payload: its control
 * messages in cbuf. A raw socket also sees what other tests send with its protocol.
 */
static struct msghdr *recv_payload(int fd, size_t skip, const char *payload, char *cbuf,
				   size_t csize, const char *what)
{
	static char data[512];
	static struct iovec iov = { data, sizeof(data) };
	static struct msghdr mh;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 5000) != 1)
			test_fail("%s: nothing arrived", what);
		mh = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				      .msg_controllen = csize };
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n < 0)
			test_fail_errno(what);
		if ((size_t)n == skip + strlen(payload) && !memcmp(data + skip, payload, n - skip))
			return &mh;
	}
}

static const void *find_cmsg(struct msghdr *mh, int level, int type, size_t len,
			     const char *what)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == level && c->cmsg_type == type) {
			if (c->cmsg_len != CMSG_LEN(len))
				test_fail("%s: a cmsg of %zu bytes", what, (size_t)c->cmsg_len);
			return CMSG_DATA(c);
		}
	test_fail("%s: no packet info came with the datagram", what);
}

static void expect_pktinfo4(int fd, size_t skip, const char *payload, const char *what)
{
	char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo)) + 64];
	struct msghdr *mh = recv_payload(fd, skip, payload, cbuf, sizeof(cbuf), what);
	const struct in_pktinfo *pi = find_cmsg(mh, SOL_IP, IP_PKTINFO, sizeof(*pi), what);
	struct in_addr dst;
	struct in_pktinfo got;

	memcpy(&got, pi, sizeof(got));
	inet_pton(AF_INET, DST4, &dst);
	if (got.ipi_ifindex != (int)if_nametoindex("lo") || got.ipi_addr.s_addr != dst.s_addr ||
	    got.ipi_spec_dst.s_addr != dst.s_addr)
		test_fail("%s: packet info: link %d, to %#x, local %#x", what, got.ipi_ifindex,
			  ntohl(got.ipi_addr.s_addr), ntohl(got.ipi_spec_dst.s_addr));
}

static void expect_pktinfo6(int fd, const char *payload, const char *what)
{
	char cbuf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 64];
	struct msghdr *mh = recv_payload(fd, 0, payload, cbuf, sizeof(cbuf), what);
	const struct in6_pktinfo *pi = find_cmsg(mh, SOL_IPV6, IPV6_PKTINFO, sizeof(*pi), what);
	struct in6_pktinfo got;

	memcpy(&got, pi, sizeof(got));
	if (got.ipi6_ifindex != if_nametoindex("lo") ||
	    memcmp(&got.ipi6_addr, &in6addr_loopback, sizeof(got.ipi6_addr)))
		test_fail("%s: packet info: link %u, not loopback's or not to ::1", what,
			  got.ipi6_ifindex);
}

static void expect_no_cmsg(int fd, const char *payload, const char *what)
{
	char cbuf[256];
	struct msghdr *mh = recv_payload(fd, 0, payload, cbuf, sizeof(cbuf), what);

	if (mh->msg_controllen)
		test_fail("%s: %zu bytes of cmsg came with the datagram", what,
			  (size_t)mh->msg_controllen);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	setup();

	test_ready();
	test_wait_sigterm();

	expect_opts();
	send_to(AF_INET, SOCK_DGRAM, IPPROTO_UDP, DST4, port_of(UDP4), "udp4");
	expect_pktinfo4(UDP4, 0, "udp4", "UDP4");
	send_to(AF_INET6, SOCK_DGRAM, IPPROTO_UDP, DST6, port_of(UDP6), "udp6");
	expect_pktinfo6(UDP6, "udp6", "UDP6");
	/* An IPv4 raw socket reads the IP header (20 bytes) before the data. */
	send_to(AF_INET, SOCK_RAW, TEST_PROTO, DST4, 0, "raw4");
	expect_pktinfo4(RAW4, 20, "raw4", "RAW4");
	send_to(AF_INET6, SOCK_RAW, TEST_PROTO, DST6, 0, "raw6");
	expect_pktinfo6(RAW6, "raw6", "RAW6");
	send_to(AF_INET, SOCK_DGRAM, IPPROTO_UDP, "127.0.0.1", port_of(PLAIN), "plain");
	expect_no_cmsg(PLAIN, "plain", "PLAIN");
	test_pass();
}
