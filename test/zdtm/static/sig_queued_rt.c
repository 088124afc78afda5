/*
 * Queued real-time signals survive with their payloads and order: values queued with
 * sigqueue() to two blocked RT signals come out lowest signal first, each in queue
 * order, with si_code SI_QUEUE and the sender's pid.
 */
#include <signal.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NR_QUEUED 8
#define FIRST_SIG (SIGRTMIN + 1)
#define SECOND_SIG (SIGRTMIN + 5)

static int payload(int sig, int i)
{
	return sig * 1000 + i * 7 + 1;
}

int main(int argc, char **argv)
{
	struct timespec no_wait = { 0, 0 };
	siginfo_t info;
	sigset_t set;

	test_init(argc, argv);

	sigemptyset(&set);
	sigaddset(&set, FIRST_SIG);
	sigaddset(&set, SECOND_SIG);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		test_fail_errno("block");
	/* interleaved: the kernel must still hand out FIRST_SIG's queue first */
	for (int i = 0; i < NR_QUEUED; i++) {
		union sigval first = { .sival_int = payload(FIRST_SIG, i) };
		union sigval second = { .sival_int = payload(SECOND_SIG, i) };

		if (sigqueue(getpid(), SECOND_SIG, second) || sigqueue(getpid(), FIRST_SIG, first))
			test_fail_errno("sigqueue");
	}

	test_ready();
	test_wait_sigterm();

	for (int sig = FIRST_SIG; sig <= SECOND_SIG; sig += SECOND_SIG - FIRST_SIG) {
		for (int i = 0; i < NR_QUEUED; i++) {
			int got = sigtimedwait(&set, &info, &no_wait);

			if (got != sig)
				test_fail("signal #%d of %d: got %d, expected %d", i, sig, got, sig);
			if (info.si_value.sival_int != payload(sig, i) || info.si_code != SI_QUEUE ||
			    info.si_pid != getpid())
				test_fail("signal %d #%d: value %d code %d pid %d, expected %d %d %d",
					  sig, i, info.si_value.sival_int, info.si_code, info.si_pid,
					  payload(sig, i), SI_QUEUE, getpid());
		}
	}
	if (sigtimedwait(&set, &info, &no_wait) != -1)
		test_fail("more signals than were queued");
	test_pass();
}
