/*
 * Guard regions (madvise MADV_GUARD_INSTALL, Linux 6.13): ranges of pages inside a VMA
 * that fault with SIGSEGV, seen by PAGEMAP_SCAN as PAGE_IS_GUARD (Linux 6.14).
 */
#ifndef CRIU_MEM_GUARD_H
#define CRIU_MEM_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "mm.pb-c.h"

/* check --feature pagemap_scan_guard_pages: PAGEMAP_SCAN reports guard regions. */
bool kerndat_has_guard_scan(void);
/*
 * Dump: the guard regions in pid's VMAs vmas[nr_vmas] as CRIU lists them among the VMAs
 * (vma_entry status VMA_AREA_GUARD alone, after the VMAs), *nr of them in *guards (free()
 * it). None where the kernel cannot report them (it has no way to make them either).
 * 0 or -errno.
 */
int guard_regions_dump(pid_t pid, VmaEntry *const *vmas, size_t nr_vmas, VmaEntry **guards,
		       size_t *nr);

#endif
