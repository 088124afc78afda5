/*
 * A task that unmapped [vdso], [vvar] and [vvar_vclock] (as on a kernel booted without the
 * vdso): after restore it still has none of them, and its other mappings are as they were.
 * Nothing here calls into the vdso once it is gone (glibc's time calls would).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define MAPS_SIZE (64 << 10)

static char maps_before[MAPS_SIZE], maps_after[MAPS_SIZE];

static bool is_special(const char *line)
{
	return strstr(line, "[vdso]") || strstr(line, "[vvar]") || strstr(line, "[vvar_vclock]");
}

static void unmap_specials(void)
{
	char *line, *save = NULL;
	unsigned long start, end;

	read_file("/proc/self/maps", maps_before, sizeof(maps_before));
	for (line = strtok_r(maps_before, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (is_special(line) && sscanf(line, "%lx-%lx", &start, &end) == 2 &&
		    munmap((void *)start, end - start))
			test_fail_errno("munmap a special mapping");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	unmap_specials();
	read_file("/proc/self/maps", maps_before, sizeof(maps_before));
	if (strstr(maps_before, "[vdso]") || strstr(maps_before, "[vvar"))
		test_fail("the vdso is still mapped before the dump:\n%s", maps_before);
	test_ready();
	test_wait_sigterm();

	read_file("/proc/self/maps", maps_after, sizeof(maps_after));
	if (strstr(maps_after, "[vdso]") || strstr(maps_after, "[vvar"))
		test_fail("the restored task has a vdso again:\n%s", maps_after);
	if (strcmp(maps_before, maps_after))
		test_fail("mappings before the dump:\n%s\nafter restore:\n%s", maps_before,
			  maps_after);
	test_pass();
}
