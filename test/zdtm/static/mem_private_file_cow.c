/*
 * A private file mapping keeps its COW-written pages (new contents) and its untouched
 * pages (the file's contents), and the file itself is not changed by dump or restore.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NR_PAGES 16
#define PAGE 4096
#define MAP_SIZE (NR_PAGES * PAGE)
#define FILE_SEED 10
#define COW_SEED 11

static unsigned char file_data[MAP_SIZE];
static unsigned char cow_data[MAP_SIZE];

/* Odd pages are written through the mapping (COW), even pages only read */
static bool page_is_cowed(int page)
{
	return page % 2;
}

static void check_mapping(const unsigned char *map)
{
	for (int page = 0; page < NR_PAGES; page++) {
		const unsigned char *expected = page_is_cowed(page) ? cow_data : file_data;

		if (memcmp(map + page * PAGE, expected + page * PAGE, PAGE))
			test_fail("page %d (%s) differs", page, page_is_cowed(page) ? "COW" : "file");
	}
}

int main(int argc, char **argv)
{
	static unsigned char on_disk[MAP_SIZE];
	unsigned char *map;
	struct stat st;
	int fd;

	test_init(argc, argv);

	pattern_fill(file_data, MAP_SIZE, FILE_SEED);
	pattern_fill(cow_data, MAP_SIZE, COW_SEED);
	write_file("cow.data", file_data, MAP_SIZE);
	fd = open("cow.data", O_RDONLY);
	if (fd < 0)
		test_fail_errno("open cow.data");
	map = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		test_fail_errno("mmap");
	/* the mapping alone must carry the file: no fd left to hint at it */
	close(fd);
	for (int page = 0; page < NR_PAGES; page++)
		if (page_is_cowed(page))
			memcpy(map + page * PAGE, cow_data + page * PAGE, PAGE);
	check_mapping(map);

	test_ready();
	test_wait_sigterm();

	check_mapping(map);
	fd = open("cow.data", O_RDONLY);
	if (fd < 0)
		test_fail_errno("reopen cow.data");
	if (fstat(fd, &st) || st.st_size != MAP_SIZE)
		test_fail("cow.data is no longer %d bytes long", MAP_SIZE);
	if (pread(fd, on_disk, MAP_SIZE, 0) != MAP_SIZE)
		test_fail_errno("read cow.data");
	if (memcmp(on_disk, file_data, MAP_SIZE))
		test_fail("COW writes reached cow.data");
	test_pass();
}
