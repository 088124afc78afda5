/*
 * Guard regions: PAGEMAP_SCAN on /proc/PID/pagemap, asked for PAGE_IS_GUARD only, gives
 * them as ranges, VMA by VMA (only mappings restore makes can hold one; the kernel's
 * special ones are left out of the scan); restore installs them again in the blob
 * (install_guards()), once the pages are in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "pagemap-scan.h"
#include "mem-guard.h"
#include "vma.h"

#define GUARD_SCAN_BATCH   512 /* regions per PAGEMAP_SCAN */

bool kerndat_has_guard_scan(void)
{
	struct cr_page_region region;
	struct cr_pm_scan_arg arg = {
		.size = sizeof(arg),
		.start = 0,
		.end = 0x1000,
		.vec = (uint64_t)(uintptr_t)&region,
		.vec_len = 1,
		.category_mask = CR_PAGE_IS_GUARD,
		.return_mask = CR_PAGE_IS_GUARD,
	};
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = ioctl(fd, CR_PAGEMAP_SCAN, &arg) >= 0;
	close(fd);
	return ok;
}

static int add_guard(VmaEntry **guards, size_t *nr, uint64_t start, uint64_t end)
{
	VmaEntry *grown;

	/* The kernel reports a range cut at a batch's end in two: join them again. */
	if (*nr && (*guards)[*nr - 1].end == start) {
		(*guards)[*nr - 1].end = end;
		return 0;
	}
	grown = realloc(*guards, (*nr + 1) * sizeof(**guards));
	if (!grown)
		return -ENOMEM;
	*guards = grown;
	vma_entry__init(&grown[*nr]);
	grown[*nr].start = start;
	grown[*nr].end = end;
	grown[*nr].status = VMA_AREA_GUARD;
	(*nr)++;
	return 0;
}

/* The guard regions of one VMA [start, end) into *guards. */
static int scan_vma(int fd, pid_t pid, uint64_t start, uint64_t end, VmaEntry **guards, size_t *nr)
{
	struct cr_page_region regions[GUARD_SCAN_BATCH];
	uint64_t from = start;
	int ret = 0;

	while (!ret && from < end) {
		struct cr_pm_scan_arg arg = {
			.size = sizeof(arg),
			.start = from,
			.end = end,
			.vec = (uint64_t)(uintptr_t)regions,
			.vec_len = GUARD_SCAN_BATCH,
			.category_mask = CR_PAGE_IS_GUARD,
			.return_mask = CR_PAGE_IS_GUARD,
		};
		int got = ioctl(fd, CR_PAGEMAP_SCAN, &arg);

		if (got < 0) {
			pr_perror("task %d: PAGEMAP_SCAN for guard regions from %#llx", pid,
				  (unsigned long long)from);
			ret = -errno;
			break;
		}
		for (int i = 0; i < got && !ret; i++)
			ret = add_guard(guards, nr, regions[i].start, regions[i].end);
		if (arg.walk_end <= from) {
			pr_err("task %d: PAGEMAP_SCAN for guard regions made no progress at "
			       "%#llx\n",
			       pid, (unsigned long long)from);
			ret = -EIO;
		}
		from = arg.walk_end;
	}
	return ret;
}

int guard_regions_dump(pid_t pid, VmaEntry *const *vmas, size_t nr_vmas, VmaEntry **guards,
		       size_t *nr)
{
	char path[64];
	int fd, ret = 0;

	*guards = NULL;
	*nr = 0;
	if (!kerndat_has_guard_scan())
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("task %d: cannot open its pagemap for guard regions", pid);
		return -errno;
	}
	for (size_t i = 0; i < nr_vmas && !ret; i++)
		if ((vmas[i]->status & VMA_AREA_REGULAR) &&
		    !(vmas[i]->status & (VMA_AREA_VDSO | VMA_AREA_VVAR | VMA_AREA_VSYSCALL)))
			ret = scan_vma(fd, pid, vmas[i]->start, vmas[i]->end, guards, nr);
	close(fd);
	if (ret) {
		free(*guards);
		*guards = NULL;
		*nr = 0;
	} else if (*nr) {
		pr_info("task %d: %zu guard regions\n", pid, *nr);
	}
	return ret;
}
