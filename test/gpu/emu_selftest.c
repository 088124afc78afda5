/*
 * emu_selftest: unit test of the KFD EMULATOR (kfd-emu) and libkfdemu. Starts its own
 * emulator daemons, exercises every op (render nodes, BOs of every kind, kernels, the copy
 * engine, topology, queues, events, SVM, the CRIU ops end to end across two emulators with
 * different gpu ids and KFD's refusals), > 253 BOs, > 4 GiB of sparse BOs, clients dying
 * mid-command and partial messages. Prints "N passed, N failed".
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
#include <sys/uio.h>
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


/* ---- helpers ---- */

/* A file's checksum over its data extents only, so sparse images stay cheap. */
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
			size_t len = hole - pos < (off_t)sizeof(buf) ? (size_t)(hole - pos)
								     : sizeof(buf);

			if (pread(fd, buf, len, pos) != (ssize_t)len)
				return 0;
			sum += kfdemu_checksum(buf, len, pos);
			pos += len;
		}
	}
	return sum;
}

/* What the plugin does at dump: the ranges of a BO that hold data, through the copy engine. */
static int read_bo_into(struct kfdemu_conn *conn, int dmabuf_fd, uint64_t size, int image)
{
	uint64_t from = 0, start, end;
	int ret;

	while ((ret = kfdemu_next_data(conn, dmabuf_fd, from, &start, &end)) == 0) {
		if (end > size || kfdemu_copy(conn, KFDEMU_COPY_FROM_BO, dmabuf_fd, start, image,
					      start, end - start))
			return -1;
		from = end;
	}
	return ret == -ENXIO ? 0 : -1;
}

/* ... and at restore: the image's data extents into the BO. */
static int write_bo_from(struct kfdemu_conn *conn, int dmabuf_fd, uint64_t size, int image)
{
	off_t pos = 0;

	while ((uint64_t)pos < size) {
		off_t data = lseek(image, pos, SEEK_DATA), hole;

		if (data < 0)
			return errno == ENXIO ? 0 : -1;
		hole = lseek(image, data, SEEK_HOLE);
		if (kfdemu_copy(conn, KFDEMU_COPY_TO_BO, dmabuf_fd, data, image, data, hole - data))
			return -1;
		pos = hole;
	}
	return 0;
}

static int stats_settled(struct kfdemu_conn *conn, uint32_t processes, struct kfdemu_stats *stats)
{
	for (int i = 0; i < 300; i++) {
		memset(stats, 0, sizeof(*stats));
		if (kfdemu_stats(conn, stats))
			return -1;
		if (stats->nr_processes == processes)
			return 0;
		usleep(10000);
	}
	printf("    emulator holds %u processes, %u BOs, %u queues, %u connections\n",
	       stats->nr_processes, stats->nr_bos, stats->nr_queues, stats->nr_connections);
	return -1;
}

/*
 * Connections this process closed are torn down by daemon threads: wait until the
 * emulator has dropped this process, so the next test starts with a fresh one (a render
 * node connection makes none).
 */
static int wait_no_process(const struct emu_daemon *emu)
{
	struct kfdemu_stats stats;
	struct kfdemu_conn *render;
	int ret;

	if (kfdemu_open_render(emu->socket_path, 128, &render))
		return -1;
	ret = stats_settled(render, 0, &stats);
	kfdemu_close(render);
	return ret;
}

/* ---- basic ops ---- */

static int test_topology(void)
{
	struct kfdemu_gpu_info gpus[8];
	struct kfdemu_conn *conn, *render;
	uint32_t nr_gpus = 8;
	char path[256], line[256];
	bool saw_device_id = false, saw_minor = false;
	unsigned int gpu_id;
	FILE *file;

	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_conn_pid(conn) == (uint32_t)getpid(), "pid %u", kfdemu_conn_pid(conn));
	CHECK(kfdemu_get_gpus(conn, gpus, &nr_gpus) == 0 && nr_gpus == 2, "%u gpus", nr_gpus);
	CHECK(gpus[0].gpu_id == 0x1e0a && gpus[1].gpu_id == 0x2b4c, "ids %#x %#x", gpus[0].gpu_id,
	      gpus[1].gpu_id);
	CHECK(gpus[0].render_minor == 128 && gpus[1].render_minor == 129, "minors %u %u",
	      gpus[0].render_minor, gpus[1].render_minor);
	CHECK(kfdemu_open_render(main_emu.socket_path, 129, &render) == 0 &&
		      kfdemu_conn_gpu_id(render) == 0x2b4c,
	      "renderD129 is gpu 0x2b4c");
	kfdemu_close(render);
	CHECK(kfdemu_open_render(main_emu.socket_path, 130, &render) == -ENODEV, "no renderD130");
	kfdemu_close(conn);
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
	snprintf(path, sizeof(path), "%s/nodes/2/properties", main_emu.topology_dir);
	file = fopen(path, "r");
	CHECK(file, "open %s", path);
	while (fgets(line, sizeof(line), file)) {
		saw_device_id |= strcmp(line, "device_id 29711\n") == 0;
		saw_minor |= strcmp(line, "drm_render_minor 129\n") == 0;
	}
	fclose(file);
	CHECK(saw_device_id && saw_minor, "device_id 0x740f and renderD129 in %s", path);
	return 0;
}

static int test_bo_kernels_and_mapping(void)
{
	struct kfdemu_bo_info vram, gtt;
	struct kfdemu_device dev;
	struct kfdemu_stats stats;
	uint64_t sum, expected;
	uint32_t *map;
	char line[256], path[64];
	FILE *maps;
	bool render_mapping = false;

	CHECK(wait_no_process(&main_emu) == 0, "a fresh process");

	CHECK(kfdemu_device_open(main_emu.socket_path, &dev) == 0, "open the device");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 4 * MIB, 0, &vram) ==
		      0,
	      "alloc VRAM");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x2b4c, KFD_IOC_ALLOC_MEM_FLAGS_GTT, MIB, 0, &gtt) == 0,
	      "alloc GTT");
	CHECK(vram.handle >> 32 == 0x1e0a && gtt.handle >> 32 == 0x2b4c, "handles encode gpu id");
	CHECK(vram.va_addr && vram.mmap_offset != gtt.mmap_offset, "va and offsets assigned");
	CHECK(kfdemu_stats(dev.kfd, &stats) == 0 && stats.vram_used == 4 * MIB, "VRAM accounted");

	CHECK(kfdemu_device_map_bo(&dev, &vram, (void **)&map) == 0, "map through renderD128");
	snprintf(path, sizeof(path), "/proc/%d/maps", getpid());
	maps = fopen(path, "r");
	CHECK(maps, "open %s", path);
	while (fgets(line, sizeof(line), maps))
		render_mapping |= strtoull(line, NULL, 16) == (uintptr_t)map &&
				  strstr(line, "/memfd:kfdemu-renderD128");
	fclose(maps);
	CHECK(render_mapping, "the mapping is renderD128's");
	CHECK(kfdemu_bo_fill(dev.kfd, vram.handle, MIB, 2 * MIB, 0xa5a5a5a5) == 0, "fill");
	CHECK(map[MIB / 4] == 0xa5a5a5a5 && map[MIB / 4 - 1] == 0 && map[3 * MIB / 4] == 0,
	      "fill visible through the mapping, only in its range");
	CHECK(kfdemu_bo_add(dev.kfd, vram.handle, MIB, 8, 3) == 0, "add");
	CHECK(map[MIB / 4] == 0xa5a5a5a8 && map[MIB / 4 + 2] == 0xa5a5a5a5, "add result");
	map[5] = 0x12345678; /* written by the CPU, seen by the "device" */
	CHECK(kfdemu_bo_checksum(dev.kfd, vram.handle, 0, vram.size, &sum) == 0, "checksum");
	expected = kfdemu_checksum(map, vram.size, 0);
	CHECK(sum == expected && sum, "device %#llx vs host %#llx", (unsigned long long)sum,
	      (unsigned long long)expected);
	CHECK(kfdemu_bo_checksum(dev.kfd, vram.handle, MIB, MIB, &sum) == 0 &&
		      sum == kfdemu_checksum(map + MIB / 4, MIB, MIB),
	      "checksum of a sub-range");
	munmap(map, vram.size);

	CHECK(kfdemu_free_bo(dev.kfd, vram.handle) == 0, "free");
	CHECK(kfdemu_free_bo(dev.kfd, vram.handle) == -EINVAL, "double free refused");
	CHECK(kfdemu_stats(dev.kfd, &stats) == 0 && stats.vram_used == 0, "VRAM released");
	kfdemu_device_close(&dev);
	return 0;
}

/* What every ROCm process holds besides memory: doorbells, the MMIO page, userptr BOs. */
static int test_bo_kinds(void)
{
	struct kfdemu_bo_info doorbell, mmio, userptr, bad;
	struct kfdemu_device dev;
	struct kfdemu_identity id;
	uint64_t *bell, sum;
	uint32_t *host;
	int fd;

	CHECK(wait_no_process(&main_emu) == 0, "a fresh process");

	CHECK(kfdemu_device_open(main_emu.socket_path, &dev) == 0, "open the device");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
			      KFDEMU_DOORBELL_SLICE, 0, &doorbell) == 0 &&
		      doorbell.mmap_offset == KFDEMU_MMAP_OFFSET(KFDEMU_MMAP_TYPE_DOORBELL, 0x1e0a),
	      "doorbell BO at the /dev/kfd doorbell offset of its GPU");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, PAGE, 0, &bad) ==
		      -EINVAL,
	      "a doorbell BO is the whole slice");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x2b4c, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, PAGE, 0,
			      &mmio) == 0 &&
		      mmio.mmap_offset == KFDEMU_MMAP_OFFSET(KFDEMU_MMAP_TYPE_MMIO, 0x2b4c),
	      "MMIO_REMAP BO");
	CHECK(kfdemu_export_bo(dev.kfd, doorbell.handle, &fd) == -EINVAL &&
		      kfdemu_export_bo(dev.kfd, mmio.handle, &fd) == -EINVAL,
	      "doorbell and MMIO BOs have no dma-buf");
	CHECK(kfdemu_device_map_bo(&dev, &doorbell, (void **)&bell) == 0, "map the doorbells");
	bell[3] = 42;
	munmap(bell, KFDEMU_DOORBELL_SLICE);
	CHECK(kfdemu_device_map_bo(&dev, &doorbell, (void **)&bell) == 0 && bell[3] == 42,
	      "doorbells are the process's /dev/kfd space");
	munmap(bell, KFDEMU_DOORBELL_SLICE);

	host = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(host != MAP_FAILED, "mmap");
	host[7] = 7;
	userptr = (struct kfdemu_bo_info){ .gpu_id = 0x1e0a, .size = 2 * MIB,
					   .alloc_flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
					   .user_addr = (uintptr_t)host };
	CHECK(kfdemu_alloc(dev.kfd, &userptr) == 0, "userptr BO");
	CHECK(kfdemu_bo_add(dev.kfd, userptr.handle, 0, 64, 5) == 0 && host[0] == 5 &&
		      host[7] == 12,
	      "a kernel works on the process's own memory: %u %u", host[0], host[7]);
	CHECK(kfdemu_bo_checksum(dev.kfd, userptr.handle, 0, 2 * MIB, &sum) == 0 &&
		      sum == kfdemu_checksum(host, 2 * MIB, 0),
	      "userptr checksum");
	CHECK(kfdemu_export_bo(dev.kfd, userptr.handle, &fd) == -EINVAL, "userptr has no dma-buf");
	bad = userptr;
	bad.va_addr = 0;
	bad.user_addr = 0x10000;
	CHECK(kfdemu_alloc(dev.kfd, &bad) == -EFAULT, "userptr on memory that is not mapped");
	munmap(host, 2 * MIB);

	CHECK(kfdemu_identify(dev.kfd, kfdemu_conn_fd(dev.render[1]), &id) == 0 &&
		      id.kind == KFDEMU_FD_RENDER && id.render_minor == 129 &&
		      id.gpu_id == 0x2b4c && id.pid == (uint32_t)getpid(),
	      "identify a render node");
	CHECK(kfdemu_identify(dev.kfd, kfdemu_conn_fd(dev.kfd), &id) == 0 &&
		      id.kind == KFDEMU_FD_KFD,
	      "identify /dev/kfd");
	CHECK(kfdemu_identify(dev.kfd, 0, &id) == -ENOENT, "stdin is nothing of the emulator's");
	kfdemu_device_close(&dev);
	return 0;
}

static int test_bad_requests(void)
{
	struct kfdemu_bo_info bo, other;
	struct kfdemu_device dev;
	struct kfdemu_conn *conn, *render;
	uint64_t sum, start, end;
	int fd, memfd;

	CHECK(wait_no_process(&main_emu) == 0, "a fresh process");

	/* No VM on a GPU until a render node gives it one, as KFD. */
	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0, &bo) == -EINVAL,
	      "BO without a VM");
	CHECK(kfdemu_open_render(main_emu.socket_path, 129, &render) == 0, "open renderD129");
	CHECK(kfdemu_get_mmap_fd(render, &fd) == -EACCES, "a render node without a VM maps nothing");
	CHECK(kfdemu_acquire_vm(conn, 0x1e0a, kfdemu_conn_fd(render)) == -EINVAL,
	      "renderD129 is not gpu 0x1e0a's");
	memfd = memfd_create("not-a-render-node", MFD_CLOEXEC);
	CHECK(kfdemu_acquire_vm(conn, 0x1e0a, memfd) == -EINVAL, "a memfd is no render node");
	close(memfd);
	kfdemu_close(render);
	kfdemu_close(conn);

	CHECK(kfdemu_device_open(main_emu.socket_path, &dev) == 0, "open the device");
	conn = dev.kfd;
	CHECK(kfdemu_acquire_vm(conn, 0x1e0a, kfdemu_conn_fd(dev.render[0])) == 0,
	      "the same render node again is fine");
	CHECK(kfdemu_open_render(main_emu.socket_path, 128, &render) == 0, "open renderD128 again");
	CHECK(kfdemu_acquire_vm(conn, 0x1e0a, kfdemu_conn_fd(render)) == -EBUSY,
	      "another render node file for a bound VM");
	kfdemu_close(render);
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, 0, MIB, 0, &bo) == -EINVAL, "no memory kind");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a,
			      KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT, MIB, 0,
			      &bo) == -EINVAL,
	      "two memory kinds");
	CHECK(kfdemu_alloc_bo(conn, 0x9999, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0, &bo) == -EINVAL,
	      "unknown gpu");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 1000, 0, &bo) == -EINVAL,
	      "size not page aligned");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 64 * GIB, 0, &bo) ==
		      -ENOMEM,
	      "more than the VRAM");
	CHECK(kfdemu_alloc_bo(conn, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0x40000000, &bo) ==
		      0,
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

	/* The copy engine takes dma-bufs only, and stays inside the BO. */
	memfd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);
	CHECK(kfdemu_export_bo(conn, bo.handle, &fd) == 0, "export");
	CHECK(kfdemu_copy(conn, KFDEMU_COPY_TO_BO, memfd, 0, memfd, 0, PAGE) == -EBADF,
	      "copy into something that is no dma-buf");
	CHECK(kfdemu_copy(conn, KFDEMU_COPY_TO_BO, fd, MIB - PAGE, memfd, 0, 2 * PAGE) == -EINVAL,
	      "copy past the BO's end");
	CHECK(kfdemu_copy(conn, KFDEMU_COPY_TO_BO, fd, 0, memfd, 0, PAGE) == -ENODATA,
	      "copy from a file that ends early");
	CHECK(kfdemu_next_data(conn, fd, 0, &start, &end) == -ENXIO, "an untouched BO has no data");
	close(fd);
	close(memfd);
	kfdemu_device_close(&dev);
	return 0;
}

/* ---- CRIU ops end to end: an app child, a dump by the parent, a restored child ---- */

struct app_spec {
	uint32_t nr_bos;
	uint64_t bo_size;
	uint64_t big_bo_size; /* 0: none; else one extra sparse VRAM BO of this size */
	bool doorbell_and_mmio; /* besides: a doorbell and an MMIO_REMAP BO per GPU */
};

struct dump_result {
	pid_t app_pid;
	struct kfd_ioctl_criu_args args;
	struct kfd_criu_device_bucket *devices;
	struct kfd_criu_bo_bucket *bos;
	void *priv;
	int *images;	    /* per BO: a sparse memfd holding its contents, or -1 */
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

static void app_alloc_one(struct kfdemu_device *dev, const struct app_spec *spec, uint32_t i,
			  struct kfdemu_bo_info *bo)
{
	bool big = i == spec->nr_bos;
	uint64_t size = big ? spec->big_bo_size : spec->bo_size;
	uint32_t flags = i % 3 == 2 ? KFD_IOC_ALLOC_MEM_FLAGS_GTT : KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
	uint32_t *map;

	if (kfdemu_alloc_bo(dev->kfd, dev->gpus[i % 2].gpu_id, flags, size, 0, bo))
		_exit(81);
	/* A few touched pages; on the big BO some lie beyond 4 GiB. */
	if (kfdemu_bo_fill(dev->kfd, bo->handle, 0, PAGE, 0x1000 + i) ||
	    kfdemu_bo_add(dev->kfd, bo->handle, 0, 64, i) ||
	    (big && kfdemu_bo_fill(dev->kfd, bo->handle, size - 2 * PAGE, PAGE, 0xbeef)) ||
	    (big && kfdemu_bo_fill(dev->kfd, bo->handle, 4 * GIB + 3 * PAGE, 8, 0x4242)))
		_exit(82);
	if (!big && i < 8) {
		if (kfdemu_device_map_bo(dev, bo, (void **)&map))
			_exit(83);
		map[bo->size / 4 - 1] = 0xcafe0000 + i;
		munmap(map, bo->size);
	}
}

/*
 * The app: allocate BOs across both GPUs, fill them with kernels and through mappings,
 * report its socket inode and BO handles, then wait to be killed (the dump kills it).
 */
static void app_main(const char *socket_path, const struct app_spec *spec, int report_fd)
{
	uint32_t nr = spec->nr_bos + (spec->big_bo_size ? 1 : 0);
	uint32_t nr_all = nr + (spec->doorbell_and_mmio ? 4 : 0);
	struct kfdemu_device dev;
	struct kfdemu_bo_info bo;
	struct stat st;

	if (kfdemu_device_open(socket_path, &dev) || fstat(kfdemu_conn_fd(dev.kfd), &st))
		_exit(80);
	write_full(report_fd, &st.st_ino, sizeof(st.st_ino));
	write_full(report_fd, &nr_all, sizeof(nr_all));
	for (uint32_t i = 0; i < nr; i++) {
		app_alloc_one(&dev, spec, i, &bo);
		write_full(report_fd, &bo.handle, sizeof(bo.handle));
	}
	for (uint32_t i = nr; i < nr_all; i++) {
		bool doorbell = i % 2 == 0;

		if (kfdemu_alloc_bo(dev.kfd, dev.gpus[(i / 2) % 2].gpu_id,
				    doorbell ? KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL :
					       KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
				    doorbell ? KFDEMU_DOORBELL_SLICE : PAGE, 0, &bo))
			_exit(84);
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

/* PROCESS_INFO, then CHECKPOINT into arrays of the sizes it said. */
static int checkpoint(struct kfdemu_conn *conn, struct dump_result *dump)
{
	struct kfd_ioctl_criu_args *args = &dump->args;

	*args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_PROCESS_INFO };
	CHECK(kfdemu_criu_op(conn, args) == 0, "PROCESS_INFO");
	dump->devices = calloc(args->num_devices, sizeof(*dump->devices));
	dump->bos = calloc(args->num_bos, sizeof(*dump->bos));
	dump->priv = calloc(1, args->priv_data_size);
	args->devices = (uintptr_t)dump->devices;
	args->bos = (uintptr_t)dump->bos;
	args->priv_data = (uintptr_t)dump->priv;
	args->op = KFD_CRIU_OP_CHECKPOINT;
	CHECK(kfdemu_criu_op(conn, args) == 0, "CHECKPOINT");
	return 0;
}

/* Contents of the BOs that have a dma-buf into images; the others have none to read. */
static int save_contents(struct kfdemu_conn *conn, struct dump_result *dump)
{
	uint32_t n = dump->args.num_bos;

	dump->images = calloc(n, sizeof(int));
	dump->checksums = calloc(n, sizeof(uint64_t));
	for (uint32_t i = 0; i < n; i++) {
		struct kfd_criu_bo_bucket *bo = &dump->bos[i];
		bool memory = bo->alloc_flags &
			      (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT);

		dump->images[i] = -1;
		CHECK(memory == (bo->dmabuf_fd != KFDEMU_INVALID_FD), "bucket %u: flags %#x, fd %d", i,
		      bo->alloc_flags, (int)bo->dmabuf_fd);
		if (!memory)
			continue;
		dump->images[i] = memfd_create("image", MFD_CLOEXEC);
		CHECK(dump->images[i] >= 0 && ftruncate(dump->images[i], bo->size) == 0, "image");
		CHECK(read_bo_into(conn, bo->dmabuf_fd, bo->size, dump->images[i]) == 0,
		      "read BO %u", i);
		dump->checksums[i] = fd_checksum(dump->images[i], bo->size);
		close(bo->dmabuf_fd);
	}
	return 0;
}

/* What the plugin does at dump: PROCESS_INFO, CHECKPOINT, read contents, UNPAUSE. */
static int dump_app(const struct app_spec *spec, bool attach_by_pid, struct dump_result *dump)
{
	struct kfd_ioctl_criu_args unpause = { .op = KFD_CRIU_OP_UNPAUSE };
	struct kfdemu_conn *conn;
	uint64_t sock_ino;
	uint32_t nr_bos;

	dump->app_pid = spawn_app(spec, &sock_ino, &nr_bos, &dump->handles);
	CHECK(dump->app_pid > 0, "app did not start");
	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0, "connect");
	CHECK(kfdemu_attach(conn, attach_by_pid ? dump->app_pid : 0,
			    attach_by_pid ? 0 : sock_ino) == 0,
	      "attach");
	if (checkpoint(conn, dump))
		return -1;
	CHECK(dump->args.num_bos == nr_bos && dump->args.num_devices == 2 &&
		      dump->args.pid == (uint32_t)dump->app_pid && !dump->args.num_objects,
	      "PROCESS_INFO: %u BOs, %u devices, pid %u", dump->args.num_bos,
	      dump->args.num_devices, dump->args.pid);
	for (uint32_t i = 0; i < nr_bos; i++) {
		struct kfd_criu_bo_bucket *bo = &dump->bos[i];

		CHECK(bo->size && bo->addr &&
			      ((uint64_t)bo->gpu_id << 32 | (dump->handles[i] & 0xffffffff)) ==
				      dump->handles[i],
		      "bucket %u gpu id %#x vs handle %#llx", i, bo->gpu_id,
		      (unsigned long long)dump->handles[i]);
	}
	if (save_contents(conn, dump))
		return -1;
	CHECK(kfdemu_criu_op(conn, &unpause) == 0, "UNPAUSE");
	kfdemu_close(conn);
	kill_and_reap(dump->app_pid);
	return 0;
}

static void free_dump(struct dump_result *dump)
{
	for (uint32_t i = 0; dump->images && i < dump->args.num_bos; i++)
		if (dump->images[i] >= 0)
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
 * In a restored task, what the plugin does: open this machine's render nodes (same
 * model, same count: the dumped GPUs map in order), RESTORE with them as drm_fd, fill
 * the BOs that have a dma-buf through the copy engine. The caller keeps dev open.
 */
static int restore_in_task(const struct dump_result *dump, const struct emu_daemon *emu,
			   struct kfdemu_device *dev, struct kfd_criu_bo_bucket *bos)
{
	struct kfd_ioctl_criu_args args = dump->args;
	struct kfd_criu_device_bucket devices[8];

	memset(dev, 0, sizeof(*dev));
	if (kfdemu_connect(emu->socket_path, &dev->kfd))
		return 70;
	dev->nr_gpus = 8;
	if (kfdemu_get_gpus(dev->kfd, dev->gpus, &dev->nr_gpus))
		return 70;
	for (uint32_t i = 0; i < args.num_devices; i++) {
		if (kfdemu_open_render(emu->socket_path, dev->gpus[i].render_minor,
				       &dev->render[i]))
			return 70;
		devices[i] = dump->devices[i];
		devices[i].actual_gpu_id = dev->gpus[i].gpu_id;
		devices[i].drm_fd = kfdemu_conn_fd(dev->render[i]);
	}
	memcpy(bos, dump->bos, args.num_bos * sizeof(*bos));
	args.devices = (uintptr_t)devices;
	args.bos = (uintptr_t)bos;
	args.op = KFD_CRIU_OP_RESTORE;
	if (kfdemu_criu_op(dev->kfd, &args))
		return 71;
	for (uint32_t i = 0; i < args.num_bos; i++) {
		if (dump->images[i] < 0) {
			if (bos[i].dmabuf_fd != KFDEMU_INVALID_FD)
				return 72;
			continue;
		}
		if (bos[i].dmabuf_fd == KFDEMU_INVALID_FD ||
		    bos[i].restored_offset == bos[i].offset ||
		    write_bo_from(dev->kfd, bos[i].dmabuf_fd, bos[i].size, dump->images[i]))
			return 73;
		close(bos[i].dmabuf_fd);
	}
	return 0;
}

/* The restored child: restore, report, then (as the app) checksum its BOs: after RESUME. */
static void restored_main(const struct dump_result *dump, const struct emu_daemon *emu,
			  int report_fd, int hold_fd)
{
	struct kfd_criu_bo_bucket *bos = calloc(dump->args.num_bos, sizeof(*bos));
	struct kfdemu_device dev;
	uint64_t status = 0;
	int ret;

	ret = bos ? restore_in_task(dump, emu, &dev, bos) : 70;
	if (ret)
		_exit(ret);
	write_full(report_fd, &status, sizeof(status));
	for (uint32_t i = 0; i < dump->args.num_bos; i++) {
		uint64_t sum = 0;

		if (dump->images[i] >= 0 &&
		    kfdemu_bo_checksum(dev.kfd, dump->handles[i], 0, bos[i].size, &sum))
			_exit(74);
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
	struct kfdemu_stats stats;
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
	if (read_full(pipe_fds[0], &value, sizeof(value))) {
		waitpid(pid, &status, 0);
		CHECK(0, "restored task failed early: exit %d", WEXITSTATUS(status));
	}
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
	CHECK(stats_settled(conn, 1, &stats) == 0 && stats.vram_used == 0 && !stats.nr_bos,
	      "restored BOs freed when the task exited");
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
	struct app_spec spec = { .nr_bos = 12, .bo_size = 256 * 1024, .doorbell_and_mmio = true };

	return run_criu_cycle(&spec, false, &restore_emu);
}

static int test_criu_300_bos(void)
{
	struct app_spec spec = { .nr_bos = 300, .bo_size = 2 * PAGE };

	return run_criu_cycle(&spec, true, &main_emu);
}

static int test_criu_sparse_over_4gib(void)
{
	struct app_spec spec = { .nr_bos = 2, .bo_size = GIB, .big_bo_size = 5 * GIB };

	return run_criu_cycle(&spec, false, &restore_emu);
}

static int test_criu_through_partial_replies(void)
{
	struct app_spec spec = { .nr_bos = 260, .bo_size = PAGE };
	struct emu_daemon saved = main_emu;
	int ret;

	/* Dump from the chunky daemon, whose replies arrive 7 bytes at a time. */
	main_emu = chunky_emu;
	ret = run_criu_cycle(&spec, false, &chunky_emu);
	main_emu = saved;
	return ret;
}

/* ---- CRIU op misuse and KFD's strictness at RESTORE ---- */

/* A RESTORE this process makes with the dump's arrays, drm fds and GPU ids as given. */
static int try_restore(struct kfdemu_conn *conn, struct dump_result *dump,
		       struct kfd_ioctl_criu_args args)
{
	struct kfd_criu_bo_bucket *bos = calloc(args.num_bos + 1, sizeof(*bos));
	int ret;

	memcpy(bos, dump->bos, args.num_bos * sizeof(*bos));
	args.bos = (uintptr_t)bos;
	args.op = KFD_CRIU_OP_RESTORE;
	ret = kfdemu_criu_op(conn, &args);
	for (uint32_t i = 0; !ret && i < args.num_bos; i++)
		if (bos[i].dmabuf_fd != KFDEMU_INVALID_FD)
			close(bos[i].dmabuf_fd);
	free(bos);
	return ret;
}

static int test_criu_errors(void)
{
	struct app_spec spec = { .nr_bos = 3, .bo_size = PAGE, .doorbell_and_mmio = true };
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_CHECKPOINT };
	struct kfd_criu_device_bucket *dev;
	struct dump_result dump = {};
	struct kfdemu_conn *conn, *fresh, *r0, *r1;
	struct kfdemu_stats stats;
	uint32_t *version;
	uint64_t sock_ino;
	uint32_t nr_bos;

	CHECK(wait_no_process(&main_emu) == 0, "a fresh process");

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

	/* Paused: CHECKPOINT must be sized by PROCESS_INFO. */
	dump.app_pid = spawn_app(&spec, &sock_ino, &nr_bos, &dump.handles);
	CHECK(dump.app_pid > 0, "app");
	CHECK(kfdemu_attach(conn, 0, sock_ino) == 0, "attach");
	args = (struct kfd_ioctl_criu_args){ .op = KFD_CRIU_OP_PROCESS_INFO };
	CHECK(kfdemu_criu_op(conn, &args) == 0, "PROCESS_INFO");
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
		if (dump.bos[i].dmabuf_fd != KFDEMU_INVALID_FD)
			close(dump.bos[i].dmabuf_fd);
	dump.args = args;
	args.op = KFD_CRIU_OP_UNPAUSE;
	CHECK(kfdemu_criu_op(conn, &args) == 0, "UNPAUSE");
	kill_and_reap(dump.app_pid);
	dump.app_pid = 0;
	CHECK(kfdemu_criu_op(conn, &args) == -ESRCH, "op on a process that is gone");
	kfdemu_close(conn);

	/* RESTORE refusals leave nothing behind. This process is the restoring task. */
	CHECK(kfdemu_connect(restore_emu.socket_path, &fresh) == 0, "connect");
	CHECK(kfdemu_open_render(restore_emu.socket_path, 128, &r0) == 0 &&
		      kfdemu_open_render(restore_emu.socket_path, 129, &r1) == 0,
	      "render nodes");
	args = dump.args;
	dev = dump.devices;
	dev[0].actual_gpu_id = 0x3a3a;
	dev[1].actual_gpu_id = 0x4b4b;
	dev[0].drm_fd = 0;
	dev[1].drm_fd = kfdemu_conn_fd(r1);
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "drm_fd 0 (stdin) is no render node");
	dev[0].drm_fd = 999;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "drm_fd that is not open");
	dev[0].drm_fd = kfdemu_conn_fd(r1);
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "another GPU's render node");
	dev[0].drm_fd = kfdemu_conn_fd(r0);
	dev[0].actual_gpu_id = 0x7777;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "RESTORE onto an unknown gpu");
	dev[0].actual_gpu_id = 0x4b4b;
	dev[0].drm_fd = kfdemu_conn_fd(r1);
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "two buckets on one gpu");
	dev[0].actual_gpu_id = 0x3a3a;
	dev[0].drm_fd = kfdemu_conn_fd(r0);
	args.num_devices = 1;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "fewer devices than the machine has");
	args.num_devices = 2;
	dev[1].user_gpu_id = 0;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "user gpu id 0");
	dev[1].user_gpu_id = dump.bos[1].gpu_id;
	version = dump.priv;
	*version ^= 1;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "private data of another version");
	*version ^= 1;
	args.priv_data_size -= 4;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "truncated private data");
	args.priv_data_size += 4;
	args.num_objects = 1;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "an object the private data lacks");
	args.num_objects = 0;
	args.num_bos = 0;
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "no BOs (KFD refuses that)");
	args.num_bos = dump.args.num_bos;
	CHECK(kfdemu_stats(fresh, &stats) == 0 && !stats.nr_bos && !stats.vram_used,
	      "failed RESTOREs created nothing");
	CHECK(try_restore(fresh, &dump, args) == 0, "RESTORE");
	CHECK(try_restore(fresh, &dump, args) == -EINVAL, "second RESTORE refused");
	kfdemu_close(r0);
	kfdemu_close(r1);
	kfdemu_close(fresh);
	free_dump(&dump);
	return 0;
}

/* ---- queues, events and SVM ranges through a dump and restore ---- */

#define Q_DATA_SIZE (32 * MIB)
#define Q_PACKETS 12
/* The control BO: ring, pointers, completion, eop, context save area. */
#define Q_RING 0
#define Q_RING_SIZE (64 * KFDEMU_PACKET_SIZE)
#define Q_RPTR 0x1000
#define Q_WPTR 0x1008
#define Q_DONE 0x1010
#define Q_SUM 0x1018
#define Q_EOP 0x2000
#define Q_CTX 0x4000
#define Q_CTL_SIZE 0x10000
#define Q_SVM_ADDR 0x7e0000000000ULL
#define Q_SVM_SIZE (2 * MIB)

/* The app's SVM memory as criu would have dumped it (read while the app is paused). */
static uint8_t *svm_dumped;

struct queue_app {
	struct kfdemu_device dev;
	struct kfdemu_bo_info ctl, data, doorbell;
	struct kfdemu_queue_reply queue;
	struct kfdemu_event_reply done_event, spare_event;
	uint8_t *ctl_map;
	uint64_t *bell;
};

static void put_packet(struct queue_app *app, uint64_t index, const struct kfdemu_packet *packet)
{
	memcpy(app->ctl_map + Q_RING + (index % 64) * KFDEMU_PACKET_SIZE, packet, sizeof(*packet));
}

/* FILL, ADDs of 1..N-2 over 32 MiB each, an ADD on the SVM range, a CHECKSUM that signals. */
static void submit_work(struct queue_app *app)
{
	struct kfdemu_packet p = { .op = KFDEMU_KERNEL_FILL, .arg = 100, .va = app->data.va_addr,
				   .length = Q_DATA_SIZE };
	uint64_t n = 0;

	put_packet(app, n++, &p);
	for (uint32_t k = 1; k <= Q_PACKETS - 3; k++) {
		p = (struct kfdemu_packet){.op = KFDEMU_KERNEL_ADD,
					   .arg = k,
					   .va = app->data.va_addr,
					   .length = Q_DATA_SIZE,
					   .completion_va = app->ctl.va_addr + Q_DONE,
					   .completion_value = k};
		put_packet(app, n++, &p);
	}
	p = (struct kfdemu_packet){ .op = KFDEMU_KERNEL_ADD, .arg = 3, .va = Q_SVM_ADDR,
				    .length = Q_SVM_SIZE };
	put_packet(app, n++, &p);
	p = (struct kfdemu_packet){ .op = KFDEMU_KERNEL_CHECKSUM, .va = app->data.va_addr,
				    .length = Q_DATA_SIZE, .result_va = app->ctl.va_addr + Q_SUM,
				    .flags = KFDEMU_PACKET_SIGNAL_EVENT,
				    .event_id = app->done_event.event_id };
	put_packet(app, n++, &p);
	/* Publish: write pointer, then the doorbell, as a real runtime does. */
	memcpy(app->ctl_map + Q_WPTR, &n, 8);
	app->bell[app->queue.doorbell_offset / 8] = n;
}

static int queue_app_setup(struct queue_app *app, const char *socket_path)
{
	struct kfd_ioctl_svm_attribute attrs[] = {
		{ KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0x1e0a },
		{ KFD_IOCTL_SVM_ATTR_ACCESS, 0x1e0a },
		{ KFD_IOCTL_SVM_ATTR_GRANULARITY, 4 },
	};
	struct kfdemu_create_queue q;
	void *svm;

	if (kfdemu_device_open(socket_path, &app->dev) ||
	    kfdemu_alloc_bo(app->dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_GTT,
			    16 * PAGE + Q_CTL_SIZE, 0, &app->ctl) ||
	    kfdemu_alloc_bo(app->dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, Q_DATA_SIZE, 0,
			    &app->data) ||
	    kfdemu_alloc_bo(app->dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
			    KFDEMU_DOORBELL_SLICE, 0, &app->doorbell) ||
	    kfdemu_device_map_bo(&app->dev, &app->ctl, (void **)&app->ctl_map) ||
	    kfdemu_device_map_bo(&app->dev, &app->doorbell, (void **)&app->bell))
		return 60;
	svm = mmap((void *)Q_SVM_ADDR, Q_SVM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (svm == MAP_FAILED)
		return 61;
	memset(svm, 1, Q_SVM_SIZE);
	if (kfdemu_svm(app->dev.kfd, KFD_IOCTL_SVM_OP_SET_ATTR, Q_SVM_ADDR, Q_SVM_SIZE, attrs, 3))
		return 62;
	q = (struct kfdemu_create_queue){
		.gpu_id = 0x1e0a, .type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
		.ring_va = app->ctl.va_addr + Q_RING, .ring_size = Q_RING_SIZE,
		.rptr_va = app->ctl.va_addr + Q_RPTR, .wptr_va = app->ctl.va_addr + Q_WPTR,
		.eop_va = app->ctl.va_addr + Q_EOP, .eop_size = PAGE,
		.ctx_save_va = app->ctl.va_addr + Q_CTX, .ctx_save_size = Q_CTL_SIZE
	};
	if (kfdemu_create_queue(app->dev.kfd, &q, &app->queue) ||
	    kfdemu_create_event(app->dev.kfd, KFD_IOC_EVENT_SIGNAL, false, &app->done_event) ||
	    kfdemu_create_event(app->dev.kfd, KFD_IOC_EVENT_DEBUG_EVENT, true, &app->spare_event) ||
	    kfdemu_set_event(app->dev.kfd, app->spare_event.event_id))
		return 63;
	submit_work(app);
	return 0;
}

/* The dumped app: sets everything up, submits its packets, tells the parent, waits. */
static void queue_app_main(int report_fd)
{
	struct queue_app app;
	struct stat st;
	int ret = queue_app_setup(&app, main_emu.socket_path);

	if (ret)
		_exit(ret);
	if (fstat(kfdemu_conn_fd(app.dev.kfd), &st))
		_exit(64);
	write_full(report_fd, &st.st_ino, sizeof(st.st_ino));
	pause();
	_exit(0);
}

/* What the app computed on the CPU, and what the device must say after the restore. */
static uint64_t expected_queue_checksum(void)
{
	static uint32_t words[MIB / 4];
	uint32_t value = 100 + (Q_PACKETS - 3) * (Q_PACKETS - 2) / 2;
	uint64_t sum = 0;

	for (uint32_t i = 0; i < MIB / 4; i++)
		words[i] = value;
	for (uint64_t off = 0; off < Q_DATA_SIZE; off += MIB)
		sum += kfdemu_checksum(words, MIB, off);
	return sum;
}

/*
 * The restored app: RESUME first fails while its SVM range is not mapped yet, then the
 * range comes back (as criu restores memory); after RESUME the queue finishes the work it
 * was preempted in, signals the event, and the results and attributes are the dumped ones.
 */
static void restored_queue_main(const struct dump_result *dump, int report_fd, int go_fd)
{
	struct kfd_criu_bo_bucket *bos = calloc(dump->args.num_bos, sizeof(*bos));
	struct kfd_ioctl_svm_attribute attrs[] = {
		{ KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0 }, { KFD_IOCTL_SVM_ATTR_ACCESS, 0x1e0a },
		{ KFD_IOCTL_SVM_ATTR_GRANULARITY, 0 }
	};
	struct kfdemu_device dev;
	uint32_t ids[2], result;
	uint64_t status = 0, sum;
	uint8_t *svm;
	int ret;

	ret = restore_in_task(dump, &restore_emu, &dev, bos);
	if (ret)
		_exit(ret);
	write_full(report_fd, &status, sizeof(status)); /* parent: RESUME must fail now */
	if (read_full(go_fd, &status, 1))
		_exit(75);
	svm = mmap((void *)Q_SVM_ADDR, Q_SVM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (svm == MAP_FAILED)
		_exit(76);
	memcpy(svm, svm_dumped, Q_SVM_SIZE);
	write_full(report_fd, &status, sizeof(status)); /* parent: RESUME now */
	ids[0] = 1; /* done_event: the first signal event */
	if (kfdemu_wait_events(dev.kfd, ids, 1, false, 20000, &result) ||
	    result != KFDEMU_WAIT_COMPLETE)
		_exit(77);
	/* The dumped state of the second event: signalled, auto-reset, consumed once. */
	ids[0] = 2;
	if (kfdemu_wait_events(dev.kfd, ids, 1, false, 0, &result) ||
	    result != KFDEMU_WAIT_COMPLETE ||
	    kfdemu_wait_events(dev.kfd, ids, 1, false, 0, &result) || result != KFDEMU_WAIT_TIMEOUT)
		_exit(78);
	if (kfdemu_svm(dev.kfd, KFD_IOCTL_SVM_OP_GET_ATTR, Q_SVM_ADDR, Q_SVM_SIZE, attrs, 3) ||
	    attrs[0].value != 0x1e0a || attrs[1].type != KFD_IOCTL_SVM_ATTR_ACCESS ||
	    attrs[2].value != 4)
		_exit(79);
	/* The data BO, checksummed by a kernel of its own after the queue's. */
	if (kfdemu_bo_checksum(dev.kfd, dump->handles[1], 0, Q_DATA_SIZE, &sum))
		_exit(80);
	write_full(report_fd, &sum, sizeof(sum));
	/* The SVM packet (ADD 3) ran before the dump or after: the memory says 4 either way. */
	status = svm[0] == 4 && svm[Q_SVM_SIZE - 1] == 1 ? 0 : 1;
	write_full(report_fd, &status, sizeof(status));
	_exit(0);
}

static int test_criu_queues_events_svm(void)
{
	struct kfd_ioctl_criu_args resume = { .op = KFD_CRIU_OP_RESUME };
	struct kfd_ioctl_criu_args unpause = { .op = KFD_CRIU_OP_UNPAUSE };
	struct dump_result dump = {};
	struct kfdemu_conn *conn;
	int report[2], go[2], status;
	uint64_t sock_ino, value;
	pid_t pid;

	/* The app, preempted while its queue works through 12 packets of 32 MiB. */
	CHECK(pipe(report) == 0, "pipe");
	dump.app_pid = fork();
	if (dump.app_pid == 0)
		queue_app_main(report[1]);
	CHECK(read_full(report[0], &sock_ino, sizeof(sock_ino)) == 0, "app set up");
	close(report[0]);
	close(report[1]);
	CHECK(kfdemu_connect(main_emu.socket_path, &conn) == 0 &&
		      kfdemu_attach(conn, 0, sock_ino) == 0,
	      "attach");
	usleep(20000);
	if (checkpoint(conn, &dump))
		return -1;
	svm_dumped = malloc(Q_SVM_SIZE);
	CHECK(svm_dumped && process_vm_readv(dump.app_pid,
					     &(struct iovec){ svm_dumped, Q_SVM_SIZE }, 1,
					     &(struct iovec){ (void *)Q_SVM_ADDR, Q_SVM_SIZE }, 1,
					     0) == Q_SVM_SIZE,
	      "read the app's SVM memory");
	/* 1 queue + 2 events + 1 SVM range; BOs: control, data, doorbell. */
	CHECK(dump.args.num_objects == 4 && dump.args.num_bos == 3, "%u objects, %u BOs",
	      dump.args.num_objects, dump.args.num_bos);
	dump.handles = calloc(3, sizeof(uint64_t));
	for (uint32_t i = 0; i < 3; i++)
		dump.handles[i] = (uint64_t)dump.bos[i].gpu_id << 32 | (i + 1);
	if (save_contents(conn, &dump))
		return -1;
	CHECK(kfdemu_criu_op(conn, &unpause) == 0, "UNPAUSE");
	kfdemu_close(conn);
	kill_and_reap(dump.app_pid);
	dump.app_pid = 0;

	CHECK(pipe(report) == 0 && pipe(go) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(report[0]);
		close(go[1]);
		restored_queue_main(&dump, report[1], go[0]);
	}
	close(report[1]);
	close(go[0]);
	CHECK(read_full(report[0], &value, sizeof(value)) == 0, "restored");
	CHECK(kfdemu_connect(restore_emu.socket_path, &conn) == 0, "connect");
	resume.pid = pid;
	CHECK(kfdemu_criu_op(conn, &resume) == -EFAULT, "RESUME while the SVM range is not mapped");
	write_full(go[1], "g", 1);
	CHECK(read_full(report[0], &value, sizeof(value)) == 0, "SVM memory back");
	CHECK(kfdemu_criu_op(conn, &resume) == 0, "RESUME");
	CHECK(read_full(report[0], &value, sizeof(value)) == 0, "queue finished");
	CHECK(value == expected_queue_checksum(), "data checksum %#llx, expected %#llx",
	      (unsigned long long)value, (unsigned long long)expected_queue_checksum());
	CHECK(read_full(report[0], &value, sizeof(value)) == 0 && value == 0, "SVM range ADDed once");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "restored app status %#x", status);
	close(report[0]);
	close(go[1]);
	kfdemu_close(conn);
	free_dump(&dump);
	free(svm_dumped);
	return 0;
}

/* A queue's buffers must lie in BOs of its GPU (KFD checks it at create and at restore). */
static int test_queue_refusals(void)
{
	struct kfdemu_device dev;
	struct kfdemu_bo_info ring;
	struct kfdemu_create_queue q;
	struct kfdemu_queue_reply reply;
	struct kfdemu_event_reply event;

	CHECK(wait_no_process(&main_emu) == 0, "a fresh process");

	CHECK(kfdemu_device_open(main_emu.socket_path, &dev) == 0, "open the device");
	CHECK(kfdemu_alloc_bo(dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_GTT, 64 * PAGE, 0, &ring) ==
		      0,
	      "alloc");
	q = (struct kfdemu_create_queue){ .gpu_id = 0x1e0a, .type = KFD_IOC_QUEUE_TYPE_COMPUTE,
					  .ring_va = ring.va_addr, .ring_size = 16 * PAGE,
					  .rptr_va = ring.va_addr + 16 * PAGE,
					  .wptr_va = ring.va_addr + 16 * PAGE + 8,
					  .eop_va = ring.va_addr + 17 * PAGE, .eop_size = PAGE,
					  .ctx_save_va = ring.va_addr + 20 * PAGE,
					  .ctx_save_size = 4 * PAGE };
	q.ring_va = ring.va_addr + 60 * PAGE;
	CHECK(kfdemu_create_queue(dev.kfd, &q, &reply) == -EINVAL, "ring past its BO");
	q.ring_va = ring.va_addr;
	q.gpu_id = 0x2b4c;
	CHECK(kfdemu_create_queue(dev.kfd, &q, &reply) == -EINVAL, "buffers on another GPU");
	q.gpu_id = 0x1e0a;
	q.type = KFD_IOC_QUEUE_TYPE_SDMA;
	CHECK(kfdemu_create_queue(dev.kfd, &q, &reply) == -EINVAL, "SDMA queues are not emulated");
	q.type = KFD_IOC_QUEUE_TYPE_COMPUTE;
	CHECK(kfdemu_create_queue(dev.kfd, &q, &reply) == 0, "queue");
	CHECK(kfdemu_free_bo(dev.kfd, ring.handle) == -EBUSY, "its BO cannot be freed");
	CHECK(kfdemu_destroy_queue(dev.kfd, reply.queue_id) == 0 &&
		      kfdemu_free_bo(dev.kfd, ring.handle) == 0,
	      "destroyed, then freed");
	CHECK(kfdemu_create_event(dev.kfd, KFD_IOC_EVENT_MEMORY, false, &event) == -EINVAL,
	      "memory events are not emulated");
	kfdemu_device_close(&dev);
	return 0;
}

static int test_kernel_waits_while_paused(void)
{
	struct kfd_ioctl_criu_args args = { .op = KFD_CRIU_OP_PROCESS_INFO };
	struct kfdemu_device app;
	struct kfdemu_conn *tool;
	struct kfdemu_bo_info bo;
	int pipe_fds[2];
	uint64_t sum;
	pid_t pid;
	struct pollfd pfd = { .events = POLLIN };

	CHECK(pipe(pipe_fds) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		if (kfdemu_device_open(main_emu.socket_path, &app) ||
		    kfdemu_alloc_bo(app.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, MIB, 0, &bo))
			_exit(60);
		write_full(pipe_fds[1], "a", 1);
		usleep(100000); /* the parent pauses us meanwhile */
		if (kfdemu_bo_checksum(app.kfd, bo.handle, 0, MIB, &sum))
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
	struct kfdemu_device dev;
	struct kfdemu_bo_info bo;

	if (kfdemu_device_open(main_emu.socket_path, &dev) ||
	    kfdemu_alloc_bo(dev.kfd, 0x1e0a, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 256 * MIB, 0, &bo))
		_exit(50);
	kernel.handle = bo.handle;
	kfdemu_wire_send(kfdemu_conn_fd(dev.kfd), &request, 0);
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
	struct kfdemu_stats stats;
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
	CHECK(stats_settled(conn, 1, &stats) == 0 && !stats.vram_used && !stats.nr_bos,
	      "dead clients' VRAM freed");
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
	{ "bo_kinds", test_bo_kinds },
	{ "bad_requests", test_bad_requests },
	{ "queue_refusals", test_queue_refusals },
	{ "criu_two_gpus_remapped", test_criu_two_gpus_remapped },
	{ "criu_300_bos", test_criu_300_bos },
	{ "criu_sparse_over_4gib", test_criu_sparse_over_4gib },
	{ "criu_through_partial_replies", test_criu_through_partial_replies },
	{ "criu_errors", test_criu_errors },
	{ "criu_queues_events_svm", test_criu_queues_events_svm },
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
