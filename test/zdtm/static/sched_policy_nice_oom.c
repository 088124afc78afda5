/*
 * Each thread keeps its own scheduling: the main thread SCHED_BATCH at nice 7, one thread
 * SCHED_RR priority 11 with SCHED_RESET_ON_FORK, one SCHED_IDLE at nice 3; and the
 * process keeps its oom_score_adj (raised to 345, which needs no privilege).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

struct sched_want {
	int policy, prio, nice;
	pid_t tid;
};

static struct sched_want wants[3] = {
	{ SCHED_BATCH, 0, 7, 0 },
	{ SCHED_RR | SCHED_RESET_ON_FORK, 11, 0, 0 },
	{ SCHED_IDLE, 0, 3, 0 },
};
static pthread_barrier_t set_up;

static void apply(struct sched_want *w)
{
	struct sched_param param = { .sched_priority = w->prio };

	w->tid = syscall(SYS_gettid);
	if (setpriority(PRIO_PROCESS, w->tid, w->nice) || sched_setscheduler(w->tid, w->policy, &param))
		test_fail_errno("setting scheduling");
}

static void *thread_main(void *arg)
{
	apply(arg);
	pthread_barrier_wait(&set_up);
	for (;;)
		pause();
	return NULL;
}

static void expect(const struct sched_want *w)
{
	struct sched_param param;
	int policy = sched_getscheduler(w->tid), nice;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, w->tid);
	if (policy < 0 || sched_getparam(w->tid, &param) || (nice == -1 && errno))
		test_fail("thread %d: cannot read its scheduling: %s", w->tid, strerror(errno));
	if (policy != w->policy || param.sched_priority != w->prio || nice != w->nice)
		test_fail("thread %d: policy %#x priority %d nice %d, expected %#x %d %d", w->tid,
			  policy, param.sched_priority, nice, w->policy, w->prio, w->nice);
}

int main(int argc, char **argv)
{
	pthread_t threads[2];
	char oom[32];

	test_init(argc, argv);
	pthread_barrier_init(&set_up, NULL, 3);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, thread_main, &wants[i + 1]))
			test_fail("pthread_create");
	pthread_barrier_wait(&set_up);
	apply(&wants[0]);
	write_file("/proc/self/oom_score_adj", "345", 3);
	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < 3; i++)
		expect(&wants[i]);
	read_file("/proc/self/oom_score_adj", oom, sizeof(oom));
	if (atoi(oom) != 345)
		test_fail("oom_score_adj %d, expected 345", atoi(oom));
	test_pass();
}
