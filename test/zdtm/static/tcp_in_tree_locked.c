/*
 * Connections with both ends in the dumped tree, in criu's own net namespace, dumped with
 * --tcp-established while bytes are in flight between their ends, so that each end's
 * stream moves on while the tree is frozen unless the network lock holds it:
 *  - IPv4: the receiver's buffer tiny (SO_RCVBUF before the connection), the sender's
 *    bytes past the receiver's window waiting in its send queue (the sender probes the
 *    zero window, the receiver answers);
 *  - IPv6, between the parent and its child: the child's segments dropped by a rule of
 *    the test's own (ip6tables, comment zdtm_tcp_in_tree), so that the parent's bytes are
 *    in the child's receive queue and still unacknowledged in the parent's send queue (the
 *    parent retransmits them meanwhile).
 * The test writes its four ports into ./ports, for the runner's and the action script's
 * check of the lock while it holds. After the restore (or a failed dump, or -R, -s): no
 * rule of the lock (mark 0xc114) names a port of the test, and the nftables lock's table
 * (inet CRIU-PID) holds none of them; the test removes its own rule; each end reads
 * exactly the bytes sent to it, in order; the parent's send queue empties once the child
 * answers; both connections carry bytes both ways.
 * $ZDTM_TCP_CLOSED: restored with --tcp-close: the locks gone all the same, every end
 * comes back closed (reads give end of file, writes EPIPE).
 * $ZDTM_TCP_ACKED: no rule of the test's own (the tree killed after dump -s must leave no
 * end behind that waits for its acknowledgements): the parent's IPv6 bytes are acknowledged.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CLIENT 70 /* sent TO_SERVER bytes, most of them still in its send queue */
#define SERVER 71 /* its receive buffer tiny */
#define V6     72 /* the parent's end of the IPv6 pair: V6_BYTES unacknowledged */

#define TO_SERVER  (1 << 20)
#define TINY_RCVBUF 4096
#define V6_BYTES   3000
#define V6_REPLY   1000

static int child_end;
static uint16_t ports[4]; /* client, server, parent's IPv6 end, child's */
static bool acked; /* $ZDTM_TCP_ACKED */
static bool closed; /* $ZDTM_TCP_CLOSED */
static char drop_rule[256]; /* the test's own rule, after ip6tables' -I or -D */

static uint16_t port_of(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		test_fail_errno("getsockname");
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
					       ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* A connected pair of family on loopback: *a connects, *b is accepted. */
static void make_pair(int family, int rcvbuf_b, int *a, int *b)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr *addr = family == AF_INET ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6;
	socklen_t len = family == AF_INET ? sizeof(a4) : sizeof(a6);
	int listener = socket(family, SOCK_STREAM, 0);

	*a = socket(family, SOCK_STREAM, 0);
	/* On the listener, before the handshake: the window it offers is bounded by it. */
	if (listener < 0 || *a < 0 ||
	    (rcvbuf_b && setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &rcvbuf_b, sizeof(int))) ||
	    bind(listener, addr, len) || listen(listener, 1) || getsockname(listener, addr, &len) ||
	    connect(*a, addr, len))
		test_fail_errno("a loopback connection");
	*b = accept(listener, NULL, NULL);
	if (*b < 0)
		test_fail_errno("accept");
	close(listener);
}

static void move_to(int fd, int at)
{
	if (dup2(fd, at) != at)
		test_fail_errno("dup2");
	close(fd);
}

/* Writes what fits now of len pattern bytes (seeded seed); what it wrote. */
static size_t send_what_fits(int fd, size_t len, uint64_t seed)
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
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char *buf = malloc(len);
	char extra;

	read_exact(fd, buf, len, what);
	pattern_expect(buf, len, seed, what);
	free(buf);
	if (poll(&pfd, 1, 100) != 0 && recv(fd, &extra, 1, MSG_DONTWAIT) > 0)
		test_fail("%s: more bytes than the %zu sent", what, len);
}

static void expect_works(int a, int b, const char *what)
{
	char byte;

	if (write(a, "p", 1) != 1 || read(b, &byte, 1) != 1 || byte != 'p' ||
	    write(b, "q", 1) != 1 || read(a, &byte, 1) != 1 || byte != 'q')
		test_fail("%s: the connection no longer carries bytes", what);
}

static void expect_closed(int fd, const char *what)
{
	char byte;

	if (recv(fd, &byte, 1, MSG_DONTWAIT) != 0)
		test_fail("%s: a read does not give end of file", what);
	if (send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != -1 || errno != EPIPE)
		test_fail("%s: a write does not fail with EPIPE", what);
}

static int queued(int fd, unsigned long request, const char *what)
{
	int len;

	if (ioctl(fd, request, &len))
		test_fail_errno(what);
	return len;
}

/* Whether a word of line (blanks, commas and braces apart) is one of the test's ports. */
#define SEPARATORS " \t\n,{}"
static bool names_port(const char *line)
{
	char copy[512], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", line);
	for (char *w = strtok_r(copy, SEPARATORS, &save); w;
	     w = strtok_r(NULL, SEPARATORS, &save)) {
		for (int i = 0; i < 4; i++) {
			char port[8];

			snprintf(port, sizeof(port), "%u", ports[i]);
			if (!strcmp(w, port))
				return true;
		}
	}
	return false;
}

/*
 * Whether the network lock holds a connection of the test still: a rule of iptables' (mark
 * 0xc114) naming one of its ports, or in the nftables lock's table (inet CRIU-PID) an
 * element naming one or a chain of the lock (a table of that name without either is not
 * the lock's).
 */
static bool lock_left(void)
{
	char cmd[128], line[512];
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "{ iptables -w -S; ip6tables -w -S; nft list table inet CRIU-%d; } 2>/dev/null",
		 getpid());
	f = popen(cmd, "r");
	if (!f)
		test_fail_errno("popen iptables");
	while (fgets(line, sizeof(line), f)) {
		bool marked = strstr(line, "c114") != NULL;

		if (!strncmp(line, "-A ", 3))
			found |= marked && names_port(line);
		else
			found |= marked || names_port(line);
	}
	pclose(f);
	return found;
}

static void drop_rule_op(const char *op)
{
	char cmd[320];

	if (acked)
		return;
	snprintf(cmd, sizeof(cmd), "ip6tables -w %s %s", op, drop_rule);
	if (system(cmd))
		test_fail("%s failed", cmd);
}

/* The child's end of the IPv6 pair: the parent's V6_BYTES unread; it answers V6_REPLY. */
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
	if (send_what_fits(child_end, V6_REPLY, 4) != V6_REPLY)
		test_fail("the child cannot answer on its IPv6 end");
	exit(0);
}

/*
 * The parent's V6_BYTES in the child's receive queue, its acknowledgements dropped: they
 * stay in the parent's send queue too, sent and unacknowledged (unless $ZDTM_TCP_ACKED).
 */
static pid_t setup_v6(void)
{
	int parent_end;
	pid_t pid;

	make_pair(AF_INET6, 0, &parent_end, &child_end);
	move_to(parent_end, V6);
	ports[2] = port_of(V6);
	ports[3] = port_of(child_end);
	snprintf(drop_rule, sizeof(drop_rule),
		 "INPUT -p tcp -s ::1 --sport %u -d ::1 --dport %u -m comment --comment "
		 "zdtm_tcp_in_tree -j DROP",
		 ports[3], ports[2]);
	drop_rule_op("-I");
	if (send_what_fits(V6, V6_BYTES, 3) != V6_BYTES)
		test_fail("cannot send the IPv6 bytes");
	/* Loopback hands them over within the send; waited for all the same. */
	for (int i = 0; i < 1000 && queued(child_end, SIOCINQ, "SIOCINQ") < V6_BYTES; i++)
		usleep(1000);
	for (int i = 0; i < 1000 && acked && queued(V6, SIOCOUTQ, "SIOCOUTQ"); i++)
		usleep(1000);
	if (queued(child_end, SIOCINQ, "SIOCINQ") != V6_BYTES ||
	    queued(V6, SIOCOUTQ, "SIOCOUTQ") != (acked ? 0 : V6_BYTES))
		test_fail("the IPv6 bytes are not received and %s", acked ? "acknowledged" :
			  "unacknowledged");
	pid = test_fork_child(child);
	close(child_end);
	return pid;
}

static void write_ports(void)
{
	char text[64];
	int len = snprintf(text, sizeof(text), "%u %u %u %u\n", ports[0], ports[1], ports[2],
			   ports[3]);

	write_file("ports", text, len);
}

int main(int argc, char **argv)
{
	int client, server;
	size_t to_server;
	pid_t pid;

	test_init(argc, argv);
	acked = getenv("ZDTM_TCP_ACKED") != NULL;
	closed = getenv("ZDTM_TCP_CLOSED") != NULL;
	make_pair(AF_INET, TINY_RCVBUF, &client, &server);
	move_to(client, CLIENT);
	move_to(server, SERVER);
	ports[0] = port_of(CLIENT);
	ports[1] = port_of(SERVER);
	to_server = send_what_fits(CLIENT, TO_SERVER, 1);
	if (queued(CLIENT, SIOCOUTQ, "SIOCOUTQ") == 0)
		test_fail("the server's window took all %zu bytes", to_server);
	pid = setup_v6();
	write_ports();

	test_ready();
	test_wait_sigterm();

	if (lock_left())
		test_fail("the network lock of the test's connections is left");
	drop_rule_op("-D");
	if (closed) {
		expect_closed(CLIENT, "the client");
		expect_closed(SERVER, "the server");
		expect_closed(V6, "the parent's IPv6 end");
		test_children_verdict(&pid, 1, "the IPv6 child");
		test_pass();
	}
	expect_all(SERVER, to_server, 1, "the server's receive queue");
	expect_works(CLIENT, SERVER, "IPv4");
	test_children_verdict(&pid, 1, "the IPv6 child");
	expect_all(V6, V6_REPLY, 4, "the parent's IPv6 end");
	if (queued(V6, SIOCOUTQ, "SIOCOUTQ"))
		test_fail("the parent's IPv6 bytes are still unacknowledged after the answer");
	test_pass();
}
