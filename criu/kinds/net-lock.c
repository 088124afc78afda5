/*
 * The network lock, --network-lock iptables (CRIU's, the default; nftables is the other
 * method of struct netlock_ops, netlock-nft.c). A dumped connection must neither move nor
 * get a reset between its dump and its restore, its peer in the tree or not: in criu's own
 * net namespace each connection gets two rules (netlock_conn(), called by sk-tcp.c); a
 * tree with a net namespace of its own gets the whole namespace locked by CRIU's chain.
 * Both let through what carries NET_LOCK_MARK: the segments criu forges at restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <unistd.h>

#include "cr_options.h"
#include "kerndat.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "net-nft.h"
#include "netlock-nft.h"
#include "tool.h"

/*
 * How an iptables tool runs here: in net namespace ns_fd (-1: criu's own), with input on
 * its stdin (NULL: none), its words to the log, or nowhere when quiet. Its exit status
 * (127: not installed), or -errno.
 */
static struct tool_run ipt_tool(const char *const argv[], int ns_fd, const char *input,
				bool quiet)
{
	return (struct tool_run){ .argv = argv,
				  .net_ns_fd = ns_fd,
				  .in_fd = -1,
				  .input = input,
				  .out_fd = -1,
				  .quiet = quiet };
}

/* ------------------------------------------------- one connection's rules ---- */

/* One rule: 0 done, 1 not (NETLOCK_DEL: no such rule), -errno. */
static int conn_rule(bool v6, enum netlock_op op, bool input, const char *self,
		     uint16_t self_port, const char *peer, uint16_t peer_port)
{
	static const char *const ops[] = { "-I", "-D" };
	char sport[8], dport[8], mark[16];
	const char *argv[] = { v6 ? "ip6tables" : "iptables", "-w", "-t", "filter", ops[op],
			       input ? "INPUT" : "OUTPUT", "--protocol", "tcp", "-m", "mark", "!",
			       "--mark", mark, "--source", input ? peer : self, "--sport", sport,
			       "--destination", input ? self : peer, "--dport", dport, "-j", "DROP",
			       NULL };
	int ret;

	snprintf(mark, sizeof(mark), "%#x", NET_LOCK_MARK);
	snprintf(sport, sizeof(sport), "%u", input ? peer_port : self_port);
	snprintf(dport, sizeof(dport), "%u", input ? self_port : peer_port);
	/* A missing rule is no news: the tool's words are not criu's. */
	ret = tool_run(ipt_tool(argv, -1, NULL, op == NETLOCK_DEL));
	if (ret <= 0)
		return ret;
	return ret == 1 ? 1 : -EIO;
}

static int ipt_conn(enum netlock_op op, const uint8_t *self, uint16_t self_port,
		    const uint8_t *peer, uint16_t peer_port)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	bool v6 = memcmp(self, mapped, 12) != 0;
	char s[INET6_ADDRSTRLEN], p[INET6_ADDRSTRLEN];
	int ret;

	inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? self : self + 12, s, sizeof(s));
	inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? peer : peer + 12, p, sizeof(p));
	ret = conn_rule(v6, op, true, s, self_port, p, peer_port);
	if (ret >= 0)
		ret = conn_rule(v6, op, false, s, self_port, p, peer_port) ?: ret;
	return ret;
}

/* ------------------------------------------------- a whole net namespace ---- */

/*
 * CRIU's lock of a net namespace, in iptables-restore's words (loaded with --noflush, so
 * that the namespace's own rules stay): a chain that accepts the marked packets and drops
 * the others, first in INPUT and OUTPUT. Removed as CRIU removes it, so that either criu
 * unlocks what the other locked.
 */
#define LOCK_CHAIN "CRIU"
#define LOCK_TABLE_MADE "criu-made-this-table"
static const char ns_lock_script[] = "*filter\n"
				     ":" LOCK_CHAIN " - [0:0]\n"
				     "-I INPUT -j " LOCK_CHAIN "\n"
				     "-I OUTPUT -j " LOCK_CHAIN "\n"
				     "-A " LOCK_CHAIN " -m mark --mark 0xc114 -j ACCEPT\n"
				     "-A " LOCK_CHAIN " -j DROP\n"
				     "COMMIT\n";
/*
 * Where the namespace had no filter table in nftables, iptables-nft makes one for the
 * lock, which would stay (empty) after it: the chain then carries this rule, which tells
 * whichever criu unlocks the namespace (at restore another process than the one that
 * locked it) to remove the table with the chain. CRIU's unlock flushes it with the chain.
 */
static const char ns_lock_table_made_rule[] = "*filter\n"
					      "-A " LOCK_CHAIN " -m comment --comment "
					      LOCK_TABLE_MADE " -j RETURN\n"
					      "COMMIT\n";
static const char ns_unlock_script[] = "*filter\n"
				       ":" LOCK_CHAIN " - [0:0]\n"
				       "-D INPUT -j " LOCK_CHAIN "\n"
				       "-D OUTPUT -j " LOCK_CHAIN "\n"
				       "-X " LOCK_CHAIN "\n"
				       "COMMIT\n";

static const char *family_name(bool v6)
{
	return v6 ? "IPv6" : "IPv4";
}

static int apply_script(bool v6, int ns_fd, const char *script, bool quiet)
{
	const char *const argv[] = { v6 ? "ip6tables-restore" : "iptables-restore", "-w",
				     "--noflush", NULL };

	return tool_run(ipt_tool(argv, ns_fd, script, quiet));
}

/* Whether the namespace has the lock's chain: 1 yes, 0 no, -errno. */
static int has_lock_chain(bool v6, int ns_fd)
{
	const char *const argv[] = { v6 ? "ip6tables" : "iptables", "-w", "-t", "filter", "-n",
				     "-L", LOCK_CHAIN, NULL };
	int ret = tool_run(ipt_tool(argv, ns_fd, NULL, true));

	if (ret == 127) {
		pr_err("%s: is it installed?\n", argv[0]);
		return -ENOENT;
	}
	return ret < 0 ? ret : ret == 0;
}

/* Whether the lock's chain says the lock made the filter table (ns_lock_table_made_rule). */
static bool lock_made_table(bool v6, int ns_fd)
{
	const char *const argv[] = { v6 ? "ip6tables" : "iptables", "-w", "-t", "filter", "-C",
				     LOCK_CHAIN, "-m", "comment", "--comment", LOCK_TABLE_MADE,
				     "-j", "RETURN", NULL };

	return tool_run(ipt_tool(argv, ns_fd, NULL, true)) == 0;
}

bool netlock_made_filter_table(bool v6)
{
	return lock_made_table(v6, -1);
}

static int unlock_family(bool v6, int ns_fd)
{
	const char *const drop_table[] = { "nft", "delete", "table", v6 ? "ip6" : "ip", "filter",
					   NULL };
	int ret = has_lock_chain(v6, ns_fd);
	bool made_table;

	if (ret <= 0)
		return ret;
	made_table = lock_made_table(v6, ns_fd);
	ret = apply_script(v6, ns_fd, ns_unlock_script, false);
	if (ret) {
		pr_err("the %s network lock of a net namespace could not be removed (%s %d)\n",
		       family_name(v6), ret < 0 ? "error" : "exit status", ret);
		return -EIO;
	}
	/* Left empty by the chain's removal; nft alone deletes a table. */
	if (made_table && tool_run(ipt_tool(drop_table, ns_fd, NULL, false)))
		pr_warn("the %s filter table the network lock made could not be removed\n",
			family_name(v6));
	return 0;
}

static int ipt_ns_unlock(int ns_fd)
{
	int ret = unlock_family(false, ns_fd);

	return unlock_family(true, ns_fd) ?: ret;
}

static int lock_family(bool v6, int ns_fd)
{
	uint8_t family = v6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
	int had_table = nft_has_table(ns_fd, family, "filter");
	int ret = had_table < 0 ? had_table : apply_script(v6, ns_fd, ns_lock_script, false);

	/* Marked only where iptables-nft made the table: a legacy one is never made so. */
	if (!ret && !had_table && nft_has_table(ns_fd, family, "filter") == 1)
		ret = apply_script(v6, ns_fd, ns_lock_table_made_rule, false);
	return ret;
}

static int ipt_ns_lock(int ns_fd)
{
	for (int v6 = 0; v6 <= 1; v6++) {
		int ret = lock_family(v6, ns_fd);

		if (!ret)
			continue;
		pr_err("cannot lock the %s network of a net namespace with %s (%s %d)%s\n",
		       family_name(v6), v6 ? "ip6tables-restore" : "iptables-restore",
		       ret < 0 ? "error" : "exit status", ret,
		       ret == 127 ? ": is it installed?" : "");
		if (v6)
			unlock_family(false, ns_fd);
		return -EIO;
	}
	return 0;
}

static const struct netlock_ops iptables_lock = {
	.name = "iptables",
	.conn = ipt_conn,
	.ns_lock = ipt_ns_lock,
	.ns_unlock = ipt_ns_unlock,
};

/* Restore: the method the dump locked with (its inventory says), -1 until told. */
static int dump_lock_nft = -1;

void netlock_use_dump_method(bool nft)
{
	dump_lock_nft = nft;
}

bool netlock_is_nft(void)
{
	return dump_lock_nft >= 0 ? dump_lock_nft : opts.network_lock_nft;
}

/*
 * The method --network-lock names (iptables, the default, or nftables: netlock-nft.c); at
 * restore the dump's, whose lock is the one to remove whatever the command line says.
 */
static const struct netlock_ops *method(void)
{
	return netlock_is_nft() ? &nftables_lock : &iptables_lock;
}

int netlock_conn(enum netlock_op op, const uint8_t *self, uint16_t self_port,
		 const uint8_t *peer, uint16_t peer_port)
{
	return method()->conn(op, self, self_port, peer, peer_port);
}

bool netlock_is_lock_rule(const char *line, size_t len)
{
	static const char *const exact[] = { "-A INPUT -j " LOCK_CHAIN,
					     "-A OUTPUT -j " LOCK_CHAIN };
	static const char *const prefixes[] = { ":" LOCK_CHAIN " ", "-A " LOCK_CHAIN " " };

	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (len == strlen(exact[i]) && !memcmp(line, exact[i], len))
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (len >= strlen(prefixes[i]) && !memcmp(line, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* ------------------------------------------------------------- pipelines ---- */

/* Dump: the tree's net namespace while criu holds its lock; -1: none held. */
static int locked_ns_fd = -1;

int netlock_dump_tree(void)
{
	const struct ns_id *ns = ns_root_own(NS_NET);
	char path[64];
	int fd, ret;

	if (!ns || opts.network_lock_skip)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", ns->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("net namespace %u: cannot open %s", ns->id, path);
		return -errno;
	}
	ret = method()->ns_lock(fd);
	if (ret) {
		close(fd);
		return ret;
	}
	locked_ns_fd = fd;
	pr_info("net namespace %u: locked (%s)\n", ns->id, method()->name);
	return 0;
}

void netlock_dump_release(bool killed)
{
	if (locked_ns_fd < 0)
		return;
	/* A killed tree's namespace stays locked until its restore. */
	if (!killed && !method()->ns_unlock(locked_ns_fd))
		pr_info("the tree's net namespace: unlocked\n");
	close(locked_ns_fd);
	locked_ns_fd = -1;
}

int netlock_restore_lock(void)
{
	if (opts.network_lock_skip)
		return 0;
	return method()->ns_lock(-1);
}

int netlock_restore_unlock(pid_t root_host)
{
	char path[64];
	int fd, ret;

	if (!ns_root_own(NS_NET) || opts.network_lock_skip)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", root_host);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("cannot open %s to unlock the tree's network", path);
		return -errno;
	}
	ret = method()->ns_unlock(fd);
	close(fd);
	if (!ret)
		pr_info("the tree's net namespace: unlocked\n");
	return ret;
}

void netlock_restore_failed(void)
{
	int fd;

	if (!opts.join_ns.net || opts.network_lock_skip)
		return;
	fd = open(opts.join_ns.net, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!method()->ns_unlock(fd))
		pr_info("--join-ns net:%s: unlocked after the failed restore\n", opts.join_ns.net);
	close(fd);
}

/* ---------------------------------------------------------------- check ---- */

/*
 * In a scratch net namespace: the lock goes on and off, and both backends' tables can be
 * saved and loaded (net-tables.c: legacy tables by iptables-legacy-*, the others by
 * iptables-nft-*), for both families. The child's exit status says.
 */
static bool tools_work(void)
{
	static const char *const tools[][2] = {
		{ "iptables-legacy-save", "iptables-legacy-restore" },
		{ "ip6tables-legacy-save", "ip6tables-legacy-restore" },
		{ "iptables-nft-save", "iptables-nft-restore" },
		{ "ip6tables-nft-save", "ip6tables-nft-restore" },
	};

	for (int v6 = 0; v6 <= 1; v6++)
		if (apply_script(v6, -1, ns_lock_script, true) || has_lock_chain(v6, -1) != 1 ||
		    apply_script(v6, -1, ns_unlock_script, true) || has_lock_chain(v6, -1) != 0)
			return false;
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		const char *const save[] = { tools[i][0], NULL };
		const char *const restore[] = { tools[i][1], "-w", NULL };

		if (tool_run(ipt_tool(save, -1, NULL, true)) ||
		    tool_run(ipt_tool(restore, -1, "*filter\nCOMMIT\n", true)))
			return false;
	}
	return true;
}

bool netlock_has_ipt_legacy(void)
{
	return probe_in_scratch_netns(tools_work);
}
