/*
 * The backends of this build, and the CPU copies between a BO's dma-buf and an image file
 * through an mmap of the dma-buf, in bounded windows, so a BO of any (64-bit) size needs
 * little address space: the hardware backend's copies where SDMA cannot run.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_dev.h"

/* 64 MiB: large enough that the mmap cost vanishes, small enough for any address space. */
#define COPY_WINDOW (64ULL << 20)

/* The emulator backend exists in test builds only (AMDGPU_EMULATOR): see Makefile.inc. */
const struct amdgpu_dev_ops *const amdgpu_backends[] = {
	&amdgpu_dev_kfd_ops,
#ifdef AMDGPU_EMULATOR
	&amdgpu_dev_emu_ops,
#endif
};
const unsigned int amdgpu_nr_backends = sizeof(amdgpu_backends) / sizeof(amdgpu_backends[0]);

const struct amdgpu_dev_ops *amdgpu_backend(AmdgpuBackend backend)
{
	unsigned int i;

	for (i = 0; i < amdgpu_nr_backends; i++)
		if (amdgpu_backends[i]->backend == backend)
			return amdgpu_backends[i];
	if (backend == AMDGPU_BACKEND__KFD_EMULATOR)
		pr_err("the images were made on the KFD EMULATOR; this build of the plugin has no emulator backend (the test build in test/gpu/plugin has)\n");
	else
		pr_err("the images name device backend %d, which this plugin does not know\n", backend);
	return NULL;
}

static int copy_via_mmap(int bo_fd, uint64_t bo_off, int file_fd, uint64_t file_off, uint64_t len,
			 bool to_bo)
{
	long page = sysconf(_SC_PAGESIZE);

	while (len) {
		uint64_t map_off = bo_off & ~((uint64_t)page - 1);
		uint64_t lead = bo_off - map_off;
		uint64_t chunk = len < COPY_WINDOW ? len : COPY_WINDOW;
		void *map;
		int ret;

		map = mmap(NULL, chunk + lead, to_bo ? PROT_WRITE : PROT_READ, MAP_SHARED, bo_fd,
			   map_off);
		if (map == MAP_FAILED)
			return -errno;
		/* to_bo: read the image straight into the BO's pages (one copy). */
		ret = amdgpu_file_io(file_fd, (char *)map + lead, chunk, file_off, to_bo);
		munmap(map, chunk + lead);
		if (ret)
			return ret;
		bo_off += chunk;
		file_off += chunk;
		len -= chunk;
	}
	return 0;
}

int amdgpu_bo_to_file_mmap(int bo_fd, uint64_t bo_off, int file_fd, uint64_t file_off, uint64_t len)
{
	return copy_via_mmap(bo_fd, bo_off, file_fd, file_off, len, false);
}

int amdgpu_file_to_bo_mmap(int file_fd, uint64_t file_off, int bo_fd, uint64_t bo_off, uint64_t len)
{
	return copy_via_mmap(bo_fd, bo_off, file_fd, file_off, len, true);
}
