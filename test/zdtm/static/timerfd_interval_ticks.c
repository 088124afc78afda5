/*
 * timerfds come back on their clock, with their interval, the time they had left (less
 * what passed since: the time spent dumped does not count), their settime flags, their
 * unread expirations and O_NONBLOCK; a disarmed one stays disarmed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)

#define NSEC_PER_SEC 1000000000ll
/* How much of a timer's time may pass between the checks before the dump and after. */
#define TOLERANCE_NS (60 * NSEC_PER_SEC)

struct timer {
	int fd;
	int clockid;
	int create_flags; /* TFD_NONBLOCK or 0 */
	int settime_flags;
	long long value_s, interval_s; /* value_s 0: never armed */
	bool fire_first;		 /* armed 1 ms instead, waited for (its first tick) */
	bool stopped;			 /* its time not asked before the dump (see below) */
	uint64_t ticks;			 /* unread at dump */
	long long left_ns;		 /* measured before the dump */
};

static struct timer timers[] = {
	{ .fd = 40, .clockid = CLOCK_MONOTONIC, .value_s = 600, .interval_s = 3 },
	{ .fd = 41,
	  .clockid = CLOCK_REALTIME,
	  .create_flags = TFD_NONBLOCK,
	  .settime_flags = TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET,
	  .value_s = 900 },
	/* Fired once, then given more unread expirations, as a task that did not read. */
	{ .fd = 42,
	  .clockid = CLOCK_MONOTONIC,
	  .interval_s = 1000,
	  .fire_first = true,
	  .ticks = 5 },
	/* A one-shot that fired: disarmed, one expiration unread. */
	{ .fd = 43, .clockid = CLOCK_REALTIME, .fire_first = true, .ticks = 1 },
	{ .fd = 44, .clockid = CLOCK_BOOTTIME, .create_flags = TFD_NONBLOCK },
	/*
	 * Periodic, expired and unread: the kernel restarts such a timer only when it is read
	 * or asked its time, so until then fdinfo shows no time left.
	 */
	{ .fd = 45,
	  .clockid = CLOCK_MONOTONIC,
	  .interval_s = 100,
	  .fire_first = true,
	  .stopped = true,
	  .ticks = 1 },
};
#define NR_TIMERS (int)(sizeof(timers) / sizeof(timers[0]))

static long long ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static void arm(struct timer *t)
{
	struct itimerspec its = { .it_interval = { .tv_sec = t->interval_s } };
	struct timespec now;

	if (t->fire_first) {
		its.it_value.tv_nsec = 1000000;
	} else {
		its.it_value.tv_sec = t->value_s;
		if (t->settime_flags & TFD_TIMER_ABSTIME) {
			if (clock_gettime(t->clockid, &now))
				test_fail_errno("clock_gettime");
			its.it_value.tv_sec += now.tv_sec;
		}
	}
	if (timerfd_settime(t->fd, t->settime_flags, &its, NULL))
		test_fail_errno("timerfd_settime");
}

static void wait_first_tick(struct timer *t)
{
	struct pollfd pfd = { .fd = t->fd, .events = POLLIN };

	if (poll(&pfd, 1, 10000) != 1)
		test_fail("fd %d: the 1 ms timer did not fire", t->fd);
	if (t->ticks > 1 && ioctl(t->fd, TFD_IOC_SET_TICKS, &t->ticks))
		test_fail_errno("TFD_IOC_SET_TICKS");
}

static void setup(struct timer *t)
{
	int fd = timerfd_create(t->clockid, t->create_flags);

	if (fd < 0 || dup2(fd, t->fd) != t->fd)
		test_fail_errno("timerfd_create");
	close(fd);
	if (t->value_s || t->fire_first)
		arm(t);
	if (t->fire_first)
		wait_first_tick(t);
}

static void get_time(const struct timer *t, struct itimerspec *its)
{
	if (timerfd_gettime(t->fd, its))
		test_fail_errno("timerfd_gettime");
}

/* Asking a stopped timer its time would restart it: it has at most one period left. */
static void note_time_left(struct timer *t)
{
	struct itimerspec its;

	if (t->stopped) {
		t->left_ns = t->interval_s * NSEC_PER_SEC;
		return;
	}
	get_time(t, &its);
	t->left_ns = ns_of(&its.it_value);
}

static void expect_field(const struct timer *t, const char *name, const char *want)
{
	char value[64];

	fdinfo_field(t->fd, name, value, sizeof(value));
	if (strcmp(value, want))
		test_fail("fd %d: %s is \"%s\", expected \"%s\"", t->fd, name, value, want);
}

static void expect_state(const struct timer *t)
{
	char want[32];

	snprintf(want, sizeof(want), "%d", t->clockid);
	expect_field(t, "clockid", want);
	snprintf(want, sizeof(want), "0%o", t->settime_flags);
	expect_field(t, "settime flags", want);
	snprintf(want, sizeof(want), "%" PRIu64, t->ticks);
	expect_field(t, "ticks", want);
	if (!!(fcntl(t->fd, F_GETFL) & O_NONBLOCK) != !!(t->create_flags & TFD_NONBLOCK))
		test_fail("fd %d: O_NONBLOCK is not as it was", t->fd);
}

static void expect_time(const struct timer *t)
{
	struct itimerspec its;
	long long left;

	get_time(t, &its);
	left = ns_of(&its.it_value);
	if (its.it_interval.tv_sec != t->interval_s || its.it_interval.tv_nsec)
		test_fail("fd %d: interval %lld.%09ld s, expected %lld s", t->fd,
			  (long long)its.it_interval.tv_sec, its.it_interval.tv_nsec,
			  t->interval_s);
	if (!t->left_ns && left)
		test_fail("fd %d: disarmed at dump, armed now (%lld ns left)", t->fd, left);
	if (t->left_ns && (left > t->left_ns || left < t->left_ns - TOLERANCE_NS))
		test_fail("fd %d: %lld ns left, %lld ns before the dump", t->fd, left, t->left_ns);
}

static void expect_reads(const struct timer *t)
{
	uint64_t ticks = 0;
	ssize_t n;

	if (!t->ticks) {
		n = read(t->fd, &ticks, sizeof(ticks));
		if (n != -1 || errno != EAGAIN)
			test_fail("fd %d: a read with nothing expired gave %zd", t->fd, n);
		return;
	}
	read_exact(t->fd, &ticks, sizeof(ticks), "unread expirations");
	if (ticks != t->ticks)
		test_fail("fd %d: read %" PRIu64 " expirations, expected %" PRIu64, t->fd, ticks,
			  t->ticks);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	for (int i = 0; i < NR_TIMERS; i++)
		setup(&timers[i]);
	for (int i = 0; i < NR_TIMERS; i++) {
		note_time_left(&timers[i]);
		expect_state(&timers[i]);
	}

	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < NR_TIMERS; i++) {
		expect_state(&timers[i]);
		expect_time(&timers[i]);
		/* Read only the ones that cannot block: expired, or O_NONBLOCK. */
		if (timers[i].ticks || (timers[i].create_flags & TFD_NONBLOCK))
			expect_reads(&timers[i]);
	}
	test_pass();
}
