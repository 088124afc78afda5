/*
 * A tree in a pid namespace of its own, as `unshare -p -f` makes one (the root is the
 * namespace's init, pid 1, in the runner's session, which it sees as 0): a child with a
 * thread, one leading a session of its own, a zombie, and an orphan the init adopted.
 * After restore every task and thread has its pids back inside ("NSpid:" as deep as before),
 * parents, sessions and groups as they were, the zombie still is one, and the init still
 * reaps: an orphan made after the restore comes to it. Files that name tasks name them by
 * their pids inside: a pidfd, a pipe whose I/O signals go to a child, one whose go to a
 * group. The runner checks the pids from outside.
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
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MEM_SIZE	 (64ul << 10)
#define ZOMBIE_CODE	 42
#define LATE_ORPHAN_CODE 7

static unsigned int levels;
static char mem[MEM_SIZE];

/* What a child checks of itself: its pid, its parent (the init) and its memory. */
static void expect_self(pid_t pid, const char *who)
{
	expect_ns_pid(pid, levels, who);
	if (getppid() != 1)
		test_fail("%s: parent %d, not the init", who, getppid());
	pattern_expect(mem, MEM_SIZE, pid, who);
}

static void plain_main(void)
{
	pid_t pid = getpid();

	pattern_fill(mem, MEM_SIZE, pid);
	test_barrier_done();
	test_wait_sigterm();
	expect_self(pid, "plain child");
	exit(0);
}

static int thread_pipe[2];
static pid_t thread_tid;

static void *thread_main(void *arg)
{
	char byte;

	(void)arg;
	thread_tid = syscall(SYS_gettid);
	test_barrier_done();
	read_exact(thread_pipe[0], &byte, 1, "the thread's go");
	expect_ns_pid(thread_tid, levels, "thread");
	return NULL;
}

static void threaded_main(void)
{
	pid_t pid = getpid();
	pthread_t thread;

	pattern_fill(mem, MEM_SIZE, pid);
	if (pipe(thread_pipe) || pthread_create(&thread, NULL, thread_main, NULL))
		test_fail("cannot start the thread");
	test_wait_sigterm();
	expect_self(pid, "threaded child");
	/* the thread checks its own tid and exits; a failure there ends the process */
	if (write(thread_pipe[1], "g", 1) != 1 || pthread_join(thread, NULL))
		test_fail("cannot let the thread check itself");
	exit(0);
}

static void session_main(void)
{
	pid_t pid = getpid();

	pattern_fill(mem, MEM_SIZE, pid);
	if (setsid() != pid)
		test_fail_errno("setsid");
	test_barrier_done();
	test_wait_sigterm();
	expect_self(pid, "session leader");
	if (getsid(0) != pid || getpgid(0) != pid)
		test_fail("session leader %d: session %d, group %d", pid, getsid(0), getpgid(0));
	exit(0);
}

/* An orphan before the dump: its parent exits at once, the init adopts it. */
static int orphan_pipe[2];

static void orphan_main(void)
{
	pid_t pid = getpid();

	pattern_fill(mem, MEM_SIZE, pid);
	/* its parent exits once it has the pid: then the init is the parent */
	while (getppid() != 1)
		sched_yield();
	test_barrier_done();
	test_wait_sigterm();
	expect_self(pid, "adopted orphan");
	exit(0);
}

static void orphan_parent_main(void)
{
	pid_t orphan = test_fork(orphan_main);

	if (write(orphan_pipe[1], &orphan, sizeof(orphan)) != sizeof(orphan))
		_exit(1);
	test_barrier_done();
	_exit(0);
}

/* After restore it forks and exits: the init must adopt and reap its child. */
static void late_parent_main(void)
{
	pid_t pid = getpid(), child;

	pattern_fill(mem, MEM_SIZE, pid);
	test_barrier_done();
	test_wait_sigterm();
	expect_self(pid, "late parent");
	child = fork();
	if (child < 0)
		test_fail_errno("fork the late orphan");
	if (child == 0) {
		while (getppid() != 1)
			sched_yield();
		_exit(LATE_ORPHAN_CODE);
	}
	exit(0);
}

/* A pidfd on the plain child; I/O signals of two pipes owned by a child and by its group. */
struct named_files {
	int pidfd, owned[2], group_owned[2];
};

static void set_owner(int fd, int type, pid_t pid)
{
	struct f_owner_ex owner = { type, pid };

	if (fcntl(fd, F_SETOWN_EX, &owner))
		test_fail_errno("F_SETOWN_EX");
}

static void expect_owner(int fd, int type, pid_t pid, const char *what)
{
	struct f_owner_ex owner;

	if (fcntl(fd, F_GETOWN_EX, &owner) || (int)owner.type != type || owner.pid != pid)
		test_fail("%s: owner type %d pid %d; expected %d %d", what, owner.type, owner.pid,
			  type, pid);
}

static void name_tasks(struct named_files *f, pid_t plain, pid_t leader)
{
	f->pidfd = syscall(SYS_pidfd_open, plain, 0);
	if (f->pidfd < 0 || pipe(f->owned) || pipe(f->group_owned))
		test_fail_errno("pidfd_open or pipe");
	set_owner(f->owned[0], F_OWNER_PID, leader);
	set_owner(f->group_owned[0], F_OWNER_PGRP, leader);
}

static void expect_named_tasks(const struct named_files *f, pid_t plain, pid_t leader)
{
	char nspid[64], *last;

	fdinfo_field(f->pidfd, "NSpid", nspid, sizeof(nspid));
	last = strrchr(nspid, '\t');
	if (atoi(last ? last + 1 : nspid) != plain)
		test_fail("the pidfd on %d names \"%s\"", plain, nspid);
	expect_owner(f->owned[0], F_OWNER_PID, leader, "pipe owned by a task");
	expect_owner(f->group_owned[0], F_OWNER_PGRP, leader, "pipe owned by a group");
}

static void expect_exit(pid_t pid, int code, const char *who)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		test_fail("%s: waitpid(%d): %s", who, pid, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != code)
		test_fail("%s %d: wait status %#x, expected exit %d", who, pid, status, code);
}

int main(int argc, char **argv)
{
	pid_t children[4], zombie, orphan_parent, late, late_orphan;
	struct named_files named;
	siginfo_t info;
	int status;

	test_init(argc, argv);
	test_launch_root(CLONE_NEWPID);
	/* the init of the new namespace from here on */
	levels = ns_pid_levels();
	expect_ns_pid(1, levels, "init");
	test_barrier_init();
	if (pipe(orphan_pipe))
		test_fail_errno("pipe");
	children[0] = test_fork(plain_main);
	children[1] = test_fork(threaded_main);
	children[2] = test_fork(session_main);
	late = test_fork(late_parent_main);
	zombie = fork();
	if (zombie == 0)
		_exit(ZOMBIE_CODE);
	orphan_parent = test_fork(orphan_parent_main);
	read_exact(orphan_pipe[0], &children[3], sizeof(children[3]), "the orphan's pid");
	test_barrier_wait();
	/* the orphan's first parent is gone: reap it; the zombie stays one */
	expect_exit(orphan_parent, 0, "the orphan's first parent");
	if (waitid(P_PID, zombie, &info, WEXITED | WNOWAIT))
		test_fail_errno("waitid for the zombie");
	name_tasks(&named, children[0], children[2]);
	test_ready();
	test_wait_sigterm();

	expect_ns_pid(1, levels, "init");
	if (getsid(0) != 0 || getpgid(0) != 0)
		test_fail("init: session %d, group %d; expected those of outside (0)", getsid(0),
			  getpgid(0));
	expect_named_tasks(&named, children[0], children[2]);
	test_children_verdict(children, 4, "init");
	expect_exit(zombie, ZOMBIE_CODE, "zombie");
	if (kill(late, SIGTERM))
		test_fail_errno("SIGTERM to the late parent");
	expect_exit(late, 0, "late parent");
	/* the late parent's child, now the init's: the last one it has */
	late_orphan = waitpid(-1, &status, 0);
	if (late_orphan < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != LATE_ORPHAN_CODE)
		test_fail("late orphan %d: wait status %#x (%s)", late_orphan, status,
			  late_orphan < 0 ? strerror(errno) : "expected its exit code");
	test_pass();
}
