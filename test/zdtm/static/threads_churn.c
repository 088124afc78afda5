/*
 * A thread (the churner) starts short-lived threads without pause, each returning at once
 * and joined, as a pool lets its workers go. At dump time such a thread is often listed
 * in /proc/PID/task and gone before criu seizes it: the dump must read the list again
 * without it rather than fail. After restore the churner starts AFTER_RESTORE more, and
 * every join returns the value its thread returned.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "zdtmtst.h"

#define BEFORE_READY 1000
#define AFTER_RESTORE 1000
#define WAIT_SECONDS 10

static volatile unsigned long nr_joined;
static volatile int stop;

static void *short_lived(void *arg)
{
	return arg;
}

static void *churn(void *arg)
{
	uintptr_t n;
	pthread_t th;
	void *ret;
	int err;

	(void)arg;
	for (n = 1; !stop; n++) {
		err = pthread_create(&th, NULL, short_lived, (void *)n);
		if (err)
			test_fail("churner: pthread_create: %s", strerror(err));
		err = pthread_join(th, &ret);
		if (err)
			test_fail("churner: pthread_join: %s", strerror(err));
		if (ret != (void *)n)
			test_fail("churner: thread %lu returned %p", (unsigned long)n, ret);
		nr_joined++;
	}
	return NULL;
}

static void wait_joined(unsigned long target, const char *when)
{
	struct timespec pause = { .tv_nsec = 1000000 };
	unsigned int ms;

	for (ms = 0; nr_joined < target; ms++) {
		if (ms > WAIT_SECONDS * 1000)
			test_fail("%s: the churner joined %lu threads, expected %lu", when,
				  nr_joined, target);
		nanosleep(&pause, NULL);
	}
}

int main(int argc, char **argv)
{
	pthread_t churner;
	int err;

	test_init(argc, argv);
	err = pthread_create(&churner, NULL, churn, NULL);
	if (err)
		test_fail("pthread_create: %s", strerror(err));
	wait_joined(BEFORE_READY, "before the dump");
	test_ready();
	test_wait_sigterm();

	wait_joined(nr_joined + AFTER_RESTORE, "after the restore");
	stop = 1;
	err = pthread_join(churner, NULL);
	if (err)
		test_fail("pthread_join(churner): %s", strerror(err));
	test_pass();
}
