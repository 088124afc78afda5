/*
 * The KFD EMULATOR backend (test/gpu/kfd-emu, libkfdemu), built into the test build of
 * the plugin only (AMDGPU_EMULATOR, test/gpu/plugin/): an emulator, not a GPU. A task's
 * /dev/kfd and render nodes are its Unix sockets to the emulator; their VMAs map the
 * emulator's memfds "kfdemu-renderD<minor>" and "kfdemu-kfd"; BO contents move through
 * the emulator's copy engine, addressed by the BOs' dma-bufs, as SDMA on hardware.
 */
#include <errno.h>
#include <stdio.h>
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

#define EMU_RENDER_MEMFD "/memfd:kfdemu-renderD"
#define EMU_KFD_MEMFD "/memfd:kfdemu-kfd"

struct amdgpu_dev {
	struct kfdemu_conn *conn;
};

/* The emulator's copy engine, reached through a render node connection (it makes no process). */
struct amdgpu_engine {
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

static void emu_close(struct amdgpu_dev *dev)
{
	if (!dev)
		return;
	kfdemu_close(dev->conn);
	free(dev);
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

/* What the task's fd is to the emulator; -ENOTSUP when it is not the emulator's at all. */
static int identify(int task_fd, struct amdgpu_dev **dev, struct kfdemu_identity *id)
{
	int ret;

	if (!is_emulator_socket(task_fd))
		return -ENOTSUP;
	ret = emu_connect(dev);
	if (!ret)
		ret = kfdemu_identify((*dev)->conn, task_fd, id);
	if (ret) {
		pr_err("KFD emulator: cannot tell what the task's socket is: %s\n", strerror(-ret));
		emu_close(*dev);
	}
	return ret;
}

static int emu_attach(int task_fd, struct amdgpu_dev **dev)
{
	struct kfdemu_identity id;
	int ret = identify(task_fd, dev, &id);

	if (ret)
		return ret;
	/* By the socket's inode: our own connection then acts on the task's process. */
	ret = id.kind == KFDEMU_FD_KFD ? kfdemu_attach((*dev)->conn, 0, id.sock_ino) : -ENOTSUP;
	if (ret && ret != -ENOTSUP)
		pr_err("KFD emulator: cannot attach to the process of socket inode %llu: %s\n",
		       (unsigned long long)id.sock_ino, strerror(-ret));
	if (ret)
		emu_close(*dev);
	return ret;
}

static int emu_render_minor(int task_fd, uint32_t *minor)
{
	struct kfdemu_identity id;
	struct amdgpu_dev *dev;
	int ret = identify(task_fd, &dev, &id);

	if (ret)
		return ret;
	emu_close(dev);
	if (id.kind != KFDEMU_FD_RENDER)
		return -ENOTSUP;
	*minor = id.render_minor;
	return 0;
}

static int emu_vma_kind(const char *path, enum amdgpu_vma_kind *kind, uint32_t *minor)
{
	if (sscanf(path, EMU_RENDER_MEMFD "%u", minor) == 1)
		*kind = AMDGPU_VMA_RENDER;
	else if (!strncmp(path, EMU_KFD_MEMFD, strlen(EMU_KFD_MEMFD)))
		*kind = AMDGPU_VMA_KFD;
	else
		return -ENOTSUP;
	return 0;
}

static int emu_owns_vma(int fd, const struct stat *st)
{
	enum amdgpu_vma_kind kind;
	char path[64], link[256];
	uint32_t minor;
	ssize_t len;

	(void)st;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	len = readlink(path, link, sizeof(link) - 1);
	if (len < 0)
		return -ENOTSUP;
	link[len] = '\0';
	return emu_vma_kind(link, &kind, &minor);
}

/* The connection is the caller's process's /dev/kfd: the fd handed back is what it keeps. */
static int emu_open_own(struct amdgpu_dev **dev_out, int *fd)
{
	int ret = emu_connect(dev_out);

	if (ret)
		return ret;
	*fd = dup(kfdemu_conn_fd((*dev_out)->conn));
	if (*fd < 0) {
		ret = -errno;
		pr_perror("dup of the KFD emulator socket");
		emu_close(*dev_out);
	}
	return ret;
}

static int emu_open_render(uint32_t minor, int *fd)
{
	struct kfdemu_conn *conn;
	int ret;

	kfdemu_set_log_fn(emu_log);
	ret = kfdemu_open_render(emu_socket_path(), minor, &conn);
	if (ret) {
		pr_err("cannot open the KFD emulator's renderD%u: %s\n", minor, strerror(-ret));
		return ret;
	}
	*fd = dup(kfdemu_conn_fd(conn));
	if (*fd < 0) {
		ret = -errno;
		pr_perror("dup of the KFD emulator socket");
	}
	kfdemu_close(conn);
	return ret;
}

/* A render node's BO space: asked on the node itself, which must hold the GPU's VM. */
static int emu_render_map_fd(int render_fd, int *map_fd)
{
	struct kfdemu_conn *conn;
	int sock = dup(render_fd), ret;

	if (sock < 0) {
		pr_perror("dup of a render node");
		return -errno;
	}
	ret = kfdemu_conn_wrap(sock, KFDEMU_CONN_RENDER, &conn);
	if (ret) {
		close(sock);
		return ret;
	}
	ret = kfdemu_get_mmap_fd(conn, map_fd);
	kfdemu_close(conn);
	if (ret)
		pr_err("KFD emulator: no BO space behind the render node: %s\n", strerror(-ret));
	return ret;
}

static int emu_kfd_map_fd(struct amdgpu_dev *dev, int *map_fd)
{
	int ret = kfdemu_get_mmap_fd(dev->conn, map_fd);

	if (ret)
		pr_err("KFD emulator: no /dev/kfd space for the process: %s\n", strerror(-ret));
	return ret;
}

static int emu_criu_op(struct amdgpu_dev *dev, struct kfd_ioctl_criu_args *args)
{
	return kfdemu_criu_op(dev->conn, args);
}

static int emu_engine_open(uint32_t minor, struct amdgpu_engine **engine_out)
{
	struct amdgpu_engine *engine = calloc(1, sizeof(*engine));
	int ret;

	if (!engine) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	kfdemu_set_log_fn(emu_log);
	ret = kfdemu_open_render(emu_socket_path(), minor, &engine->conn);
	if (ret) {
		pr_err("cannot reach the KFD emulator's copy engine on renderD%u: %s\n", minor,
		       strerror(-ret));
		free(engine);
		return ret;
	}
	*engine_out = engine;
	return 0;
}

static void emu_engine_close(struct amdgpu_engine *engine)
{
	if (!engine)
		return;
	kfdemu_close(engine->conn);
	free(engine);
}

static int emu_next_data(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_size,
			 uint64_t from, uint64_t *start, uint64_t *end)
{
	if (from >= bo_size)
		return -ENXIO;
	return kfdemu_next_data(engine->conn, bo_fd, from, start, end);
}

static int emu_bo_to_file(struct amdgpu_engine *engine, int bo_fd, uint64_t bo_off, int file_fd,
			  uint64_t file_off, uint64_t len)
{
	return kfdemu_copy(engine->conn, KFDEMU_COPY_FROM_BO, bo_fd, bo_off, file_fd, file_off,
			   len);
}

static int emu_file_to_bo(struct amdgpu_engine *engine, int file_fd, uint64_t file_off, int bo_fd,
			  uint64_t bo_off, uint64_t len)
{
	return kfdemu_copy(engine->conn, KFDEMU_COPY_TO_BO, bo_fd, bo_off, file_fd, file_off, len);
}

const struct amdgpu_dev_ops amdgpu_dev_emu_ops = {
	.name = "KFD EMULATOR",
	.backend = AMDGPU_BACKEND__KFD_EMULATOR,
	.attach = emu_attach,
	.render_minor = emu_render_minor,
	.owns_vma = emu_owns_vma,
	.open_own = emu_open_own,
	.open_render = emu_open_render,
	.vma_kind = emu_vma_kind,
	.render_map_fd = emu_render_map_fd,
	.kfd_map_fd = emu_kfd_map_fd,
	.open_for_resume = emu_connect,
	.close = emu_close,
	.criu_op = emu_criu_op,
	.engine_open = emu_engine_open,
	.engine_close = emu_engine_close,
	.next_data = emu_next_data,
	.bo_to_file = emu_bo_to_file,
	.file_to_bo = emu_file_to_bo,
};
