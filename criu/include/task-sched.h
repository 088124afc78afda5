/*
 * Scheduling (policy, real-time priority, nice) of each thread and the process's
 * oom_score_adj: read from /proc and the scheduler calls on dump, set on the restored
 * threads from outside (by tid) once they all exist and before they run.
 */
#ifndef CR_TASK_SCHED_H
#define CR_TASK_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.pb-c.h"

/* What one thread's scheduling is, as thread_core_entry holds it. */
struct sched_image {
	bool has_policy, has_prio, has_nice;
	uint32_t policy; /* SCHED_*, with SCHED_RESET_ON_FORK as sched_getscheduler() gives it */
	uint32_t prio;	 /* sched_priority: 0 unless real-time */
	int32_t nice;
};

/* Dump: tid's policy, priority and nice into tc. 0 or -errno. */
int dump_thread_sched(pid_t tid, ThreadCoreEntry *tc);
/* Restore, decoding: tc's scheduling into si, checked. 0 or -errno naming img. */
int collect_thread_sched(const ThreadCoreEntry *tc, struct sched_image *si, const char *img);
/* Restore, criu's main process, thread tid restored and not yet running. 0 or -errno. */
int restore_thread_sched(pid_t tid, const struct sched_image *si);
/* Restore, criu's main process: the process pid's oom_score_adj. 0 or -errno. */
int restore_oom_score_adj(pid_t pid, int32_t value);

#endif
