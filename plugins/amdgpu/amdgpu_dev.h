/*
 * Device access of the AMDGPU plugin behind one ops table, so the same plugin logic runs
 * on /dev/kfd (amdgpu_dev_kfd.c, never run on hardware) and on the KFD EMULATOR
 * (amdgpu_dev_emu.c, test/gpu): the CRIU op, opening the device, and BO contents I/O.
 */
#ifndef AMDGPU_DEV_H
#define AMDGPU_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/kfd_ioctl.h>

struct amdgpu_dev;

struct amdgpu_dev_ops {
	const char *name;
	/* Dump, in criu: take the task's device through criu's copy of its fd. -ENOTSUP: not ours. */
	int (*attach)(int task_fd, struct amdgpu_dev **dev);
	/* Restore, in the task: open the device for the calling process; *fd is what it keeps. */
	int (*open_own)(struct amdgpu_dev **dev, int *fd);
	/* Restore, in criu: a handle for RESUME of another process. */
	int (*open_for_resume)(struct amdgpu_dev **dev);
	void (*close)(struct amdgpu_dev *dev);
	/* AMDKFD_IOC_CRIU_OP semantics: args in/out, bucket dmabuf_fds come back as fds. */
	int (*criu_op)(struct amdgpu_dev *dev, struct kfd_ioctl_criu_args *args);
	/*
	 * The next range of a BO at or after from that may hold data: [*start, *end). Returns
	 * -ENXIO when nothing follows. Hardware cannot tell: the whole BO is one range.
	 */
	int (*next_data)(int bo_fd, uint64_t bo_size, uint64_t from, uint64_t *start, uint64_t *end);
	/* Copy len bytes between a BO (through its dma-buf fd) and a file, at 64-bit offsets. */
	int (*bo_to_file)(int bo_fd, uint64_t bo_off, int file_fd, uint64_t file_off, uint64_t len);
	int (*file_to_bo)(int file_fd, uint64_t file_off, int bo_fd, uint64_t bo_off, uint64_t len);
};

extern const struct amdgpu_dev_ops amdgpu_dev_kfd_ops;
extern const struct amdgpu_dev_ops amdgpu_dev_emu_ops;

/*
 * Shared by both backends (their bo_to_file/file_to_bo): CPU copies through an mmap of the
 * BO's fd, in bounded windows.
 */
int amdgpu_bo_to_file_mmap(int bo_fd, uint64_t bo_off, int file_fd, uint64_t file_off, uint64_t len);
int amdgpu_file_to_bo_mmap(int file_fd, uint64_t file_off, int bo_fd, uint64_t bo_off, uint64_t len);

#endif
