/*
 * A process whose effective uid is not root (euid 1000; ruid, suid and fsuid 0), with 32
 * threads, that made itself dumpable again after the uid change (the kernel clears the flag
 * on it). Restore gives each thread its credentials, and every change of them clears the
 * flag again: after restore the process must still be dumpable, and /proc/self, owned by
 * the euid of a dumpable process (by root otherwise), must be owned by 1000.
 */
#include <pthread.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define EUID	   1000
#define NR_THREADS 32

static pthread_barrier_t done;

static void *thread_main(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&done);
	return NULL;
}

static void expect_dumpable(const char *when)
{
	struct stat st;
	int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);

	if (dumpable != 1)
		test_fail("%s: PR_GET_DUMPABLE says %d, expected 1", when, dumpable);
	if (stat("/proc/self", &st) || st.st_uid != EUID)
		test_fail("%s: /proc/self is owned by uid %u, expected %u", when,
			  (unsigned int)st.st_uid, EUID);
}

int main(int argc, char **argv)
{
	pthread_t threads[NR_THREADS];
	int i;

	test_init(argc, argv);
	/* fsuid back to 0: the test's files in the runner's directory stay writable. */
	if (setresuid(0, EUID, 0))
		test_fail_errno("setresuid(0, 1000, 0)");
	setfsuid(0);
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		test_fail_errno("PR_SET_DUMPABLE");
	pthread_barrier_init(&done, NULL, NR_THREADS + 1);
	for (i = 0; i < NR_THREADS; i++)
		if (pthread_create(&threads[i], NULL, thread_main, NULL))
			test_fail("pthread_create %d", i);
	expect_dumpable("before the dump");

	test_ready();
	test_wait_sigterm();

	expect_dumpable("after restore");
	pthread_barrier_wait(&done);
	for (i = 0; i < NR_THREADS; i++)
		pthread_join(threads[i], NULL);
	test_pass();
}
