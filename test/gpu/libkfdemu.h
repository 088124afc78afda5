/*
 * libkfdemu: client library of the KFD EMULATOR (test/gpu/kfd-emu). Test programs allocate,
 * map and compute on emulated GPU buffer objects; a checkpoint tool drives the KFD CRIU
 * ops. Every call returns 0 or a negative errno. This is an emulator, not a GPU driver.
 */
#ifndef LIBKFDEMU_H
#define LIBKFDEMU_H

#include <stdint.h>
#include <linux/kfd_ioctl.h>

#include "kfdemu_proto.h"

struct kfdemu_conn;

/*
 * Connect to the emulator at socket_path (NULL: $KFDEMU_SOCKET, else
 * KFDEMU_DEFAULT_SOCKET) and say HELLO. The connection's process is the caller's own.
 */
int kfdemu_connect(const char *socket_path, struct kfdemu_conn **conn);
void kfdemu_close(struct kfdemu_conn *conn);
/* The socket: it is what a checkpoint tool sees in the client's fd table. */
int kfdemu_conn_fd(const struct kfdemu_conn *conn);
/* The client's pid as the emulator saw it at HELLO. */
uint32_t kfdemu_conn_pid(const struct kfdemu_conn *conn);

/* Fill gpus[] (capacity *nr_gpus); *nr_gpus becomes the number of emulated GPUs. */
int kfdemu_get_gpus(struct kfdemu_conn *conn, struct kfdemu_gpu_info *gpus, uint32_t *nr_gpus);

/*
 * Allocate a BO: alloc_flags holds KFD_IOC_ALLOC_MEM_FLAGS_VRAM or _GTT, va_addr 0 lets
 * the emulator choose. Contents start zeroed and sparse: untouched pages cost nothing.
 */
int kfdemu_alloc_bo(struct kfdemu_conn *conn, uint32_t gpu_id, uint32_t alloc_flags,
		    uint64_t size, uint64_t va_addr, struct kfdemu_bo_info *bo);
int kfdemu_free_bo(struct kfdemu_conn *conn, uint64_t handle);

/* Export a BO as an fd (a memfd: the emulator's stand-in for a dma-buf). */
int kfdemu_export_bo(struct kfdemu_conn *conn, uint64_t handle, int *fd);

/*
 * Map a whole BO shared into the caller (export + mmap). The mapping shows in
 * /proc/PID/maps as "/memfd:kfdemu-bo-<mmap_offset in hex> (deleted)".
 */
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
 * start_offset of a BO: sum over 8-byte words w_i of mix(w_i) * (2i + 1), i the word
 * index in the BO, mix(0) == 0, so zero pages (holes) contribute nothing and a checksum
 * of ranges can be added up. len and start_offset must be multiples of 8.
 */
uint64_t kfdemu_checksum(const void *buf, uint64_t len, uint64_t start_offset);

/*
 * Make this connection act on another client's process, like holding a dup of that
 * process's /dev/kfd fd: by the inode of the client's socket (fstat of the fd a
 * checkpoint tool took from the task) when sock_ino != 0, else by pid.
 */
int kfdemu_attach(struct kfdemu_conn *conn, uint32_t pid, uint64_t sock_ino);

/*
 * The emulator's AMDKFD_IOC_CRIU_OP: same struct, same in/out semantics as
 * ioctl(kfd_fd, AMDKFD_IOC_CRIU_OP, args) on the connection's process, with args->devices,
 * args->bos and args->priv_data pointing into the caller's memory. dmabuf_fd fields that
 * come back hold fds owned by the caller (memfds), or KFDEMU_INVALID_FD.
 */
int kfdemu_criu_op(struct kfdemu_conn *conn, struct kfd_ioctl_criu_args *args);

/*
 * Where the library's messages go: level as CRIU's (1 error, 2 warning, 3 info, 4 debug),
 * msg without a trailing newline. Default: errors and warnings to stderr.
 */
typedef void (*kfdemu_log_fn)(int level, const char *msg);
void kfdemu_set_log_fn(kfdemu_log_fn fn);
void kfdemu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
