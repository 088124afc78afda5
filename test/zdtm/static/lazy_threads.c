/*
 * Four threads read one buffer at once right after a lazy restore: concurrent faults on
 * the same missing pages, each thread seeing every word as dumped.
 */
#include <pthread.h>
#include <time.h>

#include "zdtmtst.h"

#define BUF_SIZE (256ul << 20)
#define NR_THREADS 4

static unsigned char *buf;
static int go;
static ssize_t bad[NR_THREADS];

static void *reader(void *arg)
{
	struct timespec pause = { 0, 1000 * 1000 };
	long nr = (long)arg;

	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		nanosleep(&pause, NULL);
	bad[nr] = pattern_check(buf, BUF_SIZE, 41);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[NR_THREADS];
	long i;

	test_init(argc, argv);
	buf = test_map_pattern(BUF_SIZE, 41);
	for (i = 0; i < NR_THREADS; i++)
		if (pthread_create(&threads[i], NULL, reader, (void *)i))
			test_fail("pthread_create %ld", i);

	test_ready();
	test_wait_lazy_restore(buf + BUF_SIZE - 1);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (i = 0; i < NR_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < NR_THREADS; i++)
		if (bad[i] >= 0)
			test_fail("thread %ld: byte %zd of the buffer is not as dumped", i, bad[i]);
	test_wait_sigterm();
	pattern_expect(buf, BUF_SIZE, 41, "buffer");
	test_pass();
}
