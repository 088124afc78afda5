/*
 * The process tree being dumped or restored: one pstree_item per process, linked to
 * its parent and children, and pstree.img (parents before children).
 */
#ifndef CR_PSTREE_H
#define CR_PSTREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.pb-c.h"

/*
 * Dump side: pids as criu sees them (pidns_img_pid() gives the images' ones); restore side:
 * as the images name them (pidns_host_pid() gives criu's).
 */
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
	 * Assigned at dump, read back by pstree_read(); zombies have none (all 0).
	 */
	struct task_ids {
		uint32_t vm_id, files_id, fs_id, sighand_id;
		/* Namespaces: 0 where the image has no id. */
		uint32_t pid_ns_id, net_ns_id, ipc_ns_id, uts_ns_id;
		uint32_t mnt_ns_id, user_ns_id, cgroup_ns_id, time_ns_id;
	} ids;
	/* Restore: the task's images, decoded once (task-image.h); NULL at dump. */
	struct task_image *image;
};

/* task_core_entry.task_state */
#define TASK_ALIVE 1
#define TASK_DEAD 2 /* how CRIU's images mark a zombie */
#define TASK_STOPPED 3
#define TASK_ZOMBIE 6 /* also read as a zombie */

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
 * helper task of that pid (restore-sessions.c). A live leader outside the tree cannot be
 * re-created and is refused at dump.
 */
/* Dump side, once the tree is seized: refuse ids that restore cannot give back. 0 or -errno. */
int pstree_check_leaders(bool shell_job);
/* Restore side: id is a session or group whose leader exited and needs a helper. */
bool pstree_leader_is_dead(pid_t id);
/* Restore: a child (clone3() with flags) that gets pid; 0 in it, -1 with errno on failure. */
pid_t clone_with_pid(pid_t pid, unsigned long flags);
/*
 * Restore side, once the task images are read: item's orphans come to it, as the init of
 * the tree's own pid namespace or as a subreaper (which it becomes before forking).
 */
bool pstree_reaps_orphans(const struct pstree_item *item);
/*
 * Restore side, once the task images are read: an orphan its reaper adopted (the init of
 * the tree's pid namespace, a subreaper), in a session led by another task of the tree
 * below that reaper, cannot be born from the reaper (a child starts in its parent's
 * session). Its session leader, returned here (NULL for any other task), forks it through
 * a helper that exits at once: the kernel gives it to the reaper again, the nearest above
 * the leader.
 */
struct pstree_item *pstree_session_adopter(const struct pstree_item *item);
/*
 * Restore side: a session leader's child that stayed in the session the leader was born
 * in (forked before the leader's setsid()): its parent forks it before calling setsid().
 */
bool pstree_born_before_setsid(const struct pstree_item *child);
/*
 * Restore side: the pid of the helper that forks orphan for its session leader, one no
 * task, thread, session or group of the images uses, and another for each orphan (their
 * leaders fork them at the same time).
 */
pid_t pstree_helper_pid(const struct pstree_item *orphan);
/* The item one of whose threads (the main one included) is tid, or NULL. Both sides. */
struct pstree_item *pstree_find_thread(pid_t tid);
/*
 * Whether process group pgid has a member in the tree and comes back under that id after
 * restore: not the root's group led from outside, which restore replaces with criu's.
 * Both sides.
 */
bool pstree_group_kept(pid_t pgid);

/*
 * Dump side: give every live process of the tree its object ids (its own: processes that
 * share mm, fs or signal handlers are refused; a child sharing its parent's fd table gets
 * the parent's files_id, other sharing of one is refused), from 2 on in tree order; its
 * namespace ids are ns_dump_collect()'s. Before any image names them.
 * 0 or -errno after one error line.
 */
int pstree_assign_ids(void);
/*
 * Both sides: item shares its parent's fd table (it was cloned with CLONE_FILES): the
 * parent dumps and restores the table, item is cloned with CLONE_FILES again.
 */
bool pstree_shares_parent_files(const struct pstree_item *item);
/* ids-PID.img of a live process. 0 or -errno. */
int pstree_write_ids(const struct pstree_item *item);
/* The root_ids of inventory.img: 1 for each object id, and criu's own namespaces. */
void pstree_fill_root_ids(TaskKobjIdsEntry *ids);

/*
 * pstree.img: write every item, parents first; read it back into root_item, with each
 * process's ids from ids-PID.img where it has one (zombies do not). 0 or -errno.
 */
int pstree_write(void);
int pstree_read(void);
#endif
