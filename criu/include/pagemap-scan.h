/*
 * The PAGEMAP_SCAN ioctl of /proc/PID/pagemap (Linux 6.7), spelt out here: the build's
 * <linux/fs.h> may predate it. Write tracking (mem-track.c) and guard regions
 * (mem-guard.c) both scan with it.
 */
#ifndef CR_PAGEMAP_SCAN_H
#define CR_PAGEMAP_SCAN_H

#include <stdint.h>
#include <sys/ioctl.h>

/* Page categories. */
#define CR_PAGE_IS_WRITTEN (1ULL << 1)
#define CR_PAGE_IS_GUARD   (1ULL << 8)

/* Flags: write-protect the pages that match as they are reported. */
#define CR_PM_SCAN_WP_MATCHING (1ULL << 0)

/* One run of pages of the same categories, as the scan reports it. */
struct cr_page_region {
	uint64_t start, end, categories;
};

struct cr_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define CR_PAGEMAP_SCAN _IOWR('f', 16, struct cr_pm_scan_arg)

#endif
