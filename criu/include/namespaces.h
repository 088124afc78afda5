/*
 * The namespaces of the dumped tree: one ns_id per namespace its tasks live in (criu's own
 * among them), the ids the images name them by (task_kobj_ids_entry, utsns-ID.img, ...),
 * and one file per kind behind struct ns_kind (ns-pid.c, ns-uts.c, ns-ipc.c, ns-time.c,
 * ns-cgroup.c, ns-net.c, ns-mnt.c).
 *
 * As CRIU does it: a tree whose root lives in namespaces of its own (not criu's) has them
 * dumped, and restore creates them for the root, which the rest of the tree inherits.
 * Every other task must live in its root's namespaces (nested ones are refused), but for
 * the kinds that say otherwise (ns_kind.nested: mounts, net, pids).
 */
#ifndef CR_NAMESPACES_H
#define CR_NAMESPACES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.pb-c.h"

/* Kinds, in task_ids order. */
enum ns_kind_nr { NS_PID, NS_NET, NS_IPC, NS_UTS, NS_MNT, NS_USER, NS_CGROUP, NS_TIME, NS_KINDS };

struct ns_kind;

/* One namespace of the tree. */
struct ns_id {
	const struct ns_kind *kind;
	uint32_t id;  /* as the images name it */
	bool criu;    /* dump: criu's own; restore: the dumping criu's (inventory's root_ids) */
	uint64_t kid; /* dump: its inode (/proc/PID/ns/NAME) */
	pid_t pid;    /* dump: a task of the tree in it, as criu sees it */
	void *priv;   /* restore: what the kind's collect() decoded */
	struct ns_id *next;
};

/* One kind of namespace: what dump and restore do for a namespace of the root's own. */
struct ns_kind {
	const char *name; /* as /proc/PID/ns names it, and in messages */
	unsigned long clone_flag;
	/*
	 * Not asked of clone(): the root's restore() makes the namespace itself (cgroup: in
	 * the cgroup that becomes its root).
	 */
	bool unshared_in_root;
	/*
	 * Tasks of the tree may live in namespaces of this kind other than the root's, below
	 * a namespace of the root's own: each is dump_check()ed, dumped and collect()ed as the
	 * root's is (the root's first), and the kind's restore() makes them all (pid: the
	 * clone3() of each nested init, ns-pid.c).
	 */
	bool nested;
	/*
	 * dump_check() runs for a pre-dump too: what a pre-dump's images need of the kind (the
	 * pids they name). The other kinds' checks are for a restore, which a pre-dump's
	 * memory never has on its own (CRIU's pre-dump checks none of them either).
	 */
	bool pre_dump_check;
	/*
	 * Dump, in a child of criu's main process that joined the namespace (setns()): write
	 * its images, named by ns->id. NULL: nothing of its own to save. 0 or -errno.
	 */
	int (*dump)(const struct ns_id *ns);
	/*
	 * dump() runs in criu's main process instead, in criu's own namespaces: the kind reads
	 * the namespace through ns->pid's /proc entries and runs criu's tools (mounts: tar).
	 */
	bool dump_from_criu;
	/*
	 * Optional. Dump, main process, from ns_dump_collect(), for a namespace of the root's
	 * own: what must hold for restore to give it back, and what the dump needs to know of
	 * it (a pid namespace: its init is the root; the pids of the tree in it). 0 or -errno,
	 * after one error line.
	 */
	int (*dump_check)(struct ns_id *ns);
	/*
	 * Restore, main process, before anything is forked: read and check the images into
	 * ns->priv. 0 or -errno, after one error line.
	 */
	int (*collect)(struct ns_id *ns);
	/*
	 * Restore, main process, right before it forks the root: a namespace the root is born
	 * into without a clone flag (time: unshare(), then the offsets). leave() right after
	 * the fork takes criu back out of it. 0 or -errno.
	 */
	int (*enter)(struct ns_id *ns);
	int (*leave)(struct ns_id *ns);
	/*
	 * Optional, for a kind with enter(). Restore, main process, once collected: true where
	 * the namespace is asked of clone() after all (enter() and leave() are then not
	 * called, born() fills it): net, with a user namespace of the root's own, which must
	 * own it.
	 */
	bool (*cloned)(const struct ns_id *ns);
	/*
	 * Optional. Restore, main process, right after the root is cloned into the namespace
	 * and before it takes its first step: what only criu, outside, can do for it (a user
	 * namespace's maps; a cloned net namespace's links and tables). The user namespace's
	 * comes first. 0 or -errno, after one error line.
	 */
	int (*born)(const struct ns_id *ns, pid_t root_host);
	/*
	 * Restore, in the root task, born into the namespace, before it forks anything: put
	 * the images' state in. 0 or -errno.
	 */
	int (*restore)(const struct ns_id *ns);
	/*
	 * Optional. Restore, main process, once every task has restored its memory (and, so,
	 * attached what it had attached), from within the namespace (criu joins it for the
	 * call): what only then can be done. 0 or -errno.
	 */
	int (*restore_late)(const struct ns_id *ns);
	/* Restore, main process: free ns->priv. */
	void (*fini)(struct ns_id *ns);
};

extern const struct ns_kind pid_ns_kind, uts_ns_kind, ipc_ns_kind, time_ns_kind, user_ns_kind,
	cgroup_ns_kind, net_ns_kind, mnt_ns_kind;
/* The kinds by enum ns_kind_id (kinds.c), set once before any pipeline runs. */
void ns_set_kinds(const struct ns_kind *const kinds[NS_KINDS]);

struct pstree_item;
struct task_ids;

/*
 * Dump, main process, once the tree is seized and before any of its state is read: the
 * namespace ids of every live task (item->ids), and the checks that refuse, with one
 * line, what restore could not give back: a root in a namespace of a kind this criu does
 * not restore, a task in other namespaces than its root's, children to be born into
 * another pid or time namespace (*_for_children), a pid namespace dumped without its
 * init. Then the pids as the images name them (pidns_img_pid()). 0 or -errno.
 */
int ns_dump_collect(void);
/*
 * The same for a pre-dump: the ids and the tree's shape, but of the kinds' dump_check()s
 * only those a pre-dump needs (pre_dump_check): a mount a dump would refuse does not stop
 * a pre-dump (runc sends its external mounts with the dump only). 0 or -errno.
 */
int ns_pre_dump_collect(void);
/*
 * Dump, main process, while the tree is frozen: the images of every namespace of the
 * root's own (each kind's dump(), in a child joined to it). 0 or -errno.
 */
int ns_dump_images(void);
/* Both sides, once collected: the root's namespace of kind k of its own, or NULL. */
const struct ns_id *ns_root_own(enum ns_kind_nr k);
/*
 * Both sides, once collected: the tree's namespaces of kind k, the root's own first (NULL
 * where it has none), then the nested ones; prev NULL starts, NULL ends.
 */
const struct ns_id *ns_tree_next(enum ns_kind_nr k, const struct ns_id *prev);
/*
 * Dump, main process: a socket made in the tree's network namespace (ns-net.c), criu's
 * own where the tree shares it: sock_diag lists the sockets of its socket's namespace.
 * The fd or -1, after one line.
 */
int net_tree_socket(int domain, int type, int protocol);
/* The same in net namespace ns of the tree (NULL: criu's). */
int net_ns_socket(const struct ns_id *ns, int domain, int type, int protocol);
/* Both sides, once collected: whether tasks of the tree live in nested net namespaces. */
bool net_has_nested(void);
/*
 * Restore, in a task (or criu forking one), where the tree has nested net namespaces
 * (else nothing to do, 0): into the tree's net namespace id (its image id; 0: stay), by
 * the service fds the main process installed before it forked the root; what the task
 * creates meanwhile (its children, sockets) is made there. 0 or -errno, after one line.
 */
int netns_enter(uint32_t id);
/* The net namespace netns_enter() left the task in (0: no nested ones). */
uint32_t netns_current(void);
/*
 * Restore, once collected (tasks too): the link name of the tree's net namespace ns_id (0:
 * the root's) as its images hold it; NULL when there is none, or the namespace's images
 * are not restored (--join-ns net, --empty-ns net).
 */
struct NetDeviceEntry;
const struct NetDeviceEntry *net_find_link(uint32_t ns_id, const char *name);
/*
 * Whether the kernel moves a link into another net namespace with the index asked
 * (IFLA_NEW_IFINDEX): --external netdev[] (check --feature newifindex).
 */
bool net_has_new_ifindex(void);
/*
 * Whether the kernel tells net namespaces' ids for one another (RTM_GETNSID), by which
 * the dump finds a veth's peer in another of the tree's (check --feature nsid, link_nsid).
 */
bool net_has_nsid(void);
/*
 * Namespace files (files-nsfs.c). Dump, once ns_dump_collect() ran: the id of the namespace
 * of the kind /proc/PID/ns names name ("net", ...) with inode kid, in which a task of the
 * tree lives, and the kind's clone flag; -ENOENT (not logged) when no task lives there.
 */
int ns_dump_file_id(const char *name, uint64_t kid, uint32_t *id, uint32_t *cflag);
/*
 * Restore, after pstree_read(): the name in /proc/PID/ns of the kind with clone flag cflag
 * whose namespace ns_id is the tree's (the root's), or NULL after one line naming what
 * (file: the file's id), for one the restored tasks do not live in.
 */
const char *ns_restore_file_name(uint32_t ns_id, uint32_t cflag, uint32_t file);
/* Both sides: criu's own namespaces' ids, as inventory's root_ids holds them. */
void ns_criu_ids(struct task_ids *ids);
void ns_fini(void);

/*
 * Restore, main process, before anything is forked: the namespaces the images name, the
 * root's own ones (those unlike root_ids: NULL, none recorded), each kind's images read;
 * refused with one line: a kind this criu does not restore, nested namespaces. 0 or -errno.
 */
int ns_restore_collect(const TaskKobjIdsEntry *root_ids);
/* The clone() flags that give the root its own namespaces (both sides, once collected). */
unsigned long ns_root_clone_flags(void);
/* Main process, around the fork of the root (ns_kind.enter/leave). 0 or -errno. */
int ns_enter_before_root(void);
int ns_leave_after_root(void);
/* Main process, the root cloned as root_host and not yet let go: ns_kind.born of each. */
int ns_root_born(pid_t root_host);
/*
 * Main process: fn(ns) with criu in root_host's namespace of ns's kind (what criu forks
 * meanwhile is born there too), and back in its own after. 0 or -errno.
 */
int ns_run_in_root(pid_t root_host, const struct ns_id *ns, int (*fn)(const struct ns_id *ns));
/* In the root task, first thing after criu let it go: ns_kind.restore of each. 0 or -errno. */
int ns_restore_in_root(void);
/* Main process, every task restored: ns_kind.restore_late of each, in root_host's. */
int ns_restore_late(pid_t root_host);

/*
 * User ids (ns-user.c). Dump: the id, as criu reads it, as the tree sees it in its user
 * namespace (the same where the root has none of its own). 0, or -ENOENT after one line
 * naming what (a task, a file) holds an id the namespace has no mapping for.
 */
int userns_tree_uid(uint32_t uid, uint32_t *tree, const char *what);
int userns_tree_gid(uint32_t gid, uint32_t *tree, const char *what);
/* Both of a file's owner ids at once (stat()'s st_uid and st_gid). */
int userns_tree_owner(uint32_t uid, uint32_t gid, uint32_t *tree_uid, uint32_t *tree_gid,
		      const char *what);
/*
 * Dump, in a child of criu: into the user namespace of task pid of the tree, where the
 * tree has one of its own (files' owners then read as the tree sees them). 0 or -errno
 * after a line.
 */
int userns_join_tree(pid_t pid);
/*
 * Dump: the owner of an inode restore does not make again nor give an owner (a pty
 * master's ptmx node, a terminal of the shell's), as a stat() in the tree shows it: the
 * kernel's overflow ids for those the namespace does not map. 0 or -EIO after a line.
 */
int userns_seen_owner(uint32_t uid, uint32_t gid, uint32_t *tree_uid, uint32_t *tree_gid);
/*
 * Restore, main process: start before the root is forked (none where the root has no user
 * namespace of its own), and stop on every way out, before criu waits for its children:
 * the owner service, a child of criu outside the tree's user namespace that gives files
 * the owners restore asks for; tasks reach it through the USERNS_SFD service fd (the
 * restorer closes it with the other service fds). 0 or -errno.
 */
int userns_owner_service_start(void);
void userns_owner_service_stop(void);
/*
 * Restore, in a task of a tree with a user namespace of its own: make(arg) with uid and gid
 * (as the tree sees them) as the filesystem ids, in a child that shares the caller's fds (an
 * fd make() opens is the caller's) and takes a pid no task of the tree has. A filesystem
 * mounted in that namespace refuses to create anything for criu's ids, which it does not
 * map (EOVERFLOW), and a task cannot take criu's ids back once it gave them up. Elsewhere
 * make(arg) as it is. make()'s return value (0, an fd or -errno), or -errno when the
 * child cannot run.
 */
int make_as_tree_owner(int (*make)(void *arg), void *arg, uint32_t uid, uint32_t gid);

/*
 * Restore, in criu or a task: fd's inode (any fd, O_PATH too) owned by uid and gid as the
 * images name them (the tree's ids). Restored tasks cannot chown what they create in the
 * tree's user namespace (criu's ids own it, unmapped there): the service does. 0 or
 * -errno, after one line naming what.
 */
int userns_chown(int fd, uint32_t uid, uint32_t gid, const char *what);
/* The same for the file at path itself (a symlink's own owner). */
int userns_chown_path(const char *path, uint32_t uid, uint32_t gid);
/*
 * Restore: pty_queue_input() through the service where it runs (TIOCSTI takes
 * CAP_SYS_ADMIN in criu's user namespace, which the tasks opening the pty lack).
 */
struct kernel_termios;
struct file_handle;
/* open_handle_in_mount() through the service where it runs (it takes CAP_DAC_READ_SEARCH). */
int userns_open_handle(int mnt_fd, struct file_handle *fh, const char **why);
int userns_queue_pty_input(int slave_fd, const struct kernel_termios *termios,
			   const uint8_t *keys, size_t len, const char *what);
/*
 * Restore, in a task: SO_SNDBUFFORCE or SO_RCVBUFFORCE (opt) to val on socket fd through the
 * service (they take CAP_NET_ADMIN in the initial user namespace). 0 or -errno; -EPERM where
 * no service runs.
 */
int userns_sock_buf(int fd, int opt, int val);
/*
 * Restore, in a task: a new ping socket (SOCK_DGRAM, IPPROTO_ICMP or IPPROTO_ICMPV6) of
 * family in the task's net namespace, made by the service with a gid of the namespace's
 * net.ipv4.ping_group_range (the tasks still have criu's gids). The fd or -errno; -EACCES
 * where no service runs.
 */
int userns_ping_socket(int family);
/*
 * Restore: a mount's options, made inside the tree's user namespace: "uid=N" and "gid=N"
 * name criu's ids (mountinfo shows them so whoever reads it), the kernel reads them as the
 * tree's. *tree_opts, allocated, is opts with those ids as the tree sees them. 0, or
 * -errno after one line naming what (-EOVERFLOW: an id the namespace does not map).
 */
int userns_mount_opts(const char *opts, char **tree_opts, const char *what);
/*
 * Restore: a uid of the images (the tree's) as criu names it, for what criu itself sets
 * with its own ids (an F_SETOWN owner's); -EOVERFLOW after one line naming what where the
 * tree's namespace does not map it.
 */
int userns_host_uid(uint32_t uid, uint32_t *host, const char *what);
/* The same for a gid (net.ipv4.ping_group_range, which the kernel reads as criu's). */
int userns_host_gid(uint32_t gid, uint32_t *host, const char *what);
/* Restore: host, as criu sees it, as the tree sees it (itself where the tree has no userns). */
int userns_tree_uid_of_host(uint32_t host, uint32_t *uid, const char *what);

/*
 * Pids (ns-pid.c). Images name a task by its pid in the root's pid namespace; criu sees it
 * by its pid in criu's. Both are the same but for a root with a pid namespace of its own.
 *
 * Dump: the pid (or tid, or session, or group id) host, as criu sees it, as the images name
 * it: 0 for one outside the root's pid namespace (the session a namespace's init was
 * born in).
 */
pid_t pidns_img_pid(pid_t host);
/* Whether the root has a pid namespace of its own (both sides, once collected). */
bool pidns_own(void);
/*
 * Restore, main process: the task img_pid of the tree, as criu sees it, or 0 when it was not
 * found (not forked yet).
 */
pid_t pidns_host_pid(pid_t img_pid);
/* Restore: the root, forked as host. */
int pidns_note_root(pid_t img_pid, pid_t host);
/*
 * Restore: the child img_pid that the task parent_host has forked, as criu sees it. 0 or
 * -errno; *host set.
 */
int pidns_find_child(pid_t parent_host, pid_t img_pid, pid_t *host);
/* Restore: threads img_tids[nr] of the process host, as criu sees them, into host_tids. */
int pidns_find_threads(pid_t host, const pid_t *img_tids, unsigned int nr, pid_t *host_tids);
/*
 * Pid namespaces nested below the root's (pidns-nested.img, ours). Dump, main process, from
 * pstree_write(): the image, where a thread lives in one. 0 or -errno.
 */
int pidns_write_nested(void);
/*
 * Dump, main process, from ns_dump_collect(): whether item's pid_for_children (inode
 * ns_inode) is the namespace of a child it forked there, which then is nested and its
 * init pid 1 there (restore sets it back: pidns_restore_for_children()).
 */
bool pidns_for_children_init(const struct pstree_item *item, uint64_t ns_inode);
/*
 * Restore, in task item once it forked its children: its pid_for_children back into the
 * nested namespace it had unshared. 0 or -1 after one line.
 */
int pidns_restore_for_children(const struct pstree_item *item);
/*
 * Restore, once collected (criu and the tasks): clone3()'s set_tid for the thread img_pid
 * (as pstree.img names it), its tid in its own pid namespace first, the root's last, at
 * most max; the number of them.
 */
unsigned int pidns_set_tid(pid_t img_pid, int32_t *set_tid, unsigned int max);
/* Restore: the pid the thread img_pid sees itself as (gettid()). */
pid_t pidns_own_pid(pid_t img_pid);
/*
 * Restore, in task item: the task, session or group id (as pstree.img names it) as item
 * sees it: 0 for a leader above its pid namespace.
 */
pid_t pidns_seen_by(const struct pstree_item *item, pid_t id);
/*
 * Restore, in the task forker (or a helper of its): clone3() the task img_pid (or a helper
 * for the exited leader img_pid) with its pids in every pid namespace, in its own
 * (CLONE_NEWPID for a nested namespace's init); 0 in the child, its pid in the forker, or
 * -1 with errno (after one line where it is not clone3's).
 */
pid_t pidns_clone_child(const struct pstree_item *forker, pid_t img_pid, unsigned long flags);
/*
 * Restore, in the task forker: a helper with pid pid at every level from forker's pid
 * namespace to the root's (pid is above every pid of the images: pstree_helper_pid()).
 */
pid_t pidns_clone_helper(const struct pstree_item *forker, pid_t pid);
/* Both sides, once collected: whether item is the init of a nested pid namespace. */
bool pidns_nested_init(const struct pstree_item *item);
/* Restore: the largest pid in the nested pid namespaces, 0 without any. */
pid_t pidns_max_pid(void);
/*
 * Restore: the pid a helper of the task self (its tree pid) takes in the tree's own pid
 * namespace, above every id of the tree; 0 (any pid) outside one.
 */
pid_t pidns_helper_pid(pid_t self);

/*
 * Mounts (ns-mnt.c). Dump: path, as a task of the tree names the file behind the /proc
 * link src, where criu reaches it (through /proc/PID/root of a task in the mount namespace
 * of the file's mount when the tree has mount namespaces of its own), in buf.
 */
const char *mntns_dump_path(const char *src, const char *path, char *buf, size_t size);
/* Dump: a task in the i-th mount namespace of the tree's own (the root's first); 0 past them. */
pid_t mntns_dump_pid(unsigned int i);
/*
 * Dump: the mount id of the file behind the /proc link src, for reg_file_entry.mnt_id;
 * -1 (not written) for a tree in criu's mount namespace. 0 or -errno.
 */
int mntns_file_mnt_id(const char *src, int32_t *mnt_id);
/*
 * Whether mnt_id is a mount of one of the tree's mount namespaces: at dump as read, at
 * restore as the images name them.
 */
bool mntns_has_mount(int32_t mnt_id);
/*
 * Restore, once collected: whether the root gets a mount namespace of its own, in which
 * its tasks find the paths the images name (by the mounts' ids: mnt_id fields).
 */
bool mntns_restored(void);
/*
 * Restore, in a task, once the root restored its mount namespaces: into the tree's mount
 * namespace id (its image id), where the task is not in it already (0: stay). A parent
 * enters its child's around the fork. 0 or -errno, after one line.
 */
int mntns_enter(uint32_t id);
/*
 * Restore, in a task: into the namespace of the image's mount mnt_id (it stays where no
 * image names it, or none was restored), for a path of that namespace. The id of the one
 * it was in, for mntns_enter() after; or -errno, after one line.
 */
int64_t mntns_enter_mount(int32_t mnt_id);
/*
 * Restore, in a task in the namespace of the image's mount mnt_id: where the path name,
 * relative to directory dir (absolute), reaches through another mount mounted on a
 * directory of mnt_id's (one mounted over the way since), O_PATH on dir in a detached copy
 * of mnt_id's mount alone, from which name reaches mnt_id's own directories. -ENOENT
 * (unlogged) where name reaches mnt_id's mount as it is, or no image names it; else the
 * fd, or -errno after one line.
 */
int mntns_uncovered_dir(int32_t mnt_id, const char *dir, const char *name);
/*
 * Restore, main process, every task restored (its ptys made) and none released: the
 * binds of pty slave nodes (a container's /dev/console), which need the ptys. 0 or
 * -errno, after one line.
 */
int mntns_bind_ptys(void);
/*
 * Restore, main process, the tree running: path, of the namespace of the image's mount
 * mnt_id, where criu reaches it (through /proc/PID/root of a task there), in buf.
 */
const char *mntns_restore_path(int32_t mnt_id, const char *path, char *buf, size_t size);

#endif
