/*
 * /proc/self/maps after restore equals the one before dump line for line: addresses,
 * perms, offsets, devices, inodes and paths, including [heap] [stack] [vvar]
 * [vvar_vclock] [vdso].
 */
#include <stdlib.h>
#include <string.h>

#include "zdtmtst.h"

static char maps_before[256 * 1024];
static char maps_after[256 * 1024];

static void require_line(const char *name)
{
	if (!strstr(maps_before, name))
		test_fail("no %s line in /proc/self/maps before dump", name);
}

/* Report the first differing line of the two texts */
static void compare_lines(void)
{
	char *before = maps_before, *after = maps_after;
	int line_no = 1;

	while (*before || *after) {
		size_t len_before = strcspn(before, "\n"), len_after = strcspn(after, "\n");

		if (len_before != len_after || memcmp(before, after, len_before))
			test_fail("line %d differs: '%.*s' -> '%.*s'", line_no, (int)len_before,
				  before, (int)len_after, after);
		before += len_before + (before[len_before] == '\n');
		after += len_after + (after[len_after] == '\n');
		line_no++;
	}
}

int main(int argc, char **argv)
{
	void *heap_user;

	test_init(argc, argv);

	/* make sure [heap] exists; small enough to come from brk */
	heap_user = malloc(4096);
	if (!heap_user)
		test_fail_errno("malloc");
	read_file("/proc/self/maps", maps_before, sizeof(maps_before));
	require_line("[heap]");
	require_line("[stack]");
	require_line("[vvar]");
	require_line("[vvar_vclock]");
	require_line("[vdso]");

	test_ready();
	test_wait_sigterm();

	read_file("/proc/self/maps", maps_after, sizeof(maps_after));
	compare_lines();
	free(heap_user);
	test_pass();
}
