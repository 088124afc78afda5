/*
 * --network-lock nftables, as CRIU locks with it: a table "inet CRIU-PID" in criu's net
 * namespace whose input and output chains drop the TCP segments of the connections in its
 * sets (one element per connection, its 4-tuple as seen from the tree's side) unless they
 * carry NET_LOCK_MARK, which criu's own segments do; in a tree's own net namespace, the
 * same table dropping every packet not marked. The peer retransmits what the lock dropped
 * once the connection is back. net-lock.c calls it through struct netlock_ops.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kerndat.h"
#include "log.h"
#include "namespaces.h"
#include "net-nft.h"
#include "netlock-nft.h"
#include "pstree.h"
#include "tool.h"

/* NET_LOCK_MARK, as nft reads it: what criu's own segments carry to pass the lock. */
#define NETLOCK_NFT_MARK "0xc114"
/* A table name's length, as nf_tables bounds it (NFT_TABLE_MAXNAMELEN). */
#define NFT_NAME_MAX 256

/*
 * The table's definition: %1$s its name. A segment out from self matches the element as
 * saddr . sport . daddr . dport, one in from the peer as daddr . dport . saddr . sport.
 */
static const char lock_table_fmt[] =
	"table %1$s {\n"
	"\tset conns4 { type ipv4_addr . inet_service . ipv4_addr . inet_service; }\n"
	"\tset conns6 { type ipv6_addr . inet_service . ipv6_addr . inet_service; }\n"
	"\tchain output {\n"
	"\t\ttype filter hook output priority 0; policy accept;\n"
	"\t\tmeta mark " NETLOCK_NFT_MARK " accept\n"
	"\t\tip saddr . tcp sport . ip daddr . tcp dport @conns4 drop\n"
	"\t\tip6 saddr . tcp sport . ip6 daddr . tcp dport @conns6 drop\n"
	"\t}\n"
	"\tchain input {\n"
	"\t\ttype filter hook input priority 0; policy accept;\n"
	"\t\tmeta mark " NETLOCK_NFT_MARK " accept\n"
	"\t\tip daddr . tcp dport . ip saddr . tcp sport @conns4 drop\n"
	"\t\tip6 daddr . tcp dport . ip6 saddr . tcp sport @conns6 drop\n"
	"\t}\n"
	"}\n";

/*
 * "inet CRIU-PID": PID the root's as the images name it, so that restore finds the table
 * its dump made: criu's pid of it (CRIU's name) where it has no pid namespace of its own,
 * 1 where it is the init of one (two such trees dumped at once share the table: each
 * takes out only its own connections, and the last the table).
 */
static void lock_table_name(char *name, size_t size)
{
	snprintf(name, size, "inet CRIU-%d", pidns_own() ? 1 : root_item->pid);
}

/*
 * nft -f with script as its input, in net namespace ns_fd (-1: criu's own), its words in
 * the log (quiet: nowhere). Its exit status (127: not installed), or -errno; the caller
 * says what failed.
 */
static int nft_script(const char *script, int ns_fd, bool quiet)
{
	static const char *const argv[] = {"nft", "-f", "-", NULL};
	int status;

	status = tool_run((struct tool_run){ .argv = argv,
					     .net_ns_fd = ns_fd,
					     .in_fd = -1,
					     .input = script,
					     .out_fd = -1,
					     .quiet = quiet });
	if (status)
		pr_debug("nft -f failed on \"%.*s\" (exit status %d)\n",
			 (int)strcspn(script, "{\n"), script, status);
	return status;
}

/* The element of a connection, in set conns4 or conns6 ("{ A . P . B . Q }"). */
static const char *conn_element(const uint8_t *self, uint16_t self_port, const uint8_t *peer,
				uint16_t peer_port, char *buf, size_t size)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	bool v6 = memcmp(self, mapped, 12) != 0;
	char s[INET6_ADDRSTRLEN], p[INET6_ADDRSTRLEN];

	inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? self : self + 12, s, sizeof(s));
	inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? peer : peer + 12, p, sizeof(p));
	snprintf(buf, size, "%s { %s . %u . %s . %u }", v6 ? "conns6" : "conns4", s, self_port, p,
		 peer_port);
	return buf;
}

/* The table, made where there is none (an earlier connection of this dump made it). */
static int make_lock_table(const char *table)
{
	char script[1024];
	char check[128];

	snprintf(check, sizeof(check), "list table %s\n", table);
	if (nft_script(check, -1, true) == 0)
		return 0;
	snprintf(script, sizeof(script), lock_table_fmt, table);
	return nft_script(script, -1, false) ? -EIO : 0;
}

/* The table goes once no connection is in it. */
static void drop_lock_table_if_empty(const char *table)
{
	const char *const argv[] = {"nft", "list", "table", table, NULL};
	char script[128];
	char *listed;
	size_t len;

	if (tool_run((struct tool_run){ .argv = argv,
					.net_ns_fd = -1,
					.in_fd = -1,
					.out_fd = -1,
					.output = &listed,
					.output_len = &len,
					.must_succeed = true,
					.as_ns_root = true }))
		return;
	if (!strstr(listed, "elements = ")) {
		snprintf(script, sizeof(script), "delete table %s\n", table);
		if (nft_script(script, -1, false))
			pr_warn("%s: the network lock's table could not be removed\n", table);
	}
	free(listed);
}

static int nft_conn(enum netlock_op op, const uint8_t *self, uint16_t self_port,
		    const uint8_t *peer, uint16_t peer_port)
{
	char table[64], element[160], script[256];
	int ret;

	lock_table_name(table, sizeof(table));
	conn_element(self, self_port, peer, peer_port, element, sizeof(element));
	if (op == NETLOCK_ADD) {
		ret = make_lock_table(table);
		snprintf(script, sizeof(script), "add element %s %s\n", table, element);
		return ret ?: nft_script(script, -1, false) ? -EIO : 0;
	}
	/* No table, or not in it: not locked (by this method). */
	snprintf(script, sizeof(script), "delete element %s %s\n", table, element);
	if (nft_script(script, -1, true))
		return 1;
	drop_lock_table_if_empty(table);
	return 0;
}

/*
 * CRIU's lock of a whole net namespace: the same table, its chains dropping every packet
 * but the marked ones.
 */
static const char ns_lock_table_fmt[] = "table %1$s {\n"
					"\tchain output {\n"
					"\t\ttype filter hook output priority 0; policy drop;\n"
					"\t\tmeta mark " NETLOCK_NFT_MARK " accept\n"
					"\t}\n"
					"\tchain input {\n"
					"\t\ttype filter hook input priority 0; policy drop;\n"
					"\t\tmeta mark " NETLOCK_NFT_MARK " accept\n"
					"\t}\n"
					"}\n";

static int nft_ns_lock(int ns_fd)
{
	char table[64], script[512];

	lock_table_name(table, sizeof(table));
	snprintf(script, sizeof(script), ns_lock_table_fmt, table);
	if (!nft_script(script, ns_fd, false))
		return 0;
	pr_err("cannot lock the network of a net namespace with nftables (table %s)\n", table);
	return -EIO;
}

static int nft_ns_unlock(int ns_fd)
{
	char table[64], script[128];

	lock_table_name(table, sizeof(table));
	snprintf(script, sizeof(script), "list table %s\n", table);
	if (nft_script(script, ns_fd, true))
		return 0; /* not locked */
	snprintf(script, sizeof(script), "delete table %s\n", table);
	if (!nft_script(script, ns_fd, false))
		return 0;
	pr_err("the nftables network lock of a net namespace could not be removed (table %s)\n",
	       table);
	return -EIO;
}

const struct netlock_ops nftables_lock = {
	.name = "nftables",
	.conn = nft_conn,
	.ns_lock = nft_ns_lock,
	.ns_unlock = nft_ns_unlock,
};

bool netlock_nft_is_lock_table(const char *family, const char *name)
{
	char table[64], other[NFT_NAME_MAX + 16];

	lock_table_name(table, sizeof(table));
	snprintf(other, sizeof(other), "%s %s", family, name);
	return !strcmp(table, other);
}

/* In a scratch net namespace: the lock table made with a connection in it. */
static bool lock_in_scratch_ns(void)
{
	char script[1024];

	snprintf(script, sizeof(script), lock_table_fmt, "inet CRIU-probe");
	return !nft_script(script, -1, true) &&
	       !nft_script("add element inet CRIU-probe conns4 { 127.0.0.1 . 1 . 127.0.0.1 . 2 }\n"
			   "add element inet CRIU-probe conns6 { ::1 . 1 . ::1 . 2 }\n",
			   -1, true);
}

bool netlock_nft_usable(void)
{
	return tool_installed("nft") && probe_in_scratch_netns(lock_in_scratch_ns);
}
