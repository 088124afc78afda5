/*
 * Test plugin "testdev": takes TESTDEV_PATH (/dev/kmsg) fds (a device the core does not handle) and
 * exercises the restore timeline of Documentation/design.md §4 the way the GPU plugin does:
 *   init(RESTORE)        parks one end of a socket pair in fdstore;
 *   POST_FORKING         starts a worker thread in criu serving that socket;
 *   RESTORE_EXT_FILE     (in the task) fetches the socket with fdstore_get(), sends
 *                        "ping", and waits for the worker's "pong": both must run at once;
 *   RESUME_DEVICES_LATE  joins the worker and writes a flag into the task's memory, which
 *                        the test program must see before it runs another loop iteration.
 * Dump reads the addresses from the file the program writes ($CRIU_TESTDEV_ADDRS).
 * It also takes the program's shared mappings of the TESTDEV_VMA_NAME memfd:
 *   HANDLE_DEVICE_VMA    (criu) saves the memfd's contents in testdev-vma.img;
 *   UPDATE_VMA_MAP       (the task) re-creates the memfd from it, once per task, and
 *                        returns it for every VMA, at the dumped offsets.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOG_PREFIX "testdev: "
#include "criu-plugin.h"
#include "testdev.h"

#define EXCHANGE_TIMEOUT_MS 30000

/* What the dump saves per fd, in testdev-ID.img (text). */
struct testdev_image {
	int pid;
	uint64_t flag_addr, iters_addr, expected_addr;
	uint64_t iters_at_dump;
	int flags;
};

static int store_id = -1; /* the task's end of the socket pair, in fdstore */
static int server_sk = -1; /* criu's end, served by the worker */
static pthread_t worker;
static bool worker_running;
static int worker_status;
static bool worker_stopping; /* set by exit() before it shuts the socket: not an error */
static int pinged_pid, pinged_id;

static int image_name(char *buf, size_t size, int id)
{
	return snprintf(buf, size, "testdev-%d.img", id);
}

static int write_image(int id, const struct testdev_image *img)
{
	char name[64];
	FILE *f;
	int fd;

	image_name(name, sizeof(name), id);
	fd = openat(criu_get_image_dir(), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		pr_perror("cannot create %s", name);
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	fprintf(f, "%d %" PRIx64 " %" PRIx64 " %" PRIx64 " %" PRIu64 " %d\n", img->pid, img->flag_addr,
		img->iters_addr, img->expected_addr, img->iters_at_dump, img->flags);
	return fclose(f) ? -EIO : 0;
}

/* -ENOENT when the id is not ours. */
static int read_image(int id, struct testdev_image *img)
{
	char name[64];
	FILE *f;
	int fd, n;

	image_name(name, sizeof(name), id);
	fd = openat(criu_get_image_dir(), name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	n = fscanf(f, "%d %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNu64 " %d", &img->pid, &img->flag_addr,
		   &img->iters_addr, &img->expected_addr, &img->iters_at_dump, &img->flags);
	fclose(f);
	if (n != 6) {
		pr_err("%s is corrupt\n", name);
		return -EINVAL;
	}
	return 0;
}

static int task_mem_io(int pid, uint64_t addr, uint64_t *val, bool write)
{
	char path[32];
	ssize_t done;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("open %s", path);
		return -EIO;
	}
	done = write ? pwrite(fd, val, sizeof(*val), addr) : pread(fd, val, sizeof(*val), addr);
	close(fd);
	if (done != sizeof(*val)) {
		pr_perror("%s of %s at %#" PRIx64, write ? "write" : "read", path, addr);
		return -EIO;
	}
	return 0;
}

/* ---- dump ---- */

static int testdev_dump_ext_file(int fd, int id)
{
	struct testdev_image img;
	const char *addrs = getenv("CRIU_TESTDEV_ADDRS");
	struct stat st;
	FILE *f;
	int ret;

	if (fstat(fd, &st) || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(TESTDEV_MAJOR, TESTDEV_MINOR))
		return -ENOTSUP;
	f = addrs ? fopen(addrs, "r") : NULL;
	if (!f) {
		pr_err("a %s fd, but no readable $CRIU_TESTDEV_ADDRS\n", TESTDEV_PATH);
		return -EINVAL;
	}
	ret = fscanf(f, "%d %" SCNx64 " %" SCNx64 " %" SCNx64, &img.pid, &img.flag_addr, &img.iters_addr,
		     &img.expected_addr);
	fclose(f);
	if (ret != 4) {
		pr_err("%s is malformed\n", addrs);
		return -EINVAL;
	}
	ret = task_mem_io(img.pid, img.iters_addr, &img.iters_at_dump, false);
	if (ret)
		return ret;
	img.flags = fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK);
	pr_info("file %d: task %d stopped after %" PRIu64 " iterations\n", id, img.pid, img.iters_at_dump);
	return write_image(id, &img);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, testdev_dump_ext_file)

/* ---- the memfd mapped as a device ---- */

#define VMA_IMAGE "testdev-vma.img"

/* Whether path (a /proc link, or UPDATE_VMA_MAP's path) names the test's memfd. */
static bool is_testdev_memfd(const char *path)
{
	static const char prefix[] = "/memfd:" TESTDEV_VMA_NAME " ";

	return !strncmp(path, prefix, sizeof(prefix) - 1);
}

static int copy_fd(int dst, int src, off_t size, const char *what)
{
	char buf[4096];
	off_t off;

	for (off = 0; off < size;) {
		ssize_t got = pread(src, buf, sizeof(buf), off);

		if (got <= 0 || pwrite(dst, buf, got, off) != got) {
			pr_err("%s: copy failed at %lld: %s\n", what, (long long)off,
			       got < 0 ? strerror(errno) : "short read or write");
			return -EIO;
		}
		off += got;
	}
	return 0;
}

/* Both windows map the one memfd: saving it again for the second is harmless. */
static int testdev_handle_device_vma(int fd, const struct stat *st)
{
	char proc[64], link[256];
	ssize_t len;
	int img, ret;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	len = readlink(proc, link, sizeof(link) - 1);
	if (len < 0)
		return -ENOTSUP;
	link[len] = '\0';
	if (!is_testdev_memfd(link))
		return -ENOTSUP;
	img = openat(criu_get_image_dir(), VMA_IMAGE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (img < 0) {
		pr_perror("cannot create %s", VMA_IMAGE);
		return -EIO;
	}
	ret = copy_fd(img, fd, st->st_size, VMA_IMAGE);
	close(img);
	if (!ret)
		pr_info("memfd %s: %lld bytes saved\n", link, (long long)st->st_size);
	return ret;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, testdev_handle_device_vma)

/*
 * In the task. The first VMA gets the new memfd itself, later ones a dup: criu closes
 * each returned fd once everything is mapped, so the task keeps no extra fd.
 */
static int restored_memfd = -1;

static int recreate_memfd(void)
{
	struct stat st;
	int img, fd, ret;

	img = openat(criu_get_image_dir(), VMA_IMAGE, O_RDONLY | O_CLOEXEC);
	if (img < 0 || fstat(img, &st)) {
		pr_perror("cannot open %s", VMA_IMAGE);
		if (img >= 0)
			close(img);
		return -EIO;
	}
	fd = memfd_create(TESTDEV_VMA_NAME, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, st.st_size)) {
		pr_perror("cannot create the memfd");
		ret = -EIO;
	} else {
		ret = copy_fd(fd, img, st.st_size, "memfd");
	}
	close(img);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	return fd;
}

static int testdev_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
				  uint64_t *new_pgoff, int *plugin_fd)
{
	int fd;

	if (!is_testdev_memfd(path) || getenv(TESTDEV_DECLINE_VMA_ENV))
		return -ENOTSUP;
	if (restored_memfd < 0) {
		restored_memfd = recreate_memfd();
		if (restored_memfd < 0)
			return restored_memfd;
		fd = restored_memfd;
	} else {
		fd = fcntl(restored_memfd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			pr_perror("dup of the memfd");
			return -errno;
		}
	}
	pr_info("vma %#" PRIx64 ": memfd fd %d at offset %#" PRIx64 "\n", addr, fd, old_pgoff);
	*new_pgoff = old_pgoff;
	*plugin_fd = fd;
	return 1;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, testdev_update_vma_map)

/* ---- restore ---- */

static int testdev_init(int stage)
{
	int sks[2];

	if (stage != CR_PLUGIN_STAGE__RESTORE)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sks)) {
		pr_perror("socketpair");
		return -errno;
	}
	/* fdstore exists before plugins are initialised: this is what the test checks. */
	store_id = fdstore_add(sks[1]);
	close(sks[1]);
	if (store_id < 0) {
		close(sks[0]);
		return store_id;
	}
	server_sk = sks[0];
	pr_info("socket parked in fdstore as %d\n", store_id);
	return 0;
}

static int wait_readable(int sk)
{
	struct pollfd pfd = { .fd = sk, .events = POLLIN };
	int ret = poll(&pfd, 1, EXCHANGE_TIMEOUT_MS);

	if (ret < 0)
		return -errno;
	return ret ? 0 : -ETIMEDOUT;
}

static void *worker_main(void *arg)
{
	char msg[64];
	ssize_t len;
	int ret;

	(void)arg;
	ret = wait_readable(server_sk);
	len = ret ? -1 : recv(server_sk, msg, sizeof(msg) - 1, 0);
	if (len <= 0 && __atomic_load_n(&worker_stopping, __ATOMIC_ACQUIRE)) {
		worker_status = -ECANCELED;
		return NULL;
	}
	if (len <= 0) {
		pr_err("worker: no ping from the task: %s\n", ret ? strerror(-ret) : "connection closed");
		worker_status = ret ? ret : -ECONNRESET;
		return NULL;
	}
	msg[len] = '\0';
	if (sscanf(msg, "ping %d %d", &pinged_pid, &pinged_id) != 2 ||
	    send(server_sk, "pong", 4, MSG_NOSIGNAL) != 4) {
		pr_err("worker: bad exchange with the task (got \"%s\")\n", msg);
		worker_status = -EPROTO;
		return NULL;
	}
	pr_info("worker: task %d pinged for file %d, ponged\n", pinged_pid, pinged_id);
	return NULL;
}

static int testdev_post_forking(void)
{
	int ret;

	if (server_sk < 0)
		return 0;
	ret = pthread_create(&worker, NULL, worker_main, NULL);
	if (ret) {
		pr_err("cannot start the worker: %s\n", strerror(ret));
		return -ret;
	}
	worker_running = true;
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, testdev_post_forking)

/* In the task: only succeeds if criu's worker (started in POST_FORKING) answers now. */
static int exchange_with_worker(int id)
{
	char msg[64];
	int sk, len, ret;

	sk = fdstore_get(store_id);
	if (sk < 0)
		return sk;
	len = snprintf(msg, sizeof(msg), "ping %d %d", getpid(), id);
	ret = send(sk, msg, len, MSG_NOSIGNAL) == len ? 0 : -errno;
	if (!ret)
		ret = wait_readable(sk);
	if (!ret && (recv(sk, msg, sizeof(msg), 0) != 4 || memcmp(msg, "pong", 4)))
		ret = -EPROTO;
	close(sk);
	if (ret)
		pr_err("file %d: no answer from criu's worker: %s\n", id, strerror(-ret));
	return ret;
}

static int testdev_restore_ext_file(int id, bool *retry_needed)
{
	struct testdev_image img;
	int fd, ret;

	(void)retry_needed;
	ret = read_image(id, &img);
	if (ret)
		return ret == -ENOENT ? -ENOTSUP : ret;
	ret = exchange_with_worker(id);
	if (ret)
		return ret;
	fd = open(TESTDEV_PATH, img.flags | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("file %d: open %s", id, TESTDEV_PATH);
		return -errno;
	}
	return fd;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, testdev_restore_ext_file)

static int join_worker(void)
{
	if (worker_running) {
		pthread_join(worker, NULL);
		worker_running = false;
	}
	return worker_status;
}

static int testdev_resume_devices_late(int pid)
{
	struct testdev_image img;
	uint64_t magic = TESTDEV_MAGIC;
	int ret;

	if (server_sk < 0)
		return -ENOTSUP;
	ret = join_worker();
	if (ret)
		return ret;
	if (pid != pinged_pid)
		return -ENOTSUP;
	ret = read_image(pinged_id, &img);
	/* expected first: the program leaves its loop as soon as it sees the flag. */
	if (!ret)
		ret = task_mem_io(pid, img.expected_addr, &img.iters_at_dump, true);
	if (!ret)
		ret = task_mem_io(pid, img.flag_addr, &magic, true);
	return ret;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, testdev_resume_devices_late)

/* On a failed restore the worker may still wait for a ping: wake it by shutting its socket. */
static void testdev_exit(int stage, int ret)
{
	(void)ret;
	if (stage != CR_PLUGIN_STAGE__RESTORE || server_sk < 0)
		return;
	__atomic_store_n(&worker_stopping, true, __ATOMIC_RELEASE);
	shutdown(server_sk, SHUT_RDWR);
	join_worker();
	close(server_sk);
	server_sk = -1;
}

CR_PLUGIN_REGISTER("testdev", testdev_init, testdev_exit)
