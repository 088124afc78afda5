/*
 * A task's stored pages through pipes: its parasite (compel) vmsplices them into a pipe,
 * criu splices the pipe to the page_xfer target. Two pipes alternate, so that the parasite
 * fills one while criu empties the other. Pagemap entries of every kind are queued with
 * the pages, so that they leave in address order.
 */
#ifndef CR_PAGE_SPLICE_H
#define CR_PAGE_SPLICE_H

#include <stdint.h>

struct compel_ctl;
struct page_xfer;
struct page_splice;

/*
 * Pipes made and their write ends handed to the parasite running in ctl's task. 0 or
 * -errno (logged); *ps NULL then.
 */
int page_splice_open(struct page_splice **ps, struct compel_ctl *ctl, struct page_xfer *xfer);
/*
 * One pagemap entry; with PE_PRESENT its nr_pages pages at vaddr are taken from the task.
 * Written to xfer in order, later. 0 or -errno (logged).
 */
int page_splice_entry(struct page_splice *ps, uint64_t vaddr, uint64_t nr_pages, uint32_t flags);
/* Everything queued is written to xfer when it returns 0. -errno (logged). */
int page_splice_drain(struct page_splice *ps);
/* Closes criu's pipe ends (the parasite's go at compel_cure()). */
void page_splice_close(struct page_splice *ps);

#endif
