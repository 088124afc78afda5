/*
 * Fuzz target for the image framing (criu/base/image.c): each image file of the input (any type
 * of cr_img_descs, by its name) is read to its end the way criu's readers read it.
 */
#include <fcntl.h>
#include <stdint.h>

#include "fuzz.h"
#include "image.h"

#include "ghost-file.pb-c.h"
#include "pagemap.pb-c.h"
#include "pipe.pb-c.h"

#define RAW_CHUNK 4096
#define MAX_KEPT 64

/* Raw bytes that follow a record, in chunks: a huge length must fail at end of file, not in malloc. */
static int read_raw(struct cr_img *img, uint64_t len)
{
	static char buf[RAW_CHUNK];

	while (len) {
		size_t chunk = len < sizeof(buf) ? len : sizeof(buf);
		int ret = img_read_raw(img, buf, chunk);

		if (ret)
			return ret;
		len -= chunk;
	}
	return 0;
}

/* Records of the image's own type to the end; 0 at a clean end, else -errno. */
static int read_records(struct cr_img *img)
{
	void *msg;
	int ret;

	while ((ret = pb_read_one(img, &msg)) > 0)
		pb_free(img, msg);
	return ret;
}

/* The first record, which must be there (as inventory, core, mm, fs and heads are read). */
static int read_first(struct cr_img *img, const ProtobufCMessageDescriptor *desc)
{
	void *msg;
	int ret = pb_read_one_required_as(img, desc, &msg);

	if (!ret)
		pb_free(img, msg);
	return ret;
}

/* pages-ID.img: page data without any header, read to the end. */
static void read_pages(struct cr_img *img)
{
	off_t left;

	while ((left = img_bytes_left(img)) > 0)
		if (read_raw(img, left < RAW_CHUNK ? left : RAW_CHUNK))
			return;
}

/* pipes-data.img, fifo-data.img: pipe_data_entry records, each followed by its bytes. */
static void read_pipe_data(struct cr_img *img)
{
	PipeDataEntry *pde;

	while (pb_read_one(img, (void **)&pde) > 0) {
		int ret = read_raw(img, pde->bytes);

		pb_free(img, pde);
		if (ret)
			return;
	}
}

/* ghost-file-ID.img: the entry, then its contents or ghost_chunk_entry records with theirs. */
static void read_ghost_file(struct cr_img *img)
{
	GhostFileEntry *ge;
	GhostChunkEntry *gc;

	if (pb_read_one_required(img, (void **)&ge))
		return;
	if (!ge->chunks) {
		read_raw(img, ge->size);
	} else {
		while (pb_read_one_as(img, &ghost_chunk_entry__descriptor, (void **)&gc) > 0) {
			int ret = read_raw(img, gc->len);

			pb_free(img, gc);
			if (ret)
				break;
		}
	}
	pb_free(img, ge);
}

/* What keep_some() held on to. */
struct kept {
	void *msgs[MAX_KEPT];
	unsigned int nr, seen;
};

/* A pb_collect_optional_image() callback keeping every other record, as collectors do. */
static int keep_some(void *msg, void *arg)
{
	struct kept *k = arg;

	if (k->nr == MAX_KEPT || k->seen++ % 2)
		return 0;
	k->msgs[k->nr++] = msg;
	return 1;
}

/* The images that only some dumps have, read as their collectors read them. */
static void collect_optional_image(enum cr_img_type type)
{
	struct kept k = { .nr = 0 };

	pb_collect_optional_image(type, keep_some, &k);
	while (k.nr)
		pb_free(NULL, k.msgs[--k.nr]);
}

static void read_image(enum cr_img_type type, unsigned long id)
{
	struct cr_img *img;

	if (type == CR_IMG_REMAP_FPATH || type == CR_IMG_TTY_INFO || type == CR_IMG_MEMFD_INODE ||
	    type == CR_IMG_FILE_LOCKS) {
		collect_optional_image(type);
		return;
	}
	img = open_image(type, O_RDONLY, id);
	if (!img)
		return;
	switch (type) {
	case CR_IMG_PAGES:
		read_pages(img);
		break;
	case CR_IMG_PAGEMAP:
	case CR_IMG_SHMEM_PAGEMAP:
		if (!read_first(img, &pagemap_head__descriptor))
			read_records(img);
		break;
	case CR_IMG_PIPES_DATA:
	case CR_IMG_FIFO_DATA:
		read_pipe_data(img);
		break;
	case CR_IMG_GHOST_FILE:
		read_ghost_file(img);
		break;
	default:
		if (!read_first(img, cr_img_descs[type].pb_desc))
			read_records(img);
		break;
	}
	close_image(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_put_images(data, size);
	fuzz_fds_begin();
	fuzz_for_each_image(read_image);
	fuzz_fds_end();
	fuzz_clear_images();
	return 0;
}
