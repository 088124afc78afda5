/*
 * Restore in the task, while it opens its fds (RESTORE_EXT_FILE) and before its memory is
 * rebuilt (UPDATE_VMA_MAP): render nodes opened once per GPU and shared by everything
 * that needs one (the task's own render fds, RESTORE's drm_fd, the BO mappings), the
 * process's KFD state re-created by RESTORE (BOs of every kind, queues, events, SVM
 * ranges), the VRAM/GTT contents handed to criu's worker (parallel) or filled here with
 * one thread per GPU (serial), and every device VMA pointed at the restored objects.
 * Nothing of the plugin's stays open in the task: what later hooks need is parked in
 * criu's fdstore.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_image.h"
#include "amdgpu_plugin.h"

/* A render node this task opened: for its own fds, for RESTORE, for its BO mappings. */
struct task_render {
	uint32_t local_id;
	int store_id;	  /* the node */
	int map_store_id; /* what its BOs are mapped through; -1 until RESTORE bound it */
};

/* A restored BO, as UPDATE_VMA_MAP needs it: where its VMAs were and are now. */
struct restored_bo {
	uint64_t old_offset;
	uint64_t restored_offset;
	uint64_t size;
	uint32_t local_id;
	uint32_t dump_minor; /* its render node at dump: offsets are per device */
	bool through_kfd; /* doorbell, MMIO: mapped through /dev/kfd, not a render node */
};

/* This task's own (the tasks are forked copies of criu, which never fills these). */
static struct task_render renders[64];
static unsigned int nr_renders;
static struct restored_bo *restored_bos;
static size_t nr_restored_bos;
static int kfd_map_store_id = -1;

static struct task_render *find_render(uint32_t local_id)
{
	unsigned int i;

	for (i = 0; i < nr_renders; i++)
		if (renders[i].local_id == local_id)
			return &renders[i];
	return NULL;
}

/* This GPU's render node, opened on first use and parked: *fd is a new fd on it. */
static int render_node(const struct amdgpu_gpu_map *gpu, int *fd)
{
	struct task_render *render = find_render(gpu->local_id);
	int ret;

	if (!render) {
		if (nr_renders == sizeof(renders) / sizeof(renders[0])) {
			pr_err("more than %u GPUs: not supported\n", nr_renders);
			return -ENOTSUP;
		}
		ret = amdgpu_rst.ops->open_render(gpu->local_minor, fd);
		if (ret)
			return ret;
		ret = fdstore_add(*fd);
		close(*fd);
		if (ret < 0) {
			pr_err("renderD%u: cannot park it in fdstore: %s\n", gpu->local_minor,
			       strerror(-ret));
			return ret;
		}
		render = &renders[nr_renders++];
		*render = (struct task_render){ .local_id = gpu->local_id, .store_id = ret,
						.map_store_id = -1 };
	}
	*fd = fdstore_get(render->store_id);
	if (*fd < 0)
		pr_err("renderD%u: cannot get it from fdstore: %s\n", gpu->local_minor, strerror(-*fd));
	return *fd < 0 ? *fd : 0;
}

static int park(int fd, const char *what)
{
	int id = fdstore_add(fd);

	close(fd);
	if (id < 0)
		pr_err("cannot park %s in fdstore: %s\n", what, strerror(-id));
	return id;
}

/* ---- the task's render node files ---- */

static int restore_render_file(int id, const AmdgpuRenderEntry *render)
{
	const struct amdgpu_gpu_map *gpu = amdgpu_map_gpu(render->gpu->actual_gpu_id);
	int fd, ret;

	if (!gpu)
		return -ENODEV;
	ret = render_node(gpu, &fd);
	if (ret)
		return ret;
	pr_info("file %d: render node of GPU %#x -> renderD%u\n", id, render->gpu->actual_gpu_id,
		gpu->local_minor);
	return fd;
}

/* ---- the process's KFD state ---- */

/* KFD wants one bucket per GPU, each with the render node to build the GPU's VM on. */
static int fill_device_buckets(const AmdgpuKfdEntry *kfd, struct kfd_criu_device_bucket *devices)
{
	size_t i;
	int fd, ret;

	if (kfd->n_gpus != amdgpu_rst.nr_local_gpus) {
		pr_err("pid %u used %zu GPUs, this machine has %u: KFD restores a process on all of them\n",
		       kfd->pid, kfd->n_gpus, amdgpu_rst.nr_local_gpus);
		return -ENODEV;
	}
	for (i = 0; i < kfd->n_gpus; i++) {
		const struct amdgpu_gpu_map *gpu = amdgpu_map_gpu(kfd->gpus[i]->actual_gpu_id);

		if (!gpu)
			return -ENODEV;
		ret = render_node(gpu, &fd);
		if (ret)
			return ret;
		devices[i] =
			(struct kfd_criu_device_bucket){.user_gpu_id = kfd->gpus[i]->user_gpu_id,
							.actual_gpu_id = gpu->local_id,
							.drm_fd = fd};
	}
	return 0;
}

static void close_drm_fds(struct kfd_criu_device_bucket *devices, size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if (devices[i].drm_fd != KFD_INVALID_FD)
			close((int)devices[i].drm_fd);
}

static void fill_bo_buckets(const AmdgpuKfdEntry *kfd, struct kfd_criu_bo_bucket *buckets)
{
	size_t i;

	for (i = 0; i < kfd->n_bos; i++) {
		const AmdgpuBoEntry *bo = kfd->bos[i];

		buckets[i] = (struct kfd_criu_bo_bucket){.addr = bo->addr,
							 .size = bo->size,
							 .offset = bo->offset,
							 .gpu_id = bo->gpu_id,
							 .alloc_flags = bo->alloc_flags,
							 .dmabuf_fd = KFD_INVALID_FD};
	}
}

/* RESTORE re-creates every BO with its handle and address, then queues, events, SVM ranges. */
static int kfd_restore(struct amdgpu_dev *dev, const AmdgpuKfdEntry *kfd,
		       struct kfd_criu_bo_bucket *buckets)
{
	struct kfd_criu_device_bucket *devices = calloc(kfd->n_gpus + 1, sizeof(*devices));
	struct kfd_ioctl_criu_args args = {
		.op = KFD_CRIU_OP_RESTORE,
		.devices = (uintptr_t)devices,
		.bos = (uintptr_t)buckets,
		.priv_data = (uintptr_t)kfd->priv_data.data,
		.priv_data_size = kfd->priv_data.len,
		.num_devices = kfd->n_gpus,
		.num_bos = kfd->n_bos,
		.num_objects = kfd->num_objects,
	};
	size_t i;
	int ret;

	if (!devices) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	for (i = 0; i <= kfd->n_gpus; i++)
		devices[i].drm_fd = KFD_INVALID_FD;
	ret = fill_device_buckets(kfd, devices);
	fill_bo_buckets(kfd, buckets);
	if (!ret)
		ret = amdgpu_criu_op(amdgpu_rst.ops, dev, &args, "RESTORE");
	close_drm_fds(devices, kfd->n_gpus);
	free(devices);
	return ret;
}

/* Once RESTORE bound them: what the BO VMAs of each render node are mapped through. */
static int park_map_fds(struct amdgpu_dev *dev)
{
	unsigned int i;
	int fd, map_fd, ret;

	for (i = 0; i < nr_renders; i++) {
		if (renders[i].map_store_id >= 0)
			continue;
		fd = fdstore_get(renders[i].store_id);
		if (fd < 0)
			return fd;
		ret = amdgpu_rst.ops->render_map_fd(fd, &map_fd);
		close(fd);
		if (!ret)
			ret = park(map_fd, "a render node's BO space");
		if (ret < 0)
			return ret;
		renders[i].map_store_id = ret;
	}
	ret = amdgpu_rst.ops->kfd_map_fd(dev, &map_fd);
	if (!ret)
		ret = park(map_fd, "the /dev/kfd space");
	if (ret < 0)
		return ret;
	kfd_map_store_id = ret;
	return 0;
}

static const AmdgpuGpuEntry *dumped_gpu(const AmdgpuKfdEntry *kfd, uint32_t user_gpu_id)
{
	size_t i;

	for (i = 0; i < kfd->n_gpus; i++)
		if (kfd->gpus[i]->user_gpu_id == user_gpu_id)
			return kfd->gpus[i];
	return NULL;
}

static int note_restored_bos(const AmdgpuKfdEntry *kfd, const struct kfd_criu_bo_bucket *buckets)
{
	struct restored_bo *grown = realloc(restored_bos, (nr_restored_bos + kfd->n_bos + 1) *
								  sizeof(*grown));
	size_t i;

	if (!grown) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	restored_bos = grown;
	for (i = 0; i < kfd->n_bos; i++) {
		const AmdgpuGpuEntry *dumped = dumped_gpu(kfd, buckets[i].gpu_id);
		const struct amdgpu_gpu_map *gpu = amdgpu_map_user_gpu(kfd, buckets[i].gpu_id);
		uint32_t flags = buckets[i].alloc_flags;

		/* Userptr BOs are the process's own memory: criu restores their VMAs itself. */
		if (!gpu || !dumped || (flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR))
			continue;
		restored_bos[nr_restored_bos++] = (struct restored_bo){
			.old_offset = buckets[i].offset,
			.restored_offset = buckets[i].restored_offset,
			.size = buckets[i].size,
			.local_id = gpu->local_id,
			.dump_minor = dumped->render_minor,
			.through_kfd = !amdgpu_bo_has_contents(flags),
		};
	}
	return 0;
}

/* ---- serial path: the task fills its BOs, one thread per GPU, before it goes on ---- */

struct gpu_fill {
	const struct amdgpu_gpu_map *gpu;
	const AmdgpuKfdEntry *kfd;
	uint32_t *bo_index;
	int *fds;
	size_t nr_bos;
	int pages_fd;
	int status;
	pthread_t thread;
};

static void *gpu_fill_main(void *arg)
{
	struct gpu_fill *fill = arg;

	fill->status = amdgpu_fill_on_gpu(fill->gpu, fill->kfd, fill->bo_index, fill->fds,
					  fill->nr_bos, fill->pages_fd);
	return NULL;
}

/* Each GPU's share of the BOs that have contents. */
static int split_by_gpu(const AmdgpuKfdEntry *kfd, const struct kfd_criu_bo_bucket *buckets,
			struct gpu_fill *fills, size_t *nr_fills)
{
	size_t i, j;

	*nr_fills = 0;
	for (i = 0; i < kfd->n_bos; i++) {
		const struct amdgpu_gpu_map *gpu;

		if (!kfd->bos[i]->n_extents)
			continue;
		gpu = amdgpu_map_user_gpu(kfd, kfd->bos[i]->gpu_id);
		if (!gpu)
			return -ENODEV;
		for (j = 0; j < *nr_fills && fills[j].gpu != gpu; j++)
			;
		if (j == *nr_fills) {
			fills[(*nr_fills)++] =
				(struct gpu_fill){.gpu = gpu,
						  .kfd = kfd,
						  .bo_index = calloc(kfd->n_bos, sizeof(uint32_t)),
						  .fds = calloc(kfd->n_bos, sizeof(int))};
			if (!fills[j].bo_index || !fills[j].fds) {
				pr_err("out of memory\n");
				return -ENOMEM;
			}
		}
		fills[j].bo_index[fills[j].nr_bos] = i;
		fills[j].fds[fills[j].nr_bos++] = (int)buckets[i].dmabuf_fd;
	}
	return 0;
}

/* As upstream's serial path: one thread per GPU, joined before the task goes on. */
static int fill_in_task(int id, const AmdgpuKfdEntry *kfd, const struct kfd_criu_bo_bucket *buckets)
{
	struct gpu_fill *fills = calloc(kfd->n_gpus + 1, sizeof(*fills));
	double start = amdgpu_now();
	size_t nr_fills = 0, started = 0, nr_bos = 0, i;
	int pages_fd = -1, ret;

	ret = fills ? 0 : -ENOMEM;
	if (!ret)
		ret = split_by_gpu(kfd, buckets, fills, &nr_fills);
	if (!ret) {
		pages_fd = amdgpu_pages_open(id);
		ret = pages_fd < 0 ? pages_fd : amdgpu_pages_check_size(pages_fd, id, kfd);
	}
	for (i = 0; !ret && i < nr_fills; i++) {
		fills[i].pages_fd = pages_fd;
		ret = -pthread_create(&fills[i].thread, NULL, gpu_fill_main, &fills[i]);
		if (ret)
			pr_err("cannot start a thread for GPU %#x: %s\n", fills[i].gpu->local_id,
			       strerror(-ret));
		else
			started++;
	}
	for (i = 0; i < started; i++) {
		pthread_join(fills[i].thread, NULL);
		if (!ret)
			ret = fills[i].status;
	}
	for (i = 0; fills && i < nr_fills; i++) {
		nr_bos += fills[i].nr_bos;
		free(fills[i].bo_index);
		free(fills[i].fds);
	}
	free(fills);
	if (pages_fd >= 0)
		close(pages_fd);
	if (!ret)
		pr_info("task %d: %zu BOs (%" PRIu64 " bytes) filled in the task (serial) on %zu GPUs in %.3f s\n",
			getpid(), nr_bos, kfd->pages_size, nr_fills, amdgpu_now() - start);
	return ret;
}

/* ---- RESTORE_EXT_FILE ---- */

static int restore_kfd_file(const struct amdgpu_dumped_kfd *dumped)
{
	const AmdgpuKfdEntry *kfd = dumped->kfd;
	const struct amdgpu_dev_ops *ops = amdgpu_rst.ops;
	struct kfd_criu_bo_bucket *buckets = calloc(kfd->n_bos + 1, sizeof(*buckets));
	struct amdgpu_dev *dev = NULL;
	int ret, kfd_fd = -1;

	if (!buckets) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	ret = ops->open_own(&dev, &kfd_fd);
	/* KFD refuses a RESTORE of nothing: a process that never used a GPU stays as it is. */
	if (!ret && !kfd->n_bos && !kfd->num_objects) {
		pr_info("file %d: pid %u had no BOs and no queues: nothing to restore\n",
			dumped->file_id, kfd->pid);
		goto out;
	}
	if (!ret)
		ret = kfd_restore(dev, kfd, buckets);
	if (!ret)
		ret = note_restored_bos(kfd, buckets);
	if (!ret)
		ret = park_map_fds(dev);
	if (!ret && amdgpu_rst.parallel)
		ret = amdgpu_worker_send(dumped->file_id, kfd, buckets);
	else if (!ret)
		ret = fill_in_task(dumped->file_id, kfd, buckets);
out:
	/* RESTORE fills the fds in all or none of the buckets. */
	amdgpu_close_bucket_fds(buckets, kfd->n_bos);
	free(buckets);
	if (dev)
		ops->close(dev);
	if (ret) {
		if (kfd_fd >= 0)
			close(kfd_fd);
		return ret;
	}
	pr_info("file %d: %s state of pid %u restored: %zu BOs, %u queues/events/SVM ranges\n",
		dumped->file_id, ops->name, kfd->pid, kfd->n_bos, kfd->num_objects);
	return kfd_fd;
}

int amdgpu_task_restore_file(int id)
{
	const struct amdgpu_dumped_kfd *dumped = amdgpu_find_kfd(id);
	size_t i;

	if (dumped)
		return restore_kfd_file(dumped);
	for (i = 0; i < amdgpu_rst.nr_renders; i++)
		if (amdgpu_rst.renders[i].file_id == id)
			return restore_render_file(id, amdgpu_rst.renders[i].render);
	return -ENOTSUP;
}

/* ---- UPDATE_VMA_MAP ---- */

/* A render node VMA's BO: its node and its offset; a /dev/kfd VMA's: its offset alone. */
static const struct restored_bo *find_restored_bo(uint64_t old_pgoff, bool through_kfd,
						  uint32_t minor)
{
	size_t i;

	for (i = 0; i < nr_restored_bos; i++) {
		const struct restored_bo *bo = &restored_bos[i];

		if (bo->through_kfd == through_kfd && (through_kfd || bo->dump_minor == minor) &&
		    old_pgoff >= bo->old_offset && old_pgoff - bo->old_offset < bo->size)
			return bo;
	}
	return NULL;
}

static int map_through(int store_id, int *plugin_fd)
{
	*plugin_fd = fdstore_get(store_id);
	if (*plugin_fd < 0)
		pr_err("cannot get a parked fd from fdstore: %s\n", strerror(-*plugin_fd));
	return *plugin_fd < 0 ? *plugin_fd : 1;
}

/*
 * A render node VMA maps a BO at its mmap offset, which RESTORE changed; a /dev/kfd VMA
 * maps the doorbells or MMIO page of a GPU (offsets that name the GPU, so a remapped GPU
 * moves them) or the events page (an offset without a GPU, kept).
 */
int amdgpu_task_update_vma(const char *path, uint64_t addr, uint64_t old_pgoff,
			   uint64_t *new_pgoff, int *plugin_fd)
{
	enum amdgpu_vma_kind kind;
	const struct restored_bo *bo;
	const struct task_render *render;
	uint32_t minor = 0;

	if (!amdgpu_rst.ops || amdgpu_rst.ops->vma_kind(path, &kind, &minor))
		return -ENOTSUP;
	bo = find_restored_bo(old_pgoff, kind == AMDGPU_VMA_KFD, minor);
	if (kind == AMDGPU_VMA_KFD) {
		if (kfd_map_store_id < 0) {
			pr_err("VMA %#" PRIx64 " maps /dev/kfd, and this task restored none\n", addr);
			return -ENOENT;
		}
		*new_pgoff = bo ? bo->restored_offset + (old_pgoff - bo->old_offset) : old_pgoff;
		return map_through(kfd_map_store_id, plugin_fd);
	}
	render = bo ? find_render(bo->local_id) : NULL;
	if (!render || render->map_store_id < 0) {
		pr_err("VMA %#" PRIx64 " maps %s at %#" PRIx64 ": no restored BO there\n", addr, path,
		       old_pgoff);
		return -ENOENT;
	}
	*new_pgoff = bo->restored_offset + (old_pgoff - bo->old_offset);
	return map_through(render->map_store_id, plugin_fd);
}
