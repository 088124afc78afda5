/*
 * An ITIMER_REAL that expired while its SIGALRM is blocked: the kernel leaves it disarmed
 * (getitimer reads a value of 0, the interval kept) until the signal is dequeued, and
 * re-arms it then. After restore the SIGALRM must still be pending and, once delivered,
 * the timer must go on ticking every interval, not stay disarmed for good.
 */
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "zdtmtst.h"

#define INTERVAL_US 100000
/* Far beyond the interval: only a timer that is not armed at all misses it. */
#define TICK_WAIT_S 5

static volatile sig_atomic_t ticks;

static void on_alarm(int sig)
{
	(void)sig;
	ticks++;
}

static bool alarm_pending(void)
{
	sigset_t pending;

	if (sigpending(&pending))
		test_fail_errno("sigpending");
	return sigismember(&pending, SIGALRM);
}

static void expect_expired_state(const char *when)
{
	struct itimerval now;

	if (getitimer(ITIMER_REAL, &now))
		test_fail_errno("getitimer");
	if (now.it_interval.tv_sec || now.it_interval.tv_usec != INTERVAL_US)
		test_fail("%s: the interval is %ld.%06ld s", when, (long)now.it_interval.tv_sec,
			  (long)now.it_interval.tv_usec);
	if (!alarm_pending())
		test_fail("%s: SIGALRM is not pending", when);
}

int main(int argc, char **argv)
{
	struct itimerval tv = { .it_interval = { 0, INTERVAL_US }, .it_value = { 0, 1000 } };
	struct timespec pause = { 0, 1000000 };
	sigset_t alarm_only;
	time_t deadline;

	test_init(argc, argv);
	if (signal(SIGALRM, on_alarm) == SIG_ERR)
		test_fail_errno("signal");
	sigemptyset(&alarm_only);
	sigaddset(&alarm_only, SIGALRM);
	if (sigprocmask(SIG_BLOCK, &alarm_only, NULL) || setitimer(ITIMER_REAL, &tv, NULL))
		test_fail_errno("block SIGALRM, setitimer");
	while (!alarm_pending())
		nanosleep(&pause, NULL);
	expect_expired_state("before the dump");

	test_ready();
	test_wait_sigterm();
	expect_expired_state("after restore");
	if (sigprocmask(SIG_UNBLOCK, &alarm_only, NULL))
		test_fail_errno("unblock SIGALRM");
	/* The pending one at once, then the timer, re-armed when it was dequeued. */
	deadline = time(NULL) + TICK_WAIT_S;
	while (ticks < 3 && time(NULL) < deadline)
		nanosleep(&pause, NULL);
	if (ticks < 3)
		test_fail("%d SIGALRMs in %d s with an interval of %d us: the timer stayed disarmed",
			  (int)ticks, TICK_WAIT_S, INTERVAL_US);
	test_pass();
}
