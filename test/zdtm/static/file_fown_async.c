/*
 * The owners of files' I/O signals come back, and the signals reach them: a pipe with
 * O_ASYNC owned by the process (set while its euid was 1: the uids recorded with the owner
 * come back too) with F_SETSIG SIGRTMIN+2; a second pipe owned by one thread (F_OWNER_TID)
 * with SIGRTMIN+3; a regular file owned by that thread (nothing signals on it: its state
 * alone); and a pty master with O_ASYNC owned by the process group with SIGRTMIN+5. After
 * restore F_GETFL, F_GETOWN_EX, F_GETSIG and F_GETOWNER_UIDS read as before, no signal came
 * during the restore, and a write into each pipe or the pty's slave sends its signal, with
 * si_fd the fd's number, to its owner: the process, or that thread.
 *
 * ZDTM_FOWN_UPSTREAM=1 (restored by upstream criu): no thread owns anything, since upstream
 * sets owners when it opens the files, before the threads exist; si_fd is not checked,
 * since upstream sets O_ASYNC before it moves a file to its fd number; and the pty sends
 * nothing after that restore (upstream opens it with O_ASYNC, which open(2) keeps in the
 * flags without registering the file for the signal): its state alone is checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#ifndef F_GETOWNER_UIDS
#define F_GETOWNER_UIDS 17
#endif

#define PIPE_R	   40 /* O_ASYNC, owned by the process, SIGRTMIN+2 */
#define PIPE_W	   41
#define THR_R	   42 /* O_ASYNC, owned by the thread, SIGRTMIN+3 */
#define THR_W	   43
#define REG_FD	   44 /* owned by the thread, SIGRTMIN+4 */
#define MASTER	   45 /* O_ASYNC, owned by the process group, SIGRTMIN+5 */
#define SLAVE	   46
#define NR_FDS	   7
#define NR_SIGS	   4 /* SIGRTMIN+2 .. +5 */
#define OWNER_EUID 1

static const int fds[NR_FDS] = { PIPE_R, PIPE_W, THR_R, THR_W, REG_FD, MASTER, SLAVE };

struct fd_state {
	int flags, sig;
	struct f_owner_ex owner;
	unsigned int uids[2];
};

/* What the handler saw of the last signal of each number, and how many came. */
struct seen {
	int count, fd, code;
	pid_t tid;
};

static volatile struct seen seen[NR_SIGS];
static pid_t thread_tid;
static volatile int thread_stop;
static bool upstream, restored;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	volatile struct seen *s = &seen[sig - SIGRTMIN - 2];

	(void)uc;
	s->fd = si->si_fd;
	s->code = si->si_code;
	s->tid = gettid();
	s->count++;
}

static void block(int how, int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	if (pthread_sigmask(how, &set, NULL))
		test_fail("pthread_sigmask failed");
}

/* The owner of THR_R's signal: the process's and the group's go to the main thread. */
static void *thread_main(void *arg)
{
	(void)arg;
	block(SIG_BLOCK, SIGRTMIN + 2);
	block(SIG_BLOCK, SIGRTMIN + 5);
	block(SIG_UNBLOCK, SIGRTMIN + 3);
	__atomic_store_n(&thread_tid, gettid(), __ATOMIC_RELEASE);
	while (!thread_stop)
		pause();
	return NULL;
}

static void set_owner(int fd, int type, pid_t pid, int sig, bool async)
{
	struct f_owner_ex owner = { .type = type, .pid = pid };
	int flags = fcntl(fd, F_GETFL);

	if (fcntl(fd, F_SETOWN_EX, &owner) || fcntl(fd, F_SETSIG, sig) ||
	    (async && fcntl(fd, F_SETFL, flags | O_ASYNC)))
		test_fail("fd %d: setting its owner: %s", fd, strerror(errno));
}

static void set_up(pid_t tid)
{
	char slave_path[PATH_MAX];
	int master;

	pipe_at(PIPE_R, PIPE_W);
	pipe_at(THR_R, THR_W);
	open_fd_at("fown.reg", O_RDWR | O_CREAT | O_TRUNC, REG_FD);
	master = pty_open_master(O_NONBLOCK, slave_path, sizeof(slave_path));
	if (dup2(master, MASTER) != MASTER)
		test_fail_errno("dup2 of the pty master");
	close(master);
	open_fd_at(slave_path, O_RDWR | O_NOCTTY, SLAVE);
	if (fcntl(PIPE_R, F_SETFL, O_NONBLOCK))
		test_fail_errno("O_NONBLOCK");

	/* The kernel records the caller's uid and euid with the owner. */
	if (setresuid(-1, OWNER_EUID, -1))
		test_fail_errno("setresuid to euid 1");
	set_owner(PIPE_R, F_OWNER_PID, getpid(), SIGRTMIN + 2, true);
	if (setresuid(-1, 0, -1))
		test_fail_errno("setresuid back to euid 0");
	set_owner(THR_R, upstream ? F_OWNER_PID : F_OWNER_TID, upstream ? getpid() : tid,
		  SIGRTMIN + 3, true);
	set_owner(REG_FD, upstream ? F_OWNER_PID : F_OWNER_TID, upstream ? getpid() : tid,
		  SIGRTMIN + 4, false);
	set_owner(MASTER, F_OWNER_PGRP, getpgrp(), SIGRTMIN + 5, true);
}

static void read_state(int fd, struct fd_state *s)
{
	memset(s, 0, sizeof(*s));
	s->flags = fcntl(fd, F_GETFL);
	s->sig = fcntl(fd, F_GETSIG);
	if (s->flags < 0 || s->sig < 0 || fcntl(fd, F_GETOWN_EX, &s->owner) ||
	    fcntl(fd, F_GETOWNER_UIDS, s->uids))
		test_fail("fd %d: reading its owner: %s", fd, strerror(errno));
}

static void check_state(int fd, const struct fd_state *want)
{
	struct fd_state now;

	read_state(fd, &now);
	if (now.flags != want->flags || now.sig != want->sig ||
	    now.owner.type != want->owner.type || now.owner.pid != want->owner.pid ||
	    now.uids[0] != want->uids[0] || now.uids[1] != want->uids[1])
		test_fail("fd %d: flags %#o, signal %d, owner type %d pid %d, uids %u/%u; "
			  "expected %#o, %d, %d, %d, %u/%u",
			  fd, now.flags, now.sig, now.owner.type, now.owner.pid, now.uids[0],
			  now.uids[1], want->flags, want->sig, want->owner.type, want->owner.pid,
			  want->uids[0], want->uids[1]);
}

/* Write one byte into write_fd, wait for signal sig at read_fd of thread tid, drain it. */
static void expect_signal(int write_fd, int read_fd, int sig, pid_t tid, const char *what)
{
	volatile struct seen *s = &seen[sig - SIGRTMIN - 2];
	struct timespec pause_ts = { 0, 1000000 };
	int before = s->count;
	char byte = 'x';

	if (write(write_fd, &byte, 1) != 1)
		test_fail("%s: write: %s", what, strerror(errno));
	for (int i = 0; i < 5000 && s->count == before; i++)
		nanosleep(&pause_ts, NULL);
	if (s->count != before + 1)
		test_fail("%s: %d signals %d, expected one", what, s->count - before, sig);
	if (s->tid != tid || s->code != POLL_IN || (!upstream && s->fd != read_fd))
		test_fail("%s: signal %d reached thread %d with si_fd %d, si_code %d; expected "
			  "thread %d, fd %d, POLL_IN",
			  what, sig, s->tid, s->fd, s->code, tid, read_fd);
	read_exact(read_fd, &byte, 1, what);
}

static void expect_all_signals(pid_t tid)
{
	expect_signal(PIPE_W, PIPE_R, SIGRTMIN + 2, getpid(), "pipe owned by the process");
	/* Upstream's owner there is the process: the thread is the one that takes it. */
	expect_signal(THR_W, THR_R, SIGRTMIN + 3, tid, "pipe owned by the thread");
	if (!upstream || !restored)
		expect_signal(SLAVE, MASTER, SIGRTMIN + 5, getpid(), "pty owned by the group");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct fd_state before[NR_FDS];
	int counts[NR_SIGS];
	pthread_t thread;
	pid_t tid;

	test_init(argc, argv);
	upstream = getenv("ZDTM_FOWN_UPSTREAM") != NULL;
	/* A group of the tree's own: the runner's would not come back with it. */
	if (getpgrp() != getpid() && setpgid(0, 0))
		test_fail_errno("setpgid");
	for (int i = 0; i < NR_SIGS; i++)
		if (sigaction(SIGRTMIN + 2 + i, &sa, NULL))
			test_fail_errno("sigaction");
	block(SIG_BLOCK, SIGRTMIN + 3);
	if (pthread_create(&thread, NULL, thread_main, NULL))
		test_fail("pthread_create failed");
	while (!(tid = __atomic_load_n(&thread_tid, __ATOMIC_ACQUIRE)))
		sched_yield();

	set_up(tid);
	for (int i = 0; i < NR_FDS; i++)
		read_state(fds[i], &before[i]);
	expect_all_signals(tid);
	for (int i = 0; i < NR_SIGS; i++)
		counts[i] = seen[i].count;

	test_ready();
	test_wait_sigterm();
	restored = true;

	for (int i = 0; i < NR_SIGS; i++)
		if (seen[i].count != counts[i])
			test_fail("signal %d came %d times during the restore", SIGRTMIN + 2 + i,
				  seen[i].count - counts[i]);
	for (int i = 0; i < NR_FDS; i++)
		check_state(fds[i], &before[i]);
	expect_all_signals(tid);
	thread_stop = 1;
	if (pthread_kill(thread, SIGRTMIN + 3) || pthread_join(thread, NULL))
		test_fail("cannot stop the thread");
	test_pass();
}
