/* The pipelines' entry points, which the commands (crtools.c) run. */
#ifndef CR_CRTOOLS_H
#define CR_CRTOOLS_H

#include <stdbool.h>
#include <sys/types.h>

/* Dump the tree rooted at pid into the images dir (Documentation/design.md §3). 0 or -1. */
int cr_dump_tasks(pid_t pid);
/* criu pre-dump: the tree's private anonymous pages, its writes tracked for the next dump. */
int cr_pre_dump_tasks(pid_t pid);
/*
 * Restore the tree from the images dir (Documentation/design.md §4). -1 on failure; else
 * 0 with -d, or the restored root's exit status when criu waits for it.
 */
int cr_restore_tasks(void);
/* The root pid of the tree cr_restore_tasks() forked last (as criu sees it), or 0. */
pid_t cr_restore_root_pid(void);

/* The commands' lines of criu --help. */
void print_commands(void);

#endif
