/*
 * The AMDGPU plugin's images: amdgpu-kfd-ID.img and amdgpu-renderD-ID.img (magic,
 * version, length, one packed message) and amdgpu-pages-ID.img (VRAM/GTT contents,
 * page-aligned, indexed by the entry's extents), plus filling a BO from them, the one
 * routine both restore paths use.
 */
#ifndef AMDGPU_IMAGE_H
#define AMDGPU_IMAGE_H

#include <stdint.h>

#include "amdgpu.pb-c.h"
#include "amdgpu_dev.h"

#define AMDGPU_IMG_VERSION 2

int amdgpu_kfd_image_write(int id, const AmdgpuKfdEntry *kfd);
/* -ENOENT (quietly) when there is no such image: the file is not ours, or not that kind. */
int amdgpu_kfd_image_read(int id, AmdgpuKfdEntry **kfd);
void amdgpu_kfd_image_free(AmdgpuKfdEntry *kfd);
int amdgpu_render_image_write(int id, const AmdgpuRenderEntry *render);
int amdgpu_render_image_read(int id, AmdgpuRenderEntry **render);
void amdgpu_render_image_free(AmdgpuRenderEntry *render);

/* amdgpu-pages-ID.img: created for writing at dump, opened read-only at restore. */
int amdgpu_pages_create(int id);
int amdgpu_pages_open(int id);
/* Refuse an image shorter than the dump wrote: it was truncated. */
int amdgpu_pages_check_size(int pages_fd, int id, const AmdgpuKfdEntry *kfd);

/* Write a BO's contents from the pages image into it, through its dma-buf and an engine. */
int amdgpu_fill_bo(const struct amdgpu_dev_ops *ops, struct amdgpu_engine *engine,
		   const AmdgpuBoEntry *bo, int bo_fd, int pages_fd);

#endif
