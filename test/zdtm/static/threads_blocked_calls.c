/*
 * Threads dumped while blocked in the kernel carry on after restore: one in a raw
 * FUTEX_WAIT, one in nanosleep, one in sigwaitinfo, and a pthread mutex held by one
 * thread across the dump while another waits for it. The runner dumps only once
 * /proc shows every one inside its syscall.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

enum { T_FUTEX, T_SLEEP, T_SIGWAIT, T_HOLDER, T_WAITER, NR_THREADS };

static const char *const thread_names[NR_THREADS] = { "futex", "nanosleep", "sigwaitinfo",
						      "mutex holder", "mutex waiter" };
/* The syscall /proc/self/task/TID/syscall shows while each one is blocked. */
static const long blocked_in[NR_THREADS] = { SYS_futex, SYS_clock_nanosleep, SYS_rt_sigtimedwait,
					     SYS_futex, SYS_futex };

#define SIGWAIT_VALUE 0x5eed1234
#define STACK_BYTES 1024

static pid_t tids[NR_THREADS];
static char failures[NR_THREADS][160];
static uint32_t futex_word, holder_word; /* 0 while the thread must keep waiting */
static atomic_int sleep_done, sleep_exited;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int waiter_locked;

static void fail_thread(int idx, const char *what)
{
	snprintf(failures[idx], sizeof(failures[idx]), "%s thread: %s", thread_names[idx], what);
}

/* A pattern on the thread's own stack, checked once it is back from the kernel. */
static void check_stack(int idx, const unsigned char *buf)
{
	if (pattern_check(buf, STACK_BYTES, 500 + idx) >= 0)
		fail_thread(idx, "its stack changed while it was blocked");
}

static void wait_word(uint32_t *word)
{
	while (!__atomic_load_n(word, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, word, FUTEX_WAIT, 0, NULL, NULL, 0);
}

static void *futex_thread(void *arg)
{
	unsigned char stack[STACK_BYTES];

	(void)arg;
	tids[T_FUTEX] = gettid();
	pattern_fill(stack, STACK_BYTES, 500 + T_FUTEX);
	wait_word(&futex_word);
	check_stack(T_FUTEX, stack);
	return NULL;
}

/* A restarted nanosleep may come back early (EINTR): sleep again until told to stop. */
static void *sleep_thread(void *arg)
{
	unsigned char stack[STACK_BYTES];
	struct timespec long_sleep = { 3600, 0 };

	(void)arg;
	tids[T_SLEEP] = gettid();
	pattern_fill(stack, STACK_BYTES, 500 + T_SLEEP);
	while (!atomic_load(&sleep_done))
		if (nanosleep(&long_sleep, NULL) && errno != EINTR)
			fail_thread(T_SLEEP, strerror(errno));
	check_stack(T_SLEEP, stack);
	atomic_store(&sleep_exited, 1);
	return NULL;
}

static void *sigwait_thread(void *arg)
{
	unsigned char stack[STACK_BYTES];
	siginfo_t info;
	sigset_t set;
	int sig;

	(void)arg;
	tids[T_SIGWAIT] = gettid();
	pattern_fill(stack, STACK_BYTES, 500 + T_SIGWAIT);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	/* The freeze and thaw of the dump wake it with EINTR: that is not its signal. */
	do
		sig = sigwaitinfo(&set, &info);
	while (sig < 0 && errno == EINTR);
	if (sig != SIGUSR2 || info.si_value.sival_int != SIGWAIT_VALUE)
		fail_thread(T_SIGWAIT, "did not get SIGUSR2 with its value");
	check_stack(T_SIGWAIT, stack);
	return NULL;
}

static void *holder_thread(void *arg)
{
	(void)arg;
	tids[T_HOLDER] = gettid();
	if (pthread_mutex_lock(&mutex))
		fail_thread(T_HOLDER, "cannot lock the mutex");
	wait_word(&holder_word);
	/* The waiter must not have got in while we held it. */
	if (atomic_load(&waiter_locked))
		fail_thread(T_HOLDER, "the waiter locked the mutex while it was held");
	pthread_mutex_unlock(&mutex);
	return NULL;
}

static void *waiter_thread(void *arg)
{
	(void)arg;
	tids[T_WAITER] = gettid();
	if (pthread_mutex_lock(&mutex))
		fail_thread(T_WAITER, "cannot lock the mutex");
	atomic_store(&waiter_locked, 1);
	pthread_mutex_unlock(&mutex);
	return NULL;
}

/* The syscall number the thread is blocked in, -1 while it runs. */
static long current_syscall(pid_t tid)
{
	char path[64], buf[256];
	long nr;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	read_file(path, buf, sizeof(buf));
	if (sscanf(buf, "%ld", &nr) != 1)
		return -1;
	return nr;
}

static void wait_blocked(int idx)
{
	while (!__atomic_load_n(&tids[idx], __ATOMIC_ACQUIRE) ||
	       current_syscall(tids[idx]) != blocked_in[idx])
		usleep(1000);
}

static void release_threads(pthread_t *threads)
{
	union sigval value = { .sival_int = SIGWAIT_VALUE };

	__atomic_store_n(&futex_word, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &futex_word, FUTEX_WAKE, 1, NULL, NULL, 0);
	atomic_store(&sleep_done, 1);
	/* SIGUSR1 (a no-op handler) cuts the hour-long sleep short, until it has seen done. */
	while (!atomic_load(&sleep_exited)) {
		pthread_kill(threads[T_SLEEP], SIGUSR1);
		usleep(1000);
	}
	if (pthread_sigqueue(threads[T_SIGWAIT], SIGUSR2, value))
		test_fail_errno("pthread_sigqueue");
	/* The mutex is still held by the holder: the waiter waits on. */
	if (pthread_mutex_trylock(&mutex) != EBUSY)
		test_fail("the mutex held across the dump is free after restore");
	__atomic_store_n(&holder_word, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &holder_word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void on_sigusr1(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	void *(*const bodies[NR_THREADS])(void *) = { futex_thread, sleep_thread, sigwait_thread,
						       holder_thread, waiter_thread };
	struct sigaction sa = { .sa_handler = on_sigusr1 };
	pthread_t threads[NR_THREADS];
	sigset_t usr2;

	test_init(argc, argv);
	/* SIGUSR2 waits in the sigwaitinfo thread's queue, never in a handler. */
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	if (sigaction(SIGUSR1, &sa, NULL) || pthread_sigmask(SIG_BLOCK, &usr2, NULL))
		test_fail_errno("signal setup");

	for (int i = 0; i < NR_THREADS; i++) {
		if (pthread_create(&threads[i], NULL, bodies[i], NULL))
			test_fail("cannot create the %s thread", thread_names[i]);
		/* The waiter starts only once the holder owns the mutex. */
		wait_blocked(i);
	}

	test_ready();
	test_wait_sigterm();

	release_threads(threads);
	for (int i = 0; i < NR_THREADS; i++)
		pthread_join(threads[i], NULL);
	for (int i = 0; i < NR_THREADS; i++)
		if (failures[i][0])
			test_fail("%s", failures[i]);
	if (!atomic_load(&waiter_locked))
		test_fail("the mutex waiter never got the mutex");
	test_pass();
}
