/*
 * Namespace layouts restore could not give back, which the dump must refuse with one line
 * and leave running: ZDTM_NS_CASE says which.
 *   nested_pid, nested_uts  a child has a pid (uts) namespace the root does not
 *   nested_mnt  a child has a mount namespace, the root lives in criu's
 *   pid_for_children, time_for_children  the root unshared one and forked nothing into it
 *   mnt  the root has one of its own of a kind this criu does not restore
 *   user  the root has a user namespace of its own without maps: its ids are unmapped
 *   cgroup  the root has one of its own, dumped with --manage-cgroups=ignore (no cgroup.img)
 *   net_veth_in the root has a net namespace of its own with a veth pair wholly in it
 *   net_macvlan_in  ... a macvlan link on a bridge of that namespace (its lower link inside)
 * The tree then checks it still works as it did.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

static const struct {
	const char *name;
	int flag;
} root_kinds[] = {
	{ "pid_for_children", CLONE_NEWPID },
	{ "time_for_children", CLONE_NEWTIME },
	{ "mnt", CLONE_NEWNS },
	{ "user", CLONE_NEWUSER },
	{ "cgroup", CLONE_NEWCGROUP },
};

/* A net namespace of the root's own, with what the dump refuses in it. */
static const struct {
	const char *name, *cmd;
} net_cases[] = {
	{ "net_veth_in", "ip link add zdtm_va type veth peer name zdtm_vb" },
	{ "net_macvlan_in", "ip link add zdtm_vbr type bridge && "
			    "ip link add zdtm_vmv link zdtm_vbr type macvlan" },
};

static void nested_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	exit(0);
}

/* A child in a pid namespace of its own: forked by a child that unshared and went back. */
static void nested_pid_main(void)
{
	int own = open("/proc/self/ns/pid", O_RDONLY);
	pid_t nested;

	if (own < 0 || unshare(CLONE_NEWPID))
		test_fail_errno("unshare(CLONE_NEWPID)");
	nested = test_fork(nested_main);
	if (setns(own, CLONE_NEWPID))
		test_fail_errno("setns back to its pid namespace");
	close(own);
	test_barrier_done();
	test_wait_sigterm();
	test_children_verdict(&nested, 1, "child");
	exit(0);
}

static void nested_mnt_main(void)
{
	if (unshare(CLONE_NEWNS))
		test_fail_errno("unshare(CLONE_NEWNS)");
	nested_main();
}

static void nested_uts_main(void)
{
	if (unshare(CLONE_NEWUTS) || sethostname("nested", 6))
		test_fail_errno("unshare(CLONE_NEWUTS)");
	nested_main();
}

int main(int argc, char **argv)
{
	const char *which = getenv("ZDTM_NS_CASE");
	pid_t child = 0;

	test_init(argc, argv);
	if (!which)
		test_fail("no ZDTM_NS_CASE");
	test_barrier_init();
	if (!strcmp(which, "nested_pid"))
		child = test_fork(nested_pid_main);
	else if (!strcmp(which, "nested_uts"))
		child = test_fork(nested_uts_main);
	else if (!strcmp(which, "nested_mnt"))
		child = test_fork(nested_mnt_main);
	for (unsigned int i = 0; i < sizeof(net_cases) / sizeof(net_cases[0]); i++)
		if (!strcmp(which, net_cases[i].name) &&
		    (unshare(CLONE_NEWNET) || system(net_cases[i].cmd)))
			test_fail("%s: `%s` in a new net namespace failed", which, net_cases[i].cmd);
	for (unsigned int i = 0; i < sizeof(root_kinds) / sizeof(root_kinds[0]); i++)
		if (!strcmp(which, root_kinds[i].name) && unshare(root_kinds[i].flag))
			test_fail("unshare for %s: %s", which, strerror(errno));
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();
	if (child)
		test_children_verdict(&child, 1, "root");
	test_pass();
}
