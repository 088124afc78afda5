/*
 * POSIX timers survive: each keeps its kernel id, clock, notification signal and
 * value, its interval exactly and its remaining time (not more than before, not
 * expired); none fired.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

struct test_timer {
	clockid_t clock;
	int signo;
	int value;
	int kernel_id;
	struct itimerspec before;
};

static struct test_timer timers[] = {
	{ .clock = CLOCK_MONOTONIC, .signo = SIGUSR1, .value = 111 },
	{ .clock = CLOCK_REALTIME, .signo = SIGUSR2, .value = 222 },
	{ .clock = CLOCK_BOOTTIME, .signo = SIGUSR1, .value = 333 },
};

#define NR_TIMERS (sizeof(timers) / sizeof(timers[0]))

static volatile int timer_signals;

static void count_signal(int sig)
{
	(void)sig;
	timer_signals++;
}

static long long to_nsec(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000ll + ts->tv_nsec;
}

static void create_timer(struct test_timer *timer, int i)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = timer->signo,
				.sigev_value = { .sival_int = timer->value } };
	struct itimerspec spec = { .it_interval = { 3000 + i, 123456 * (i + 1) },
				   .it_value = { 1500 + i, 0 } };

	/* raw syscalls: glibc's timer_t is not the kernel's id for every notify kind */
	if (syscall(SYS_timer_create, timer->clock, &sev, &timer->kernel_id))
		test_fail_errno("timer_create");
	if (syscall(SYS_timer_settime, timer->kernel_id, 0, &spec, NULL) ||
	    syscall(SYS_timer_gettime, timer->kernel_id, &timer->before))
		test_fail_errno("timer_settime");
}

/* /proc/self/timers lists "ID: n", "signal: signo/value" and "ClockID: c" per timer */
static void check_proc_entry(const struct test_timer *timer)
{
	static char text[8192];
	char id_line[32], signal_line[64], clock_line[32], *entry;

	read_file("/proc/self/timers", text, sizeof(text));
	snprintf(id_line, sizeof(id_line), "ID: %d\n", timer->kernel_id);
	snprintf(signal_line, sizeof(signal_line), "signal: %d/%016lx\n", timer->signo,
		 (unsigned long)timer->value);
	snprintf(clock_line, sizeof(clock_line), "ClockID: %d\n", timer->clock);
	entry = strstr(text, id_line);
	if (!entry)
		test_fail("timer %d is not in /proc/self/timers", timer->kernel_id);
	if (strncmp(strstr(entry, "signal: "), signal_line, strlen(signal_line)) ||
	    strncmp(strstr(entry, "ClockID: "), clock_line, strlen(clock_line)))
		test_fail("timer %d: /proc/self/timers entry changed: %.120s", timer->kernel_id,
			  entry);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = count_signal };
	struct itimerspec after;

	test_init(argc, argv);

	if (sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGUSR2, &sa, NULL))
		test_fail_errno("sigaction");
	for (unsigned i = 0; i < NR_TIMERS; i++)
		create_timer(&timers[i], i);
	for (unsigned i = 0; i < NR_TIMERS; i++)
		check_proc_entry(&timers[i]);

	test_ready();
	test_wait_sigterm();

	for (unsigned i = 0; i < NR_TIMERS; i++) {
		struct test_timer *timer = &timers[i];

		if (syscall(SYS_timer_gettime, timer->kernel_id, &after))
			test_fail("timer id %d is gone: %m", timer->kernel_id);
		if (to_nsec(&after.it_interval) != to_nsec(&timer->before.it_interval))
			test_fail("timer %d interval %lld ns -> %lld ns", timer->kernel_id,
				  to_nsec(&timer->before.it_interval), to_nsec(&after.it_interval));
		if (to_nsec(&after.it_value) <= 0 ||
		    to_nsec(&after.it_value) > to_nsec(&timer->before.it_value))
			test_fail("timer %d remaining %lld ns -> %lld ns", timer->kernel_id,
				  to_nsec(&timer->before.it_value), to_nsec(&after.it_value));
		check_proc_entry(timer);
	}
	if (timer_signals)
		test_fail("%d timer signals arrived", timer_signals);
	test_pass();
}
