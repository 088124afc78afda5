/*
 * The hardware backend: AMDKFD_IOC_CRIU_OP on /dev/kfd, render nodes /dev/dri/renderD*,
 * BO contents moved by SDMA through libdrm_amdgpu (amdgpu_sdma.c), by the CPU through an
 * mmap of the dma-buf where SDMA cannot run. NEVER RUN ON HARDWARE (these machines have
 * no GPU); it builds, and the emulator backend shares every line of plugin logic above.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_dev.h"
#include "amdgpu_sdma.h"

#define KFD_DEVICE "/dev/kfd"
#define RENDER_PATH "/dev/dri/renderD"
#define DRM_MAJOR 226
/* DRM numbers render nodes from 128. */
#define DRM_FIRST_RENDER_MINOR 128

struct amdgpu_dev {
	int kfd_fd;
};

struct amdgpu_engine {
	int render_fd;
	struct amdgpu_sdma *sdma; /* NULL: CPU copies */
};

static int kfd_wrap(int fd, struct amdgpu_dev **dev_out)
{
	struct amdgpu_dev *dev = malloc(sizeof(*dev));

	if (!dev) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	dev->kfd_fd = fd;
	*dev_out = dev;
	return 0;
}

static int kfd_open(int *fd)
{
	*fd = open(KFD_DEVICE, O_RDWR | O_CLOEXEC);
	if (*fd < 0) {
		pr_perror("cannot open %s", KFD_DEVICE);
		return -errno;
	}
	return 0;
}

static bool is_kfd(const struct stat *st)
{
	struct stat kfd_st;

	return S_ISCHR(st->st_mode) && !stat(KFD_DEVICE, &kfd_st) && st->st_rdev == kfd_st.st_rdev;
}

static bool is_render_node(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == DRM_MAJOR &&
	       minor(st->st_rdev) >= DRM_FIRST_RENDER_MINOR;
}

/* criu's fd shares the task's open file description: ioctls on it act on the task. */
static int kfd_attach(int task_fd, struct amdgpu_dev **dev)
{
	struct stat st;
	int fd, ret;

	if (fstat(task_fd, &st) || !is_kfd(&st))
		return -ENOTSUP;
	fd = fcntl(task_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		pr_perror("dup of the task's %s fd", KFD_DEVICE);
		return -errno;
	}
	ret = kfd_wrap(fd, dev);
	if (ret)
		close(fd);
	return ret;
}

static int kfd_render_minor(int task_fd, uint32_t *minor_out)
{
	struct stat st;

	if (fstat(task_fd, &st) || !is_render_node(&st))
		return -ENOTSUP;
	*minor_out = minor(st.st_rdev);
	return 0;
}

/* Doorbells, MMIO and events through /dev/kfd, BOs through render nodes. */
static int kfd_owns_vma(int fd, const struct stat *st)
{
	(void)fd;
	return is_kfd(st) || is_render_node(st) ? 0 : -ENOTSUP;
}

static int kfd_open_own(struct amdgpu_dev **dev, int *fd)
{
	int ret = kfd_open(fd), dev_fd;

	if (ret)
		return ret;
	dev_fd = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
	if (dev_fd < 0) {
		ret = -errno;
		pr_perror("dup of %s", KFD_DEVICE);
		close(*fd);
		return ret;
	}
	ret = kfd_wrap(dev_fd, dev);
	if (ret) {
		close(dev_fd);
		close(*fd);
	}
	return ret;
}

static int kfd_open_render(uint32_t minor, int *fd)
{
	char path[64];

	snprintf(path, sizeof(path), RENDER_PATH "%u", minor);
	*fd = open(path, O_RDWR | O_CLOEXEC);
	if (*fd < 0) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	return 0;
}

static int kfd_vma_kind(const char *path, enum amdgpu_vma_kind *kind, uint32_t *minor)
{
	if (sscanf(path, RENDER_PATH "%u", minor) == 1)
		*kind = AMDGPU_VMA_RENDER;
	else if (!strcmp(path, KFD_DEVICE))
		*kind = AMDGPU_VMA_KFD;
	else
		return -ENOTSUP;
	return 0;
}

/* DRM lets a BO be mapped only through the file it was made on: the restore's render node. */
static int kfd_render_map_fd(int render_fd, int *map_fd)
{
	*map_fd = fcntl(render_fd, F_DUPFD_CLOEXEC, 0);
	if (*map_fd >= 0)
		return 0;
	pr_perror("dup of a render node");
	return -errno;
}

/* Any /dev/kfd file of a process maps that process's doorbells and events. */
static int kfd_map_fd(struct amdgpu_dev *dev, int *map_fd)
{
	(void)dev;
	return kfd_open(map_fd);
}

static int kfd_open_for_resume(struct amdgpu_dev **dev)
{
	int fd, ret = kfd_open(&fd);

	if (!ret) {
		ret = kfd_wrap(fd, dev);
		if (ret)
			close(fd);
	}
	return ret;
}

static void kfd_close(struct amdgpu_dev *dev)
{
	if (!dev)
		return;
	close(dev->kfd_fd);
	free(dev);
}

static int kfd_criu_op(struct amdgpu_dev *dev, struct kfd_ioctl_criu_args *args)
{
	return ioctl(dev->kfd_fd, AMDKFD_IOC_CRIU_OP, args) ? -errno : 0;
}

/* SDMA on the GPU's own render node; the CPU where it cannot run (logged once per engine). */
static int kfd_engine_open(uint32_t minor, struct amdgpu_engine **engine_out)
{
	struct amdgpu_engine *engine = calloc(1, sizeof(*engine));
	int ret;

	if (!engine) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	ret = kfd_open_render(minor, &engine->render_fd);
	if (ret) {
		free(engine);
		return ret;
	}
	if (amdgpu_sdma_open(engine->render_fd, &engine->sdma))
		engine->sdma = NULL;
	*engine_out = engine;
	return 0;
}

static void kfd_engine_close(struct amdgpu_engine *engine)
{
	if (!engine)
		return;
	amdgpu_sdma_close(engine->sdma);
	close(engine->render_fd);
	free(engine);
}

/* A dma-buf has no holes to ask about: all of it may hold data. */
static int kfd_next_data(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_size,
			 uint64_t from, uint64_t *start, uint64_t *end)
{
	(void)engine;
	(void)bo_fd;
	if (from >= bo_size)
		return -ENXIO;
	*start = from;
	*end = bo_size;
	return 0;
}

static int kfd_bo_to_file(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_off, int file_fd,
			  uint64_t file_off, uint64_t len)
{
	if (engine->sdma)
		return amdgpu_sdma_copy(engine->sdma, bo_fd, bo_off, file_fd, file_off, len, false);
	return amdgpu_bo_to_file_mmap(bo_fd, bo_off, file_fd, file_off, len);
}

static int kfd_file_to_bo(struct amdgpu_engine *engine, int file_fd, uint64_t file_off, int bo_fd,
			  uint64_t bo_off, uint64_t len)
{
	if (engine->sdma)
		return amdgpu_sdma_copy(engine->sdma, bo_fd, bo_off, file_fd, file_off, len, true);
	return amdgpu_file_to_bo_mmap(file_fd, file_off, bo_fd, bo_off, len);
}

const struct amdgpu_dev_ops amdgpu_dev_kfd_ops = {
	.name = "/dev/kfd (never run on hardware)",
	.backend = AMDGPU_BACKEND__KFD,
	.attach = kfd_attach,
	.render_minor = kfd_render_minor,
	.owns_vma = kfd_owns_vma,
	.open_own = kfd_open_own,
	.open_render = kfd_open_render,
	.vma_kind = kfd_vma_kind,
	.render_map_fd = kfd_render_map_fd,
	.kfd_map_fd = kfd_map_fd,
	.open_for_resume = kfd_open_for_resume,
	.close = kfd_close,
	.criu_op = kfd_criu_op,
	.engine_open = kfd_engine_open,
	.engine_close = kfd_engine_close,
	.next_data = kfd_next_data,
	.bo_to_file = kfd_bo_to_file,
	.file_to_bo = kfd_file_to_bo,
};
