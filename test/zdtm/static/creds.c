/*
 * Credentials survive: real/effective/saved/fs uids and gids, supplementary groups,
 * the capability sets (effective, permitted, inheritable, bounding, ambient), the
 * securebits and keep-caps, all set to values a fresh root process does not have.
 */
#include <grp.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

struct creds_snapshot {
	uid_t uid[3];
	gid_t gid[3];
	gid_t groups[32];
	int nr_groups;
	struct __user_cap_data_struct caps[2];
	char cap_bnd[32], cap_amb[32], uid_line[64], gid_line[64];
	int keepcaps, securebits;
};

static struct creds_snapshot before, after;

static void snapshot(struct creds_snapshot *snap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };

	memset(snap, 0, sizeof(*snap));
	if (getresuid(&snap->uid[0], &snap->uid[1], &snap->uid[2]) ||
	    getresgid(&snap->gid[0], &snap->gid[1], &snap->gid[2]))
		test_fail_errno("getres[ug]id");
	snap->nr_groups = getgroups(32, snap->groups);
	if (snap->nr_groups < 0)
		test_fail_errno("getgroups");
	if (syscall(SYS_capget, &hdr, snap->caps))
		test_fail_errno("capget");
	/* fsuid/fsgid are the 4th value of these lines */
	status_field("Uid", snap->uid_line, sizeof(snap->uid_line));
	status_field("Gid", snap->gid_line, sizeof(snap->gid_line));
	status_field("CapBnd", snap->cap_bnd, sizeof(snap->cap_bnd));
	status_field("CapAmb", snap->cap_amb, sizeof(snap->cap_amb));
	snap->keepcaps = prctl(PR_GET_KEEPCAPS);
	snap->securebits = prctl(PR_GET_SECUREBITS);
}

static void change_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2];

	if (syscall(SYS_capget, &hdr, caps))
		test_fail_errno("capget");
	caps[0].effective &= ~(1u << CAP_SYS_TIME);
	caps[0].permitted &= ~(1u << CAP_MKNOD);
	caps[0].effective &= ~(1u << CAP_MKNOD);
	caps[0].inheritable |= (1u << CAP_NET_RAW) | (1u << CAP_CHOWN);
	if (syscall(SYS_capset, &hdr, caps))
		test_fail_errno("capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_RAW, 0, 0))
		test_fail_errno("raise ambient CAP_NET_RAW");
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_BOOT, 0, 0, 0))
		test_fail_errno("drop CAP_SYS_BOOT from the bounding set");
}

int main(int argc, char **argv)
{
	static const gid_t groups[] = { 5, 6, 7, 1234 };

	test_init(argc, argv);

	if (setgroups(4, groups))
		test_fail_errno("setgroups");
	if (setresgid(1001, 1002, 1003))
		test_fail_errno("setresgid");
	change_caps();
	if (prctl(PR_SET_KEEPCAPS, 1))
		test_fail_errno("PR_SET_KEEPCAPS");
	snapshot(&before);

	test_ready();
	test_wait_sigterm();

	snapshot(&after);
	if (memcmp(before.uid, after.uid, sizeof(before.uid)) || strcmp(before.uid_line, after.uid_line))
		test_fail("uids '%s' -> '%s'", before.uid_line, after.uid_line);
	if (memcmp(before.gid, after.gid, sizeof(before.gid)) || strcmp(before.gid_line, after.gid_line))
		test_fail("gids '%s' -> '%s'", before.gid_line, after.gid_line);
	if (before.nr_groups != after.nr_groups ||
	    memcmp(before.groups, after.groups, sizeof(before.groups)))
		test_fail("supplementary groups differ (%d -> %d groups)", before.nr_groups,
			  after.nr_groups);
	for (int word = 0; word < 2; word++)
		if (memcmp(&before.caps[word], &after.caps[word], sizeof(before.caps[word])))
			test_fail("caps word %d: eff %#x prm %#x inh %#x -> %#x %#x %#x", word,
				  before.caps[word].effective, before.caps[word].permitted,
				  before.caps[word].inheritable, after.caps[word].effective,
				  after.caps[word].permitted, after.caps[word].inheritable);
	if (strcmp(before.cap_bnd, after.cap_bnd) || strcmp(before.cap_amb, after.cap_amb))
		test_fail("CapBnd %s CapAmb %s -> %s %s", before.cap_bnd, before.cap_amb,
			  after.cap_bnd, after.cap_amb);
	if (before.keepcaps != after.keepcaps || before.securebits != after.securebits)
		test_fail("keepcaps %d securebits %#x -> %d %#x", before.keepcaps,
			  before.securebits, after.keepcaps, after.securebits);
	test_pass();
}
