/*
 * A tree in net and pid namespaces of its own (with ZDTM_NET_USERNS, a user namespace of
 * its own too) with nftables tables of several families: an inet one with a base chain on
 * the input hook, a regular chain it jumps to, named sets (an interval one, a
 * concatenation), an anonymous set, a verdict map, a named counter and rules with counter
 * values; an ip6 one with a set of addresses; a bridge and an arp one with base chains.
 * With ZDTM_NET_NFT_IPT, an iptables-nft rule too (its table ip filter). After restore:
 * `nft list ruleset` prints the same bytes, and the rules act in the restored namespace: a
 * connection to a listener on lo is reset by the reject rule.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RULESET_MAX  (64 << 10)
#define REJECTED_PORT 7777

static const char ruleset[] =
	"table inet zdtm_filter {\n"
	"\tcounter zdtm_hits { packets 7 bytes 700 }\n"
	"\tset blocked4 { type ipv4_addr; flags interval; "
	"elements = { 10.99.0.0/16, 192.0.2.1 } }\n"
	"\tset flows { type ipv4_addr . inet_service; elements = { 10.1.1.1 . 80 } }\n"
	"\tmap port_verdict { type inet_service : verdict; "
	"elements = { 8080 : drop, 8081 : accept } }\n"
	"\tchain logged {\n\t\tcounter packets 3 bytes 180 return\n\t}\n"
	"\tchain input {\n"
	"\t\ttype filter hook input priority 0; policy accept;\n"
	"\t\tip saddr @blocked4 drop\n"
	"\t\tip saddr . tcp dport @flows counter name zdtm_hits drop\n"
	"\t\ttcp dport { 22, 2222 } jump logged\n"
	"\t\ttcp dport vmap @port_verdict\n"
	"\t\tiif lo tcp dport 7777 reject with tcp reset\n" /* REJECTED_PORT */
	"\t}\n"
	"}\n"
	"table ip6 zdtm_six {\n"
	"\tset blocked6 { type ipv6_addr; elements = { fd99::1, fd99::2 } }\n"
	"\tchain out {\n\t\ttype filter hook output priority 10;\n\t\tip6 daddr @blocked6 drop\n\t}\n"
	"}\n"
	"table bridge zdtm_br {\n\tchain forwarded {\n\t\ttype filter hook forward priority 0;\n\t}\n}\n"
	"table arp zdtm_arp {\n\tchain arp_in {\n\t\ttype filter hook input priority 0;\n\t}\n}\n";

static void run(const char *cmd)
{
	int status = system(cmd);

	if (status)
		test_fail("`%s`: wait status %#x", cmd, status);
}

/* What `nft list ruleset` prints now (malloc'ed). */
static char *ruleset_snapshot(void)
{
	FILE *out = popen("nft list ruleset", "r");
	char *buf = calloc(1, RULESET_MAX);
	size_t n;

	if (!out || !buf)
		test_fail_errno("nft list ruleset");
	n = fread(buf, 1, RULESET_MAX - 1, out);
	if (pclose(out) || n == RULESET_MAX - 1)
		test_fail("nft list ruleset failed or printed too much (%zu bytes)", n);
	return buf;
}

/* The reject rule resets a connection to a listener on lo: refused, not accepted. */
static void expect_rejected(const char *when)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(REJECTED_PORT),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int listener = socket(AF_INET, SOCK_STREAM, 0), sk = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;

	if (listener < 0 || sk < 0 ||
	    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(listener, (struct sockaddr *)&addr, sizeof(addr)) || listen(listener, 1))
		test_fail("listener on port %d %s: %s", REJECTED_PORT, when, strerror(errno));
	if (!connect(sk, (struct sockaddr *)&addr, sizeof(addr)) || errno != ECONNREFUSED)
		test_fail("a connection to port %d %s was not reset by the reject rule (%s)",
			  REJECTED_PORT, when, strerror(errno));
	close(sk);
	close(listener);
}

static void expect_same_ruleset(const char *before)
{
	char *after = ruleset_snapshot();

	if (strcmp(before, after))
		test_fail("the nftables ruleset differs after restore:\n--- before\n%s--- after\n%s",
			  before, after);
	free(after);
}

int main(int argc, char **argv)
{
	char *before;
	FILE *nft;

	test_init(argc, argv);
	test_launch_netns_root(getenv("ZDTM_NET_USERNS") != NULL);
	nft = popen("nft -f -", "w");
	if (!nft || fwrite(ruleset, 1, sizeof(ruleset) - 1, nft) != sizeof(ruleset) - 1 ||
	    pclose(nft))
		test_fail("nft -f could not load the test's ruleset");
	run("nft list table inet zdtm_filter >/dev/null");
	/* A table of iptables-nft's: the iptables images' (its image check says so). */
	if (getenv("ZDTM_NET_NFT_IPT"))
		run("iptables -A INPUT -p icmp -j DROP");
	expect_rejected("before the dump");
	before = ruleset_snapshot();
	test_ready();
	test_wait_sigterm();

	expect_same_ruleset(before);
	expect_rejected("after the restore");
	free(before);
	test_pass();
}
