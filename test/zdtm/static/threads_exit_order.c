/*
 * Threads that die in an order criu does not choose. All threads share CPU 0 and the
 * first one created runs under SCHED_IDLE, so when the dump kills the task that thread is
 * the last to exit. As the init of a pid namespace (ns_pid_init_threads) its last thread
 * finishes exiting only once every other pid of the namespace is free, the traced zombies
 * of its siblings too: criu must reap them as they die, not the first-listed one first.
 * After a restore each thread checks its own policy and the value it was given.
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "zdtmtst.h"

#define NR_THREADS 8

static int go;
static long seen[NR_THREADS];

static void pin_to_cpu0(void)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		test_fail_errno("sched_setaffinity");
}

static void *waiter(void *arg)
{
	struct timespec pause = { 0, 1000 * 1000 };
	struct sched_param none = { 0 };
	long nr = (long)arg;
	long mine = 1000 + nr * 7;

	pin_to_cpu0();
	if (nr == 0 && sched_setscheduler(0, SCHED_IDLE, &none))
		test_fail_errno("SCHED_IDLE");
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		nanosleep(&pause, NULL);
	if (sched_getscheduler(0) != (nr == 0 ? SCHED_IDLE : SCHED_OTHER))
		test_fail("thread %ld: policy %d after restore", nr, sched_getscheduler(0));
	seen[nr] = mine;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[NR_THREADS];
	long i;

	test_init(argc, argv);
	pin_to_cpu0();
	for (i = 0; i < NR_THREADS; i++)
		if (pthread_create(&threads[i], NULL, waiter, (void *)i))
			test_fail("pthread_create %ld", i);

	test_ready();
	test_wait_sigterm();
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (i = 0; i < NR_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < NR_THREADS; i++)
		if (seen[i] != 1000 + i * 7)
			test_fail("thread %ld: saw %ld", i, seen[i]);
	test_pass();
}
