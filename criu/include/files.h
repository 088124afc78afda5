/*
 * File descriptors: the generic fd walk on dump, the file table and fd installation on
 * restore, and the ops table through which each kind of file (files-reg.c, tty.c, ...)
 * plugs in. Also cwd/root (fs.c).
 */
#ifndef CR_FILES_H
#define CR_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fdinfo.pb-c.h"

/* What the dump side knows about one fd of a stopped task. */
struct fd_parms {
	pid_t pid;
	int fd;
	struct stat st;	     /* of the open file, through /proc/PID/fd/N */
	char link[PATH_MAX]; /* readlink of /proc/PID/fd/N */
	uint64_t pos;
	uint32_t flags; /* file status flags, without O_CLOEXEC */
	bool cloexec;
};

/* One kind of file. The pipelines call these and never look at the kind themselves. */
struct fdtype_ops {
	FdTypes type;
	const char *name;
	/* Dump: whether this kind handles the fd. */
	bool (*owns)(const struct fd_parms *p);
	/* Dump: write the description as file_entry id (write_file_entry()). 0 or -errno. */
	int (*dump)(const struct fd_parms *p, uint32_t id);
	/*
	 * Restore, main process, before forking: check one collected entry (its sub-message
	 * is present, the options it needs are given). 0 or -errno.
	 */
	int (*collect)(const FileEntry *fe);
	/* Restore, in the task: open the description at any number; the fd or -errno. */
	int (*open)(const FileEntry *fe);
	/*
	 * Whether one opening can serve every task that uses the description: the task that
	 * is the lowest common ancestor of its users opens it and they inherit it over fork.
	 * False (ext): each task opens its own, since a plugin's file may bind to the process
	 * that opens it; a description shared by tasks then comes back as copies.
	 */
	bool inheritable;
	/*
	 * Optional. Restore, main process, after collect: the kernel object behind the
	 * description whose state one opening restores (a pipe's queue, a deleted file's
	 * contents), as a key unique among the entries this function is called for; 0 when
	 * openings of this entry are independent. Entries with the same key are opened by one
	 * task when several tasks use them, so the object and its state exist once.
	 */
	uint64_t (*object_key)(const FileEntry *fe);
};

extern const struct fdtype_ops reg_fdtype_ops;
extern const struct fdtype_ops tty_fdtype_ops;
/* Pipe ends and FIFOs, with their size and queued bytes (pipes.c). */
extern const struct fdtype_ops pipe_fdtype_ops;
extern const struct fdtype_ops fifo_fdtype_ops;
/* Owns every fd: offers what the kinds above do not take to plugins, or refuses it. */
extern const struct fdtype_ops ext_fdtype_ops;

/* ---- dump side (cr-dump.c, task ptrace-stopped) ---- */

/* Open / close files.img for the whole dump. */
int files_dump_init(void);
int files_dump_fini(void);
/* Every fd of /proc/PID/fd -> files.img + fdinfo-PID.img. -errno naming the fd if refused. */
int dump_task_files(pid_t pid);
/* cwd and root -> fs-PID.img. */
int dump_task_fs(pid_t pid);
/* The file mapped at [start, end) (via /proc/PID/map_files) as a REG file_entry. */
int dump_mapped_file(pid_t pid, unsigned long start, unsigned long end, uint32_t *file_id);
/* /proc/PID/exe as a REG file_entry. */
int dump_exe_file(pid_t pid, uint32_t *file_id);

/* For the kinds: a fresh file_entry id, and writing one entry to files.img. */
uint32_t files_new_id(void);
int write_file_entry(const FileEntry *fe);

/* ---- restore side ---- */

/*
 * Main process, before forking, after pstree_read(): files.img into a table by id, and
 * from every task's fdinfo image, which tasks share which description. Each description
 * used by several tasks gets its opener (the users' lowest common ancestor) and a number
 * in the inherited range, just below the service fds and above every restored fd.
 */
int files_collect(void);
/*
 * In the restored task, before it forks its children: open the descriptions it is the
 * opener of at their inherited numbers; its subtree inherits them, prepare_fds() takes
 * them from there and closes the rest of the range.
 */
struct pstree_item;
int prepare_inherited_files(const struct pstree_item *item);
/*
 * In the restored task, after the service fds are installed and before anything else
 * opens fds: every fd of fdinfo-PID.img at its number with its flags and offset; every
 * other fd that is not a service fd is closed.
 */
int prepare_fds(pid_t pid);
/*
 * In the restored task, after prepare_fds(): cwd and root from fs-PID.img. Done through
 * fds, but once a task is chrooted, absolute paths (open_vma_file(), /proc) resolve inside
 * its root: call this after the last of them.
 */
int restore_task_fs(pid_t pid);
/*
 * A new fd (lowest free number) on a mapped file or the exe by its files.img id, opened
 * with fdflags. Call after prepare_fds(), which closes criu's stray fds. The fd or -errno.
 */
int open_vma_file(uint32_t file_id, uint32_t fdflags);

/* The collected entry with this id, or NULL. */
const FileEntry *find_file_entry(uint32_t id);

#endif
