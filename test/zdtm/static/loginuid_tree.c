/*
 * The audit loginuid of each task: the process sets its /proc/self/loginuid, then forks a
 * child that sets another one (root may change a set loginuid); a second child keeps the
 * one it inherited. After restore: each reads its own back, and the parent reads each
 * child's through /proc/PID/loginuid.
 * With $ZDTM_LOGINUID_USERNS, the tree is born into a user (and pid) namespace of its own:
 * ids read and written there are the namespace's, and a task there can set an unset
 * loginuid only (no CAP_AUDIT_CONTROL in the initial namespace), so the child sets its own
 * before the parent does; each task reads only its own (/proc is the runner's).
 */
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PARENT_LOGINUID 3
#define CHILD_LOGINUID	7

static unsigned int read_loginuid(const char *path)
{
	char buf[16];

	read_file(path, buf, sizeof(buf));
	return strtoul(buf, NULL, 10);
}

static void set_loginuid(unsigned int value)
{
	char text[16];
	int fd = open("/proc/self/loginuid", O_WRONLY), len;

	len = snprintf(text, sizeof(text), "%u", value);
	if (fd < 0 || write(fd, text, len) != len || close(fd))
		test_fail_errno("write /proc/self/loginuid");
}

static void expect_loginuid(const char *path, unsigned int want, const char *who)
{
	unsigned int got = read_loginuid(path);

	if (got != want)
		test_fail("%s: loginuid %u, not %u", who, got, want);
}

static void __attribute__((noreturn)) child_main(void)
{
	set_loginuid(CHILD_LOGINUID);
	test_barrier_done();
	test_wait_sigterm();
	expect_loginuid("/proc/self/loginuid", CHILD_LOGINUID, "child");
	exit(0);
}

static void __attribute__((noreturn)) inheriting_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	expect_loginuid("/proc/self/loginuid", PARENT_LOGINUID, "inheriting child");
	exit(0);
}

int main(int argc, char **argv)
{
	bool userns = getenv("ZDTM_LOGINUID_USERNS");
	char path[2][64];
	pid_t children[2];

	test_init(argc, argv);
	if (userns) {
		test_launch_root(CLONE_NEWUSER | CLONE_NEWPID);
		/*
		 * Root inside: the host root the launcher was is not mapped there. The change
		 * of ids made the task non-dumpable, its /proc files the host root's.
		 */
		if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0) ||
		    prctl(PR_SET_DUMPABLE, 1))
			test_fail_errno("become root in the user namespace");
	}
	/* In a user namespace the parent's loginuid must still be unset when the child sets. */
	if (userns)
		children[0] = test_fork_child(child_main);
	set_loginuid(PARENT_LOGINUID);
	if (!userns)
		children[0] = test_fork_child(child_main);
	children[1] = test_fork_child(inheriting_main);
	for (int i = 0; i < 2; i++)
		snprintf(path[i], sizeof(path[i]), "/proc/%d/loginuid", children[i]);
	if (!userns)
		expect_loginuid(path[0], CHILD_LOGINUID, "parent, of the child");
	test_ready();
	test_wait_sigterm();

	expect_loginuid("/proc/self/loginuid", PARENT_LOGINUID, "parent");
	if (!userns) {
		expect_loginuid(path[0], CHILD_LOGINUID, "parent, of the child");
		expect_loginuid(path[1], PARENT_LOGINUID, "parent, of the inheriting child");
	}
	test_children_verdict(children, 2, "parent");
	test_pass();
}
