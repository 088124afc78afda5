/*
 * Zombies in a tree: one child exited with status 42, one was killed by SIGUSR1, both
 * unreaped at dump; after restore they are still zombies of the root, and waitpid()
 * reports how each died. A live sibling checks its memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MEM_SIZE (128ul << 10)

static char live_mem[MEM_SIZE];

static pid_t fork_or_fail(void)
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	return pid;
}

/* Dead but not reaped: waitid() with WNOWAIT leaves it a zombie. */
static void wait_dead_unreaped(pid_t pid)
{
	siginfo_t info;

	if (waitid(P_PID, pid, &info, WEXITED | WNOWAIT))
		test_fail_errno("waitid");
}

static void expect_zombie_of_us(pid_t pid)
{
	char path[64], stat[512], *state;
	int ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	read_file(path, stat, sizeof(stat));
	state = strrchr(stat, ')');
	if (!state || sscanf(state + 2, "%*c %d", &ppid) != 1)
		test_fail("cannot parse %s", path);
	if (state[2] != 'Z' || ppid != getpid())
		test_fail("%d: state %c, parent %d; expected a zombie of %d", pid, state[2], ppid,
			  getpid());
}

int main(int argc, char **argv)
{
	pid_t exited, killed, live;
	int status;

	test_init(argc, argv);
	exited = fork_or_fail();
	if (exited == 0)
		_exit(42);
	killed = fork_or_fail();
	if (killed == 0) {
		signal(SIGUSR1, SIG_DFL);
		kill(getpid(), SIGUSR1);
		_exit(1);
	}
	live = fork_or_fail();
	if (live == 0) {
		pattern_fill(live_mem, MEM_SIZE, 5);
		test_wait_sigterm();
		pattern_expect(live_mem, MEM_SIZE, 5, "live child");
		exit(0);
	}
	wait_dead_unreaped(exited);
	wait_dead_unreaped(killed);
	test_ready();
	test_wait_sigterm();

	expect_zombie_of_us(exited);
	expect_zombie_of_us(killed);
	if (waitpid(exited, &status, WNOHANG) != exited)
		test_fail("waitpid(%d): not reapable: %s", exited, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 42)
		test_fail("zombie %d: wait status %#x, expected exit 42", exited, status);
	if (waitpid(killed, &status, WNOHANG) != killed)
		test_fail("waitpid(%d): not reapable: %s", killed, strerror(errno));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGUSR1)
		test_fail("zombie %d: wait status %#x, expected SIGUSR1", killed, status);
	test_children_verdict(&live, 1, "root");
	test_pass();
}
