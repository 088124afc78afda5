/*
 * Inside the fd engine (files.c, files-plan.c): the restore's descriptions and the plan of
 * how tasks share them. Not for the kinds, which go through files.h.
 */
#ifndef CR_FILES_PLAN_H
#define CR_FILES_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "files.h"

#include "fdinfo.pb-c.h"

/* files.img, sorted by id. Collected before forking, so every task inherits it. */
extern struct file_desc *file_descs;
extern size_t nr_file_descs;

/*
 * Descriptions shared between tasks. Every task forks its children before it restores
 * its own fds, so one opening by the users' lowest common ancestor, kept at a number no
 * restored fd uses, reaches all of them through fork; each then dups it to its own fd
 * numbers. Planned in the main process, before forking: every task inherits the plan.
 */
struct file_sharing {
	const struct pstree_item *opener; /* the users' lowest common ancestor */
	pid_t first_user;		  /* the first task in tree order with an fd on it */
	pid_t last_user;		  /* the last task counted, to count each once */
	unsigned int nr_users;		  /* tasks with an fd on it */
	bool needed;			  /* a file or a task needs it (deps, needed_by) */
	bool inherit;			  /* several tasks use it (or its object), or needed */
	int inherited_fd;		  /* where the opener keeps it; -1 when not inherited */
	int kept_fd;			  /* see files_keep_for(); -1: none */
	int given_fd;			  /* --inherit-fd: criu's descriptor for it; -1: none */
};

/* Indexed like file_descs; NULL until planned. */
extern struct file_sharing *file_sharing;

/*
 * Restore, main process, once files.img and the kinds are collected: who opens each shared
 * description and at which fd it is kept, for every task of the tree. 0 or -errno.
 */
int plan_shared_files(void);

/* files.c: the index of d in file_descs. */
size_t desc_index(const struct file_desc *d);
/* files.c: the fds of one files table, sorted by number and checked against the file table. */
int read_fdinfos(uint32_t files_id, FdinfoEntry ***fdis_out, size_t *nr_out);
void free_fdinfos(FdinfoEntry **fdis, size_t nr);

/* The planner: the ids entry idx depends on (fdtype_ops.deps), malloc'ed into *ids; 0 or -errno. */
int desc_deps(size_t idx, uint32_t **ids, size_t *nr);
/* A file with a finish() step that no task holds: finish() runs in its opener (task). */
bool finished_by_opener(size_t idx);
/* Restore opens it: a task holds it, or another file needs it. */
bool desc_in_use(size_t idx);

#endif
