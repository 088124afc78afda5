/*
 * GPU benchmark and demo subject: HOST_MIB of private anonymous memory and DEV_MIB of VRAM
 * BOs on the KFD EMULATOR's GPUs (test/gpu; an emulator, not a GPU), all non-zero, then waits.
 * On SIGTERM it checks every host word and every BO byte read back from the device, and exits
 * 0 (PASS) or 1 (FAIL), so each benchmark or demo restore is also proven byte-exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libkfdemu.h"

#define MIB (1ULL << 20)
/* BOs of 256 MiB: several per GPU, as a real application has, each one FILLed in chunks. */
#define BO_SIZE (256 * MIB)
/* One FILL pattern per chunk: a chunk restored at the wrong place reads back wrong. */
#define FILL_CHUNK (16 * MIB)
#define MAX_BOS 1024
#define MAX_GPUS 8
/* Odd, so (i + 1) * WORD_MULT is never zero and differs for every word index. */
#define WORD_MULT 0x9e3779b97f4a7c15ull

struct holder_bo {
	struct kfdemu_bo_info info;
	uint32_t seed; /* the FILL pattern of chunk c is chunk_pattern(seed, c) */
};

static struct kfdemu_conn *conn;
static struct holder_bo bos[MAX_BOS];
static unsigned int nr_bos;

static uint64_t word_pattern(size_t index)
{
	return (index + 1) * WORD_MULT;
}

/* Never zero: the top bit is set. */
static uint32_t chunk_pattern(uint32_t seed, uint64_t chunk)
{
	return 0x80000000u | (seed << 12) | (uint32_t)(chunk & 0xfff);
}

static uint64_t *fill_host(size_t size_mib)
{
	size_t nr_words = size_mib * MIB / sizeof(uint64_t), i;
	uint64_t *words;

	words = mmap(NULL, size_mib * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED) {
		fprintf(stderr, "gpu_holder: cannot map %zu MiB: %s\n", size_mib, strerror(errno));
		return NULL;
	}
	for (i = 0; i < nr_words; i++)
		words[i] = word_pattern(i);
	return words;
}

static int check_host(const uint64_t *words, size_t size_mib)
{
	size_t nr_words = size_mib * MIB / sizeof(uint64_t), i;

	for (i = 0; i < nr_words; i++) {
		if (words[i] != word_pattern(i)) {
			printf("gpu_holder %d: FAIL: host word at byte %#zx is %#" PRIx64
			       ", expected %#" PRIx64 "\n", getpid(), i * 8, words[i], word_pattern(i));
			return -EIO;
		}
	}
	return 0;
}

/* The device memory, spread over every emulated GPU, each BO filled by FILL kernels. */
static int fill_device(uint64_t dev_mib)
{
	struct kfdemu_gpu_info gpus[MAX_GPUS];
	uint32_t nr_gpus = MAX_GPUS;
	uint64_t left = dev_mib * MIB, off;
	int ret;

	ret = kfdemu_get_gpus(conn, gpus, &nr_gpus);
	if (!ret && nr_gpus == 0)
		ret = -ENODEV;
	if (ret) {
		fprintf(stderr, "gpu_holder: no emulated GPUs: %s\n", strerror(-ret));
		return ret;
	}
	while (left && nr_bos < MAX_BOS) {
		struct holder_bo *bo = &bos[nr_bos];
		uint64_t size = left < BO_SIZE ? left : BO_SIZE;

		bo->seed = nr_bos + 1;
		ret = kfdemu_alloc_bo(conn, gpus[nr_bos % nr_gpus].gpu_id,
				      KFD_IOC_ALLOC_MEM_FLAGS_VRAM, size, 0, &bo->info);
		for (off = 0; !ret && off < size; off += FILL_CHUNK)
			ret = kfdemu_bo_fill(conn, bo->info.handle, off,
					     size - off < FILL_CHUNK ? size - off : FILL_CHUNK,
					     chunk_pattern(bo->seed, off / FILL_CHUNK));
		if (ret) {
			fprintf(stderr, "gpu_holder: BO %u (%" PRIu64 " bytes): %s\n", nr_bos, size,
				strerror(-ret));
			return ret;
		}
		nr_bos++;
		left -= size;
	}
	if (left) {
		fprintf(stderr, "gpu_holder: more than %d BOs of %llu MiB\n", MAX_BOS, BO_SIZE / MIB);
		return -E2BIG;
	}
	return 0;
}

/* Reads the BO back through its exported fd (the emulator's VRAM) and checks every word. */
static int check_bo(const struct holder_bo *bo, uint32_t *buf)
{
	uint64_t off, i;
	int fd, ret;

	ret = kfdemu_export_bo(conn, bo->info.handle, &fd);
	if (ret) {
		printf("gpu_holder %d: FAIL: cannot export BO %#" PRIx64 ": %s\n", getpid(),
		       bo->info.va_addr, strerror(-ret));
		return ret;
	}
	for (off = 0; !ret && off < bo->info.size; off += FILL_CHUNK) {
		uint64_t len = bo->info.size - off < FILL_CHUNK ? bo->info.size - off : FILL_CHUNK;
		uint32_t expected = chunk_pattern(bo->seed, off / FILL_CHUNK);

		if (pread(fd, buf, len, off) != (ssize_t)len) {
			printf("gpu_holder %d: FAIL: short read of BO %#" PRIx64 " at %#" PRIx64 "\n",
			       getpid(), bo->info.va_addr, off);
			ret = -EIO;
		}
		for (i = 0; !ret && i < len / 4; i++) {
			if (buf[i] != expected) {
				printf("gpu_holder %d: FAIL: BO %#" PRIx64 " word at %#" PRIx64
				       " is %#x, expected %#x\n", getpid(), bo->info.va_addr,
				       off + 4 * i, buf[i], expected);
				ret = -EIO;
			}
		}
	}
	close(fd);
	return ret;
}

static int check_device(void)
{
	uint32_t *buf = malloc(FILL_CHUNK);
	unsigned int i;
	int ret = buf ? 0 : -ENOMEM;

	for (i = 0; !ret && i < nr_bos; i++)
		ret = check_bo(&bos[i], buf);
	free(buf);
	return ret;
}

int main(int argc, char **argv)
{
	size_t host_mib, dev_mib;
	sigset_t sigterm;
	uint64_t *host;
	int ret;

	if (argc != 3 || (host_mib = strtoul(argv[1], NULL, 10)) == 0 ||
	    (dev_mib = strtoul(argv[2], NULL, 10)) == 0) {
		fprintf(stderr, "usage: %s HOST_MIB DEV_MIB (KFD emulator socket: $KFDEMU_SOCKET)\n",
			argv[0]);
		return 2;
	}
	/*
	 * Only stdio: fds leaked by whoever started us are not what is measured. SIGTERM stays
	 * blocked and is taken by sigwaitinfo(): a restored task re-enters its wait only after
	 * criu lets it go, and a handler + pause() would lose a SIGTERM sent in between.
	 */
	sigemptyset(&sigterm);
	sigaddset(&sigterm, SIGTERM);
	if (close_range(3, ~0u, 0) || sigprocmask(SIG_BLOCK, &sigterm, NULL)) {
		perror("gpu_holder: setup");
		return 2;
	}
	host = fill_host(host_mib);
	if (!host)
		return 2;
	/* Connect from this process: the emulator binds BOs to the process that connected. */
	ret = kfdemu_connect(NULL, &conn);
	if (ret) {
		fprintf(stderr, "gpu_holder: cannot connect to the KFD emulator: %s\n", strerror(-ret));
		return 2;
	}
	if (fill_device(dev_mib))
		return 2;
	/* stdout is a regular file (the driver polls it): unbuffered lines land in order. */
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("gpu_holder %d: ready, %zu MiB host memory, %zu MiB in %u BOs on the KFD EMULATOR\n",
	       getpid(), host_mib, dev_mib, nr_bos);

	while (sigwaitinfo(&sigterm, NULL) != SIGTERM)
		;

	if (check_host(host, host_mib) || check_device())
		return 1;
	printf("gpu_holder %d: PASS, %zu MiB host memory and %zu MiB device memory intact\n",
	       getpid(), host_mib, dev_mib);
	return 0;
}
