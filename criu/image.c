/*
 * Image files: header (common magic, type magic, format version) then records of
 * u32 length + packed protobuf message. Readers check every length against what the
 * file really holds, so a truncated or corrupt image is an error, never a crash.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "log.h"

#include "inventory.pb-c.h"
#include "pstree.pb-c.h"
#include "core.pb-c.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"
#include "fdinfo.pb-c.h"
#include "fs.pb-c.h"

#define MAX_RECORD_SIZE (64u << 20) /* no sane record is bigger; a bigger length is corruption */

int images_dir_fd = -1;

const struct cr_img_desc cr_img_descs[CR_IMG_MAX] = {
	[CR_IMG_INVENTORY] = { "INVENTORY", "inventory.img", 0x58313116, &inventory_entry__descriptor },
	[CR_IMG_PSTREE] = { "PSTREE", "pstree.img", 0x50273030, &pstree_entry__descriptor },
	[CR_IMG_CORE] = { "CORE", "core-%lu.img", 0x55053847, &core_entry__descriptor },
	[CR_IMG_MM] = { "MM", "mm-%lu.img", 0x57492820, &mm_entry__descriptor },
	[CR_IMG_PAGEMAP] = { "PAGEMAP", "pagemap-%lu.img", 0x56084025, &pagemap_entry__descriptor },
	[CR_IMG_PAGES] = { "PAGES", "pages-%lu.img", 0x56453724, NULL },
	[CR_IMG_FILES] = { "FILES", "files.img", 0x56303138, &file_entry__descriptor },
	[CR_IMG_FDINFO] = { "FDINFO", "fdinfo-%lu.img", 0x56213732, &fdinfo_entry__descriptor },
	[CR_IMG_FS] = { "FS", "fs-%lu.img", 0x51403912, &fs_entry__descriptor },
	[CR_IMG_GHOST_FILE] = { "GHOST_FILE", "ghost-file-%lu.img", 0x52583605,
				&ghost_file_entry__descriptor },
};

struct img_header {
	uint32_t common_magic;
	uint32_t type_magic;
	uint32_t version;
};

static void img_name(enum cr_img_type type, unsigned long id, char *buf, size_t len)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(buf, len, cr_img_descs[type].fmt, id);
#pragma GCC diagnostic pop
}

bool img_exists(enum cr_img_type type, unsigned long id)
{
	char name[64];

	img_name(type, id, name, sizeof(name));
	return faccessat(images_dir_fd, name, F_OK, 0) == 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Returns bytes read (less than len only at end of file) or -errno. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

static int write_header(struct cr_img *img)
{
	struct img_header hdr = { IMG_COMMON_MAGIC, cr_img_descs[img->type].magic, IMG_FORMAT_VERSION };
	int ret = write_full(img->fd, &hdr, sizeof(hdr));

	/* Page data start page aligned, so restore can read them straight into place. */
	if (!ret && img->type == CR_IMG_PAGES && ftruncate(img->fd, PAGES_IMG_HDR_SIZE) == 0 &&
	    lseek(img->fd, PAGES_IMG_HDR_SIZE, SEEK_SET) < 0)
		ret = -errno;
	if (ret)
		pr_err("%s: cannot write image header: %s\n", img->name, strerror(-ret));
	return ret;
}

static int check_header(struct cr_img *img)
{
	struct img_header hdr;
	ssize_t n = read_full(img->fd, &hdr, sizeof(hdr));

	if (n < 0) {
		pr_err("%s: cannot read image header: %s\n", img->name, strerror(-n));
		return n;
	}
	if (n != sizeof(hdr)) {
		pr_err("%s: truncated image (no complete header)\n", img->name);
		return -EINVAL;
	}
	if (hdr.common_magic != IMG_COMMON_MAGIC || hdr.type_magic != cr_img_descs[img->type].magic) {
		pr_err("%s: not a %s image (bad magic %#x/%#x)\n", img->name, cr_img_descs[img->type].name,
		       hdr.common_magic, hdr.type_magic);
		return -EINVAL;
	}
	if (hdr.version != IMG_FORMAT_VERSION) {
		pr_err("%s: image format version %u, this criu reads version %u\n", img->name, hdr.version,
		       IMG_FORMAT_VERSION);
		return -EINVAL;
	}
	if (img->type == CR_IMG_PAGES && lseek(img->fd, PAGES_IMG_HDR_SIZE, SEEK_SET) < 0)
		return -errno;
	return 0;
}

struct cr_img *open_image(enum cr_img_type type, int flags, unsigned long id)
{
	struct cr_img *img = calloc(1, sizeof(*img));
	int ret;

	if (!img) {
		pr_err("out of memory\n");
		return NULL;
	}
	img->type = type;
	img_name(type, id, img->name, sizeof(img->name));

	if ((flags & O_ACCMODE) == O_RDONLY)
		img->fd = openat(images_dir_fd, img->name, O_RDONLY | O_CLOEXEC);
	else
		img->fd = openat(images_dir_fd, img->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (img->fd < 0) {
		pr_perror("cannot open image %s", img->name);
		free(img);
		return NULL;
	}

	ret = ((flags & O_ACCMODE) == O_RDONLY) ? check_header(img) : write_header(img);
	if (ret) {
		close_image(img);
		return NULL;
	}
	return img;
}

void close_image(struct cr_img *img)
{
	if (!img)
		return;
	if (img->fd >= 0)
		close(img->fd);
	free(img);
}

int pb_write_one(struct cr_img *img, const void *msg)
{
	const ProtobufCMessage *m = msg;
	size_t len = protobuf_c_message_get_packed_size(m);
	uint32_t len32 = len;
	uint8_t stackbuf[1024], *buf = stackbuf;
	int ret;

	if (len > sizeof(stackbuf)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	protobuf_c_message_pack(m, buf);
	ret = write_full(img->fd, &len32, sizeof(len32));
	if (!ret)
		ret = write_full(img->fd, buf, len);
	if (buf != stackbuf)
		free(buf);
	if (ret)
		pr_err("%s: cannot write record: %s\n", img->name, strerror(-ret));
	return ret;
}

static int read_record(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg)
{
	uint32_t len;
	ssize_t n;
	void *buf;

	n = read_full(img->fd, &len, sizeof(len));
	if (n == 0)
		return 0;
	if (n != sizeof(len)) {
		pr_err("%s: truncated record length\n", img->name);
		return n < 0 ? n : -EINVAL;
	}
	if (len > MAX_RECORD_SIZE) {
		pr_err("%s: corrupt record length %u\n", img->name, len);
		return -EINVAL;
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	n = read_full(img->fd, buf, len);
	if (n != (ssize_t)len) {
		pr_err("%s: truncated record (%zd of %u bytes)\n", img->name, n, len);
		free(buf);
		return n < 0 ? n : -EINVAL;
	}
	*msg = protobuf_c_message_unpack(desc, NULL, len, buf);
	free(buf);
	if (!*msg) {
		pr_err("%s: corrupt record (cannot decode %s)\n", img->name, desc->name);
		return -EINVAL;
	}
	return 1;
}

int pb_read_one(struct cr_img *img, void **msg)
{
	return read_record(img, cr_img_descs[img->type].pb_desc, msg);
}

int pb_read_one_required_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg)
{
	int ret = read_record(img, desc, msg);

	if (ret == 0) {
		pr_err("%s: image is empty or truncated\n", img->name);
		return -EINVAL;
	}
	return ret < 0 ? ret : 0;
}

int pb_read_one_required(struct cr_img *img, void **msg)
{
	return pb_read_one_required_as(img, cr_img_descs[img->type].pb_desc, msg);
}

void pb_free(struct cr_img *img, void *msg)
{
	(void)img;
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

int img_write_raw(struct cr_img *img, const void *buf, size_t len)
{
	int ret = write_full(img->fd, buf, len);

	if (ret)
		pr_err("%s: cannot write %zu bytes: %s\n", img->name, len, strerror(-ret));
	return ret;
}

int img_read_raw(struct cr_img *img, void *buf, size_t len)
{
	ssize_t n = read_full(img->fd, buf, len);

	if (n != (ssize_t)len) {
		pr_err("%s: truncated image (%zd of %zu bytes)\n", img->name, n, len);
		return n < 0 ? n : -EINVAL;
	}
	return 0;
}
