/*
 * Dumping a task's address space: mm-PID.img (mm fields and VMAs),
 * pagemap-PID.img and pages-PID.img (the page contents worth storing).
 */
#ifndef CR_MEM_H
#define CR_MEM_H

#include <stdint.h>
#include <sys/types.h>

#include "proc_parse.h"

struct mem_dump_stats {
	uint64_t pages_scanned; /* pages of the VMAs whose contents are dumped */
	uint64_t pages_written;
};

/*
 * Dump the address space of a seized task whose VMAs are vmas (parse_pid_smaps(), read
 * while the task was stopped) and whose current brk is brk (not in /proc: the caller
 * asks the task). Writes mm-PID.img, and the pages: pagemap-PID.img holds a
 * pagemap_head {pages_id = pid} then one pagemap_entry per run of stored pages, in
 * address order; pages_off is the absolute, page-aligned offset of the run in
 * pages-PID.img (the first run starts right after the PAGES_IMG_HDR_SIZE header).
 * VMAs it cannot restore (device mappings, SysV shm) fail the dump, logged. 0 or -errno.
 */
int dump_task_mm(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas, unsigned long brk,
		 struct mem_dump_stats *stats);

#endif
