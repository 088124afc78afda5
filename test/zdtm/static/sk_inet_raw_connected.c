/*
 * Connected raw sockets (protocol 251): an IPv4 one connected to 127.0.0.2 without a port
 * (getpeername() answers ENOTCONN: only the kernel's table of raw sockets shows its peer),
 * one connected to 127.0.0.3 with port 9 (getpeername() gives it), an IPv6 one connected to
 * ::1 without a port, and an IPv4 one bound to 127.0.0.4 and not connected. After restore
 * each has the addresses, peer name (or ENOTCONN) and the remote address and state in
 * /proc/net/raw (raw6) it had, and behaves as connected: send() without an address reaches
 * a socket bound to its peer's address, and the first IPv4 one receives what its peer
 * sends it but not what another address does.
 * $ZDTM_RAW_USERNS: in pid, net and user namespaces of its own (the table read at dump is
 * that of the socket's namespace).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CONN4  70 /* connected to 127.0.0.2, no port */
#define PORT4  71 /* connected to 127.0.0.3, port 9 */
#define CONN6  72 /* connected to ::1, no port */
#define BOUND4 73 /* bound to 127.0.0.4, not connected */
#define NR_FDS 4

#define TEST_PROTO 251

struct state {
	struct sockaddr_storage addr, peer;
	int peer_errno;
	char table[128]; /* the remote address and state columns of its line in the table */
};

static void connect_to(int fd, int family, const char *addr, int port)
{
	struct sockaddr_storage ss = { .ss_family = family };
	socklen_t len;

	if (family == AF_INET) {
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
		len = sizeof(struct sockaddr_in);
	} else {
		inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr);
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
		len = sizeof(struct sockaddr_in6);
	}
	if (connect(fd, (struct sockaddr *)&ss, len))
		test_fail_errno("connect");
}

static void setup(void)
{
	socket_at(AF_INET, SOCK_RAW, TEST_PROTO, CONN4);
	connect_to(CONN4, AF_INET, "127.0.0.2", 0);
	socket_at(AF_INET, SOCK_RAW, TEST_PROTO, PORT4);
	connect_to(PORT4, AF_INET, "127.0.0.3", 9);
	socket_at(AF_INET6, SOCK_RAW, TEST_PROTO, CONN6);
	connect_to(CONN6, AF_INET6, "::1", 0);
	socket_at(AF_INET, SOCK_RAW, TEST_PROTO, BOUND4);
	bind_inet(BOUND4, AF_INET, "127.0.0.4");
}

/* The "remote_address st" columns of fd's line in /proc/self/net/raw or raw6. */
static void table_line(int fd, bool v6, char *out, size_t size)
{
	FILE *f = fopen(v6 ? "/proc/self/net/raw6" : "/proc/self/net/raw", "r");
	char line[512], remote[64], state[8];
	unsigned long ino;
	struct stat st;

	if (!f || fstat(fd, &st))
		test_fail_errno("the table of raw sockets");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*u: %*s %63s %7s %*s %*s %*s %*u %*d %lu", remote, state,
			   &ino) == 3 &&
		    ino == st.st_ino) {
			snprintf(out, size, "%s %s", remote, state);
			fclose(f);
			return;
		}
	test_fail("fd %d: not in the table of raw sockets", fd);
}

static void save_state(struct state *s)
{
	memset(s, 0, sizeof(*s) * NR_FDS);
	for (int i = 0; i < NR_FDS; i++) {
		int fd = CONN4 + i;
		socklen_t len = sizeof(s[i].addr);

		if (getsockname(fd, (struct sockaddr *)&s[i].addr, &len))
			test_fail_errno("getsockname");
		len = sizeof(s[i].peer);
		if (getpeername(fd, (struct sockaddr *)&s[i].peer, &len))
			s[i].peer_errno = errno;
		table_line(fd, fd == CONN6, s[i].table, sizeof(s[i].table));
	}
}

static void expect_state(const struct state *before)
{
	struct state after[NR_FDS];

	save_state(after);
	for (int i = 0; i < NR_FDS; i++) {
		if (memcmp(&before[i].addr, &after[i].addr, sizeof(after[i].addr)))
			test_fail("fd %d: its address changed", CONN4 + i);
		if (before[i].peer_errno != after[i].peer_errno ||
		    memcmp(&before[i].peer, &after[i].peer, sizeof(after[i].peer)))
			test_fail("fd %d: getpeername() gave error %d and an address, now %d and "
				  "%s one",
				  CONN4 + i, before[i].peer_errno, after[i].peer_errno,
				  after[i].peer_errno ? "no" : "another");
		if (strcmp(before[i].table, after[i].table))
			test_fail("fd %d: its remote address and state in the table were %s, "
				  "now %s",
				  CONN4 + i, before[i].table, after[i].table);
	}
	/* What the test expects the table to show, so that the comparison is not of nothing. */
	if (strcmp(before[0].table, "0200007F:0000 01") ||
	    strcmp(before[3].table, "00000000:0000 07"))
		test_fail("the table shows CONN4 as %s and BOUND4 as %s", before[0].table,
			  before[3].table);
	if (before[0].peer_errno != ENOTCONN || before[1].peer_errno)
		test_fail("getpeername() of CONN4 and PORT4 gave errors %d, %d",
			  before[0].peer_errno, before[1].peer_errno);
}

static int raw_bound(int family, const char *addr)
{
	int fd = socket(family, SOCK_RAW, TEST_PROTO);

	if (fd < 0)
		test_fail_errno("socket");
	bind_inet(fd, family, addr);
	return fd;
}

/* The next packet on fd: its data (after skip bytes of IP header) must be payload. */
static void expect_packet(int fd, size_t skip, const char *payload, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[256];
	ssize_t n;

	if (poll(&pfd, 1, 5000) != 1)
		test_fail("%s: nothing arrived", what);
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n != (ssize_t)(skip + strlen(payload)) || memcmp(buf + skip, payload, n - skip))
		test_fail("%s: received %zd bytes, not the %zu sent", what, n,
			  skip + strlen(payload));
}

static void expect_empty(int fd, const char *what)
{
	char buf[256];

	if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) != -1 || errno != EAGAIN)
		test_fail("%s: a packet more than expected", what);
}

static void send_from(int fd, const char *to, const char *payload)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	inet_pton(AF_INET, to, &sin.sin_addr);
	if (sendto(fd, payload, strlen(payload), 0, (struct sockaddr *)&sin, sizeof(sin)) !=
	    (ssize_t)strlen(payload))
		test_fail_errno("sendto");
}

static void expect_connected(const struct state *before)
{
	int peer2 = raw_bound(AF_INET, "127.0.0.2"), peer3 = raw_bound(AF_INET, "127.0.0.3");
	int other = raw_bound(AF_INET, "127.0.0.5"), peer6 = raw_bound(AF_INET6, "::1");
	const struct sockaddr_in *local = (const struct sockaddr_in *)&before[0].addr;
	char local_addr[INET_ADDRSTRLEN];

	/* send() without an address: to the peer (an IPv4 one reads the 20-byte IP header). */
	if (send(CONN4, "conn4", 5, 0) != 5 || send(PORT4, "port4", 5, 0) != 5 ||
	    send(CONN6, "conn6", 5, 0) != 5)
		test_fail_errno("send");
	expect_packet(peer2, 20, "conn4", "CONN4's packet at its peer");
	expect_packet(peer3, 20, "port4", "PORT4's packet at its peer");
	expect_packet(peer6, 0, "conn6", "CONN6's packet at its peer");

	/*
	 * CONN4 takes only its peer's packets: one from another address, sent first, must not
	 * be ahead of its peer's (loopback keeps their order).
	 */
	inet_ntop(AF_INET, &local->sin_addr, local_addr, sizeof(local_addr));
	send_from(other, local_addr, "other");
	send_from(peer2, local_addr, "peer2");
	expect_packet(CONN4, 20, "peer2", "the peer's packet at CONN4");
	expect_empty(CONN4, "CONN4");
	close(peer2);
	close(peer3);
	close(other);
	close(peer6);
}

int main(int argc, char **argv)
{
	struct state before[NR_FDS];

	test_init(argc, argv);
	if (getenv("ZDTM_RAW_USERNS"))
		test_launch_netns_root(true);
	setup();
	save_state(before);

	test_ready();
	test_wait_sigterm();

	expect_state(before);
	expect_connected(before);
	test_pass();
}
