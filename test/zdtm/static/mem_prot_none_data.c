/*
 * Pages written and then made PROT_NONE keep their bytes: after restore the area is still
 * inaccessible (mincore says nothing of that; its maps line says "---p"), and once made
 * readable again every byte is what was written. A remote lazy source cannot read such
 * pages with process_vm_readv: it must take them another way.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define MIB (1ul << 20)
#define AREA (8 * MIB)
#define HIDDEN_OFF (2 * MIB)
#define HIDDEN_LEN (4 * MIB)

static void expect_prot_none(const unsigned char *start)
{
	char line[512], want[64];
	bool found = false;
	FILE *maps = fopen("/proc/self/maps", "r");

	if (!maps)
		test_fail_errno("open /proc/self/maps");
	snprintf(want, sizeof(want), "%lx-%lx ---p", (unsigned long)start,
		 (unsigned long)(start + HIDDEN_LEN));
	while (fgets(line, sizeof(line), maps))
		found |= !strncmp(line, want, strlen(want));
	fclose(maps);
	if (!found)
		test_fail("no maps line starts with '%s'", want);
}

int main(int argc, char **argv)
{
	unsigned char *area;

	test_init(argc, argv);
	area = test_map_pattern(AREA, 77);
	if (mprotect(area + HIDDEN_OFF, HIDDEN_LEN, PROT_NONE))
		test_fail_errno("mprotect PROT_NONE");

	test_ready();
	test_wait_sigterm();
	expect_prot_none(area + HIDDEN_OFF);
	if (mprotect(area + HIDDEN_OFF, HIDDEN_LEN, PROT_READ))
		test_fail_errno("mprotect PROT_READ");
	pattern_expect(area, AREA, 77, "the area, its PROT_NONE middle made readable again");
	test_pass();
}
