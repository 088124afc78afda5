/*
 * Scheduling of each thread and the oom_score_adj of a process. Both can be set on
 * another task by its tid, so restore sets them from criu's main process while the
 * restored threads are held stopped, after the last of them is created: threads inherit
 * the creator's scheduling, so setting them earlier would be undone.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "task-sched.h"

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

int dump_thread_sched(pid_t tid, ThreadCoreEntry *tc)
{
	struct sched_param param;
	int policy, nice;

	policy = sched_getscheduler(tid);
	if (policy < 0 || sched_getparam(tid, &param)) {
		pr_perror("thread %d: cannot read its scheduling policy", tid);
		return -errno;
	}
	/* getpriority() returns the nice value itself, so -1 is only an error with errno. */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, tid);
	if (nice == -1 && errno) {
		pr_perror("thread %d: cannot read its nice value", tid);
		return -errno;
	}
	tc->has_sched_policy = tc->has_sched_prio = tc->has_sched_nice = true;
	tc->sched_policy = policy;
	tc->sched_prio = param.sched_priority;
	tc->sched_nice = nice;
	return 0;
}

static bool known_policy(uint32_t policy)
{
	switch (policy & ~SCHED_RESET_ON_FORK) {
	case SCHED_OTHER:
	case SCHED_FIFO:
	case SCHED_RR:
	case SCHED_BATCH:
	case SCHED_IDLE:
		return true;
	}
	return false;
}

int collect_thread_sched(const ThreadCoreEntry *tc, struct sched_image *si, const char *img)
{
	si->has_policy = tc->has_sched_policy;
	si->has_prio = tc->has_sched_prio;
	si->has_nice = tc->has_sched_nice;
	si->policy = tc->sched_policy;
	si->prio = tc->sched_prio;
	si->nice = tc->sched_nice;
	if (si->has_policy && !known_policy(si->policy)) {
		pr_err("%s: scheduling policy %#x is not supported\n", img, si->policy);
		return -ENOTSUP;
	}
	if (si->has_nice && (si->nice < -20 || si->nice > 19)) {
		pr_err("%s: nice %d is out of range\n", img, si->nice);
		return -EINVAL;
	}
	return 0;
}

/*
 * Nice first: for SCHED_OTHER and SCHED_BATCH it is the weight; a real-time policy
 * ignores it but keeps it for when the thread leaves real time.
 */
int restore_thread_sched(pid_t tid, const struct sched_image *si)
{
	struct sched_param param = { .sched_priority = si->has_prio ? si->prio : 0 };

	if (si->has_nice && setpriority(PRIO_PROCESS, tid, si->nice)) {
		pr_perror("thread %d: cannot set nice %d", tid, si->nice);
		return -errno;
	}
	if (si->has_policy && sched_setscheduler(tid, si->policy, &param)) {
		pr_perror("thread %d: cannot set scheduling policy %#x priority %d", tid,
			  si->policy, param.sched_priority);
		return -errno;
	}
	return 0;
}

int restore_oom_score_adj(pid_t pid, int32_t value)
{
	char path[64], text[16];
	int fd, len, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", pid);
	len = snprintf(text, sizeof(text), "%d", value);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, len) != len) {
		ret = -errno;
		/* Lowering it needs CAP_SYS_RESOURCE. */
		pr_perror("task %d: cannot set oom_score_adj %d", pid, value);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}
