/*
 * Entering the restorer blob from a forked restore task (criu side, libc code): applies
 * what libc can still do, opens what the blob maps, maps the restorer region, fills its
 * args from the task's decoded images (task-image.h) and jumps into it. The sync protocol
 * with the main process (struct rst_report, RST_CMD_GO) is in restorer-args.h, shared
 * with the blob.
 */
#ifndef CR_RESTORER_SETUP_H
#define CR_RESTORER_SETUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "restorer-args.h"
#include "task-image.h"

struct rst_task_ctx {
	pid_t pid; /* the task's (original == current) pid */
	const struct task_image *image; /* its images, decoded before the fork */
	int sync_fd; /* socket to the main criu process */
	int log_fd; /* criu's log file; the blob logs here (-1: none) */
	int loglevel;
	bool lazy_pages; /* restore --lazy-pages: private memory comes from the daemon (uffd.h) */
};

/*
 * In the forked task, all signals blocked, after prepare_fds(). Never returns on success:
 * the process becomes the dumped program once criu sends RST_CMD_GO. On failure before
 * the jump returns -errno (logged); failures inside the blob are logged and reported on
 * sync_fd by the blob itself, which then exits.
 */
int restorer_jump(struct rst_task_ctx *ctx);

/*
 * criu, before forking the root, once mem_cow_plan() ran: reserves (PROT_NONE) the arena
 * where the tasks premap what their children share with them (mem-cow.h), in a hole that
 * holds no dumped VMA of any task, and tells mem-cow where. With no such hole nothing is
 * premapped (warned). 0 or -errno (logged).
 */
int rst_reserve_cow_arena(void);

/*
 * Lowest page-aligned start of a len-byte gap in [lo, hi) that overlaps none of the
 * nr busy ranges (start, end pairs, any order; the array is sorted in place).
 * 0 and *start set, or -ENOMEM. Exposed for tests.
 */
struct rst_range {
	uint64_t start, end;
};
int rst_find_hole(struct rst_range *busy, unsigned int nr, uint64_t len, uint64_t lo, uint64_t hi,
		  uint64_t *start);

#endif
