/*
 * signalfds come back with their mask and SFD_NONBLOCK, and read the signals that were
 * pending at dump: a standard one and a queued real-time one with its value.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NONBLOCK_FD 40 /* SIGUSR1, SIGWINCH, SIGRTMIN + 1; SFD_NONBLOCK */
#define BLOCKING_FD 41 /* SIGUSR2 */
#define RT_VALUE    0x5eed

static void make_signalfd(const int *signals, int nr, int flags, int at)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	for (int i = 0; i < nr; i++)
		sigaddset(&mask, signals[i]);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		test_fail_errno("sigprocmask");
	fd = signalfd(-1, &mask, flags);
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("signalfd");
	close(fd);
}

static void expect_nonblock(int fd, bool want)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		test_fail_errno("F_GETFL");
	if (!!(flags & O_NONBLOCK) != want)
		test_fail("fd %d has flags %#o, O_NONBLOCK expected %s", fd, flags,
			  want ? "set" : "clear");
}

static void expect_signal(int fd, int signo, bool queued)
{
	struct signalfd_siginfo si;

	read_exact(fd, &si, sizeof(si), "a pending signal through the signalfd");
	if ((int)si.ssi_signo != signo)
		test_fail("read signal %u, expected %d", si.ssi_signo, signo);
	if (queued && (si.ssi_code != SI_QUEUE || si.ssi_int != RT_VALUE))
		test_fail("signal %d: code %d value %#x, expected SI_QUEUE and %#x", signo,
			  si.ssi_code, si.ssi_int, RT_VALUE);
}

int main(int argc, char **argv)
{
	const int nonblock_signals[] = { SIGUSR1, SIGWINCH, SIGRTMIN + 1 };
	const int blocking_signals[] = { SIGUSR2 };
	char mask_before[2][64], mask_after[64];
	struct signalfd_siginfo si;
	struct pollfd pfd = { .fd = BLOCKING_FD, .events = POLLIN };
	union sigval value = { .sival_int = RT_VALUE };

	test_init(argc, argv);
	make_signalfd(nonblock_signals, 3, SFD_NONBLOCK, NONBLOCK_FD);
	make_signalfd(blocking_signals, 1, 0, BLOCKING_FD);
	fdinfo_field(NONBLOCK_FD, "sigmask", mask_before[0], sizeof(mask_before[0]));
	fdinfo_field(BLOCKING_FD, "sigmask", mask_before[1], sizeof(mask_before[1]));
	if (raise(SIGUSR1) || sigqueue(getpid(), SIGRTMIN + 1, value))
		test_fail_errno("send the pending signals");

	test_ready();
	test_wait_sigterm();

	fdinfo_field(NONBLOCK_FD, "sigmask", mask_after, sizeof(mask_after));
	if (strcmp(mask_before[0], mask_after))
		test_fail("fd %d: sigmask %s, expected %s", NONBLOCK_FD, mask_after,
			  mask_before[0]);
	fdinfo_field(BLOCKING_FD, "sigmask", mask_after, sizeof(mask_after));
	if (strcmp(mask_before[1], mask_after))
		test_fail("fd %d: sigmask %s, expected %s", BLOCKING_FD, mask_after,
			  mask_before[1]);
	expect_nonblock(NONBLOCK_FD, true);
	expect_nonblock(BLOCKING_FD, false);
	/* Standard signals are dequeued before real-time ones. */
	expect_signal(NONBLOCK_FD, SIGUSR1, false);
	expect_signal(NONBLOCK_FD, SIGRTMIN + 1, true);
	if (read(NONBLOCK_FD, &si, sizeof(si)) != -1 || errno != EAGAIN)
		test_fail("a third read did not say EAGAIN");
	if (poll(&pfd, 1, 0) != 0)
		test_fail("the SIGUSR2 signalfd is readable with nothing pending");
	test_pass();
}
