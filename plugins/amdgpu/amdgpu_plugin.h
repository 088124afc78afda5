/*
 * What the AMDGPU plugin's parts share: amdgpu_dump.c (dump, in criu), amdgpu_task.c
 * (restore in each task), amdgpu_worker.c (criu's BO worker for the parallel path) and
 * amdgpu_plugin.c (hooks, init and exit). Restore state is built by init(RESTORE) in criu,
 * before the tree is forked: every task starts with a copy of it.
 */
#ifndef AMDGPU_PLUGIN_H
#define AMDGPU_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amdgpu.pb-c.h"
#include "amdgpu_dev.h"
#include "amdgpu_topology.h"

/* How long criu waits for a task's BO command, or for more of it, before calling it stuck. */
#define AMDGPU_WORKER_TIMEOUT_MS 30000

/* A /dev/kfd file of the dump, decoded once from amdgpu-kfd-ID.img. */
struct amdgpu_dumped_kfd {
	int file_id;
	AmdgpuKfdEntry *kfd;
};

/* A render node file of the dump (amdgpu-renderD-ID.img). */
struct amdgpu_dumped_render {
	int file_id;
	AmdgpuRenderEntry *render;
};

struct amdgpu_restore {
	/* The images' device backend (one per restore). */
	const struct amdgpu_dev_ops *ops;
	struct amdgpu_dumped_kfd *kfds;
	size_t nr_kfds;
	struct amdgpu_dumped_render *renders;
	size_t nr_renders;
	/* Every dumped GPU and the GPU here it becomes: one map for the whole tree. */
	struct amdgpu_gpu_map *gpus;
	size_t nr_gpus;
	unsigned int nr_local_gpus;
	/* BO contents go to criu's worker (parallel), or the tasks fill them (serial). */
	bool parallel;
};

extern struct amdgpu_restore amdgpu_rst;

const struct amdgpu_dumped_kfd *amdgpu_find_kfd(int file_id);
/* The GPU here for a dumped GPU id, or for a process's user gpu id; NULL (logged) if none. */
const struct amdgpu_gpu_map *amdgpu_map_gpu(uint32_t dump_id);
const struct amdgpu_gpu_map *amdgpu_map_user_gpu(const AmdgpuKfdEntry *kfd, uint32_t user_gpu_id);

/* One KFD op whose failure is logged with what it was for. */
int amdgpu_criu_op(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev,
		   struct kfd_ioctl_criu_args *args, const char *what);
double amdgpu_now(void);
/* CHECKPOINT and RESTORE fill the dma-bufs of all buckets or none: close what they gave. */
void amdgpu_close_bucket_fds(struct kfd_criu_bo_bucket *buckets, size_t nr_bos);

/* amdgpu_dump.c: the dump hooks. */
int amdgpu_dump_file(int fd, int id);
int amdgpu_dump_vma(int fd, const struct stat *st);
void amdgpu_dump_fini(void);

/* amdgpu_task.c: in the task. */
int amdgpu_task_restore_file(int id);
int amdgpu_task_update_vma(const char *path, uint64_t addr, uint64_t old_pgoff,
			   uint64_t *new_pgoff, int *plugin_fd);

/*
 * amdgpu_worker.c, in criu. listen: before the fork, the socket tasks reach the worker
 * through (parked in fdstore, its id returned); start: after the fork; result: the join
 * point of one task (its BOs filled, or the error); stop: at exit, aborting when the
 * restore failed. The task side: amdgpu_worker_send() from RESTORE_EXT_FILE.
 */
int amdgpu_worker_listen(void);
int amdgpu_worker_start(void);
int amdgpu_worker_result(uint32_t pid);
void amdgpu_worker_stop(bool abort);
int amdgpu_worker_send(int file_id, const AmdgpuKfdEntry *kfd,
		       const struct kfd_criu_bo_bucket *buckets);

/*
 * Fill the BOs of one GPU from the pages image through that GPU's copy engine: the BOs
 * are kfd->bos[bo_index[i]], reached through fds[i]. Serial path and worker alike.
 */
int amdgpu_fill_on_gpu(const struct amdgpu_gpu_map *gpu, const AmdgpuKfdEntry *kfd,
		       const uint32_t *bo_index, const int *fds, size_t nr_bos, int pages_fd);

#endif
