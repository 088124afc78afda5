/*
 * emu_selftest: unit test of the KFD EMULATOR (kfd-emu) and libkfdemu. Starts its own
 * emulator daemons, exercises every op (BOs, kernels, topology, the CRIU ops end to end
 * across two emulators with different gpu ids), > 253 BOs, > 4 GiB of sparse BOs, clients
 * dying mid-command and partial messages. Prints "N passed, N failed".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libkfdemu.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define PAGE 4096ULL

struct emu_daemon {
	pid_t pid;
	char dir[64];
	char socket_path[128];
	char topology_dir[128];
};

static char emu_binary[PATH_MAX];
static struct emu_daemon main_emu;    /* gpu ids 0x1e0a, 0x2b4c */
static struct emu_daemon restore_emu; /* other gpu ids, same model: forces id mapping */
static struct emu_daemon chunky_emu;  /* replies in 7-byte pieces */

#define CHECK(cond, fmt, ...)                                                                 \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			printf("    FAIL line %d: %s: " fmt "\n", __LINE__, #cond, ##__VA_ARGS__); \
			return -1;                                                             \
		}                                                                              \
	} while (0)

/* ---- daemons ---- */

static int wait_for_file(const char *path)
{
	for (int i = 0; i < 500; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	return -1;
}

static int start_daemon(struct emu_daemon *emu, const char *name, const char *gpu_a,
			const char *gpu_b, const char *extra)
{
	char pidfile[160], logfile[160];

	snprintf(emu->dir, sizeof(emu->dir), "/tmp/kfdemu-%s.XXXXXX", name);
	if (!mkdtemp(emu->dir))
		return -1;
	snprintf(emu->socket_path, sizeof(emu->socket_path), "%s/sock", emu->dir);
	snprintf(emu->topology_dir, sizeof(emu->topology_dir), "%s/topology", emu->dir);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", emu->dir);
	snprintf(logfile, sizeof(logfile), "%s/log", emu->dir);
	emu->pid = fork();
	if (emu->pid == 0) {
		execl(emu_binary, emu_binary, "-s", emu->socket_path, "-t", emu->topology_dir, "-p",
		      pidfile, "-l", logfile, "-v", "4", "-g", gpu_a, "-g", gpu_b,
		      extra ? extra : NULL, NULL);
		_exit(127);
	}
	return emu->pid > 0 ? wait_for_file(pidfile) : -1;
}

static bool daemon_alive(const struct emu_daemon *emu)
{
	return waitpid(emu->pid, NULL, WNOHANG) == 0;
}

static int stop_daemon(struct emu_daemon *emu)
{
	int status = -1;
	char cmd[128];

	if (emu->pid <= 0)
		return 0;
	kill(emu->pid, SIGTERM);
	waitpid(emu->pid, &status, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", emu->dir);
	if (system(cmd))
		printf("    (could not remove %s)\n", emu->dir);
	emu->pid = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *entry;
	int count = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((entry = readdir(dir)))
		count += entry->d_name[0] != '.';
	closedir(dir);
	return count;
}

/* Connections closed by earlier tests are torn down by daemon threads: wait until stable. */
static int settled_fd_count(pid_t pid)
{
	int count = count_fds(pid), stable = 0;

	for (int i = 0; i < 200 && stable < 5; i++) {
		int now;

		usleep(10000);
		now = count_fds(pid);
		stable = now == count ? stable + 1 : 0;
		count = now;
	}
	return count;
}

/* The daemon frees a dead client's state on its own thread: give it a moment. */
static uint64_t vram_used_settled(struct kfdemu_conn *conn, uint64_t expected)
{
	struct kfdemu_gpu_info gpus[8];
	uint64_t used = 0;

	for (int i = 0; i < 200; i++) {
		uint32_t nr_gpus = 8;

		if (kfdemu_get_gpus(conn, gpus, &nr_gpus))
			return UINT64_MAX;
		used = 0;
		for (uint32_t g = 0; g < nr_gpus; g++)
			used += gpus[g].vram_used;
		if (used == expected)
			break;
		usleep(10000);
	}
	return used;
}

/* ---- helpers on BO contents: data extents only, so sparse BOs stay cheap ---- */

static uint64_t fd_checksum(int fd, uint64_t size)
{
	static char buf[MIB];
	uint64_t sum = 0;
	off_t pos = 0;

	while ((uint64_t)pos < size) {
		off_t data = lseek(fd, pos, SEEK_DATA);
		off_t hole;

		if (data < 0)
			break;
		hole = lseek(fd, data, SEEK_HOLE);
		for (pos = data; pos < hole;) {
			size_t len = hole - pos < (off_t)sizeof(buf) ? (size_t)(hole - pos) : sizeof(buf);

			if (pread(fd, buf, len, pos) != (ssize_t)len)
				return 0;
			sum += kfdemu_checksum(buf, len, pos);
			pos += len;
		}
	}
	return sum;
}

static int copy_extents(int from, int to, uint64_t size)
{
	static char buf[MIB];
	off_t pos = 0;

	while ((uint64_t)pos < size) {
		off_t data = lseek(from, pos, SEEK_DATA);
		off_t hole;

		if (data < 0)
			return errno == ENXIO ? 0 : -1;
		hole = lseek(from, data, SEEK_HOLE);
		for (pos = data; pos < hole;) {
			size_t len = hole - pos < (off_t)sizeof(buf) ? (size_t)(hole - pos) : sizeof(buf);

			if (pread(from, buf, len, pos) != (ssize_t)len ||
			    pwrite(to, buf, len, pos) != (ssize_t)len)
				return -1;
			pos += len;
		}
	}
	return 0;
}

/* ---- basic ops ---- */

static int test_topology(void)
{
	struct kfdemu_gpu_info gpus[8];
	struct kfdemu_conn *conn;
	uint32_t nr_gpus = 8;
	char path[256], line[256];
	bool saw_device_id = false;
	unsigned int gpu_id;
	FILE *file;

	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_conn_pid(conn) == (uint32_t)getpid(), "pid %u", kfdemu_conn_pid(conn));
	CHECK(kfdemu_get_gpus(conn, gpus, &nr_gpus) == 0 && nr_gpus == 2, "%u gpus", nr_gpus);
	kfdemu_close(conn);
	CHECK(gpus[0].gpu_id == 0x1e0a && gpus[1].gpu_id == 0x2b4c, "ids %#x %#x", gpus[0].gpu_id,
	      gpus[1].gpu_id);
	for (uint32_t i = 0; i < nr_gpus; i++) {
		snprintf(path, sizeof(path), "%s/nodes/%u/gpu_id", main_emu.topology_dir,
			 gpus[i].node_id);
		file = fopen(path, "r");
		CHECK(file && fscanf(file, "%u", &gpu_id) == 1, "read %s", path);
		fclose(file);
		CHECK(gpu_id == gpus[i].gpu_id, "%s has %u", path, gpu_id);
	}
	snprintf(path, sizeof(path), "%s/nodes/0/gpu_id", main_emu.topology_dir);
	file = fopen(path, "r");
	CHECK(file && fscanf(file, "%u", &gpu_id) == 1 && gpu_id == 0, "CPU node gpu_id");
	fclose(file);
	snprintf(path, sizeof(path), "%s/nodes/1/properties", main_emu.topology_dir);
	file = fopen(path, "r");
	CHECK(file, "open %s", path);
	while (fgets(line, sizeof(line), file))
		saw_device_id |= strcmp(line, "device_id 29711\n") == 0;
	fclose(file);
	CHECK(saw_device_id, "device_id 0x740f in %s", path);
	return 0;
}

static int test_bo_kernels_and_mapping(void)
{
	struct kfdemu_bo_info vram, gtt;
	struct kfdemu_conn *conn;
	uint64_t sum, expected;
	uint32_t *map;

	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 4 * MIB, 0, &vram) == 0,
	      "alloc VRAM");
	CHECK(kfdemu_alloc_bo(conn, 0x2b4c, KFD_IOC_ALLOC_MEM_FLAGS_GTT, MIB, 0, &gtt) == 0,
	      "alloc GTT");
	CHECK(vram.handle >> 32 == 0x1e0a && gtt.handle >> 32 == 0x2b4c, "handles encode gpu id");
	CHECK(vram.va_addr && vram.mmap_offset != gtt.mmap_offset, "va and offsets assigned");
	CHECK(vram_used_settled(conn, 4 * MIB) == 4 * MIB, "VRAM accounted");

	CHECK(kfdemu_map_bo(conn, &vram, (void **)&map) == 0, "map");
	CHECK(kfdemu_bo_fill(conn, vram.handle, MIB, 2 * MIB, 0xa5a5a5a5) == 0, "fill");
	CHECK(map[MIB / 4] == 0xa5a5a5a5 && map[MIB / 4 - 1] == 0 && map[3 * MIB / 4] == 0,
	      "fill visible through the mapping, only in its range");
	CHECK(kfdemu_bo_add(conn, vram.handle, MIB, 8, 3) == 0, "add");
	CHECK(map[MIB / 4] == 0xa5a5a5a8 && map[MIB / 4 + 2] == 0xa5a5a5a5, "add result");
	map[5] = 0x12345678; /* written by the CPU, seen by the "device" */
	CHECK(kfdemu_bo_checksum(conn, vram.handle, 0, vram.size, &sum) == 0, "checksum");
	expected = kfdemu_checksum(map, vram.size, 0);
	CHECK(sum == expected && sum, "device %#llx vs host %#llx", (unsigned long long)sum,
	      (unsigned long long)expected);
	CHECK(kfdemu_bo_checksum(conn, vram.handle, MIB, MIB, &sum) == 0 &&
		      sum == kfdemu_checksum(map + MIB / 4, MIB, MIB),
	      "checksum of a sub-range");
	munmap(map, vram.size);

	CHECK(kfdemu_free_bo(conn, vram.handle) == 0, "free");
	CHECK(kfdemu_free_bo(conn, vram.handle) == -EINVAL, "double free refused");
	CHECK(vram_used_settled(conn, 0) == 0, "VRAM released");
	kfdemu_close(conn);
	return 0;
}

static int test_bad_requests(void)
{
	struct kfdemu_bo_info bo, other;
	struct kfdemu_conn *conn;
	uint64_t sum;

	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, 0, MIB, 0, &bo) == -EINVAL, "no memory kind");
	CHECK(kfdemu_alloc_bo(conn, 0x9999, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0, &bo) == -EINVAL,
	      "unknown gpu");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 1000, 0, &bo) == -EINVAL,
	      "size not page aligned");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 64 * GIB, 0, &bo) ==
		      -ENOMEM,
	      "more than the VRAM");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0x40000000, &bo) == 0,
	      "alloc at a chosen va");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_GTT, MIB, 0x40080000, &other) ==
		      -EINVAL,
	      "overlapping va refused");
	CHECK(kfdemu_alloc_bo(conn, 0x2b4c, KFD_IOC_ALLOC_MEM_FLAGS_GTT, MIB, 0x40000000, &other) ==
		      0,
	      "same va on another gpu is fine");
	CHECK(kfdemu_bo_checksum(conn, bo.handle, MIB - 8, 16, &sum) == -EINVAL, "range past end");
	CHECK(kfdemu_bo_checksum(conn, bo.handle, 4, 8, &sum) == -EINVAL, "unaligned range");
	CHECK(kfdemu_bo_checksum(conn, 0xdead, 0, 8, &sum) == -EINVAL, "unknown handle");
	CHECK(kfdemu_attach(conn, 0, 123456789) == -ESRCH, "attach to an unknown socket");
	kfdemu_close(conn);
	return 0;
}

/* ---- CRIU ops end to end: an app child, a dump by the parent, a restored child ---- */

struct app_spec {
	uint32_t nr_bos;
	uint64_t bo_size;
	uint64_t big_bo_size; /* 0: none; else one extra sparse VRAM BO of this size */
};

struct dump_result {
	pid_t app_pid;
	struct kfd_ioctl_criu_args args;
	struct kfd_criu_device_bucket *devices;
	struct kfd_criu_bo_bucket *bos;
	void *priv;
	int *images;	    /* per BO: a sparse memfd holding its contents */
	uint64_t *checksums; /* per BO */
	uint64_t *handles;   /* per BO, as the app saw them */
};

static void write_full(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		_exit(90);
}

static int read_full(int fd, void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t got = read(fd, (char *)buf + done, len - done);

		if (got <= 0)
			return -1;
		done += got;
	}
	return 0;
}

/*
 * The app: allocate BOs across both GPUs, fill them with kernels and through mappings,
 * report its socket inode and BO handles, then wait to be killed (the dump kills it).
 */
static void app_main(const char *socket_path, const struct app_spec *spec, int report_fd)
{
	uint32_t nr = spec->nr_bos + (spec->big_bo_size ? 1 : 0);
	static const uint32_t gpu_ids[] = { 0x1e0a, 0x2b4c };
	struct kfdemu_conn *conn;
	struct stat st;

	if (kfdemu_connect(socket_path, &conn) || fstat(kfdemu_conn_fd(conn), &st))
		_exit(80);
	write_full(report_fd, &st.st_ino, sizeof(st.st_ino));
	write_full(report_fd, &nr, sizeof(nr));
	for (uint32_t i = 0; i < nr; i++) {
		bool big = i == spec->nr_bos;
		uint64_t size = big ? spec->big_bo_size : spec->bo_size;
		uint32_t flags = i % 3 == 2 ? KFD_IOC_ALLOC_MEM_FLAGS_GTT : KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
		struct kfdemu_bo_info bo;
		uint32_t *map;

		if (kfdemu_alloc_bo(conn, gpu_ids[i % 2], flags, size, 0, &bo))
			_exit(81);
		/* A few touched pages; on the big BO some lie beyond 4 GiB. */
		if (kfdemu_bo_fill(conn, bo.handle, 0, PAGE, 0x1000 + i) ||
		    kfdemu_bo_add(conn, bo.handle, 0, 64, i) ||
		    (big && kfdemu_bo_fill(conn, bo.handle, size - 2 * PAGE, PAGE, 0xbeef)) ||
		    (big && kfdemu_bo_fill(conn, bo.handle, 4 * GIB + 3 * PAGE, 8, 0x4242)))
			_exit(82);
		if (!big && i < 8) {
			if (kfdemu_map_bo(conn, &bo, (void **)&map))
				_exit(83);
			map[bo.size / 4 - 1] = 0xcafe0000 + i;
			munmap(map, bo.size);
		}
		write_full(report_fd, &bo.handle, sizeof(bo.handle));
	}
	pause();
	_exit(0);
}

static pid_t spawn_app(const struct app_spec *spec, uint64_t *sock_ino, uint32_t *nr_bos,
		       uint64_t **handles)
{
	int pipe_fds[2];
	pid_t pid;

	if (pipe(pipe_fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(pipe_fds[0]);
		app_main(main_emu.socket_path, spec, pipe_fds[1]);
	}
	close(pipe_fds[1]);
	if (read_full(pipe_fds[0], sock_ino, sizeof(*sock_ino)) ||
	    read_full(pipe_fds[0], nr_bos, sizeof(*nr_bos)))
		goto fail;
	*handles = calloc(*nr_bos, sizeof(uint64_t));
	if (read_full(pipe_fds[0], *handles, *nr_bos * sizeof(uint64_t)))
		goto fail;
	close(pipe_fds[0]);
	return pid;
fail:
	close(pipe_fds[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* What the plugin does at dump: PROCESS_INFO, CHECKPOINT, read contents, UNPAUSE. */
static int dump_app(const struct app_spec *spec, bool attach_by_pid, struct dump_result *dump)
{
	struct kfd_ioctl_criu_args *args = &dump->args;
	struct kfdemu_conn *conn;
	uint64_t sock_ino;
	uint32_t nr_bos;

	dump->app_pid = spawn_app(spec, &sock_ino, &nr_bos, &dump->handles);
	CHECK(dump->app_pid > 0, "app did not start");
	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_attach(conn, attach_by_pid ? dump->app_pid : 0, attach_by_pid ? 0 : sock_ino) ==
		      0,
	      "attach");
	*args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_PROCESS_INFO };
	CHECK(kfdemu_criu_op(conn, args) == 0, "PROCESS_INFO");
	CHECK(args->num_bos == nr_bos && args->num_devices == 2 &&
		      args->pid == (uint32_t)dump->app_pid,
	      "PROCESS_INFO: %u BOs, %u devices, pid %u", args->num_bos, args->num_devices,
	      args->pid);
	dump->devices = calloc(args->num_devices, sizeof(*dump->devices));
	dump->bos = calloc(args->num_bos, sizeof(*dump->bos));
	dump->priv = calloc(1, args->priv_data_size);
	args->devices = (uintptr_t)dump->devices;
	args->bos = (uintptr_t)dump->bos;
	args->priv_data = (uintptr_t)dump->priv;
	args->op = KFD_CRIU_OP_CHECKPOINT;
	CHECK(kfdemu_criu_op(conn, args) == 0, "CHECKPOINT");

	dump->images = calloc(nr_bos, sizeof(int));
	dump->checksums = calloc(nr_bos, sizeof(uint64_t));
	for (uint32_t i = 0; i < nr_bos; i++) {
		struct kfd_criu_bo_bucket *bo = &dump->bos[i];

		CHECK(bo->dmabuf_fd != KFDEMU_INVALID_FD && bo->size && bo->addr, "bucket %u", i);
		CHECK(((uint64_t)bo->gpu_id << 32 | (dump->handles[i] & 0xffffffff)) ==
			      dump->handles[i],
		      "bucket %u gpu id %#x vs handle %#llx", i, bo->gpu_id,
		      (unsigned long long)dump->handles[i]);
		dump->images[i] = memfd_create("image", MFD_CLOEXEC);
		CHECK(dump->images[i] >= 0 && ftruncate(dump->images[i], bo->size) == 0, "image");
		CHECK(copy_extents(bo->dmabuf_fd, dump->images[i], bo->size) == 0, "read BO %u", i);
		dump->checksums[i] = fd_checksum(dump->images[i], bo->size);
		CHECK(dump->checksums[i], "BO %u has contents", i);
		close(bo->dmabuf_fd);
	}
	args->op = KFD_CRIU_OP_UNPAUSE;
	CHECK(kfdemu_criu_op(conn, args) == 0, "UNPAUSE");
	kfdemu_close(conn);
	kill_and_reap(dump->app_pid);
	return 0;
}

static void free_dump(struct dump_result *dump)
{
	for (uint32_t i = 0; dump->images && i < dump->args.num_bos; i++)
		close(dump->images[i]);
	free(dump->images);
	free(dump->checksums);
	free(dump->handles);
	free(dump->devices);
	free(dump->bos);
	free(dump->priv);
	memset(dump, 0, sizeof(*dump));
}

/*
 * The restored task: what the plugin does in RESTORE_EXT_FILE (RESTORE, fill contents from
 * the images through the returned fds), then the app resuming: its kernels must wait for
 * RESUME, then see exactly the dumped contents.
 */
static void restored_main(const struct dump_result *dump, const struct emu_daemon *emu,
			  int report_fd, int hold_fd)
{
	struct kfd_ioctl_criu_args args = dump->args;
	struct kfdemu_gpu_info gpus[8];
	struct kfd_criu_device_bucket devices[8];
	struct kfd_criu_bo_bucket *bos = calloc(args.num_bos, sizeof(*bos));
	struct kfdemu_conn *conn;
	uint32_t nr_gpus = 8;
	uint64_t status = 0;

	if (!bos || kfdemu_connect(emu->socket_path, &conn) || kfdemu_get_gpus(conn, gpus, &nr_gpus))
		_exit(70);
	/* Same model, same count: map the dumped gpus to this emulator's in order. */
	for (uint32_t i = 0; i < args.num_devices; i++) {
		devices[i] = dump->devices[i];
		devices[i].actual_gpu_id = gpus[i].gpu_id;
	}
	memcpy(bos, dump->bos, args.num_bos * sizeof(*bos));
	args.devices = (uintptr_t)devices;
	args.bos = (uintptr_t)bos;
	args.op = KFD_CRIU_OP_RESTORE;
	if (kfdemu_criu_op(conn, &args))
		_exit(71);
	for (uint32_t i = 0; i < args.num_bos; i++) {
		if (bos[i].dmabuf_fd == KFDEMU_INVALID_FD || bos[i].restored_offset == bos[i].offset ||
		    copy_extents(dump->images[i], bos[i].dmabuf_fd, bos[i].size))
			_exit(72);
		close(bos[i].dmabuf_fd);
	}
	write_full(report_fd, &status, sizeof(status));
	/* From here on: the app. These block until RESUME. */
	for (uint32_t i = 0; i < args.num_bos; i++) {
		uint64_t sum;

		if (kfdemu_bo_checksum(conn, dump->handles[i], 0, bos[i].size, &sum))
			_exit(73);
		write_full(report_fd, &sum, sizeof(sum));
	}
	/*
	 * Stay alive until the checker is done: once this process exits the emulator drops it,
	 * and a second RESUME would meet "no such process" instead of "already resumed".
	 */
	while (read(hold_fd, &status, 1) > 0)
		;
	_exit(0);
}

static int restore_and_verify(const struct dump_result *dump, const struct emu_daemon *emu)
{
	struct kfd_ioctl_criu_args resume = { .op = KFD_CRIU_OP_RESUME };
	struct pollfd pfd = { .events = POLLIN };
	struct kfdemu_conn *conn;
	int pipe_fds[2], hold_fds[2], status;
	uint64_t value;
	pid_t pid;

	CHECK(pipe(pipe_fds) == 0 && pipe(hold_fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(pipe_fds[0]);
		close(hold_fds[1]);
		restored_main(dump, emu, pipe_fds[1], hold_fds[0]);
	}
	close(pipe_fds[1]);
	close(hold_fds[0]);
	pfd.fd = pipe_fds[0];
	CHECK(read_full(pipe_fds[0], &value, sizeof(value)) == 0, "restored task failed early");
	CHECK(poll(&pfd, 1, 200) == 0, "a kernel ran before RESUME");
	CHECK(kfdemu_connect(emu->socket_path, &conn) == 0, "connect");
	resume.pid = pid;
	CHECK(kfdemu_criu_op(conn, &resume) == 0, "RESUME");
	CHECK(kfdemu_criu_op(conn, &resume) == -EINVAL, "second RESUME refused");
	for (uint32_t i = 0; i < dump->args.num_bos; i++) {
		CHECK(read_full(pipe_fds[0], &value, sizeof(value)) == 0, "checksum of BO %u", i);
		CHECK(value == dump->checksums[i], "BO %u: restored %#llx, dumped %#llx", i,
		      (unsigned long long)value, (unsigned long long)dump->checksums[i]);
	}
	close(pipe_fds[0]);
	close(hold_fds[1]);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "restored task status %#x", status);
	CHECK(vram_used_settled(conn, 0) == 0, "restored BOs freed when the task exited");
	kfdemu_close(conn);
	return 0;
}

static int run_criu_cycle(const struct app_spec *spec, bool attach_by_pid,
			  const struct emu_daemon *restore_into)
{
	struct dump_result dump = {};
	int ret;

	ret = dump_app(spec, attach_by_pid, &dump);
	if (!ret)
		ret = restore_and_verify(&dump, restore_into);
	if (dump.app_pid > 0)
		kill_and_reap(dump.app_pid);
	free_dump(&dump);
	return ret;
}

static int test_criu_two_gpus_remapped(void)
{
	struct app_spec spec = { .nr_bos = 12, .bo_size = 256 * 1024 };

	return run_criu_cycle(&spec, false, &restore_emu);
}

static int test_criu_300_bos(void)
{
	struct app_spec spec = { .nr_bos = 300, .bo_size = 2 * PAGE };

	return run_criu_cycle(&spec, true, &main_emu);
}

static int test_criu_sparse_over_4gib(void)
{
	struct app_spec spec = { .nr_bos = 2, .bo_size = 1 * GIB, .big_bo_size = 5 * GIB };

	return run_criu_cycle(&spec, false, &restore_emu);
}

static int test_criu_through_partial_replies(void)
{
	struct app_spec spec = { .nr_bos = 260, .bo_size = PAGE };
	struct emu_daemon saved = main_emu;
	int ret;

	/* The whole cycle against the daemon that answers in 7-byte pieces. */
	main_emu = chunky_emu;
	ret = run_criu_cycle(&spec, false, &chunky_emu);
	main_emu = saved;
	return ret;
}

/* ---- CRIU op misuse ---- */

static int test_criu_errors(void)
{
	struct app_spec spec = { .nr_bos = 3, .bo_size = PAGE };
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_CHECKPOINT };
	struct dump_result dump = {};
	struct kfdemu_conn *conn, *fresh;
	uint32_t *priv_magic;
	uint64_t sock_ino;
	uint32_t nr_bos;

	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_criu_op(conn, &args) == -EINVAL, "CHECKPOINT before PROCESS_INFO");
	args.op = KFD_CRIU_OP_UNPAUSE;
	CHECK(kfdemu_criu_op(conn, &args) == -EINVAL, "UNPAUSE of a running process");
	args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_RESUME, .pid = 999999 };
	CHECK(kfdemu_criu_op(conn, &args) == -ESRCH, "RESUME of no process");
	args.op = 42;
	CHECK(kfdemu_criu_op(conn, &args) == -EINVAL, "unknown op");
	args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_CHECKPOINT, .num_bos = 1 };
	CHECK(kfdemu_criu_op(conn, &args) == -EFAULT, "NULL bucket array");

	/* Paused: the app's kernels wait; CHECKPOINT must be sized by PROCESS_INFO. */
	dump.app_pid = spawn_app(&spec, &sock_ino, &nr_bos, &dump.handles);
	CHECK(dump.app_pid > 0, "app");
	CHECK(kfdemu_attach(conn, 0, sock_ino) == 0, "attach");
	args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_PROCESS_INFO };
	CHECK(kfdemu_criu_op(conn, &args) == 0, "PROCESS_INFO");
	dump.args = args;
	dump.devices = calloc(args.num_devices, sizeof(*dump.devices));
	dump.bos = calloc(args.num_bos, sizeof(*dump.bos));
	dump.priv = calloc(1, args.priv_data_size);
	args.devices = (uintptr_t)dump.devices;
	args.bos = (uintptr_t)dump.bos;
	args.priv_data = (uintptr_t)dump.priv;
	args.op = KFD_CRIU_OP_CHECKPOINT;
	args.num_bos--;
	CHECK(kfdemu_criu_op(conn, &args) == -EINVAL, "CHECKPOINT with too few buckets");
	args.num_bos++;
	CHECK(kfdemu_criu_op(conn, &args) == 0, "CHECKPOINT");
	for (uint32_t i = 0; i < args.num_bos; i++)
		close(dump.bos[i].dmabuf_fd);
	args.op = KFD_CRIU_OP_UNPAUSE;
	CHECK(kfdemu_criu_op(conn, &args) == 0, "UNPAUSE");
	kill_and_reap(dump.app_pid);
	dump.app_pid = 0;
	CHECK(kfdemu_criu_op(conn, &args) == -ESRCH, "op on a process that is gone");
	kfdemu_close(conn);

	/* RESTORE refusals leave nothing behind. This process is the restoring task. */
	CHECK(kfdemu_connect(restore_emu.socket_path, &fresh) == 0, "connect");
	args.op = KFD_CRIU_OP_RESTORE;
	dump.devices[0].actual_gpu_id = 0x7777;
	CHECK(kfdemu_criu_op(fresh, &args) == -EINVAL, "RESTORE onto an unknown gpu");
	dump.devices[0].actual_gpu_id = 0x3a3a;
	dump.devices[1].actual_gpu_id = 0x4b4b;
	priv_magic = dump.priv;
	*priv_magic ^= 1;
	CHECK(kfdemu_criu_op(fresh, &args) == -EINVAL, "RESTORE with corrupt private data");
	*priv_magic ^= 1;
	args.priv_data_size -= 4;
	CHECK(kfdemu_criu_op(fresh, &args) == -EINVAL, "RESTORE with truncated private data");
	args.priv_data_size += 4;
	CHECK(vram_used_settled(fresh, 0) == 0, "failed RESTOREs created nothing");
	CHECK(kfdemu_criu_op(fresh, &args) == 0, "RESTORE");
	for (uint32_t i = 0; i < args.num_bos; i++)
		close(dump.bos[i].dmabuf_fd);
	CHECK(kfdemu_criu_op(fresh, &args) == -EINVAL, "second RESTORE refused");
	kfdemu_close(fresh);
	free_dump(&dump);
	return 0;
}

static int test_kernel_waits_while_paused(void)
{
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_PROCESS_INFO };
	struct kfdemu_conn *app, *tool;
	struct kfdemu_bo_info bo;
	int pipe_fds[2];
	uint64_t sum;
	pid_t pid;
	struct pollfd pfd = { .events = POLLIN };

	CHECK(pipe(pipe_fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		if (kfdemu_connect(main_emu.socket_path, &app) ||
		    kfdemu_alloc_bo(app, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0, &bo))
			_exit(60);
		write_full(pipe_fds[1], "a", 1);
		usleep(100000); /* the parent pauses us meanwhile */
		if (kfdemu_bo_checksum(app, bo.handle, 0, MIB, &sum))
			_exit(61);
		write_full(pipe_fds[1], "b", 1);
		_exit(0);
	}
	close(pipe_fds[1]);
	pfd.fd = pipe_fds[0];
	CHECK(read_full(pipe_fds[0], &sum, 1) == 0, "child ready");
	CHECK(kfdemu_connect(main_emu.socket_path, &tool) == 0, "connect");
	CHECK(kfdemu_attach(tool, pid, 0) == 0, "attach by pid");
	CHECK(kfdemu_criu_op(tool, &args) == 0, "PROCESS_INFO");
	CHECK(poll(&pfd, 1, 400) == 0, "kernel ran while paused");
	args.op = KFD_CRIU_OP_UNPAUSE;
	CHECK(kfdemu_criu_op(tool, &args) == 0, "UNPAUSE");
	CHECK(poll(&pfd, 1, 5000) == 1, "kernel did not run after UNPAUSE");
	kfdemu_close(tool);
	close(pipe_fds[0]);
	waitpid(pid, NULL, 0);
	return 0;
}

/* ---- robustness: raw sockets, dying clients ---- */

static int raw_connect(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int sock = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(addr.sun_path, path);
	if (connect(sock, (struct sockaddr *)&addr, sizeof(addr))) {
		close(sock);
		return -1;
	}
	return sock;
}

static struct kfdemu_frame hello_frame(uint32_t seq)
{
	return (struct kfdemu_frame){ .magic = KFDEMU_MAGIC,
				      .version = KFDEMU_PROTO_VERSION,
				      .type = KFDEMU_MSG_HELLO,
				      .seq = seq,
				      .payload_size = sizeof(struct kfdemu_hello) };
}

static int test_partial_request_bytes(void)
{
	struct kfdemu_frame frame = hello_frame(7);
	struct kfdemu_hello hello = { .client_version = KFDEMU_PROTO_VERSION };
	char bytes[sizeof(frame) + sizeof(hello)];
	struct kfdemu_msg reply;
	int sock = raw_connect(main_emu.socket_path);

	CHECK(sock >= 0, "connect");
	memcpy(bytes, &frame, sizeof(frame));
	memcpy(bytes + sizeof(frame), &hello, sizeof(hello));
	/* One byte per send, with pauses: the daemon must reassemble the message. */
	for (size_t i = 0; i < sizeof(bytes); i++) {
		CHECK(send(sock, bytes + i, 1, MSG_NOSIGNAL) == 1, "send byte %zu", i);
		if (i % 8 == 0)
			usleep(2000);
	}
	CHECK(kfdemu_wire_recv(sock, &reply) == 0, "reply");
	CHECK(reply.status == 0 && reply.seq == 7 && reply.payload_size ==
		      sizeof(struct kfdemu_hello_reply),
	      "status %d seq %u", reply.status, reply.seq);
	kfdemu_msg_release(&reply);
	close(sock);
	return 0;
}

static int expect_refusal(const char *path, const void *bytes, size_t len, int expected)
{
	struct kfdemu_msg reply;
	int sock = raw_connect(path);
	int ret;

	CHECK(sock >= 0, "connect");
	CHECK(send(sock, bytes, len, MSG_NOSIGNAL) == (ssize_t)len, "send");
	ret = kfdemu_wire_recv(sock, &reply);
	CHECK(ret == 0 && reply.status == expected, "recv %d, status %d, expected %d", ret,
	      reply.status, expected);
	kfdemu_msg_release(&reply);
	/* And then the daemon hangs up: the stream is out of step. */
	CHECK(kfdemu_wire_recv(sock, &reply) == -ENOTCONN, "connection not closed");
	close(sock);
	return 0;
}

static int test_protocol_errors(void)
{
	struct kfdemu_frame frame = hello_frame(1);
	char bytes[sizeof(frame) + sizeof(struct kfdemu_hello)] = {};
	int before = settled_fd_count(main_emu.pid);
	int sock, passed[4];
	char cbuf[CMSG_SPACE(sizeof(passed))];
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cmsg;

	frame.version = KFDEMU_PROTO_VERSION + 1;
	memcpy(bytes, &frame, sizeof(frame));
	if (expect_refusal(main_emu.socket_path, bytes, sizeof(bytes), -EPROTONOSUPPORT))
		return -1;
	frame = hello_frame(1);
	frame.type = KFDEMU_MSG_GET_GPUS;
	frame.payload_size = 0;
	if (expect_refusal(main_emu.socket_path, &frame, sizeof(frame), -EPROTO))
		return -1; /* request before HELLO */

	/* Bad magic: the daemon drops the connection without trusting the frame. */
	frame = hello_frame(1);
	frame.magic = 0xdeadbeef;
	sock = raw_connect(main_emu.socket_path);
	CHECK(sock >= 0 && send(sock, &frame, sizeof(frame), MSG_NOSIGNAL) == sizeof(frame), "send");
	close(sock);

	/* Unexpected fds in a request: refused and closed by the daemon, not leaked. */
	frame = hello_frame(1);
	memcpy(bytes, &frame, sizeof(frame));
	sock = raw_connect(main_emu.socket_path);
	for (int i = 0; i < 4; i++)
		passed[i] = memfd_create("stray", 0);
	iov = (struct iovec){ bytes, sizeof(bytes) };
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	cmsg = CMSG_FIRSTHDR(&mh);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(passed));
	memcpy(CMSG_DATA(cmsg), passed, sizeof(passed));
	CHECK(sendmsg(sock, &mh, MSG_NOSIGNAL) == sizeof(bytes), "sendmsg");
	for (int i = 0; i < 4; i++)
		close(passed[i]);
	usleep(100000);
	close(sock);

	CHECK(settled_fd_count(main_emu.pid) == before, "daemon fds %d, before %d", count_fds(main_emu.pid),
	      before);
	CHECK(daemon_alive(&main_emu), "daemon died");
	return 0;
}

/* Children that die in the middle of a message or of a command. */
static void die_mid_frame(void)
{
	struct kfdemu_frame frame = hello_frame(1);
	int sock = raw_connect(main_emu.socket_path);

	send(sock, &frame, sizeof(frame) / 2, MSG_NOSIGNAL);
	_exit(0);
}

static void die_mid_payload(void)
{
	struct kfdemu_frame frame = hello_frame(1);
	int sock = raw_connect(main_emu.socket_path);

	frame.payload_size = 4096;
	send(sock, &frame, sizeof(frame), MSG_NOSIGNAL);
	send(sock, "partial", 7, MSG_NOSIGNAL);
	_exit(0);
}

/* Ask for a long kernel on a fresh 256 MiB BO and vanish before the reply. */
static void die_during_kernel(void)
{
	struct kfdemu_kernel kernel = { .op = KFDEMU_KERNEL_FILL, .arg = 1, .length = 256 * MIB };
	struct kfdemu_msg request = { .type = KFDEMU_MSG_RUN_KERNEL, .seq = 99,
				      .payload = &kernel, .payload_size = sizeof(kernel) };
	struct kfdemu_conn *conn;
	struct kfdemu_bo_info bo;

	if (kfdemu_connect(main_emu.socket_path, &conn) ||
	    kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 256 * MIB, 0, &bo))
		_exit(50);
	kernel.handle = bo.handle;
	kfdemu_wire_send(kfdemu_conn_fd(conn), &request, 0);
	_exit(0);
}

/* Checkpoint an app with 300 BOs and vanish without reading the 300 fds of the reply. */
static void die_during_checkpoint(pid_t app_pid)
{
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_PROCESS_INFO };
	struct kfdemu_msg request = { .type = KFDEMU_MSG_CRIU_OP, .seq = 5,
				      .payload = &args, .payload_size = sizeof(args) };
	struct kfdemu_conn *conn;

	if (kfdemu_connect(main_emu.socket_path, &conn) || kfdemu_attach(conn, app_pid, 0) ||
	    kfdemu_criu_op(conn, &args))
		_exit(40);
	args.op = KFD_CRIU_OP_CHECKPOINT;
	kfdemu_wire_send(kfdemu_conn_fd(conn), &request, 0);
	_exit(0);
}

static int run_dying_child(void (*body)(void))
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		body();
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	return 0;
}

static int test_clients_dying_mid_command(void)
{
	struct app_spec spec = { .nr_bos = 300, .bo_size = PAGE };
	int before = settled_fd_count(main_emu.pid);
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_UNPAUSE };
	struct kfdemu_conn *conn;
	uint64_t sock_ino, *handles = NULL;
	uint32_t nr_bos;
	int status;
	pid_t app, pid;

	if (run_dying_child(die_mid_frame) || run_dying_child(die_mid_payload) ||
	    run_dying_child(die_during_kernel))
		return -1;

	app = spawn_app(&spec, &sock_ino, &nr_bos, &handles);
	free(handles);
	CHECK(app > 0, "app");
	pid = fork();
	if (pid == 0)
		die_during_checkpoint(app);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);

	/* The daemon still answers, the paused app can be unpaused, then everything is freed. */
	CHECK(daemon_alive(&main_emu), "daemon died");
	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect after the deaths");
	CHECK(kfdemu_attach(conn, app, 0) == 0, "attach");
	CHECK(kfdemu_criu_op(conn, &args) == 0, "UNPAUSE");
	kill_and_reap(app);
	CHECK(vram_used_settled(conn, 0) == 0, "dead clients' VRAM freed");
	kfdemu_close(conn);
	CHECK(settled_fd_count(main_emu.pid) == before, "daemon fds %d, before %d", count_fds(main_emu.pid),
	      before);
	return 0;
}

/* ---- main ---- */

struct test_case {
	const char *name;
	int (*run)(void);
};

static const struct test_case tests[] = {
	{ "topology", test_topology },
	{ "bo_kernels_and_mapping", test_bo_kernels_and_mapping },
	{ "bad_requests", test_bad_requests },
	{ "criu_two_gpus_remapped", test_criu_two_gpus_remapped },
	{ "criu_300_bos", test_criu_300_bos },
	{ "criu_sparse_over_4gib", test_criu_sparse_over_4gib },
	{ "criu_through_partial_replies", test_criu_through_partial_replies },
	{ "criu_errors", test_criu_errors },
	{ "kernel_waits_while_paused", test_kernel_waits_while_paused },
	{ "partial_request_bytes", test_partial_request_bytes },
	{ "protocol_errors", test_protocol_errors },
	{ "clients_dying_mid_command", test_clients_dying_mid_command },
};

static void find_emu_binary(const char *argv0)
{
	const char *env = getenv("KFDEMU_BIN");
	char self[PATH_MAX];
	ssize_t len;

	if (env) {
		snprintf(emu_binary, sizeof(emu_binary), "%s", env);
		return;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		snprintf(emu_binary, sizeof(emu_binary), "%s", argv0);
		return;
	}
	self[len] = '\0';
	*strrchr(self, '/') = '\0';
	if (snprintf(emu_binary, sizeof(emu_binary), "%s/kfd-emu", self) >= (int)sizeof(emu_binary))
		snprintf(emu_binary, sizeof(emu_binary), "kfd-emu");
}

static void quiet_log(int level, const char *msg)
{
	/* Refusals are expected here; only transport errors are worth showing. */
	if (level <= 1 && getenv("KFDEMU_SELFTEST_VERBOSE"))
		fprintf(stderr, "    libkfdemu: %s\n", msg);
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;

	(void)argc;
	find_emu_binary(argv[0]);
	kfdemu_set_log_fn(quiet_log);
	signal(SIGPIPE, SIG_IGN);
	printf("emu_selftest: KFD EMULATOR self-test (emulator, not a GPU)\n");
	if (start_daemon(&main_emu, "main", "0x1e0a", "0x2b4c", NULL) ||
	    start_daemon(&restore_emu, "restore", "0x3a3a", "0x4b4b", NULL) ||
	    start_daemon(&chunky_emu, "chunky", "0x1e0a", "0x2b4c", "--send-chunk=7")) {
		printf("cannot start %s\n", emu_binary);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		struct timespec start, end;
		int ret;

		clock_gettime(CLOCK_MONOTONIC, &start);
		ret = tests[i].run();
		clock_gettime(CLOCK_MONOTONIC, &end);
		printf("%s %s (%.2fs)\n", ret ? "FAIL" : "PASS", tests[i].name,
		       (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);
		if (ret)
			failed++;
		else
			passed++;
	}
	if (stop_daemon(&main_emu) || stop_daemon(&restore_emu) || stop_daemon(&chunky_emu)) {
		printf("FAIL daemons_exit_cleanly\n");
		failed++;
	} else {
		printf("PASS daemons_exit_cleanly\n");
		passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
