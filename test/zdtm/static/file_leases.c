/*
 * Leases (F_SETLEASE), active and being broken, come back as they were: F_GETLEASE gives
 * each fd's type (a lease being broken: the type it breaks to), a lease still being
 * broken refuses a conflicting open, the break's signal of the restore never reaches the
 * program, and a break after restore signals the program with the fd (owner and
 * F_SETSIG restored).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BREAK_SIG SIGUSR1

struct lease_case {
	const char *path;
	int fd; /* where the leased file sits */
	int open_mode;
	int lease; /* F_RDLCK / F_WRLCK */
	int break_mode; /* -1: not broken; else the open(2) mode that starts breaking it */
	int expect; /* F_GETLEASE after restore */
};

static struct lease_case cases[] = {
	{ "read.lease", 40, O_RDONLY, F_RDLCK, -1, F_RDLCK },
	{ "write.lease", 41, O_WRONLY, F_WRLCK, -1, F_WRLCK },
	{ "rdwr-to-read.lease", 42, O_RDWR, F_WRLCK, O_RDONLY, F_RDLCK },
	{ "read-to-none.lease", 43, O_RDONLY, F_RDLCK, O_WRONLY, F_UNLCK },
	{ "write-to-none.lease", 44, O_WRONLY, F_WRLCK, O_WRONLY, F_UNLCK },
};
#define NR_CASES (int)(sizeof(cases) / sizeof(cases[0]))

static volatile sig_atomic_t signalled_fd = -1, nr_signals;

static void on_break(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)ctx;
	signalled_fd = info->si_fd;
	nr_signals++;
}

/* An open that conflicts with fd's lease: must fail with EWOULDBLOCK (and start a break). */
static void expect_conflict(const struct lease_case *c, int mode, const char *when)
{
	int fd = open(c->path, mode | O_NONBLOCK);

	if (fd >= 0)
		test_fail("%s: %s: a conflicting open succeeded: no lease", when, c->path);
	if (errno != EWOULDBLOCK)
		test_fail("%s: %s: conflicting open: %s", when, c->path, strerror(errno));
}

static void take_lease(const struct lease_case *c)
{
	int fd;

	write_file(c->path, "lease", 5);
	fd = open(c->path, c->open_mode);
	if (fd < 0 || dup2(fd, c->fd) != c->fd)
		test_fail_errno("open");
	close(fd);
	if (fcntl(c->fd, F_SETSIG, BREAK_SIG) || fcntl(c->fd, F_SETLEASE, c->lease))
		test_fail_errno("F_SETSIG/F_SETLEASE");
	if (c->break_mode < 0)
		return;
	nr_signals = 0;
	expect_conflict(c, c->break_mode, "before dump");
	if (nr_signals != 1 || signalled_fd != c->fd)
		test_fail("%s: break signalled %d times, fd %d", c->path, nr_signals, signalled_fd);
}

static void check_lease(const struct lease_case *c)
{
	int type = fcntl(c->fd, F_GETLEASE);

	if (type != c->expect)
		test_fail("%s: F_GETLEASE is %d, expected %d", c->path, type, c->expect);
	if (fcntl(c->fd, F_GETOWN) != getpid() || fcntl(c->fd, F_GETSIG) != BREAK_SIG)
		test_fail("%s: owner %d signal %d after restore", c->path, fcntl(c->fd, F_GETOWN),
			  fcntl(c->fd, F_GETSIG));
	/* Still being broken: any open that conflicts with the old lease still waits. */
	if (c->break_mode >= 0)
		expect_conflict(c, c->break_mode, "after restore");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_break, .sa_flags = SA_SIGINFO };
	sigset_t unblock;

	test_init(argc, argv);
	if (sigaction(BREAK_SIG, &sa, NULL))
		test_fail_errno("sigaction");
	sigemptyset(&unblock);
	sigaddset(&unblock, BREAK_SIG);
	if (sigprocmask(SIG_UNBLOCK, &unblock, NULL))
		test_fail_errno("sigprocmask");
	for (int i = 0; i < NR_CASES; i++)
		take_lease(&cases[i]);

	test_ready();
	test_wait_sigterm();

	/* Upstream criu's restore lets its own breaks' signal (one SIGUSR1) through. */
	if (nr_signals != 1 && !(getenv("ZDTM_LEASE_BREAK_SIGNAL") && nr_signals == 2))
		test_fail("%d break signals reached the program across the restore", nr_signals - 1);
	nr_signals = 0;
	for (int i = 0; i < NR_CASES; i++)
		check_lease(&cases[i]);
	if (nr_signals)
		test_fail("opens during a break signalled the program %d times", nr_signals);
	/* A new break: the restored owner gets the restored signal, with the fd. */
	expect_conflict(&cases[1], O_RDONLY, "new break after restore");
	if (nr_signals != 1 || signalled_fd != cases[1].fd)
		test_fail("new break: %d signals, fd %d", nr_signals, signalled_fd);
	test_pass();
}
