/*
 * Cgroups (cgroup.c): which cgroups the tree's tasks and threads live in, grouped into
 * sets, and the directories below them with their properties (cgroup.img, CRIU's
 * format); restore re-creates them as --manage-cgroups says and puts each task back.
 * --freeze-cgroup: the dump freezes the tree through its freezer cgroup.
 */
#ifndef CR_CGROUP_H
#define CR_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "inventory.pb-c.h"

struct pstree_item;

/*
 * Dump, main process, before the tree is seized: --freeze-cgroup PATH frozen (v1
 * freezer.state, v2 cgroup.freeze), every task in it attached (compel_attach_frozen()),
 * then thawed: each stops as it runs again, before any instruction of its own, so the
 * tree is caught as one. Without the option: nothing. 0 or -errno, the cgroup thawed.
 */
int cg_freeze_tree(void);
/*
 * Dump and pre-dump, once the tree is released (left running, or after a failure): the
 * freezer cgroup frozen again where it was frozen before cg_freeze_tree() (a container
 * its runtime paused stays paused, as CRIU leaves it). 0 or -errno.
 */
int cg_freezer_restore(void);

/* Dump, main process, once the tree is seized: criu's own set, set 1 (its cgroups). */
int cg_dump_init(void);
/*
 * Dump: the set of thread tid of process pid (its cgroups in every hierarchy), added
 * when new, with its directories and their properties below it. Parents before their
 * children, the root first. *set_id is 0 under --manage-cgroups=ignore. 0 or -errno.
 */
int cg_dump_thread(pid_t pid, pid_t tid, uint32_t *set_id);
/*
 * Dump, main process: the root lives in a cgroup namespace of its own, whose root is
 * what root_pid sees as "/": each set's paths say how much of them lies above it.
 */
int cg_dump_ns_root(pid_t root_pid);
/* Dump: cgroup.img (none when every task lives in criu's cgroups). 0 or -errno. */
int cg_dump_write(void);
/* Dump: inventory's root_cg_set, criu's own set; false: none (ignore mode). */
bool cg_dump_criu_set(uint32_t *set_id);
void cg_dump_fini(void);

/*
 * Restore, main process, before anything is forked: cgroup.img read, --cgroup-root
 * applied. 0 or -errno after one line.
 */
int cg_restore_collect(const InventoryEntry *inv);
/* Whether a set of cgroup.img names the root of a cgroup namespace (cgns_prefix). */
bool cg_restore_has_ns_root(void);
/*
 * Restore, main process, before the root is forked: the hierarchies opened, the
 * directories made and their properties set, as the mode says. 0 or -errno.
 */
int cg_restore_prepare(void);
/*
 * Restore, main process, a task forked (host: its pid as criu sees it) and not yet let
 * go: into its set's cgroups, unless it inherited them from its parent. 0 or -errno.
 */
int cg_restore_task(const struct pstree_item *item, pid_t host);
/* Restore, main process: the task's threads (host_tids) into their own sets. */
int cg_restore_threads(const struct pstree_item *item, const pid_t *host_tids);
/*
 * Restore, in the root, before it forks: into the root of its cgroup namespace,
 * unshare(CLONE_NEWCGROUP), then into its own cgroups below it. 0 or -errno.
 */
int cg_restore_enter_ns(const struct pstree_item *root);
/* Restore, main process: done; failed: the directories this restore made are removed. */
void cg_restore_fini(bool failed);

#endif
