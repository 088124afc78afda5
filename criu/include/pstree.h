/*
 * The process tree being dumped or restored: one pstree_item per process, linked to
 * its parent and children, and pstree.img (parents before children).
 */
#ifndef CR_PSTREE_H
#define CR_PSTREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pstree_item {
	pid_t pid;
	pid_t ppid; /* as the dumped process saw it; the root's parent is outside the tree */
	pid_t pgid;
	pid_t sid;
	unsigned int nr_threads;
	pid_t *threads; /* tids, the main thread (== pid) first */
	struct pstree_item *parent; /* NULL for the root */
	struct pstree_item *first_child;
	struct pstree_item *next_sibling;
	struct pstree_item *last_child; /* to keep children in the order they were added */
	bool zombie; /* dead and not reaped by its parent: only its exit status is restored */
	int exit_status; /* a zombie's wait status, as waitpid() reports it */
	/*
	 * Identities of the kernel objects the process holds (ids-PID.img): images shared by
	 * processes that share the object are named by these (fdinfo-FILES_ID.img).
	 * Assigned at dump, read back by pstree_read(); zombies have none.
	 */
	struct task_ids {
		uint32_t vm_id, files_id, fs_id, sighand_id;
	} ids;
};

extern struct pstree_item *root_item;

/* A new item under parent (NULL: it becomes root_item), with only its pid set. */
struct pstree_item *pstree_add_item(struct pstree_item *parent, pid_t pid);
/* Free the whole tree; root_item becomes NULL. */
void pstree_free(void);

bool has_children(struct pstree_item *item);

/* The item of pid, or NULL. */
struct pstree_item *pstree_find(pid_t pid);

/* Walk the tree parents first: for (i = root_item; i; i = pstree_next(i)). */
struct pstree_item *pstree_next(struct pstree_item *item);

/*
 * Dump side: fill an item's ppid/pgid/sid from /proc/PID/stat and its threads from
 * /proc/PID/task. 0 or -errno.
 */
int pstree_collect_ids(struct pstree_item *item);

/*
 * Dump side: the children of one thread (/proc/PID/task/TID/children) appended to
 * *children (malloc'ed, *nr entries; the caller frees it). 0 or -errno.
 */
int pstree_read_children(pid_t pid, pid_t tid, pid_t **children, unsigned int *nr);

/*
 * Sessions and groups whose leader is not in the tree. The root's own session and group,
 * when led from outside, are the shell's (criu's): restore gives the root criu's. Any
 * other such id names a leader that exited: restore re-creates it for a moment with a
 * helper task of that pid (cr-restore.c). A live leader outside the tree cannot be
 * re-created and is refused at dump.
 */
/* Dump side, once the tree is seized: refuse ids that restore cannot give back. 0 or -errno. */
int pstree_check_leaders(bool shell_job);
/* Restore side: id is a session or group whose leader exited and needs a helper. */
bool pstree_leader_is_dead(pid_t id);

/* pstree.img: write every item, parents first; read it back into root_item. 0 or -errno. */
int pstree_write(void);
int pstree_read(void);

#endif
