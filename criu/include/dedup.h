/*
 * Deduplication of pre-dump chains: the parent images' copies of pages a later dump stores
 * again are never read, so their places in the parents' pages images become holes.
 */
#ifndef CR_DEDUP_H
#define CR_DEDUP_H

#include <stdint.h>

#include "image.h"
#include "task-image.h"

/* Holes punched in the pages images of a parent map's levels, adjacent pieces joined. */
struct page_dedup {
	const struct page_map *parent; /* a page_map_read_parent() map: levels from 1 */
	int fds[IMG_CHAIN_MAX]; /* pages image per level, opened at the first hole; 0: not yet */
	uint32_t hole_level;
	uint64_t hole_off, hole_len; /* the hole being gathered */
};

void page_dedup_init(struct page_dedup *d, const struct page_map *parent);
/* [addr, addr + len), which lies in the parent's run, is stored again. 0 or -errno (logged). */
int page_dedup_add(struct page_dedup *d, const struct page_run *run, uint64_t addr, uint64_t len);
/* Punches what is gathered and closes the images. 0 or -errno (logged). */
int page_dedup_fini(struct page_dedup *d);

/* criu dedup: every task pagemap of the images directory against its parents. 0 or -errno. */
int cr_dedup(void);

#endif
