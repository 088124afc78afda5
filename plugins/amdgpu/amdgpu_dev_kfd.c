/*
 * The /dev/kfd backend: AMDKFD_IOC_CRIU_OP on the device fd, BO contents copied by the CPU
 * through an mmap of the BO's dma-buf fd. NEVER RUN ON HARDWARE (these machines have no
 * GPU); it builds, and the emulator backend shares every line of plugin logic above it.
 * Not done: SDMA copies through libdrm_amdgpu (faster, and needed for VRAM outside the
 * CPU-visible BAR); this CPU path is correct only for CPU-visible BOs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_dev.h"

#define KFD_DEVICE "/dev/kfd"

struct amdgpu_dev {
	int kfd_fd;
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

/* criu's fd shares the task's open file description: ioctls on it act on the task. */
static int kfd_attach(int task_fd, struct amdgpu_dev **dev)
{
	struct stat task_st, kfd_st;
	int fd, ret;

	if (fstat(task_fd, &task_st) || !S_ISCHR(task_st.st_mode) || stat(KFD_DEVICE, &kfd_st) ||
	    task_st.st_rdev != kfd_st.st_rdev)
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

/* A dma-buf has no holes to ask about: all of it may hold data. */
static int kfd_next_data(int bo_fd, uint64_t bo_size, uint64_t from, uint64_t *start,
			 uint64_t *end)
{
	(void)bo_fd;
	if (from >= bo_size)
		return -ENXIO;
	*start = from;
	*end = bo_size;
	return 0;
}

const struct amdgpu_dev_ops amdgpu_dev_kfd_ops = {
	.name = "/dev/kfd (never run on hardware)",
	.attach = kfd_attach,
	.open_own = kfd_open_own,
	.open_for_resume = kfd_open_for_resume,
	.close = kfd_close,
	.criu_op = kfd_criu_op,
	.next_data = kfd_next_data,
	.bo_to_file = amdgpu_bo_to_file_mmap,
	.file_to_bo = amdgpu_file_to_bo_mmap,
};
