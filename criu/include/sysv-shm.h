/*
 * SysV shared memory attached in a task (shmat()).
 *
 * The VMA is dumped as CRIU writes it (VMA_AREA_SYSVIPC | VMA_ANON_SHARED, shmid: the
 * segment's id), with no pages, and restore attaches the segment again, by id, at the
 * same address. In an IPC namespace of the tree's own the segments are in its images
 * (ns-ipc.c), re-created with their ids by the root before any task's memory. In criu's
 * own IPC namespace the segment outlives the task: a segment already removed (IPC_RMID)
 * would vanish with its last attach, so such a dump is refused unless the task keeps
 * running (-R); a segment gone by restore time fails the restore before any task exists.
 */
#ifndef CR_SYSV_SHM_H
#define CR_SYSV_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc_parse.h"
#include "task-image.h"
#include "vma.h"

#include "mm.pb-c.h"

/* Dump: vma maps "/SYSV..." : fills ve for it, or refuses with one line. 0 or -errno. */
int sysv_shm_dump_vma(pid_t pid, const struct proc_vma *vma, VmaEntry *ve);

static inline bool vma_is_sysv_shm(const struct vma_image *vma)
{
	return vma->status & VMA_AREA_SYSVIPC;
}

/*
 * Restore, after task_images_collect(), before any task is forked: every attach of every
 * task (a run of VMAs of one segment from its offset 0 on, as mprotect() may have split
 * it) covers a live segment of that id in criu's IPC namespace whole (nothing to check
 * when the tree has an IPC namespace of its own). 0 or -errno, with one line naming the
 * VMA and the segment.
 */
int sysv_shm_check_tree(void);

/* The shmat() flags (SHM_RDONLY, SHM_EXEC) of the attach that VMA idx of ti starts. */
int sysv_shm_attach_flags(const struct task_image *ti, unsigned int idx);

#endif
