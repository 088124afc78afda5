/*
 * A dump that must be refused: the root's child K is in the process group of W, a live
 * process outside the tree (forked by the root's child Q, which exited: W went to the
 * runner, a subreaper). Restore could not re-create W's group, so the dump fails; the
 * tree runs on with its ids, and W exits once the tree is gone.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

struct ids {
	pid_t pid, ppid, sid, pgid;
};

static struct ids take_ids(void)
{
	return (struct ids){ getpid(), getppid(), getsid(0), getpgid(0) };
}

static void check_ids(const char *who, const struct ids *want)
{
	struct ids now = take_ids();

	if (memcmp(&now, want, sizeof(now)))
		test_fail("%s: pid/ppid/sid/pgid %d/%d/%d/%d, expected %d/%d/%d/%d", who, now.pid,
			  now.ppid, now.sid, now.pgid, want->pid, want->ppid, want->sid,
			  want->pgid);
}

/* In Q: W leads its group until every holder of tree_alive's write end (the tree) is gone. */
static void __attribute__((noreturn)) run_q(int tree_alive[2], int report)
{
	pid_t w = fork();
	char byte;

	if (w < 0)
		test_fail_errno("fork W");
	if (w == 0) {
		close(tree_alive[1]);
		while (read(tree_alive[0], &byte, 1) > 0)
			;
		_exit(0);
	}
	if (setpgid(w, w))
		test_fail_errno("setpgid W");
	if (write(report, &w, sizeof(w)) != sizeof(w))
		test_fail_errno("report W's pid");
	_exit(0);
}

/*
 * W, left outside the tree: Q made its group, then exited. Returns W's pid; W runs until
 * *tree_alive_fd, held by the tree only, is closed everywhere.
 */
static pid_t fork_outside_leader(int *tree_alive_fd)
{
	int tree_alive[2], report[2], status;
	pid_t q, w;

	if (pipe(tree_alive) || pipe(report))
		test_fail_errno("pipe");
	q = fork();
	if (q < 0)
		test_fail_errno("fork Q");
	if (q == 0)
		run_q(tree_alive, report[1]);
	if (waitpid(q, &status, 0) != q || status)
		test_fail("Q did not exit cleanly (status %#x)", status);
	if (read(report[0], &w, sizeof(w)) != sizeof(w))
		test_fail_errno("read W's pid");
	close(report[0]);
	close(report[1]);
	close(tree_alive[0]);
	*tree_alive_fd = tree_alive[1];
	return w;
}

/* W is the runner's child now: let it go, and wait until it exited for the runner to reap. */
static void end_outside_leader(pid_t w, int tree_alive_fd)
{
	close(tree_alive_fd);
	test_wait_outside_exited(w);
}

static void __attribute__((noreturn)) run_k(pid_t group)
{
	struct ids ids;

	while (getpgid(0) != group)
		sched_yield();
	ids = take_ids();
	test_barrier_done();
	test_wait_sigterm();
	check_ids("K", &ids);
	exit(0);
}

int main(int argc, char **argv)
{
	int tree_alive_fd;
	pid_t k, w;
	struct ids ids;

	test_init(argc, argv);
	w = fork_outside_leader(&tree_alive_fd);
	test_barrier_init();
	k = fork();
	if (k < 0)
		test_fail_errno("fork K");
	if (k == 0)
		run_k(w);
	if (setpgid(k, w))
		test_fail_errno("setpgid K");
	test_barrier_wait();
	ids = take_ids();
	test_ready();
	test_wait_sigterm();

	check_ids("root", &ids);
	test_children_verdict(&k, 1, "root");
	end_outside_leader(w, tree_alive_fd);
	test_pass();
}
