/*
 * GPU buffer objects on the KFD EMULATOR (test/gpu) survive dump and restore: contents
 * checked on the device (the emulator's CHECKSUM kernel) and, for mapped BOs, through
 * their mappings, which must be the restored BOs' memory, mapped through the restored
 * render node. Every process also holds what a ROCm process holds besides: /dev/kfd, a
 * render node per GPU with its VM, a doorbell and an MMIO_REMAP BO per GPU mapped through
 * /dev/kfd, and a userptr BO over its own memory. $GPU_TEST_LAYOUT picks the shape:
 * two_gpus (12 BOs, VRAM and GTT, both GPUs), many (300 BOs: > 253 fds), big (a 5 GiB
 * sparse VRAM BO + a 1 GiB GTT BO: > 4 GiB in all). $GPU_TEST_CHILD=1 adds a child without
 * GPU state; $GPU_TEST_PROCS=N makes a tree of N GPU processes (the root and N - 1
 * children), each with its own BOs and checks.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libkfdemu.h"
#include "zdtmtst.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)
#define MAX_BOS 300
#define CHILD_MEM_SIZE (256 * KIB)
#define CHILD_MEM_SEED 0xc41d
#define MAX_PROCS 8
#define USERPTR_SIZE (64 * KIB)

/* A range the test wrote, and how: through the mapping (pattern) or by a device kernel. */
struct written {
	uint64_t offset, length;
	bool by_cpu;
	uint32_t value; /* FILL pattern, or the pattern seed */
};

struct test_bo {
	struct kfdemu_bo_info info;
	uint8_t *map; /* NULL: not mapped */
	struct written writes[4];
	int nr_writes;
	uint64_t checksum; /* device checksum of the whole BO before the dump */
};

static struct kfdemu_device dev;
static struct kfdemu_conn *conn; /* dev.kfd */
static struct kfdemu_gpu_info *gpus; /* dev.gpus: ids as this process knows them */
static struct test_bo bos[MAX_BOS];
static int nr_bos;
/* Per GPU: the doorbell and MMIO_REMAP BOs and their /dev/kfd mappings. */
static struct kfdemu_bo_info doorbells[2], mmios[2];
static uint64_t *doorbell_maps[2];
static uint32_t *mmio_maps[2];
/* A userptr BO over this process's own memory. */
static struct kfdemu_bo_info userptr;
static uint32_t *userptr_mem;

static void check(int ret, const char *what)
{
	if (ret)
		test_fail("%s: %s", what, strerror(-ret));
}

static struct test_bo *new_bo(int gpu, uint32_t flags, uint64_t size, bool mapped)
{
	struct test_bo *bo = &bos[nr_bos++];

	check(kfdemu_alloc_bo(conn, gpus[gpu].gpu_id, flags, size, 0, &bo->info), "alloc BO");
	if (mapped)
		check(kfdemu_device_map_bo(&dev, &bo->info, (void **)&bo->map), "map BO");
	return bo;
}

/* Mapped BOs get CPU writes (a byte pattern) unless by_device; others device FILLs. */
static void write_range_how(struct test_bo *bo, uint64_t offset, uint64_t length, uint32_t value,
			    bool by_device)
{
	struct written *w = &bo->writes[bo->nr_writes++];

	*w = (struct written){ .offset = offset, .length = length, .value = value,
			       .by_cpu = bo->map && !by_device };
	if (w->by_cpu)
		pattern_fill(bo->map + offset, length, value);
	else
		check(kfdemu_bo_fill(conn, bo->info.handle, offset, length, value), "FILL kernel");
}

static void write_range(struct test_bo *bo, uint64_t offset, uint64_t length, uint32_t value)
{
	write_range_how(bo, offset, length, value, false);
}

static void layout_two_gpus(void)
{
	int i;

	for (i = 0; i < 12; i++) {
		uint64_t size = (i + 1) * 64 * KIB;
		uint32_t flags = i % 3 ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM : KFD_IOC_ALLOC_MEM_FLAGS_GTT;
		struct test_bo *bo = new_bo(i % 2, flags, size, i % 4 < 2);

		/* The second half of every BO stays untouched: holes must stay zero. */
		write_range(bo, 0, size / 4, 0x1000 + i);
		write_range_how(bo, size / 4, size / 4, 0x2000 + i, true);
		/* Device-only state on top: a kernel's result that no CPU ever wrote. */
		if (!bo->map)
			check(kfdemu_bo_add(conn, bo->info.handle, 8 * KIB, 8 * KIB, 7 + i), "ADD kernel");
	}
}

static void layout_many(void)
{
	int i;

	for (i = 0; i < MAX_BOS; i++) {
		struct test_bo *bo =
			new_bo(i % 2, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 8 * KIB, i % 50 == 0);

		write_range(bo, 0, 4 * KIB, 0x5000 + i);
	}
}

static void layout_big(void)
{
	struct test_bo *vram = new_bo(0, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 5 * GIB, false);
	struct test_bo *gtt = new_bo(1, KFD_IOC_ALLOC_MEM_FLAGS_GTT, 1 * GIB, true);

	write_range(vram, 0, 1 * MIB, 0x7001);
	write_range(vram, 2 * GIB, 1 * MIB, 0x7002);
	/* Past 4 GiB: a 32-bit size or offset anywhere on the way loses this. */
	write_range(vram, 4 * GIB + 4 * KIB, 1 * MIB, 0x7003);
	write_range(vram, 5 * GIB - 64 * KIB, 64 * KIB, 0x7004);
	write_range(gtt, 4 * KIB, 256 * KIB, 0x7005);
	write_range(gtt, 1 * GIB - 8 * KIB, 8 * KIB, 0x7006);
}

static void check_u32s(const struct test_bo *bo, const struct written *w)
{
	const uint32_t *words = (const uint32_t *)(bo->map + w->offset);
	uint64_t i;

	for (i = 0; i < w->length / 4; i++) {
		if (words[i] != w->value)
			test_fail("BO %#" PRIx64 ": word at %#" PRIx64 " is %#x through the mapping, the device wrote %#x",
				  bo->info.va_addr, w->offset + 4 * i, words[i], w->value);
	}
}

/* The mapping holds what was written (by the CPU or, before the dump, by the device). */
static void check_mapping(const struct test_bo *bo)
{
	char line[512];
	int i;

	maps_line(bo->map, line, sizeof(line));
	if (!strstr(line, " rw-s ") || !strstr(line, "/memfd:kfdemu-renderD"))
		test_fail("BO %#" PRIx64 ": mapping is no longer its render node's: %s", bo->info.va_addr,
			  line);
	for (i = 0; i < bo->nr_writes; i++) {
		const struct written *w = &bo->writes[i];

		if (w->by_cpu)
			pattern_expect(bo->map + w->offset, w->length, w->value, "BO contents via mapping");
		else
			check_u32s(bo, w);
	}
}

/* Device and mapping are one memory: a kernel's write shows in the mapping at once. */
static void check_mapping_is_device_memory(const struct test_bo *bo)
{
	uint64_t before = *(volatile uint64_t *)bo->map, sum, expected;

	check(kfdemu_bo_fill(conn, bo->info.handle, 0, 8, 0x5a5a5a5a), "FILL kernel after restore");
	if (*(volatile uint64_t *)bo->map != 0x5a5a5a5a5a5a5a5aULL)
		test_fail("BO %#" PRIx64 ": a kernel's write after restore is not seen through the mapping",
			  bo->info.va_addr);
	*(volatile uint64_t *)bo->map = before;
	check(kfdemu_bo_checksum(conn, bo->info.handle, 0, bo->info.size, &sum), "CHECKSUM kernel");
	expected = bo->checksum;
	if (sum != expected)
		test_fail("BO %#" PRIx64 ": a CPU write through the mapping is not seen by the device",
			  bo->info.va_addr);
}

/* What every ROCm process holds besides its memory: doorbells, MMIO pages, a userptr BO. */
static void alloc_process_bos(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		check(kfdemu_alloc_bo(conn, gpus[i].gpu_id, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
				      KFDEMU_DOORBELL_SLICE, 0, &doorbells[i]),
		      "alloc doorbells");
		check(kfdemu_alloc_bo(conn, gpus[i].gpu_id, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
				      KFDEMU_MMIO_PAGE_SIZE, 0, &mmios[i]),
		      "alloc MMIO_REMAP");
		check(kfdemu_device_map_bo(&dev, &doorbells[i], (void **)&doorbell_maps[i]),
		      "map doorbells");
		check(kfdemu_device_map_bo(&dev, &mmios[i], (void **)&mmio_maps[i]), "map MMIO");
	}
	userptr_mem = mmap(NULL, USERPTR_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	if (userptr_mem == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(userptr_mem, USERPTR_SIZE, 0x05e7);
	userptr = (struct kfdemu_bo_info){ .gpu_id = gpus[0].gpu_id, .size = USERPTR_SIZE,
					   .alloc_flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
					   .user_addr = (uintptr_t)userptr_mem };
	check(kfdemu_alloc(conn, &userptr), "alloc userptr");
}

/* The doorbell/MMIO mappings: /dev/kfd's, at the offset of a GPU of this machine. */
static void check_kfd_mapping(const void *map, uint64_t type, const char *what)
{
	struct kfdemu_gpu_info now[8];
	uint32_t nr_now = 8, i;
	unsigned long long offset;
	char line[512];

	maps_line(map, line, sizeof(line));
	if (!strstr(line, " rw-s ") || !strstr(line, "/memfd:kfdemu-kfd") ||
	    sscanf(strchr(line, ' ') + 6, "%llx", &offset) != 1)
		test_fail("%s: mapping is no longer /dev/kfd's: %s", what, line);
	check(kfdemu_get_gpus(conn, now, &nr_now), "GET_GPUS");
	for (i = 0; i < nr_now; i++)
		if (offset == KFDEMU_MMAP_OFFSET(type, now[i].gpu_id))
			return;
	test_fail("%s: mapped at %#llx, which is no GPU's offset here: %s", what, offset, line);
}

/*
 * After restore: the process's doorbells and MMIO pages are mapped again (through the
 * restored /dev/kfd, at offsets that name this machine's GPUs), its userptr BO still is
 * its own memory, and a BO made now maps through the restored render node, which must
 * hold the GPU's VM: the restore used the same file for RESTORE's drm_fd and the task's fd.
 */
static void check_process_bos(void)
{
	struct kfdemu_bo_info fresh;
	uint32_t *fresh_map;
	uint64_t sum;
	int i;

	for (i = 0; i < 2; i++) {
		check_kfd_mapping(doorbell_maps[i], KFDEMU_MMAP_TYPE_DOORBELL, "doorbells");
		check_kfd_mapping(mmio_maps[i], KFDEMU_MMAP_TYPE_MMIO, "MMIO page");
		doorbell_maps[i][7] = 7; /* writable, as a doorbell is */
	}
	pattern_expect(userptr_mem, USERPTR_SIZE, 0x05e7, "userptr memory");
	check(kfdemu_bo_checksum(conn, userptr.handle, 0, USERPTR_SIZE, &sum), "userptr CHECKSUM");
	if (sum != kfdemu_checksum(userptr_mem, USERPTR_SIZE, 0))
		test_fail("the userptr BO is no longer the process's memory");
	for (i = 0; i < 2; i++) {
		check(kfdemu_alloc_bo(conn, gpus[i].gpu_id, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 64 * KIB,
				      0, &fresh),
		      "alloc after restore");
		check(kfdemu_device_map_bo(&dev, &fresh, (void **)&fresh_map),
		      "map a new BO through the restored render node");
		check(kfdemu_bo_fill(conn, fresh.handle, 0, 64 * KIB, 0x600d + i), "FILL after restore");
		if (fresh_map[100] != 0x600dU + i)
			test_fail("a new BO's mapping is not its memory");
	}
}

/* The child: host memory only, checked after restore; its exit status is its verdict. */
static void __attribute__((noreturn)) child_main(void)
{
	uint8_t *mem = mmap(NULL, CHILD_MEM_SIZE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		test_fail_errno("child: mmap");
	pattern_fill(mem, CHILD_MEM_SIZE, CHILD_MEM_SEED);
	test_barrier_done();
	test_wait_sigterm();
	pattern_expect(mem, CHILD_MEM_SIZE, CHILD_MEM_SEED, "child memory");
	exit(0);
}

/* Before the emulator connection and any BO exist, so none of them is the child's. */
static pid_t fork_child(void)
{
	pid_t child;

	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	return child;
}

static void make_layout(const char *layout)
{
	int i;

	check(kfdemu_device_open(NULL, &dev), "open the KFD emulator and its render nodes");
	conn = dev.kfd;
	gpus = dev.gpus;
	if (dev.nr_gpus < 2)
		test_fail("the emulator has %u GPUs, the test needs 2", dev.nr_gpus);
	if (!layout || !strcmp(layout, "two_gpus"))
		layout_two_gpus();
	else if (!strcmp(layout, "many"))
		layout_many();
	else if (!strcmp(layout, "big"))
		layout_big();
	else
		test_fail("unknown GPU_TEST_LAYOUT %s", layout);
	alloc_process_bos();
	for (i = 0; i < nr_bos; i++)
		check(kfdemu_bo_checksum(conn, bos[i].info.handle, 0, bos[i].info.size,
					 &bos[i].checksum),
		      "CHECKSUM kernel");
}

static void check_layout(void)
{
	int i;

	for (i = 0; i < nr_bos; i++) {
		uint64_t sum;

		check(kfdemu_bo_checksum(conn, bos[i].info.handle, 0, bos[i].info.size, &sum),
		      "CHECKSUM kernel after restore");
		if (sum != bos[i].checksum)
			test_fail("BO %d (%#" PRIx64 ", %" PRIu64 " bytes): device checksum %#" PRIx64 ", before the dump %#" PRIx64,
				  i, bos[i].info.va_addr, bos[i].info.size, sum, bos[i].checksum);
		if (bos[i].map) {
			check_mapping(&bos[i]);
			check_mapping_is_device_memory(&bos[i]);
		}
	}
	check_process_bos();
}

/* A GPU process of the tree: its own BOs, checked after restore; its status is its verdict. */
static void __attribute__((noreturn)) gpu_child_main(const char *layout)
{
	make_layout(layout);
	test_barrier_done();
	test_wait_sigterm();
	check_layout();
	exit(0);
}

int main(int argc, char **argv)
{
	const char *layout = getenv("GPU_TEST_LAYOUT");
	const char *with_child = getenv("GPU_TEST_CHILD");
	const char *procs = getenv("GPU_TEST_PROCS");
	int nr_procs = procs ? atoi(procs) : 1, nr_children = 0, i;
	pid_t children[MAX_PROCS];

	test_init(argc, argv);
	if (nr_procs < 1 || nr_procs > MAX_PROCS)
		test_fail("GPU_TEST_PROCS=%s: 1 to %d", procs, MAX_PROCS);
	if (with_child && !strcmp(with_child, "1"))
		children[nr_children++] = fork_child();
	else if (nr_procs > 1)
		test_barrier_init();
	/* Before this process touches the emulator: each child opens its own. */
	for (i = 1; i < nr_procs; i++) {
		children[nr_children] = fork();
		if (children[nr_children] < 0)
			test_fail_errno("fork");
		if (children[nr_children] == 0)
			gpu_child_main(layout);
		nr_children++;
	}
	make_layout(layout);
	if (nr_children)
		test_barrier_wait();

	test_ready();
	test_wait_sigterm();

	check_layout();
	if (nr_children)
		test_children_verdict(children, nr_children, "parent");
	test_pass();
}
