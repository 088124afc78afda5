/*
 * Reading and writing the AMDGPU plugin's images. The plugin cannot use criu's image
 * code (not part of the plugin API), so amdgpu-kfd-ID.img and amdgpu-renderD-ID.img have
 * their own small header: u32 magic, u32 version, u64 length of the packed protobuf that
 * follows.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_image.h"

/* Bigger than any sane entry (a million BOs): a corrupt length is refused, not allocated. */
#define IMAGE_MAX (256ULL << 20)

#define KFD_IMAGE "amdgpu-kfd-%d.img"
#define KFD_MAGIC 0x4b444741U /* "AGDK" */
#define RENDER_IMAGE "amdgpu-renderD-%d.img"
#define RENDER_MAGIC 0x52444741U /* "AGDR" */

struct img_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t len;
};

static void pages_image_name(char *buf, size_t size, int id)
{
	snprintf(buf, size, "amdgpu-pages-%d.img", id);
}

/* One packed message behind the header; which message the magic says. */
static int message_write(const char *name, uint32_t magic, const ProtobufCMessage *msg)
{
	struct img_hdr hdr = { .magic = magic, .version = AMDGPU_IMG_VERSION };
	uint8_t *buf;
	int fd, ret;

	hdr.len = protobuf_c_message_get_packed_size(msg);
	buf = malloc(hdr.len ? hdr.len : 1);
	if (!buf) {
		pr_err("%s: out of memory\n", name);
		return -ENOMEM;
	}
	protobuf_c_message_pack(msg, buf);
	fd = openat(criu_get_image_dir(), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ret = fd < 0 ? -errno : amdgpu_file_io(fd, &hdr, sizeof(hdr), 0, false);
	if (!ret)
		ret = amdgpu_file_io(fd, buf, hdr.len, sizeof(hdr), false);
	if (fd >= 0 && close(fd) && !ret)
		ret = -errno;
	free(buf);
	if (ret)
		pr_err("cannot write %s: %s\n", name, strerror(-ret));
	return ret;
}

static int read_payload(int fd, const char *name, uint32_t magic,
			const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg)
{
	struct img_hdr hdr;
	uint8_t *buf;
	int ret;

	ret = amdgpu_file_io(fd, &hdr, sizeof(hdr), 0, true);
	if (!ret && (hdr.magic != magic || hdr.version != AMDGPU_IMG_VERSION ||
		     hdr.len > IMAGE_MAX)) {
		pr_err("%s: bad header (magic %#x, version %u, length %" PRIu64 "; this plugin reads version %u)\n",
		       name, hdr.magic, hdr.version, hdr.len, AMDGPU_IMG_VERSION);
		return -EINVAL;
	}
	buf = ret ? NULL : malloc(hdr.len ? hdr.len : 1);
	if (!ret && !buf)
		ret = -ENOMEM;
	if (!ret)
		ret = amdgpu_file_io(fd, buf, hdr.len, sizeof(hdr), true);
	if (!ret) {
		*msg = protobuf_c_message_unpack(desc, NULL, hdr.len, buf);
		if (!*msg)
			ret = -EINVAL;
	}
	free(buf);
	if (ret)
		pr_err("cannot read %s: %s\n", name,
		       ret == -ENODATA ? "truncated" : ret == -EINVAL ? "corrupt" : strerror(-ret));
	return ret;
}

static int message_read(const char *name, uint32_t magic, const ProtobufCMessageDescriptor *desc,
			ProtobufCMessage **msg)
{
	int fd, ret;

	fd = openat(criu_get_image_dir(), name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		pr_perror("cannot open %s", name);
		return -errno;
	}
	ret = read_payload(fd, name, magic, desc, msg);
	close(fd);
	return ret;
}

int amdgpu_kfd_image_write(int id, const AmdgpuKfdEntry *kfd)
{
	char name[64];

	snprintf(name, sizeof(name), KFD_IMAGE, id);
	return message_write(name, KFD_MAGIC, &kfd->base);
}

int amdgpu_kfd_image_read(int id, AmdgpuKfdEntry **kfd)
{
	char name[64];

	snprintf(name, sizeof(name), KFD_IMAGE, id);
	return message_read(name, KFD_MAGIC, &amdgpu_kfd_entry__descriptor,
			    (ProtobufCMessage **)kfd);
}

void amdgpu_kfd_image_free(AmdgpuKfdEntry *kfd)
{
	if (kfd)
		amdgpu_kfd_entry__free_unpacked(kfd, NULL);
}

int amdgpu_render_image_write(int id, const AmdgpuRenderEntry *render)
{
	char name[64];

	snprintf(name, sizeof(name), RENDER_IMAGE, id);
	return message_write(name, RENDER_MAGIC, &render->base);
}

int amdgpu_render_image_read(int id, AmdgpuRenderEntry **render)
{
	char name[64];

	snprintf(name, sizeof(name), RENDER_IMAGE, id);
	return message_read(name, RENDER_MAGIC, &amdgpu_render_entry__descriptor,
			    (ProtobufCMessage **)render);
}

void amdgpu_render_image_free(AmdgpuRenderEntry *render)
{
	if (render)
		amdgpu_render_entry__free_unpacked(render, NULL);
}

int amdgpu_pages_create(int id)
{
	char name[64];
	int fd;

	pages_image_name(name, sizeof(name), id);
	fd = openat(criu_get_image_dir(), name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_perror("cannot create %s", name);
		return -errno;
	}
	return fd;
}

int amdgpu_pages_open(int id)
{
	char name[64];
	int fd;

	pages_image_name(name, sizeof(name), id);
	/* Read-only, always: a restore never changes its images. */
	fd = openat(criu_get_image_dir(), name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("cannot open %s", name);
		return -errno;
	}
	return fd;
}

int amdgpu_pages_check_size(int pages_fd, int id, const AmdgpuKfdEntry *kfd)
{
	struct stat st;

	if (fstat(pages_fd, &st)) {
		pr_perror("amdgpu-pages-%d.img: fstat", id);
		return -errno;
	}
	if ((uint64_t)st.st_size < kfd->pages_size) {
		pr_err("amdgpu-pages-%d.img holds %" PRIu64 " bytes, the dump wrote %" PRIu64 ": the image is truncated\n",
		       id, (uint64_t)st.st_size, kfd->pages_size);
		return -ENODATA;
	}
	return 0;
}

int amdgpu_fill_bo(const struct amdgpu_dev_ops *ops, struct amdgpu_engine *engine,
		   const AmdgpuBoEntry *bo, int bo_fd, int pages_fd)
{
	size_t i;
	int ret;

	for (i = 0; i < bo->n_extents; i++) {
		const AmdgpuBoExtent *ext = bo->extents[i];

		if (ext->bo_offset > bo->size || ext->length > bo->size - ext->bo_offset) {
			pr_err("BO %#" PRIx64 ": extent %#" PRIx64 "+%" PRIu64 " lies outside its %" PRIu64 " bytes\n",
			       bo->addr, ext->bo_offset, ext->length, bo->size);
			return -EINVAL;
		}
		ret = ops->file_to_bo(engine, pages_fd, ext->image_offset, bo_fd, ext->bo_offset,
				      ext->length);
		if (ret) {
			pr_err("BO %#" PRIx64 ": cannot write %" PRIu64 " bytes at %#" PRIx64 " from the pages image: %s\n",
			       bo->addr, ext->length, ext->bo_offset,
			       ret == -ENODATA ? "the image is truncated" : strerror(-ret));
			return ret;
		}
	}
	return 0;
}
