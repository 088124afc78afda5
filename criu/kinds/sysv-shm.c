/*
 * SysV shared memory attached in a task, in criu's own IPC namespace (sysv-shm.h).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include "cr_options.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "sysv-shm.h"

#define PAGE_SIZE 4096UL

int sysv_shm_dump_vma(pid_t pid, const struct proc_vma *vma, VmaEntry *ve)
{
	struct shmid_ds ds;
	int shmid = (int)vma->ino; /* the inode of a SysV mapping is the segment's id */
	/* Every task is in its root's IPC namespace (ns_dump_collect() refuses others). */
	bool own_ns = !(ns_root_clone_flags() & CLONE_NEWIPC);

	/* The tree's own IPC namespace is dumped whole by ns-ipc.c, which checks them there. */
	if (!own_ns)
		goto attach;
	if (shmctl(shmid, IPC_STAT, &ds) < 0) {
		pr_perror("task %d: VMA %lx-%lx: cannot stat SysV shared memory %d", pid, vma->start,
			  vma->end, shmid);
		return -errno;
	}
	if ((ds.shm_perm.mode & SHM_DEST) && !opts.leave_running) {
		pr_err("task %d: VMA %lx-%lx attaches SysV shared memory %d, already removed (IPC_RMID): it dies with the task, so only a dump with -R keeps it\n",
		       pid, vma->start, vma->end, shmid);
		return -ENOTSUP;
	}
attach:
	ve->status = VMA_AREA_REGULAR | VMA_ANON_SHARED | VMA_AREA_SYSVIPC;
	ve->flags = MAP_SHARED | MAP_ANONYMOUS;
	ve->shmid = shmid;
	return 0;
}

/* The VMAs [first, *end) of one attach: pieces of one segment, back to back from offset 0. */
static unsigned int attach_end(const struct task_image *ti, unsigned int first)
{
	const struct vma_image *head = &ti->vmas[first];
	unsigned int i = first + 1;

	while (i < ti->nr_vmas && vma_is_sysv_shm(&ti->vmas[i]) && ti->vmas[i].shmid == head->shmid &&
	       ti->vmas[i].start == ti->vmas[i - 1].end &&
	       ti->vmas[i].pgoff == ti->vmas[i - 1].pgoff + (ti->vmas[i - 1].end - ti->vmas[i - 1].start))
		i++;
	return i;
}

/* live: the segment is in criu's IPC namespace now, and must match the attach. */
static int check_attach(const struct task_image *ti, unsigned int first, unsigned int end,
			bool live)
{
	const struct vma_image *head = &ti->vmas[first];
	uint64_t len = ti->vmas[end - 1].end - head->start;
	struct shmid_ds ds;

	if (head->pgoff) {
		pr_err("vma %#llx-%#llx maps SysV shared memory %llu from offset %#llx: only whole attaches are restored\n",
		       (unsigned long long)head->start, (unsigned long long)head->end,
		       (unsigned long long)head->shmid, (unsigned long long)head->pgoff);
		return -ENOTSUP;
	}
	if (!live)
		return 0;
	if (head->shmid > INT32_MAX || shmctl((int)head->shmid, IPC_STAT, &ds) < 0) {
		pr_err("vma %#llx-%#llx: SysV shared memory %llu is gone from this IPC namespace (it is not in the images: it must outlive the dumped task)\n",
		       (unsigned long long)head->start, (unsigned long long)head->end,
		       (unsigned long long)head->shmid);
		return -ENOENT;
	}
	if ((ds.shm_segsz + PAGE_SIZE - 1) / PAGE_SIZE * PAGE_SIZE != len) {
		pr_err("vma %#llx-%#llx: SysV shared memory %llu is now %zu bytes, the attach was %llu\n",
		       (unsigned long long)head->start, (unsigned long long)ti->vmas[end - 1].end,
		       (unsigned long long)head->shmid, (size_t)ds.shm_segsz, (unsigned long long)len);
		return -EINVAL;
	}
	return 0;
}

static int check_task(const struct task_image *ti, bool live)
{
	unsigned int i = 0, end;
	int ret;

	while (i < ti->nr_vmas) {
		if (!vma_is_sysv_shm(&ti->vmas[i])) {
			i++;
			continue;
		}
		end = attach_end(ti, i);
		ret = check_attach(ti, i, end, live);
		if (ret)
			return ret;
		i = end;
	}
	return 0;
}

int sysv_shm_check_tree(void)
{
	/* The root re-creates the segments of its IPC namespace before any memory is restored. */
	bool live = !(ns_root_clone_flags() & CLONE_NEWIPC);
	struct pstree_item *item;
	int ret = 0;

	for (item = root_item; item && !ret; item = pstree_next(item))
		if (item->image && !task_image_zombie(item->image))
			ret = check_task(item->image, live);
	return ret;
}

/*
 * One attach, many VMAs (mprotect() split it): shmat() maps it whole with the most any
 * piece needs, and the blob then mprotect()s each piece to its own protection.
 */
int sysv_shm_attach_flags(const struct task_image *ti, unsigned int idx)
{
	unsigned int i, end = attach_end(ti, idx);
	uint32_t prot = 0;

	for (i = idx; i < end; i++)
		prot |= ti->vmas[i].prot;
	return (prot & PROT_WRITE ? 0 : SHM_RDONLY) | (prot & PROT_EXEC ? SHM_EXEC : 0);
}
