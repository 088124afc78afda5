/*
 * Device access of the AMDGPU plugin behind one ops table, so the same plugin logic runs
 * on the kernel's /dev/kfd and render nodes (amdgpu_dev_kfd.c, never run on hardware)
 * and, in test builds only, on the KFD EMULATOR (amdgpu_dev_emu.c, test/gpu): the CRIU
 * op, the device files a process holds, the objects its VMAs map, and a GPU's copy engine.
 */
#ifndef AMDGPU_DEV_H
#define AMDGPU_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <linux/kfd_ioctl.h>

#include "amdgpu.pb-c.h"
#include "amdgpu_file_io.h"

struct amdgpu_dev;
struct amdgpu_engine;

/* What a VMA the plugin takes maps: a render node's BO space, or /dev/kfd's. */
enum amdgpu_vma_kind {
	AMDGPU_VMA_RENDER,
	AMDGPU_VMA_KFD,
};

struct amdgpu_dev_ops {
	const char *name;
	AmdgpuBackend backend;

	/* ---- dump, in criu ---- */
	/* The task's /dev/kfd through criu's copy of its fd; -ENOTSUP: not this backend's. */
	int (*attach)(int task_fd, struct amdgpu_dev **dev);
	/* A render node the task holds: its minor; -ENOTSUP: not this backend's. */
	int (*render_minor)(int task_fd, uint32_t *minor);
	/* HANDLE_DEVICE_VMA: 0 if the mapped object (criu's fd on it) is this backend's. */
	int (*owns_vma)(int fd, const struct stat *st);

	/* ---- restore, in the task ---- */
	/* Open /dev/kfd for the calling process; *fd is what the task keeps. */
	int (*open_own)(struct amdgpu_dev **dev, int *fd);
	/* Open the render node with this minor for the calling process. */
	int (*open_render)(uint32_t minor, int *fd);
	/*
	 * UPDATE_VMA_MAP: whose VMA the path (as /proc/PID/map_files named it) is, and for a
	 * render node its minor on the dump machine (BO offsets are per device); -ENOTSUP.
	 */
	int (*vma_kind)(const char *path, enum amdgpu_vma_kind *kind, uint32_t *minor);
	/*
	 * The fd a VMA is mapped through after restore: a render node's (render_fd: the node
	 * the GPU's VM was restored on) or the process's /dev/kfd space (dev).
	 */
	int (*render_map_fd)(int render_fd, int *map_fd);
	int (*kfd_map_fd)(struct amdgpu_dev *dev, int *map_fd);

	/* ---- restore, in criu ---- */
	/* A handle for RESUME of another process. */
	int (*open_for_resume)(struct amdgpu_dev **dev);

	void (*close)(struct amdgpu_dev *dev);
	/* AMDKFD_IOC_CRIU_OP semantics: args in/out, bucket dmabuf_fds come back as fds. */
	int (*criu_op)(struct amdgpu_dev *dev, struct kfd_ioctl_criu_args *args);

	/*
	 * The copy engine of the GPU behind render node minor (hardware: SDMA through
	 * libdrm_amdgpu, CPU copies where it cannot run; emulator: the emulator's own), in
	 * whichever process copies: dump and the parallel worker in criu, the serial path
	 * in the task. One engine per thread. BOs are named by their dma-buf fd.
	 */
	int (*engine_open)(uint32_t minor, struct amdgpu_engine **engine);
	void (*engine_close)(struct amdgpu_engine *engine);
	/* The next range at or after from that may hold data: [*start, *end); -ENXIO: none. */
	int (*next_data)(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_size, uint64_t from,
			 uint64_t *start, uint64_t *end);
	int (*bo_to_file)(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_off, int file_fd,
			  uint64_t file_off, uint64_t len);
	int (*file_to_bo)(struct amdgpu_engine *engine, int file_fd, uint64_t file_off, int bo_fd,
			  uint64_t bo_off, uint64_t len);
};

/* The backend that made an image, or NULL (logged) when this build has none for it. */
const struct amdgpu_dev_ops *amdgpu_backend(AmdgpuBackend backend);
/* Every backend of this build, for dump to ask in turn. */
extern const struct amdgpu_dev_ops *const amdgpu_backends[];
extern const unsigned int amdgpu_nr_backends;

extern const struct amdgpu_dev_ops amdgpu_dev_kfd_ops;
#ifdef AMDGPU_EMULATOR
extern const struct amdgpu_dev_ops amdgpu_dev_emu_ops;
#endif

/* Only VRAM and GTT BOs have contents to copy; the others RESTORE re-creates alone. */
static inline bool amdgpu_bo_has_contents(uint32_t alloc_flags)
{
	return alloc_flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT);
}

/*
 * CPU copies between a BO's dma-buf and a file through an mmap of the dma-buf, in
 * bounded windows: the hardware backend's fallback where SDMA cannot run.
 */
int amdgpu_bo_to_file_mmap(int bo_fd, uint64_t bo_off, int file_fd, uint64_t file_off,
			   uint64_t len);
int amdgpu_file_to_bo_mmap(int file_fd, uint64_t file_off, int bo_fd, uint64_t bo_off,
			   uint64_t len);

#endif
