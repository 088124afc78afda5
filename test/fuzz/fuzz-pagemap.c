/*
 * Fuzz target for page_map_read() (task-image.c): every pagemap-ID.img and
 * pagemap-shmem-ID.img of the input is decoded against the size of its pages-ID.img.
 */
#include <stdint.h>

#include "fuzz.h"
#include "image.h"
#include "task-image.h"

static void read_page_map(enum cr_img_type type, unsigned long id)
{
	struct page_map map;

	if (type != CR_IMG_PAGEMAP && type != CR_IMG_SHMEM_PAGEMAP)
		return;
	if (!page_map_read(type, id, &map))
		page_map_free(&map);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_put_images(data, size);
	fuzz_fds_begin();
	fuzz_for_each_image(read_page_map);
	fuzz_fds_end();
	fuzz_clear_images();
	return 0;
}
