/*
 * The AMDGPU plugin: checkpoints a process's KFD state (GPUs, buffer objects, private
 * data) through AMDKFD_IOC_CRIU_OP, and restores it either in the task (serial) or with
 * BO contents written by a worker thread in criu while the task rebuilds its host memory
 * (parallel, Documentation/design.md §10). Device access: amdgpu_dev.h (/dev/kfd or the
 * KFD EMULATOR).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
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

/* ============================== restore ============================== */

/*
 * State in criu (set up by init, inherited by the tasks at fork): whether BO contents go
 * to the worker, the worker's listening socket (parked in fdstore for the tasks), and
 * the pids whose KFD state the images hold (RESUME_DEVICES_LATE acts on those only).
 */
struct dumped_kfd {
	uint32_t pid;
	AmdgpuBackend backend;
};

/* One task's command as the worker ended it: RESUME_DEVICES_LATE reports it. */
struct served_task {
	uint32_t pid;
	int status;
};

static struct {
	bool parallel;
	struct dumped_kfd *dumped;
	unsigned int nr_dumped;

	int listen_sk;
	int store_id;	 /* listen_sk in fdstore */
	int stop_efd;	 /* RESUME_DEVICES_LATE: every task has sent; finish and leave */
	int abort_efd;	 /* exit() on a failed restore: drop everything now */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock; /* served[] */
	struct served_task *served;
	unsigned int nr_served;
} rst = { .listen_sk = -1, .store_id = -1, .stop_efd = -1, .abort_efd = -1,
	  .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * In the task only: its restored BOs, parked in fdstore so UPDATE_VMA_MAP can hand out a
 * fresh fd per VMA without any fd of ours staying open in the restored process.
 */
struct restored_bo {
	uint64_t old_offset;
	uint64_t restored_offset;
	uint64_t size;
	int store_id;
};

static struct restored_bo *restored_bos;
static size_t nr_restored_bos;

/* ---- in the task: re-create the BOs ---- */

static int fill_restore_buckets(const AmdgpuKfdEntry *kfd, struct kfd_criu_device_bucket *devices,
				struct kfd_criu_bo_bucket *buckets)
{
	struct amdgpu_topology topo;
	uint32_t actual_ids[32];
	size_t i;
	int ret;

	if (kfd->n_gpus > 32) {
		pr_err("pid %u used %zu GPUs: more than 32 are not supported\n", kfd->pid, kfd->n_gpus);
		return -ENOTSUP;
	}
	ret = amdgpu_topology_read(&topo);
	if (ret)
		return ret;
	ret = amdgpu_topology_map(&topo, kfd, actual_ids);
	amdgpu_topology_free(&topo);
	if (ret)
		return ret;
	for (i = 0; i < kfd->n_gpus; i++) {
		devices[i].user_gpu_id = kfd->gpus[i]->user_gpu_id;
		devices[i].actual_gpu_id = actual_ids[i];
	}
	for (i = 0; i < kfd->n_bos; i++) {
		buckets[i].addr = kfd->bos[i]->addr;
		buckets[i].size = kfd->bos[i]->size;
		buckets[i].offset = kfd->bos[i]->offset;
		buckets[i].gpu_id = kfd->bos[i]->gpu_id;
		buckets[i].alloc_flags = kfd->bos[i]->alloc_flags;
		buckets[i].dmabuf_fd = KFD_INVALID_FD;
	}
	return 0;
}

/* RESTORE re-creates every BO with its handle and address; the buckets bring back their fds. */
static int restore_bos(const struct amdgpu_dev_ops *ops, struct amdgpu_dev *dev,
		       const AmdgpuKfdEntry *kfd, struct kfd_criu_bo_bucket *buckets)
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
	};
	int ret;

	if (!devices) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	ret = fill_restore_buckets(kfd, devices, buckets);
	if (!ret)
		ret = criu_op(ops, dev, &args, "RESTORE");
	free(devices);
	return ret;
}

static int park_restored_bos(const AmdgpuKfdEntry *kfd, const struct kfd_criu_bo_bucket *buckets)
{
	struct restored_bo *grown = realloc(restored_bos, (nr_restored_bos + kfd->n_bos + 1) * sizeof(*grown));
	size_t i;

	if (!grown) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	restored_bos = grown;
	for (i = 0; i < kfd->n_bos; i++) {
		int id = fdstore_add((int)buckets[i].dmabuf_fd);

		if (id < 0) {
			pr_err("BO %#llx: cannot park its fd in fdstore: %s\n", (unsigned long long)buckets[i].addr,
			       strerror(-id));
			return id;
		}
		restored_bos[nr_restored_bos++] = (struct restored_bo){
			.old_offset = buckets[i].offset,
			.restored_offset = buckets[i].restored_offset,
			.size = buckets[i].size,
			.store_id = id,
		};
	}
	return 0;
}

/* Serial path: the task writes every BO itself before it goes on. */
static int fill_bos_in_task(const struct amdgpu_dev_ops *ops, int id, const AmdgpuKfdEntry *kfd,
			    const struct kfd_criu_bo_bucket *buckets)
{
	double start = now_secs();
	int pages_fd = amdgpu_pages_open(id), ret;
	size_t i;

	if (pages_fd < 0)
		return pages_fd;
	ret = amdgpu_pages_check_size(pages_fd, id, kfd);
	for (i = 0; !ret && i < kfd->n_bos; i++)
		ret = amdgpu_fill_bo(ops, kfd->bos[i], (int)buckets[i].dmabuf_fd, pages_fd);
	close(pages_fd);
	if (!ret)
		pr_info("task %d: %zu BOs (%" PRIu64 " bytes) filled in the task (serial) in %.3f s\n",
			getpid(), kfd->n_bos, kfd->pages_size, now_secs() - start);
	return ret;
}

static int connect_to_worker(void)
{
	struct timeval send_timeout = { .tv_sec = WORKER_TIMEOUT_MS / 1000 };
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	int listen_sk, sk, ret = 0;

	listen_sk = fdstore_get(rst.store_id);
	if (listen_sk < 0) {
		pr_err("cannot get criu's BO worker socket from fdstore: %s\n", strerror(-listen_sk));
		return listen_sk;
	}
	if (getsockname(listen_sk, (struct sockaddr *)&addr, &len))
		ret = -errno;
	close(listen_sk);
	sk = ret ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!ret && sk < 0)
		ret = -errno;
	/* A worker that stopped reading must not freeze the task for ever. */
	if (!ret && (setsockopt(sk, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout)) ||
		     connect(sk, (struct sockaddr *)&addr, len)))
		ret = -errno;
	if (ret) {
		pr_err("cannot connect to criu's BO worker: %s\n", strerror(-ret));
		if (sk >= 0)
			close(sk);
		return ret;
	}
	return sk;
}

static int build_command(int id, const AmdgpuKfdEntry *kfd, const struct kfd_criu_bo_bucket *buckets,
			 struct amdgpu_cmd_hdr *hdr, struct amdgpu_cmd_bo *cmd_bos, int *fds)
{
	size_t i, j;

	*hdr = (struct amdgpu_cmd_hdr){ .magic = AMDGPU_CMD_MAGIC, .version = AMDGPU_CMD_VERSION,
					.type = AMDGPU_CMD_RESTORE_BOS, .pid = getpid(), .file_id = id };
	for (i = 0; i < kfd->n_bos; i++) {
		const AmdgpuBoEntry *bo = kfd->bos[i];
		struct amdgpu_cmd_bo *cmd = &cmd_bos[hdr->nr_bos];

		/* A BO without stored contents stays as RESTORE left it (zeroed). */
		if (!bo->n_extents)
			continue;
		*cmd = (struct amdgpu_cmd_bo){ .bo_index = i, .gpu_id = bo->gpu_id, .size = bo->size,
					       .image_offset = bo->extents[0]->image_offset };
		for (j = 0; j < bo->n_extents; j++)
			cmd->data_bytes += bo->extents[j]->length;
		fds[hdr->nr_bos++] = (int)buckets[i].dmabuf_fd;
	}
	hdr->payload_size = (uint64_t)hdr->nr_bos * sizeof(*cmd_bos);
	return 0;
}

/* Parallel path: hand the BOs to criu's worker and go on; its result comes at RESUME_DEVICES_LATE. */
static int send_bos_to_worker(int id, const AmdgpuKfdEntry *kfd,
			      const struct kfd_criu_bo_bucket *buckets)
{
	struct amdgpu_cmd_bo *cmd_bos = calloc(kfd->n_bos + 1, sizeof(*cmd_bos));
	int *fds = calloc(kfd->n_bos + 1, sizeof(*fds));
	struct amdgpu_cmd_hdr hdr;
	int sk, ret;

	ret = cmd_bos && fds ? 0 : -ENOMEM;
	if (ret)
		pr_err("out of memory\n");
	sk = ret ? ret : connect_to_worker();
	if (sk < 0)
		ret = sk;
	if (!ret)
		ret = build_command(id, kfd, buckets, &hdr, cmd_bos, fds);
	if (!ret && fault_is("task-dies-mid-command")) {
		pr_warn("test fault %s=task-dies-mid-command: the task dies after the header\n", FAULT_ENV);
		amdgpu_sk_send_all(sk, &hdr, sizeof(hdr));
		kill(getpid(), SIGKILL);
	}
	if (!ret)
		ret = amdgpu_cmd_send(sk, &hdr, cmd_bos, fds);
	if (!ret)
		pr_info("task %d: %u BOs handed to criu's worker\n", getpid(), hdr.nr_bos);
	if (sk >= 0)
		close(sk);
	free(cmd_bos);
	free(fds);
	return ret;
}

static int restore_kfd_file(const struct amdgpu_dev_ops *ops, int id, const AmdgpuKfdEntry *kfd,
			    int *kfd_fd)
{
	struct kfd_criu_bo_bucket *buckets = calloc(kfd->n_bos + 1, sizeof(*buckets));
	struct amdgpu_dev *dev = NULL;
	size_t i;
	int ret;

	if (!buckets) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	for (i = 0; i < kfd->n_bos; i++)
		buckets[i].dmabuf_fd = KFD_INVALID_FD;
	ret = ops->open_own(&dev, kfd_fd);
	if (!ret)
		ret = restore_bos(ops, dev, kfd, buckets);
	if (!ret)
		ret = park_restored_bos(kfd, buckets);
	if (!ret && rst.parallel)
		ret = send_bos_to_worker(id, kfd, buckets);
	else if (!ret)
		ret = fill_bos_in_task(ops, id, kfd, buckets);
	/* RESTORE fills the fds in all or none of the buckets. */
	close_bucket_fds(buckets, kfd->n_bos);
	free(buckets);
	if (dev)
		ops->close(dev);
	if (ret && dev)
		close(*kfd_fd);
	return ret;
}

static int amdgpu_restore_ext_file(int id, bool *retry_needed)
{
	const struct amdgpu_dev_ops *ops;
	AmdgpuKfdEntry *kfd;
	int ret, kfd_fd = -1;

	(void)retry_needed;
	ret = amdgpu_kfd_image_read(id, &kfd);
	if (ret == -ENOENT)
		return -ENOTSUP;
	if (ret)
		return ret;
	ops = backend_ops(kfd);
	ret = ops ? restore_kfd_file(ops, id, kfd, &kfd_fd) : -EINVAL;
	if (!ret)
		pr_info("file %d: %s state of pid %u restored, %zu BOs\n", id, ops->name, kfd->pid,
			kfd->n_bos);
	amdgpu_kfd_image_free(kfd);
	return ret ? ret : kfd_fd;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, amdgpu_restore_ext_file)

static const struct restored_bo *find_restored_bo(uint64_t old_offset)
{
	size_t i;

	for (i = 0; i < nr_restored_bos; i++) {
		if (restored_bos[i].old_offset == old_offset)
			return &restored_bos[i];
	}
	return NULL;
}

/*
 * The emulator's BO VMAs map the BO's memfd, named after the BO's mmap offset, at an
 * offset inside the BO. Hardware's map a render node at the BO's mmap offset, which
 * RESTORE changed (never run on hardware).
 */
static int amdgpu_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
				 uint64_t *new_pgoff, int *plugin_fd)
{
	const struct restored_bo *bo;
	unsigned long long bo_offset;
	size_t i;

	if (sscanf(path, EMU_BO_MEMFD_PREFIX "%llx", &bo_offset) == 1) {
		bo = find_restored_bo(bo_offset);
		if (!bo) {
			pr_err("VMA %#" PRIx64 " maps BO %#llx, which was not restored\n", addr, bo_offset);
			return -ENOENT;
		}
		*plugin_fd = fdstore_get(bo->store_id);
		*new_pgoff = old_pgoff;
		return *plugin_fd < 0 ? *plugin_fd : 1;
	}
	if (strncmp(path, "/dev/dri/renderD", 16))
		return -ENOTSUP;
	for (i = 0; i < nr_restored_bos; i++) {
		bo = &restored_bos[i];
		if (old_pgoff >= bo->old_offset && old_pgoff - bo->old_offset < bo->size) {
			*plugin_fd = open(path, O_RDWR | O_CLOEXEC);
			if (*plugin_fd < 0) {
				pr_perror("VMA %#" PRIx64 ": cannot open %s", addr, path);
				return -errno;
			}
			*new_pgoff = bo->restored_offset + (old_pgoff - bo->old_offset);
			return 1;
		}
	}
	pr_err("VMA %#" PRIx64 " maps %s at %#" PRIx64 ": no restored BO there\n", addr, path, old_pgoff);
	return -ENOENT;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, amdgpu_update_vma_map)

/* ---- in criu: the worker ---- */

/* One filler thread's share of a command: the BOs of one GPU. */
struct gpu_fill_job {
	const struct amdgpu_dev_ops *ops;
	const AmdgpuKfdEntry *kfd;
	const struct amdgpu_cmd_hdr *hdr;
	const struct amdgpu_cmd_bo *bos;
	const int *fds;
	int pages_fd;
	uint32_t gpu_id;
	int status;
	pthread_t thread;
};

/* The command must describe the image's BOs, or the worker would write the wrong memory. */
static int check_cmd_bo(const struct amdgpu_cmd_hdr *hdr, const AmdgpuKfdEntry *kfd,
			const struct amdgpu_cmd_bo *cmd)
{
	const AmdgpuBoEntry *bo = cmd->bo_index < kfd->n_bos ? kfd->bos[cmd->bo_index] : NULL;

	if (bo && bo->size == cmd->size && bo->gpu_id == cmd->gpu_id && bo->n_extents &&
	    bo->extents[0]->image_offset == cmd->image_offset)
		return 0;
	pr_err("worker: task %u: the command's BO %u (%" PRIu64 " bytes, GPU %#x) does not match amdgpu-kfd-%u.img\n",
	       hdr->pid, cmd->bo_index, cmd->size, cmd->gpu_id, hdr->file_id);
	return -EPROTO;
}

static void *gpu_fill_main(void *arg)
{
	struct gpu_fill_job *job = arg;
	uint32_t i;

	for (i = 0; !job->status && i < job->hdr->nr_bos; i++) {
		const struct amdgpu_cmd_bo *cmd = &job->bos[i];

		if (cmd->gpu_id != job->gpu_id)
			continue;
		job->status = amdgpu_fill_bo(job->ops, job->kfd->bos[cmd->bo_index], job->fds[i],
					     job->pages_fd);
	}
	return NULL;
}

/* At least one thread per GPU: each GPU's copy engine (or memory) works independently. */
static int fill_bos_per_gpu(const struct amdgpu_dev_ops *ops, const AmdgpuKfdEntry *kfd,
			    const struct amdgpu_cmd_hdr *hdr, const struct amdgpu_cmd_bo *bos,
			    const int *fds, int pages_fd)
{
	struct gpu_fill_job *jobs = calloc(kfd->n_gpus + 1, sizeof(*jobs));
	size_t i, nr_started = 0;
	int ret = 0;

	if (!jobs) {
		pr_err("worker: out of memory\n");
		return -ENOMEM;
	}
	for (i = 0; i < kfd->n_gpus; i++) {
		jobs[i] = (struct gpu_fill_job){ .ops = ops, .kfd = kfd, .hdr = hdr, .bos = bos,
						 .fds = fds, .pages_fd = pages_fd,
						 .gpu_id = kfd->gpus[i]->user_gpu_id };
		ret = pthread_create(&jobs[i].thread, NULL, gpu_fill_main, &jobs[i]);
		if (ret) {
			pr_err("worker: cannot start a thread for GPU %#x: %s\n", jobs[i].gpu_id,
			       strerror(ret));
			ret = -ret;
			break;
		}
		nr_started++;
	}
	for (i = 0; i < nr_started; i++) {
		pthread_join(jobs[i].thread, NULL);
		if (!ret)
			ret = jobs[i].status;
	}
	free(jobs);
	return ret;
}

static int fill_command(const struct amdgpu_cmd_hdr *hdr, const struct amdgpu_cmd_bo *bos,
			const int *fds)
{
	const struct amdgpu_dev_ops *ops;
	AmdgpuKfdEntry *kfd;
	double start = now_secs();
	int pages_fd = -1, ret;
	uint32_t i;

	ret = amdgpu_kfd_image_read(hdr->file_id, &kfd);
	if (ret == -ENOENT)
		pr_err("worker: task %u names file %u, which has no amdgpu-kfd image\n", hdr->pid,
		       hdr->file_id);
	if (ret)
		return ret;
	ops = backend_ops(kfd);
	ret = ops ? 0 : -EINVAL;
	for (i = 0; !ret && i < hdr->nr_bos; i++)
		ret = check_cmd_bo(hdr, kfd, &bos[i]);
	if (!ret && fault_is("worker-error")) {
		pr_err("worker: task %u: test fault %s=worker-error: its BOs are not filled\n",
		       hdr->pid, FAULT_ENV);
		ret = -EIO;
	}
	if (!ret) {
		pages_fd = amdgpu_pages_open(hdr->file_id);
		ret = pages_fd < 0 ? pages_fd : amdgpu_pages_check_size(pages_fd, hdr->file_id, kfd);
	}
	if (!ret)
		ret = fill_bos_per_gpu(ops, kfd, hdr, bos, fds, pages_fd);
	if (!ret)
		pr_info("worker: task %u: %u BOs (%" PRIu64 " bytes) filled on %zu GPUs in %.3f s\n",
			hdr->pid, hdr->nr_bos, kfd->pages_size, kfd->n_gpus, now_secs() - start);
	if (pages_fd >= 0)
		close(pages_fd);
	amdgpu_kfd_image_free(kfd);
	return ret;
}

static void record_served(uint32_t pid, int status)
{
	struct served_task *grown;

	pthread_mutex_lock(&rst.lock);
	grown = realloc(rst.served, (rst.nr_served + 1) * sizeof(*grown));
	if (grown) {
		rst.served = grown;
		rst.served[rst.nr_served++] = (struct served_task){ .pid = pid, .status = status };
	} else {
		pr_err("worker: out of memory recording the result for task %u\n", pid);
	}
	pthread_mutex_unlock(&rst.lock);
}

static const char *recv_error_text(int err)
{
	switch (err) {
	case -ECONNRESET:
		return "the task closed the connection mid-command (did it die?)";
	case -ETIMEDOUT:
		return "the task sent nothing more for too long";
	case -ECANCELED:
		return "the restore was aborted";
	case -EPROTO:
		return "malformed command";
	case -EPROTONOSUPPORT:
		return "unknown protocol version";
	default:
		return strerror(-err);
	}
}

static bool efd_signalled(int efd)
{
	struct pollfd pfd = { .fd = efd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1;
}

static void serve_task(int sk)
{
	struct amdgpu_cmd_hdr hdr = { 0 };
	struct amdgpu_cmd_bo *bos;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int *fds, ret;
	uint32_t i;

	/* The peer's pid from the kernel: a broken command still fails the right task. */
	if (getsockopt(sk, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	ret = amdgpu_cmd_recv(sk, &hdr, &bos, &fds, rst.abort_efd, WORKER_TIMEOUT_MS);
	if (ret) {
		/* Once the restore is aborted, whatever failed it has been reported already. */
		if (efd_signalled(rst.abort_efd))
			pr_warn("worker: restore aborted; BO restore command of task %d broken off: %s\n",
				cred.pid, recv_error_text(ret));
		else
			pr_err("worker: BO restore command of task %d broken off: %s\n", cred.pid,
			       recv_error_text(ret));
		record_served(cred.pid, ret);
		return;
	}
	if (hdr.pid != (uint32_t)cred.pid) {
		pr_err("worker: task %d sent a command for pid %u\n", cred.pid, hdr.pid);
		ret = -EPROTO;
	}
	if (!ret)
		ret = fill_command(&hdr, bos, fds);
	for (i = 0; i < hdr.nr_bos; i++)
		close(fds[i]);
	free(bos);
	free(fds);
	record_served(cred.pid, ret);
}

/*
 * Serves tasks until stopped or aborted: one command per task, in arrival order.
 * Connections already queued are served first either way: at a stop every task has sent
 * its command; at an abort a task that died mid-command is still named in the log. An
 * abort only cuts short waits for data that is not there.
 */
static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pfds[3] = { { .fd = rst.listen_sk, .events = POLLIN },
					  { .fd = rst.stop_efd, .events = POLLIN },
					  { .fd = rst.abort_efd, .events = POLLIN } };
		int sk;

		if (poll(pfds, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_perror("worker: poll");
			break;
		}
		if (!pfds[0].revents) {
			if (pfds[1].revents || pfds[2].revents)
				break;
			continue;
		}
		sk = accept4(rst.listen_sk, NULL, NULL, SOCK_CLOEXEC);
		if (sk < 0) {
			pr_perror("worker: accept");
			continue;
		}
		serve_task(sk);
		close(sk);
	}
	return NULL;
}

static int amdgpu_post_forking(void)
{
	sigset_t all, old;
	int ret;

	if (!rst.parallel)
		return 0;
	/* criu's waitpid() gets SIGCHLD; the worker threads must never take it. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&rst.thread, NULL, worker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		pr_err("cannot start the BO worker: %s\n", strerror(ret));
		return -ret;
	}
	rst.running = true;
	pr_info("BO worker started: contents are restored in parallel with host memory\n");
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, amdgpu_post_forking)

static void stop_worker(int efd)
{
	uint64_t one = 1;

	if (!rst.running)
		return;
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		pr_perror("cannot signal the BO worker");
	pthread_join(rst.thread, NULL);
	rst.running = false;
}

static const struct dumped_kfd *find_dumped(uint32_t pid)
{
	unsigned int i;

	for (i = 0; i < rst.nr_dumped; i++) {
		if (rst.dumped[i].pid == pid)
			return &rst.dumped[i];
	}
	return NULL;
}

/* The join point: the worker has finished this task's BOs, or the restore fails here. */
static int worker_result(int pid)
{
	unsigned int i;

	stop_worker(rst.stop_efd);
	for (i = 0; i < rst.nr_served; i++) {
		/* A failure was logged by the worker, naming the task and the cause. */
		if (rst.served[i].pid == (uint32_t)pid)
			return rst.served[i].status;
	}
	pr_err("task %d: criu's BO worker never got the task's BO restore command\n", pid);
	return -EPROTO;
}

static int resume_process(const struct dumped_kfd *dumped)
{
	const struct amdgpu_dev_ops *ops = backends[dumped->backend];
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_RESUME, .pid = dumped->pid };
	struct amdgpu_dev *dev;
	int ret = ops->open_for_resume(&dev);

	if (ret)
		return ret;
	ret = criu_op(ops, dev, &args, "RESUME");
	ops->close(dev);
	return ret;
}

static int amdgpu_resume_devices_late(int pid)
{
	const struct dumped_kfd *dumped = find_dumped(pid);
	int ret;

	if (!dumped)
		return -ENOTSUP;
	if (rst.parallel) {
		ret = worker_result(pid);
		if (ret)
			return ret;
	}
	ret = resume_process(dumped);
	if (!ret)
		pr_info("task %d: GPU work resumed\n", pid);
	return ret;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, amdgpu_resume_devices_late)

/* ---- init / exit ---- */

static int add_dumped(int id)
{
	struct dumped_kfd *grown;
	AmdgpuKfdEntry *kfd;
	int ret = amdgpu_kfd_image_read(id, &kfd);

	if (ret)
		return ret;
	grown = realloc(rst.dumped, (rst.nr_dumped + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory\n");
		ret = -ENOMEM;
	} else if (!backend_ops(kfd)) {
		ret = -EINVAL;
	} else {
		rst.dumped = grown;
		rst.dumped[rst.nr_dumped++] = (struct dumped_kfd){ .pid = kfd->pid, .backend = kfd->backend };
	}
	amdgpu_kfd_image_free(kfd);
	return ret;
}

/* Which pids have KFD state: RESUME_DEVICES_LATE is ours for those only. */
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
			ret = add_dumped(id);
	}
	closedir(dir);
	return ret;
}

/*
 * Upstream's rule: the parallel path only for a single process, since a worker serving
 * several tasks that each wait on it could be starved by their ordering.
 */
static bool want_parallel(void)
{
	const char *env = getenv(PARALLEL_ENV);

	if (env && !strcmp(env, "0")) {
		pr_info("BO contents restored in the task (serial): %s=0\n", PARALLEL_ENV);
		return false;
	}
	if (has_children(root_item)) {
		pr_info("BO contents restored in the tasks (serial): the tree has more than one process\n");
		return false;
	}
	return true;
}

/* A listening socket with an autobound abstract name: tasks find it by getsockname(). */
static int start_listening(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	rst.listen_sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (rst.listen_sk < 0 || bind(rst.listen_sk, (struct sockaddr *)&addr, sizeof(sa_family_t)) ||
	    listen(rst.listen_sk, 64)) {
		pr_perror("cannot create the BO worker's socket");
		return -errno;
	}
	rst.stop_efd = eventfd(0, EFD_CLOEXEC);
	rst.abort_efd = eventfd(0, EFD_CLOEXEC);
	if (rst.stop_efd < 0 || rst.abort_efd < 0) {
		pr_perror("eventfd");
		return -errno;
	}
	/* Before the fork: fdstore is how the tasks reach it (Documentation/design.md §4). */
	rst.store_id = fdstore_add(rst.listen_sk);
	if (rst.store_id < 0) {
		pr_err("cannot park the BO worker's socket in fdstore: %s\n", strerror(-rst.store_id));
		return rst.store_id;
	}
	return 0;
}

static void close_if_open(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void restore_cleanup(void)
{
	stop_worker(rst.abort_efd);
	close_if_open(&rst.listen_sk);
	close_if_open(&rst.stop_efd);
	close_if_open(&rst.abort_efd);
	free(rst.dumped);
	free(rst.served);
	rst.dumped = NULL;
	rst.served = NULL;
	rst.nr_dumped = rst.nr_served = 0;
}

static int amdgpu_init(int stage)
{
	int ret;

	if (stage != CR_PLUGIN_STAGE__RESTORE)
		return 0;
	ret = scan_images();
	if (!ret && rst.nr_dumped) {
		rst.parallel = want_parallel();
		if (rst.parallel)
			ret = start_listening();
	}
	if (ret)
		restore_cleanup();
	return ret;
}

static void amdgpu_exit(int stage, int ret)
{
	(void)ret;
	if (stage == CR_PLUGIN_STAGE__RESTORE)
		restore_cleanup();
}

CR_PLUGIN_REGISTER("amdgpu_plugin", amdgpu_init, amdgpu_exit)
