/*
 * Established TCP connections on loopback, dumped with --tcp-established: an IPv4 pair
 * with bytes in flight both ways, unread (one side's receive queue, a larger send queue
 * held back by a full window), TCP_NODELAY on one end; an IPv6 pair between a parent and
 * its child, the child's end with bytes unread; and the listening socket the IPv4 pair was accepted from. After restore each
 * end reads exactly the bytes queued to it, in order, and the connections go on working.
 * $ZDTM_TCP_PENDING: the listener also has a connection not accepted yet (its client in
 * the test), which the dump refuses without --skip-in-flight and drops with it (the client
 * is then not checked: its peer is gone).
 * $ZDTM_TCP_CLOSED: restored with --tcp-close (or dumped with it): every connection comes
 * back closed (reads give end of file, writes EPIPE), the listener accepts new ones.
 * $ZDTM_INET_NETNS: the tree lives in pid and net namespaces of its own (its loopback up),
 * where restore makes the sockets again; $ZDTM_INET_USERNS: and in a user namespace of its
 * own, which owns the net one (the queues are refilled past the sizes the tasks may set).
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define LISTENER 70
#define CLIENT	 71 /* sent TO_SERVER bytes, unread */
#define SERVER	 72 /* sent TO_CLIENT bytes, unread, more than the client's window */
#define PENDING	 73 /* connected, not accepted */
#define V6	 74 /* the parent's end of the IPv6 pair */

#define TO_SERVER (100 * 1000)
#define TO_CLIENT (6 << 20)
#define V6_BYTES  4096

static int tcp_at(int family, int at)
{
	socket_at(family, SOCK_STREAM, 0, at);
	return at;
}

static void listen_on(int fd, int family)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };

	if (bind(fd, family == AF_INET ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6,
		 family == AF_INET ? sizeof(a4) : sizeof(a6)) ||
	    listen(fd, 4))
		test_fail_errno("listen");
}

static void connect_to(int fd, int listener)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(listener, (struct sockaddr *)&ss, &len) ||
	    connect(fd, (struct sockaddr *)&ss, len))
		test_fail_errno("connect");
}

/* Writes what fits now of len pattern bytes (seeded seed); what it wrote. */
static size_t send_all(int fd, size_t len, uint64_t seed)
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

/* Reads exactly len bytes, which must be the pattern seeded seed, and nothing more. */
static void expect_all(int fd, size_t len, uint64_t seed, const char *what)
{
	char *buf = malloc(len);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char extra;

	read_exact(fd, buf, len, what);
	pattern_expect(buf, len, seed, what);
	free(buf);
	/* The peer may have closed its end since: end of file is no byte. */
	if (poll(&pfd, 1, 100) != 0 && recv(fd, &extra, 1, MSG_DONTWAIT) > 0)
		test_fail("%s: more bytes than the %zu queued", what, len);
}

static void expect_works(int a, int b, const char *what)
{
	char byte;

	if (write(a, "p", 1) != 1 || read(b, &byte, 1) != 1 || byte != 'p' ||
	    write(b, "q", 1) != 1 || read(a, &byte, 1) != 1 || byte != 'q')
		test_fail("%s: the connection no longer carries bytes", what);
}

static int child_end;
static bool closed;

static void expect_closed(int fd, const char *what)
{
	char byte;

	if (recv(fd, &byte, 1, MSG_DONTWAIT) != 0)
		test_fail("%s: a read does not give end of file", what);
	if (send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != -1 || errno != EPIPE)
		test_fail("%s: a write does not fail with EPIPE", what);
}

/* After --tcp-close: the listener takes a new connection. */
static void expect_accepts(void)
{
	int c = tcp_at(AF_INET, 90), s;

	connect_to(c, LISTENER);
	s = accept(LISTENER, NULL, NULL);
	if (s < 0)
		test_fail_errno("accept after --tcp-close");
	expect_works(c, s, "a new connection");
	close(s);
	close(c);
}

/*
 * The child's end of the IPv6 pair, with V6_BYTES from the parent unread: it reads them,
 * then answers with V6_BYTES of its own.
 */
static void __attribute__((noreturn)) child(void)
{
	close(V6);
	test_barrier_done();
	test_wait_sigterm();
	if (closed) {
		expect_closed(child_end, "the child's IPv6 end");
		exit(0);
	}
	expect_all(child_end, V6_BYTES, 3, "the child's IPv6 end");
	if (send_all(child_end, V6_BYTES, 4) != V6_BYTES)
		test_fail("the child cannot answer on its IPv6 end");
	exit(0);
}

static pid_t setup_v6(void)
{
	int listener = tcp_at(AF_INET6, 80);
	pid_t pid;

	listen_on(listener, AF_INET6);
	tcp_at(AF_INET6, V6);
	connect_to(V6, listener);
	child_end = accept(listener, NULL, NULL);
	if (child_end < 0)
		test_fail_errno("accept");
	close(listener);
	if (send_all(V6, V6_BYTES, 3) != V6_BYTES)
		test_fail("cannot queue the IPv6 bytes");
	pid = test_fork_child(child);
	close(child_end);
	return pid;
}

int main(int argc, char **argv)
{
	bool pending = getenv("ZDTM_TCP_PENDING") != NULL;
	int one = 1, accepted;
	size_t to_client;
	pid_t pid;

	test_init(argc, argv);
	if (getenv("ZDTM_INET_NETNS"))
		test_launch_netns_root(getenv("ZDTM_INET_USERNS") != NULL);
	closed = getenv("ZDTM_TCP_CLOSED") != NULL;
	tcp_at(AF_INET, LISTENER);
	listen_on(LISTENER, AF_INET);
	tcp_at(AF_INET, CLIENT);
	connect_to(CLIENT, LISTENER);
	accepted = accept(LISTENER, NULL, NULL);
	if (accepted < 0 || dup2(accepted, SERVER) != SERVER)
		test_fail_errno("accept");
	close(accepted);
	if (setsockopt(SERVER, SOL_TCP, TCP_NODELAY, &one, sizeof(one)))
		test_fail_errno("TCP_NODELAY");
	if (send_all(CLIENT, TO_SERVER, 1) != TO_SERVER)
		test_fail("cannot queue %d bytes to the server", TO_SERVER);
	to_client = send_all(SERVER, TO_CLIENT, 2);
	if (pending) {
		tcp_at(AF_INET, PENDING);
		connect_to(PENDING, LISTENER);
	}
	pid = setup_v6();

	test_ready();
	test_wait_sigterm();

	if (closed) {
		expect_closed(CLIENT, "the client");
		expect_closed(SERVER, "the server");
		expect_closed(V6, "the parent's IPv6 end");
		test_children_verdict(&pid, 1, "the IPv6 child");
		expect_accepts();
		test_pass();
	}
	expect_all(SERVER, TO_SERVER, 1, "the server's receive queue");
	expect_all(CLIENT, to_client, 2, "the client's receive queue");
	expect_works(CLIENT, SERVER, "IPv4");
	if (getsockopt(SERVER, SOL_TCP, TCP_NODELAY, &one, &(socklen_t){ sizeof(one) }) || !one)
		test_fail("TCP_NODELAY is off");
	test_children_verdict(&pid, 1, "the IPv6 child");
	expect_all(V6, V6_BYTES, 4, "the parent's IPv6 end");
	test_pass();
}
