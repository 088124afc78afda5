/*
 * The KFD EMULATOR's device state, shared by its parts: emu_device.c (processes, BOs,
 * memory, the copy engine), emu_queue.c (user-mode queues and their engine),
 * emu_event.c, emu_svm.c and emu_criu.c (the CRIU ops). Everything here is under
 * emu_lock. Not a GPU.
 */
#ifndef KFDEMU_EMU_STATE_H
#define KFDEMU_EMU_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "emu.h"

#define EMU_PAGE_SIZE 4096ULL
/* KFD's bound on how many GPUs one BO lists as mapped (MAX_GPU_INSTANCE). */
#define EMU_MAX_GPU_INSTANCE 8
#define EMU_MAX_QUEUES 128
/* The step the engine and the kernels take between looks at eviction. */
#define EMU_STEP (1ULL << 20)

extern pthread_mutex_t emu_lock;
/* Broadcast on unpause, resume, kernel or step completion, event change, process death. */
extern pthread_cond_t emu_state_changed;

#define EMU_BO_KINDS                                                                      \
	(KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT |                      \
	 KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL |              \
	 KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)

struct emu_process;

struct emu_bo {
	struct emu_process *proc; /* the owner (USERPTR: whose memory it is) */
	uint64_t handle;
	uint64_t va_addr;
	uint64_t size;
	uint64_t mmap_offset; /* VRAM/GTT: in the GPU's aperture; DOORBELL/MMIO: in /dev/kfd */
	uint64_t user_addr;   /* USERPTR */
	uint32_t idr;
	uint32_t user_gpu_id;
	uint32_t alloc_flags;
	struct emu_gpu *gpu;
	int dmabuf_fd;	     /* the dma-buf stand-in once exported (VRAM/GTT), else -1 */
	uint64_t dmabuf_ino; /* how a dma-buf handed back to us is recognised */
	int refs;	     /* the process's table + each kernel, copy or queue using it */
	int queue_users;     /* queues with buffers in it: it cannot be freed */
};

/* KFD keeps a user_gpu_id per device of a process: a restored process keeps its old ids. */
struct emu_gpu_map {
	uint32_t user_gpu_id;
	struct emu_gpu *gpu;
	uint64_t drm_ino; /* the render node file its VM is bound to (ACQUIRE_VM); 0: none */
};

/* A queue's hardware state, what KFD calls its MQD: saved and restored as opaque bytes. */
#define EMU_MQD_MAGIC 0x44514d45U /* "EMQD" */
struct emu_mqd {
	uint32_t magic;
	uint32_t queue_id;
	uint64_t rptr;	   /* packets done */
	uint64_t wptr;	   /* packets published at the last doorbell */
	uint64_t doorbell; /* the doorbell value last seen */
	uint32_t faulted;  /* a packet named memory the GPU cannot reach: the queue stopped */
	uint32_t pad;
};

/* The packet a queue was preempted in, what CWSR saves as the control stack. */
#define EMU_CTL_MAGIC 0x4c54434bU /* "KCTL" */
struct emu_ctl_stack {
	uint32_t magic;
	uint32_t in_flight; /* a packet is part done */
	uint64_t progress;  /* its bytes done */
	uint64_t partial;   /* CHECKSUM: the sum so far */
};

struct emu_queue {
	struct emu_queue *next;
	struct kfdemu_create_queue props; /* gpu_id: the user gpu id */
	struct emu_gpu *gpu;
	uint32_t queue_id;
	uint32_t doorbell_id;
	/* The BOs its buffers lie in, held while the queue exists (KFD refuses to free them). */
	struct emu_bo *bufs[5];
	struct emu_mqd mqd;
	struct emu_ctl_stack ctl;
	bool busy; /* the engine runs a step of it outside the lock */
};

struct emu_event {
	struct emu_event *next;
	uint32_t id;
	uint32_t type;
	bool auto_reset;
	bool signaled;
};

struct emu_svm_range {
	struct emu_svm_range *next;
	uint64_t start;
	uint64_t size;
	uint32_t preferred_loc; /* user gpu id, KFD_IOCTL_SVM_LOCATION_SYSMEM or _UNDEFINED */
	uint32_t prefetch_loc;
	uint32_t flags;
	uint32_t granularity;
	/* Per device of the process (gpu_map order): KFD_IOCTL_SVM_ATTR_{ACCESS,..,NO_ACCESS}. */
	uint32_t access[EMU_MAX_GPUS];
};

struct emu_process {
	struct emu_process *next;
	uint32_t pid;
	int pidfd;  /* tells a dead process from a new one that got its pid */
	int owners; /* connections opened by this process */
	int refs;   /* owners + connections attached to it */
	bool dead;  /* every owner is gone: everything freed, ops fail with ESRCH */
	bool paused; /* PROCESS_INFO .. UNPAUSE: queues evicted, no kernel runs */
	bool awaiting_resume; /* RESTORE .. RESUME: same */
	bool restored;
	uint32_t xnack_mode;
	int running_kernels; /* kernels and engine steps running outside the lock */
	/* Its /dev/kfd mmap space: memfd "kfdemu-kfd": doorbells, MMIO pages, events page. */
	int kfd_fd;
	uint32_t next_idr;
	struct emu_bo **bos;
	uint32_t nr_bos;
	uint32_t bos_capacity;
	struct emu_gpu_map gpu_map[EMU_MAX_GPUS];
	uint32_t nr_gpu_maps;
	struct emu_queue *queues;
	uint32_t nr_queues;
	struct emu_event *events;
	uint32_t nr_events;
	struct emu_svm_range *svm;
	uint32_t nr_svm;
	/* Restored SVM ranges, applied by RESUME once the process's memory is back. */
	struct emu_svm_range *svm_pending;
	uint32_t nr_svm_pending;
};

/* emu_device.c */
int emu_check_alive(struct emu_process *proc);
/* Live processes, newest first (the engine walks them); a live one by pid, or NULL. */
struct emu_process *emu_process_first(void);
struct emu_process *emu_process_lookup(uint32_t pid);
/* Free everything the process holds on the device (a death, an undone RESTORE). */
void emu_process_clear(struct emu_process *proc);
/* A render node fd handed to us for gpu by pid: its file's inode, or -EINVAL. */
int emu_render_identify(int fd, const struct emu_gpu *gpu, uint32_t pid, uint64_t *ino);
/* Bind the GPU's VM of the process to that render node file (ACQUIRE_VM, RESTORE). */
int emu_bind_render(struct emu_process *proc, struct emu_gpu_map *map, uint64_t ino);
struct emu_gpu_map *emu_process_gpu(struct emu_process *proc, uint32_t user_gpu_id);
struct emu_gpu *emu_find_gpu(uint32_t gpu_id);
int emu_process_add_bo(struct emu_process *proc, struct emu_bo *bo);
struct emu_bo *emu_lookup_bo(struct emu_process *proc, uint64_t handle, uint32_t *index);
/* The process's BO on that GPU holding [va, va + len), or NULL. */
struct emu_bo *emu_bo_at_va(struct emu_process *proc, uint32_t user_gpu_id, uint64_t va,
			    uint64_t len);
bool emu_va_range_free(struct emu_process *proc, uint32_t user_gpu_id, uint64_t va,
		       uint64_t size);
int emu_check_bo_shape(uint32_t pid, uint32_t flags, uint64_t va, uint64_t size);
/* Make a BO of the process (kind and placement from alloc_flags), not yet in its table. */
int emu_bo_create(struct emu_process *proc, struct emu_gpu_map *map, uint32_t idr,
		  uint32_t flags, uint64_t va, uint64_t size, uint64_t user_addr,
		  struct emu_bo **bo);
void emu_bo_release(struct emu_bo *bo);
void emu_bo_put(struct emu_bo *bo);
int emu_bo_export(struct emu_bo *bo, int *fd);
uint64_t emu_kfd_offset(uint64_t type, const struct emu_gpu *gpu);
/* The process's memory at [addr, addr + len): mapped in it, as KFD's userptr/SVM need. */
int emu_process_range_mapped(uint32_t pid, uint64_t addr, uint64_t len);
void emu_wait_for_kernels(struct emu_process *proc);

/*
 * Where a range of memory lives, so kernels and the engine can work on it outside the
 * lock: a file at an offset (aperture, /dev/kfd space) or a process's address space.
 */
struct emu_mem {
	int fd;		/* -1: the memory of pid at addr */
	uint64_t base;	/* offset of the range's start in fd */
	uint32_t pid;
	uint64_t addr;
};

void emu_bo_mem(const struct emu_bo *bo, uint64_t offset, struct emu_mem *mem);
int emu_mem_read(const struct emu_mem *mem, void *buf, uint64_t len, uint64_t offset);
int emu_mem_write(const struct emu_mem *mem, const void *buf, uint64_t len, uint64_t offset);
/*
 * A kernel on len bytes at offset of mem (in 1 MiB pieces); *sum: CHECKSUM's, added to,
 * its word indices counted from mem's start.
 */
int emu_kernel_step(uint32_t op, uint32_t arg, const struct emu_mem *mem, uint64_t offset,
		    uint64_t len, uint64_t *sum);

/* emu_queue.c */
int emu_engine_start(void);
void emu_queue_free(struct emu_queue *queue);
int emu_queue_attach_bufs(struct emu_process *proc, struct emu_queue *queue);
int emu_queue_check_ids(struct emu_process *proc, uint32_t queue_id, uint32_t doorbell_id);
void emu_queue_link(struct emu_process *proc, struct emu_queue *queue);

/* emu_event.c */
void emu_event_signal(struct emu_process *proc, uint32_t event_id);
int emu_event_restore(struct emu_process *proc, uint32_t id, uint32_t type, bool auto_reset,
		      bool signaled);
void emu_events_free(struct emu_process *proc);

/* emu_svm.c */
int emu_svm_check_attrs(struct emu_process *proc, const struct kfd_ioctl_svm_attribute *attrs,
			uint32_t nattr);
void emu_svm_apply_attrs(struct emu_process *proc, struct emu_svm_range *range,
			 const struct kfd_ioctl_svm_attribute *attrs, uint32_t nattr);
/* The SVM range holding [addr, addr + len) that the GPU may access, or NULL. */
struct emu_svm_range *emu_svm_find(struct emu_process *proc, uint64_t addr, uint64_t len,
				   uint32_t map_index);
int emu_svm_resume(struct emu_process *proc);
void emu_svm_free_list(struct emu_svm_range **list, uint32_t *nr);

#endif
