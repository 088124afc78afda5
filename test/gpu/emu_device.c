/*
 * The KFD EMULATOR's device: per-client processes, memfd-backed buffer objects ("VRAM"
 * and GTT), the "kernels" that compute on them, and the KFD CRIU ops with the real
 * structs from <linux/kfd_ioctl.h>. All state is under emu_lock. Not a GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu.h"
#include "libkfdemu.h"

#define EMU_PAGE_SIZE 4096ULL
#define EMU_VA_BASE (1ULL << 32)
#define EMU_VA_ALIGN (2ULL << 20)
#define EMU_KERNEL_CHUNK (1U << 20)

/* Opaque to the checkpoint tool, as KFD's private data is; versioned so a bad image fails. */
#define EMU_PRIV_MAGIC 0x5650454bU /* "KEPV" */
#define EMU_PRIV_VERSION 1

struct emu_priv_header {
	uint32_t magic;
	uint32_t version;
	uint32_t num_bos;
	uint32_t num_devices;
};

struct emu_priv_bo {
	uint32_t idr;
	uint32_t user_gpu_id;
};

struct emu_gpu emu_gpus[EMU_MAX_GPUS];
unsigned int emu_nr_gpus;

struct emu_bo {
	uint64_t handle;
	uint64_t va_addr;
	uint64_t size;
	uint64_t mmap_offset;
	uint32_t idr;
	uint32_t user_gpu_id;
	uint32_t alloc_flags;
	struct emu_gpu *gpu;
	int memfd;
	int refs; /* the process's table + each kernel running on it */
};

/* KFD keeps a user_gpu_id per device of a process: a restored process keeps its old ids. */
struct emu_gpu_map {
	uint32_t user_gpu_id;
	struct emu_gpu *gpu;
};

struct emu_process {
	struct emu_process *next;
	uint32_t pid;
	int pidfd; /* tells a dead process from a new one that got its pid */
	int owners; /* connections opened by this process */
	int refs;   /* owners + connections attached to it */
	bool dead;  /* every owner is gone: BOs freed, ops fail with ESRCH */
	bool paused; /* PROCESS_INFO .. UNPAUSE: queues evicted, no kernel runs */
	bool awaiting_resume; /* RESTORE .. RESUME: same */
	bool restored;
	int running_kernels;
	uint32_t next_idr;
	struct emu_bo **bos;
	uint32_t nr_bos;
	uint32_t bos_capacity;
	struct emu_gpu_map gpu_map[EMU_MAX_GPUS];
	uint32_t nr_gpu_maps;
};

static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast on unpause, resume, kernel completion and process death. */
static pthread_cond_t emu_state_changed = PTHREAD_COND_INITIALIZER;
static struct emu_process *emu_processes; /* newest first */
/* Fake mmap offsets are never reused, so a restored BO always gets a new one, as on KFD. */
static uint64_t next_mmap_offset = 1ULL << 32;

static const char *criu_op_name(uint32_t op)
{
	static const char *const names[] = {
		[KFD_CRIU_OP_PROCESS_INFO] = "PROCESS_INFO", [KFD_CRIU_OP_CHECKPOINT] = "CHECKPOINT",
		[KFD_CRIU_OP_UNPAUSE] = "UNPAUSE",	     [KFD_CRIU_OP_RESTORE] = "RESTORE",
		[KFD_CRIU_OP_RESUME] = "RESUME",
	};

	return op < sizeof(names) / sizeof(names[0]) ? names[op] : "unknown";
}

static uint64_t round_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) / align * align;
}

void emu_get_gpu_info(struct kfdemu_gpu_info *gpus)
{
	pthread_mutex_lock(&emu_lock);
	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		gpus[i].gpu_id = emu_gpus[i].gpu_id;
		gpus[i].node_id = emu_gpus[i].node_id;
		gpus[i].device_id = emu_gpus[i].device_id;
		gpus[i].vram_size = emu_gpus[i].vram_size;
		gpus[i].vram_used = emu_gpus[i].vram_used;
	}
	pthread_mutex_unlock(&emu_lock);
}

/* ---- buffer objects ---- */

static void bo_put(struct emu_bo *bo)
{
	if (--bo->refs)
		return;
	close(bo->memfd);
	free(bo);
}

static int bo_create(uint32_t user_gpu_id, struct emu_gpu *gpu, uint32_t idr, uint32_t flags,
		     uint64_t va_addr, uint64_t size, struct emu_bo **bo_out)
{
	char name[64];
	struct emu_bo *bo;
	int ret;

	if ((flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) && gpu->vram_used + size > gpu->vram_size) {
		emu_err("gpu %#x: no room for a %llu-byte VRAM BO (%llu of %llu used)", gpu->gpu_id,
			(unsigned long long)size, (unsigned long long)gpu->vram_used,
			(unsigned long long)gpu->vram_size);
		return -ENOMEM;
	}
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;
	bo->mmap_offset = next_mmap_offset;
	snprintf(name, sizeof(name), "kfdemu-bo-%llx", (unsigned long long)bo->mmap_offset);
	/* Sparse: ftruncate allocates nothing, only touched pages cost memory. */
	bo->memfd = memfd_create(name, MFD_CLOEXEC);
	if (bo->memfd < 0 || ftruncate(bo->memfd, size)) {
		ret = -errno;
		emu_err("gpu %#x: cannot back a %llu-byte BO with a memfd: %s", gpu->gpu_id,
			(unsigned long long)size, strerror(errno));
		if (bo->memfd >= 0)
			close(bo->memfd);
		free(bo);
		return ret;
	}
	next_mmap_offset += round_up(size, EMU_PAGE_SIZE);
	bo->handle = (uint64_t)user_gpu_id << 32 | idr;
	bo->va_addr = va_addr;
	bo->size = size;
	bo->idr = idr;
	bo->user_gpu_id = user_gpu_id;
	bo->alloc_flags = flags;
	bo->gpu = gpu;
	bo->refs = 1;
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
		gpu->vram_used += size;
	*bo_out = bo;
	return 0;
}

/* Drop the process's reference; a kernel still running on it keeps the memfd open. */
static void bo_release(struct emu_bo *bo)
{
	if (bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
		bo->gpu->vram_used -= bo->size;
	bo_put(bo);
}

static int process_add_bo(struct emu_process *proc, struct emu_bo *bo)
{
	if (proc->nr_bos == proc->bos_capacity) {
		uint32_t capacity = proc->bos_capacity ? proc->bos_capacity * 2 : 64;
		struct emu_bo **grown = realloc(proc->bos, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		proc->bos = grown;
		proc->bos_capacity = capacity;
	}
	proc->bos[proc->nr_bos++] = bo;
	return 0;
}

static struct emu_bo *lookup_bo(struct emu_process *proc, uint64_t handle, uint32_t *index)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		if (proc->bos[i]->handle != handle)
			continue;
		if (index)
			*index = i;
		return proc->bos[i];
	}
	return NULL;
}

static struct emu_bo *process_find_bo(struct emu_process *proc, uint64_t handle, uint32_t *index)
{
	struct emu_bo *bo = lookup_bo(proc, handle, index);

	if (!bo)
		emu_err("pid %u: no BO with handle %#llx", proc->pid, (unsigned long long)handle);
	return bo;
}

static struct emu_gpu *process_gpu(struct emu_process *proc, uint32_t user_gpu_id)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++)
		if (proc->gpu_map[i].user_gpu_id == user_gpu_id)
			return proc->gpu_map[i].gpu;
	emu_err("pid %u: no GPU with id %#x", proc->pid, user_gpu_id);
	return NULL;
}

static bool va_range_free(struct emu_process *proc, uint32_t user_gpu_id, uint64_t va,
			  uint64_t size)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		struct emu_bo *bo = proc->bos[i];

		if (bo->user_gpu_id == user_gpu_id && va < bo->va_addr + bo->size &&
		    bo->va_addr < va + size)
			return false;
	}
	return true;
}

static uint64_t pick_va(struct emu_process *proc, uint32_t user_gpu_id)
{
	uint64_t va = EMU_VA_BASE;

	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		struct emu_bo *bo = proc->bos[i];

		if (bo->user_gpu_id == user_gpu_id && bo->va_addr + bo->size > va)
			va = bo->va_addr + bo->size;
	}
	/* One aligned guard gap between BOs, as a VA allocator on a real GPU leaves. */
	return round_up(va, EMU_VA_ALIGN) + (va == EMU_VA_BASE ? 0 : EMU_VA_ALIGN);
}

static int check_bo_shape(uint32_t pid, uint32_t flags, uint64_t va, uint64_t size)
{
	uint32_t kind = flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT);

	if (kind != KFD_IOC_ALLOC_MEM_FLAGS_VRAM && kind != KFD_IOC_ALLOC_MEM_FLAGS_GTT) {
		emu_err("pid %u: BO flags %#x: the emulator has VRAM or GTT BOs only", pid, flags);
		return -EINVAL;
	}
	if (!size || size % EMU_PAGE_SIZE || va % EMU_PAGE_SIZE || va + size < va) {
		emu_err("pid %u: bad BO shape: va %#llx size %#llx", pid, (unsigned long long)va,
			(unsigned long long)size);
		return -EINVAL;
	}
	return 0;
}

/* ---- processes ---- */

static bool process_has_exited(const struct emu_process *proc)
{
	struct pollfd pfd = { .fd = proc->pidfd, .events = POLLIN };

	/* A pidfd becomes readable when the process exits. */
	return proc->pidfd >= 0 && poll(&pfd, 1, 0) > 0;
}

static void process_unlink(struct emu_process *proc)
{
	struct emu_process **link;

	for (link = &emu_processes; *link; link = &(*link)->next) {
		if (*link == proc) {
			*link = proc->next;
			return;
		}
	}
}

/* The process is gone (as KFD frees a process's memory when its mm goes). */
static void process_kill(struct emu_process *proc)
{
	emu_info("pid %u: process gone, freeing %u BOs", proc->pid, proc->nr_bos);
	for (uint32_t i = 0; i < proc->nr_bos; i++)
		bo_release(proc->bos[i]);
	proc->nr_bos = 0;
	proc->dead = true;
	process_unlink(proc);
	pthread_cond_broadcast(&emu_state_changed);
}

static struct emu_process *process_new(uint32_t pid, int pidfd)
{
	struct emu_process *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	proc->pid = pid;
	proc->pidfd = pidfd;
	proc->next_idr = 1;
	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		proc->gpu_map[i].user_gpu_id = emu_gpus[i].gpu_id;
		proc->gpu_map[i].gpu = &emu_gpus[i];
	}
	proc->nr_gpu_maps = emu_nr_gpus;
	proc->next = emu_processes;
	emu_processes = proc;
	return proc;
}

int emu_process_open(uint32_t pid, int pidfd, struct emu_process **proc_out)
{
	struct emu_process *proc;

	pthread_mutex_lock(&emu_lock);
	for (proc = emu_processes; proc; proc = proc->next) {
		if (proc->pid != pid)
			continue;
		if (!process_has_exited(proc))
			break;
		/* Its last connection has not been reaped yet: the pid now names a new process. */
		process_kill(proc);
		proc = NULL;
		break;
	}
	if (proc) {
		if (pidfd >= 0)
			close(pidfd);
	} else {
		proc = process_new(pid, pidfd);
	}
	if (proc) {
		proc->owners++;
		proc->refs++;
	}
	pthread_mutex_unlock(&emu_lock);
	if (!proc) {
		emu_err("pid %u: no memory for a process", pid);
		return -ENOMEM;
	}
	*proc_out = proc;
	return 0;
}

void emu_process_close(struct emu_process *proc, bool owner)
{
	pthread_mutex_lock(&emu_lock);
	if (owner && --proc->owners == 0 && !proc->dead)
		process_kill(proc);
	if (--proc->refs == 0) {
		if (proc->pidfd >= 0)
			close(proc->pidfd);
		free(proc->bos);
		free(proc);
	}
	pthread_mutex_unlock(&emu_lock);
}

static struct emu_process *process_lookup(uint32_t pid)
{
	for (struct emu_process *proc = emu_processes; proc; proc = proc->next)
		if (proc->pid == pid && !process_has_exited(proc))
			return proc;
	return NULL;
}

int emu_process_find(uint32_t pid, struct emu_process **proc_out)
{
	struct emu_process *proc;

	pthread_mutex_lock(&emu_lock);
	proc = process_lookup(pid);
	if (proc)
		proc->refs++;
	pthread_mutex_unlock(&emu_lock);
	if (!proc) {
		emu_err("no live process with pid %u", pid);
		return -ESRCH;
	}
	*proc_out = proc;
	return 0;
}

void emu_process_get(struct emu_process *proc)
{
	pthread_mutex_lock(&emu_lock);
	proc->refs++;
	pthread_mutex_unlock(&emu_lock);
}

uint32_t emu_process_pid(const struct emu_process *proc)
{
	return proc->pid;
}

/* A process that exited is gone even before its last connection is reaped. */
static int check_alive(struct emu_process *proc)
{
	if (!proc->dead && process_has_exited(proc))
		process_kill(proc);
	if (!proc->dead)
		return 0;
	emu_err("pid %u: the process is gone", proc->pid);
	return -ESRCH;
}

/* ---- BO calls ---- */

static int alloc_bo_locked(struct emu_process *proc, struct kfdemu_bo_info *info)
{
	struct emu_gpu *gpu;
	struct emu_bo *bo;
	int ret;

	ret = check_alive(proc);
	if (!ret)
		ret = check_bo_shape(proc->pid, info->alloc_flags, info->va_addr, info->size);
	if (ret)
		return ret;
	gpu = process_gpu(proc, info->gpu_id);
	if (!gpu)
		return -EINVAL;
	if (!info->va_addr)
		info->va_addr = pick_va(proc, info->gpu_id);
	else if (!va_range_free(proc, info->gpu_id, info->va_addr, info->size)) {
		emu_err("pid %u: VA %#llx+%#llx overlaps a BO on gpu %#x", proc->pid,
			(unsigned long long)info->va_addr, (unsigned long long)info->size,
			info->gpu_id);
		return -EINVAL;
	}
	ret = bo_create(info->gpu_id, gpu, proc->next_idr, info->alloc_flags, info->va_addr,
			info->size, &bo);
	if (ret)
		return ret;
	ret = process_add_bo(proc, bo);
	if (ret) {
		emu_err("pid %u: no memory for the BO table", proc->pid);
		bo_release(bo);
		return ret;
	}
	proc->next_idr++;
	info->handle = bo->handle;
	info->mmap_offset = bo->mmap_offset;
	emu_debug("pid %u: BO %#llx: %s %llu bytes at va %#llx, offset %#llx", proc->pid,
		  (unsigned long long)bo->handle,
		  bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM ? "VRAM" : "GTT",
		  (unsigned long long)bo->size, (unsigned long long)bo->va_addr,
		  (unsigned long long)bo->mmap_offset);
	return 0;
}

int emu_alloc_bo(struct emu_process *proc, struct kfdemu_bo_info *info)
{
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = alloc_bo_locked(proc, info);
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

int emu_free_bo(struct emu_process *proc, uint64_t handle)
{
	struct emu_bo *bo = NULL;
	uint32_t index;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = check_alive(proc);
	if (!ret) {
		bo = process_find_bo(proc, handle, &index);
		ret = bo ? 0 : -EINVAL;
	}
	if (bo) {
		proc->bos[index] = proc->bos[--proc->nr_bos];
		bo_release(bo);
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

static int dup_bo_fd(const struct emu_bo *bo, int *fd)
{
	*fd = fcntl(bo->memfd, F_DUPFD_CLOEXEC, 0);
	if (*fd >= 0)
		return 0;
	emu_err("BO %#llx: cannot dup its memfd: %s", (unsigned long long)bo->handle,
		strerror(errno));
	return -errno;
}

int emu_export_bo(struct emu_process *proc, uint64_t handle, int *fd)
{
	struct emu_bo *bo;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = check_alive(proc);
	if (!ret) {
		bo = process_find_bo(proc, handle, NULL);
		ret = bo ? dup_bo_fd(bo, fd) : -EINVAL;
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- kernels ---- */

static int kernel_io_error(const struct emu_bo *bo, const char *what, uint64_t pos)
{
	int ret = errno ? -errno : -EIO;

	emu_err("BO %#llx: kernel %s at offset %#llx failed: %s", (unsigned long long)bo->handle,
		what, (unsigned long long)pos, strerror(-ret));
	return ret;
}

static int kernel_fill(const struct emu_bo *bo, uint64_t offset, uint64_t length,
		       uint32_t pattern, uint32_t *chunk)
{
	for (uint32_t i = 0; i < EMU_KERNEL_CHUNK / 4; i++)
		chunk[i] = pattern;
	for (uint64_t pos = offset; pos < offset + length;) {
		uint64_t todo = offset + length - pos;
		ssize_t done;

		done = pwrite(bo->memfd, chunk, todo < EMU_KERNEL_CHUNK ? todo : EMU_KERNEL_CHUNK, pos);
		if (done <= 0)
			return kernel_io_error(bo, "fill", pos);
		pos += done;
	}
	return 0;
}

static int kernel_add(const struct emu_bo *bo, uint64_t offset, uint64_t length,
		      uint32_t addend, uint32_t *chunk)
{
	for (uint64_t pos = offset; pos < offset + length;) {
		uint64_t todo = offset + length - pos;
		size_t len = todo < EMU_KERNEL_CHUNK ? todo : EMU_KERNEL_CHUNK;

		/* Reads of a memfd never come up short inside its size. */
		if (pread(bo->memfd, chunk, len, pos) != (ssize_t)len)
			return kernel_io_error(bo, "add (read)", pos);
		for (size_t i = 0; i < len / 4; i++)
			chunk[i] += addend;
		if (pwrite(bo->memfd, chunk, len, pos) != (ssize_t)len)
			return kernel_io_error(bo, "add (write)", pos);
		pos += len;
	}
	return 0;
}

/* Holes read as zeros and add nothing to the checksum: skip them, so sparse BOs are cheap. */
static int kernel_checksum(const struct emu_bo *bo, uint64_t offset, uint64_t length,
			   uint64_t *sum, uint32_t *chunk)
{
	uint64_t end = offset + length;
	uint64_t pos = offset;

	*sum = 0;
	while (pos < end) {
		off_t data = lseek(bo->memfd, pos, SEEK_DATA);
		off_t hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0)
			return kernel_io_error(bo, "checksum (seek)", pos);
		if ((uint64_t)data >= end)
			break;
		hole = lseek(bo->memfd, data, SEEK_HOLE);
		if (hole < 0)
			return kernel_io_error(bo, "checksum (seek)", data);
		for (pos = data & ~7ULL; pos < (uint64_t)hole && pos < end;) {
			uint64_t todo = (end < (uint64_t)hole ? end : (uint64_t)hole) - pos;
			size_t len = todo < EMU_KERNEL_CHUNK ? todo : EMU_KERNEL_CHUNK;

			len = (len + 7) & ~7UL;
			if (pread(bo->memfd, chunk, len, pos) != (ssize_t)len)
				return kernel_io_error(bo, "checksum (read)", pos);
			*sum += kfdemu_checksum(chunk, len, pos);
			pos += len;
		}
	}
	return 0;
}

static int execute_kernel(const struct emu_bo *bo, const struct kfdemu_kernel *kernel,
			  uint64_t *result)
{
	uint32_t *chunk = malloc(EMU_KERNEL_CHUNK);
	int ret = -EINVAL;

	if (!chunk)
		return -ENOMEM;
	*result = 0;
	if (kernel->op == KFDEMU_KERNEL_FILL)
		ret = kernel_fill(bo, kernel->offset, kernel->length, kernel->arg, chunk);
	else if (kernel->op == KFDEMU_KERNEL_ADD)
		ret = kernel_add(bo, kernel->offset, kernel->length, kernel->arg, chunk);
	else if (kernel->op == KFDEMU_KERNEL_CHECKSUM)
		ret = kernel_checksum(bo, kernel->offset, kernel->length, result, chunk);
	free(chunk);
	return ret;
}

static int check_kernel(const struct emu_bo *bo, const struct kfdemu_kernel *kernel)
{
	if (kernel->op < KFDEMU_KERNEL_FILL || kernel->op > KFDEMU_KERNEL_CHECKSUM) {
		emu_err("BO %#llx: unknown kernel %u", (unsigned long long)bo->handle, kernel->op);
		return -EINVAL;
	}
	if (kernel->offset % 8 || kernel->length % 8 || kernel->offset > bo->size ||
	    kernel->length > bo->size - kernel->offset) {
		emu_err("BO %#llx: kernel range %#llx+%#llx outside %#llx bytes or unaligned",
			(unsigned long long)bo->handle, (unsigned long long)kernel->offset,
			(unsigned long long)kernel->length, (unsigned long long)bo->size);
		return -EINVAL;
	}
	return 0;
}

/* Kernels wait while the process's queues are evicted: between PROCESS_INFO and UNPAUSE,
 * and from RESTORE until RESUME, as KFD keeps a process's queues off the hardware. */
static int start_kernel(struct emu_process *proc, const struct kfdemu_kernel *kernel,
			struct emu_bo **bo_out)
{
	struct emu_bo *bo;
	int ret;

	while ((proc->paused || proc->awaiting_resume) && !proc->dead)
		pthread_cond_wait(&emu_state_changed, &emu_lock);
	ret = check_alive(proc);
	if (ret)
		return ret;
	bo = process_find_bo(proc, kernel->handle, NULL);
	if (!bo)
		return -EINVAL;
	ret = check_kernel(bo, kernel);
	if (ret)
		return ret;
	bo->refs++;
	proc->running_kernels++;
	*bo_out = bo;
	return 0;
}

int emu_run_kernel(struct emu_process *proc, const struct kfdemu_kernel *kernel,
		   uint64_t *result)
{
	struct emu_bo *bo;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = start_kernel(proc, kernel, &bo);
	pthread_mutex_unlock(&emu_lock);
	if (ret)
		return ret;

	/* Outside the lock: other processes keep running while this one computes. */
	ret = execute_kernel(bo, kernel, result);

	pthread_mutex_lock(&emu_lock);
	proc->running_kernels--;
	bo_put(bo);
	pthread_cond_broadcast(&emu_state_changed);
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- CRIU ops ---- */

struct criu_reply {
	char *payload;
	uint64_t size;
	int *fds;
	uint32_t nr_fds;
};

static uint64_t priv_data_size(uint32_t num_bos)
{
	return sizeof(struct emu_priv_header) + (uint64_t)num_bos * sizeof(struct emu_priv_bo);
}

static int reply_alloc(struct criu_reply *reply, uint64_t size, uint32_t nr_fds)
{
	reply->payload = calloc(1, size);
	reply->fds = calloc(nr_fds + 1, sizeof(int));
	if (!reply->payload || !reply->fds) {
		emu_err("no memory for a %llu-byte CRIU reply", (unsigned long long)size);
		return -ENOMEM;
	}
	reply->size = size;
	return 0;
}

static void reply_discard(struct criu_reply *reply)
{
	for (uint32_t i = 0; i < reply->nr_fds; i++)
		close(reply->fds[i]);
	free(reply->fds);
	free(reply->payload);
	memset(reply, 0, sizeof(*reply));
}

/* Hand the BO's memfd out as its dma-buf: the bucket names it by index into the fds. */
static int reply_add_bo_fd(struct criu_reply *reply, const struct emu_bo *bo,
			   struct kfd_criu_bo_bucket *bucket)
{
	int ret = dup_bo_fd(bo, &reply->fds[reply->nr_fds]);

	if (ret)
		return ret;
	bucket->dmabuf_fd = reply->nr_fds++;
	return 0;
}

static void wait_for_kernels(struct emu_process *proc)
{
	while (proc->running_kernels)
		pthread_cond_wait(&emu_state_changed, &emu_lock);
}

static int criu_process_info(struct emu_process *proc, struct kfd_ioctl_criu_args *args)
{
	proc->paused = true;
	wait_for_kernels(proc);
	args->num_devices = proc->nr_gpu_maps;
	args->num_bos = proc->nr_bos;
	/* Queues, events and SVM ranges are not emulated. */
	args->num_objects = 0;
	args->priv_data_size = priv_data_size(proc->nr_bos);
	args->pid = proc->pid;
	emu_info("pid %u: PROCESS_INFO: paused, %u devices, %u BOs", proc->pid, args->num_devices,
		 args->num_bos);
	return 0;
}

static void checkpoint_devices(struct emu_process *proc, struct kfd_criu_device_bucket *devices)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++) {
		devices[i].user_gpu_id = proc->gpu_map[i].user_gpu_id;
		devices[i].actual_gpu_id = proc->gpu_map[i].gpu->gpu_id;
	}
}

static int checkpoint_bos(struct emu_process *proc, struct kfd_criu_bo_bucket *bos,
			  struct emu_priv_bo *priv_bos, struct criu_reply *reply)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		struct emu_bo *bo = proc->bos[i];
		int ret;

		bos[i].addr = bo->va_addr;
		bos[i].size = bo->size;
		bos[i].offset = bo->mmap_offset;
		bos[i].gpu_id = bo->user_gpu_id;
		bos[i].alloc_flags = bo->alloc_flags;
		priv_bos[i].idr = bo->idr;
		priv_bos[i].user_gpu_id = bo->user_gpu_id;
		ret = reply_add_bo_fd(reply, bo, &bos[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int criu_checkpoint(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			   struct criu_reply *reply)
{
	struct kfd_criu_device_bucket *devices;
	struct emu_priv_header *priv;
	struct kfd_criu_bo_bucket *bos;
	int ret;

	if (!proc->paused) {
		emu_err("pid %u: CHECKPOINT before PROCESS_INFO", proc->pid);
		return -EINVAL;
	}
	if (args->num_devices != proc->nr_gpu_maps || args->num_bos != proc->nr_bos ||
	    args->priv_data_size != priv_data_size(proc->nr_bos)) {
		emu_err("pid %u: CHECKPOINT sized for %u devices, %u BOs, %llu bytes; the process has %u, %u, %llu",
			proc->pid, args->num_devices, args->num_bos,
			(unsigned long long)args->priv_data_size, proc->nr_gpu_maps, proc->nr_bos,
			(unsigned long long)priv_data_size(proc->nr_bos));
		return -EINVAL;
	}
	ret = reply_alloc(reply,
			  sizeof(*args) + proc->nr_gpu_maps * sizeof(*devices) +
				  proc->nr_bos * sizeof(*bos) + args->priv_data_size,
			  proc->nr_bos);
	if (ret)
		return ret;
	devices = (void *)(reply->payload + sizeof(*args));
	bos = (void *)(devices + proc->nr_gpu_maps);
	priv = (void *)(bos + proc->nr_bos);
	*priv = (struct emu_priv_header){ EMU_PRIV_MAGIC, EMU_PRIV_VERSION, proc->nr_bos,
					  proc->nr_gpu_maps };
	checkpoint_devices(proc, devices);
	ret = checkpoint_bos(proc, bos, (void *)(priv + 1), reply);
	if (ret)
		return ret;
	memcpy(reply->payload, args, sizeof(*args));
	emu_info("pid %u: CHECKPOINT: %u BOs handed out", proc->pid, proc->nr_bos);
	return 0;
}

static int criu_unpause(struct emu_process *proc)
{
	if (!proc->paused) {
		emu_err("pid %u: UNPAUSE of a process that is not paused", proc->pid);
		return -EINVAL;
	}
	proc->paused = false;
	pthread_cond_broadcast(&emu_state_changed);
	emu_info("pid %u: UNPAUSE", proc->pid);
	return 0;
}

static int criu_resume(const struct kfd_ioctl_criu_args *args)
{
	struct emu_process *proc = process_lookup(args->pid);

	if (!proc) {
		emu_err("RESUME: no live process with pid %u", args->pid);
		return -ESRCH;
	}
	if (!proc->awaiting_resume) {
		emu_err("RESUME: pid %u was not restored or is already running", args->pid);
		return -EINVAL;
	}
	proc->awaiting_resume = false;
	pthread_cond_broadcast(&emu_state_changed);
	emu_info("pid %u: RESUME", args->pid);
	return 0;
}

/* The restore arrays as they sit in the request, checked against each other. */
struct restore_input {
	const struct kfd_criu_device_bucket *devices;
	const struct kfd_criu_bo_bucket *bos;
	const struct emu_priv_bo *priv_bos;
};

static int parse_restore_input(uint32_t pid, const struct kfd_ioctl_criu_args *args,
			       const void *request, uint64_t request_size,
			       struct restore_input *in)
{
	const char *pos = (const char *)request + sizeof(*args);
	const struct emu_priv_header *priv;
	uint64_t expected;

	expected = sizeof(*args) + (uint64_t)args->num_devices * sizeof(*in->devices) +
		   (uint64_t)args->num_bos * sizeof(*in->bos) + args->priv_data_size;
	if (request_size != expected || args->priv_data_size != priv_data_size(args->num_bos)) {
		emu_err("pid %u: RESTORE: %llu request bytes with %llu bytes of private data for %u BOs",
			pid, (unsigned long long)request_size,
			(unsigned long long)args->priv_data_size, args->num_bos);
		return -EINVAL;
	}
	in->devices = (const void *)pos;
	in->bos = (const void *)(in->devices + args->num_devices);
	priv = (const void *)(in->bos + args->num_bos);
	in->priv_bos = (const void *)(priv + 1);
	if (priv->magic != EMU_PRIV_MAGIC || priv->version != EMU_PRIV_VERSION ||
	    priv->num_bos != args->num_bos || priv->num_devices != args->num_devices) {
		emu_err("pid %u: RESTORE: private data is not this emulator's (magic %#x version %u) or disagrees with the buckets",
			pid, priv->magic, priv->version);
		return -EINVAL;
	}
	return 0;
}

static struct emu_gpu *find_gpu(uint32_t gpu_id)
{
	for (unsigned int i = 0; i < emu_nr_gpus; i++)
		if (emu_gpus[i].gpu_id == gpu_id)
			return &emu_gpus[i];
	return NULL;
}

static int restore_gpu_map(struct emu_process *proc, const struct kfd_ioctl_criu_args *args,
			   const struct kfd_criu_device_bucket *devices)
{
	if (args->num_devices > EMU_MAX_GPUS) {
		emu_err("pid %u: RESTORE: %u devices, the emulator has %u", proc->pid,
			args->num_devices, emu_nr_gpus);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < args->num_devices; i++) {
		struct emu_gpu *gpu = find_gpu(devices[i].actual_gpu_id);

		for (uint32_t j = 0; j < i; j++) {
			if (devices[j].user_gpu_id == devices[i].user_gpu_id ||
			    devices[j].actual_gpu_id == devices[i].actual_gpu_id)
				gpu = NULL;
		}
		if (!gpu) {
			emu_err("pid %u: RESTORE: device bucket %u (user %#x -> actual %#x) names no emulated GPU or repeats one",
				proc->pid, i, devices[i].user_gpu_id, devices[i].actual_gpu_id);
			return -EINVAL;
		}
		proc->gpu_map[i].user_gpu_id = devices[i].user_gpu_id;
		proc->gpu_map[i].gpu = gpu;
	}
	proc->nr_gpu_maps = args->num_devices;
	return 0;
}

static int restore_one_bo(struct emu_process *proc, const struct kfd_criu_bo_bucket *bucket,
			  const struct emu_priv_bo *priv_bo, struct emu_bo **bo)
{
	struct emu_gpu *gpu;
	int ret;

	ret = check_bo_shape(proc->pid, bucket->alloc_flags, bucket->addr, bucket->size);
	if (ret)
		return ret;
	if (priv_bo->user_gpu_id != bucket->gpu_id || !priv_bo->idr) {
		emu_err("pid %u: RESTORE: BO at va %#llx: private data (gpu %#x, id %u) disagrees with its bucket (gpu %#x)",
			proc->pid, (unsigned long long)bucket->addr, priv_bo->user_gpu_id,
			priv_bo->idr, bucket->gpu_id);
		return -EINVAL;
	}
	gpu = process_gpu(proc, bucket->gpu_id);
	if (!gpu)
		return -EINVAL;
	if (!va_range_free(proc, bucket->gpu_id, bucket->addr, bucket->size) ||
	    lookup_bo(proc, (uint64_t)bucket->gpu_id << 32 | priv_bo->idr, NULL)) {
		emu_err("pid %u: RESTORE: BO %u on gpu %#x at va %#llx collides with another",
			proc->pid, priv_bo->idr, bucket->gpu_id, (unsigned long long)bucket->addr);
		return -EINVAL;
	}
	ret = bo_create(bucket->gpu_id, gpu, priv_bo->idr, bucket->alloc_flags, bucket->addr,
			bucket->size, bo);
	if (ret)
		return ret;
	ret = process_add_bo(proc, *bo);
	if (ret) {
		emu_err("pid %u: no memory for the BO table", proc->pid);
		bo_release(*bo);
	}
	return ret;
}

/* A failed RESTORE leaves the process as it found it: no BOs, its own GPU ids. */
static void undo_restore(struct emu_process *proc)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++)
		bo_release(proc->bos[i]);
	proc->nr_bos = 0;
	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		proc->gpu_map[i].user_gpu_id = emu_gpus[i].gpu_id;
		proc->gpu_map[i].gpu = &emu_gpus[i];
	}
	proc->nr_gpu_maps = emu_nr_gpus;
}

static int restore_bos(struct emu_process *proc, const struct kfd_ioctl_criu_args *args,
		       const struct restore_input *in, struct criu_reply *reply)
{
	struct kfd_criu_bo_bucket *out_bos = (void *)(reply->payload + sizeof(*args));
	uint32_t max_idr = 0;

	memcpy(out_bos, in->bos, args->num_bos * sizeof(*out_bos));
	for (uint32_t i = 0; i < args->num_bos; i++) {
		struct emu_bo *bo;
		int ret;

		ret = restore_one_bo(proc, &in->bos[i], &in->priv_bos[i], &bo);
		if (!ret)
			ret = reply_add_bo_fd(reply, bo, &out_bos[i]);
		if (ret)
			return ret;
		out_bos[i].restored_offset = bo->mmap_offset;
		if (bo->idr > max_idr)
			max_idr = bo->idr;
	}
	proc->next_idr = max_idr + 1;
	return 0;
}

static int check_restorable(struct emu_process *proc)
{
	if (!proc->nr_bos && !proc->restored)
		return 0;
	emu_err("pid %u: RESTORE into a process that already has BOs or was restored", proc->pid);
	return -EINVAL;
}

static int criu_restore(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			const void *request, uint64_t request_size, struct criu_reply *reply)
{
	struct restore_input in;
	int ret;

	ret = check_restorable(proc);
	if (!ret)
		ret = parse_restore_input(proc->pid, args, request, request_size, &in);
	if (!ret)
		ret = reply_alloc(reply, sizeof(*args) + args->num_bos * sizeof(*in.bos),
				  args->num_bos);
	if (ret)
		return ret;
	ret = restore_gpu_map(proc, args, in.devices);
	if (!ret)
		ret = restore_bos(proc, args, &in, reply);
	if (ret) {
		undo_restore(proc);
		return ret;
	}
	/* Queues stay evicted until RESUME: the restored task must not compute before. */
	proc->restored = true;
	proc->awaiting_resume = true;
	memcpy(reply->payload, args, sizeof(*args));
	emu_info("pid %u: RESTORE: %u BOs on %u devices re-created", proc->pid, args->num_bos,
		 args->num_devices);
	return 0;
}

static int dispatch_criu_op(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			    const void *request, uint64_t request_size, struct criu_reply *reply)
{
	int ret;

	/* RESUME names its process by pid: the caller is the checkpoint tool, not the task. */
	if (args->op == KFD_CRIU_OP_RESUME)
		return criu_resume(args);
	ret = check_alive(proc);
	if (ret)
		return ret;
	switch (args->op) {
	case KFD_CRIU_OP_PROCESS_INFO:
		return criu_process_info(proc, args);
	case KFD_CRIU_OP_CHECKPOINT:
		return criu_checkpoint(proc, args, reply);
	case KFD_CRIU_OP_UNPAUSE:
		return criu_unpause(proc);
	case KFD_CRIU_OP_RESTORE:
		return criu_restore(proc, args, request, request_size, reply);
	}
	emu_err("pid %u: unknown CRIU op %u", proc->pid, args->op);
	return -EINVAL;
}

int emu_criu_op(struct emu_process *proc, const void *request, uint64_t request_size,
		void **reply_payload, uint64_t *reply_size, int **reply_fds, uint32_t *nr_reply_fds)
{
	struct kfd_ioctl_criu_args args;
	struct criu_reply reply = {};
	int ret;

	if (request_size < sizeof(args)) {
		emu_err("CRIU_OP: %llu-byte request, shorter than kfd_ioctl_criu_args",
			(unsigned long long)request_size);
		return -EINVAL;
	}
	memcpy(&args, request, sizeof(args));
	emu_debug("pid %u: CRIU op %s", proc->pid, criu_op_name(args.op));
	pthread_mutex_lock(&emu_lock);
	ret = dispatch_criu_op(proc, &args, request, request_size, &reply);
	pthread_mutex_unlock(&emu_lock);
	if (!ret && !reply.payload)
		ret = reply_alloc(&reply, sizeof(args), 0);
	if (ret) {
		reply_discard(&reply);
		return ret;
	}
	if (args.op != KFD_CRIU_OP_CHECKPOINT && args.op != KFD_CRIU_OP_RESTORE)
		memcpy(reply.payload, &args, sizeof(args));
	*reply_payload = reply.payload;
	*reply_size = reply.size;
	*reply_fds = reply.fds;
	*nr_reply_fds = reply.nr_fds;
	return 0;
}
