/*
 * Interval timers survive: ITIMER_REAL, ITIMER_VIRTUAL and ITIMER_PROF keep their
 * intervals exactly and their remaining time (not more than before dump, not expired),
 * and none of them fired.
 */
#include <signal.h>
#include <sys/time.h>

#include "zdtmtst.h"

static volatile int timer_signals;

static void count_signal(int sig)
{
	(void)sig;
	timer_signals++;
}

static long long to_usec(const struct timeval *tv)
{
	return tv->tv_sec * 1000000ll + tv->tv_usec;
}

/*
 * The kernel adds one tick to every value set on a CPU-time itimer (VIRTUAL, PROF) so
 * that it never fires early; the restore's setitimer adds it once more. Measure it:
 * what a get right after a set returns above the value set (no CPU time in between
 * worth a tick).
 */
static long long cpu_itimer_set_rounding(const struct itimerval *set_value,
					 const struct itimerval *read_back)
{
	return to_usec(&read_back->it_value) - to_usec(&set_value->it_value);
}

int main(int argc, char **argv)
{
	static const int which[3] = { ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF };
	static const char *const names[3] = { "REAL", "VIRTUAL", "PROF" };
	struct itimerval set_values[3], before[3], after;
	struct sigaction sa = { .sa_handler = count_signal };

	test_init(argc, argv);

	if (sigaction(SIGALRM, &sa, NULL) || sigaction(SIGVTALRM, &sa, NULL) ||
	    sigaction(SIGPROF, &sa, NULL))
		test_fail_errno("sigaction");
	for (int i = 0; i < 3; i++) {
		struct itimerval value = { .it_interval = { 2000 + i, 1000 * i + 7 },
					   .it_value = { 1000 + 100 * i, 500000 } };

		set_values[i] = value;
		if (setitimer(which[i], &value, NULL))
			test_fail_errno("setitimer");
	}
	for (int i = 0; i < 3; i++)
		if (getitimer(which[i], &before[i]))
			test_fail_errno("getitimer");

	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < 3; i++) {
		if (getitimer(which[i], &after))
			test_fail_errno("getitimer");
		if (to_usec(&after.it_interval) != to_usec(&before[i].it_interval))
			test_fail("ITIMER_%s interval %lld us -> %lld us", names[i],
				  to_usec(&before[i].it_interval), to_usec(&after.it_interval));
		long long slack = which[i] == ITIMER_REAL ? 0 :
				  cpu_itimer_set_rounding(&set_values[i], &before[i]);

		if (to_usec(&after.it_value) <= 0 ||
		    to_usec(&after.it_value) > to_usec(&before[i].it_value) + slack)
			test_fail("ITIMER_%s remaining %lld us -> %lld us", names[i],
				  to_usec(&before[i].it_value), to_usec(&after.it_value));
	}
	if (timer_signals)
		test_fail("%d timer signals arrived", timer_signals);
	test_pass();
}
