/*
 * Fuzz target for page_map_read() (task-image.c): every pagemap-ID.img and
 * pagemap-shmem-ID.img of the input is decoded against the size of its pages-ID.img.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "image.h"
#include "task-image.h"

/* Whether name is type's image for some id (set in *id). */
static bool image_id(const char *name, enum cr_img_type type, unsigned long *id)
{
	char again[64];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	if (sscanf(name, cr_img_descs[type].fmt, id) != 1)
		return false;
#pragma GCC diagnostic pop
	img_name(type, *id, again, sizeof(again));
	return !strcmp(name, again);
}

static void read_page_map(enum cr_img_type type, unsigned long id)
{
	struct page_map map;

	if (!page_map_read(type, id, &map))
		page_map_free(&map);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int dir_fd;
	DIR *dir;
	struct dirent *de;
	unsigned long id;

	fuzz_put_images(data, size);
	dir_fd = openat(images_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = dir_fd < 0 ? NULL : fdopendir(dir_fd);
	if (!dir) {
		perror("fuzz-pagemap: the scratch images dir");
		abort();
	}
	fuzz_fds_begin();
	while ((de = readdir(dir))) {
		if (image_id(de->d_name, CR_IMG_PAGEMAP, &id))
			read_page_map(CR_IMG_PAGEMAP, id);
		else if (image_id(de->d_name, CR_IMG_SHMEM_PAGEMAP, &id))
			read_page_map(CR_IMG_SHMEM_PAGEMAP, id);
	}
	fuzz_fds_end();
	closedir(dir);
	fuzz_clear_images();
	return 0;
}
