/*
 * A dump of a multi-threaded process that fails (it holds a netlink socket, which the
 * dumper does not support) after every thread was seized and its state read by injected
 * syscalls leaves every thread untouched: none is traced or stopped, each keeps its
 * blocked mask, and each comes back from its futex wait when woken.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NR_THREADS 4

static pid_t tids[NR_THREADS];
static char failures[NR_THREADS][128];
static uint32_t wake_word;

/* A signal only thread idx blocks. */
static int own_signal(int idx)
{
	return SIGRTMIN + 4 + idx;
}

static void *thread_main(void *arg)
{
	int idx = (int)(long)arg;
	sigset_t block, now;

	sigemptyset(&block);
	sigaddset(&block, own_signal(idx));
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	__atomic_store_n(&tids[idx], gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&wake_word, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &wake_word, FUTEX_WAIT, 0, NULL, NULL, 0);
	pthread_sigmask(SIG_BLOCK, NULL, &now);
	for (int i = 0; i < NR_THREADS; i++)
		if (sigismember(&now, own_signal(i)) != (i == idx))
			snprintf(failures[idx], sizeof(failures[idx]),
				 "thread %d: signal %d %sblocked", idx, own_signal(i),
				 i == idx ? "not " : "");
	return NULL;
}

/* The thread must be neither traced nor stopped (ptrace or group stop). */
static void check_untouched(int idx)
{
	char path[64], buf[4096], field[64], *line;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tids[idx]);
	read_file(path, buf, sizeof(buf));
	line = strstr(buf, "TracerPid:");
	if (!line || sscanf(line, "TracerPid: %63s", field) != 1 || strcmp(field, "0"))
		test_fail("thread %d is still traced", idx);
	line = strstr(buf, "State:");
	if (!line || sscanf(line, "State: %63s", field) != 1 || strchr("tT", field[0]))
		test_fail("thread %d is left stopped (%s)", idx, field);
}

static long current_syscall(pid_t tid)
{
	char path[64], buf[256];
	long nr;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	read_file(path, buf, sizeof(buf));
	return sscanf(buf, "%ld", &nr) == 1 ? nr : -1;
}

int main(int argc, char **argv)
{
	static struct unsupported_socket us;
	pthread_t threads[NR_THREADS];

	test_init(argc, argv);
	test_unsupported_socket(&us);
	for (long i = 0; i < NR_THREADS; i++) {
		if (pthread_create(&threads[i], NULL, thread_main, (void *)i))
			test_fail("cannot create thread %ld", i);
		while (!__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE) ||
		       current_syscall(tids[i]) != SYS_futex)
			usleep(1000);
	}

	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < NR_THREADS; i++)
		check_untouched(i);
	__atomic_store_n(&wake_word, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &wake_word, FUTEX_WAKE, NR_THREADS, NULL, NULL, 0);
	for (int i = 0; i < NR_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (int i = 0; i < NR_THREADS; i++)
		if (failures[i][0])
			test_fail("%s", failures[i]);
	test_pass();
}
