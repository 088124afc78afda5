/*
 * Inside the restore pipeline (cr-restore.c, restore-sessions.c, restore-release.c): the
 * tasks being restored as the main process tracks them, the messages on their sockets, and
 * the steps the two other files hold. Not for the kinds.
 */
#ifndef CR_RESTORE_TASKS_H
#define CR_RESTORE_TASKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pstree.h"

/*
 * A task being restored, as the main process tracks it: by the pids criu sees, which differ
 * from the images' (item->pid, item->threads) inside a pid namespace of the tree's own.
 */
struct rst_task {
	struct pstree_item *item;
	pid_t pid;     /* 0 until forked */
	pid_t *tids;   /* item->threads, once the restorer made them; NULL before */
	int sync_fd;   /* our end of the task's report socket */
	int task_sock; /* the task's end: created by criu, kept by the task alone */
	bool forked;   /* it reported that its children exist */
	bool zombie;   /* it only exits with its dumped status */
	bool stopped;  /* it was dumped in a group stop: it is released into one */
	bool ready;
	uint64_t region_start, region_len; /* where its restorer runs */
};

/* The tree's tasks, parents first (cr-restore.c's prepare_rst_tasks()). */
extern struct rst_task *rst_tasks;
extern unsigned int nr_rst_tasks;

/*
 * Messages on a task's socket before its final struct rst_report: criu sends GO once it
 * traces the task and GROUPS once every task has forked its children (and FILES to a task
 * sharing its parent's fd table once the parent restored it); the task sends one stage
 * byte once its own children exist.
 */
#define TASK_CMD_GO	   'G'
#define TASK_CMD_GROUPS	   'P'
#define TASK_CMD_FILES	   'F' /* to a task sharing its parent's table: the parent restored it */
#define TASK_STAGE_ALIVE   'A'
#define TASK_STAGE_STOPPED 'T' /* alive, and stopped (SIGSTOP) when it was dumped */
#define TASK_STAGE_ZOMBIE  'Z'

/* ---- cr-restore.c ---- */

/* The task being restored as item, or NULL. */
struct rst_task *rst_task_of(const struct pstree_item *item);
/* In a forked task: its stages, then the restorer; returns only through exit. */
void __attribute__((noreturn)) rst_task_main(struct rst_task *task);

/* ---- restore-sessions.c: sessions, groups, orphans ---- */

/* Main process: a gone leader's pid, which its helper will take, is free. 0 or -1. */
int rst_check_helper_pid_free(pid_t id, const char *kind);
/* In the task, before its children: the session or group it leads or re-creates. */
int rst_restore_own_leadership(struct pstree_item *item);
/* In the task: the orphans of an init or subreaper that it forks through helpers. */
int rst_fork_adopted_orphans(struct pstree_item *item);
/* In the task, before its children: a subreaper again, as dumped. */
int rst_become_reaper(const struct pstree_item *item);
/* In the forker: child is born in a session whose leader exited; the first such child. */
bool rst_in_dead_session(const struct pstree_item *child);
bool rst_first_child_in_session(const struct pstree_item *child);
/* In the forker: the helper that re-creates session sid and forks its members. */
int rst_fork_session_helper(struct pstree_item *item, pid_t sid);
/* In the task, after GROUPS: the group and session it belongs to. */
int rst_join_session_and_group(struct pstree_item *item);

/* ---- restore-release.c: the tree parked, released, or killed ---- */

/* Every task's report: live ones parked and their threads held, zombies dead. */
int rst_wait_tree_ready(void);
/* RESUME_DEVICES_LATE for every live task. */
int rst_resume_tree_devices(void);
/* Every live task let go into its program. */
int rst_release_tree(void);
/* A failed restore: every task it created killed and reaped. */
void rst_kill_created_tasks(void);
/* Without -d: the root's exit status, as criu's. */
int rst_wait_root_task(pid_t pid);

#endif
