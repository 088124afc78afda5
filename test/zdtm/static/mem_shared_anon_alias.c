/*
 * Two VMAs of one shared anonymous object (the second made with mremap(old_size = 0))
 * are still one object after restore: a write through one is seen through the other.
 */
#include <sys/mman.h>

#include "zdtmtst.h"

#define MAP_SIZE (1ul << 20)

int main(int argc, char **argv)
{
	unsigned char *map, *alias;

	test_init(argc, argv);

	map = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		test_fail_errno("mmap");
	alias = mremap(map, 0, MAP_SIZE, MREMAP_MAYMOVE);
	if (alias == MAP_FAILED)
		test_fail_errno("mremap alias");
	pattern_fill(map, MAP_SIZE, 30);
	pattern_expect(alias, MAP_SIZE, 30, "alias before dump");

	test_ready();
	test_wait_sigterm();

	pattern_expect(map, MAP_SIZE, 30, "first mapping");
	pattern_expect(alias, MAP_SIZE, 30, "alias mapping");
	pattern_fill(alias, MAP_SIZE, 31);
	pattern_expect(map, MAP_SIZE, 31, "first mapping after writing the alias (not shared)");
	test_pass();
}
