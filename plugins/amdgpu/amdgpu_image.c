/*
 * Reading and writing the AMDGPU plugin's images. The plugin cannot use criu's image
 * code (not part of the plugin API), so amdgpu-kfd-ID.img has its own small header:
 * u32 magic, u32 version, u64 length of the packed protobuf that follows.
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
#define KFD_IMAGE_MAX (256ULL << 20)

struct kfd_image_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t len;
};

static void kfd_image_name(char *buf, size_t size, int id)
{
	snprintf(buf, size, "amdgpu-kfd-%d.img", id);
}

static void pages_image_name(char *buf, size_t size, int id)
{
	snprintf(buf, size, "amdgpu-pages-%d.img", id);
}

static int write_full(int fd, const void *buf, size_t len)
{
	while (len) {
		ssize_t done = write(fd, buf, len);

		if (done < 0 && errno == EINTR)
			continue;
		if (done < 0)
			return -errno;
		buf = (const char *)buf + done;
		len -= done;
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	while (len) {
		ssize_t done = read(fd, buf, len);

		if (done < 0 && errno == EINTR)
			continue;
		if (done < 0)
			return -errno;
		if (done == 0)
			return -ENODATA;
		buf = (char *)buf + done;
		len -= done;
	}
	return 0;
}

int amdgpu_kfd_image_write(int id, const AmdgpuKfdEntry *kfd)
{
	struct kfd_image_hdr hdr = { .magic = AMDGPU_IMG_MAGIC, .version = AMDGPU_IMG_VERSION };
	char name[64];
	uint8_t *buf;
	int fd, ret;

	kfd_image_name(name, sizeof(name), id);
	hdr.len = amdgpu_kfd_entry__get_packed_size(kfd);
	buf = malloc(hdr.len ? hdr.len : 1);
	if (!buf) {
		pr_err("%s: out of memory\n", name);
		return -ENOMEM;
	}
	amdgpu_kfd_entry__pack(kfd, buf);
	fd = openat(criu_get_image_dir(), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ret = fd < 0 ? -errno : write_full(fd, &hdr, sizeof(hdr));
	if (!ret)
		ret = write_full(fd, buf, hdr.len);
	if (fd >= 0 && close(fd) && !ret)
		ret = -errno;
	free(buf);
	if (ret)
		pr_err("cannot write %s: %s\n", name, strerror(-ret));
	return ret;
}

static int read_kfd_payload(int fd, const char *name, AmdgpuKfdEntry **kfd)
{
	struct kfd_image_hdr hdr;
	uint8_t *buf;
	int ret;

	ret = read_full(fd, &hdr, sizeof(hdr));
	if (!ret && (hdr.magic != AMDGPU_IMG_MAGIC || hdr.version != AMDGPU_IMG_VERSION ||
		     hdr.len > KFD_IMAGE_MAX)) {
		pr_err("%s: bad header (magic %#x, version %u, length %" PRIu64 ")\n", name, hdr.magic,
		       hdr.version, hdr.len);
		return -EINVAL;
	}
	buf = ret ? NULL : malloc(hdr.len ? hdr.len : 1);
	if (!ret && !buf)
		ret = -ENOMEM;
	if (!ret)
		ret = read_full(fd, buf, hdr.len);
	if (!ret) {
		*kfd = amdgpu_kfd_entry__unpack(NULL, hdr.len, buf);
		if (!*kfd)
			ret = -EINVAL;
	}
	free(buf);
	if (ret)
		pr_err("cannot read %s: %s\n", name,
		       ret == -ENODATA ? "truncated" : ret == -EINVAL ? "corrupt" : strerror(-ret));
	return ret;
}

int amdgpu_kfd_image_read(int id, AmdgpuKfdEntry **kfd)
{
	char name[64];
	int fd, ret;

	kfd_image_name(name, sizeof(name), id);
	fd = openat(criu_get_image_dir(), name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		pr_perror("cannot open %s", name);
		return -errno;
	}
	ret = read_kfd_payload(fd, name, kfd);
	close(fd);
	return ret;
}

void amdgpu_kfd_image_free(AmdgpuKfdEntry *kfd)
{
	if (kfd)
		amdgpu_kfd_entry__free_unpacked(kfd, NULL);
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

int amdgpu_fill_bo(const struct amdgpu_dev_ops *ops, const AmdgpuBoEntry *bo, int bo_fd,
		   int pages_fd)
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
		ret = ops->file_to_bo(pages_fd, ext->image_offset, bo_fd, ext->bo_offset, ext->length);
		if (ret)
			return ret;
	}
	return 0;
}
