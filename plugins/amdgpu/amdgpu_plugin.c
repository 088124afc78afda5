/*
 * The AMDGPU plugin: checkpoints the KFD state of a process (GPUs, buffer objects of every
 * kind, queues, events, SVM ranges through AMDKFD_IOC_CRIU_OP) and its render nodes, and
 * restores them with the VRAM/GTT contents written either in each task (serial) or by
 * criu's worker while the tasks rebuild their host memory (parallel, for a whole tree).
 * This file: the hooks and what restore sets up before the fork. Dump: amdgpu_dump.c;
 * restore in the task: amdgpu_task.c; the worker: amdgpu_worker.c; device access:
 * amdgpu_dev.h (/dev/kfd, or the KFD EMULATOR in test builds).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_image.h"
#include "amdgpu_plugin.h"

/* "0" restores BO contents in the tasks (serial); anything else, or unset: parallel. */
#define PARALLEL_ENV "AMDGPU_PARALLEL_RESTORE"

struct amdgpu_restore amdgpu_rst;

double amdgpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int amdgpu_criu_op(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev,
		   struct kfd_ioctl_criu_args *args, const char *what)
{
	int ret = ops->criu_op(dev, args);

	if (ret)
		pr_err("%s: KFD CRIU op %s failed: %s\n", ops->name, what, strerror(-ret));
	return ret;
}

void amdgpu_close_bucket_fds(struct kfd_criu_bo_bucket *buckets, size_t nr_bos)
{
	size_t i;

	for (i = 0; i < nr_bos; i++) {
		if (buckets[i].dmabuf_fd != KFD_INVALID_FD)
			close((int)buckets[i].dmabuf_fd);
		buckets[i].dmabuf_fd = KFD_INVALID_FD;
	}
}

const struct amdgpu_dumped_kfd *amdgpu_find_kfd(int file_id)
{
	size_t i;

	for (i = 0; i < amdgpu_rst.nr_kfds; i++)
		if (amdgpu_rst.kfds[i].file_id == file_id)
			return &amdgpu_rst.kfds[i];
	return NULL;
}

static const struct amdgpu_dumped_kfd *find_kfd_pid(uint32_t pid)
{
	size_t i;

	for (i = 0; i < amdgpu_rst.nr_kfds; i++)
		if (amdgpu_rst.kfds[i].kfd->pid == pid)
			return &amdgpu_rst.kfds[i];
	return NULL;
}

const struct amdgpu_gpu_map *amdgpu_map_gpu(uint32_t dump_id)
{
	size_t i;

	for (i = 0; i < amdgpu_rst.nr_gpus; i++)
		if (amdgpu_rst.gpus[i].dump_id == dump_id)
			return &amdgpu_rst.gpus[i];
	pr_err("GPU %#x of the dump has no GPU here\n", dump_id);
	return NULL;
}

const struct amdgpu_gpu_map *amdgpu_map_user_gpu(const AmdgpuKfdEntry *kfd, uint32_t user_gpu_id)
{
	size_t i;

	for (i = 0; i < kfd->n_gpus; i++)
		if (kfd->gpus[i]->user_gpu_id == user_gpu_id)
			return amdgpu_map_gpu(kfd->gpus[i]->actual_gpu_id);
	pr_err("pid %u has no GPU %#x\n", kfd->pid, user_gpu_id);
	return NULL;
}

int amdgpu_fill_on_gpu(const struct amdgpu_gpu_map *gpu, const AmdgpuKfdEntry *kfd,
		       const uint32_t *bo_index, const int *fds, size_t nr_bos, int pages_fd)
{
	const struct amdgpu_dev_ops *ops = amdgpu_rst.ops;
	struct amdgpu_engine *engine;
	size_t i;
	int ret = ops->engine_open(gpu->local_minor, &engine);

	if (ret)
		return ret;
	for (i = 0; !ret && i < nr_bos; i++)
		ret = amdgpu_fill_bo(ops, engine, kfd->bos[bo_index[i]], fds[i], pages_fd);
	ops->engine_close(engine);
	return ret;
}

/* KFD refuses a RESTORE of nothing; such a process was left as it was (amdgpu_task.c). */
static bool nothing_restored(const AmdgpuKfdEntry *kfd)
{
	return !kfd->n_bos && !kfd->num_objects;
}

/* ================================ hooks ================================ */

static int amdgpu_dump_ext_file(int fd, int id)
{
	return amdgpu_dump_file(fd, id);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, amdgpu_dump_ext_file)

static int amdgpu_handle_device_vma(int fd, const struct stat *st)
{
	return amdgpu_dump_vma(fd, st);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, amdgpu_handle_device_vma)

static int amdgpu_restore_ext_file(int id, bool *retry_needed)
{
	(void)retry_needed;
	return amdgpu_task_restore_file(id);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, amdgpu_restore_ext_file)

static int amdgpu_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
				 uint64_t *new_pgoff, int *plugin_fd)
{
	return amdgpu_task_update_vma(path, addr, old_pgoff, new_pgoff, plugin_fd);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, amdgpu_update_vma_map)

static int amdgpu_post_forking(void)
{
	return amdgpu_rst.parallel ? amdgpu_worker_start() : 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, amdgpu_post_forking)

static int resume_process(uint32_t pid)
{
	const struct amdgpu_dev_ops *ops = amdgpu_rst.ops;
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_RESUME, .pid = pid };
	struct amdgpu_dev *dev;
	int ret = ops->open_for_resume(&dev);

	if (ret)
		return ret;
	ret = amdgpu_criu_op(ops, dev, &args, "RESUME");
	ops->close(dev);
	return ret;
}

/* The join point: the task's BOs are in (parallel), then its queues run again (RESUME). */
static int amdgpu_resume_devices_late(int pid)
{
	const struct amdgpu_dumped_kfd *dumped = find_kfd_pid(pid);
	int ret;

	if (!dumped)
		return -ENOTSUP;
	if (nothing_restored(dumped->kfd))
		return 0;
	if (amdgpu_rst.parallel) {
		ret = amdgpu_worker_result(pid);
		if (ret)
			return ret;
	}
	ret = resume_process(pid);
	if (!ret)
		pr_info("task %d: GPU work resumed\n", pid);
	return ret;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, amdgpu_resume_devices_late)

/* ============================ init / exit ============================ */

static int set_backend(AmdgpuBackend backend)
{
	const struct amdgpu_dev_ops *ops = amdgpu_backend(backend);

	if (!ops)
		return -EINVAL;
	if (amdgpu_rst.ops && amdgpu_rst.ops != ops) {
		pr_err("the images come from two device backends (%s, %s)\n", amdgpu_rst.ops->name,
		       ops->name);
		return -EINVAL;
	}
	amdgpu_rst.ops = ops;
	return 0;
}

static int add_kfd_image(int id)
{
	struct amdgpu_dumped_kfd *grown;
	AmdgpuKfdEntry *kfd;
	int ret = amdgpu_kfd_image_read(id, &kfd);

	if (ret)
		return ret;
	grown = realloc(amdgpu_rst.kfds, (amdgpu_rst.nr_kfds + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory\n");
		ret = -ENOMEM;
	} else {
		amdgpu_rst.kfds = grown;
		ret = set_backend(kfd->backend);
	}
	if (ret) {
		amdgpu_kfd_image_free(kfd);
		return ret;
	}
	amdgpu_rst.kfds[amdgpu_rst.nr_kfds++] =
		(struct amdgpu_dumped_kfd){.file_id = id, .kfd = kfd};
	return 0;
}

static int add_render_image(int id)
{
	struct amdgpu_dumped_render *grown;
	AmdgpuRenderEntry *render;
	int ret = amdgpu_render_image_read(id, &render);

	if (ret)
		return ret;
	grown = realloc(amdgpu_rst.renders, (amdgpu_rst.nr_renders + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory\n");
		ret = -ENOMEM;
	} else {
		amdgpu_rst.renders = grown;
		ret = set_backend(render->backend);
	}
	if (ret) {
		amdgpu_render_image_free(render);
		return ret;
	}
	amdgpu_rst.renders[amdgpu_rst.nr_renders++] =
		(struct amdgpu_dumped_render){ .file_id = id, .render = render };
	return 0;
}

/* Every image of ours, decoded once here: the tasks get them with the fork. */
static int scan_images(void)
{
	struct dirent *de;
	DIR *dir;
	int fd, id, ret = 0;

	fd = openat(criu_get_image_dir(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		pr_perror("cannot list the images directory");
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while (!ret && (de = readdir(dir))) {
		char tail;

		if (sscanf(de->d_name, "amdgpu-kfd-%d.im%c", &id, &tail) == 2 && tail == 'g')
			ret = add_kfd_image(id);
		else if (sscanf(de->d_name, "amdgpu-renderD-%d.im%c", &id, &tail) == 2 && tail == 'g')
			ret = add_render_image(id);
	}
	closedir(dir);
	return ret;
}

/* One map of the dump's GPUs onto this machine's, for every process and render node. */
static int map_gpus(void)
{
	size_t nr = 0, i, j;
	AmdgpuGpuEntry **all;
	struct amdgpu_topology topo;
	int ret = amdgpu_topology_read(&topo);

	if (ret)
		return ret;
	for (i = 0; i < amdgpu_rst.nr_kfds; i++)
		nr += amdgpu_rst.kfds[i].kfd->n_gpus;
	all = calloc(nr + amdgpu_rst.nr_renders + 1, sizeof(*all));
	amdgpu_rst.gpus = calloc(nr + amdgpu_rst.nr_renders + 1, sizeof(*amdgpu_rst.gpus));
	if (!all || !amdgpu_rst.gpus) {
		pr_err("out of memory\n");
		ret = -ENOMEM;
	}
	for (nr = 0, i = 0; !ret && i < amdgpu_rst.nr_kfds; i++)
		for (j = 0; j < amdgpu_rst.kfds[i].kfd->n_gpus; j++)
			all[nr++] = amdgpu_rst.kfds[i].kfd->gpus[j];
	for (i = 0; !ret && i < amdgpu_rst.nr_renders; i++)
		all[nr++] = amdgpu_rst.renders[i].render->gpu;
	if (!ret)
		ret = amdgpu_topology_map(&topo, all, nr, amdgpu_rst.gpus, &amdgpu_rst.nr_gpus);
	amdgpu_rst.nr_local_gpus = topo.nr_gpus;
	free(all);
	amdgpu_topology_free(&topo);
	return ret;
}

/*
 * Parallel unless asked not to. Upstream CRIU keeps a tree with children serial; the
 * worker here serves any number of tasks (one command each, per-GPU lanes), so a tree of
 * GPU processes overlaps its device and host restores as a single process does.
 */
static bool want_parallel(void)
{
	const char *env = getenv(PARALLEL_ENV);

	if (env && !strcmp(env, "0")) {
		pr_info("BO contents restored in the tasks (serial): %s=0\n", PARALLEL_ENV);
		return false;
	}
	if (has_children(root_item))
		pr_info("the tree has more than one process: criu's worker serves %zu GPU tasks\n",
			amdgpu_rst.nr_kfds);
	return true;
}

static void restore_cleanup(bool abort)
{
	size_t i;

	if (amdgpu_rst.parallel)
		amdgpu_worker_stop(abort);
	for (i = 0; i < amdgpu_rst.nr_kfds; i++)
		amdgpu_kfd_image_free(amdgpu_rst.kfds[i].kfd);
	for (i = 0; i < amdgpu_rst.nr_renders; i++)
		amdgpu_render_image_free(amdgpu_rst.renders[i].render);
	free(amdgpu_rst.kfds);
	free(amdgpu_rst.renders);
	free(amdgpu_rst.gpus);
	memset(&amdgpu_rst, 0, sizeof(amdgpu_rst));
}

static int amdgpu_init(int stage)
{
	int ret;

	if (stage != CR_PLUGIN_STAGE__RESTORE)
		return 0;
	ret = scan_images();
	if (!ret && (amdgpu_rst.nr_kfds || amdgpu_rst.nr_renders))
		ret = map_gpus();
	if (!ret && amdgpu_rst.nr_kfds) {
		amdgpu_rst.parallel = want_parallel();
		if (amdgpu_rst.parallel)
			ret = amdgpu_worker_listen();
	}
	if (ret)
		restore_cleanup(true);
	return ret;
}

static void amdgpu_exit(int stage, int ret)
{
	if (stage == CR_PLUGIN_STAGE__RESTORE)
		restore_cleanup(ret != 0);
	else
		amdgpu_dump_fini();
}

CR_PLUGIN_REGISTER("amdgpu_plugin", amdgpu_init, amdgpu_exit)
