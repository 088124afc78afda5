/*
 * Mapping flags that only smaps shows come back: MAP_NORESERVE ("nr") with its contents,
 * and a MAP_DROPPABLE mapping ("dp", its own mapping type) empty, as CRIU restores it: the
 * kernel may drop such memory at any time, so it is not dumped.
 */
#include <sys/mman.h>

#include "zdtmtst.h"

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif

#define LEN (16 * 4096)

static void *map(int flags)
{
	void *addr = mmap(NULL, LEN, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);

	if (addr == MAP_FAILED)
		test_fail_errno("mmap");
	return addr;
}

static void expect_flag(const void *addr, const char *flag, const char *what)
{
	char vmflags[256];

	smaps_vmflags(addr, vmflags, sizeof(vmflags));
	if (!vmflags_has(vmflags, flag))
		test_fail("%s: VmFlags '%s' lack %s", what, vmflags, flag);
}

int main(int argc, char **argv)
{
	void *noreserve, *droppable;

	test_init(argc, argv);
	noreserve = map(MAP_PRIVATE | MAP_NORESERVE);
	droppable = map(MAP_DROPPABLE);
	pattern_fill(noreserve, LEN, 21);
	pattern_fill(droppable, LEN, 22);
	expect_flag(noreserve, "nr", "before: MAP_NORESERVE");
	expect_flag(droppable, "dp", "before: MAP_DROPPABLE");
	test_ready();
	test_wait_sigterm();

	expect_flag(noreserve, "nr", "MAP_NORESERVE");
	expect_flag(droppable, "dp", "MAP_DROPPABLE");
	pattern_expect(noreserve, LEN, 21, "MAP_NORESERVE contents");
	for (size_t i = 0; i < LEN; i++)
		if (((unsigned char *)droppable)[i])
			test_fail("MAP_DROPPABLE: byte %zu is %#x, not dropped", i,
				  ((unsigned char *)droppable)[i]);
	test_pass();
}
