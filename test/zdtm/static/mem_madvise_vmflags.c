/*
 * madvise state visible in VmFlags survives: MADV_DONTFORK (dc), MADV_DONTDUMP (dd),
 * MADV_HUGEPAGE (hg), MADV_NOHUGEPAGE (nh), MADV_WIPEONFORK (wf); each area's whole
 * VmFlags line is compared with the one before dump, and its data with its pattern.
 */
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define AREA_SIZE (4ul << 20)

struct advised_area {
	int advice;
	const char *vmflag;
	unsigned char *addr;
	char vmflags_before[256];
};

static struct advised_area areas[] = {
	{ .advice = MADV_DONTFORK, .vmflag = "dc" },
	{ .advice = MADV_DONTDUMP, .vmflag = "dd" },
	{ .advice = MADV_HUGEPAGE, .vmflag = "hg" },
	{ .advice = MADV_NOHUGEPAGE, .vmflag = "nh" },
	{ .advice = MADV_WIPEONFORK, .vmflag = "wf" },
};

#define NR_AREAS (sizeof(areas) / sizeof(areas[0]))

int main(int argc, char **argv)
{
	char vmflags_after[256];
	unsigned i;

	test_init(argc, argv);

	for (i = 0; i < NR_AREAS; i++) {
		struct advised_area *area = &areas[i];

		area->addr = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area->addr == MAP_FAILED)
			test_fail_errno("mmap");
		if (madvise(area->addr, AREA_SIZE, area->advice))
			test_fail("madvise(%s): %m", area->vmflag);
		pattern_fill(area->addr, AREA_SIZE, 70 + i);
		smaps_vmflags(area->addr, area->vmflags_before, sizeof(area->vmflags_before));
		if (!vmflags_has(area->vmflags_before, area->vmflag))
			test_fail("no %s in VmFlags after madvise: %s", area->vmflag,
				  area->vmflags_before);
	}

	test_ready();
	test_wait_sigterm();

	for (i = 0; i < NR_AREAS; i++) {
		struct advised_area *area = &areas[i];

		smaps_vmflags(area->addr, vmflags_after, sizeof(vmflags_after));
		if (strcmp(area->vmflags_before, vmflags_after))
			test_fail("%s area: VmFlags '%s' -> '%s'", area->vmflag,
				  area->vmflags_before, vmflags_after);
		pattern_expect(area->addr, AREA_SIZE, 70 + i, area->vmflag);
	}
	test_pass();
}
