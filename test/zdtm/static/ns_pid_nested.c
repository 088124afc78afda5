/*
 * Pid namespaces nested below the tree's own (whose init is the root):
 *   root ── A (CLONE_NEWPID: init of N1) ── B (pid 2 in N1, with a thread)
 *      │                                ├─ Z (a zombie in N1, exit code 42)
 *      │                                ├─ X (leads a session) ... Y (X's grandchild, adopted by A)
 *      │                                └─ D (CLONE_NEWPID: init of N2) ── E
 *      └─ P (unshare(CLONE_NEWPID), as unshare -pf: forks Q, the init of N3, then R into N3)
 * Every task and the thread record, before the dump, their pids from the tree's namespace
 * down ("NSpid:"), getpid()/gettid(), getppid(), getsid() and getpgid(); after restore each
 * checks them again (0 for the parent of an init, or of R, whose parent P is outside its
 * namespace; Y stays in X's session), B's POSIX timer still signals its thread
 * (SIGEV_THREAD_ID, by the tid it has in N1), the zombie is still one with its code, and
 * each nested init still reaps an orphan in its namespace; the root's pidfd on A still
 * names A; P's children are still born into
 * N3 (its pid_for_children). ZDTM_NESTED_DEAD_LEADER=1 adds in N1 an orphan whose session
 * and group leader exited: restore re-creates them around a helper with the leader's pids;
 * =outer makes that orphan the init of a namespace below N1, which the dump refuses (its
 * leader would be in a namespace above the orphan's own).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MAX_LEVELS  8
#define ZOMBIE_CODE 42
#define ORPHAN_CODE 7

/* "NSpid:" levels of the root: the tree's namespace is the last of them. */
static unsigned int base_levels;

struct pid_view {
	pid_t own, parent, sid, pgid; /* as the task sees them: 0 for one above its namespace */
	unsigned int nr; /* pids from the tree's namespace down */
	pid_t nspid[MAX_LEVELS];
};

static void read_view(struct pid_view *v)
{
	char text[4096], *line, *pos, *end;
	pid_t all[MAX_LEVELS + 40];
	unsigned int nr = 0;

	memset(v, 0, sizeof(*v));
	v->own = syscall(SYS_gettid);
	v->parent = getppid();
	v->sid = getsid(0);
	v->pgid = getpgid(0);
	read_file("/proc/thread-self/status", text, sizeof(text));
	line = strstr(text, "\nNSpid:");
	if (!line)
		test_fail("no NSpid line in /proc/thread-self/status");
	for (pos = line + 7; nr < sizeof(all) / sizeof(all[0]); pos = end) {
		long id = strtol(pos, &end, 10);

		if (end == pos || *pos == '\n')
			break;
		all[nr++] = id;
	}
	if (nr < base_levels || nr - base_levels + 1 > MAX_LEVELS)
		test_fail("%u NSpid levels, the tree's namespace at %u", nr, base_levels);
	v->nr = nr - base_levels + 1;
	memcpy(v->nspid, &all[base_levels - 1], v->nr * sizeof(pid_t));
}

static void expect_view(const struct pid_view *before, const char *who)
{
	struct pid_view now;

	read_view(&now);
	if (memcmp(&now, before, sizeof(now))) {
		char was[128] = "", is[128] = "";

		for (unsigned int i = 0; i < before->nr; i++)
			snprintf(was + strlen(was), sizeof(was) - strlen(was), " %d",
				 before->nspid[i]);
		for (unsigned int i = 0; i < now.nr; i++)
			snprintf(is + strlen(is), sizeof(is) - strlen(is), " %d",
				 now.nspid[i]);
		test_fail("%s: pid %d parent %d session %d group %d NSpid%s; before the dump "
			  "pid %d parent %d session %d group %d NSpid%s",
			  who, now.own, now.parent, now.sid, now.pgid, is, before->own,
			  before->parent, before->sid, before->pgid, was);
	}
}

/* An init sees itself as 1, its parent (outside its namespace) as 0. */
static void expect_init(const char *who)
{
	if (getpid() != 1 || getppid() != 0)
		test_fail("%s: pid %d parent %d, not an init", who, getpid(), getppid());
}

static pid_t clone_newpid(void (*fn)(void))
{
	struct clone_args {
		uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	} args = { .flags = CLONE_NEWPID, .exit_signal = SIGCHLD };
	pid_t pid = syscall(SYS_clone3, &args, sizeof(args));

	if (pid < 0)
		test_fail_errno("clone3(CLONE_NEWPID)");
	if (pid == 0) {
		fn();
		exit(1);
	}
	return pid;
}

static void expect_exit(pid_t pid, int code, const char *who)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		test_fail("%s: waitpid(%d): %s", who, pid, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != code)
		test_fail("%s %d: wait status %#x, expected exit %d", who, pid, status, code);
}

/* After restore, in an init: a child that forks and exits leaves an orphan to reap. */
static void expect_reaps_orphan(const char *who)
{
	pid_t parent = fork(), orphan;
	int status;

	if (parent < 0)
		test_fail_errno("fork");
	if (parent == 0) {
		if (fork() == 0) {
			while (getppid() != 1)
				sched_yield();
			_exit(ORPHAN_CODE);
		}
		_exit(0);
	}
	expect_exit(parent, 0, who);
	orphan = waitpid(-1, &status, 0);
	if (orphan < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != ORPHAN_CODE)
		test_fail("%s: the orphan %d: wait status %#x, not reaped by the init", who, orphan,
			  status);
}

/* A leaf: checks itself once told to. */
static void leaf_main(const char *who)
{
	struct pid_view view;

	read_view(&view);
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, who);
	exit(0);
}

static void e_main(void)
{
	leaf_main("E (pid 2 in N2)");
}

static void q_main(void)
{
	expect_init("Q");
	leaf_main("Q (init of N3)");
}

static void r_main(void)
{
	leaf_main("R (in N3, child of P)");
}

/* B to its thread (go) and back (ready). */
static int thread_go[2], thread_ready[2];
static struct pid_view thread_view;
static timer_t thread_timer;

/* The thread's timer signals it: /proc/self/timers names it as that /proc sees it. */
static void expect_timer_target(void)
{
	char link[64], timers[4096], want[64], *slash;
	ssize_t len = readlink("/proc/thread-self", link, sizeof(link) - 1);

	if (len < 0)
		test_fail_errno("readlink /proc/thread-self");
	link[len] = '\0';
	slash = strrchr(link, '/');
	snprintf(want, sizeof(want), "notify: signal/tid.%d\n", atoi(slash ? slash + 1 : link));
	memset(timers, 0, sizeof(timers));
	read_file("/proc/self/timers", timers, sizeof(timers) - 1);
	if (!strstr(timers, want))
		test_fail("thread of B: its timer does not say \"%.*s\": %s", (int)strlen(want) - 1,
			  want, timers);
}

/* Not armed: only its target is checked. */
static void create_thread_timer(pid_t tid)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR1 };

	sev._sigev_un._tid = tid;
	if (timer_create(CLOCK_MONOTONIC, &sev, &thread_timer))
		test_fail_errno("timer_create for the thread");
}

static void *thread_main(void *arg)
{
	char byte;

	(void)arg;
	read_view(&thread_view);
	create_thread_timer(thread_view.own);
	expect_timer_target();
	if (write(thread_ready[1], "r", 1) != 1)
		test_fail_errno("thread ready");
	read_exact(thread_go[0], &byte, 1, "the thread's go");
	expect_view(&thread_view, "thread of B");
	expect_timer_target();
	return NULL;
}

static void b_main(void)
{
	struct pid_view view;
	pthread_t thread;
	char byte;

	read_view(&view);
	if (pipe(thread_go) || pipe(thread_ready) ||
	    pthread_create(&thread, NULL, thread_main, NULL))
		test_fail("cannot start the thread");
	read_exact(thread_ready[0], &byte, 1, "the thread's ready");
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, "B (pid 2 in N1)");
	if (write(thread_go[1], "g", 1) != 1 || pthread_join(thread, NULL))
		test_fail("cannot let the thread check itself");
	exit(0);
}

static void d_main(void)
{
	struct pid_view view;
	pid_t e;

	read_view(&view);
	expect_init("D");
	e = test_fork(e_main);
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, "D (init of N2)");
	test_children_verdict(&e, 1, "D");
	expect_reaps_orphan("D");
	exit(0);
}

/* An orphan in N1 whose session leader (its parent) exited: A adopted it. */
static void orphan_main(void)
{
	while (getppid() != 1)
		sched_yield();
	leaf_main("orphan in N1");
}

/* The same, the init of a namespace of its own below N1 (it sees no parent change). */
static void orphan_init_main(void)
{
	leaf_main("orphan init below N1");
}

static pid_t fork_dead_leader_orphan(bool orphan_is_init)
{
	int pids[2];
	pid_t leader, orphan;

	if (pipe(pids))
		test_fail_errno("pipe");
	leader = fork();
	if (leader < 0)
		test_fail_errno("fork");
	if (leader == 0) {
		if (setsid() < 0)
			test_fail_errno("setsid");
		orphan = orphan_is_init ? clone_newpid(orphan_init_main) : test_fork(orphan_main);
		if (write(pids[1], &orphan, sizeof(orphan)) != sizeof(orphan))
			_exit(1);
		_exit(0);
	}
	read_exact(pids[0], &orphan, sizeof(orphan), "the orphan's pid");
	expect_exit(leader, 0, "the orphan's session leader");
	close(pids[0]);
	close(pids[1]);
	return orphan;
}

/*
 * X leads a session in N1; its child M forks Y and exits: A, the init, adopts Y, which stays
 * in X's session. Restore forks Y from X through a helper that exits, as the kernel did.
 */
static int adopted_pids[2];

static void x_main(void)
{
	struct pid_view view;
	pid_t middle, sid = getpid();

	if (setsid() != sid)
		test_fail_errno("setsid");
	read_view(&view);
	middle = fork();
	if (middle < 0)
		test_fail_errno("fork");
	if (middle == 0) {
		pid_t orphan = test_fork(orphan_main);

		if (write(adopted_pids[1], &orphan, sizeof(orphan)) != sizeof(orphan))
			_exit(1);
		_exit(0);
	}
	expect_exit(middle, 0, "X's child");
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, "X (session leader in N1)");
	if (getsid(0) != sid)
		test_fail("X: session %d, not its own %d", getsid(0), sid);
	exit(0);
}

static void a_main(void)
{
	struct pid_view view;
	pid_t children[5], zombie, leader, orphan;
	int nr_children = 2;
	siginfo_t info;

	read_view(&view);
	expect_init("A");
	children[0] = test_fork(b_main);
	zombie = fork();
	if (zombie == 0)
		_exit(ZOMBIE_CODE);
	children[1] = clone_newpid(d_main);
	if (getenv("ZDTM_NESTED_DEAD_LEADER"))
		children[nr_children++] =
			fork_dead_leader_orphan(!strcmp(getenv("ZDTM_NESTED_DEAD_LEADER"), "outer"));
	if (pipe(adopted_pids))
		test_fail_errno("pipe");
	leader = test_fork(x_main);
	read_exact(adopted_pids[0], &orphan, sizeof(orphan), "the adopted orphan's pid");
	children[nr_children++] = orphan;
	children[nr_children++] = leader;
	if (waitid(P_PID, zombie, &info, WEXITED | WNOWAIT))
		test_fail_errno("waitid for the zombie");
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, "A (init of N1)");
	test_children_verdict(children, nr_children, "A");
	expect_exit(zombie, ZOMBIE_CODE, "zombie in N1");
	expect_reaps_orphan("A");
	exit(0);
}

/* A child P forks after restore: born into N3, one level below P, its parent above it. */
static void late_child_main(void)
{
	struct pid_view view;

	read_view(&view);
	if (view.nr != 2 || view.parent != 0 || view.own == 1)
		_exit(1);
	_exit(0);
}

static void p_main(void)
{
	struct pid_view view;
	pid_t children[2];

	read_view(&view);
	if (unshare(CLONE_NEWPID))
		test_fail_errno("unshare(CLONE_NEWPID)");
	/* R first when they end: Q's exit waits until P has reaped R (its pid in N3). */
	children[1] = test_fork(q_main);
	children[0] = test_fork(r_main);
	test_barrier_done();
	test_wait_sigterm();
	expect_view(&view, "P");
	expect_exit(test_fork(late_child_main), 0, "P's child born after restore");
	test_children_verdict(children, 2, "P");
	exit(0);
}

/*
 * The root's pidfd on A names it down to N1: its fdinfo "NSpid:" ends with A's pid there,
 * 1, one level below the root's own.
 */
static void expect_pidfd_on_init(int pidfd)
{
	char nspid[128], *pos = nspid, *end;
	unsigned int nr = 0;
	long last = -1;

	fdinfo_field(pidfd, "NSpid", nspid, sizeof(nspid));
	for (;; pos = end, nr++) {
		long id = strtol(pos, &end, 10);

		if (end == pos)
			break;
		last = id;
	}
	if (nr != base_levels + 1 || last != 1)
		test_fail("the root's pidfd on A names \"%s\"", nspid);
}

int main(int argc, char **argv)
{
	pid_t children[2];
	int pidfd;

	test_init(argc, argv);
	test_launch_root(CLONE_NEWPID);
	base_levels = ns_pid_levels();
	expect_ns_pid(1, base_levels, "root");
	test_barrier_init();
	children[0] = clone_newpid(a_main);
	children[1] = test_fork(p_main);
	test_barrier_wait();
	pidfd = syscall(SYS_pidfd_open, children[0], 0);
	if (pidfd < 0)
		test_fail_errno("pidfd_open on A");
	expect_pidfd_on_init(pidfd);
	test_ready();
	test_wait_sigterm();

	expect_ns_pid(1, base_levels, "root");
	expect_pidfd_on_init(pidfd);
	test_children_verdict(children, 2, "root");
	test_pass();
}
