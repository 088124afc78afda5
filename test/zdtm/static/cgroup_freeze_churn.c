/*
 * A tree in a freezer cgroup of its own (v1, /sys/fs/cgroup/freezer/ZDTM_CG_NAME) whose
 * child forks and reaps a short-lived grandchild without pause, for the dump with
 * --freeze-cgroup: the tree is caught whole at once. After the dump (or a failed one, or
 * --leave-running) and after restore the cgroup is THAWED, the child still forks (its
 * count goes on), and the task is still in that cgroup. ZDTM_FREEZE_FAIL: the test also
 * holds a netlink socket with an answer queued (test_unsupported_socket()), which fails
 * the dump once the tree is frozen and seized;
 * ZDTM_FREEZE_QUIET: the child only sleeps (for the runner's checks of a tree that must be
 * left as it was, which a churning tree is not from one moment to the next).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

static volatile unsigned long *forks;
static char cg[256];

static void churn(void)
{
	while (getenv("ZDTM_FREEZE_QUIET"))
		pause();
	for (;;) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		if (p > 0 && waitpid(p, NULL, 0) == p)
			__atomic_add_fetch(forks, 1, __ATOMIC_SEQ_CST);
	}
}

static void expect_thawed(const char *when)
{
	char path[300], state[64];

	snprintf(path, sizeof(path), "%s/freezer.state", cg);
	read_file(path, state, sizeof(state));
	if (strcmp(state, "THAWED\n"))
		test_fail("%s: %s reads %s", when, path, state);
}

static void expect_forking(const char *when)
{
	unsigned long before = __atomic_load_n(forks, __ATOMIC_SEQ_CST);

	if (getenv("ZDTM_FREEZE_QUIET"))
		return;
	for (int i = 0; i < 500 && __atomic_load_n(forks, __ATOMIC_SEQ_CST) < before + 10; i++)
		usleep(10000);
	if (__atomic_load_n(forks, __ATOMIC_SEQ_CST) < before + 10)
		test_fail("%s: the child no longer forks (%lu forks)", when, before);
}

int main(int argc, char **argv)
{
	struct unsupported_socket unsupported;
	const char *name;
	char path[300], self[4096], want[300];
	pid_t child;

	test_init(argc, argv);
	name = getenv("ZDTM_CG_NAME") ?: "zdtm_freeze";
	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/freezer/%s", name);
	if (mkdir(cg, 0755) && errno != EEXIST)
		test_fail("mkdir %s: %s", cg, strerror(errno));
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	write_file(path, "0", 1);
	forks = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (forks == MAP_FAILED)
		test_fail_errno("mmap");
	if (getenv("ZDTM_FREEZE_FAIL"))
		test_unsupported_socket(&unsupported);
	child = test_fork(churn);
	expect_forking("before the dump");

	test_ready();
	test_wait_sigterm();

	expect_thawed("after restore");
	expect_forking("after restore");
	snprintf(want, sizeof(want), ":freezer:/%s\n", name);
	read_file("/proc/self/cgroup", self, sizeof(self));
	if (!strstr(self, want))
		test_fail("not in freezer cgroup /%s any more:\n%s", name, self);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	write_file("/sys/fs/cgroup/freezer/cgroup.procs", "0", 1);
	rmdir(cg);
	test_pass();
}
