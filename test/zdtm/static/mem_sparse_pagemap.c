/*
 * Only touched pages exist after restore: in a 16 MiB anonymous area where every
 * seventh page was written, /proc/self/pagemap shows exactly those pages present (or
 * swapped) and the others still absent; the touched pages keep their data.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PAGE 4096
#define NR_PAGES 4096
#define AREA_SIZE ((size_t)NR_PAGES * PAGE)
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)

static bool page_is_touched(int page)
{
	return page % 7 == 3;
}

static void check_residency(const unsigned char *area, const char *when)
{
	static uint64_t entries[NR_PAGES];
	int fd = open("/proc/self/pagemap", O_RDONLY);
	off_t first = (uintptr_t)area / PAGE * sizeof(uint64_t);

	if (fd < 0)
		test_fail_errno("open /proc/self/pagemap");
	if (pread(fd, entries, sizeof(entries), first) != sizeof(entries))
		test_fail_errno("read /proc/self/pagemap");
	close(fd);
	for (int page = 0; page < NR_PAGES; page++) {
		bool resident = entries[page] & (PM_PRESENT | PM_SWAPPED);

		if (resident != page_is_touched(page))
			test_fail("%s: page %d is %s, expected %s", when, page,
				  resident ? "present" : "absent",
				  page_is_touched(page) ? "present" : "absent");
	}
}

int main(int argc, char **argv)
{
	unsigned char *area;

	test_init(argc, argv);

	area = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		test_fail_errno("mmap");
	/* one touch must fault in one page, not a 2 MiB huge page */
	if (madvise(area, AREA_SIZE, MADV_NOHUGEPAGE))
		test_fail_errno("madvise(MADV_NOHUGEPAGE)");
	for (int page = 0; page < NR_PAGES; page++)
		if (page_is_touched(page))
			pattern_fill(area + (size_t)page * PAGE, PAGE, 60 + page);
	check_residency(area, "before dump");

	test_ready();
	test_wait_sigterm();

	check_residency(area, "after restore");
	for (int page = 0; page < NR_PAGES; page++)
		if (page_is_touched(page))
			pattern_expect(area + (size_t)page * PAGE, PAGE, 60 + page, "touched page");
	test_pass();
}
