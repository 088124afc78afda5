/*
 * The KFD EMULATOR's device: GPUs and their BO spaces (apertures), per-client processes,
 * buffer objects of every KFD kind (VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP), the memory
 * the kernels work on, and the copy engine (the "SDMA" criu's plugin uses through
 * dma-bufs). All state is under emu_lock. Not a GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "amdgpu_file_io.h"
#include "emu_state.h"
#include "libkfdemu.h"

#define EMU_VA_BASE (1ULL << 32)
#define EMU_VA_ALIGN (2ULL << 20)
/* Sparse memfds: only what is written costs memory. */
#define EMU_APERTURE_SIZE (1ULL << 40)
#define EMU_KFD_SPACE_SIZE (1ULL << 38)
/* What the copy engine moves per read and write. */
#define EMU_COPY_CHUNK (4ULL << 20)

struct emu_gpu emu_gpus[EMU_MAX_GPUS];
unsigned int emu_nr_gpus;

pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t emu_state_changed = PTHREAD_COND_INITIALIZER;
static struct emu_process *emu_processes; /* newest first */
/* BO mmap offsets are never reused, so a restored BO always gets a new one, as on KFD. */
static uint64_t next_mmap_offset = 1ULL << 32;

static uint64_t round_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) / align * align;
}

static int sparse_memfd(const char *name, uint64_t size, int *fd)
{
	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd >= 0 && !ftruncate(*fd, size))
		return 0;
	emu_err("cannot make the sparse memfd %s: %s", name, strerror(errno));
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return -ENOMEM;
}

int emu_device_init(void)
{
	char name[64];
	int ret;

	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		snprintf(name, sizeof(name), "kfdemu-renderD%u", emu_gpus[i].render_minor);
		ret = sparse_memfd(name, EMU_APERTURE_SIZE, &emu_gpus[i].aperture_fd);
		if (ret)
			return ret;
	}
	return emu_engine_start();
}

struct emu_gpu *emu_find_gpu(uint32_t gpu_id)
{
	for (unsigned int i = 0; i < emu_nr_gpus; i++)
		if (emu_gpus[i].gpu_id == gpu_id)
			return &emu_gpus[i];
	return NULL;
}

struct emu_gpu *emu_gpu_by_minor(uint32_t minor)
{
	for (unsigned int i = 0; i < emu_nr_gpus; i++)
		if (emu_gpus[i].render_minor == minor)
			return &emu_gpus[i];
	return NULL;
}

void emu_get_gpu_info(struct kfdemu_gpu_info *gpus)
{
	pthread_mutex_lock(&emu_lock);
	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		gpus[i] = (struct kfdemu_gpu_info){ .gpu_id = emu_gpus[i].gpu_id,
						    .node_id = emu_gpus[i].node_id,
						    .device_id = emu_gpus[i].device_id,
						    .render_minor = emu_gpus[i].render_minor,
						    .vram_size = emu_gpus[i].vram_size,
						    .vram_used = emu_gpus[i].vram_used };
	}
	pthread_mutex_unlock(&emu_lock);
}

uint64_t emu_kfd_offset(uint64_t type, const struct emu_gpu *gpu)
{
	return KFDEMU_MMAP_OFFSET(type, gpu ? gpu->gpu_id : 0);
}

/* ---- memory: apertures, /dev/kfd space, process memory ---- */

void emu_bo_mem(const struct emu_bo *bo, uint64_t offset, struct emu_mem *mem)
{
	*mem = (struct emu_mem){ .fd = -1, .pid = bo->proc->pid };
	if (bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
		mem->addr = bo->user_addr + offset;
	} else if (bo->alloc_flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT)) {
		mem->fd = bo->gpu->aperture_fd;
		mem->base = bo->mmap_offset + offset;
	} else {
		mem->fd = bo->proc->kfd_fd;
		mem->base = bo->mmap_offset + offset;
	}
}

static int process_vm_io(const struct emu_mem *mem, void *buf, uint64_t len, uint64_t offset,
			 bool write)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = {.iov_base = (void *)(uintptr_t)(mem->addr + offset), .iov_len = len};
	ssize_t done;

	done = write ? process_vm_writev(mem->pid, &local, 1, &remote, 1, 0) :
		       process_vm_readv(mem->pid, &local, 1, &remote, 1, 0);
	if (done == (ssize_t)len)
		return 0;
	emu_err("pid %u: cannot %s %llu bytes of its memory at %#llx: %s", mem->pid,
		write ? "write" : "read", (unsigned long long)len,
		(unsigned long long)(mem->addr + offset), done < 0 ? strerror(errno) : "short");
	return -EFAULT;
}

static int file_io(const struct emu_mem *mem, void *buf, uint64_t len, uint64_t offset, bool write)
{
	int ret = amdgpu_file_io(mem->fd, buf, len, mem->base + offset, !write);

	if (ret)
		emu_err("device memory at %#llx: %s failed: %s",
			(unsigned long long)(mem->base + offset), write ? "write" : "read",
			ret == -ENODATA ? "short" : strerror(-ret));
	return ret;
}

int emu_mem_read(const struct emu_mem *mem, void *buf, uint64_t len, uint64_t offset)
{
	return mem->fd < 0 ? process_vm_io(mem, buf, len, offset, false) :
			     file_io(mem, buf, len, offset, false);
}

int emu_mem_write(const struct emu_mem *mem, const void *buf, uint64_t len, uint64_t offset)
{
	return mem->fd < 0 ? process_vm_io(mem, (void *)buf, len, offset, true) :
			     file_io(mem, (void *)buf, len, offset, true);
}

/* The next data at or after pos (file-backed memory: holes read as zeros), or len. */
static uint64_t next_data_in(const struct emu_mem *mem, uint64_t pos, uint64_t end)
{
	off_t data;

	if (mem->fd < 0)
		return pos;
	data = lseek(mem->fd, mem->base + pos, SEEK_DATA);
	if (data < 0 || (uint64_t)data >= mem->base + end)
		return end;
	return (uint64_t)data - mem->base;
}

int emu_kernel_step(uint32_t op, uint32_t arg, const struct emu_mem *mem, uint64_t offset,
		    uint64_t len, uint64_t *sum)
{
	uint64_t end = offset + len, pos = offset, n;
	uint32_t *chunk = malloc(EMU_STEP);
	int ret = 0;

	if (!chunk)
		return -ENOMEM;
	while (!ret && pos < end) {
		/* Holes read as zeros and add nothing to a checksum: skip them. */
		if (op == KFDEMU_KERNEL_CHECKSUM)
			pos = next_data_in(mem, pos, end) & ~7ULL;
		if (pos >= end)
			break;
		n = end - pos < EMU_STEP ? end - pos : EMU_STEP;
		if (op == KFDEMU_KERNEL_FILL) {
			for (uint64_t i = 0; i < n / 4; i++)
				chunk[i] = arg;
			ret = emu_mem_write(mem, chunk, n, pos);
		} else if (op == KFDEMU_KERNEL_ADD) {
			ret = emu_mem_read(mem, chunk, n, pos);
			for (uint64_t i = 0; !ret && i < n / 4; i++)
				chunk[i] += arg;
			if (!ret)
				ret = emu_mem_write(mem, chunk, n, pos);
		} else if (op == KFDEMU_KERNEL_CHECKSUM) {
			ret = emu_mem_read(mem, chunk, n, pos);
			if (!ret)
				*sum += kfdemu_checksum(chunk, n, pos);
		}
		pos += n;
	}
	free(chunk);
	return ret;
}

/* Whether /proc/PID/maps covers [addr, addr + len) with mappings, without a gap. */
int emu_process_range_mapped(uint32_t pid, uint64_t addr, uint64_t len)
{
	unsigned long long start, end;
	uint64_t covered = addr;
	char path[64], line[512];
	FILE *maps;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	maps = fopen(path, "re");
	if (!maps) {
		emu_err("pid %u: cannot read its mappings: %s", pid, strerror(errno));
		return -ESRCH;
	}
	while (covered < addr + len && fgets(line, sizeof(line), maps)) {
		if (sscanf(line, "%llx-%llx", &start, &end) != 2)
			continue;
		if (start <= covered && end > covered)
			covered = end;
	}
	fclose(maps);
	if (covered >= addr + len)
		return 0;
	emu_err("pid %u: memory %#llx+%#llx is not mapped (a gap at %#llx)", pid,
		(unsigned long long)addr, (unsigned long long)len, (unsigned long long)covered);
	return -EFAULT;
}

/* ---- buffer objects ---- */

static void bo_unplace(struct emu_bo *bo)
{
	if (!(bo->alloc_flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT)))
		return;
	/* Give the memory back; the offset is never handed out again. */
	if (fallocate(bo->gpu->aperture_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      bo->mmap_offset, bo->size))
		emu_warn("BO %#llx: cannot free its memory: %s", (unsigned long long)bo->handle,
			 strerror(errno));
}

void emu_bo_put(struct emu_bo *bo)
{
	if (--bo->refs)
		return;
	bo_unplace(bo);
	if (bo->dmabuf_fd >= 0)
		close(bo->dmabuf_fd);
	free(bo);
}

/* Drop the process's reference; a kernel or copy still running on it keeps the memory. */
void emu_bo_release(struct emu_bo *bo)
{
	if (bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
		bo->gpu->vram_used -= bo->size;
	emu_bo_put(bo);
}

static int place_bo(struct emu_bo *bo, struct emu_gpu_map *map, uint32_t pid)
{
	struct emu_gpu *gpu = map->gpu;
	uint32_t flags = bo->alloc_flags;

	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL) {
		if (bo->size != KFDEMU_DOORBELL_SLICE) {
			emu_err("pid %u: a doorbell BO is the process's slice, %llu bytes, not %llu",
				pid, KFDEMU_DOORBELL_SLICE, (unsigned long long)bo->size);
			return -EINVAL;
		}
		bo->mmap_offset = emu_kfd_offset(KFDEMU_MMAP_TYPE_DOORBELL, gpu);
		return 0;
	}
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) {
		if (bo->size != KFDEMU_MMIO_PAGE_SIZE) {
			emu_err("pid %u: an MMIO_REMAP BO is one page, not %llu bytes", pid,
				(unsigned long long)bo->size);
			return -EINVAL;
		}
		bo->mmap_offset = emu_kfd_offset(KFDEMU_MMAP_TYPE_MMIO, gpu);
		return 0;
	}
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
		if (!bo->user_addr || bo->user_addr % EMU_PAGE_SIZE) {
			emu_err("pid %u: userptr BO at user address %#llx: not page aligned", pid,
				(unsigned long long)bo->user_addr);
			return -EINVAL;
		}
		return 0;
	}
	if ((flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) && gpu->vram_used + bo->size > gpu->vram_size) {
		emu_err("gpu %#x: no room for a %llu-byte VRAM BO (%llu of %llu used)", gpu->gpu_id,
			(unsigned long long)bo->size, (unsigned long long)gpu->vram_used,
			(unsigned long long)gpu->vram_size);
		return -ENOMEM;
	}
	if (next_mmap_offset + bo->size > EMU_APERTURE_SIZE) {
		emu_err("gpu %#x: the emulator's BO offsets are used up", gpu->gpu_id);
		return -ENOMEM;
	}
	bo->mmap_offset = next_mmap_offset;
	next_mmap_offset += round_up(bo->size, EMU_PAGE_SIZE);
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
		gpu->vram_used += bo->size;
	return 0;
}

int emu_bo_create(struct emu_process *proc, struct emu_gpu_map *map, uint32_t idr,
		  uint32_t flags, uint64_t va, uint64_t size, uint64_t user_addr,
		  struct emu_bo **bo_out)
{
	struct emu_bo *bo = calloc(1, sizeof(*bo));
	int ret;

	if (!bo)
		return -ENOMEM;
	*bo = (struct emu_bo){ .proc = proc, .handle = (uint64_t)map->user_gpu_id << 32 | idr,
			       .va_addr = va, .size = size, .user_addr = user_addr, .idr = idr,
			       .user_gpu_id = map->user_gpu_id, .alloc_flags = flags,
			       .gpu = map->gpu, .dmabuf_fd = -1, .refs = 1 };
	ret = place_bo(bo, map, proc->pid);
	if (ret) {
		free(bo);
		return ret;
	}
	*bo_out = bo;
	return 0;
}

int emu_process_add_bo(struct emu_process *proc, struct emu_bo *bo)
{
	if (proc->nr_bos == proc->bos_capacity) {
		uint32_t capacity = proc->bos_capacity ? proc->bos_capacity * 2 : 64;
		struct emu_bo **grown = realloc(proc->bos, capacity * sizeof(*grown));

		if (!grown) {
			emu_err("pid %u: no memory for the BO table", proc->pid);
			return -ENOMEM;
		}
		proc->bos = grown;
		proc->bos_capacity = capacity;
	}
	proc->bos[proc->nr_bos++] = bo;
	return 0;
}

struct emu_bo *emu_lookup_bo(struct emu_process *proc, uint64_t handle, uint32_t *index)
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
	struct emu_bo *bo = emu_lookup_bo(proc, handle, index);

	if (!bo)
		emu_err("pid %u: no BO with handle %#llx", proc->pid, (unsigned long long)handle);
	return bo;
}

struct emu_bo *emu_bo_at_va(struct emu_process *proc, uint32_t user_gpu_id, uint64_t va,
			    uint64_t len)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		struct emu_bo *bo = proc->bos[i];

		if (bo->user_gpu_id == user_gpu_id && va >= bo->va_addr &&
		    va - bo->va_addr <= bo->size && len <= bo->size - (va - bo->va_addr))
			return bo;
	}
	return NULL;
}

struct emu_gpu_map *emu_process_gpu(struct emu_process *proc, uint32_t user_gpu_id)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++)
		if (proc->gpu_map[i].user_gpu_id == user_gpu_id)
			return &proc->gpu_map[i];
	emu_err("pid %u: no GPU with id %#x", proc->pid, user_gpu_id);
	return NULL;
}

bool emu_va_range_free(struct emu_process *proc, uint32_t user_gpu_id, uint64_t va,
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

int emu_check_bo_shape(uint32_t pid, uint32_t flags, uint64_t va, uint64_t size)
{
	uint32_t kind = flags & EMU_BO_KINDS;

	if (!kind || (kind & (kind - 1))) {
		emu_err("pid %u: BO flags %#x: exactly one of VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP",
			pid, flags);
		return -EINVAL;
	}
	if (!size || size % EMU_PAGE_SIZE || va % EMU_PAGE_SIZE || va + size < va) {
		emu_err("pid %u: bad BO shape: va %#llx size %#llx", pid, (unsigned long long)va,
			(unsigned long long)size);
		return -EINVAL;
	}
	return 0;
}

/* The dma-buf stand-in: an empty sealed memfd, recognised by its inode when handed back. */
int emu_bo_export(struct emu_bo *bo, int *fd)
{
	struct stat st;

	if (!(bo->alloc_flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT))) {
		emu_err("BO %#llx (flags %#x) has no dma-buf: only VRAM and GTT BOs do",
			(unsigned long long)bo->handle, bo->alloc_flags);
		return -EINVAL;
	}
	if (bo->dmabuf_fd < 0) {
		bo->dmabuf_fd = memfd_create("kfdemu-dmabuf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (bo->dmabuf_fd < 0 || fstat(bo->dmabuf_fd, &st) ||
		    fcntl(bo->dmabuf_fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
			emu_err("BO %#llx: cannot make its dma-buf: %s", (unsigned long long)bo->handle,
				strerror(errno));
			if (bo->dmabuf_fd >= 0)
				close(bo->dmabuf_fd);
			bo->dmabuf_fd = -1;
			return -ENOMEM;
		}
		bo->dmabuf_ino = st.st_ino;
	}
	*fd = fcntl(bo->dmabuf_fd, F_DUPFD_CLOEXEC, 0);
	if (*fd >= 0)
		return 0;
	emu_err("BO %#llx: cannot dup its dma-buf: %s", (unsigned long long)bo->handle,
		strerror(errno));
	return -errno;
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
	for (struct emu_process **link = &emu_processes; *link; link = &(*link)->next) {
		if (*link == proc) {
			*link = proc->next;
			return;
		}
	}
}

static void reset_gpu_maps(struct emu_process *proc)
{
	for (unsigned int i = 0; i < emu_nr_gpus; i++)
		proc->gpu_map[i] = (struct emu_gpu_map){ .user_gpu_id = emu_gpus[i].gpu_id,
							 .gpu = &emu_gpus[i] };
	proc->nr_gpu_maps = emu_nr_gpus;
}

/* Everything the process holds on the device goes; it keeps its /dev/kfd space. */
void emu_process_clear(struct emu_process *proc)
{
	/* A kernel or engine step still running uses its queues and BOs. */
	emu_wait_for_kernels(proc);
	while (proc->queues) {
		struct emu_queue *queue = proc->queues;

		proc->queues = queue->next;
		emu_queue_free(queue);
	}
	proc->nr_queues = 0;
	emu_events_free(proc);
	emu_svm_free_list(&proc->svm, &proc->nr_svm);
	emu_svm_free_list(&proc->svm_pending, &proc->nr_svm_pending);
	for (uint32_t i = 0; i < proc->nr_bos; i++)
		emu_bo_release(proc->bos[i]);
	proc->nr_bos = 0;
	reset_gpu_maps(proc);
}

/* The process is gone (as KFD frees a process's memory when its mm goes). */
static void process_kill(struct emu_process *proc)
{
	emu_info("pid %u: process gone, freeing %u BOs, %u queues, %u events", proc->pid,
		 proc->nr_bos, proc->nr_queues, proc->nr_events);
	emu_process_clear(proc);
	proc->dead = true;
	process_unlink(proc);
	pthread_cond_broadcast(&emu_state_changed);
}

static struct emu_process *process_new(uint32_t pid, int pidfd)
{
	struct emu_process *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	if (sparse_memfd("kfdemu-kfd", EMU_KFD_SPACE_SIZE, &proc->kfd_fd)) {
		free(proc);
		return NULL;
	}
	proc->pid = pid;
	proc->pidfd = pidfd;
	proc->next_idr = 1;
	reset_gpu_maps(proc);
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
		close(proc->kfd_fd);
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

struct emu_process *emu_process_lookup(uint32_t pid)
{
	return process_lookup(pid);
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
int emu_check_alive(struct emu_process *proc)
{
	if (!proc->dead && process_has_exited(proc))
		process_kill(proc);
	if (!proc->dead)
		return 0;
	emu_err("pid %u: the process is gone", proc->pid);
	return -ESRCH;
}

void emu_wait_for_kernels(struct emu_process *proc)
{
	while (proc->running_kernels)
		pthread_cond_wait(&emu_state_changed, &emu_lock);
}

/* ---- render nodes ---- */

/* Which process's GPU has its VM bound to this render node file; NULL if none. */
static struct emu_gpu_map *find_binding(uint64_t drm_ino, struct emu_process **owner)
{
	for (struct emu_process *proc = emu_processes; proc; proc = proc->next) {
		for (uint32_t i = 0; !proc->dead && i < proc->nr_gpu_maps; i++) {
			if (proc->gpu_map[i].drm_ino != drm_ino)
				continue;
			if (owner)
				*owner = proc;
			return &proc->gpu_map[i];
		}
	}
	return NULL;
}

int emu_render_identify(int fd, const struct emu_gpu *gpu, uint32_t pid, uint64_t *ino)
{
	uint32_t minor, owner;
	struct stat st;

	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
	    emu_conn_find_render(st.st_ino, &minor, &owner)) {
		emu_err("pid %u: the fd given for gpu %#x is not an emulated render node", pid,
			gpu->gpu_id);
		return -EINVAL;
	}
	if (minor != gpu->render_minor || owner != pid) {
		emu_err("pid %u: render node renderD%u of pid %u given for gpu %#x (renderD%u)", pid,
			minor, owner, gpu->gpu_id, gpu->render_minor);
		return -EINVAL;
	}
	*ino = st.st_ino;
	return 0;
}

/* KFD's pdd takes the render node's VM once; the same file again is fine, another not. */
int emu_bind_render(struct emu_process *proc, struct emu_gpu_map *map, uint64_t ino)
{
	struct emu_process *owner;
	struct emu_gpu_map *bound = find_binding(ino, &owner);

	if (map->drm_ino == ino)
		return 0;
	if (map->drm_ino || (bound && bound != map)) {
		emu_err("pid %u: gpu %#x: %s", proc->pid, map->gpu->gpu_id,
			map->drm_ino ? "its VM is bound to another render node file already" :
				       "that render node file holds another process's VM");
		return -EBUSY;
	}
	map->drm_ino = ino;
	return 0;
}

int emu_acquire_vm(struct emu_process *proc, uint32_t gpu_id, int render_fd)
{
	struct emu_gpu_map *map;
	struct emu_gpu *gpu;
	uint64_t ino;
	int ret;

	/* The render node is looked up first: emu_lock is never taken around the connection list.
	 */
	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	map = ret ? NULL : emu_process_gpu(proc, gpu_id);
	gpu = map ? map->gpu : NULL;
	pthread_mutex_unlock(&emu_lock);
	if (!gpu)
		return ret ? ret : -EINVAL;
	ret = emu_render_identify(render_fd, gpu, proc->pid, &ino);
	if (ret)
		return ret;
	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	if (!ret)
		ret = emu_bind_render(proc, map, ino);
	pthread_mutex_unlock(&emu_lock);
	if (!ret)
		emu_info("pid %u: gpu %#x: VM bound to renderD%u", proc->pid, gpu_id, gpu->render_minor);
	return ret;
}

int emu_render_mmap_fd(uint64_t render_sock_ino, int *fd)
{
	struct emu_gpu_map *map;
	int ret = 0;

	pthread_mutex_lock(&emu_lock);
	map = find_binding(render_sock_ino, NULL);
	if (!map) {
		emu_err("render node file (socket inode %llu) holds no process's VM: ACQUIRE_VM or RESTORE it first",
			(unsigned long long)render_sock_ino);
		ret = -EACCES;
	} else {
		*fd = fcntl(map->gpu->aperture_fd, F_DUPFD_CLOEXEC, 0);
		if (*fd < 0)
			ret = -errno;
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

int emu_kfd_mmap_fd(struct emu_process *proc, int *fd)
{
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	if (!ret) {
		*fd = fcntl(proc->kfd_fd, F_DUPFD_CLOEXEC, 0);
		if (*fd < 0)
			ret = -errno;
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- BO calls ---- */

static int alloc_bo_locked(struct emu_process *proc, struct kfdemu_bo_info *info)
{
	struct emu_gpu_map *map;
	struct emu_bo *bo = NULL;
	int ret;

	ret = emu_check_alive(proc);
	if (!ret)
		ret = emu_check_bo_shape(proc->pid, info->alloc_flags, info->va_addr, info->size);
	if (ret)
		return ret;
	map = emu_process_gpu(proc, info->gpu_id);
	if (!map)
		return -EINVAL;
	/* KFD allocates through the GPU's VM, which ACQUIRE_VM made from a render node. */
	if (!map->drm_ino) {
		emu_err("pid %u: gpu %#x: no VM yet (ACQUIRE_VM with a render node first)", proc->pid,
			info->gpu_id);
		return -EINVAL;
	}
	if (!info->va_addr)
		info->va_addr = pick_va(proc, info->gpu_id);
	else if (!emu_va_range_free(proc, info->gpu_id, info->va_addr, info->size)) {
		emu_err("pid %u: VA %#llx+%#llx overlaps a BO on gpu %#x", proc->pid,
			(unsigned long long)info->va_addr, (unsigned long long)info->size,
			info->gpu_id);
		return -EINVAL;
	}
	if ((info->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) &&
	    emu_process_range_mapped(proc->pid, info->user_addr, info->size))
		return -EFAULT;
	ret = emu_bo_create(proc, map, proc->next_idr, info->alloc_flags, info->va_addr,
			    info->size, info->user_addr, &bo);
	if (!ret)
		ret = emu_process_add_bo(proc, bo);
	if (ret) {
		if (bo)
			emu_bo_release(bo);
		return ret;
	}
	proc->next_idr++;
	info->handle = bo->handle;
	info->mmap_offset = bo->mmap_offset;
	emu_debug("pid %u: BO %#llx: flags %#x, %llu bytes at va %#llx, offset %#llx", proc->pid,
		  (unsigned long long)bo->handle, bo->alloc_flags, (unsigned long long)bo->size,
		  (unsigned long long)bo->va_addr, (unsigned long long)bo->mmap_offset);
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
	ret = emu_check_alive(proc);
	if (!ret) {
		bo = process_find_bo(proc, handle, &index);
		ret = bo ? 0 : -EINVAL;
	}
	if (bo && bo->queue_users) {
		emu_err("pid %u: BO %#llx holds a queue's buffers: destroy the queue first", proc->pid,
			(unsigned long long)handle);
		ret = -EBUSY;
	} else if (bo) {
		proc->bos[index] = proc->bos[--proc->nr_bos];
		emu_bo_release(bo);
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

int emu_export_bo(struct emu_process *proc, uint64_t handle, int *fd)
{
	struct emu_bo *bo;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	if (!ret) {
		bo = process_find_bo(proc, handle, NULL);
		ret = bo ? emu_bo_export(bo, fd) : -EINVAL;
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- kernels run synchronously (RUN_KERNEL) ---- */

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
	if (bo->alloc_flags &
	    (KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)) {
		emu_err("BO %#llx: doorbells and MMIO registers are not memory for kernels",
			(unsigned long long)bo->handle);
		return -EINVAL;
	}
	return 0;
}

/*
 * Kernels wait while the process's queues are evicted: between PROCESS_INFO and UNPAUSE,
 * and from RESTORE until RESUME, as KFD keeps a process's queues off the hardware.
 */
static int start_kernel(struct emu_process *proc, const struct kfdemu_kernel *kernel,
			struct emu_bo **bo_out)
{
	struct emu_bo *bo;
	int ret;

	while ((proc->paused || proc->awaiting_resume) && !proc->dead)
		pthread_cond_wait(&emu_state_changed, &emu_lock);
	ret = emu_check_alive(proc);
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
	struct emu_mem mem;
	struct emu_bo *bo;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = start_kernel(proc, kernel, &bo);
	if (!ret)
		emu_bo_mem(bo, 0, &mem);
	pthread_mutex_unlock(&emu_lock);
	if (ret)
		return ret;

	/* Outside the lock: other processes keep running while this one computes. */
	*result = 0;
	ret = emu_kernel_step(kernel->op, kernel->arg, &mem, kernel->offset, kernel->length,
			      result);

	pthread_mutex_lock(&emu_lock);
	proc->running_kernels--;
	emu_bo_put(bo);
	pthread_cond_broadcast(&emu_state_changed);
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- the copy engine: what criu's plugin reaches through a BO's dma-buf ---- */

static struct emu_bo *bo_by_dmabuf(int fd)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return NULL;
	for (struct emu_process *proc = emu_processes; proc; proc = proc->next)
		for (uint32_t i = 0; !proc->dead && i < proc->nr_bos; i++)
			if (proc->bos[i]->dmabuf_fd >= 0 && proc->bos[i]->dmabuf_ino == st.st_ino)
				return proc->bos[i];
	return NULL;
}

int emu_identify_dmabuf(int fd, struct kfdemu_identity *id)
{
	struct emu_bo *bo;

	pthread_mutex_lock(&emu_lock);
	bo = bo_by_dmabuf(fd);
	if (bo)
		*id = (struct kfdemu_identity){ .kind = KFDEMU_FD_DMABUF, .pid = bo->proc->pid,
						.gpu_id = bo->gpu->gpu_id,
						.render_minor = bo->gpu->render_minor };
	pthread_mutex_unlock(&emu_lock);
	return bo ? 0 : -ENOENT;
}

static int get_copy_bo(int dmabuf_fd, uint64_t offset, uint64_t length, struct emu_bo **bo_out)
{
	struct emu_bo *bo;

	pthread_mutex_lock(&emu_lock);
	bo = bo_by_dmabuf(dmabuf_fd);
	if (bo && offset <= bo->size && length <= bo->size - offset)
		bo->refs++;
	pthread_mutex_unlock(&emu_lock);
	if (!bo) {
		emu_err("copy engine: the fd is not the dma-buf of a live BO");
		return -EBADF;
	}
	if (offset > bo->size || length > bo->size - offset) {
		emu_err("copy engine: BO %#llx: range %#llx+%#llx outside its %#llx bytes",
			(unsigned long long)bo->handle, (unsigned long long)offset,
			(unsigned long long)length, (unsigned long long)bo->size);
		return -EINVAL;
	}
	*bo_out = bo;
	return 0;
}

static void put_copy_bo(struct emu_bo *bo)
{
	pthread_mutex_lock(&emu_lock);
	emu_bo_put(bo);
	pthread_mutex_unlock(&emu_lock);
}

/*
 * Through a bounce buffer, one per connection thread, faulted in once: the aperture is
 * written with pwrite(), not through a mapping, since a page fault per 4 KiB of a fresh
 * mapping costs several times the copy itself (first-touch faults on this VM: ~15 us a
 * page, against ~0.25 us a page written).
 */
static pthread_key_t copy_buf_key;
static pthread_once_t copy_buf_once = PTHREAD_ONCE_INIT;

static void make_copy_buf_key(void)
{
	/* Freed when the connection's thread ends. */
	pthread_key_create(&copy_buf_key, free);
}

static char *copy_buf(void)
{
	char *buf;

	pthread_once(&copy_buf_once, make_copy_buf_key);
	buf = pthread_getspecific(copy_buf_key);
	if (!buf) {
		buf = malloc(EMU_COPY_CHUNK);
		if (buf && pthread_setspecific(copy_buf_key, buf)) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

static void file_error(const struct emu_bo *bo, const char *what, uint64_t pos, int ret)
{
	emu_err("copy engine: BO %#llx: cannot %s the file at %llu: %s",
		(unsigned long long)bo->handle, what, (unsigned long long)pos,
		ret == -ENODATA ? "it ends there" : strerror(-ret));
}

static int copy_chunks(const struct emu_bo *bo, const struct kfdemu_copy *req, int file_fd)
{
	struct emu_mem aperture;
	uint64_t pos = req->bo_offset, file_pos = req->file_offset, left = req->length;
	bool to_bo = req->dir == KFDEMU_COPY_TO_BO;
	char *buf = copy_buf();
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	emu_bo_mem(bo, 0, &aperture);
	while (!ret && left) {
		uint64_t chunk = left < EMU_COPY_CHUNK ? left : EMU_COPY_CHUNK;

		/* The device side (emu_mem_*) logs its own failures; the file side's are said here. */
		if (to_bo) {
			ret = amdgpu_file_io(file_fd, buf, chunk, file_pos, true);
			if (ret)
				file_error(bo, "read", file_pos, ret);
			else
				ret = emu_mem_write(&aperture, buf, chunk, pos);
		} else {
			ret = emu_mem_read(&aperture, buf, chunk, pos);
			if (!ret && (ret = amdgpu_file_io(file_fd, buf, chunk, file_pos, false)))
				file_error(bo, "write", file_pos, ret);
		}
		pos += chunk;
		file_pos += chunk;
		left -= chunk;
	}
	return ret;
}

int emu_copy(const struct kfdemu_copy *req, int dmabuf_fd, int file_fd)
{
	struct emu_bo *bo;
	int ret;

	if (req->dir != KFDEMU_COPY_TO_BO && req->dir != KFDEMU_COPY_FROM_BO) {
		emu_err("copy engine: unknown direction %u", req->dir);
		return -EINVAL;
	}
	ret = get_copy_bo(dmabuf_fd, req->bo_offset, req->length, &bo);
	if (ret)
		return ret;
	ret = copy_chunks(bo, req, file_fd);
	if (!ret)
		emu_debug("copy engine: BO %#llx: %llu bytes %s", (unsigned long long)bo->handle,
			  (unsigned long long)req->length,
			  req->dir == KFDEMU_COPY_TO_BO ? "written" : "read");
	put_copy_bo(bo);
	return ret;
}

int emu_next_data(int dmabuf_fd, struct kfdemu_next_data *req)
{
	struct emu_bo *bo;
	off_t data, hole;
	uint64_t base;
	int ret;

	ret = get_copy_bo(dmabuf_fd, 0, 0, &bo);
	if (ret)
		return ret;
	base = bo->mmap_offset;
	ret = -ENXIO;
	if (req->from < bo->size) {
		data = lseek(bo->gpu->aperture_fd, base + req->from, SEEK_DATA);
		hole = data < 0 ? -1 : lseek(bo->gpu->aperture_fd, data, SEEK_HOLE);
		if (data >= 0 && hole >= 0 && (uint64_t)data < base + bo->size) {
			req->start = data - base;
			req->end =
				(uint64_t)hole - base < bo->size ? (uint64_t)hole - base : bo->size;
			ret = 0;
		}
	}
	put_copy_bo(bo);
	return ret;
}

void emu_get_stats(struct kfdemu_stats *stats)
{
	struct emu_process *proc, *next;

	pthread_mutex_lock(&emu_lock);
	/* An exited process whose connections are not reaped yet is gone already. */
	for (proc = emu_processes; proc; proc = next) {
		next = proc->next;
		if (process_has_exited(proc))
			process_kill(proc);
	}
	for (proc = emu_processes; proc; proc = proc->next) {
		stats->nr_processes++;
		stats->nr_bos += proc->nr_bos;
		stats->nr_queues += proc->nr_queues;
		stats->nr_events += proc->nr_events;
		stats->nr_svm_ranges += proc->nr_svm + proc->nr_svm_pending;
	}
	for (unsigned int i = 0; i < emu_nr_gpus; i++)
		stats->vram_used += emu_gpus[i].vram_used;
	pthread_mutex_unlock(&emu_lock);
}

/* For the engine: every live process, under emu_lock. */
struct emu_process *emu_process_first(void)
{
	return emu_processes;
}
