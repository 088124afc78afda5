/*
 * pidfds come back naming the same processes: the test itself (also as PIDFD_THREAD, and
 * shared with its child), its live child (two descriptions, one PIDFD_NONBLOCK, on one
 * pidfs inode; a signal sent through one reaches the child, waitid() through the other
 * reaps it), and a child reaped before the dump (two descriptions on one inode of their
 * own, one shared with the live child, the other the parent's alone): it reads as exited.
 * A zombie child is named like a live one: its pidfd polls as exited and waitid() through
 * it reaps the child with its exit code.
 * After restore the parent has no other child (the process restore made for the reaped
 * one is gone).
 * With ZDTM_PIDFD_UPSTREAM set (dumped by upstream criu) there is no PIDFD_THREAD pidfd:
 * upstream criu refuses to dump one.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PIDFD_NONBLOCK O_NONBLOCK
#define PIDFD_THREAD   O_EXCL
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#define KCMP_FILE 0

#define SELF_FD	       40 /* shared with the live child */
#define LIVE_NB_FD     41 /* PIDFD_NONBLOCK */
#define LIVE_FD	       42
#define DEAD_FD	       43 /* shared with the live child */
#define DEAD_NB_FD     44 /* PIDFD_NONBLOCK, the parent's alone */
#define SELF_THREAD_FD 45
#define ZOMBIE_FD      46
#define DEAD_EXIT      7
#define ZOMBIE_EXIT    5

/* What the live child saw after restore, for the parent. */
struct child_report {
	unsigned long long dead_ino;
	int checked;
};

static struct child_report *report;

static int pidfd_open(pid_t pid, unsigned int flags)
{
	return syscall(SYS_pidfd_open, pid, flags);
}

static void pidfd_at(pid_t pid, unsigned int flags, int at)
{
	int fd = pidfd_open(pid, flags);

	if (fd < 0 || dup2(fd, at) != at)
		test_fail("pidfd_open(%d, %#x) at fd %d: %s", pid, flags, at, strerror(errno));
	close(fd);
}

static unsigned long long ino_of(int fd, const char *who)
{
	struct stat st;

	if (fstat(fd, &st))
		test_fail("%s: fstat(%d): %s", who, fd, strerror(errno));
	return st.st_ino;
}

static void expect_pid(int fd, pid_t want, const char *who)
{
	char value[32], text[32];

	snprintf(text, sizeof(text), "%d", want);
	fdinfo_field(fd, "Pid", value, sizeof(value));
	if (strcmp(value, text))
		test_fail("%s: fd %d names pid %s, expected %s", who, fd, value, text);
}

static void expect_flags(int fd, int want, const char *who)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags != (O_RDWR | want))
		test_fail("%s: fd %d has flags %#o, expected %#o", who, fd, flags, O_RDWR | want);
}

static void expect_same_desc(pid_t other, int fd, const char *who)
{
	if (syscall(SYS_kcmp, getpid(), other, KCMP_FILE, fd, fd))
		test_fail("%s: fd %d is no longer the description task %d holds", who, fd, other);
}

/* Exited and reaped: POLLIN, no signal goes through, waitid() has no child to wait for. */
static void expect_exited(int fd, const char *who)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	siginfo_t info;

	expect_pid(fd, -1, who);
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLIN))
		test_fail("%s: fd %d does not poll as exited (revents %#x)", who, fd, pfd.revents);
	if (syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) != -1 || errno != ESRCH)
		test_fail("%s: fd %d: a signal could be sent to the reaped process", who, fd);
	if (waitid(P_PIDFD, fd, &info, WEXITED | WNOHANG) != -1 || errno != ECHILD)
		test_fail("%s: fd %d: waitid() found something to wait for", who, fd);
}

/*
 * The live child: waits for SIGUSR1 from the parent (sent through a pidfd), then checks
 * the pidfds it holds and reports the reaped child's inode as it sees it.
 */
static void __attribute__((noreturn)) child_main(void)
{
	pid_t parent = getppid();
	siginfo_t info;
	sigset_t usr1;

	close(LIVE_NB_FD);
	close(LIVE_FD);
	close(DEAD_NB_FD);
	close(SELF_THREAD_FD);
	close(ZOMBIE_FD);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &usr1, NULL))
		test_fail_errno("child: sigprocmask");
	test_barrier_done();
	while (sigwaitinfo(&usr1, &info) < 0)
		if (errno != EINTR)
			test_fail_errno("child: sigwaitinfo");
	if (info.si_code != SI_USER || info.si_pid != parent)
		test_fail("child: SIGUSR1 came with code %d from %d, expected SI_USER from %d",
			  info.si_code, info.si_pid, parent);

	expect_pid(SELF_FD, parent, "child");
	expect_same_desc(parent, SELF_FD, "child");
	expect_same_desc(parent, DEAD_FD, "child");
	expect_exited(DEAD_FD, "child");
	report->dead_ino = ino_of(DEAD_FD, "child");
	report->checked = 1;
	exit(0);
}

static pid_t fork_exiting(int code)
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0)
		_exit(code);
	return pid;
}

/* A child that exits at once, with pidfds taken on it before it is reaped. */
static void make_dead_child(void)
{
	pid_t dead = fork_exiting(DEAD_EXIT);
	int status;

	pidfd_at(dead, 0, DEAD_FD);
	pidfd_at(dead, PIDFD_NONBLOCK, DEAD_NB_FD);
	if (waitpid(dead, &status, 0) != dead || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != DEAD_EXIT)
		test_fail("the child to be reaped did not exit with %d", DEAD_EXIT);
}

/* A child that exits at once and stays a zombie, with a pidfd on it. */
static pid_t make_zombie_child(void)
{
	pid_t zombie = fork_exiting(ZOMBIE_EXIT);
	siginfo_t info;

	pidfd_at(zombie, 0, ZOMBIE_FD);
	if (waitid(P_PID, zombie, &info, WEXITED | WNOWAIT))
		test_fail_errno("waitid(WNOWAIT) for the zombie");
	return zombie;
}

/* Dead, not reaped: the pid is still named; waitid() through the pidfd reaps it. */
static void check_zombie(pid_t zombie)
{
	struct pollfd pfd = { .fd = ZOMBIE_FD, .events = POLLIN };
	siginfo_t info = { 0 };

	expect_pid(ZOMBIE_FD, zombie, "parent");
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLIN))
		test_fail("parent: the zombie's pidfd does not poll as exited (revents %#x)",
			  pfd.revents);
	if (waitid(P_PIDFD, ZOMBIE_FD, &info, WEXITED))
		test_fail_errno("waitid(P_PIDFD) for the zombie");
	if (info.si_pid != zombie || info.si_code != CLD_EXITED || info.si_status != ZOMBIE_EXIT)
		test_fail("the zombie %d was reaped as %d with code %d status %d", zombie,
			  info.si_pid, info.si_code, info.si_status);
	expect_pid(ZOMBIE_FD, -1, "parent, the zombie reaped");
}

static void check_self(bool thread_fd)
{
	int fresh = pidfd_open(getpid(), 0);

	if (fresh < 0)
		test_fail_errno("pidfd_open(self) after restore");
	expect_pid(SELF_FD, getpid(), "parent");
	expect_flags(SELF_FD, 0, "parent");
	if (ino_of(SELF_FD, "parent") != ino_of(fresh, "parent"))
		test_fail("parent: fd %d is not on the pidfs inode of the test itself", SELF_FD);
	close(fresh);
	if (!thread_fd)
		return;
	expect_pid(SELF_THREAD_FD, getpid(), "parent");
	expect_flags(SELF_THREAD_FD, PIDFD_THREAD, "parent");
	if (ino_of(SELF_THREAD_FD, "parent") != ino_of(SELF_FD, "parent"))
		test_fail("parent: the PIDFD_THREAD fd is not on the test's own inode");
}

static void check_dead(void)
{
	unsigned long long ino = ino_of(DEAD_FD, "parent");

	expect_exited(DEAD_FD, "parent");
	expect_exited(DEAD_NB_FD, "parent");
	expect_flags(DEAD_FD, 0, "parent");
	expect_flags(DEAD_NB_FD, O_NONBLOCK, "parent");
	if (ino_of(DEAD_NB_FD, "parent") != ino)
		test_fail("parent: the two pidfds on the reaped child have inodes %llu and %llu",
			  ino, ino_of(DEAD_NB_FD, "parent"));
	if (ino == ino_of(SELF_FD, "parent") || ino == ino_of(LIVE_FD, "parent"))
		test_fail("parent: the reaped child shares its inode with a live process");
}

/* Two descriptions on one inode; waiting through the PIDFD_NONBLOCK one would block. */
static void check_live(pid_t child)
{
	int fresh = pidfd_open(child, 0);
	siginfo_t info;

	if (fresh < 0)
		test_fail_errno("pidfd_open(child) after restore");
	expect_pid(LIVE_NB_FD, child, "parent");
	expect_pid(LIVE_FD, child, "parent");
	expect_flags(LIVE_NB_FD, O_NONBLOCK, "parent");
	expect_flags(LIVE_FD, 0, "parent");
	if (ino_of(LIVE_NB_FD, "parent") != ino_of(fresh, "parent") ||
	    ino_of(LIVE_FD, "parent") != ino_of(fresh, "parent"))
		test_fail("parent: the pidfds on the child are not on its pidfs inode");
	close(fresh);
	if (waitid(P_PIDFD, LIVE_NB_FD, &info, WEXITED) != -1 || errno != EAGAIN)
		test_fail("parent: waitid() through the PIDFD_NONBLOCK fd did not say EAGAIN");
}

/* SIGUSR1 through one pidfd, the child's exit through the other. */
static void signal_and_reap(pid_t child)
{
	siginfo_t info = { 0 };

	if (syscall(SYS_pidfd_send_signal, LIVE_NB_FD, SIGUSR1, NULL, 0))
		test_fail_errno("pidfd_send_signal(SIGUSR1)");
	if (waitid(P_PIDFD, LIVE_FD, &info, WEXITED))
		test_fail_errno("waitid(P_PIDFD)");
	if (info.si_pid != child || info.si_code != CLD_EXITED || info.si_status)
		test_fail("the child %d ended with code %d status %d (see its FAIL line)",
			  info.si_pid, info.si_code, info.si_status);
	if (!report->checked || report->dead_ino != ino_of(DEAD_NB_FD, "parent"))
		test_fail("the child saw the reaped child on inode %llu, the parent on %llu",
			  report->dead_ino, ino_of(DEAD_NB_FD, "parent"));
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
		test_fail("the test has a child it did not make");
}

int main(int argc, char **argv)
{
	bool thread_fd = !getenv("ZDTM_PIDFD_UPSTREAM");
	pid_t child, zombie;

	test_init(argc, argv);
	report = mmap(NULL, sizeof(*report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (report == MAP_FAILED)
		test_fail_errno("mmap");
	pidfd_at(getpid(), 0, SELF_FD);
	if (thread_fd)
		pidfd_at(getpid(), PIDFD_THREAD, SELF_THREAD_FD);
	make_dead_child();
	zombie = make_zombie_child();
	child = test_fork_child(child_main);
	pidfd_at(child, PIDFD_NONBLOCK, LIVE_NB_FD);
	pidfd_at(child, 0, LIVE_FD);
	test_ready();
	test_wait_sigterm();

	check_self(thread_fd);
	check_dead();
	check_live(child);
	check_zombie(zombie);
	signal_and_reap(child);
	test_pass();
}
