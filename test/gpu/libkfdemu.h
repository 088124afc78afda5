/*
 * libkfdemu: client library of the KFD EMULATOR (test/gpu/kfd-emu). Test programs allocate,
 * map and compute on emulated GPU buffer objects; a checkpoint tool drives the KFD CRIU
 * ops. Every call returns 0 or a negative errno. This is an emulator, not a GPU driver.
 */
#ifndef LIBKFDEMU_H
#define LIBKFDEMU_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/kfd_ioctl.h>

#include "kfdemu_proto.h"

struct kfdemu_conn;

/*
 * Open the emulated /dev/kfd: connect to the emulator at socket_path (NULL:
 * $KFDEMU_SOCKET, else KFDEMU_DEFAULT_SOCKET) and say HELLO. The connection's process
 * is the caller's own.
 */
int kfdemu_connect(const char *socket_path, struct kfdemu_conn **conn);
/*
 * Open the emulated render node /dev/dri/renderD<render_minor> (the minor as the
 * topology's drm_render_minor says): a GPU's DRM file, what its BOs are mapped through
 * and what KFD builds the GPU's VM on (kfdemu_acquire_vm, RESTORE's drm_fd).
 */
int kfdemu_open_render(const char *socket_path, uint32_t render_minor, struct kfdemu_conn **conn);
/*
 * Talk on a connection opened elsewhere (sock: a /dev/kfd or render node fd, after its
 * HELLO, e.g. the one a process keeps); kfdemu_close() closes sock.
 */
int kfdemu_conn_wrap(int sock, uint32_t kind, struct kfdemu_conn **conn);
void kfdemu_close(struct kfdemu_conn *conn);
/* The socket: it is what a checkpoint tool sees in the client's fd table. */
int kfdemu_conn_fd(const struct kfdemu_conn *conn);
/* The client's pid as the emulator saw it at HELLO. */
uint32_t kfdemu_conn_pid(const struct kfdemu_conn *conn);
/* A render node's GPU (0 for /dev/kfd). */
uint32_t kfdemu_conn_gpu_id(const struct kfdemu_conn *conn);

/* Fill gpus[] (capacity *nr_gpus); *nr_gpus becomes the number of emulated GPUs. */
int kfdemu_get_gpus(struct kfdemu_conn *conn, struct kfdemu_gpu_info *gpus, uint32_t *nr_gpus);

/* Bind a GPU's VM to a render node (its fd), as AMDKFD_IOC_ACQUIRE_VM: BOs need one. */
int kfdemu_acquire_vm(struct kfdemu_conn *conn, uint32_t gpu_id, int render_fd);

/*
 * Allocate a BO (bo: gpu_id, alloc_flags, size, va_addr or 0, user_addr for USERPTR);
 * handle, va_addr and mmap_offset come back. VRAM and GTT contents start zeroed and
 * sparse: untouched pages cost nothing.
 */
int kfdemu_alloc(struct kfdemu_conn *conn, struct kfdemu_bo_info *bo);
int kfdemu_alloc_bo(struct kfdemu_conn *conn, uint32_t gpu_id, uint32_t alloc_flags,
		    uint64_t size, uint64_t va_addr, struct kfdemu_bo_info *bo);
int kfdemu_free_bo(struct kfdemu_conn *conn, uint64_t handle);

/* Export a VRAM or GTT BO as a dma-buf fd: only the copy engine (kfdemu_copy) reads it. */
int kfdemu_export_bo(struct kfdemu_conn *conn, uint64_t handle, int *fd);

/*
 * The fd to mmap(): a render node's gives its GPU's BOs at their mmap_offset (once the
 * node holds a VM); /dev/kfd's the process's doorbells, MMIO pages and events page.
 * kfdemu_mmap() maps size bytes at offset through it, shared, read-write; mappings show
 * in /proc/PID/maps as "/memfd:kfdemu-renderD<minor>" or "/memfd:kfdemu-kfd".
 */
int kfdemu_get_mmap_fd(struct kfdemu_conn *conn, int *fd);
int kfdemu_mmap(struct kfdemu_conn *conn, uint64_t offset, uint64_t size, void **addr);
/* A BO at its mmap_offset: VRAM/GTT through its GPU's render node, DOORBELL/MMIO /dev/kfd. */
int kfdemu_map_bo(struct kfdemu_conn *conn, const struct kfdemu_bo_info *bo, void **addr);

/* Run a kernel inside the emulator; *result gets the checksum for CHECKSUM (may be NULL). */
int kfdemu_run_kernel(struct kfdemu_conn *conn, const struct kfdemu_kernel *kernel,
		      uint64_t *result);
int kfdemu_bo_fill(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset, uint64_t length,
		   uint32_t pattern);
int kfdemu_bo_add(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset, uint64_t length,
		  uint32_t addend);
int kfdemu_bo_checksum(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset,
		       uint64_t length, uint64_t *checksum);

/*
 * The checksum the CHECKSUM kernel computes, for a buffer that sits at byte offset
 * start_offset of a BO (a queue's packet: of the packet's range): sum over 8-byte words
 * w_i of mix(w_i) * (2i + 1), i the word index, mix(0) == 0, so zero pages (holes)
 * contribute nothing and a checksum of ranges can be added up. len and start_offset
 * must be multiples of 8.
 */
uint64_t kfdemu_checksum(const void *buf, uint64_t len, uint64_t start_offset);

/*
 * Make this connection act on another client's process, like holding a dup of that
 * process's /dev/kfd fd: by the inode of the client's socket (fstat of the fd a
 * checkpoint tool took from the task) when sock_ino != 0, else by pid.
 */
int kfdemu_attach(struct kfdemu_conn *conn, uint32_t pid, uint64_t sock_ino);

/* User-mode queues (struct kfdemu_packet in kfdemu_proto.h says how to feed one). */
int kfdemu_create_queue(struct kfdemu_conn *conn, const struct kfdemu_create_queue *queue,
			struct kfdemu_queue_reply *reply);
int kfdemu_destroy_queue(struct kfdemu_conn *conn, uint32_t queue_id);

/* Events: KFD_IOC_EVENT_SIGNAL or _DEBUG_EVENT; result: enum kfdemu_wait_result. */
int kfdemu_create_event(struct kfdemu_conn *conn, uint32_t type, bool auto_reset,
			struct kfdemu_event_reply *event);
int kfdemu_destroy_event(struct kfdemu_conn *conn, uint32_t event_id);
int kfdemu_set_event(struct kfdemu_conn *conn, uint32_t event_id);
int kfdemu_reset_event(struct kfdemu_conn *conn, uint32_t event_id);
int kfdemu_wait_events(struct kfdemu_conn *conn, const uint32_t *ids, uint32_t nr_ids,
		       bool wait_for_all, uint32_t timeout_ms, uint32_t *result);

/* SVM attributes of the caller's memory: op KFD_IOCTL_SVM_OP_SET_ATTR or _GET_ATTR. */
int kfdemu_svm(struct kfdemu_conn *conn, uint32_t op, uint64_t start, uint64_t size,
	       struct kfd_ioctl_svm_attribute *attrs, uint32_t nattr);

/*
 * The copy engine (the emulator's SDMA): length bytes between a BO, named by its
 * dma-buf, and a file, at 64-bit offsets (dir: enum kfdemu_copy_dir). -ENODATA when the
 * file ends early. kfdemu_next_data: the next range at or after from that may hold data,
 * [*start, *end); -ENXIO when none follows.
 */
int kfdemu_copy(struct kfdemu_conn *conn, uint32_t dir, int dmabuf_fd, uint64_t bo_offset,
		int file_fd, uint64_t file_offset, uint64_t length);
int kfdemu_next_data(struct kfdemu_conn *conn, int dmabuf_fd, uint64_t from, uint64_t *start,
		     uint64_t *end);

/* What fd is to the emulator (/dev/kfd, a render node, a dma-buf); -ENOENT: nothing. */
int kfdemu_identify(struct kfdemu_conn *conn, int fd, struct kfdemu_identity *id);
/* What the emulator holds (tests: nothing left behind). */
int kfdemu_stats(struct kfdemu_conn *conn, struct kfdemu_stats *stats);

/*
 * The emulator's AMDKFD_IOC_CRIU_OP: same struct, same in/out semantics as
 * ioctl(kfd_fd, AMDKFD_IOC_CRIU_OP, args) on the connection's process, with args->devices,
 * args->bos and args->priv_data pointing into the caller's memory and RESTORE's device
 * buckets naming render nodes by the caller's fds (drm_fd). dmabuf_fd fields that come
 * back hold fds owned by the caller, or KFDEMU_INVALID_FD (BOs without a dma-buf).
 */
int kfdemu_criu_op(struct kfdemu_conn *conn, struct kfd_ioctl_criu_args *args);

/*
 * A process's view of the emulated GPUs, opened as a ROCm runtime opens them: /dev/kfd,
 * then per GPU its render node (minor from GET_GPUS, as the topology says) with the GPU's
 * VM acquired on it. Everything is the caller's process's; after a restore the same
 * struct goes on working (the fds are restored at their numbers).
 */
#define KFDEMU_MAX_GPUS 8

struct kfdemu_device {
	struct kfdemu_conn *kfd;
	uint32_t nr_gpus;
	struct kfdemu_gpu_info gpus[KFDEMU_MAX_GPUS];
	struct kfdemu_conn *render[KFDEMU_MAX_GPUS];
};

int kfdemu_device_open(const char *socket_path, struct kfdemu_device *dev);
void kfdemu_device_close(struct kfdemu_device *dev);
/* Map a BO where it is mapped: VRAM/GTT through its GPU's render node, others /dev/kfd. */
int kfdemu_device_map_bo(struct kfdemu_device *dev, const struct kfdemu_bo_info *bo, void **addr);

/*
 * Where the library's messages go: level as CRIU's (1 error, 2 warning, 3 info, 4 debug),
 * msg without a trailing newline. Default: errors and warnings to stderr.
 */
typedef void (*kfdemu_log_fn)(int level, const char *msg);
void kfdemu_set_log_fn(kfdemu_log_fn fn);
void kfdemu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
