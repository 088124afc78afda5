/*
 * Inside the regular-file kind (files-reg.c, files-ghost.c: deleted files, files-remap.c:
 * remap-fpath.img and files linked back): what its three files share. Not for other
 * files, which go through files.h.
 */
#ifndef CR_FILES_REG_INTERNAL_H
#define CR_FILES_REG_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "files.h"

#include "remap-file-path.pb-c.h"

/*
 * A deleted file of the images (one per ghost image, shared by every entry remapped to
 * it). Collected in the main process before forking, so each restored task has its own
 * copy: "restored" means "re-created by this task".
 */
struct ghost_file {
	uint32_t id; /* ghost-file-ID.img */
	uint32_t uid, gid, mode;
	dev_t rdev;   /* a device node's numbers */
	char *target; /* a symlink's, malloc'ed */
	uint64_t size;
	bool chunks; /* contents as ghost_chunk_entry records, else size raw bytes */
	bool has_atim, has_mtim;
	struct timespec atim, mtim;
	bool has_dumped_inode;
	uint32_t dumped_dev; /* kernel_dev() encoding, as inotify names it */
	uint64_t dumped_ino;
	bool restored;
	dev_t restored_dev;
	ino_t restored_ino;
};

/* Directories above a ghost that were deleted with it, made again for its re-creation. */
struct ghost_parents {
	char path[PATH_MAX];
	size_t made[64]; /* lengths of the prefixes of path made, the outermost first */
	unsigned int nr;
};

/* ---- files-reg.c ---- */

/* One REG file_entry of files.img; src: the /proc link for its mount id, or NULL. */
int reg_write_entry(uint32_t id, const char *path, const struct stat *st, uint32_t flags,
		    uint64_t pos, FownEntry *fown, const char *src);
/* An absolute path without ".", ".." or empty components. */
bool reg_is_plain_path(const char *path);
/* "regular file", "directory", ... for messages. */
const char *reg_file_kind(mode_t mode);

/* ---- files-ghost.c ---- */

/* Dump: whether a deleted inode of this mode can be re-created. */
bool ghost_kind(mode_t mode);
/* Dump: the deleted file behind src saved once as ghost *ghost_id. 0 or -errno. */
int ghost_dump(const char *src, const char *path, const struct stat *st, uint32_t *ghost_id);

/* Restore, collected: the ghosts, and the file ids remapped to them. */
extern size_t nr_ghosts, nr_ghost_remaps;
/* The ghost file_id is remapped to, or NULL. */
struct ghost_file *ghost_of_file(uint32_t file_id);
int ghost_collect_remap(uint32_t file_id, uint32_t ghost_id);
void ghost_collect_fini(void);
/* The deleted directories above path made again (by uid and gid), and removed again. */
int ghost_make_parents(const char *path, uint32_t uid, uint32_t gid, struct ghost_parents *gp);
void ghost_remove_parents(struct ghost_parents *gp);
/* rf's ghost re-created (or reopened if this task holds it) and opened. The fd or -errno. */
int ghost_open(const struct reg_file *rf, int flags);

/* ---- files-remap.c ---- */

/* Dump: a remap-fpath.img entry. */
int remap_write(uint32_t file_id, uint32_t remap_id, RemapType type);
/* Dump, --link-remap: the file behind src linked back beside path, REG entry *link_id. */
int remap_link_back(const char *src, const char *path, const struct stat *st, uint32_t *link_id);

/* Restore, collected: the LINKED and PROCFS remaps. */
extern size_t nr_linked_remaps;
/* The remap target (a REG id, a pid) of file_id when its remap has that type; 0: none. */
uint32_t remap_target(uint32_t file_id, RemapType type);
/* One remap-fpath.img entry (pb_collect_optional_image()'s callback). */
int remap_collect_one(void *msg, void *arg);
void remap_collect_fini(void);
/* rf opened through its link_remap file; the fd or -errno. */
int remap_open_linked(const struct reg_file *rf, int flags);
/* rf, in /proc/PID of a process gone, opened while a helper has PID; the fd or -errno. */
int remap_open_dead_proc(const struct reg_file *rf, int flags, bool chdir_too);

#endif
