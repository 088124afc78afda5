/*
 * GPU benchmark and demo subject: HOST_MIB of private anonymous memory and DEV_MIB of VRAM
 * BOs on the KFD EMULATOR's GPUs (test/gpu; an emulator, not a GPU), all non-zero, then
 * waits; with NPROCS > 1, a launcher and NPROCS - 1 workers, each with that much of its
 * own. On SIGTERM each checks every host word and every BO word (read through its mapping
 * on the render node, which the restore re-made) and the launcher exits 0 (PASS) only if all did,
 * so each benchmark or demo restore is also proven byte-exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libkfdemu.h"

#define MIB (1ULL << 20)
/* BOs of 256 MiB: several per GPU, as a real application has, each one FILLed in chunks. */
#define BO_SIZE (256 * MIB)
/* One FILL pattern per chunk: a chunk restored at the wrong place reads back wrong. */
#define FILL_CHUNK (16 * MIB)
#define MAX_BOS 1024
#define MAX_PROCS 16
/* Odd, so (i + 1) * WORD_MULT is never zero and differs for every word index. */
#define WORD_MULT 0x9e3779b97f4a7c15ull

struct holder_bo {
	struct kfdemu_bo_info info;
	uint32_t seed;	     /* the FILL pattern of chunk c is chunk_pattern(seed, c) */
	const uint32_t *map; /* through its GPU's render node, as a runtime maps its BOs */
};

static struct kfdemu_device dev;
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
	uint64_t left = dev_mib * MIB, off;
	int ret = 0;

	while (left && nr_bos < MAX_BOS) {
		struct holder_bo *bo = &bos[nr_bos];
		uint64_t size = left < BO_SIZE ? left : BO_SIZE;

		bo->seed = nr_bos + 1;
		ret = kfdemu_alloc_bo(dev.kfd, dev.gpus[nr_bos % dev.nr_gpus].gpu_id,
				      KFD_IOC_ALLOC_MEM_FLAGS_VRAM, size, 0, &bo->info);
		if (!ret)
			ret = kfdemu_device_map_bo(&dev, &bo->info, (void **)&bo->map);
		for (off = 0; !ret && off < size; off += FILL_CHUNK)
			ret = kfdemu_bo_fill(dev.kfd, bo->info.handle, off,
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

/*
 * Reads the BO back through its mapping (made at allocation, re-made by the restore on the
 * restored render node) and checks every word.
 */
static int check_bo(const struct holder_bo *bo)
{
	uint64_t i;

	for (i = 0; i < bo->info.size / 4; i++) {
		uint32_t expected = chunk_pattern(bo->seed, i * 4 / FILL_CHUNK);

		if (bo->map[i] != expected) {
			printf("gpu_holder %d: FAIL: BO %#" PRIx64 " word at %#" PRIx64
			       " is %#x, expected %#x\n", getpid(), bo->info.va_addr, 4 * i, bo->map[i],
			       expected);
			return -EIO;
		}
	}
	return 0;
}

static int check_device(void)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; !ret && i < nr_bos; i++)
		ret = check_bo(&bos[i]);
	return ret;
}

/* One process's share: host memory, then its own /dev/kfd, render nodes and BOs. */
static uint64_t *setup(size_t host_mib, size_t dev_mib)
{
	uint64_t *host = fill_host(host_mib);
	int ret;

	if (!host)
		return NULL;
	/* Open from this process: the emulator binds BOs to the process that opened it. */
	ret = kfdemu_device_open(NULL, &dev);
	if (ret) {
		fprintf(stderr, "gpu_holder: cannot open the KFD emulator: %s\n", strerror(-ret));
		return NULL;
	}
	if (fill_device(dev_mib))
		return NULL;
	printf("gpu_holder %d: ready, %zu MiB host memory, %zu MiB in %u BOs on the KFD EMULATOR\n",
	       getpid(), host_mib, dev_mib, nr_bos);
	return host;
}

static void wait_sigterm(const sigset_t *sigterm)
{
	while (sigwaitinfo(sigterm, NULL) != SIGTERM)
		;
}

static int verdict(const uint64_t *host, size_t host_mib)
{
	if (check_host(host, host_mib) || check_device())
		return 1;
	printf("gpu_holder %d: PASS, host and device memory intact\n", getpid());
	return 0;
}

/* A worker: its own memory, ready on the pipe, then its own check on SIGTERM. */
static void __attribute__((noreturn)) worker_main(size_t host_mib, size_t dev_mib, int ready_fd,
						   const sigset_t *sigterm)
{
	uint64_t *host = setup(host_mib, dev_mib);

	if (!host || write(ready_fd, "r", 1) != 1)
		_exit(2);
	close(ready_fd);
	wait_sigterm(sigterm);
	_exit(verdict(host, host_mib));
}

/* The workers, each ready before the launcher says it is; no pipe is left open after. */
static int start_workers(int nr, size_t host_mib, size_t dev_mib, const sigset_t *sigterm,
			 pid_t *workers)
{
	int pipe_fds[2], i;
	char byte;

	if (pipe(pipe_fds))
		return -errno;
	for (i = 0; i < nr; i++) {
		workers[i] = fork();
		if (workers[i] < 0)
			return -errno;
		if (workers[i] == 0) {
			close(pipe_fds[0]);
			worker_main(host_mib, dev_mib, pipe_fds[1], sigterm);
		}
	}
	close(pipe_fds[1]);
	for (i = 0; i < nr; i++)
		if (read(pipe_fds[0], &byte, 1) != 1)
			return -EIO;
	close(pipe_fds[0]);
	return 0;
}

static int workers_verdict(const pid_t *workers, int nr)
{
	int i, status, ret = 0;

	for (i = 0; i < nr; i++)
		kill(workers[i], SIGTERM);
	for (i = 0; i < nr; i++) {
		if (waitpid(workers[i], &status, 0) != workers[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("gpu_holder %d: FAIL: worker %d ended with status %#x\n", getpid(),
			       workers[i], status);
			ret = 1;
		}
	}
	return ret;
}

int main(int argc, char **argv)
{
	size_t host_mib, dev_mib;
	pid_t workers[MAX_PROCS];
	int nr_procs = argc == 4 ? atoi(argv[3]) : 1;
	sigset_t sigterm;
	uint64_t *host;

	if ((argc != 3 && argc != 4) || (host_mib = strtoul(argv[1], NULL, 10)) == 0 ||
	    (dev_mib = strtoul(argv[2], NULL, 10)) == 0 || nr_procs < 1 || nr_procs > MAX_PROCS) {
		fprintf(stderr, "usage: %s HOST_MIB DEV_MIB [NPROCS] (KFD emulator socket: $KFDEMU_SOCKET)\n",
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
	/* stdout is a regular file (the driver polls it): unbuffered lines land in order. */
	setvbuf(stdout, NULL, _IONBF, 0);
	if (start_workers(nr_procs - 1, host_mib, dev_mib, &sigterm, workers)) {
		fprintf(stderr, "gpu_holder: cannot start the workers\n");
		return 2;
	}
	host = setup(host_mib, dev_mib);
	if (!host)
		return 2;
	printf("gpu_holder %d: all %d processes ready\n", getpid(), nr_procs);

	wait_sigterm(&sigterm);

	if (workers_verdict(workers, nr_procs - 1) || verdict(host, host_mib))
		return 1;
	printf("gpu_holder %d: all PASS\n", getpid());
	return 0;
}
