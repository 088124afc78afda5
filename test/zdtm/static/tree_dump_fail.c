/*
 * A dump of a tree that fails (root -> child with a second thread -> grandchild holding a
 * netlink socket, which the dumper does not support) leaves every task of the tree
 * running: each process keeps its own memory and blocked mask, the child's thread its mask
 * and its futex wait, the grandchild its socket with the answer queued in it.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MEM_SIZE (1ul << 20)

/* Per task: a seed for its own memory, and a signal only it blocks. */
enum { ROOT, CHILD, CHILD_THREAD, GRANDCHILD };

static int own_signal(int task)
{
	return SIGRTMIN + 4 + task;
}

static uint32_t thread_wake_word;
static pid_t thread_tid;
static char thread_failure[128];

static unsigned char *own_memory(int task)
{
	unsigned char *mem =
		mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(mem, MEM_SIZE, 100 + task);
	return mem;
}

/* Inherited masks hold the parent's signal: swap it for this task's own. */
static void block_own_signal(int task)
{
	sigset_t mask;

	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	for (int i = ROOT; i <= GRANDCHILD; i++)
		sigdelset(&mask, own_signal(i));
	sigaddset(&mask, own_signal(task));
	if (pthread_sigmask(SIG_SETMASK, &mask, NULL))
		test_fail("task %d: cannot block signal %d", task, own_signal(task));
}

/* The blocked mask must hold exactly this task's own signal among the tasks' signals. */
static const char *mask_error(int task)
{
	static __thread char error[128];
	sigset_t now;

	pthread_sigmask(SIG_BLOCK, NULL, &now);
	for (int i = ROOT; i <= GRANDCHILD; i++)
		if (sigismember(&now, own_signal(i)) != (i == task)) {
			snprintf(error, sizeof(error), "task %d: signal %d %sblocked", task,
				 own_signal(i), i == task ? "not " : "");
			return error;
		}
	return NULL;
}

static void check_self(int task, const unsigned char *mem, const char *who)
{
	const char *error = mask_error(task);

	if (error)
		test_fail("%s: %s", who, error);
	pattern_expect(mem, MEM_SIZE, 100 + task, who);
}

static void __attribute__((noreturn)) run_grandchild(void)
{
	unsigned char *mem = own_memory(GRANDCHILD);
	static struct unsupported_socket us;

	block_own_signal(GRANDCHILD);
	test_unsupported_socket(&us);
	test_barrier_done();
	test_wait_sigterm();

	check_self(GRANDCHILD, mem, "grandchild");
	test_unsupported_socket_check(&us, "grandchild");
	exit(0);
}

static void *child_thread_main(void *arg)
{
	const char *error;

	(void)arg;
	block_own_signal(CHILD_THREAD);
	__atomic_store_n(&thread_tid, gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&thread_wake_word, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &thread_wake_word, FUTEX_WAIT, 0, NULL, NULL, 0);
	error = mask_error(CHILD_THREAD);
	if (error)
		snprintf(thread_failure, sizeof(thread_failure), "child's thread: %s", error);
	return NULL;
}

static long current_syscall(pid_t tid)
{
	char path[64], buf[256];
	long nr;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	read_file(path, buf, sizeof(buf));
	return sscanf(buf, "%ld", &nr) == 1 ? nr : -1;
}

/* The thread is created before the fork: the grandchild is a copy of one thread only. */
static void __attribute__((noreturn)) run_child(void)
{
	unsigned char *mem = own_memory(CHILD);
	pthread_t thread;
	pid_t grandchild;

	block_own_signal(CHILD);
	if (pthread_create(&thread, NULL, child_thread_main, NULL))
		test_fail("child: cannot create its thread");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_ACQUIRE) ||
	       current_syscall(thread_tid) != SYS_futex)
		usleep(1000);
	grandchild = fork();
	if (grandchild < 0)
		test_fail_errno("fork the grandchild");
	if (grandchild == 0)
		run_grandchild();
	test_barrier_done();
	test_wait_sigterm();

	check_self(CHILD, mem, "child");
	__atomic_store_n(&thread_wake_word, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &thread_wake_word, FUTEX_WAKE, 1, NULL, NULL, 0);
	pthread_join(thread, NULL);
	if (thread_failure[0])
		test_fail("%s", thread_failure);
	test_children_verdict(&grandchild, 1, "child");
	exit(0);
}

int main(int argc, char **argv)
{
	unsigned char *mem;
	pid_t child;

	test_init(argc, argv);
	mem = own_memory(ROOT);
	block_own_signal(ROOT);
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork the child");
	if (child == 0)
		run_child();
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	check_self(ROOT, mem, "root");
	test_children_verdict(&child, 1, "root");
	test_pass();
}
