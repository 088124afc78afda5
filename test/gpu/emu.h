/*
 * Internals of the KFD EMULATOR daemon (kfd-emu): emulated GPUs, per-client processes and
 * their buffer objects, and the calls the connection threads make into them.
 * An emulator for tests: no GPU, no DRM; "VRAM" is memfds.
 */
#ifndef KFDEMU_EMU_H
#define KFDEMU_EMU_H

#include <stdbool.h>
#include <stdint.h>

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
	uint64_t vram_size;
	uint64_t vram_used; /* under emu_lock */
};

extern struct emu_gpu emu_gpus[EMU_MAX_GPUS];
extern unsigned int emu_nr_gpus;

/* A consistent snapshot of every GPU, VRAM use included. */
void emu_get_gpu_info(struct kfdemu_gpu_info *gpus);

/* emu_topology.c: the fake /sys/class/kfd/kfd/topology tree. */
int emu_write_topology(const char *dir);

/*
 * emu_device.c: processes, BOs, kernels and the CRIU ops. A process is what KFD keeps per
 * opened /dev/kfd and mm: here, per client pid. Every call returns 0 or -errno and, on
 * failure, has logged why.
 */
struct emu_process;

int emu_process_open(uint32_t pid, int pidfd, struct emu_process **proc);
void emu_process_close(struct emu_process *proc, bool owner);
int emu_process_find(uint32_t pid, struct emu_process **proc);
void emu_process_get(struct emu_process *proc);
uint32_t emu_process_pid(const struct emu_process *proc);

int emu_alloc_bo(struct emu_process *proc, struct kfdemu_bo_info *bo);
int emu_free_bo(struct emu_process *proc, uint64_t handle);
int emu_export_bo(struct emu_process *proc, uint64_t handle, int *fd);
int emu_run_kernel(struct emu_process *proc, const struct kfdemu_kernel *kernel,
		   uint64_t *result);

/*
 * The CRIU op. request/request_size: the CRIU_OP payload; *reply (malloc()ed) and
 * *reply_fds (dup()ed fds, the caller closes them after sending) come back on success.
 */
int emu_criu_op(struct emu_process *proc, const void *request, uint64_t request_size,
		void **reply, uint64_t *reply_size, int **reply_fds, uint32_t *nr_reply_fds);

#endif
