/*
 * TCP connections on loopback in each closing state, dumped with --tcp-established, both
 * ends in the tree:
 *   HALF:   FIN_WAIT2 / CLOSE_WAIT (IPv6): one end shut its sending side, its peer has the
 *           FIN and bytes unread, and bytes unread the other way too;
 *   FULL:   FIN_WAIT1 / ESTABLISHED: the shut end's send queue is full (the peer's receive
 *           queue too), its FIN queued behind bytes never sent;
 *   LAST:   FIN_WAIT2 / LAST_ACK: the FIN_WAIT2 end's receive queue full, its peer shut
 *           with bytes never sent before its FIN;
 *   CLOSED: CLOSE / CLOSE: both ends shut and acknowledged, with bytes unread.
 * After restore each socket is in its dumped state (TCP_INFO) and the streams go on: each
 * end reads exactly the bytes queued to it, then end of file where its peer shut; a shut
 * end's writes fail with EPIPE; a closed socket still names its peer (SO_PEERNAME).
 * $ZDTM_TCP_UPSTREAM_RESTORE (restored by upstream criu, which fails to send a FIN_WAIT1
 * connection's unsent bytes again when none of its queue was sent): no FULL pair; and a
 * CLOSED socket may have been reset by its peer as upstream's restore forged its FINs (its
 * first write then reports the reset, the next one EPIPE).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

/* TCP states (include/net/tcp_states.h). */
enum { ESTABLISHED = 1, FIN_WAIT1 = 4, FIN_WAIT2 = 5, CLOSE = 7, CLOSE_WAIT = 8, LAST_ACK = 9 };

#define SMALL 1000 /* bytes queued where the windows are open */
#define BIG   (8 << 20) /* more than a loopback connection's two buffers take */

struct conn {
	const char *name;
	int family;
	int a, b; /* a shuts first */
	size_t a_to_b, b_to_a; /* bytes queued, unread */
	uint64_t seed_ab, seed_ba;
	int a_state, b_state;
	bool left_out;
	struct sockaddr_storage a_peer, b_peer; /* CLOSED: SO_PEERNAME at dump */
};

#define CONN(n, fam, fd_a, seed, sa, sb)                                                  \
	{ .name = n, .family = fam, .a = fd_a, .b = fd_a + 1, .seed_ab = seed,              \
	  .seed_ba = seed + 1, .a_state = sa, .b_state = sb }
static struct conn half = CONN("HALF", AF_INET6, 60, 11, FIN_WAIT2, CLOSE_WAIT);
static struct conn full = CONN("FULL", AF_INET, 62, 21, FIN_WAIT1, ESTABLISHED);
static struct conn last = CONN("LAST", AF_INET, 64, 31, FIN_WAIT2, LAST_ACK);
static struct conn closed = CONN("CLOSED", AF_INET, 66, 41, CLOSE, CLOSE);
static struct conn *const conns[] = { &half, &full, &last, &closed };
#define NR_CONNS (sizeof(conns) / sizeof(conns[0]))

static int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len))
		test_fail_errno("TCP_INFO");
	return ti.tcpi_state;
}

/* The state settles as the loopback carries the segments: wait for it (1 s at most). */
static void wait_state(int fd, int state, const char *what)
{
	for (int i = 0; i < 1000 && tcp_state(fd) != state; i++)
		usleep(1000);
	if (tcp_state(fd) != state)
		test_fail("%s: state %d, not %d", what, tcp_state(fd), state);
}

static void connect_pair(struct conn *c)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr *sa = c->family == AF_INET ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6;
	socklen_t len = c->family == AF_INET ? sizeof(a4) : sizeof(a6);
	int l = socket(c->family, SOCK_STREAM, 0), s;

	if (l < 0 || bind(l, sa, len) || listen(l, 1) || getsockname(l, sa, &len))
		test_fail_errno("listen");
	socket_at(c->family, SOCK_STREAM, 0, c->a);
	if (connect(c->a, sa, len))
		test_fail_errno("connect");
	s = accept(l, NULL, NULL);
	if (s < 0 || dup2(s, c->b) != c->b)
		test_fail_errno("accept");
	close(s);
	close(l);
}

/* Queues what fits now of len pattern bytes (seeded seed); what it queued. */
static size_t send_pattern(int fd, size_t len, uint64_t seed)
{
	char *buf = malloc(len);
	size_t done = 0;

	pattern_fill(buf, len, seed);
	while (done < len) {
		ssize_t n = send(fd, buf + done, len - done, MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0)
			test_fail_errno("send");
		done += n;
	}
	free(buf);
	return done;
}

static void shut(int fd)
{
	if (shutdown(fd, SHUT_WR))
		test_fail_errno("shutdown");
}

static void setup(void)
{
	socklen_t len;

	closed.a_peer.ss_family = closed.b_peer.ss_family = AF_INET;
	connect_pair(&half);
	half.a_to_b = send_pattern(half.a, SMALL, half.seed_ab);
	half.b_to_a = send_pattern(half.b, SMALL, half.seed_ba);
	shut(half.a);

	full.left_out = getenv("ZDTM_TCP_UPSTREAM_RESTORE") != NULL;
	if (!full.left_out) {
		connect_pair(&full);
		full.a_to_b = send_pattern(full.a, BIG, full.seed_ab);
		if (full.a_to_b == BIG)
			test_fail("FULL: all %d bytes went in, the queues are not full", BIG);
		shut(full.a);
	}

	connect_pair(&last);
	shut(last.a);
	wait_state(last.b, CLOSE_WAIT, "LAST b");
	last.b_to_a = send_pattern(last.b, BIG, last.seed_ba);
	if (last.b_to_a == BIG)
		test_fail("LAST: all %d bytes went in, the queues are not full", BIG);
	shut(last.b);

	connect_pair(&closed);
	closed.a_to_b = send_pattern(closed.a, SMALL, closed.seed_ab);
	closed.b_to_a = send_pattern(closed.b, SMALL, closed.seed_ba);
	shut(closed.a);
	wait_state(closed.b, CLOSE_WAIT, "CLOSED b");
	shut(closed.b);
	/* The kernel takes no length longer than the address. */
	len = sizeof(struct sockaddr_in);
	if (getsockopt(closed.a, SOL_SOCKET, SO_PEERNAME, &closed.a_peer, &len))
		test_fail_errno("SO_PEERNAME");
	len = sizeof(struct sockaddr_in);
	if (getsockopt(closed.b, SOL_SOCKET, SO_PEERNAME, &closed.b_peer, &len))
		test_fail_errno("SO_PEERNAME");

	for (size_t i = 0; i < NR_CONNS; i++) {
		const struct conn *c = conns[i];

		if (c->left_out)
			continue;
		wait_state(c->a, c->a_state, c->name);
		wait_state(c->b, c->b_state, c->name);
	}
}

/* Reads exactly len pattern bytes, then end of file. */
static void expect_bytes_then_eof(int fd, size_t len, uint64_t seed, const char *what)
{
	char *buf = malloc(len + 1);
	char byte;

	read_exact(fd, buf, len, what);
	pattern_expect(buf, len, seed, what);
	free(buf);
	if (read(fd, &byte, 1) != 0)
		test_fail("%s: no end of file after its %zu bytes", what, len);
}

static void expect_epipe(int fd, const char *what)
{
	ssize_t n = send(fd, "x", 1, MSG_NOSIGNAL);

	if (n == -1 && errno == ECONNRESET && getenv("ZDTM_TCP_UPSTREAM_RESTORE") &&
	    tcp_state(fd) == CLOSE)
		n = send(fd, "x", 1, MSG_NOSIGNAL);

	if (n != -1 || errno != EPIPE)
		test_fail("%s: a write gives %zd (%s), not EPIPE", what, n,
			  n < 0 ? strerror(errno) : "no error");
}

/* Reads exactly len pattern bytes; the stream stays open. */
static void expect_bytes(int fd, size_t len, uint64_t seed, const char *what)
{
	char *buf = malloc(len);

	read_exact(fd, buf, len, what);
	pattern_expect(buf, len, seed, what);
	free(buf);
}

static void expect_peer(int fd, const struct sockaddr_storage *want, const char *what)
{
	struct sockaddr_storage got;
	socklen_t len = want->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
						     sizeof(struct sockaddr_in6);

	memset(&got, 0, sizeof(got));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERNAME, &got, &len) || memcmp(&got, want, len))
		test_fail("%s: SO_PEERNAME is not the peer it had", what);
}

/* The open direction of a half-closed pair still carries bytes, then b's FIN. */
static void expect_open_way(struct conn *c, const char *what)
{
	char byte;

	if (write(c->b, "m", 1) != 1 || read(c->a, &byte, 1) != 1 || byte != 'm')
		test_fail("%s: the open direction no longer carries bytes", what);
	shut(c->b);
	if (read(c->a, &byte, 1) != 0)
		test_fail("%s: no end of file after its peer shut", what);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	setup();

	test_ready();
	test_wait_sigterm();

	for (size_t i = 0; i < NR_CONNS; i++) {
		const struct conn *c = conns[i];

		if (c->left_out)
			continue;
		if (tcp_state(c->a) != c->a_state || tcp_state(c->b) != c->b_state)
			test_fail("%s: states %d/%d after restore, not %d/%d", c->name,
				  tcp_state(c->a), tcp_state(c->b), c->a_state, c->b_state);
	}
	expect_bytes_then_eof(half.b, half.a_to_b, half.seed_ab, "HALF b");
	expect_bytes(half.a, half.b_to_a, half.seed_ba, "HALF a");
	expect_epipe(half.a, "HALF a");
	expect_open_way(&half, "HALF");

	if (!full.left_out) {
		expect_bytes_then_eof(full.b, full.a_to_b, full.seed_ab, "FULL b");
		expect_epipe(full.a, "FULL a");
		expect_open_way(&full, "FULL");
	}

	expect_bytes_then_eof(last.a, last.b_to_a, last.seed_ba, "LAST a");
	expect_epipe(last.b, "LAST b");
	expect_epipe(last.a, "LAST a");

	expect_bytes_then_eof(closed.b, closed.a_to_b, closed.seed_ab, "CLOSED b");
	expect_bytes_then_eof(closed.a, closed.b_to_a, closed.seed_ba, "CLOSED a");
	expect_epipe(closed.a, "CLOSED a");
	expect_epipe(closed.b, "CLOSED b");
	expect_peer(closed.a, &closed.a_peer, "CLOSED a");
	expect_peer(closed.b, &closed.b_peer, "CLOSED b");
	test_pass();
}
