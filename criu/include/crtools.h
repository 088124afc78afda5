/* The commands: each pipeline's entry point. */
#ifndef CR_CRTOOLS_H
#define CR_CRTOOLS_H

#include <sys/types.h>

/* Dump the tree rooted at pid into the images dir (DESIGN.md §3). 0 or -1. */
int cr_dump_tasks(pid_t pid);
/*
 * Restore the tree from the images dir (DESIGN.md §4). -1 on failure; else 0 with -d,
 * or the restored root's exit status when criu waits for it.
 */
int cr_restore_tasks(void);
/* criu check: all features, or only the named one. 0 when supported. */
int cr_check(const char *feature);

#endif
