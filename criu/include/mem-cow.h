/*
 * Copy-on-write sharing across fork, restored (Documentation/design.md §4): private
 * memory (anonymous, or a private file mapping's COW'ed pages) a task shares with its
 * parent since a fork is mapped and filled before the task forks its children, who
 * inherit it and write only the pages that differ.
 *
 * criu, before forking the root: mem_cow_plan() matches the VMAs, mem_cow_arena_len()
 * sizes the arena every premapped VMA waits in, and mem_cow_set_arena() gives its address
 * (0: no arena, nothing is premapped). Each task, before it forks its children:
 * mem_cow_premap(). The task's restorer then moves what it premapped to its place
 * (mem_cow_premapped_at()) and reads only the other pages (mem_cow_blob_pages()).
 */
#ifndef CR_MEM_COW_H
#define CR_MEM_COW_H

#include <stdbool.h>
#include <stdint.h>

#include "pstree.h"
#include "task-image.h"

/*
 * Which VMAs each task of the tree premaps. forked_by_parent(item): whether the task is
 * forked by its pstree parent itself, and so starts with a copy of its address space.
 * 0 or -ENOMEM (logged).
 */
int mem_cow_plan(bool (*forked_by_parent)(const struct pstree_item *item));

/* Bytes of VMAs the tasks premap afresh: the arena's size (0: nothing to premap). */
uint64_t mem_cow_arena_len(void);

/* The arena's alignment: a (transparent) huge page's size on x86_64. */
#define MEM_COW_HUGE_ALIGN (2ul << 20)

/* Where criu reserved the arena (aligned to MEM_COW_HUGE_ALIGN); 0: nothing premapped. */
void mem_cow_set_arena(uint64_t start);
uint64_t mem_cow_arena_start(void);

/*
 * In the task, before it forks: drops what it inherited but does not match, writes into
 * what it inherited the pages of its own that differ, maps and fills its fresh ones.
 * 0 or -errno (logged).
 */
int mem_cow_premap(const struct task_image *ti);

/* Where ti's VMA vma_idx waits premapped in the arena; 0: not premapped. */
uint64_t mem_cow_premapped_at(const struct task_image *ti, unsigned int vma_idx);

/*
 * The runs of pages (a copy of *pages, its own runs array) outside ti's premapped VMAs:
 * those the restorer still reads. 0 or -ENOMEM (logged).
 */
int mem_cow_blob_pages(const struct task_image *ti, const struct page_map *pages,
		       struct page_map *out);

/* criu, once the tree runs or was killed: the plan freed, the arena unmapped. */
void mem_cow_fini(void);

#endif
