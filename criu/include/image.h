/*
 * Image files: every file starts with a header (common magic, type magic, format
 * version); protobuf images then hold records (u32 length + packed message).
 * pages-ID.img is raw page data after a one-page header.
 */
#ifndef CR_IMAGE_H
#define CR_IMAGE_H

#include <stdint.h>
#include <stdbool.h>
#include <protobuf-c/protobuf-c.h>

#define IMG_COMMON_MAGIC 0x54564319u /* first u32 of every image */
#define IMG_FORMAT_VERSION 1u
#define PAGES_IMG_HDR_SIZE 4096u

enum cr_img_type {
	CR_IMG_INVENTORY,
	CR_IMG_PSTREE,
	CR_IMG_CORE, /* core-%d */
	CR_IMG_MM, /* mm-%d */
	CR_IMG_PAGEMAP, /* pagemap-%d */
	CR_IMG_PAGES, /* pages-%d, raw */
	CR_IMG_FILES,
	CR_IMG_FDINFO, /* fdinfo-%d */
	CR_IMG_FS, /* fs-%d */
	CR_IMG_GHOST_FILE, /* ghost-file-%d */
	CR_IMG_MAX,
};

struct cr_img_desc {
	const char *name; /* short upper-case name, as criu show prints it */
	const char *fmt; /* file name, with %d for the id if per-object */
	uint32_t magic;
	const ProtobufCMessageDescriptor *pb_desc; /* record type; NULL for raw images */
};

extern const struct cr_img_desc cr_img_descs[CR_IMG_MAX];

struct cr_img {
	int fd;
	enum cr_img_type type;
	char name[64];
};

/* The images directory, opened once by the CLI; all images are opened relative to it. */
extern int images_dir_fd;

/*
 * Open an image for writing (O_WRONLY: created, header written) or reading (O_RDONLY:
 * header checked). id fills %d in per-object names. Returns NULL after logging on error;
 * a missing file when reading is an error too unless the caller checks with img_exists().
 */
struct cr_img *open_image(enum cr_img_type type, int flags, unsigned long id);
bool img_exists(enum cr_img_type type, unsigned long id);
void close_image(struct cr_img *img);

/* Write one record. 0 or -errno. */
int pb_write_one(struct cr_img *img, const void *msg);
/*
 * Read one record of the image's type. Returns 1 with *msg set (free it with
 * pb_free()), 0 at a clean end of file, -errno on truncation/corruption (logged).
 */
int pb_read_one(struct cr_img *img, void **msg);
/* Read exactly one record; end of file is an error. */
int pb_read_one_required(struct cr_img *img, void **msg);
/* Read exactly one record of another type (an image's head record, e.g. pagemap_head). */
int pb_read_one_required_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg);
void pb_free(struct cr_img *img, void *msg);
/* Raw bytes (ghost file contents after its header): full read/write or -errno. */
int img_write_raw(struct cr_img *img, const void *buf, size_t len);
int img_read_raw(struct cr_img *img, void *buf, size_t len);

/* Decode any image file as JSON (criu show). */
int cr_show(const char *path);

#endif
