/*
 * Dump, in criu: a task's /dev/kfd (PROCESS_INFO pauses its queues, CHECKPOINT hands out
 * its BOs and private data with queues, events and SVM ranges, the VRAM/GTT contents are
 * read through each GPU's copy engine, UNPAUSE), its render nodes (which GPU each is), and
 * the VMAs of both, whose contents are the plugin's to restore.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_image.h"
#include "amdgpu_plugin.h"

/* KFD binds /dev/kfd to a process: a second open file would checkpoint it twice. */
static uint32_t *dumped_pids;
static size_t nr_dumped_pids;

static int note_pid(uint32_t pid)
{
	uint32_t *grown;
	size_t i;

	for (i = 0; i < nr_dumped_pids; i++) {
		if (dumped_pids[i] == pid) {
			pr_err("pid %u holds /dev/kfd open twice: that is not supported\n", pid);
			return -ENOTSUP;
		}
	}
	grown = realloc(dumped_pids, (nr_dumped_pids + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	dumped_pids = grown;
	dumped_pids[nr_dumped_pids++] = pid;
	return 0;
}

void amdgpu_dump_fini(void)
{
	free(dumped_pids);
	dumped_pids = NULL;
	nr_dumped_pids = 0;
}

/* What a process's checkpoint works with: the topology and one copy engine per GPU. */
struct dump_ctx {
	const struct amdgpu_dev_ops *ops;
	struct amdgpu_topology topo;
	struct amdgpu_engine **engines; /* per topology GPU, opened when first needed */
	int id;
};

static int save_gpus(struct dump_ctx *ctx, AmdgpuKfdEntry *kfd,
		     const struct kfd_criu_device_bucket *devices, uint32_t nr_devices)
{
	uint32_t i;
	int ret = 0;

	kfd->gpus = calloc(nr_devices ? nr_devices : 1, sizeof(*kfd->gpus));
	if (!kfd->gpus) {
		pr_err("out of memory saving the GPUs\n");
		return -ENOMEM;
	}
	for (i = 0; !ret && i < nr_devices; i++) {
		const struct amdgpu_topo_gpu *topo_gpu =
			amdgpu_topology_find(&ctx->topo, devices[i].actual_gpu_id);
		AmdgpuGpuEntry *gpu = malloc(sizeof(*gpu));

		if (!gpu) {
			pr_err("out of memory saving the GPUs\n");
			return -ENOMEM;
		}
		amdgpu_gpu_entry__init(gpu);
		kfd->gpus[kfd->n_gpus++] = gpu;
		if (!topo_gpu) {
			pr_err("GPU %#x of the process is not in the topology\n", devices[i].actual_gpu_id);
			return -ENODEV;
		}
		ret = amdgpu_gpu_entry_fill(gpu, devices[i].user_gpu_id, topo_gpu);
	}
	return ret;
}

/* The engine of the GPU a BO lives on (by its user gpu id, through the device buckets). */
static int engine_for(struct dump_ctx *ctx, const AmdgpuKfdEntry *kfd, uint32_t user_gpu_id,
		      struct amdgpu_engine **engine)
{
	unsigned int i, j;

	for (i = 0; i < kfd->n_gpus; i++) {
		if (kfd->gpus[i]->user_gpu_id != user_gpu_id)
			continue;
		for (j = 0; j < ctx->topo.nr_gpus; j++) {
			if (ctx->topo.gpus[j].gpu_id != kfd->gpus[i]->actual_gpu_id)
				continue;
			if (!ctx->engines[j]) {
				int ret = ctx->ops->engine_open(ctx->topo.gpus[j].render_minor,
								&ctx->engines[j]);
				if (ret)
					return ret;
			}
			*engine = ctx->engines[j];
			return 0;
		}
	}
	pr_err("a BO lives on GPU %#x, which the process does not have\n", user_gpu_id);
	return -EINVAL;
}

static int add_extent(AmdgpuBoEntry *bo, uint64_t start, uint64_t len, uint64_t image_offset)
{
	AmdgpuBoExtent **grown = realloc(bo->extents, (bo->n_extents + 1) * sizeof(*grown));
	AmdgpuBoExtent *ext;

	if (!grown)
		return -ENOMEM;
	bo->extents = grown;
	ext = malloc(sizeof(*ext));
	if (!ext)
		return -ENOMEM;
	amdgpu_bo_extent__init(ext);
	ext->bo_offset = start;
	ext->length = len;
	ext->image_offset = image_offset;
	bo->extents[bo->n_extents++] = ext;
	return 0;
}

/* Only the ranges that hold data go into the image: sparse BOs stay small. */
static int save_bo_contents(struct dump_ctx *ctx, struct amdgpu_engine *engine, int bo_fd,
			    AmdgpuBoEntry *bo, int pages_fd, uint64_t *pages_pos)
{
	const struct amdgpu_dev_ops *ops = ctx->ops;
	uint64_t from = 0, start, end;
	int ret;

	while ((ret = ops->next_data(engine, bo_fd, bo->size, from, &start, &end)) == 0) {
		ret = add_extent(bo, start, end - start, *pages_pos);
		if (ret) {
			pr_err("out of memory listing the contents of BO %#" PRIx64 "\n", bo->addr);
			return ret;
		}
		ret = ops->bo_to_file(engine, bo_fd, start, pages_fd, *pages_pos, end - start);
		if (ret) {
			pr_err("BO %#" PRIx64 ": cannot save %" PRIu64 " bytes at %#" PRIx64 ": %s\n",
			       bo->addr, end - start, start, strerror(-ret));
			return ret;
		}
		*pages_pos += end - start;
		from = end;
	}
	if (ret != -ENXIO) {
		pr_err("BO %#" PRIx64 ": cannot find its data: %s\n", bo->addr, strerror(-ret));
		return ret;
	}
	return 0;
}

static int save_one_bo(struct dump_ctx *ctx, AmdgpuKfdEntry *kfd,
		       const struct kfd_criu_bo_bucket *bucket, int pages_fd, uint64_t *pages_pos)
{
	AmdgpuBoEntry *bo = malloc(sizeof(*bo));
	struct amdgpu_engine *engine;
	int ret;

	if (!bo) {
		pr_err("out of memory saving the BOs\n");
		return -ENOMEM;
	}
	amdgpu_bo_entry__init(bo);
	kfd->bos[kfd->n_bos++] = bo;
	bo->addr = bucket->addr;
	bo->size = bucket->size;
	bo->offset = bucket->offset;
	bo->gpu_id = bucket->gpu_id;
	bo->alloc_flags = bucket->alloc_flags;
	/* Doorbells, MMIO and userptr memory have no contents of the GPU's: RESTORE alone. */
	if (!amdgpu_bo_has_contents(bo->alloc_flags))
		return 0;
	if (bucket->dmabuf_fd == KFD_INVALID_FD) {
		pr_err("BO %#" PRIx64 " (flags %#x) came without its dma-buf\n", bo->addr,
		       bo->alloc_flags);
		return -EINVAL;
	}
	ret = engine_for(ctx, kfd, bo->gpu_id, &engine);
	if (!ret)
		ret = save_bo_contents(ctx, engine, bucket->dmabuf_fd, bo, pages_fd, pages_pos);
	return ret;
}

static int save_bos(struct dump_ctx *ctx, AmdgpuKfdEntry *kfd,
		    const struct kfd_criu_bo_bucket *buckets, uint32_t nr_bos)
{
	uint64_t pages_pos = 0;
	uint32_t i;
	int pages_fd, ret = 0;

	kfd->bos = calloc(nr_bos ? nr_bos : 1, sizeof(*kfd->bos));
	if (!kfd->bos) {
		pr_err("out of memory saving %u BOs\n", nr_bos);
		return -ENOMEM;
	}
	pages_fd = amdgpu_pages_create(ctx->id);
	if (pages_fd < 0)
		return pages_fd;
	for (i = 0; !ret && i < nr_bos; i++)
		ret = save_one_bo(ctx, kfd, &buckets[i], pages_fd, &pages_pos);
	if (close(pages_fd) && !ret) {
		ret = -errno;
		pr_perror("cannot write amdgpu-pages-%d.img", ctx->id);
	}
	kfd->pages_size = pages_pos;
	pr_info("file %d: %u BOs, %" PRIu64 " bytes of contents saved\n", ctx->id, nr_bos, pages_pos);
	return ret;
}

/* CHECKPOINT into freshly sized buckets, then everything into the images. */
static int checkpoint_paused(struct dump_ctx *ctx, struct amdgpu_dev *dev,
			     const struct kfd_ioctl_criu_args *info, AmdgpuKfdEntry *kfd)
{
	struct kfd_ioctl_criu_args args = *info;
	struct kfd_criu_device_bucket *devices = calloc(info->num_devices + 1, sizeof(*devices));
	struct kfd_criu_bo_bucket *buckets = calloc(info->num_bos + 1, sizeof(*buckets));
	uint8_t *priv = malloc(info->priv_data_size + 1);
	uint32_t i;
	int ret;

	ret = devices && buckets && priv ? 0 : -ENOMEM;
	if (ret)
		pr_err("out of memory for %u BO buckets\n", info->num_bos);
	for (i = 0; buckets && i < info->num_bos; i++)
		buckets[i].dmabuf_fd = KFD_INVALID_FD;
	args.op = KFD_CRIU_OP_CHECKPOINT;
	args.devices = (uintptr_t)devices;
	args.bos = (uintptr_t)buckets;
	args.priv_data = (uintptr_t)priv;
	if (!ret)
		ret = amdgpu_criu_op(ctx->ops, dev, &args, "CHECKPOINT");
	if (!ret)
		ret = save_gpus(ctx, kfd, devices, args.num_devices);
	if (!ret)
		ret = save_bos(ctx, kfd, buckets, args.num_bos);
	if (!ret) {
		kfd->priv_data.data = priv;
		kfd->priv_data.len = args.priv_data_size;
		kfd->num_objects = args.num_objects;
		priv = NULL;
	}
	if (buckets)
		amdgpu_close_bucket_fds(buckets, info->num_bos);
	free(devices);
	free(buckets);
	free(priv);
	return ret;
}

static void dump_ctx_fini(struct dump_ctx *ctx)
{
	unsigned int i;

	for (i = 0; ctx->engines && i < ctx->topo.nr_gpus; i++)
		ctx->ops->engine_close(ctx->engines[i]);
	free(ctx->engines);
	amdgpu_topology_free(&ctx->topo);
}

static int checkpoint_process(struct dump_ctx *ctx, struct amdgpu_dev *dev)
{
	struct kfd_ioctl_criu_args info = { .op = KFD_CRIU_OP_PROCESS_INFO };
	struct kfd_ioctl_criu_args unpause = { .op = KFD_CRIU_OP_UNPAUSE };
	AmdgpuKfdEntry *kfd = malloc(sizeof(*kfd));
	int ret, ret_unpause;

	if (!kfd) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	amdgpu_kfd_entry__init(kfd);
	/* PROCESS_INFO pauses the process's queues until UNPAUSE. */
	ret = amdgpu_criu_op(ctx->ops, dev, &info, "PROCESS_INFO");
	if (ret) {
		amdgpu_kfd_image_free(kfd);
		return ret;
	}
	pr_info("file %d: %s, pid %u: %u GPUs, %u BOs, %u queues/events/SVM ranges, %" PRIu64 " bytes of private data\n",
		ctx->id, ctx->ops->name, info.pid, info.num_devices, info.num_bos, info.num_objects,
		(uint64_t)info.priv_data_size);
	kfd->backend = ctx->ops->backend;
	kfd->pid = info.pid;
	ret = note_pid(info.pid);
	if (!ret)
		ret = checkpoint_paused(ctx, dev, &info, kfd);
	if (!ret)
		ret = amdgpu_kfd_image_write(ctx->id, kfd);
	/*
	 * Always: the contents are in the images now, and the task is still frozen by ptrace,
	 * so it cannot submit new GPU work; -R and a failed dump need the queues running again.
	 */
	ret_unpause = amdgpu_criu_op(ctx->ops, dev, &unpause, "UNPAUSE");
	amdgpu_kfd_image_free(kfd);
	return ret ? ret : ret_unpause;
}

static int dump_kfd(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev, int id)
{
	struct dump_ctx ctx = { .ops = ops, .id = id };
	int ret = amdgpu_topology_read(&ctx.topo);

	if (!ret) {
		ctx.engines = calloc(ctx.topo.nr_gpus + 1, sizeof(*ctx.engines));
		ret = ctx.engines ? 0 : -ENOMEM;
	}
	if (!ret)
		ret = checkpoint_process(&ctx, dev);
	dump_ctx_fini(&ctx);
	return ret;
}

/* A render node: which GPU it is, found through the topology by its minor. */
static int dump_render(const struct amdgpu_dev_ops *ops, uint32_t minor, int id)
{
	AmdgpuRenderEntry *render = malloc(sizeof(*render));
	AmdgpuGpuEntry *gpu = malloc(sizeof(*gpu));
	const struct amdgpu_topo_gpu *topo_gpu = NULL;
	struct amdgpu_topology topo;
	int ret = render && gpu ? amdgpu_topology_read(&topo) : -ENOMEM;

	if (ret) {
		free(render);
		free(gpu);
		return ret;
	}
	amdgpu_render_entry__init(render);
	amdgpu_gpu_entry__init(gpu);
	render->backend = ops->backend;
	render->gpu = gpu;
	topo_gpu = amdgpu_topology_find_minor(&topo, minor);
	if (!topo_gpu) {
		pr_err("render node renderD%u is no GPU of the topology\n", minor);
		ret = -ENODEV;
	}
	if (!ret)
		ret = amdgpu_gpu_entry_fill(gpu, topo_gpu->gpu_id, topo_gpu);
	if (!ret)
		ret = amdgpu_render_image_write(id, render);
	if (!ret)
		pr_info("file %d: render node renderD%u of GPU %#x\n", id, minor, topo_gpu->gpu_id);
	amdgpu_render_image_free(render);
	amdgpu_topology_free(&topo);
	return ret;
}

int amdgpu_dump_file(int fd, int id)
{
	unsigned int i;

	for (i = 0; i < amdgpu_nr_backends; i++) {
		const struct amdgpu_dev_ops *ops = amdgpu_backends[i];
		struct amdgpu_dev *dev;
		uint32_t minor;
		int ret = ops->attach(fd, &dev);

		if (!ret) {
			ret = dump_kfd(ops, dev, id);
			ops->close(dev);
			return ret;
		}
		if (ret != -ENOTSUP)
			return ret;
		ret = ops->render_minor(fd, &minor);
		if (!ret)
			return dump_render(ops, minor, id);
		if (ret != -ENOTSUP)
			return ret;
	}
	return -ENOTSUP;
}

/* BO mappings through render nodes, doorbells/MMIO/events through /dev/kfd: ours to restore. */
int amdgpu_dump_vma(int fd, const struct stat *st)
{
	unsigned int i;

	for (i = 0; i < amdgpu_nr_backends; i++)
		if (!amdgpu_backends[i]->owns_vma(fd, st))
			return 0;
	return -ENOTSUP;
}
