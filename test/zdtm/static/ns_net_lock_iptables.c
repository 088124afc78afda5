/*
 * A tree in pid and net namespaces of its own (with ZDTM_NET_USERNS, in a user namespace of
 * its own too, which owns the net one) with iptables rules of both backends and both
 * families: made through iptables-nft (filter with a user chain and a policy, nat) and
 * through iptables-legacy (filter, mangle). After restore each of iptables-nft-save,
 * ip6tables-nft-save, iptables-legacy-save and ip6tables-legacy-save prints what it printed
 * before the dump, byte for byte but for its comments and counters, and no table has the
 * network lock's chain CRIU (the dump saved the tables while it was there, the restore
 * had it there until the tasks were restored). With ZDTM_IPT_NFT_ONLY, the nft rules alone
 * (what upstream criu saves here: its cross tests), and so with ZDTM_NET_USERNS (below).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SNAPSHOT_MAX (64 << 10)

static const char *const nft_rules[] = {
	"iptables-nft -w -N ZDTM",
	"iptables-nft -w -A ZDTM -p tcp --dport 2222 -j REJECT",
	"iptables-nft -w -A ZDTM -j RETURN",
	"iptables-nft -w -A OUTPUT -d 10.9.9.9/32 -j ZDTM",
	"iptables-nft -w -A INPUT -p tcp --dport 2223 -j DROP",
	"iptables-nft -w -P FORWARD DROP",
	"iptables-nft -w -t nat -A POSTROUTING -s 10.1.0.0/16 -j MASQUERADE",
	"ip6tables-nft -w -A INPUT -s 2001:db8::1/128 -j DROP",
	NULL,
};

static const char *const legacy_rules[] = {
	"iptables-legacy -w -A INPUT -p icmp -j DROP",
	"iptables-legacy -w -t mangle -A PREROUTING -p udp -j MARK --set-mark 5",
	"ip6tables-legacy -w -A INPUT -p udp --dport 5353 -j ACCEPT",
	NULL,
};

static const char *const savers[] = { "iptables-nft-save", "ip6tables-nft-save",
				      "iptables-legacy-save", "ip6tables-legacy-save" };
#define NR_SAVERS (sizeof(savers) / sizeof(savers[0]))

static void run_all(const char *const *cmds)
{
	for (; *cmds; cmds++)
		if (system(*cmds))
			test_fail("`%s` failed", *cmds);
}

/* What saver prints, without its comments and its chains' counters ("[0:0]"). */
static void snapshot(const char *saver, char *out, size_t size)
{
	FILE *f = popen(saver, "r");
	char line[1024];
	size_t len = 0;

	if (!f)
		test_fail_errno("popen iptables-save");
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *counters = line[0] == ':' ? strstr(line, " [") : NULL;

		if (line[0] == '#')
			continue;
		if (counters)
			strcpy(counters, "\n");
		if (len + strlen(line) >= size)
			test_fail("%s printed more than %zu bytes", saver, size);
		strcpy(out + len, line);
		len += strlen(line);
	}
	if (pclose(f))
		test_fail("%s failed", saver);
}

int main(int argc, char **argv)
{
	static char before[NR_SAVERS][SNAPSHOT_MAX], after[SNAPSHOT_MAX], lock_file[64];

	/*
	 * A net namespace made with its user namespace at once has its legacy tables' proc
	 * files (ip_tables_names) owned by the machine's root (the user namespace had no map
	 * yet), which iptables-legacy-save must read: the nft rules alone then.
	 */
	bool legacy = !getenv("ZDTM_IPT_NFT_ONLY") && !getenv("ZDTM_NET_USERNS");
	size_t nr_savers = legacy ? NR_SAVERS : 2;

	test_init(argc, argv);
	test_launch_netns_root(getenv("ZDTM_NET_USERNS") != NULL);
	/*
	 * The legacy tools' lock file, /run/xtables.lock, is not the user namespace root's to
	 * open, nor is the test's directory: one of its own in /tmp.
	 */
	snprintf(lock_file, sizeof(lock_file), "/tmp/zdtm-ns-net-lock-%d.lock", getppid());
	if (getenv("ZDTM_NET_USERNS") && setenv("XTABLES_LOCKFILE", lock_file, 1))
		test_fail_errno("setenv XTABLES_LOCKFILE");
	run_all(nft_rules);
	if (legacy)
		run_all(legacy_rules);
	for (size_t i = 0; i < nr_savers; i++)
		snapshot(savers[i], before[i], SNAPSHOT_MAX);
	if (!strstr(before[0], "-j ZDTM") || !strstr(before[1], "2001:db8::1"))
		test_fail("iptables-nft-save does not show the rules just made:\n%s", before[0]);

	test_ready();
	test_wait_sigterm();

	for (size_t i = 0; i < nr_savers; i++) {
		snapshot(savers[i], after, SNAPSHOT_MAX);
		if (strcmp(before[i], after))
			test_fail("%s before the dump:\n%s\nafter the restore:\n%s", savers[i],
				  before[i], after);
		if (strstr(after, "CRIU"))
			test_fail("%s: the network lock's chain is left:\n%s", savers[i], after);
	}
	unlink(lock_file);
	test_pass();
}
