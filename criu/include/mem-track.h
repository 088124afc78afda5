/*
 * Write tracking of a task's private anonymous memory between pre-dumps, without
 * soft-dirty bits: a userfaultfd in asynchronous write-protect mode inside the task, and
 * PAGEMAP_SCAN to read which pages were written since they were last protected.
 */
#ifndef CR_MEM_TRACK_H
#define CR_MEM_TRACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc_parse.h"

struct compel_ctl;

/* Ranges of written pages, in address order. */
struct mem_written {
	struct mem_written_range {
		uint64_t start, end;
	} *ranges;
	unsigned int nr, cap;
	unsigned int cursor; /* mem_written_has(): the range looked at last */
};

/*
 * Whether this kernel tracks writes this way (userfaultfd WP_ASYNC, PAGEMAP_SCAN), tried
 * on a page of criu's own: criu check --feature mem_dirty_track.
 */
bool mem_track_supported(void);

/* Private anonymous memory: what a pre-dump stores and what is tracked. */
bool mem_track_vma(const struct proc_vma *vma);

/*
 * In a seized, infected task: its tracker (a userfaultfd with UFFD_FEATURE_WP_ASYNC,
 * left open in the task, as CRIU leaves soft-dirty bits behind), created the first
 * time, and every mem_track_vma() VMA registered with it. Pages become tracked once
 * mem_track_scan(protect) protected them. 0 or -errno (logged).
 */
int mem_track_arm(struct compel_ctl *ctl, pid_t pid, const struct proc_vma *vmas,
		  unsigned int nr);

/* Closes the task's tracker, if it has one, so that no write-protection is left. */
int mem_track_disarm(struct compel_ctl *ctl, pid_t pid);

/* The task's tracker fd (no fd of its own: never dumped), -ENOENT, or -errno (logged). */
int mem_track_fd(pid_t pid);

/*
 * The pages of [start, end) written since they were protected (every present page of a
 * VMA the tracker does not cover counts as written), appended to w; protect: and
 * protect them again, for the next pre-dump. pagemap_fd: /proc/PID/pagemap. 0 or -errno.
 */
int mem_track_scan(int pagemap_fd, uint64_t start, uint64_t end, bool protect,
		   struct mem_written *w);

/* Whether the page at addr is in w; addresses must be asked in increasing order. */
bool mem_written_has(struct mem_written *w, uint64_t addr);

void mem_written_free(struct mem_written *w);

#endif
