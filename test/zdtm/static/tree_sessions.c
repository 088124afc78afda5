/*
 * A tree of depth 4 with sessions and groups: root -> A (session leader) -> B (group
 * leader in A's session) -> C (member of B's group); root -> E and D, where D leads a
 * group that E, forked before D, joins. Every process checks its pid, parent, session,
 * group and its own private memory after restore.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MEM_SIZE (256ul << 10)

struct ids {
	pid_t pid, ppid, sid, pgid;
};

static struct ids take_ids(void)
{
	return (struct ids){getpid(), getppid(), getsid(0), getpgid(0)};
}

/* Own memory, a pattern only this process has, and the ids it must find after restore. */
static void check_self(const char *who, const struct ids *want, const unsigned char *mem,
		       uint64_t seed)
{
	struct ids now = take_ids();

	if (memcmp(&now, want, sizeof(now)))
		test_fail("%s: pid/ppid/sid/pgid %d/%d/%d/%d, expected %d/%d/%d/%d", who, now.pid,
			  now.ppid, now.sid, now.pgid, want->pid, want->ppid, want->sid,
			  want->pgid);
	pattern_expect(mem, MEM_SIZE, seed, who);
}

static unsigned char *own_memory(uint64_t seed)
{
	unsigned char *mem =
		mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(mem, MEM_SIZE, seed);
	return mem;
}

/* A non-root process: setup, fork its child (if any), then wait and check. */
static void __attribute__((noreturn)) run_member(const char *who, uint64_t seed, int depth)
{
	unsigned char *mem = own_memory(seed);
	pid_t child = 0;
	struct ids ids;

	/* D and E: the root moves them into D's group; their ids are taken after that. */
	while (depth == 0 && getpgid(0) == getpgid(getppid()))
		sched_yield();
	if (depth == 1 && setsid() < 0) /* A */
		test_fail_errno("setsid");
	if (depth == 2 && setpgid(0, 0)) /* B */
		test_fail_errno("setpgid");
	if (depth && depth < 3) {
		child = fork();
		if (child < 0)
			test_fail_errno("fork");
		if (child == 0)
			run_member(depth == 1 ? "B" : "C", seed + 1, depth + 1);
	}
	ids = take_ids();
	test_barrier_done();
	test_wait_sigterm();
	check_self(who, &ids, mem, seed);
	if (child)
		test_children_verdict(&child, 1, who);
	exit(0);
}

static pid_t fork_member(const char *who, uint64_t seed, int depth)
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0)
		run_member(who, seed, depth);
	return pid;
}

int main(int argc, char **argv)
{
	pid_t children[3];
	unsigned char *mem;
	struct ids ids;

	test_init(argc, argv);
	mem = own_memory(1);
	test_barrier_init();
	children[0] = fork_member("A", 10, 1);
	/* E first, D after it: the group E joins is led by a task forked later. */
	children[1] = fork_member("E", 20, 0);
	children[2] = fork_member("D", 30, 0);
	if (setpgid(children[2], children[2]) || setpgid(children[1], children[2]))
		test_fail_errno("setpgid for D and E");
	test_barrier_wait();
	ids = take_ids();
	test_ready();
	test_wait_sigterm();

	check_self("root", &ids, mem, 1);
	test_children_verdict(children, 3, "root");
	test_pass();
}
