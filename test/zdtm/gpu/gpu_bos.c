/*
 * GPU buffer objects on the KFD EMULATOR (test/gpu) survive dump and restore: contents
 * checked on the device (the emulator's CHECKSUM kernel) and, for mapped BOs, through
 * their mappings, which must be the restored BOs' memory. $GPU_TEST_LAYOUT picks the
 * shape: two_gpus (12 BOs, VRAM and GTT, both GPUs), many (300 BOs: > 253 fds), big (a
 * 5 GiB sparse VRAM BO + a 1 GiB GTT BO: > 4 GiB in all). $GPU_TEST_CHILD=1 adds a child
 * process, forked before the GPU is touched (it holds no GPU state), that checks its own
 * memory after restore: the tree has children, so the plugin must restore serially.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libkfdemu.h"
#include "zdtmtst.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)
#define MAX_BOS 300
#define CHILD_MEM_SIZE (256 * KIB)
#define CHILD_MEM_SEED 0xc41d

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

static struct kfdemu_conn *conn;
static struct kfdemu_gpu_info gpus[8];
static struct test_bo bos[MAX_BOS];
static int nr_bos;

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
		check(kfdemu_map_bo(conn, &bo->info, (void **)&bo->map), "map BO");
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
		struct test_bo *bo = new_bo(i % 2, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 8 * KIB, i % 50 == 0);

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
	if (!strstr(line, " rw-s ") || !strstr(line, "/memfd:kfdemu-bo-"))
		test_fail("BO %#" PRIx64 ": mapping is no longer the BO: %s", bo->info.va_addr, line);
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

/* The child: host memory only, checked after restore; its exit status is its verdict. */
static void __attribute__((noreturn)) child_main(void)
{
	uint8_t *mem = mmap(NULL, CHILD_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);

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

int main(int argc, char **argv)
{
	const char *layout = getenv("GPU_TEST_LAYOUT");
	const char *with_child = getenv("GPU_TEST_CHILD");
	uint32_t nr_gpus = 8;
	pid_t child = 0;
	int i;

	test_init(argc, argv);
	if (with_child && !strcmp(with_child, "1"))
		child = fork_child();
	check(kfdemu_connect(NULL, &conn), "connect to the KFD emulator");
	check(kfdemu_get_gpus(conn, gpus, &nr_gpus), "GET_GPUS");
	if (nr_gpus < 2)
		test_fail("the emulator has %u GPUs, the test needs 2", nr_gpus);
	if (!layout || !strcmp(layout, "two_gpus"))
		layout_two_gpus();
	else if (!strcmp(layout, "many"))
		layout_many();
	else if (!strcmp(layout, "big"))
		layout_big();
	else
		test_fail("unknown GPU_TEST_LAYOUT %s", layout);
	for (i = 0; i < nr_bos; i++)
		check(kfdemu_bo_checksum(conn, bos[i].info.handle, 0, bos[i].info.size, &bos[i].checksum),
		      "CHECKSUM kernel");
	if (child)
		test_barrier_wait();

	test_ready();
	test_wait_sigterm();

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
	if (child)
		test_children_verdict(&child, 1, "parent");
	test_pass();
}
