/*
 * File descriptors: the generic fd walk on dump, the file table and fd installation on
 * restore, and the ops table through which each kind of file (files-reg.c, pipes.c,
 * tty.c, files-ext.c) plugs in. Also cwd, root and umask (fs.c).
 *
 * Images (CRIU's format): files.img holds one file_entry per open file description (and
 * per mapped file, exe, cwd and root), fdinfo-FILES_ID.img one fdinfo_entry per fd of a
 * files table; the kinds add their own (remap-fpath.img and ghost-file-ID.img, pipes-data.img,
 * fifo-data.img, tty-info.img, tty-data.img).
 */
#ifndef CR_FILES_H
#define CR_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include "fdinfo.pb-c.h"
#include "image.h"

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

/*
 * One file_entry of files.img as restore works on it. The whole table is collected once,
 * in the main process before forking, so every task has all of it.
 */
struct task_fds;
struct pstree_item;
struct file_desc {
	uint32_t id;
	const FileEntry *fe; /* the record as read; only the kind's collect() decodes it */
	const struct fdtype_ops *ops;
	/* What collect() decoded (struct reg_file, a pipe end, ...), malloc'ed; or NULL. */
	void *kind;
	uint32_t owner_signum; /* F_SETSIG from the fown_entry; 0: none */
	const FownEntry *owner; /* the fown_entry when it names an owner (F_SETOWN_EX), or NULL */
	/* With fdtype_ops.reg_twin: the REG entry of the same id (its flags, position, owner). */
	const FileEntry *reg_twin;
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
	 * Optional. Dump, from files_dump_check(), once every task's fds are dumped and before
	 * the images are sealed: what needs all of them (a socket's peer must be one of the
	 * dumped sockets). 0 or -errno, after one error line.
	 */
	int (*dump_check)(void);
	/* Optional. Dump, from files_dump_fini(), after a dump or a failed one: free its state. */
	void (*dump_fini)(void);
	/*
	 * Optional. Restore, main process, before this kind's entries are collected: read the
	 * kind's own images (pipes-data.img, remap-fpath.img, ...). 0 or -errno.
	 */
	int (*collect_images)(void);
	/*
	 * Restore, main process, before forking: decode d->fe into d->kind, checking every
	 * field (sub-message present, ids that exist, paths, lengths) and the options the
	 * kind needs; set d->owner_signum via collect_owner(). Kinds are collected in the
	 * order of the ops table, so this may look up entries of the kinds before it
	 * (find_reg_file()). 0 or -errno, after one error line.
	 */
	int (*collect)(struct file_desc *d);
	/*
	 * Optional. Restore, main process, once every entry of the kind is collected: what
	 * ties entries together (a socket's peer, named by its inode). 0 or -errno, after one
	 * error line.
	 */
	int (*collect_done)(void);
	/*
	 * Optional. Restore, main process, from files_collect_fini(): free the tables
	 * collect_images() and collect() filled (d->kind is files.c's to free), whether the
	 * collect finished, failed part-way or never ran, and leave them empty for another.
	 */
	void (*collect_fini)(void);
	/* Restore, in the task: open the description at any number; the fd or -errno. */
	int (*open)(const struct file_desc *d);
	/*
	 * Whether one opening can serve every task that uses the description: the task that
	 * is the lowest common ancestor of its users opens it and they inherit it over fork.
	 * False (ext): each task opens its own, since a plugin's file may bind to the process
	 * that opens it; a description shared by tasks then comes back as copies.
	 */
	bool inheritable;
	/*
	 * CRIU writes a REG entry of the same id beside each entry of this kind (the path it
	 * was opened by, with its flags, position and owner): collect finds it in d->reg_twin
	 * and the id is not taken as used twice. Dump writes it too (dump_reg_file()).
	 */
	bool reg_twin;
	/*
	 * open() takes the one description criu made for d in tree_forked() (from the
	 * fdstore): the tasks that shared it share it again, and none opens it for its
	 * subtree (that happens before the tree exists), whatever inheritable says.
	 */
	bool parked;
	/*
	 * Optional. Restore, main process, after collect: the kernel object behind the
	 * description whose state one opening restores (a pipe's queue, a deleted file's
	 * contents), as a key unique among the entries this function is called for; 0 when
	 * openings of this entry are independent. Entries with the same key are opened by one
	 * task when several tasks use them, so the object and its state exist once.
	 */
	uint64_t (*object_key)(const struct file_desc *d);
	/*
	 * With object_key. open() of one entry of an object may make the descriptions of the
	 * object's other entries too (both ends of a socketpair) and hand each to the engine
	 * (files_keep_for()) until that entry's own open() takes it back (files_take_kept()).
	 */
	bool opens_object;
	/*
	 * Optional. Restore, main process, after collect: the name --inherit-fd gives this
	 * description (pipe:[INODE] as dumped, a regular file's path) into buf. A description
	 * so named is not opened: restore takes the descriptor criu was given instead.
	 */
	void (*inherit_key)(const struct file_desc *d, char *buf, size_t len);
	/*
	 * Optional. Restore, main process, after collect: the files that must already be open
	 * in the task that opens d when open(d) runs (a listening socket an accepted one
	 * connects through, the files in flight in a socket's queue), as file ids written to
	 * ids[0..max); returns how many there are (call again with room for all when that is
	 * more than max). The planner opens each of them, before d, in d's opener or one of
	 * its ancestors, even when no fd holds it, and open(d) finds them with files_dep_fd().
	 * A dependency cycle or a missing id fails the restore, naming both files.
	 */
	size_t (*deps)(const struct file_desc *d, uint32_t *ids, size_t max);
	/*
	 * Optional. Restore, in the first task (in tree order) that holds d, once all of its
	 * fds are placed and before it runs: the part of the state that needs the task's
	 * whole fd table (an epoll's targets are registered under their fd numbers). Dump
	 * reads such state from the first task that holds the description, in the same order.
	 * fd: where the task holds d. 0 or -errno, after one error line.
	 */
	int (*finish)(const struct file_desc *d, int fd, const struct task_fds *fds);
	/*
	 * With finish(). Restore, main process, while planning, before anything is forked:
	 * whether the first task that holds d (fds) has what finish() will need, so that a
	 * bad image fails with its error line before any task exists. 0 or -errno.
	 */
	int (*check_finish)(const struct file_desc *d, const struct task_fds *fds);
	/*
	 * With finish(): a description no task holds (one in flight in a socket's queue) is
	 * dumped too, and restored with finish() run by the task that opens it for the files
	 * that need it, once that task's fds are placed, on the fd it keeps it at (fds: that
	 * task's; check_finish() checks them before anything is forked).
	 */
	bool finish_in_flight;
	/*
	 * Optional. Restore, main process, after collect: the task that must have d open
	 * before it forks its children though none of its fds holds d (a session leader
	 * makes d's pty its controlling terminal through it), or NULL. The planner opens d
	 * in that task or an ancestor and keeps it for the subtree; the task finds it with
	 * files_dep_fd().
	 */
	const struct pstree_item *(*needed_by)(const struct file_desc *d);
	/*
	 * Optional. Restore, main process, once every task of the tree exists (their other
	 * threads do not yet) and before any of them opens its own fds (prepare_fds() waits
	 * for it): make what names the tree's tasks (a pidfd) and park it in the fdstore for
	 * open(). 0 or -errno, after one error line.
	 */
	int (*tree_forked)(void);
	/*
	 * Optional. Restore, main process, once every task has its fds and none runs yet
	 * (before post-restore): hand on what the tasks' openings made for criu (the master
	 * of a pty whose own master was outside the tree, for the RPC client). 0 or -errno,
	 * after one error line.
	 */
	int (*tree_ready)(void);
};

/* A restored task's fd table, for fdtype_ops.finish(). */
struct task_fds {
	pid_t pid;
	FdinfoEntry **fdis; /* sorted by fd */
	size_t nr;
};

/* The file id fd holds in the restored task, or 0 when it is not one of its fds. */
uint32_t task_fd_file(const struct task_fds *fds, int fd);
/* The lowest fd of the restored task that holds file id, or -1. */
int task_fd_of_file(const struct task_fds *fds, uint32_t id);
/*
 * After prepare_inherited_files(): where the task holds file id for its subtree: in open(),
 * a dependency (fdtype_ops.deps) of the file opened; in a task, a file it needs
 * (fdtype_ops.needed_by). -EBADF (logged) when the task does not hold it.
 */
int files_dep_fd(uint32_t id);
/*
 * In open() of a kind with opens_object: fd is the description of entry id, another entry
 * of the object being opened; it moves to a number kept for id (no restored or inherited fd
 * uses it) until id's open() takes it with files_take_kept(). Consumes fd: closed when
 * nothing opens id (its only references are in flight). 0 or -errno.
 */
int files_keep_for(uint32_t id, int fd);
/* In open(): the fd files_keep_for() kept for id, or -ENOENT (not logged) when none. */
int files_take_kept(uint32_t id);

/*
 * The kinds the engine asks, in order (kinds.c): dump asks each in turn whether it owns
 * an fd; restore collects them in this order, so a kind may look up entries of the kinds
 * before it. Set once, before any pipeline runs.
 */
void files_set_kinds(const struct fdtype_ops *const *kinds, size_t nr);

/* Regular files, directories and the memory devices, reopened by path (files-reg.c). */
extern const struct fdtype_ops reg_fdtype_ops;
extern const struct fdtype_ops tty_fdtype_ops;
/* Pipe ends and FIFOs, with their size and queued bytes (pipes.c). */
extern const struct fdtype_ops pipe_fdtype_ops;
extern const struct fdtype_ops fifo_fdtype_ops;
/* memfds: the objects and their contents, shared with the VMAs that map them (memfd.h). */
extern const struct fdtype_ops memfd_fdtype_ops;
/* epoll instances and the files they watch (files-epoll.c). */
extern const struct fdtype_ops epoll_fdtype_ops;
/* inotify instances with their watches, fanotify groups with their marks (files-fsnotify.c). */
extern const struct fdtype_ops inotify_fdtype_ops;
extern const struct fdtype_ops fanotify_fdtype_ops;
/* Anonymous-inode files, re-created with their state from fdinfo (files-eventfd.c, ...). */
extern const struct fdtype_ops eventfd_fdtype_ops;
extern const struct fdtype_ops signalfd_fdtype_ops;
extern const struct fdtype_ops timerfd_fdtype_ops;
/* Namespace files, /proc/PID/ns/NAME (files-nsfs.c). */
extern const struct fdtype_ops nsfs_fdtype_ops;
/* Netlink sockets: protocol, port id, groups, peer (sk-netlink.c). */
extern const struct fdtype_ops netlink_sk_fdtype_ops;
/* Packet sockets: binding, options, memberships, fanout, rings (sk-packet.c). */
extern const struct fdtype_ops packet_sk_fdtype_ops;
/* Unix sockets: names, peers, queues, options (sk-unix.c). */
extern const struct fdtype_ops unix_sk_fdtype_ops;
/* INET and INET6 sockets: TCP (established ones in repair mode), UDP, ICMP (sk-inet.c). */
extern const struct fdtype_ops inet_sk_fdtype_ops;
/* pidfds on the tree's tasks and on reaped processes (files-pidfd.c). */
extern const struct fdtype_ops pidfd_fdtype_ops;
/* BPF maps: attributes and elements; hash, array, LRU, LPM trie maps (files-bpfmap.c). */
extern const struct fdtype_ops bpfmap_fdtype_ops;
/* Files opened on /dev/net/tun, attached to their tun/tap devices (files-tun.c). */
extern const struct fdtype_ops tun_fdtype_ops;
/* Owns every fd: offers what the kinds above do not take to plugins, or refuses it. */
extern const struct fdtype_ops ext_fdtype_ops;

/* ---- dump side (cr-dump.c, task ptrace-stopped) ---- */

/* The kernel's own dev_t layout (MAJOR << 20 | MINOR), which CRIU's images use for st_dev. */
static inline uint32_t kernel_dev(dev_t dev)
{
	return (major(dev) << 20) | minor(dev);
}

/* Open / close files.img (and the kinds' images) for the whole dump. */
int files_dump_init(void);
int files_dump_fini(void);
/* Once every task's fds are dumped: each kind's dump_check(). 0 or -errno. */
int files_dump_check(void);
/*
 * Every fd of /proc/PID/fd -> files.img + fdinfo-FILES_ID.img (the task's ids.files_id,
 * set before this is called). -errno naming the fd if refused.
 */
int dump_task_files(pid_t pid);
/* cwd and root (REG entries of the directories) and umask -> fs-PID.img. */
int dump_task_fs(pid_t pid);
/* The file mapped at [start, end) (via /proc/PID/map_files) as a REG file_entry. */
int dump_mapped_file(pid_t pid, unsigned long start, unsigned long end, uint32_t *file_id);
/* /proc/PID/exe as a REG file_entry. */
int dump_exe_file(pid_t pid, uint32_t *file_id);

/* The fd numbers listed in the directory path (/proc/PID/fd), sorted; 0 or -errno. */
int list_fds(const char *path, int **fds_out, size_t *nr_out);
/* For the kinds: a fresh file_entry id, and writing one entry to files.img. */
uint32_t files_new_id(void);
int write_file_entry(const FileEntry *fe);
/*
 * An image of the dump that only some dumps have (remap-fpath.img, pipes-data.img, ...):
 * created at its first use, closed by files_dump_fini(). NULL after an error line.
 */
struct cr_img *files_side_image(enum cr_img_type type);
/* Whether fd1 of pid1 and fd2 of pid2 are one open description (kcmp): 1, 0, or -errno. */
int same_file_desc(pid_t pid1, int fd1, pid_t pid2, int fd2);
/*
 * A file in flight (SCM_RIGHTS) that a peek at a queue put at fd in criu: its file id, the
 * description dumped when new, as any task's fd is. Takes fd (closed when the dump ends).
 */
int files_dump_in_flight(int fd, uint32_t *id);
/*
 * Whether p is a POSIX message queue (mq_open(), or a file of an mqueue mount): no kind
 * restores those, as CRIU does not; the catch-all kind refuses them by name.
 */
bool fd_is_mqueue(const struct fd_parms *p);
/*
 * fd of task pid, dumped now if its description is new (as dump_task_files() would, which
 * then finds it dumped): its file id and kind. For a VMA that maps the file (a packet
 * socket's ring), read before the task's fds. 0 or -errno.
 */
int files_dump_task_fd(pid_t pid, int fd, uint32_t *id, FdTypes *type);
/* criu's own copy of the task's open description (pidfd_getfd); the fd or -errno. */
int grab_task_fd(const struct fd_parms *p);
/*
 * For every kind's dump(): the owner of p's I/O signals (F_GETOWN_EX, with the uid and
 * euid the kernel recorded with it) and their signal (F_GETSIG) into fown. An owner
 * outside the dumped tree is refused. 0 or -errno after one error line.
 */
int dump_fown(const struct fd_parms *p, FownEntry *fown);
/*
 * A REG entry id naming the file behind p by its path, with its owner (dump_fown()): a
 * FIFO's or terminal's regf_id.
 */
int dump_reg_file(const struct fd_parms *p, uint32_t id);
/*
 * A REG entry id naming path for p as given, not checked against the file: for a kind that
 * re-creates what the path names itself (a hung-up pty slave, whose name left with its
 * master).
 */
int dump_reg_path(const struct fd_parms *p, uint32_t id, const char *path);
/* A REG entry for the directory at the /proc link src (cwd, root), opened O_RDONLY. */
int dump_dir_file(const char *src, const char *what, uint32_t *file_id);
/* A failed dump: remove the names --link-remap gave deleted files (they stay otherwise). */
void reg_dump_undo(void);

/* ---- restore side ---- */

/*
 * Main process, before forking, after pstree_read(): files.img into a table by id, each
 * entry decoded by its kind, and from every task's fdinfo image, which tasks share which
 * description. Each description used by several tasks gets its opener (the users' lowest
 * common ancestor) and a number in the inherited range, just below the service fds and
 * above every restored fd.
 */
int files_collect(void);
/*
 * Frees everything files_collect() built, the kinds' tables too (fdtype_ops.collect_fini),
 * after it succeeded or failed at any point; a no-op when it never ran. Main process only,
 * once nothing it forks later needs the tables (the forked tasks keep their own copies).
 */
void files_collect_fini(void);
/*
 * In the restored task, before it forks its children: open the descriptions it is the
 * opener of at their inherited numbers; its subtree inherits them, prepare_fds() takes
 * them from there and closes the rest of the range.
 */
struct pstree_item;
int prepare_inherited_files(const struct pstree_item *item);
/*
 * Main process, once the tree is forked and before any task opens its fds: each kind's
 * fdtype_ops.tree_forked(). 0 or -errno.
 */
int files_tree_forked(void);
/* Main process, every task's fds open, none running: each kind's fdtype_ops.tree_ready(). */
int files_tree_ready(void);
/*
 * In the restored task, after the service fds are installed and before anything else
 * opens fds: every fd of its fdinfo image at its number with its flags and offset; every
 * other fd that is not a service fd is closed.
 */
int prepare_fds(pid_t pid);
/*
 * In the restored task, after prepare_fds(): cwd, root and umask from fs-PID.img. Done
 * through fds, but once a task is chrooted, absolute paths (open_vma_file(), /proc)
 * resolve inside its root: call this after the last of them.
 */
int restore_task_fs(pid_t pid);
/*
 * A new fd (lowest free number) on a mapped file or the exe by its files.img id, opened
 * with fdflags. Call after prepare_fds(), which closes criu's stray fds. The fd or -errno.
 */
int open_vma_file(uint32_t file_id, uint32_t fdflags);

/*
 * In the restored task pid, after prepare_fds(): a new fd (close-on-exec, lowest free
 * number) on the description of file id that one of its fds holds (a packet socket whose
 * ring a VMA maps). The fd or -errno, after one line.
 */
int files_dup_task_fd(pid_t pid, uint32_t id);

/* The collected entry with this id, or NULL. */
const FileEntry *find_file_entry(uint32_t id);
const struct file_desc *find_file_desc(uint32_t id);

/*
 * For the kinds' collect(): the fown_entry's signal and owner into d, refusing an owner
 * that is not a thread, process or group of the restored tree. 0 or -errno.
 */
int collect_owner(struct file_desc *d, const FownEntry *fown);
/*
 * Main process, once every task and thread of the restored tree exists and none runs
 * code of its own yet: the owners of the files' I/O signals (F_SETOWN_EX), as the images
 * name them, with the uid and euid recorded with each. 0 or -errno after one error line.
 */
int restore_file_owners(void);
/*
 * For the kinds' open(), in the restored task: fd moved (close-on-exec) to a number that
 * no fd restore places uses, so that it stays until the kind takes it for a later open();
 * prepare_fds() closes it if none did. The new fd, or -1 with fd closed when no number is
 * free: the kind then does without.
 */
int files_park_fd(int fd);
/*
 * For the kinds' open(): set the file status flags of d (F_SETFL: O_NONBLOCK, O_ASYNC, ...;
 * the access mode stays the creation's) on fd, just created. fd, or -errno after an
 * error line, fd closed.
 */
int restore_status_flags(int fd, uint32_t flags, const struct file_desc *d);

/*
 * A REG entry as files-reg.c collected it: a path restore opens (an fd, a mapped file,
 * the exe, cwd or root, a FIFO's or terminal's name).
 */
struct ghost_file;
struct reg_file {
	uint32_t id;
	const char *path; /* absolute, shorter than PATH_MAX */
	uint32_t flags;	  /* open flags as dumped */
	uint64_t pos;
	bool has_mode;
	uint32_t mode;
	bool has_size;
	uint64_t size;
	struct ghost_file *ghost; /* deleted at dump: re-created from its ghost image */
	uint32_t link_id; /* --link-remap: reached through this REG entry's file; 0: none */
	pid_t dead_pid; /* path is in /proc/PID of a process gone at dump (a PROCFS remap); 0: none */
	int32_t mnt_id; /* the mount it was on, in the images' mountpoints-ID.img; -1: none */
};

/*
 * After the REG kind's collect_images(): a REG entry re-created from a ghost that was the
 * inode s_dev (kernel_dev() encoding) / ino at dump; 0 when none is.
 */
uint32_t reg_ghost_file_of_inode(uint32_t s_dev, uint64_t ino);
/* The collected REG entry id; NULL after an error line that names user. */
const struct reg_file *find_reg_file(uint32_t id, const char *user);
/* Open rf's file with flags (no offset set); the fd or -errno (logged). */
int open_reg_file(const struct reg_file *rf, uint32_t flags);
/* Make rf, a directory, the cwd (a dead process's /proc one too). 0 or -errno (logged). */
int chdir_reg_dir(const struct reg_file *rf);
/*
 * Main process, once the restored tree runs: remove the link_remap files dump created
 * for --link-remap (kept after a failed restore: the images still need them), in the
 * mount namespace of the tree their mount is in.
 */
void reg_remove_links(void);

#endif
