/*
 * Listening TCP sockets: IPv4 on loopback, IPv6 only, dual-stack IPv6 (reached over IPv4 by
 * a v4-mapped address), each with its backlog and options set to what a new socket does not
 * have (SO_REUSEADDR, SO_REUSEPORT, SO_KEEPALIVE with its TCP_KEEP* timings, SO_LINGER,
 * SO_RCVBUF, TCP_NODELAY, TCP_CORK, SO_BINDTODEVICE lo, IPV6_FREEBIND on an address the
 * host does not have), and an unbound TCP socket. Each comes back at its address, listening with
 * its backlog and options, and accepts connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78
#endif

#define V4	70 /* 127.0.0.1, options set */
#define V6ONLY	71 /* ::1, IPV6_V6ONLY */
#define DUAL	72 /* ::, dual-stack, bound to lo */
#define FREE	73 /* 2001:db8::1 (documentation prefix) with IPV6_FREEBIND, not listening */
#define UNBOUND 74

struct opt {
	int level, name;
	int val;
	const char *what;
};

static const struct opt v4_opts[] = {
	{ SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR" },
	{ SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT" },
	{ SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE" },
	{ SOL_TCP, TCP_KEEPCNT, 7, "TCP_KEEPCNT" },
	{ SOL_TCP, TCP_KEEPIDLE, 333, "TCP_KEEPIDLE" },
	{ SOL_TCP, TCP_KEEPINTVL, 44, "TCP_KEEPINTVL" },
	{ SOL_TCP, TCP_NODELAY, 1, "TCP_NODELAY" },
	{ SOL_TCP, TCP_CORK, 1, "TCP_CORK" },
	{ SOL_SOCKET, SO_PRIORITY, 5, "SO_PRIORITY" },
};
#define NR_V4_OPTS (sizeof(v4_opts) / sizeof(v4_opts[0]))

static uint16_t port_of(int fd)
{
	struct sockaddr_in6 a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len))
		test_fail_errno("getsockname");
	return ntohs(a.sin6_port); /* sin_port is at the same place */
}

static void set_int(int fd, int level, int name, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)))
		test_fail_errno(what);
}

static int get_int(int fd, int level, int name, const char *what)
{
	int val;
	socklen_t len = sizeof(val);

	if (getsockopt(fd, level, name, &val, &len))
		test_fail_errno(what);
	return val;
}

static void listen_v6(int at, int v6only, const char *addr, int backlog)
{
	socket_at(AF_INET6, SOCK_STREAM, 0, at);
	set_int(at, SOL_IPV6, IPV6_V6ONLY, v6only, "IPV6_V6ONLY");
	bind_inet(at, AF_INET6, addr);
	if (listen(at, backlog))
		test_fail_errno("listen");
}

static void setup(void)
{
	struct linger lin = { 1, 17 };

	socket_at(AF_INET, SOCK_STREAM, 0, V4);
	for (size_t i = 0; i < NR_V4_OPTS; i++)
		set_int(V4, v4_opts[i].level, v4_opts[i].name, v4_opts[i].val, v4_opts[i].what);
	if (setsockopt(V4, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin)))
		test_fail_errno("SO_LINGER");
	set_int(V4, SOL_SOCKET, SO_RCVBUF, 65536, "SO_RCVBUF");
	bind_inet(V4, AF_INET, "127.0.0.1");
	if (listen(V4, 7))
		test_fail_errno("listen");

	listen_v6(V6ONLY, 1, "::1", 3);
	listen_v6(DUAL, 0, "::", 11);
	if (setsockopt(DUAL, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3))
		test_fail_errno("SO_BINDTODEVICE");

	socket_at(AF_INET6, SOCK_STREAM, 0, FREE);
	set_int(FREE, SOL_IPV6, IPV6_FREEBIND, 1, "IPV6_FREEBIND");
	bind_inet(FREE, AF_INET6, "2001:db8::1");

	socket_at(AF_INET, SOCK_STREAM, 0, UNBOUND);
}

static void expect_listening(int fd, unsigned int backlog)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len))
		test_fail_errno("TCP_INFO");
	if (ti.tcpi_state != TCP_LISTEN || ti.tcpi_sacked != backlog)
		test_fail("fd %d: state %u backlog %u, expected listening with backlog %u", fd,
			  ti.tcpi_state, ti.tcpi_sacked, backlog);
}

/* A connection to the listener at fd through family/addr is accepted and carries a byte. */
static void expect_accepts(int fd, int family, const char *addr)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port_of(fd)) };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port_of(fd)) };
	int c = socket(family, SOCK_STREAM, 0), s;
	char byte = 0;

	if (family == AF_INET)
		inet_pton(AF_INET, addr, &a4.sin_addr);
	else
		inet_pton(AF_INET6, addr, &a6.sin6_addr);
	if (c < 0 || connect(c, family == AF_INET ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6,
			     family == AF_INET ? sizeof(a4) : sizeof(a6)))
		test_fail_errno("connect to a restored listener");
	s = accept(fd, NULL, NULL);
	if (s < 0 || write(c, "x", 1) != 1 || read(s, &byte, 1) != 1 || byte != 'x')
		test_fail("fd %d: a connection through %s does not work", fd, addr);
	close(s);
	close(c);
}

static void check_v4_opts(void)
{
	struct linger lin;
	socklen_t len = sizeof(lin);

	for (size_t i = 0; i < NR_V4_OPTS; i++) {
		int val = get_int(V4, v4_opts[i].level, v4_opts[i].name, v4_opts[i].what);

		if (val != v4_opts[i].val)
			test_fail("%s is %d, expected %d", v4_opts[i].what, val, v4_opts[i].val);
	}
	if (getsockopt(V4, SOL_SOCKET, SO_LINGER, &lin, &len) || !lin.l_onoff ||
	    lin.l_linger != 17)
		test_fail("SO_LINGER is %d/%d, expected 1/17", lin.l_onoff, lin.l_linger);
	if (get_int(V4, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF") != 131072)
		test_fail("SO_RCVBUF is %d", get_int(V4, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF"));
}

static void check(uint16_t ports[])
{
	char dev[16] = "";
	socklen_t len = sizeof(dev);

	if (port_of(V4) != ports[0] || port_of(V6ONLY) != ports[1] || port_of(DUAL) != ports[2] ||
	    port_of(FREE) != ports[3] || port_of(UNBOUND) != 0)
		test_fail("ports %u %u %u %u %u, expected %u %u %u %u 0", port_of(V4),
			  port_of(V6ONLY), port_of(DUAL), port_of(FREE), port_of(UNBOUND), ports[0],
			  ports[1], ports[2], ports[3]);
	expect_listening(V4, 7);
	expect_listening(V6ONLY, 3);
	expect_listening(DUAL, 11);
	check_v4_opts();
	if (get_int(V6ONLY, SOL_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY") != 1 ||
	    get_int(DUAL, SOL_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY") != 0)
		test_fail("IPV6_V6ONLY not as set");
	if (getsockopt(DUAL, SOL_SOCKET, SO_BINDTODEVICE, dev, &len) || strcmp(dev, "lo"))
		test_fail("SO_BINDTODEVICE is '%s', expected lo", dev);
	if (get_int(FREE, SOL_IPV6, IPV6_FREEBIND, "IPV6_FREEBIND") != 1)
		test_fail("IPV6_FREEBIND is off");
	if (get_int(V6ONLY, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR") != 0)
		test_fail("SO_REUSEADDR is on, the test never set it");
	/* TCP_CORK holds back small writes: off for the check's connection. */
	set_int(V4, SOL_TCP, TCP_CORK, 0, "TCP_CORK");
	expect_accepts(V4, AF_INET, "127.0.0.1");
	expect_accepts(V6ONLY, AF_INET6, "::1");
	expect_accepts(DUAL, AF_INET, "127.0.0.1");
	expect_accepts(DUAL, AF_INET6, "::1");
}

int main(int argc, char **argv)
{
	uint16_t ports[4];

	test_init(argc, argv);
	setup();
	ports[0] = port_of(V4);
	ports[1] = port_of(V6ONLY);
	ports[2] = port_of(DUAL);
	ports[3] = port_of(FREE);

	test_ready();
	test_wait_sigterm();

	check(ports);
	test_pass();
}
