/*
 * The AMDGPU plugin's images: amdgpu-kfd-ID.img (magic, version, length, one packed
 * AmdgpuKfdEntry) and amdgpu-pages-ID.img (BO contents, page-aligned, indexed by the
 * entry's extents), plus filling a BO from them, the one routine both restore paths use.
 */
#ifndef AMDGPU_IMAGE_H
#define AMDGPU_IMAGE_H

#include <stdint.h>

#include "amdgpu.pb-c.h"
#include "amdgpu_dev.h"

#define AMDGPU_IMG_MAGIC 0x4b444741U /* "AGDK" */
#define AMDGPU_IMG_VERSION 1

int amdgpu_kfd_image_write(int id, const AmdgpuKfdEntry *kfd);
/* -ENOENT (quietly) when there is no amdgpu-kfd-ID.img: the file is not ours. */
int amdgpu_kfd_image_read(int id, AmdgpuKfdEntry **kfd);
void amdgpu_kfd_image_free(AmdgpuKfdEntry *kfd);

/* amdgpu-pages-ID.img: created for writing at dump, opened read-only at restore. */
int amdgpu_pages_create(int id);
int amdgpu_pages_open(int id);
/* Refuse an image shorter than the dump wrote: it was truncated. */
int amdgpu_pages_check_size(int pages_fd, int id, const AmdgpuKfdEntry *kfd);

/* Write a BO's contents from the pages image into it, through its fd. */
int amdgpu_fill_bo(const struct amdgpu_dev_ops *ops, const AmdgpuBoEntry *bo, int bo_fd,
		   int pages_fd);

#endif
