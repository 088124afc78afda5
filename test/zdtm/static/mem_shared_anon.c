/*
 * Shared anonymous memory keeps its contents and stays shared memory (an "rw-s"
 * /dev/zero VMA), not a private copy.
 */
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define MAP_SIZE (4ul << 20)

int main(int argc, char **argv)
{
	char line_before[512], line_after[512];
	unsigned char *map;

	test_init(argc, argv);

	map = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(map, MAP_SIZE, 20);
	maps_line(map, line_before, sizeof(line_before));
	if (!strstr(line_before, " rw-s ") || !strstr(line_before, "/dev/zero (deleted)"))
		test_fail("unexpected maps line before dump: %s", line_before);

	test_ready();
	test_wait_sigterm();

	pattern_expect(map, MAP_SIZE, 20, "shared anonymous mapping");
	maps_line(map, line_after, sizeof(line_after));
	/* the inode number is the kernel's choice; perms, range and name must match */
	if (strncmp(line_before, line_after, strlen("0000000000000000-0000000000000000 rw-s")) ||
	    !strstr(line_after, restored_shmem_name()))
		test_fail("maps line changed: '%s' -> '%s'", line_before, line_after);
	test_pass();
}
