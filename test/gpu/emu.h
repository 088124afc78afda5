/*
 * What the KFD EMULATOR daemon's parts (kfd-emu.c: connections; emu_*.c: the device)
 * call in each other. An emulator for tests: no GPU, no DRM; "VRAM" is memfds.
 */
#ifndef KFDEMU_EMU_H
#define KFDEMU_EMU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kfdemu_proto.h"

#define EMU_MAX_GPUS 8

/* Levels as CRIU's -v; NOTE is always printed (the readiness banner). */
enum { EMU_LOG_NOTE, EMU_LOG_ERROR, EMU_LOG_WARN, EMU_LOG_INFO, EMU_LOG_DEBUG };

void emu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define emu_err(fmt, ...) emu_log(EMU_LOG_ERROR, fmt, ##__VA_ARGS__)
#define emu_warn(fmt, ...) emu_log(EMU_LOG_WARN, fmt, ##__VA_ARGS__)
#define emu_info(fmt, ...) emu_log(EMU_LOG_INFO, fmt, ##__VA_ARGS__)
#define emu_debug(fmt, ...) emu_log(EMU_LOG_DEBUG, fmt, ##__VA_ARGS__)

struct emu_gpu {
	uint32_t gpu_id;
	uint32_t node_id; /* topology node; node 0 is the CPU */
	uint32_t device_id;
	uint32_t render_minor;
	uint64_t vram_size;
	uint64_t vram_used; /* under emu_lock */
	/*
	 * The GPU's BO space, what its render node maps: memfd "kfdemu-renderD<minor>",
	 * sparse, every VRAM/GTT BO of every process at its mmap offset.
	 */
	int aperture_fd;
};

extern struct emu_gpu emu_gpus[EMU_MAX_GPUS];
extern unsigned int emu_nr_gpus;

/* Set up the GPUs' apertures once the options are parsed; starts the queue engine. */
int emu_device_init(void);
struct emu_gpu *emu_gpu_by_minor(uint32_t minor);
/* A consistent snapshot of every GPU, VRAM use included. */
void emu_get_gpu_info(struct kfdemu_gpu_info *gpus);

/* emu_topology.c: the fake /sys/class/kfd/kfd/topology tree. */
int emu_write_topology(const char *dir);

/*
 * What kfd-emu.c knows of the connections that are render node files: the device side
 * identifies a render node fd it is handed (ACQUIRE_VM, RESTORE's drm_fd) by its socket
 * inode. Returns the render node's minor and owner pid, or -ENOENT.
 */
int emu_conn_find_render(uint64_t sock_ino, uint32_t *minor, uint32_t *pid);

/*
 * The device: processes, BOs, queues, events, SVM ranges and the CRIU ops. A process is
 * what KFD keeps per opened /dev/kfd and mm: here, per client pid. Every call returns 0
 * or -errno and, on failure, has logged why.
 */
struct emu_process;

int emu_process_open(uint32_t pid, int pidfd, struct emu_process **proc);
void emu_process_close(struct emu_process *proc, bool owner);
int emu_process_find(uint32_t pid, struct emu_process **proc);
void emu_process_get(struct emu_process *proc);
uint32_t emu_process_pid(const struct emu_process *proc);

int emu_acquire_vm(struct emu_process *proc, uint32_t gpu_id, int render_fd);
int emu_alloc_bo(struct emu_process *proc, struct kfdemu_bo_info *bo);
int emu_free_bo(struct emu_process *proc, uint64_t handle);
int emu_export_bo(struct emu_process *proc, uint64_t handle, int *fd);
int emu_run_kernel(struct emu_process *proc, const struct kfdemu_kernel *kernel,
		   uint64_t *result);
/* A dup of the process's /dev/kfd mmap space, or (render) of a bound render node's GPU. */
int emu_kfd_mmap_fd(struct emu_process *proc, int *fd);
int emu_render_mmap_fd(uint64_t render_sock_ino, int *fd);

int emu_create_queue(struct emu_process *proc, const struct kfdemu_create_queue *req,
		     struct kfdemu_queue_reply *reply);
int emu_destroy_queue(struct emu_process *proc, uint32_t queue_id);

int emu_create_event(struct emu_process *proc, const struct kfdemu_create_event *req,
		     struct kfdemu_event_reply *reply);
int emu_destroy_event(struct emu_process *proc, uint32_t event_id);
int emu_set_event(struct emu_process *proc, uint32_t event_id);
int emu_reset_event(struct emu_process *proc, uint32_t event_id);
int emu_wait_events(struct emu_process *proc, const struct kfdemu_wait_events *req,
		    const uint32_t *ids, uint32_t *result);

int emu_svm(struct emu_process *proc, const struct kfdemu_svm *req,
	    struct kfd_ioctl_svm_attribute *attrs);

/* The copy engine and what it needs: fds are the caller's, not taken over. */
int emu_copy(const struct kfdemu_copy *req, int dmabuf_fd, int file_fd);
int emu_next_data(int dmabuf_fd, struct kfdemu_next_data *req);
/* What a dma-buf fd is; -ENOENT when it is none of ours. */
int emu_identify_dmabuf(int fd, struct kfdemu_identity *id);
void emu_get_stats(struct kfdemu_stats *stats);

/*
 * The CRIU op. request/request_size: the CRIU_OP payload; fds: those that came with it
 * (RESTORE's render nodes, still owned by the caller). *reply (malloc()ed) and
 * *reply_fds (dup()ed fds, the caller closes them after sending) come back on success.
 */
int emu_criu_op(struct emu_process *proc, const void *request, uint64_t request_size,
		const int *fds, uint32_t nr_fds, void **reply, uint64_t *reply_size,
		int **reply_fds, uint32_t *nr_reply_fds);

#endif
