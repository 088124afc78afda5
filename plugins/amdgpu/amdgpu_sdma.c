/*
 * SDMA copies through libdrm_amdgpu (amdgpu_sdma.h). NEVER RUN ON AMD HARDWARE. Per
 * engine: a device handle on the GPU's render node, a context, a staging buffer in host
 * memory made GPU-visible as a userptr BO, and a GTT BO holding the indirect buffer. Per
 * copy: the BO is imported from its dma-buf and mapped into the GPU's VM; then chunk by
 * chunk the file is read into staging (or written from it) around an SDMA submission
 * whose fence is waited for before the staging buffer is touched again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amdgpu.h>
#include <amdgpu_drm.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_dev.h"
#include "amdgpu_sdma.h"

/* Large enough to amortise a submission, small enough to stay resident. */
#define STAGING_SIZE (8ULL << 20)
#define IB_SIZE 4096ULL
#define GPU_PAGE 4096ULL

/* A BO mapped into the GPU's VM at addr. */
struct gpu_buf {
	amdgpu_bo_handle bo;
	amdgpu_va_handle va;
	uint64_t addr;
	uint64_t size;
};

struct amdgpu_sdma {
	amdgpu_device_handle dev;
	amdgpu_context_handle ctx;
	bool count_minus_one;
	void *staging;
	struct gpu_buf staging_buf;
	struct gpu_buf ib_buf;
	uint32_t *ib;
};

static int map_buf(amdgpu_device_handle dev, amdgpu_bo_handle bo, uint64_t size,
		   struct gpu_buf *buf)
{
	int ret;

	size = (size + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
	ret = amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, size, GPU_PAGE, 0,
				    &buf->addr, &buf->va, 0);
	if (ret)
		return ret;
	ret = amdgpu_bo_va_op(bo, 0, size, buf->addr, 0, AMDGPU_VA_OP_MAP);
	if (ret) {
		amdgpu_va_range_free(buf->va);
		return ret;
	}
	buf->bo = bo;
	buf->size = size;
	return 0;
}

static void unmap_buf(struct gpu_buf *buf)
{
	if (!buf->bo)
		return;
	amdgpu_bo_va_op(buf->bo, 0, buf->size, buf->addr, 0, AMDGPU_VA_OP_UNMAP);
	amdgpu_va_range_free(buf->va);
	amdgpu_bo_free(buf->bo);
	buf->bo = NULL;
}

static int make_staging(struct amdgpu_sdma *sdma)
{
	amdgpu_bo_handle bo;
	int ret;

	if (posix_memalign(&sdma->staging, GPU_PAGE, STAGING_SIZE))
		return -ENOMEM;
	ret = amdgpu_create_bo_from_user_mem(sdma->dev, sdma->staging, STAGING_SIZE, &bo);
	if (!ret) {
		ret = map_buf(sdma->dev, bo, STAGING_SIZE, &sdma->staging_buf);
		if (ret)
			amdgpu_bo_free(bo);
	}
	return ret;
}

static int make_ib(struct amdgpu_sdma *sdma)
{
	struct amdgpu_bo_alloc_request req = { .alloc_size = IB_SIZE, .phys_alignment = GPU_PAGE,
					       .preferred_heap = AMDGPU_GEM_DOMAIN_GTT };
	amdgpu_bo_handle bo;
	int ret;

	ret = amdgpu_bo_alloc(sdma->dev, &req, &bo);
	if (ret)
		return ret;
	ret = amdgpu_bo_cpu_map(bo, (void **)&sdma->ib);
	if (!ret)
		ret = map_buf(sdma->dev, bo, IB_SIZE, &sdma->ib_buf);
	if (ret) {
		if (sdma->ib)
			amdgpu_bo_cpu_unmap(bo);
		sdma->ib = NULL;
		amdgpu_bo_free(bo);
	}
	return ret;
}

void amdgpu_sdma_close(struct amdgpu_sdma *sdma)
{
	if (!sdma)
		return;
	if (sdma->ib)
		amdgpu_bo_cpu_unmap(sdma->ib_buf.bo);
	unmap_buf(&sdma->ib_buf);
	unmap_buf(&sdma->staging_buf);
	free(sdma->staging);
	if (sdma->ctx)
		amdgpu_cs_ctx_free(sdma->ctx);
	if (sdma->dev)
		amdgpu_device_deinitialize(sdma->dev);
	free(sdma);
}

int amdgpu_sdma_open(int render_fd, struct amdgpu_sdma **sdma_out)
{
	struct amdgpu_sdma *sdma = calloc(1, sizeof(*sdma));
	struct amdgpu_gpu_info info;
	uint32_t major, minor;
	int ret;

	if (!sdma)
		return -ENOMEM;
	ret = amdgpu_device_initialize(render_fd, &major, &minor, &sdma->dev);
	if (!ret)
		ret = amdgpu_query_gpu_info(sdma->dev, &info);
	if (!ret) {
		sdma->count_minus_one = info.family_id >= AMDGPU_FAMILY_AI;
		ret = amdgpu_cs_ctx_create(sdma->dev, &sdma->ctx);
	}
	if (!ret)
		ret = make_staging(sdma);
	if (!ret)
		ret = make_ib(sdma);
	if (ret) {
		pr_info("SDMA is not available on this render node (%s): CPU copies instead\n",
			strerror(-ret));
		amdgpu_sdma_close(sdma);
		return ret;
	}
	*sdma_out = sdma;
	return 0;
}

/* One submission on SDMA ring 0, waited for: the staging buffer is free again after. */
static int submit_and_wait(struct amdgpu_sdma *sdma, amdgpu_bo_list_handle list,
			   unsigned int dwords)
{
	struct amdgpu_cs_ib_info ib = { .ib_mc_address = sdma->ib_buf.addr, .size = dwords };
	struct amdgpu_cs_request req = { .ip_type = AMDGPU_HW_IP_DMA, .resources = list,
					 .number_of_ibs = 1, .ibs = &ib };
	struct amdgpu_cs_fence fence = { .context = sdma->ctx, .ip_type = AMDGPU_HW_IP_DMA };
	uint32_t expired = 0;
	int ret;

	ret = amdgpu_cs_submit(sdma->ctx, 0, &req, 1);
	if (ret)
		return ret;
	fence.fence = req.seq_no;
	ret = amdgpu_cs_query_fence_status(&fence, AMDGPU_TIMEOUT_INFINITE, 0, &expired);
	if (!ret && !expired)
		ret = -ETIMEDOUT;
	return ret;
}

static int copy_chunks(struct amdgpu_sdma *sdma, const struct gpu_buf *bo_buf,
		       amdgpu_bo_list_handle list, uint64_t bo_off, int file_fd, uint64_t file_off,
		       uint64_t len, bool to_bo)
{
	int ret = 0;

	while (!ret && len) {
		uint64_t chunk = len < STAGING_SIZE ? len : STAGING_SIZE;
		uint64_t bo_addr = bo_buf->addr + bo_off;
		unsigned int dwords;

		if (to_bo)
			ret = amdgpu_file_io(file_fd, sdma->staging, chunk, file_off, true);
		dwords = ret ? 0
			     : amdgpu_sdma_build_copy(sdma->ib, IB_SIZE / 4,
						      to_bo ? sdma->staging_buf.addr : bo_addr,
						      to_bo ? bo_addr : sdma->staging_buf.addr,
						      chunk, sdma->count_minus_one);
		if (!ret && !dwords)
			ret = -E2BIG;
		if (!ret)
			ret = submit_and_wait(sdma, list, dwords);
		if (!ret && !to_bo)
			ret = amdgpu_file_io(file_fd, sdma->staging, chunk, file_off, false);
		bo_off += chunk;
		file_off += chunk;
		len -= chunk;
	}
	return ret;
}

int amdgpu_sdma_copy(struct amdgpu_sdma *sdma, int dmabuf_fd, uint64_t bo_off, int file_fd,
		     uint64_t file_off, uint64_t len, bool to_bo)
{
	struct amdgpu_bo_import_result import = {};
	struct gpu_buf bo_buf = {};
	amdgpu_bo_handle resources[3];
	amdgpu_bo_list_handle list = NULL;
	int ret;

	ret = amdgpu_bo_import(sdma->dev, amdgpu_bo_handle_type_dma_buf_fd, dmabuf_fd, &import);
	if (ret)
		return ret;
	ret = map_buf(sdma->dev, import.buf_handle, import.alloc_size, &bo_buf);
	if (ret) {
		amdgpu_bo_free(import.buf_handle);
		return ret;
	}
	resources[0] = bo_buf.bo;
	resources[1] = sdma->staging_buf.bo;
	resources[2] = sdma->ib_buf.bo;
	ret = amdgpu_bo_list_create(sdma->dev, 3, resources, NULL, &list);
	if (!ret)
		ret = copy_chunks(sdma, &bo_buf, list, bo_off, file_fd, file_off, len, to_bo);
	if (list)
		amdgpu_bo_list_destroy(list);
	unmap_buf(&bo_buf);
	return ret;
}
