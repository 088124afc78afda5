/*
 * The mount namespace kind's own files (ns-mnt.c, mnt-build.c, mnt-tmpfs.c,
 * mnt-propagation.c): the mounts of each namespace as dump reads them and restore builds
 * them again.
 */
#ifndef CR_NS_MNT_H
#define CR_NS_MNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "servicefd.h"

#include "mnt.pb-c.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_SET_GROUP
#define MOVE_MOUNT_SET_GROUP 0x00000100
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

enum mount_how { MOUNT_UNKNOWN, MOUNT_ROOT, MOUNT_EXTERNAL, MOUNT_NEW_FS, MOUNT_BIND };

struct mount {
	MntEntry *e;
	enum mount_how how;
	struct mount *parent; /* NULL for the root mount */
	struct mount *source; /* MOUNT_BIND: the mount whose directory it binds */
	char *ext_path;	      /* restore, MOUNT_EXTERNAL: what --external names, from / */
	char *type;	      /* dump: the filesystem's name, as mountinfo gives it */
	char *path;	      /* restore: where criu's root task mounts it */
	int fd;		      /* restore: O_PATH on the mount, once mounted; -1 before */
	/*
	 * Restore: what it is made from, opened beforehand: nested and bound from the root's
	 * namespace, its source; external with ext_master or ext_peer, a clone of criu's mount
	 * at ext_path.
	 */
	int src_fd;
	bool ext_master;      /* external, a slave of a peer group outside the tree's namespaces */
	bool ext_peer;	      /* external, in the peer group of criu's mount it is bound from */
	struct mount_ns *mns; /* the namespace it is in */
	bool done;
};

struct mount_ns {
	uint32_t id;
	pid_t pid;	      /* dump: a task in it */
	struct mount *mounts; /* restore: in the order they are mounted */
	size_t nr;
	struct mount *root;
	bool from_image; /* the entries are the image's (pb_free), not dump's own */
	int ns_fd;	 /* restore, in the root task: the namespace once made; -1 before */
};

/*
 * Both sides: every mount namespace of the tree, the root's first (namespaces.c collects
 * it first). Restore keeps each in a service fd: MNTNS_SFD_NR at most.
 */
extern struct mount_ns *all_mntns[MNTNS_SFD_NR];
extern size_t nr_mntns;

/* ns-mnt.c: whether directory a of a filesystem holds directory b of it (or is it). */
bool mnt_path_holds(const char *a, const char *b);
/* ns-mnt.c: a mountinfo path (blanks and backslashes as \ooo) as it is, allocated. */
char *mnt_unescaped_dup(const char *s);
/* ns-mnt.c: b, a path inside directory a, as one path (b's leading / kept), allocated. */
char *mnt_path_join(const char *a, const char *b);
/* ns-mnt.c: the name of filesystem type nr as mount() takes it. */
const char *mnt_fstype_name(uint32_t nr);
/* The filesystem type a mount is made with (fsname for CRIU's "auto" type). */
const char *mnt_type_name(const MntEntry *e);

/* mnt-build.c. A bind of a pty's slave node, made last (mntns_bind_ptys()). */
bool mnt_is_pty_bind(const struct mount *m);
/* Such a bind must be private under a private parent: 0 or -ENOTSUP after one line. */
int mnt_check_pty_bind(const struct mount *m);
/* The root task: mns's mounts under --root, with their flags; binds of ptys come later. */
int mnt_build_mounts(struct mount_ns *mns);
/* The root task: nested namespace mns, made, built and pivot_root()ed into; then back. */
int mnt_build_nested(struct mount_ns *mns);
/* The root task's root becomes mns's root mount; what was criu's is let go. */
int mnt_enter_root(const struct mount_ns *mns);
/* The root task's current mount namespace is mns's (mns->ns_fd). */
int mnt_open_own_ns(struct mount_ns *mns);

/* mnt-tmpfs.c. Dump: a detached clone of m, a mount of task pid's namespace: fd or -errno. */
int mnt_clone_mount(pid_t pid, const struct mount *m);
/* Dump: the files of tmpfs m into tmpfs-dev-SDEV.tar.gz.img, with tar. */
int mnt_dump_tmpfs(pid_t pid, const struct mount *m);
/* Restore, in the root task: the image's files into the new tmpfs m. */
int mnt_restore_tmpfs(const struct mount *m);

/* mnt-propagation.c. Restore, collect: an external m that receives from outside, cloned. */
int mnt_clone_ext_master(struct mount *m);
/* Restore, collect: an external m that was a peer of criu's mount, cloned to join it. */
int mnt_find_ext_peer(struct mount *m);
/* m's propagation (MS_SHARED, MS_SLAVE...) through its fd; what names it in the log. */
int mnt_set_propagation(const struct mount *m, unsigned long type, const char *what);
/* The root task into mount namespace mns. */
int mnt_enter_ns(const struct mount_ns *mns);
/* The root task, the trees built: peer groups and slaves of every namespace, unbindable. */
int mnt_restore_propagation(void);

#endif
