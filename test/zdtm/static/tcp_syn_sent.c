/*
 * Connecting TCP sockets (SYN_SENT) in pid and net namespaces of the tree's own (with
 * ZDTM_NET_USERNS, a user namespace too; with ZDTM_SYN_SENT_HOSTNS, in the runner's, where
 * criu locks each connection by its own rules), one per family, to a listener of the tree
 * whose port an iptables rule (comment "zdtm_syn_sent") closes, so that their SYNs go unanswered:
 * the IPv4 one non-blocking, the IPv6 one made blocking again after its connect(). After
 * restore (or after a dump that failed once they were locked, as the post-dump action
 * script makes it fail) each is still connecting, with its address and file flags as
 * dumped, and no lock is left (no chain CRIU, no rule of the lock's mark for its port);
 * then the rule goes, the listener accepts each (the kernel sends the SYN again), from
 * the connecting socket's own port, and bytes go both ways.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SYN_SENT 2
#define RULE                                                                               \
	"INPUT -p tcp --dport %u --tcp-flags SYN,ACK SYN -m comment --comment zdtm_syn_sent " \
	"-j DROP"

struct conn {
	int family;
	const char *loopback;
	int listener, client;
	uint16_t port; /* the listener's */
	int flags; /* the client's, as dumped */
	struct sockaddr_storage self;
	socklen_t self_len;
};

static void fill_addr(int family, const char *text, uint16_t port, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		inet_pton(AF_INET, text, &in->sin_addr);
		*len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		inet_pton(AF_INET6, text, &in6->sin6_addr);
		*len = sizeof(*in6);
	}
}

/* The rule that drops the SYNs to c's listener: -A (add) or -D. */
static void port_rule(const struct conn *c, const char *op)
{
	char cmd[256], rule[160];

	snprintf(rule, sizeof(rule), RULE, c->port);
	snprintf(cmd, sizeof(cmd), "%s -w %s %s", c->family == AF_INET ? "iptables-nft" :
					"ip6tables-nft", op, rule);
	if (system(cmd))
		test_fail("`%s` failed", cmd);
}

static void start_connect(struct conn *c, bool blocking_after)
{
	struct sockaddr_storage ss;
	socklen_t len;

	fill_addr(c->family, c->loopback, 0, &ss, &len);
	c->listener = socket(c->family, SOCK_STREAM, 0);
	if (c->listener < 0 || bind(c->listener, (struct sockaddr *)&ss, len) ||
	    listen(c->listener, 4) || getsockname(c->listener, (struct sockaddr *)&ss, &len))
		test_fail_errno("listen");
	c->port = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* sin6_port is there too */
	port_rule(c, "-A");
	c->client = socket(c->family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->client < 0)
		test_fail_errno("socket");
	if (!connect(c->client, (struct sockaddr *)&ss, len) || errno != EINPROGRESS)
		test_fail_errno("connect did not start");
	if (blocking_after && fcntl(c->client, F_SETFL, 0))
		test_fail_errno("F_SETFL");
	c->flags = fcntl(c->client, F_GETFL);
	c->self_len = sizeof(c->self);
	if (getsockname(c->client, (struct sockaddr *)&c->self, &c->self_len))
		test_fail_errno("getsockname");
}

static int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len))
		test_fail_errno("TCP_INFO");
	return ti.tcpi_state;
}

static void expect_connecting(const struct conn *c)
{
	struct sockaddr_storage self;
	socklen_t len = sizeof(self);

	if (tcp_state(c->client) != SYN_SENT)
		test_fail("family %d: TCP state %d after restore, not SYN_SENT", c->family,
			  tcp_state(c->client));
	if (fcntl(c->client, F_GETFL) != c->flags)
		test_fail("family %d: file flags %#x after restore, %#x before", c->family,
			  fcntl(c->client, F_GETFL), c->flags);
	if (getsockname(c->client, (struct sockaddr *)&self, &len) || len != c->self_len ||
	    memcmp(&self, &c->self, len))
		test_fail("family %d: its address changed", c->family);
}

/* Whether any table of either family and backend has the lock's chain or a rule of c's. */
static bool lock_left(const struct conn *c)
{
	FILE *f = popen("{ iptables-nft-save; ip6tables-nft-save; iptables-legacy-save; "
			"ip6tables-legacy-save; } 2>/dev/null",
			"r");
	char line[512], sport[32], dport[32];
	uint16_t port = ntohs(((struct sockaddr_in *)&c->self)->sin_port);
	bool found = false;

	if (!f)
		test_fail_errno("popen iptables-save");
	snprintf(sport, sizeof(sport), "--sport %u ", port);
	snprintf(dport, sizeof(dport), "--dport %u ", port);
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "CRIU") ||
			 (strstr(line, "0xc114") && (strstr(line, sport) || strstr(line, dport)));
	pclose(f);
	return found;
}

static void expect_connected(const struct conn *c)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	char buf[6] = "";
	int fd = accept(c->listener, (struct sockaddr *)&peer, &len);
	struct pollfd pfd = { .fd = c->client, .events = POLLOUT };

	if (fd < 0)
		test_fail_errno("accept");
	if (len != c->self_len || memcmp(&peer, &c->self, len))
		test_fail("family %d: the accepted connection is not from the restored socket",
			  c->family);
	/* The non-blocking one: connected once writable. */
	if (poll(&pfd, 1, -1) != 1 || tcp_state(c->client) != 1)
		test_fail("family %d: not established (state %d)", c->family,
			  tcp_state(c->client));
	if (write(c->client, "hello", 5) != 5 || write(fd, "olleh", 5) != 5)
		test_fail_errno("write");
	read_exact(fd, buf, 5, "the client's bytes");
	if (memcmp(buf, "hello", 5))
		test_fail("family %d: the listener read '%s'", c->family, buf);
	read_exact(c->client, buf, 5, "the accepted socket's bytes");
	if (memcmp(buf, "olleh", 5))
		test_fail("family %d: the client read '%s'", c->family, buf);
	close(fd);
}

int main(int argc, char **argv)
{
	struct conn conns[] = { { .family = AF_INET, .loopback = "127.0.0.1" },
				{ .family = AF_INET6, .loopback = "::1" } };

	test_init(argc, argv);
	if (!getenv("ZDTM_SYN_SENT_HOSTNS"))
		test_launch_netns_root(getenv("ZDTM_NET_USERNS") != NULL);
	start_connect(&conns[0], false);
	start_connect(&conns[1], true);

	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < 2; i++) {
		expect_connecting(&conns[i]);
		if (lock_left(&conns[i]))
			test_fail("family %d: the network lock is left", conns[i].family);
	}
	for (int i = 0; i < 2; i++)
		port_rule(&conns[i], "-D");
	for (int i = 0; i < 2; i++)
		expect_connected(&conns[i]);
	test_pass();
}
