/*
 * A SIGEV_THREAD POSIX timer firing every millisecond: glibc aims it (SIGEV_THREAD_ID) at
 * its helper thread, with its internal signal 32, which glibc's sigprocmask() never
 * blocks. It fires while the task is restored; after restore the timer has its interval
 * and its notifications still arrive (each runs the function in a new thread). With
 * ZDTM_TIMER_PIDNS set the task is the init of a pid namespace of its own.
 */
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define INTERVAL_NS 1000000
#define WAIT_MS	    5000

static int efd;

static void on_expiry(union sigval value)
{
	uint64_t one = 1;

	(void)value;
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		_exit(1);
}

/* One notification at least, within WAIT_MS. */
static void expect_notification(const char *when)
{
	struct pollfd pfd = { efd, POLLIN, 0 };
	uint64_t count;

	if (poll(&pfd, 1, WAIT_MS) != 1)
		test_fail("%s: no notification of the timer within %d ms", when, WAIT_MS);
	if (read(efd, &count, sizeof(count)) != sizeof(count) || !count)
		test_fail_errno("read the eventfd");
}

int main(int argc, char **argv)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD, .sigev_notify_function = on_expiry };
	struct itimerspec spec = { { 0, INTERVAL_NS }, { 0, INTERVAL_NS } };
	timer_t timer;

	test_init(argc, argv);
	if (getenv("ZDTM_TIMER_PIDNS"))
		test_launch_root(CLONE_NEWPID);
	efd = eventfd(0, 0);
	if (efd < 0 || timer_create(CLOCK_MONOTONIC, &sev, &timer) ||
	    timer_settime(timer, 0, &spec, NULL))
		test_fail_errno("eventfd, timer_create or timer_settime");
	/* glibc's helper thread exists once the first notification came */
	expect_notification("before the dump");
	test_ready();
	test_wait_sigterm();

	if (timer_gettime(timer, &spec))
		test_fail_errno("timer_gettime");
	if (spec.it_interval.tv_sec || spec.it_interval.tv_nsec != INTERVAL_NS)
		test_fail("interval %ld.%09ld after restore", (long)spec.it_interval.tv_sec,
			  spec.it_interval.tv_nsec);
	/* the first read may take what queued up meanwhile: the second needs a new one */
	expect_notification("after restore");
	expect_notification("after restore, again");
	test_pass();
}
