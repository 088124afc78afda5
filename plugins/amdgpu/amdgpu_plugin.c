/*
 * The AMDGPU plugin: checkpoints a process's KFD state (GPUs, buffer objects, private
 * data) through AMDKFD_IOC_CRIU_OP, and restores it either in the task (serial) or with
 * BO contents written by a worker thread in criu while the task rebuilds its host memory
 * (parallel, DESIGN.md §4). Device access: amdgpu_dev.h (/dev/kfd or the KFD EMULATOR).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_dev.h"
#include "amdgpu_image.h"
#include "amdgpu_socket_utils.h"
#include "amdgpu_topology.h"

/* "0" restores BO contents in the task (serial); anything else, or unset: parallel if possible. */
#define PARALLEL_ENV "AMDGPU_PARALLEL_RESTORE"
/* Test-only fault injection (zdtm.py): "worker-error" or "task-dies-mid-command". */
#define FAULT_ENV "AMDGPU_PLUGIN_TEST_FAULT"
/* How long the worker waits for the next piece of a command before it calls the task stuck. */
#define WORKER_TIMEOUT_MS 30000
#define DRM_MAJOR 226
#define EMU_BO_MEMFD_PREFIX "/memfd:kfdemu-bo-"

static const struct amdgpu_dev_ops *const backends[] = {
	[AMDGPU_BACKEND__KFD] = &amdgpu_dev_kfd_ops,
	[AMDGPU_BACKEND__KFD_EMULATOR] = &amdgpu_dev_emu_ops,
};

static bool fault_is(const char *name)
{
	const char *fault = getenv(FAULT_ENV);

	return fault && !strcmp(fault, name);
}

static double now_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const struct amdgpu_dev_ops *backend_ops(const AmdgpuKfdEntry *kfd)
{
	if ((unsigned int)kfd->backend >= sizeof(backends) / sizeof(backends[0])) {
		pr_err("images of pid %u: unknown device backend %d\n", kfd->pid, kfd->backend);
		return NULL;
	}
	return backends[kfd->backend];
}

static AmdgpuBackend backend_of(const struct amdgpu_dev_ops *ops)
{
	return ops == &amdgpu_dev_emu_ops ? AMDGPU_BACKEND__KFD_EMULATOR : AMDGPU_BACKEND__KFD;
}

/* ================================ dump ================================ */

/* One KFD op whose failure is logged with what it was for. */
static int criu_op(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev,
		   struct kfd_ioctl_criu_args *args, const char *what)
{
	int ret = ops->criu_op(dev, args);

	if (ret)
		pr_err("%s: KFD CRIU op %s failed: %s\n", ops->name, what, strerror(-ret));
	return ret;
}

static int add_model_props(AmdgpuGpuEntry *gpu, const struct amdgpu_topo_gpu *topo_gpu)
{
	int i;

	gpu->model = calloc(AMDGPU_NR_MODEL_PROPS, sizeof(*gpu->model));
	if (!gpu->model)
		return -ENOMEM;
	for (i = 0; i < AMDGPU_NR_MODEL_PROPS; i++) {
		AmdgpuTopoProp *prop = malloc(sizeof(*prop));

		if (!prop)
			return -ENOMEM;
		amdgpu_topo_prop__init(prop);
		gpu->model[gpu->n_model++] = prop;
		prop->name = strdup(amdgpu_model_props[i]);
		if (!prop->name)
			return -ENOMEM;
		prop->value = topo_gpu->model[i];
	}
	return 0;
}

static int save_gpus(AmdgpuKfdEntry *kfd, const struct kfd_criu_device_bucket *devices,
		     uint32_t nr_devices)
{
	struct amdgpu_topology topo;
	uint32_t i;
	int ret = amdgpu_topology_read(&topo);

	if (ret)
		return ret;
	kfd->gpus = calloc(nr_devices ? nr_devices : 1, sizeof(*kfd->gpus));
	ret = kfd->gpus ? 0 : -ENOMEM;
	for (i = 0; !ret && i < nr_devices; i++) {
		const struct amdgpu_topo_gpu *topo_gpu = amdgpu_topology_find(&topo, devices[i].actual_gpu_id);
		AmdgpuGpuEntry *gpu = malloc(sizeof(*gpu));

		if (!gpu) {
			ret = -ENOMEM;
			break;
		}
		amdgpu_gpu_entry__init(gpu);
		kfd->gpus[kfd->n_gpus++] = gpu;
		gpu->user_gpu_id = devices[i].user_gpu_id;
		gpu->actual_gpu_id = devices[i].actual_gpu_id;
		if (!topo_gpu) {
			pr_err("GPU %#x of the process is not in the topology\n", devices[i].actual_gpu_id);
			ret = -ENODEV;
			break;
		}
		ret = add_model_props(gpu, topo_gpu);
	}
	amdgpu_topology_free(&topo);
	if (ret == -ENOMEM)
		pr_err("out of memory saving the GPUs\n");
	return ret;
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
static int save_bo_contents(const struct amdgpu_dev_ops *ops, int bo_fd, AmdgpuBoEntry *bo,
			    int pages_fd, uint64_t *pages_pos)
{
	uint64_t from = 0, start, end;
	int ret;

	while ((ret = ops->next_data(bo_fd, bo->size, from, &start, &end)) == 0) {
		ret = add_extent(bo, start, end - start, *pages_pos);
		if (ret) {
			pr_err("out of memory listing the contents of BO %#" PRIx64 "\n", bo->addr);
			return ret;
		}
		ret = ops->bo_to_file(bo_fd, start, pages_fd, *pages_pos, end - start);
		if (ret)
			return ret;
		*pages_pos += end - start;
		from = end;
	}
	if (ret != -ENXIO) {
		pr_err("BO %#" PRIx64 ": cannot find its data: %s\n", bo->addr, strerror(-ret));
		return ret;
	}
	return 0;
}

static int save_bos(const struct amdgpu_dev_ops *ops, AmdgpuKfdEntry *kfd, int id,
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
	pages_fd = amdgpu_pages_create(id);
	if (pages_fd < 0)
		return pages_fd;
	for (i = 0; !ret && i < nr_bos; i++) {
		AmdgpuBoEntry *bo = malloc(sizeof(*bo));

		if (!bo) {
			pr_err("out of memory saving %u BOs\n", nr_bos);
			ret = -ENOMEM;
			break;
		}
		amdgpu_bo_entry__init(bo);
		kfd->bos[kfd->n_bos++] = bo;
		bo->addr = buckets[i].addr;
		bo->size = buckets[i].size;
		bo->offset = buckets[i].offset;
		bo->gpu_id = buckets[i].gpu_id;
		bo->alloc_flags = buckets[i].alloc_flags;
		ret = save_bo_contents(ops, buckets[i].dmabuf_fd, bo, pages_fd, &pages_pos);
	}
	if (close(pages_fd) && !ret) {
		ret = -errno;
		pr_perror("cannot write amdgpu-pages-%d.img", id);
	}
	kfd->pages_size = pages_pos;
	pr_info("file %d: %u BOs, %" PRIu64 " bytes of contents saved\n", id, nr_bos, pages_pos);
	return ret;
}

static void close_bucket_fds(struct kfd_criu_bo_bucket *buckets, uint32_t nr_bos)
{
	uint32_t i;

	for (i = 0; i < nr_bos; i++) {
		if (buckets[i].dmabuf_fd != KFD_INVALID_FD)
			close((int)buckets[i].dmabuf_fd);
		buckets[i].dmabuf_fd = KFD_INVALID_FD;
	}
}

/* CHECKPOINT into freshly sized buckets, then everything into the images. */
static int checkpoint_paused(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev, int id,
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
		ret = criu_op(ops, dev, &args, "CHECKPOINT");
	if (!ret)
		ret = save_gpus(kfd, devices, args.num_devices);
	if (!ret)
		ret = save_bos(ops, kfd, id, buckets, args.num_bos);
	if (!ret) {
		kfd->priv_data.data = priv;
		kfd->priv_data.len = args.priv_data_size;
		priv = NULL;
	}
	if (buckets)
		close_bucket_fds(buckets, info->num_bos);
	free(devices);
	free(buckets);
	free(priv);
	return ret;
}

static int checkpoint_process(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev, int id)
{
	struct kfd_ioctl_criu_args info = { .op = KFD_CRIU_OP_PROCESS_INFO };
	struct kfd_ioctl_criu_args unpause = { .op = KFD_CRIU_OP_UNPAUSE };
	AmdgpuKfdEntry *kfd;
	int ret, ret_unpause;

	kfd = malloc(sizeof(*kfd));
	if (!kfd) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	amdgpu_kfd_entry__init(kfd);
	/* PROCESS_INFO pauses the process's GPU work until UNPAUSE. */
	ret = criu_op(ops, dev, &info, "PROCESS_INFO");
	if (ret) {
		amdgpu_kfd_image_free(kfd);
		return ret;
	}
	pr_info("file %d: %s, pid %u: %u GPUs, %u BOs, %" PRIu64 " bytes of private data\n", id,
		ops->name, info.pid, info.num_devices, info.num_bos, (uint64_t)info.priv_data_size);
	kfd->backend = backend_of(ops);
	kfd->pid = info.pid;
	if (info.num_objects) {
		pr_err("pid %u has %u queues/events/SVM ranges: not supported yet\n", info.pid,
		       info.num_objects);
		ret = -ENOTSUP;
	}
	if (!ret)
		ret = checkpoint_paused(ops, dev, id, &info, kfd);
	if (!ret)
		ret = amdgpu_kfd_image_write(id, kfd);
	/*
	 * Always: the contents are in the images now, and the task is still frozen by ptrace,
	 * so it cannot run new GPU work; -R and a failed dump need the device running again.
	 */
	ret_unpause = criu_op(ops, dev, &unpause, "UNPAUSE");
	amdgpu_kfd_image_free(kfd);
	return ret ? ret : ret_unpause;
}

static int amdgpu_dump_ext_file(int fd, int id)
{
	unsigned int i;

	for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		struct amdgpu_dev *dev;
		int ret = backends[i]->attach(fd, &dev);

		if (ret == -ENOTSUP)
			continue;
		if (ret)
			return ret;
		ret = checkpoint_process(backends[i], dev, id);
		backends[i]->close(dev);
		return ret;
	}
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, amdgpu_dump_ext_file)

/* BO mappings: render nodes on hardware, the emulator's BO memfds. Their contents are in our images. */
static int amdgpu_handle_device_vma(int fd, const struct stat *st)
{
	char path[64], link[256];
	ssize_t len;

	if (S_ISCHR(st->st_mode) && major(st->st_rdev) == DRM_MAJOR)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	len = readlink(path, link, sizeof(link) - 1);
	if (len < 0)
		return -ENOTSUP;
	link[len] = '\0';
	return strncmp(link, EMU_BO_MEMFD_PREFIX, strlen(EMU_BO_MEMFD_PREFIX)) ? -ENOTSUP : 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, amdgpu_handle_device_vma)
