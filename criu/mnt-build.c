/*
 * Restore, in the root task: each mount namespace's mounts built under --root (mounted
 * anew, bound or moved into place, with their flags), the nested namespaces made as copies
 * of the root's, pivot_root() into the root mount; binds of pty nodes, made last.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "log.h"
#include "mnt-binfmt.h"
#include "namespaces.h"
#include "ns-mnt.h"
#include "pstree.h"

/* The flags of one mount (the rest of mnt_entry.flags is its propagation). */
#define MNT_FLAGS                                                                                  \
	(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)

/*
 * A bind of a pty's slave node (/dev/pts/N at /dev/console, as a container runtime gives
 * its console): the node exists only while the pty does, and the tree's ptys are made by
 * its tasks as they open their fds, after the mounts are built. Such a mount is bound
 * last, by criu, once every task has its fds and before any runs (mntns_bind_ptys()).
 */
bool mnt_is_pty_bind(const struct mount *m)
{
	const char *root = m->e->root;

	return m->how == MOUNT_BIND && m->source->e->fstype == FSTYPE__DEVPTS &&
	       !strcmp(m->source->e->root, "/") && root[0] == '/' && root[1] &&
	       strspn(root + 1, "0123456789") == strlen(root + 1);
}

/*
 * Made last, it must be private under a private parent, with nothing mounted on it or
 * bound from it; 0 or -ENOTSUP after one line.
 */
int mnt_check_pty_bind(const struct mount *m)
{
	const char *why = NULL;

	if (m->e->shared_id || m->e->master_id || (m->e->flags & MS_UNBINDABLE))
		why = "it is shared, a slave or unbindable";
	else if (m->parent && m->parent->e->shared_id)
		why = "its parent mount is shared";
	for (size_t n = 0; n < nr_mntns && !why; n++)
		for (size_t i = 0; i < all_mntns[n]->nr && !why; i++)
			if (all_mntns[n]->mounts[i].parent == m ||
			    all_mntns[n]->mounts[i].source == m)
				why = "a mount is on it or bound from it";
	if (!why)
		return 0;
	pr_err("mount %u at %s: a bind of pty %s, made after the ptys: %s: not supported\n",
	       m->e->mnt_id, m->e->mountpoint, m->e->root + 1, why);
	return -ENOTSUP;
}

/* Makes path a directory, or (for a bind of a file) an empty file, with its parents. */
static int make_mountpoint(const char *path, bool dir)
{
	char *copy = strdup(path);
	struct stat st;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *slash = strchr(copy + 1, '/'); slash && !ret; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(copy, 0755) && errno != EEXIST)
			ret = -errno;
		*slash = '/';
	}
	if (!ret && lstat(path, &st) && errno == ENOENT) {
		int fd = dir ? mkdir(path, 0755) : open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

		if (fd < 0)
			ret = -errno;
		else if (!dir)
			close(fd);
	}
	free(copy);
	if (ret)
		pr_err("cannot make the mount point %s: %s\n", path, strerror(-ret));
	return ret;
}

static int mount_with_opts(const struct mount *m, const char *opts)
{
	const char *type = mnt_type_name(m->e);

	/* Read-only superblocks are made so once their files are in. */
	if (mount(m->e->source, m->path, type, m->e->sb_flags & ~MS_RDONLY, opts)) {
		pr_perror("mount %u: cannot mount %s (%s, \"%s\") at %s", m->e->mnt_id, type,
			  m->e->source, opts, m->path);
		return -errno;
	}
	if (m->e->fstype == FSTYPE__TMPFS && mnt_restore_tmpfs(m))
		return -EIO;
	if (m->e->fstype == FSTYPE__BINFMT_MISC && binfmt_restore(m->path))
		return -EIO;
	if ((m->e->sb_flags & MS_RDONLY) &&
	    mount(NULL, m->path, NULL, MS_REMOUNT | m->e->sb_flags, opts)) {
		pr_perror("mount %u at %s: cannot make its superblock read-only", m->e->mnt_id,
			  m->path);
		return -errno;
	}
	return 0;
}

/*
 * --lsm-mount-context CTX: the options with their context= option (SELinux's; mountinfo
 * shows it quoted) made context="CTX", as CRIU does; options without one are left as
 * they are. Allocated, or NULL.
 */
static char *with_mount_context(const char *options)
{
	const char *ctx = opts.lsm_mount_context, *p = options, *end;
	char *out;

	while (p && strncmp(p, "context=", 8)) {
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	if (!ctx || !p)
		return strdup(options);
	/* The value runs to the next comma outside its quotes. */
	end = p + 8;
	if (*end == '"') {
		const char *close = strchr(end + 1, '"');

		end = close ? close + 1 : end + strlen(end);
	}
	end += strcspn(end, ",");
	if (asprintf(&out, "%.*scontext=\"%s\"%s", (int)(p - options), options, ctx, end) < 0)
		return NULL;
	return out;
}

static int mount_new_fs(const struct mount *m)
{
	char what[32], *opts, *options = with_mount_context(m->e->options ?: "");
	int ret;

	if (!options) {
		pr_err("mount %u: out of memory\n", m->e->mnt_id);
		return -ENOMEM;
	}
	snprintf(what, sizeof(what), "mount %u", m->e->mnt_id);
	ret = userns_mount_opts(options, &opts, what);
	if (!ret)
		ret = mount_with_opts(m, opts);
	free(opts);
	free(options);
	return ret;
}

/*
 * The directory a bind mount shows: its source's path, plus where in the source it is.
 * Once the source is mounted in this namespace, through *clone, a detached copy of the
 * source mount alone (closed by the caller; else -1): from its root, not from what a
 * mount stacked at its mount point shows there, and not through mounts made on its
 * directories, which may cover the one bound.
 */
static char *bind_source(const struct mount *m, int *clone)
{
	const char *src_root = m->source->e->root;
	const char *rest = m->e->root + (strcmp(src_root, "/") ? strlen(src_root) : 0);
	char *out;

	*clone = -1;
	if (m->source->fd < 0 || m->source->mns != m->mns)
		return mnt_path_join(m->source->path, *rest ? rest : "/");
	*clone = syscall(SYS_open_tree, m->source->fd, "",
			 OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
	if (*clone < 0) {
		pr_perror("mount %u: cannot clone its source mount %u", m->e->mnt_id,
			  m->source->e->mnt_id);
		return NULL;
	}
	return asprintf(&out, "/proc/self/fd/%d%s", *clone, strcmp(rest, "/") ? rest : "") < 0
		       ? NULL
		       : out;
}

/* The clone of criu's mount (mnt_clone_ext_master()) at m's place. */
static int move_ext_master(const struct mount *m)
{
	struct stat st;
	int ret;

	if (fstat(m->src_fd, &st)) {
		pr_perror("mount %u: cannot stat its clone of %s", m->e->mnt_id, m->ext_path);
		return -errno;
	}
	ret = make_mountpoint(m->path, S_ISDIR(st.st_mode));
	if (!ret &&
	    syscall(SYS_move_mount, m->src_fd, "", AT_FDCWD, m->path, MOVE_MOUNT_F_EMPTY_PATH)) {
		pr_perror("mount %u: cannot move its clone of %s to %s", m->e->mnt_id, m->ext_path,
			  m->path);
		ret = -errno;
	}
	return ret;
}

static int make_source_dir(void *from)
{
	return mkdir(from, 0700) ? -errno : 0;
}

static int make_source_file(void *from)
{
	int fd = open(from, O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/*
 * A bind of a removed directory or file (mnt_entry.deleted): made again (a directory unless
 * m's mount point is a file) for the bind, *made set to its type, to be removed after it,
 * so that mountinfo shows the root removed again; by the owner of the directory it is made
 * in (no other owner is known, and it goes again at once). 0 or -errno.
 */
static int make_deleted_source(const struct mount *m, char *from, int *made)
{
	char *slash = strrchr(from, '/');
	struct stat st, dir;
	int ret;

	*made = 0;
	if (!m->e->deleted || !lstat(from, &st) || errno != ENOENT)
		return 0;
	*made = lstat(m->path, &st) || S_ISDIR(st.st_mode) ? S_IFDIR : S_IFREG;
	if (slash)
		*slash = '\0';
	ret = stat(slash == from ? "/" : slash ? from : ".", &dir) ? -errno : 0;
	if (slash)
		*slash = '/';
	if (!ret)
		ret = make_as_tree_owner(*made == S_IFDIR ? make_source_dir : make_source_file,
					 from, dir.st_uid, dir.st_gid);
	if (ret) {
		pr_err("mount %u: cannot make its removed source %s again: %s\n", m->e->mnt_id,
		       from, strerror(-ret));
		*made = 0;
	}
	return ret;
}

static int mount_one(struct mount *m)
{
	char *from = NULL;
	int ret, deleted = 0, clone = -1;
	struct stat st;

	switch (m->how) {
	case MOUNT_ROOT:
		from = strdup(opts.root);
		break;
	case MOUNT_EXTERNAL:
		if (m->ext_master) {
			ret = move_ext_master(m);
			goto opened;
		}
		from = strdup(m->ext_path);
		break;
	case MOUNT_UNKNOWN: /* classify_mounts() left none */
	case MOUNT_BIND:
		if (m->src_fd >= 0 && asprintf(&from, "/proc/self/fd/%d", m->src_fd) < 0)
			from = NULL;
		else if (m->src_fd < 0)
			from = bind_source(m, &clone);
		break;
	case MOUNT_NEW_FS:
		ret = make_mountpoint(m->path, true);
		ret = ret ?: mount_new_fs(m);
		goto opened;
	}
	if (!from) {
		if (clone >= 0)
			close(clone);
		return -ENOMEM;
	}
	ret = m->how == MOUNT_BIND ? make_deleted_source(m, from, &deleted) : 0;
	if (!ret && stat(from, &st)) {
		pr_perror("mount %u at %s: cannot bind %s", m->e->mnt_id, m->e->mountpoint, from);
		ret = -errno;
	}
	ret = ret ?: make_mountpoint(m->path, S_ISDIR(st.st_mode));
	if (!ret && mount(from, m->path, NULL, MS_BIND, NULL)) {
		pr_perror("mount %u: cannot bind %s at %s", m->e->mnt_id, from, m->path);
		ret = -errno;
	}
	if (deleted && (deleted == S_IFDIR ? rmdir(from) : unlink(from)) && !ret) {
		pr_perror("mount %u: cannot remove its source %s again", m->e->mnt_id, from);
		ret = -errno;
	}
	free(from);
	if (clone >= 0)
		close(clone);
opened:
	if (ret)
		return ret;
	m->fd = open(m->path, O_PATH | O_CLOEXEC);
	if (m->fd < 0) {
		pr_perror("mount %u: cannot open %s", m->e->mnt_id, m->path);
		return -errno;
	}
	/* A peer of criu's mount until now: what is mounted under it must not reach criu's. */
	if (m->ext_master && mnt_set_propagation(m, MS_SLAVE, "a slave"))
		return -EIO;
	pr_debug("mount %u at %s: %s\n", m->e->mnt_id, m->path,
		 m->how == MOUNT_NEW_FS ? "mounted" : "bound");
	return 0;
}

/* The mount behind m->fd, for mount(): criu's /proc still is the one it started with. */
static const char *fd_path(const struct mount *m, char *buf, size_t size)
{
	snprintf(buf, size, "/proc/self/fd/%d", m->fd);
	return buf;
}

static int set_mount_flags(const struct mount *m)
{
	unsigned long flags = m->e->flags & MNT_FLAGS;
	char path[64];

	/* No atime flag in mountinfo is strictatime; remount would keep the one bound. */
	if (!(flags & (MS_NOATIME | MS_RELATIME)))
		flags |= MS_STRICTATIME;
	if (mount(NULL, fd_path(m, path, sizeof(path)), NULL, MS_REMOUNT | MS_BIND | flags, NULL)) {
		pr_perror("mount %u at %s: cannot set its flags %#lx", m->e->mnt_id, m->path,
			  flags);
		return -errno;
	}
	return 0;
}

/* The root task's root becomes the restored root mount; what was criu's is let go. */
int mnt_enter_root(const struct mount_ns *mns)
{
	if (chdir(mns->root->path) || syscall(SYS_pivot_root, ".", ".") ||
	    umount2(".", MNT_DETACH) || chdir("/")) {
		pr_perror("cannot pivot_root into %s", mns->root->path);
		return -errno;
	}
	return 0;
}

/* In a child of criu, in the namespace: m's bind of the pty node, with m's flags. */
static int bind_pty_in(const struct mount *m)
{
	unsigned long flags = m->e->flags & MNT_FLAGS;
	char *from = mnt_path_join(m->source->e->mountpoint, m->e->root);
	int ret;

	if (!from)
		return -ENOMEM;
	if (!(flags & (MS_NOATIME | MS_RELATIME)))
		flags |= MS_STRICTATIME;
	ret = make_mountpoint(m->e->mountpoint, false);
	if (!ret && mount(from, m->e->mountpoint, NULL, MS_BIND, NULL)) {
		pr_perror("mount %u: cannot bind pty %s at %s", m->e->mnt_id, from,
			  m->e->mountpoint);
		ret = -errno;
	}
	if (!ret && mount(NULL, m->e->mountpoint, NULL, MS_REMOUNT | MS_BIND | flags, NULL)) {
		pr_perror("mount %u at %s: cannot set its flags %#lx", m->e->mnt_id,
			  m->e->mountpoint, flags);
		ret = -errno;
	}
	free(from);
	return ret;
}

/* A child of criu enters the namespace of task pid (a mount of criu's would not do). */
static int bind_pty(const struct mount *m, pid_t pid)
{
	char path[64];
	int status;
	pid_t child;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
	child = fork();
	if (child < 0) {
		pr_perror("mount %u: cannot fork to bind it", m->e->mnt_id);
		return -errno;
	}
	if (child == 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || setns(fd, CLONE_NEWNS)) {
			pr_perror("mount %u: cannot enter the mount namespace of task %d",
				  m->e->mnt_id, pid);
			_exit(1);
		}
		_exit(bind_pty_in(m) ? 1 : 0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return -EIO;
	pr_info("mount %u at %s: pty %s bound\n", m->e->mnt_id, m->e->mountpoint, m->e->root + 1);
	return 0;
}

int mntns_bind_ptys(void)
{
	int ret = 0;

	for (size_t n = 0; n < nr_mntns && !ret; n++) {
		struct pstree_item *item;

		for (item = root_item; item; item = pstree_next(item))
			if (item->ids.mnt_ns_id == all_mntns[n]->id && pidns_host_pid(item->pid))
				break;
		for (size_t i = 0; i < all_mntns[n]->nr && !ret; i++) {
			const struct mount *m = &all_mntns[n]->mounts[i];

			if (!mnt_is_pty_bind(m))
				continue;
			if (!item) {
				pr_err("mount %u at %s: no task of mount namespace %u to bind it "
				       "in\n",
				       m->e->mnt_id, m->e->mountpoint, all_mntns[n]->id);
				return -ENOENT;
			}
			ret = bind_pty(m, pidns_host_pid(item->pid));
		}
	}
	return ret;
}

/* The mounts of mns under --root, with their flags; binds of ptys come later. */
int mnt_build_mounts(struct mount_ns *mns)
{
	int ret = 0;

	for (size_t i = 0; i < mns->nr && !ret; i++)
		if (!mnt_is_pty_bind(&mns->mounts[i]))
			ret = mount_one(&mns->mounts[i]);
	for (size_t i = 0; i < mns->nr && !ret; i++)
		if (!mnt_is_pty_bind(&mns->mounts[i]))
			ret = set_mount_flags(&mns->mounts[i]);
	return ret;
}

int mnt_open_own_ns(struct mount_ns *mns)
{
	mns->ns_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (mns->ns_fd < 0) {
		pr_perror("mount namespace %u: cannot open it", mns->id);
		return -errno;
	}
	return 0;
}

/*
 * The sources in the root's namespace of mns's binds, as the copy unshare() just made
 * has them, opened before mns's root mount covers them.
 */
static int open_root_sources(struct mount_ns *mns)
{
	for (size_t i = 0; i < mns->nr; i++) {
		struct mount *m = &mns->mounts[i];
		char *from;
		int clone; /* stays -1: the source is in the root's namespace */

		if (m->how != MOUNT_BIND || m->source->mns == mns)
			continue;
		from = bind_source(m, &clone);
		if (!from)
			return -ENOMEM;
		m->src_fd = open(from, O_PATH | O_CLOEXEC);
		if (m->src_fd < 0) {
			pr_perror("mount %u: cannot open its source %s", m->e->mnt_id, from);
			free(from);
			return -errno;
		}
		free(from);
	}
	return 0;
}

/*
 * The root task, in the root's namespace with its mounts built and before its pivot_root:
 * nested namespace mns, a copy of the root's with mns's root mount over --root and its
 * mounts in it, pivot_root()ed into; then back into the root's.
 */
int mnt_build_nested(struct mount_ns *mns)
{
	int ret;

	if (unshare(CLONE_NEWNS)) {
		pr_perror("mount namespace %u: cannot make it", mns->id);
		return -errno;
	}
	ret = mnt_open_own_ns(mns);
	ret = ret ?: open_root_sources(mns);
	ret = ret ?: mnt_build_mounts(mns);
	ret = ret ?: mnt_enter_root(mns);
	/* Back in any case: the root's namespace is the one the root task goes on in. */
	ret = mnt_enter_ns(all_mntns[0]) ?: ret;
	if (!ret)
		pr_info("nested mount namespace %u: %zu mounts restored\n", mns->id, mns->nr);
	return ret;
}
