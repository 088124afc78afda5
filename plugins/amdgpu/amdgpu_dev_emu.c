/*
 * The KFD EMULATOR backend (test/gpu/kfd-emu, libkfdemu): an emulator, not a GPU. The
 * task's "device fd" is its Unix socket to the emulator; BO dma-buf fds are memfds, so
 * the ranges that hold data are found with SEEK_DATA/SEEK_HOLE and sparse BOs stay cheap.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "libkfdemu.h"
#include "amdgpu_dev.h"

struct amdgpu_dev {
	struct kfdemu_conn *conn;
};

static void emu_log(int level, const char *msg)
{
	print_on_level(level, "amdgpu: KFD EMULATOR client: %s\n", msg);
}

static const char *emu_socket_path(void)
{
	const char *path = getenv(KFDEMU_SOCKET_ENV);

	return path && path[0] ? path : KFDEMU_DEFAULT_SOCKET;
}

static int emu_connect(struct amdgpu_dev **dev_out)
{
	struct amdgpu_dev *dev = calloc(1, sizeof(*dev));
	int ret;

	if (!dev) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	kfdemu_set_log_fn(emu_log);
	ret = kfdemu_connect(emu_socket_path(), &dev->conn);
	if (ret) {
		pr_err("cannot connect to the KFD emulator at %s: %s\n", emu_socket_path(),
		       strerror(-ret));
		free(dev);
		return ret;
	}
	*dev_out = dev;
	return 0;
}

/* Ours when the socket's peer is the emulator's listening socket (getpeername names it). */
static bool is_emulator_socket(int fd)
{
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	struct stat st;

	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return false;
	memset(&addr, 0, sizeof(addr));
	if (getpeername(fd, (struct sockaddr *)&addr, &len) || addr.sun_family != AF_UNIX ||
	    len <= offsetof(struct sockaddr_un, sun_path))
		return false;
	return !strncmp(addr.sun_path, emu_socket_path(), sizeof(addr.sun_path));
}

static int emu_attach(int task_fd, struct amdgpu_dev **dev_out)
{
	struct amdgpu_dev *dev;
	struct stat st;
	int ret;

	if (!is_emulator_socket(task_fd) || fstat(task_fd, &st))
		return -ENOTSUP;
	ret = emu_connect(&dev);
	if (ret)
		return ret;
	/* By the socket's inode: our own connection then acts on the task's process. */
	ret = kfdemu_attach(dev->conn, 0, st.st_ino);
	if (ret) {
		pr_err("KFD emulator: cannot attach to the process of socket inode %lu: %s\n",
		       (unsigned long)st.st_ino, strerror(-ret));
		kfdemu_close(dev->conn);
		free(dev);
		return ret;
	}
	*dev_out = dev;
	return 0;
}

/* The connection is the caller's process's "device": the fd handed back is what the task keeps. */
static int emu_open_own(struct amdgpu_dev **dev_out, int *fd)
{
	int ret = emu_connect(dev_out);

	if (ret)
		return ret;
	*fd = dup(kfdemu_conn_fd((*dev_out)->conn));
	if (*fd < 0) {
		ret = -errno;
		pr_perror("dup of the KFD emulator socket");
		kfdemu_close((*dev_out)->conn);
		free(*dev_out);
	}
	return ret;
}

static void emu_close(struct amdgpu_dev *dev)
{
	if (!dev)
		return;
	kfdemu_close(dev->conn);
	free(dev);
}

static int emu_criu_op(struct amdgpu_dev *dev, struct kfd_ioctl_criu_args *args)
{
	return kfdemu_criu_op(dev->conn, args);
}

static int emu_next_data(int bo_fd, uint64_t bo_size, uint64_t from, uint64_t *start,
			 uint64_t *end)
{
	off_t data, hole;

	if (from >= bo_size)
		return -ENXIO;
	data = lseek(bo_fd, from, SEEK_DATA);
	if (data < 0)
		return errno == ENXIO ? -ENXIO : -errno;
	hole = lseek(bo_fd, data, SEEK_HOLE);
	if (hole < 0)
		return -errno;
	*start = data;
	*end = (uint64_t)hole < bo_size ? (uint64_t)hole : bo_size;
	return 0;
}

const struct amdgpu_dev_ops amdgpu_dev_emu_ops = {
	.name = "KFD EMULATOR",
	.attach = emu_attach,
	.open_own = emu_open_own,
	.open_for_resume = emu_connect,
	.close = emu_close,
	.criu_op = emu_criu_op,
	.next_data = emu_next_data,
	.bo_to_file = amdgpu_bo_to_file_mmap,
	.file_to_bo = amdgpu_file_to_bo_mmap,
};
