/*
 * Mount namespaces: the mounts of a root with a mount namespace of its own
 * (mountpoints-ID.img, as /proc/PID/mountinfo lists them) and the files of each tmpfs
 * (tmpfs-dev-SDEV.tar.gz.img, what `tar --create --gzip` made of it). Restore clones the
 * root with CLONE_NEWNS; before it forks, the root builds the tree again under --root DIR
 * (the root mount is DIR bound onto itself), sets each mount's flags and propagation, and
 * pivot_root()s into it.
 *
 * Each mount comes back one of four ways: the namespace's root mount (--root); external
 * (--external mnt[KEY]:PATH binds PATH; --external mnt[] at dump: what criu's own mounts
 * show of it; one that receives from outside is a clone of criu's mount, made a slave); a
 * new filesystem (proc, sysfs, tmpfs, devpts, mqueue, binfmt_misc:
 * mnt-binfmt.c) for the first mount of its
 * superblock, which must show the filesystem's root; or a bind of a directory of the root
 * mount, an external one or such a new filesystem. Anything else is refused at dump with
 * one line naming the mount.
 *
 * Tasks of the tree may live in other mount namespaces than the root's (nested ones, each
 * with its mountpoints-ID.img). The root task makes each after its own is built: it
 * unshares a copy of its own, binds the nested one's root mount over --root, builds its
 * mounts there the same four ways (a bind may come from a mount of the root's namespace:
 * the copy has it), pivot_root()s into it and goes back to its own. The peer groups of
 * all of them are set up together at the end (they may span namespaces). Each namespace is
 * kept as a service fd: a task is born in its own (its parent enters it around the fork),
 * and a file is opened in the namespace of the mount it was on (reg_file_entry.mnt_id).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "criu-plugin.h" /* send_fds(), recv_fds(): after log.h */
#include "mnt-binfmt.h"
#include "namespaces.h"
#include "pstree.h"
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

/* The flags of one mount (the rest of mnt_entry.flags is its propagation). */
#define MNT_FLAGS                                                                            \
	(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)

/* How mountinfo shows the root of a bind whose directory (or file) was removed since. */
#define DELETED_ROOT "//deleted"

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
	bool ext_master; /* external, a slave of a peer group outside the tree's namespaces */
	bool ext_peer;	 /* external, in the peer group of criu's mount it is bound from */
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
static struct mount_ns *all_mntns[MNTNS_SFD_NR];
static size_t nr_mntns;

/*
 * The namespaces whose mounts a mount of mns may come back from: its own, and the root's
 * (a nested namespace is made as a copy of it). The number of them in pool[].
 */
static size_t mount_pool(struct mount_ns *mns, struct mount_ns *pool[2])
{
	pool[0] = mns;
	pool[1] = all_mntns[0];
	return mns == all_mntns[0] ? 1 : 2;
}

/* The filesystems restore mounts anew, with CRIU's numbers. */
static const struct {
	const char *name;
	uint32_t nr;
	bool new_fs;
} fstypes[] = {
	{ "proc", FSTYPE__PROC, true },
	{ "sysfs", FSTYPE__SYSFS, true },
	{ "devtmpfs", FSTYPE__DEVTMPFS, false },
	{ "binfmt_misc", FSTYPE__BINFMT_MISC, true },
	{ "tmpfs", FSTYPE__TMPFS, true },
	{ "devpts", FSTYPE__DEVPTS, true },
	{ "pstore", FSTYPE__PSTORE, false },
	{ "securityfs", FSTYPE__SECURITYFS, false },
	{ "fusectl", FSTYPE__FUSECTL, false },
	{ "debugfs", FSTYPE__DEBUGFS, false },
	{ "cgroup", FSTYPE__CGROUP, false },
	{ "mqueue", FSTYPE__MQUEUE, true },
	{ "fuse", FSTYPE__FUSE, false },
	{ "overlay", FSTYPE__OVERLAYFS, false },
	{ "autofs", FSTYPE__AUTOFS, false },
	{ "tracefs", FSTYPE__TRACEFS, false },
	{ "cgroup2", FSTYPE__CGROUP2, false },
};

/* Mount options as mountinfo spells them: per mount, and those of the superblock. */
static const struct {
	const char *name;
	unsigned long flag;
} mnt_opts[] = {
	{ "ro", MS_RDONLY },	     { "nosuid", MS_NOSUID },	    { "nodev", MS_NODEV },
	{ "noexec", MS_NOEXEC },     { "noatime", MS_NOATIME },	    { "nodiratime", MS_NODIRATIME },
	{ "relatime", MS_RELATIME },
}, sb_opts[] = {
	{ "ro", MS_RDONLY },	     { "sync", MS_SYNCHRONOUS },    { "dirsync", MS_DIRSYNC },
	{ "mand", MS_MANDLOCK },     { "lazytime", MS_LAZYTIME },
};

static const char *fstype_name(uint32_t nr)
{
	for (size_t i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		if (fstypes[i].nr == nr)
			return fstypes[i].name;
	return "an unsupported filesystem";
}

static bool fstype_new_fs(uint32_t nr)
{
	for (size_t i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		if (fstypes[i].nr == nr)
			return fstypes[i].new_fs;
	return false;
}

/* Whether directory a of a filesystem holds directory b of it (or is it). */
static bool path_holds(const char *a, const char *b)
{
	size_t len = strlen(a);

	if (!strcmp(a, "/"))
		return true;
	return !strncmp(a, b, len) && (b[len] == '/' || !b[len]);
}

/* b, a path inside directory a, as one path (b's leading / kept). */
static char *path_join(const char *a, const char *b)
{
	char *out;

	if (asprintf(&out, "%s%s", strcmp(a, "/") ? a : "",
		     strcmp(b, "/") || !strcmp(a, "/") ? b : "") < 0)
		return NULL;
	return out;
}

static struct mount *find_mount(struct mount_ns *mns, uint32_t mnt_id)
{
	for (size_t i = 0; i < mns->nr; i++)
		if (mns->mounts[i].e->mnt_id == mnt_id)
			return &mns->mounts[i];
	return NULL;
}

/*
 * Whether another mount of m's superblock comes back as the root, a new fs or an external
 * one: m is then bound from it.
 */
static bool sb_taken(struct mount_ns *mns, const struct mount *m)
{
	struct mount_ns *pool[2];
	size_t nr = mount_pool(mns, pool);

	for (size_t p = 0; p < nr; p++)
		for (struct mount *s = pool[p]->mounts; s < pool[p]->mounts + pool[p]->nr; s++)
			if (s != m && s->e->root_dev == m->e->root_dev &&
			    (s == all_mntns[0]->root || s->how == MOUNT_NEW_FS ||
			     (s->e->ext_key && path_holds(s->e->root, m->e->root))))
				return true;
	return false;
}

/* Whether mount s is m or lies under it (it could not be mounted before m). */
static bool mount_under(const struct mount *s, const struct mount *m)
{
	for (; s; s = s->parent)
		if (s == m)
			return true;
	return false;
}

/*
 * A mount of mns's pool, not under m, whose root holds m's and that comes back first; or
 * NULL.
 */
static struct mount *bind_source_mount(struct mount_ns *mns, const struct mount *m)
{
	struct mount_ns *pool[2];
	size_t nr = mount_pool(mns, pool);

	for (size_t p = 0; p < nr; p++) {
		for (struct mount *s = pool[p]->mounts; s < pool[p]->mounts + pool[p]->nr; s++) {
			if (mount_under(s, m) || s->e->root_dev != m->e->root_dev ||
			    !path_holds(s->e->root, m->e->root))
				continue;
			if (s->how == MOUNT_ROOT || s->how == MOUNT_EXTERNAL ||
			    s->how == MOUNT_NEW_FS)
				return s;
		}
	}
	return NULL;
}

/* mountinfo escapes blanks and backslashes in paths as \ooo. */
static char *unescaped_dup(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	while (out && *s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0');
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	if (out)
		*o = '\0';
	return out;
}

/* The key of an external mount --external mnt[] found, as CRIU writes it. */
#define AUTO_EXT_KEY "CRIU:AUTOGENERATED"

/*
 * Main process: where in criu's own mounts the directory e shows is (a mount of e's
 * superblock whose root holds e's, and the rest of the path), allocated; NULL where none
 * is (no line). That is what an external mount --external mnt[] found binds at restore.
 */
static char *criu_mount_path(const MntEntry *e)
{
	char *line = NULL, *found = NULL;
	unsigned int maj, min;
	size_t size = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	while (f && !found && getline(&line, &size, f) > 0) {
		char root[4096], point[4096], *r, *p;

		if (sscanf(line, "%*u %*u %u:%u %4095s %4095s", &maj, &min, root, point) != 4 ||
		    (maj << 20 | min) != e->root_dev)
			continue;
		r = unescaped_dup(root);
		p = unescaped_dup(point);
		if (r && p && path_holds(r, e->root))
			found = path_join(p, e->root + (strcmp(r, "/") ? strlen(r) : 0));
		free(r);
		free(p);
	}
	free(line);
	if (f)
		fclose(f);
	return found;
}

/*
 * Dump, --external mnt[]: a mount of the root's namespace that criu's own mounts show too
 * is external, for restore to bind from there. Whether it is (ext_key NULL: no memory).
 */
static bool auto_external(const struct mount_ns *mns, struct mount *m)
{
	char *path;

	if (!opts.ext_mount_auto || mns->from_image || mns != all_mntns[0])
		return false;
	path = criu_mount_path(m->e);
	if (!path)
		return false;
	pr_info("mount %u at %s: external, criu's %s (--external mnt[])\n", m->e->mnt_id,
		m->e->mountpoint, path);
	free(path);
	m->how = MOUNT_EXTERNAL;
	m->e->ext_key = strdup(AUTO_EXT_KEY);
	return true;
}

/*
 * How the mount comes back (both sides), in two passes over the mounts (images list them
 * in any order): first the root, external mounts and one mount of each new filesystem's
 * superblock that shows its root, mounted anew; then every other mount, bound from one of
 * those whose root holds its own. One error line naming the mount when none fits.
 */
static int classify_mount(struct mount_ns *mns, struct mount *m, bool binds)
{
	MntEntry *e = m->e;

	if (!binds) {
		if (m == mns->root && mns == all_mntns[0])
			m->how = MOUNT_ROOT;
		else if (e->ext_key)
			m->how = MOUNT_EXTERNAL;
		else if (fstype_new_fs(e->fstype) && !strcmp(e->root, "/") && !sb_taken(mns, m))
			/* criu's mounts show it too: --external mnt[] takes it from there */
			m->how = auto_external(mns, m) ? MOUNT_EXTERNAL : MOUNT_NEW_FS;
		return e->ext_key || m->how != MOUNT_EXTERNAL ? 0 : -ENOMEM;
	}
	if (m->how != MOUNT_UNKNOWN)
		return 0;
	m->source = bind_source_mount(mns, m);
	if (m->source) {
		m->how = MOUNT_BIND;
		return 0;
	}
	if (auto_external(mns, m))
		return m->e->ext_key ? 0 : -ENOMEM;
	pr_err("mount %u at %s: %s (source %s, root %s) is neither external (--external mnt[]) "
	       "nor %s: not supported\n",
	       e->mnt_id, e->mountpoint, m->type ?: fstype_name(e->fstype), e->source, e->root,
	       fstype_new_fs(e->fstype) ? "bound from a mount of its filesystem's root"
					: "bound from the root mount's filesystem");
	return -ENOTSUP;
}

/* The namespace other than mns that has a mount of superblock dev, or NULL. */
static struct mount_ns *sb_elsewhere(const struct mount_ns *mns, uint32_t dev)
{
	for (size_t n = 0; n < nr_mntns; n++) {
		if (all_mntns[n] == mns)
			continue;
		for (size_t i = 0; i < all_mntns[n]->nr; i++)
			if (all_mntns[n]->mounts[i].e->root_dev == dev)
				return all_mntns[n];
	}
	return NULL;
}

/*
 * A nested namespace is made from the root's, which must show what it binds from: a
 * superblock two nested namespaces share, and the root's does not show, has no source.
 */
static int check_nested_sb(struct mount_ns *mns, const struct mount *m)
{
	struct mount_ns *other = sb_elsewhere(mns, m->e->root_dev);

	if (mns == all_mntns[0] || !other || other == all_mntns[0])
		return 0;
	pr_err("mount %u at %s (%s): its filesystem is in mount namespaces %u and %u but not "
	       "in the root's: not supported\n",
	       m->e->mnt_id, m->e->mountpoint, fstype_name(m->e->fstype), mns->id, other->id);
	return -ENOTSUP;
}

/* Whether a mount of mns's pool is in peer group id. */
static bool group_in_pool(struct mount_ns *mns, uint32_t id)
{
	struct mount_ns *pool[2];
	size_t nr = mount_pool(mns, pool);

	for (size_t p = 0; p < nr; p++)
		for (size_t j = 0; j < pool[p]->nr; j++)
			if (pool[p]->mounts[j].e->shared_id == id)
				return true;
	return false;
}

/*
 * The root mount (the one whose parent is outside the namespace), then each mount's class
 * and the peer group it receives from: it must be one of the pool's.
 */
static int classify_mounts(struct mount_ns *mns)
{
	int ret = 0;

	for (size_t i = 0; i < mns->nr; i++) {
		struct mount *m = &mns->mounts[i];

		m->fd = m->src_fd = -1;
		m->mns = mns;
		m->parent = find_mount(mns, m->e->parent_mnt_id);
		if (m->parent)
			continue;
		if (mns->root) {
			pr_err("mounts %u and %u both have their parent outside the namespace\n",
			       mns->root->e->mnt_id, m->e->mnt_id);
			return -EINVAL;
		}
		mns->root = m;
	}
	if (!mns->root) {
		pr_err("the namespace has no root mount (a mount whose parent is outside it)\n");
		return -EINVAL;
	}
	/*
	 * The root mount's master is outside: --root replaces it, with its propagation. An
	 * external mount may receive from outside too: from what --external gives.
	 */
	for (size_t i = 0; i < mns->nr && !ret; i++) {
		struct mount *m = &mns->mounts[i];
		bool master_in = !m->e->master_id || m == all_mntns[0]->root;

		ret = check_nested_sb(mns, m) ?: classify_mount(mns, m, false);
		m->ext_master = !master_in && !group_in_pool(mns, m->e->master_id);
	}
	for (size_t i = 0; i < mns->nr && !ret; i++)
		ret = classify_mount(mns, &mns->mounts[i], true);
	for (size_t i = 0; i < mns->nr && !ret; i++) {
		struct mount *m = &mns->mounts[i];

		if (m->ext_master && m->how != MOUNT_EXTERNAL) {
			pr_err("mount %u at %s receives from peer group %u, which is outside the "
			       "namespace, and is not external (--external mnt[]): not supported\n",
			       m->e->mnt_id, m->e->mountpoint, m->e->master_id);
			return -ENOTSUP;
		}
	}
	return ret;
}

static void free_mount_ns(struct mount_ns *mns)
{
	if (!mns)
		return;
	for (size_t i = 0; i < mns->nr; i++) {
		struct mount *m = &mns->mounts[i];

		if (m->fd >= 0)
			close(m->fd);
		if (m->src_fd >= 0)
			close(m->src_fd);
		free(m->path);
		free(m->ext_path);
		free(m->type);
		if (mns->from_image) {
			pb_free(NULL, m->e);
			continue;
		}
		free(m->e->root);
		free(m->e->mountpoint);
		free(m->e->source);
		free(m->e->options);
		free(m->e->ext_key);
		free(m->e);
	}
	free(mns->mounts);
	if (mns->ns_fd >= 0)
		close(mns->ns_fd);
	free(mns);
}

/* ns's mount namespace into all_mntns, as ns->priv. */
static struct mount_ns *add_mntns(struct ns_id *ns, bool from_image)
{
	struct mount_ns *mns;

	if (nr_mntns == MNTNS_SFD_NR) {
		pr_err("mount namespace %u: the tree has more than %d mount namespaces: not "
		       "supported\n",
		       ns->id, MNTNS_SFD_NR);
		return NULL;
	}
	mns = calloc(1, sizeof(*mns));
	if (!mns) {
		pr_err("out of memory for mount namespace %u\n", ns->id);
		return NULL;
	}
	mns->id = ns->id;
	mns->pid = ns->pid;
	mns->ns_fd = -1;
	mns->from_image = from_image;
	ns->priv = mns;
	all_mntns[nr_mntns++] = mns;
	return mns;
}

/* ------------------------------------------------------------------ dump ---- */

/* The tree's root, while a dump reads a mount namespace of its own; 0 otherwise. */
static pid_t dump_root_pid;

/* A task in the namespace of the mount of the file behind src: the root's by default. */
static pid_t file_mntns_pid(const char *src)
{
	struct statx stx;

	if (statx(AT_FDCWD, src, 0, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		return dump_root_pid;
	for (size_t i = 0; i < nr_mntns; i++)
		for (size_t j = 0; j < all_mntns[i]->nr; j++)
			if (all_mntns[i]->mounts[j].e->mnt_id == stx.stx_mnt_id)
				return all_mntns[i]->pid;
	return dump_root_pid;
}

pid_t mntns_dump_pid(unsigned int i)
{
	return dump_root_pid && i < nr_mntns ? all_mntns[i]->pid : 0;
}

const char *mntns_dump_path(const char *src, const char *path, char *buf, size_t size)
{
	if (!dump_root_pid)
		return path;
	snprintf(buf, size, "/proc/%d/root%s", file_mntns_pid(src), path);
	return buf;
}

int mntns_file_mnt_id(const char *src, int32_t *mnt_id)
{
	struct statx stx;

	*mnt_id = -1;
	if (!dump_root_pid)
		return 0;
	if (statx(AT_FDCWD, src, 0, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID)) {
		pr_perror("cannot read the mount id of %s", src);
		return -EIO;
	}
	*mnt_id = stx.stx_mnt_id;
	return 0;
}

bool mntns_has_mount(int32_t mnt_id)
{
	for (size_t i = 0; i < nr_mntns; i++)
		if (mnt_id >= 0 && find_mount(all_mntns[i], mnt_id))
			return true;
	return false;
}

static uint32_t fstype_nr(const char *name)
{
	for (size_t i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		if (!strcmp(fstypes[i].name, name))
			return fstypes[i].nr;
	return FSTYPE__UNSUPPORTED;
}

/* The per-mount options into e->flags. */
static void parse_mount_opts(char *opts, MntEntry *e)
{
	char *save;

	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < sizeof(mnt_opts) / sizeof(mnt_opts[0]); i++)
			if (!strcmp(o, mnt_opts[i].name))
				e->flags |= mnt_opts[i].flag;
}

/* The superblock's options: its flags into e->sb_flags, the others into e->options. */
static int parse_super_opts(char *opts, MntEntry *e)
{
	size_t len = 0;
	char *save;

	e->options = calloc(1, strlen(opts) + 1);
	if (!e->options)
		return -ENOMEM;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		bool flag = !strcmp(o, "rw");

		for (size_t i = 0; i < sizeof(sb_opts) / sizeof(sb_opts[0]) && !flag; i++)
			if (!strcmp(o, sb_opts[i].name)) {
				e->sb_flags |= sb_opts[i].flag;
				flag = true;
			}
		if (!flag)
			len += sprintf(e->options + len, "%s%s", len ? "," : "", o);
	}
	return 0;
}

/* Optional fields: shared:N, master:N, unbindable (propagate_from says nothing we keep). */
static void parse_propagation(const char *tag, MntEntry *e)
{
	if (sscanf(tag, "shared:%u", &e->shared_id) == 1)
		e->flags |= MS_SHARED;
	else if (sscanf(tag, "master:%u", &e->master_id) == 1)
		e->flags |= MS_SLAVE;
	else if (!strcmp(tag, "unbindable"))
		e->flags |= MS_UNBINDABLE;
}

/* One line of mountinfo: ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] - TYPE SOURCE SUPER */
static int parse_mount_line(char *line, struct mount *m)
{
	MntEntry *e = m->e;
	char *f[6], *save, *tag, *type, *source, *super, *rest;
	unsigned int maj, min;

	for (int i = 0; i < 6; i++)
		f[i] = strtok_r(i ? NULL : line, " \n", &save);
	if (!f[5] || sscanf(f[0], "%u", &e->mnt_id) != 1 ||
	    sscanf(f[1], "%u", &e->parent_mnt_id) != 1 || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return -EINVAL;
	while ((tag = strtok_r(NULL, " \n", &save)) && strcmp(tag, "-"))
		parse_propagation(tag, e);
	/* One blank after each: an empty source shows as two blanks in a row. */
	rest = tag ? save : NULL;
	type = strsep(&rest, " ");
	source = strsep(&rest, " ");
	super = strsep(&rest, " \n");
	if (!tag || !super)
		return -EINVAL;
	e->root_dev = maj << 20 | min;
	e->fstype = fstype_nr(type);
	m->type = strdup(type);
	e->root = unescaped_dup(f[3]);
	/* A bind of a directory or file removed since: CRIU keeps the root without the mark. */
	if (e->root && strlen(e->root) > strlen(DELETED_ROOT) &&
	    !strcmp(e->root + strlen(e->root) - strlen(DELETED_ROOT), DELETED_ROOT)) {
		e->root[strlen(e->root) - strlen(DELETED_ROOT)] = '\0';
		e->has_deleted = e->deleted = true;
	}
	e->mountpoint = unescaped_dup(f[4]);
	e->source = unescaped_dup(source);
	parse_mount_opts(f[5], e);
	if (!m->type || !e->root || !e->mountpoint || !e->source || parse_super_opts(super, e))
		return -ENOMEM;
	/* CRIU writes these whether set or not. */
	e->has_shared_id = e->has_master_id = e->has_sb_flags = true;
	return 0;
}

static struct mount *grow_mounts(struct mount_ns *mns)
{
	struct mount *grown = realloc(mns->mounts, (mns->nr + 1) * sizeof(*grown));

	if (!grown)
		return NULL;
	mns->mounts = grown;
	memset(&grown[mns->nr], 0, sizeof(*grown));
	grown[mns->nr].fd = grown[mns->nr].src_fd = -1;
	return &grown[mns->nr++];
}

/* The key --external mnt[MOUNTPOINT]:KEY gives a mount point at dump; NULL: none. */
static const char *dump_ext_key(const char *mountpoint)
{
	for (unsigned int i = 0; i < opts.nr_ext_mounts; i++)
		if (!strcmp(opts.ext_mounts[i].key, mountpoint))
			return opts.ext_mounts[i].val;
	return NULL;
}

static int read_mountinfo(pid_t pid, struct mount_ns *mns)
{
	char path[64], *line = NULL;
	size_t size = 0;
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while (!ret && getline(&line, &size, f) > 0) {
		struct mount *m = grow_mounts(mns);
		const char *key;

		if (m && !(m->e = malloc(sizeof(*m->e)))) {
			mns->nr--;
			m = NULL;
		}
		if (!m) {
			pr_err("out of memory reading %s\n", path);
			ret = -ENOMEM;
			break;
		}
		mnt_entry__init(m->e);
		/* Ours to free (free_mount_ns()), not protobuf-c's empty string. */
		m->e->root = m->e->mountpoint = m->e->source = m->e->options = NULL;
		ret = parse_mount_line(line, m);
		if (ret) {
			pr_err("%s: cannot parse line %zu\n", path, mns->nr);
			break;
		}
		/* Mount points name the root's mounts: a nested namespace binds from those. */
		key = mns == all_mntns[0] ? dump_ext_key(m->e->mountpoint) : NULL;
		if (key && !(m->e->ext_key = strdup(key)))
			ret = -ENOMEM;
	}
	free(line);
	fclose(f);
	return ret;
}

/* Main process, the tree seized: its mounts, and what restore could not give back. */
static int mnt_dump_check(struct ns_id *ns)
{
	struct mount_ns *mns = add_mntns(ns, false);
	int ret;

	if (!mns)
		return -ENOMEM;
	ret = read_mountinfo(ns->pid, mns);
	if (!ret)
		ret = classify_mounts(mns);
	if (ret)
		return ret;
	if (mns == all_mntns[0])
		dump_root_pid = ns->pid;
	pr_info("mount namespace %u: %zu mounts, the root mount %u (%s)\n", ns->id, mns->nr,
		mns->root->e->mnt_id, mns->root->e->root);
	return 0;
}

/* Waits for criu's child, tar; 0 when it exited 0. */
static int wait_tar(pid_t child, const char *what)
{
	int status;

	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("%s: waitpid for tar", what);
			return -ECHILD;
		}
	}
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	pr_err("%s: tar failed (wait status %#x; its messages are in the log)\n", what, status);
	return -EIO;
}

/*
 * In a child: stdin, stdout from in and out, stderr to the log, keep open for tar (-1:
 * none); then tar with args.
 */
static void __attribute__((noreturn)) exec_tar(int in, int out, int keep, char *const args[])
{
	int log_fd = log_get_fd();

	if ((in >= 0 && dup2(in, 0) < 0) || dup2(out, 1) < 0 ||
	    (log_fd >= 0 && dup2(log_fd, 2) < 0) || (keep >= 0 && fcntl(keep, F_SETFD, 0)))
		_exit(126);
	/*
	 * In the tree's user namespace criu's ids are unmapped (getuid() reads the overflow
	 * id), and execve() would drop every capability of a process that is not the
	 * namespace's root: tar runs as it.
	 */
	if (getuid() && (setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		_exit(125);
	execvp("tar", args);
	_exit(127);
}

/*
 * The mount id of the caller's namespace as its mountinfo shows it, read through proc
 * (criu's /proc: the tree's does not show criu's children): its mount point, superblock
 * (root_dev's encoding) and root, allocated. 0, or -1 when it is not listed.
 */
static int own_mount(int proc, uint64_t id, char **point, uint32_t *dev, char **root)
{
	int fd = openat(proc, "self/mountinfo", O_RDONLY | O_CLOEXEC), ret = -1;
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	char *line = NULL, r[4096], p[4096];
	unsigned int maj, min;
	size_t size = 0;
	uint64_t mnt_id;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (ret && getline(&line, &size, f) > 0) {
		if (sscanf(line, "%" SCNu64 " %*u %u:%u %4095s %4095s", &mnt_id, &maj, &min, r, p) !=
			    5 ||
		    mnt_id != id)
			continue;
		*dev = maj << 20 | min;
		*root = unescaped_dup(r);
		*point = unescaped_dup(p);
		ret = *root && *point ? 0 : -1;
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * The mount the path to m's mount point reaches, or stops in where a directory on the way
 * is missing (a mount over one above it hides it): O_PATH on it, *point, *dev and *root as
 * own_mount() gives them. The fd, or -1.
 */
static int reached_mount(const struct mount *m, int proc, char **point, uint32_t *dev,
			 char **root)
{
	char path[PATH_MAX], *slash;
	struct statx stx;
	int dir;

	snprintf(path, sizeof(path), "%s", m->e->mountpoint);
	while ((dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		slash = strrchr(path, '/');
		if ((errno != ENOENT && errno != ENOTDIR) || !slash || slash == path) {
			pr_perror("tmpfs %u: cannot reach %s in a copy", m->e->mnt_id, path);
			return -1;
		}
		*slash = '\0';
	}
	if (statx(dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) ||
	    own_mount(proc, stx.stx_mnt_id, point, dev, root)) {
		pr_err("tmpfs %u: the mount %s reaches in a copy is not listed\n", m->e->mnt_id,
		       path);
		close(dir);
		return -1;
	}
	return dir;
}

/*
 * In the child, in the tree's namespace: m, which other mounts cover (stacked at its mount
 * point or mounted over a directory above it), reached in a private copy of the namespace
 * (nothing done there reaches the tree's) where the mount reached at m's mount point is
 * unmounted until it is m's copy (its mount point, superblock and root: ids differ in a
 * copy). O_PATH on m's root, or -1 after one line.
 */
static int uncover(const struct mount *m, int proc)
{
	char *point = NULL, *root = NULL;
	uint32_t dev;
	int dir = -1;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		pr_perror("tmpfs %u: cannot make a private copy of its namespace", m->e->mnt_id);
		return -1;
	}
	for (size_t tries = 0; tries <= m->mns->nr; tries++) {
		bool found;

		dir = reached_mount(m, proc, &point, &dev, &root);
		if (dir < 0)
			break;
		found = !strcmp(point, m->e->mountpoint) && dev == m->e->root_dev &&
			!strcmp(root, m->e->root);
		/*
		 * What the path reaches instead is stacked at m's mount point or covers it from
		 * above (mounted over a directory on the way): neither holds m, which the path
		 * would then reach. Never the namespace's root.
		 */
		if (!found) {
			pr_debug("tmpfs %u: %s reaches the mount at %s (%u:%u, %s): unmounted in a "
				 "copy\n",
				 m->e->mnt_id, m->e->mountpoint, point, dev >> 20, dev & 0xfffff, root);
			if (!strcmp(point, "/") || umount2(point, MNT_DETACH))
				break;
		}
		free(point);
		free(root);
		point = root = NULL;
		if (found)
			return dir;
		close(dir);
		dir = -1;
	}
	pr_err("tmpfs %u at %s: another mount covers it in a way a copy of the namespace does not "
	       "undo: its files cannot be read\n",
	       m->e->mnt_id, m->e->mountpoint);
	if (dir >= 0)
		close(dir);
	free(point);
	free(root);
	return -1;
}

/*
 * In a child joined to the tree's mount namespace (open_tree() clones only mounts of the
 * caller's): m alone, without the mounts on it that hide some of its files
 * (OPEN_TREE_CLONE), sent on sk. Mounts stacked on it at its mount point are unmounted
 * in a private copy of the namespace first.
 */
static int send_mount_clone(pid_t pid, const struct mount *m, int sk)
{
	int ns = -1, dir = -1, tree = -1, ret = -1;
	int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char ns_path[64];
	struct statx stx;

	/*
	 * In the tree's user namespace first, where it has one: a copy of the mount namespace
	 * made from another user namespace locks its mounts together (none could be unmounted).
	 */
	if (userns_join_tree(pid))
		goto out;
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", pid);
	ns = open(ns_path, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || setns(ns, CLONE_NEWNS)) {
		pr_perror("tmpfs %u: cannot join the mount namespace of %d", m->e->mnt_id, pid);
		goto out;
	}
	/* A mount over a directory above it may hide its mount point whole. */
	dir = open(m->e->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0 && statx(dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx)) {
		pr_perror("tmpfs %u: cannot look at %s", m->e->mnt_id, m->e->mountpoint);
		goto out;
	}
	if (dir < 0 || stx.stx_mnt_id != m->e->mnt_id) {
		if (dir >= 0)
			close(dir);
		dir = uncover(m, proc);
		if (dir < 0)
			goto out;
	}
	tree = syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
	/* An unbindable mount cannot be cloned: its files are read through it, as they show. */
	if (tree < 0 && !(m->e->flags & MS_UNBINDABLE)) {
		pr_perror("tmpfs %u at %s: cannot clone it (open_tree)", m->e->mnt_id,
			  m->e->mountpoint);
		goto out;
	}
	ret = send_fds(sk, NULL, 0, tree >= 0 ? &tree : &dir, 1, NULL, 0);
out:
	if (tree >= 0)
		close(tree);
	if (dir >= 0)
		close(dir);
	if (ns >= 0)
		close(ns);
	if (proc >= 0)
		close(proc);
	return ret;
}

/* A detached clone of m (send_mount_clone()): its fd, or -errno after one error line. */
static int clone_mount(pid_t pid, const struct mount *m)
{
	int sk[2], status, tree = -1;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sk)) {
		pr_perror("tmpfs %u: socketpair", m->e->mnt_id);
		return -errno;
	}
	child = fork();
	if (child == 0)
		_exit(send_mount_clone(pid, m, sk[1]) ? 1 : 0);
	close(sk[1]);
	if (child < 0)
		pr_perror("tmpfs %u: cannot fork to clone it", m->e->mnt_id);
	/* The child said what failed; what it sent waits in the socket. */
	else if (waitpid(child, &status, 0) == child && !status)
		recv_fds(sk[0], &tree, 1, NULL, 0);
	close(sk[0]);
	return tree >= 0 ? tree : -EIO;
}

/* The files of a tmpfs, from a clone of it, with tar as CRIU runs it. */
static int dump_tmpfs(pid_t pid, const struct mount *m)
{
	char dir[32];
	char *const args[] = { "tar",	      "--create",	"--gzip",
			       "--no-unquote", "--no-wildcards", "--one-file-system",
			       "--check-links", "--preserve-permissions", "--sparse",
			       "--numeric-owner", "--directory",	dir,
			       ".",		NULL };
	struct cr_img *img;
	int tree, ret;
	pid_t child;

	tree = clone_mount(pid, m);
	if (tree < 0)
		return tree;
	snprintf(dir, sizeof(dir), "/proc/self/fd/%d", tree);
	img = open_image(CR_IMG_TMPFS_DEV, O_WRONLY, m->e->root_dev);
	if (!img) {
		close(tree);
		return -EIO;
	}
	child = fork();
	/* tar stores the files' owners as the tree sees them, as CRIU's archives have them. */
	if (child == 0 && userns_join_tree(pid))
		_exit(124);
	if (child == 0)
		exec_tar(-1, img->fd, tree, args);
	close(tree);
	ret = child < 0 ? -errno : wait_tar(child, img->name);
	if (child < 0)
		pr_perror("tmpfs at %s: cannot fork tar", m->e->mountpoint);
	else if (!ret)
		pr_info("tmpfs %u at %s: its files into %s\n", m->e->mnt_id, m->e->mountpoint,
			img->name);
	close_image(img);
	return ret;
}

/* The handlers of a binfmt_misc mount (mnt-binfmt.c), read through a clone of it. */
static int dump_binfmt(pid_t pid, const struct mount *m)
{
	int tree = clone_mount(pid, m);
	int ret;

	if (tree < 0)
		return tree;
	ret = binfmt_dump(tree, m->e->mnt_id);
	close(tree);
	return ret;
}

static int mnt_dump(const struct ns_id *ns)
{
	struct mount_ns *mns = ns->priv;
	struct cr_img *img;
	int ret = 0;

	img = open_image(CR_IMG_MNTS, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	for (size_t i = 0; i < mns->nr && !ret; i++) {
		struct mount *m = &mns->mounts[i];

		pr_debug("mount %u (in %u) %s at %s: %s, flags %#x, sb flags %#x, \"%s\"%s%s\n",
			 m->e->mnt_id, m->e->parent_mnt_id, m->e->root, m->e->mountpoint,
			 fstype_name(m->e->fstype), m->e->flags, m->e->sb_flags, m->e->options,
			 m->e->ext_key ? ", external " : "", m->e->ext_key ?: "");
		ret = pb_write_one(img, m->e);
		if (!ret && m->how == MOUNT_NEW_FS && m->e->fstype == FSTYPE__TMPFS)
			ret = dump_tmpfs(ns->pid, m);
		if (!ret && m->how == MOUNT_NEW_FS && m->e->fstype == FSTYPE__BINFMT_MISC)
			ret = dump_binfmt(ns->pid, m);
	}
	close_image(img);
	return ret;
}

/* --------------------------------------------------------------- restore ---- */

/* Set once a mount namespace's images are collected; cleared by mnt_fini(). */
static bool restoring_mntns;

bool mntns_restored(void)
{
	return restoring_mntns;
}

/* The path --external mnt[KEY]:PATH gives a key at restore; NULL: none. */
static const char *restore_ext_path(const char *key)
{
	for (unsigned int i = 0; i < opts.nr_ext_mounts; i++)
		if (!strcmp(opts.ext_mounts[i].key, key))
			return opts.ext_mounts[i].val;
	return NULL;
}

static int collect_entry(void *msg, void *arg)
{
	struct mount_ns *mns = arg;
	struct mount *m = grow_mounts(mns);

	if (!m) {
		pr_err("out of memory reading the mounts\n");
		return -ENOMEM;
	}
	m->e = msg;
	return 1;
}

/*
 * Main process: an external mount that receives from outside is a clone of criu's mount at
 * its path (a peer of it, OPEN_TREE_CLONE), which the root task moves into place and makes a
 * slave: the root task's own copy of criu's mounts is private, it receives from nothing.
 */
static int clone_ext_master(struct mount *m)
{
	m->src_fd = syscall(SYS_open_tree, AT_FDCWD, m->ext_path, OPEN_TREE_CLONE | O_CLOEXEC);
	if (m->src_fd < 0) {
		pr_perror("mount %u at %s: cannot clone %s (open_tree), which it receives from",
			  m->e->mnt_id, m->e->mountpoint, m->ext_path);
		return -errno;
	}
	return 0;
}

/* The peer group of criu's mount mnt_id (shared:N in its mountinfo); 0: none, or no line. */
static uint32_t criu_peer_group(uint64_t mnt_id)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *tag;
	uint32_t group = 0;
	size_t size = 0;
	uint64_t id;

	while (f && getline(&line, &size, f) > 0) {
		if (sscanf(line, "%" SCNu64, &id) != 1 || id != mnt_id)
			continue;
		/* The optional fields come after the six fixed ones, up to "-". */
		tag = strstr(line, " shared:");
		if (tag && tag < strstr(line, " - "))
			sscanf(tag, " shared:%u", &group);
		break;
	}
	free(line);
	if (f)
		fclose(f);
	return group;
}

/*
 * Main process: an external mount that was a peer of criu's mount at its path (in the
 * peer group criu's mount still is in: --external mnt[]:s found it so at dump, or it was
 * given) joins that group again (restore_propagation()), from a clone of criu's mount (a
 * peer too, OPEN_TREE_CLONE keeps the group). Bound and private until then: nothing
 * mounted under it while the tree is built reaches criu's. Where criu's mount is in
 * another group now (another boot), the mount is shared in a group of its own.
 */
static int find_ext_peer(struct mount *m)
{
	struct statx stx;
	uint32_t group;

	if (!m->e->shared_id ||
	    statx(AT_FDCWD, m->ext_path, 0, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		return 0; /* the bind says what is wrong with the path */
	group = criu_peer_group(stx.stx_mnt_id);
	if (group != m->e->shared_id) {
		pr_info("mount %u at %s: criu's mount at %s is not in its peer group %u: shared "
			"in a group of its own\n",
			m->e->mnt_id, m->e->mountpoint, m->ext_path, m->e->shared_id);
		return 0;
	}
	m->src_fd = syscall(SYS_open_tree, AT_FDCWD, m->ext_path, OPEN_TREE_CLONE | O_CLOEXEC);
	if (m->src_fd < 0) {
		pr_perror("mount %u at %s: cannot clone %s (open_tree), whose peer group it joins",
			  m->e->mnt_id, m->e->mountpoint, m->ext_path);
		return -errno;
	}
	/* Its master, where it has one, is criu's mount's too: the join gives it. */
	m->ext_peer = true;
	m->ext_master = false;
	pr_info("mount %u at %s: a peer of criu's mount at %s (group %u)\n", m->e->mnt_id,
		m->e->mountpoint, m->ext_path, group);
	return 0;
}

/*
 * A bind of a pty's slave node (/dev/pts/N at /dev/console, as a container runtime gives
 * its console): the node exists only while the pty does, and the tree's ptys are made by
 * its tasks as they open their fds, after the mounts are built. Such a mount is bound
 * last, by criu, once every task has its fds and before any runs (mntns_bind_ptys()).
 */
static bool is_pty_bind(const struct mount *m)
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
static int check_pty_bind(const struct mount *m)
{
	const char *why = NULL;

	if (m->e->shared_id || m->e->master_id || (m->e->flags & MS_UNBINDABLE))
		why = "it is shared, a slave or unbindable";
	else if (m->parent && m->parent->e->shared_id)
		why = "its parent mount is shared";
	for (size_t n = 0; n < nr_mntns && !why; n++)
		for (size_t i = 0; i < all_mntns[n]->nr && !why; i++)
			if (all_mntns[n]->mounts[i].parent == m || all_mntns[n]->mounts[i].source == m)
				why = "a mount is on it or bound from it";
	if (!why)
		return 0;
	pr_err("mount %u at %s: a bind of pty %s, made after the ptys: %s: not supported\n",
	       m->e->mnt_id, m->e->mountpoint, m->e->root + 1, why);
	return -ENOTSUP;
}

/* What restore needs beyond the entries: --root, each external's path, tmpfs images. */
static int check_restorable(const struct ns_id *ns, struct mount_ns *mns)
{
	if (!opts.root) {
		pr_err("mountpoints-%u.img: the tree has a mount namespace of its own: its root "
		       "mount needs --root DIR\n",
		       ns->id);
		return -EINVAL;
	}
	for (size_t i = 0; i < mns->nr; i++) {
		struct mount *m = &mns->mounts[i];

		m->path = path_join(opts.root, m->e->mountpoint);
		if (!m->path)
			return -ENOMEM;
		if (m->how == MOUNT_EXTERNAL) {
			const char *path = restore_ext_path(m->e->ext_key);

			if (!strcmp(m->e->ext_key, AUTO_EXT_KEY)) {
				m->ext_path = criu_mount_path(m->e);
				path = m->ext_path;
			} else if (path && asprintf(&m->ext_path, "%s%s", *path == '/' ? "" : "/",
						    path) < 0) {
				/* A relative path is criu's root's, as CRIU takes it. */
				return -ENOMEM;
			}
			if (!path && !strcmp(m->e->ext_key, AUTO_EXT_KEY)) {
				pr_err("mount %u at %s is external (--external mnt[] at dump): "
				       "criu's mounts show no directory of its filesystem (%u:%u, %s) "
				       "to bind\n",
				       m->e->mnt_id, m->e->mountpoint, m->e->root_dev >> 20,
				       m->e->root_dev & 0xfffff, m->e->root);
				return -ENOENT;
			}
			if (!path) {
				pr_err("mount %u at %s is external (key %s): restore needs "
				       "--external mnt[%s]:PATH\n",
				       m->e->mnt_id, m->e->mountpoint, m->e->ext_key, m->e->ext_key);
				return -ENOENT;
			}
		}
		if (m->how == MOUNT_EXTERNAL && find_ext_peer(m))
			return -EIO;
		if (m->ext_master && clone_ext_master(m))
			return -EIO;
		if (is_pty_bind(m) && check_pty_bind(m))
			return -ENOTSUP;
		if (m->how == MOUNT_NEW_FS && m->e->fstype == FSTYPE__TMPFS &&
		    !img_exists(CR_IMG_TMPFS_DEV, m->e->root_dev)) {
			pr_err("tmpfs %u at %s: tmpfs-dev-%u.tar.gz.img is missing\n", m->e->mnt_id,
			       m->e->mountpoint, m->e->root_dev);
			return -ENOENT;
		}
	}
	return 0;
}

/* Whether a is m or one of the mounts m is mounted under. */
static bool is_ancestor(const struct mount *a, const struct mount *m)
{
	for (; m; m = m->parent)
		if (m == a)
			return true;
	return false;
}

/*
 * Whether c hides o's mount point: the path to it goes through c's parent (an ancestor of
 * o's, or o's own) and reaches c's mount point there before it leaves that mount for the
 * next of o's ancestors (a, mounted on it further down the path).
 */
static bool hides(const struct mount *c, const struct mount *o)
{
	const struct mount *a = o;

	if (is_ancestor(c, o))
		return false;
	while (a && a->parent != c->parent)
		a = a->parent;
	return a && strcmp(c->e->mountpoint, a->e->mountpoint) &&
	       path_holds(c->e->mountpoint, a->e->mountpoint);
}

/*
 * Whether m, mounted now, would hide the mount point of a mount of its namespace not
 * mounted yet (mounted since on a directory above it): the path to that one's mount point
 * would then reach into m.
 */
static bool covers_pending(const struct mount_ns *mns, const struct mount *m)
{
	for (size_t i = 0; i < mns->nr; i++) {
		const struct mount *o = &mns->mounts[i];

		if (!o->done && o != m && hides(m, o))
			return true;
	}
	return false;
}

/*
 * The mounts in an order restore can follow: each after its parent and its source, and
 * before the mounts that cover its mount point (mounted on a directory above it since).
 */
static int order_mounts(struct mount_ns *mns)
{
	struct mount *sorted = malloc(mns->nr * sizeof(*sorted));
	size_t n = 0;

	if (!sorted)
		return -ENOMEM;
	while (n < mns->nr) {
		size_t before = n;

		for (size_t i = 0; i < mns->nr; i++) {
			struct mount *m = &mns->mounts[i];

			/* A source in the root's namespace is mounted before this one is made. */
			if (m->done || (m->parent && !m->parent->done) ||
			    (m->source && m->source->mns == mns && !m->source->done) ||
			    covers_pending(mns, m))
				continue;
			m->done = true;
			sorted[n++] = *m;
		}
		if (n == before) {
			pr_err("the mounts cannot be ordered: parents, sources and mounts covering "
			       "others form a loop\n");
			free(sorted);
			return -EINVAL;
		}
	}
	/* Parents and sources point into the old array: into the sorted one. */
	for (size_t i = 0; i < n; i++) {
		struct mount *m = &sorted[i];

		for (size_t j = 0; j < n; j++) {
			if (m->parent && sorted[j].e == m->parent->e)
				m->parent = &sorted[j];
			if (m->source && sorted[j].e == m->source->e)
				m->source = &sorted[j];
		}
		m->done = false;
	}
	for (size_t j = 0; j < n; j++)
		if (sorted[j].e == mns->root->e)
			mns->root = &sorted[j];
	free(mns->mounts);
	mns->mounts = sorted;
	return 0;
}

static int mnt_collect(struct ns_id *ns)
{
	struct mount_ns *mns = add_mntns(ns, true);
	struct cr_img *img;
	int ret;

	if (!mns)
		return -ENOMEM;
	if (!img_exists(CR_IMG_MNTS, ns->id)) {
		pr_err("the tree has mount namespace %u, but mountpoints-%u.img is "
		       "missing\n",
		       ns->id, ns->id);
		return -ENOENT;
	}
	img = open_image(CR_IMG_MNTS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	for (;;) {
		void *e;

		ret = pb_read_one(img, &e);
		if (ret <= 0)
			break;
		ret = collect_entry(e, mns);
		if (ret < 0) {
			pb_free(img, e);
			break;
		}
	}
	close_image(img);
	if (!ret)
		ret = classify_mounts(mns);
	if (!ret)
		ret = check_restorable(ns, mns);
	if (!ret)
		ret = order_mounts(mns);
	if (!ret)
		pr_info("mount namespace %u: %zu mounts, the root mount from %s\n", ns->id, mns->nr,
			opts.root);
	if (!ret && opts.mntns_compat_mode && mns == all_mntns[0])
		pr_info("--mntns-compat-mode: this criu restores mounts one way, with it or "
			"without\n");
	restoring_mntns = !ret;
	return ret;
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

/*
 * The image's files into the new tmpfs, with tar, a child of the root task (in its pid
 * namespace: it is reaped before the root forks the tree). Its SIGCHLD, blocked here, is
 * taken back so that the restored task does not find it pending.
 */
static int restore_tmpfs(const struct mount *m)
{
	char dir[32];
	char *args[] = { "tar", "--extract", "--gzip", "--no-unquote", "--no-wildcards",
			 "--directory", dir, NULL };
	struct timespec no_wait = { 0, 0 };
	sigset_t pending, chld;
	struct cr_img *img;
	pid_t child;
	int null, ret, mnt;

	/* Through an fd: tar may run with other ids (exec_tar()), which --root's path may bar. */
	mnt = open(m->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (mnt < 0) {
		pr_perror("tmpfs at %s: cannot open %s", m->e->mountpoint, m->path);
		return -errno;
	}
	snprintf(dir, sizeof(dir), "/proc/self/fd/%d", mnt);
	img = open_image(CR_IMG_TMPFS_DEV, O_RDONLY, m->e->root_dev);
	if (!img) {
		close(mnt);
		return -EIO;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigpending(&pending);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	child = null < 0 ? -1 : fork();
	if (child == 0)
		exec_tar(img->fd, null, mnt, args);
	close(mnt);
	ret = child < 0 ? -errno : wait_tar(child, img->name);
	if (child < 0)
		pr_perror("tmpfs at %s: cannot start tar", m->e->mountpoint);
	if (child > 0 && !sigismember(&pending, SIGCHLD))
		sigtimedwait(&chld, NULL, &no_wait);
	if (null >= 0)
		close(null);
	close_image(img);
	return ret;
}

static int mount_with_opts(const struct mount *m, const char *opts)
{
	const char *type = fstype_name(m->e->fstype);

	/* Read-only superblocks are made so once their files are in. */
	if (mount(m->e->source, m->path, type, m->e->sb_flags & ~MS_RDONLY, opts)) {
		pr_perror("mount %u: cannot mount %s (%s, \"%s\") at %s", m->e->mnt_id, type,
			  m->e->source, opts, m->path);
		return -errno;
	}
	if (m->e->fstype == FSTYPE__TMPFS && restore_tmpfs(m))
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

static int mount_new_fs(const struct mount *m)
{
	char what[32], *opts;
	int ret;

	snprintf(what, sizeof(what), "mount %u", m->e->mnt_id);
	ret = userns_mount_opts(m->e->options, &opts, what);
	if (!ret)
		ret = mount_with_opts(m, opts);
	free(opts);
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
		return path_join(m->source->path, *rest ? rest : "/");
	*clone = syscall(SYS_open_tree, m->source->fd, "",
			 OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
	if (*clone < 0) {
		pr_perror("mount %u: cannot clone its source mount %u", m->e->mnt_id,
			  m->source->e->mnt_id);
		return NULL;
	}
	return asprintf(&out, "/proc/self/fd/%d%s", *clone, strcmp(rest, "/") ? rest : "") < 0 ?
		       NULL :
		       out;
}

/*
 * Through the mount's fd (mount_setattr(), Linux 5.12): it runs after pivot_root, when
 * /proc may not be mounted.
 */
static int set_propagation(const struct mount *m, unsigned long type, const char *what)
{
	struct mount_attr attr = { .propagation = type };

	if (syscall(SYS_mount_setattr, m->fd, "", AT_EMPTY_PATH, &attr, sizeof(attr))) {
		pr_perror("mount %u at %s: cannot make it %s", m->e->mnt_id, m->path, what);
		return -errno;
	}
	return 0;
}

/* The clone of criu's mount (clone_ext_master()) at m's place. */
static int move_ext_master(const struct mount *m)
{
	struct stat st;
	int ret;

	if (fstat(m->src_fd, &st)) {
		pr_perror("mount %u: cannot stat its clone of %s", m->e->mnt_id, m->ext_path);
		return -errno;
	}
	ret = make_mountpoint(m->path, S_ISDIR(st.st_mode));
	if (!ret && syscall(SYS_move_mount, m->src_fd, "", AT_FDCWD, m->path,
			    MOVE_MOUNT_F_EMPTY_PATH)) {
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
	if (m->ext_master && set_propagation(m, MS_SLAVE, "a slave"))
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
		pr_perror("mount %u at %s: cannot set its flags %#lx", m->e->mnt_id, m->path, flags);
		return -errno;
	}
	return 0;
}


/* to joins from's peer group, and receives from what from receives from. */
static int join_group(const struct mount *from, const struct mount *to)
{
	if (syscall(SYS_move_mount, from->fd, "", to->fd, "",
		    MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) {
		pr_perror("mount %u at %s: cannot join the peer group of mount %u (%s)",
			  to->e->mnt_id, to->path, from->e->mnt_id, from->path);
		return -errno;
	}
	return 0;
}

/* m joins the peer group of criu's mount it is bound from (find_ext_peer()). */
static int join_criu_group(const struct mount *m)
{
	if (syscall(SYS_move_mount, m->src_fd, "", m->fd, "",
		    MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) {
		pr_perror("mount %u at %s: cannot join the peer group of criu's mount at %s",
			  m->e->mnt_id, m->path, m->ext_path);
		return -errno;
	}
	return 0;
}

/*
 * A mount of peer group id, in any of the namespaces (groups span them), already given its
 * propagation, whose root holds m's; or NULL.
 */
static struct mount *peer_group_mount(uint32_t id, const struct mount *m)
{
	for (size_t n = 0; n < nr_mntns && id; n++) {
		for (size_t i = 0; i < all_mntns[n]->nr; i++) {
			struct mount *p = &all_mntns[n]->mounts[i];

			if (p->done && p->e->shared_id == id &&
			    p->e->root_dev == m->e->root_dev && path_holds(p->e->root, m->e->root))
				return p;
		}
	}
	return NULL;
}

/* The root task into mount namespace mns (mount_setattr() acts on its own mounts only). */
static int enter_mntns(const struct mount_ns *mns)
{
	if (setns(mns->ns_fd, CLONE_NEWNS)) {
		pr_perror("cannot enter mount namespace %u", mns->id);
		return -errno;
	}
	return 0;
}

/*
 * One mount's propagation, once the group it receives from is set up: a peer of a member
 * of its group already done (MOVE_MOUNT_SET_GROUP copies the master too); or a slave of
 * its master's group, then shared in a group of its own. 1: not yet (its master's group
 * is not set up); 0 or -errno.
 */
static int propagate_one(struct mount *m)
{
	/* The root mount's master is outside the namespace (classify_mounts()). */
	uint32_t master_id = m == all_mntns[0]->root ? 0 : m->e->master_id;
	struct mount *peer = peer_group_mount(m->e->shared_id, m);
	struct mount *master = peer_group_mount(master_id, m);
	int ret = 0;

	if (peer)
		return join_group(peer, m);
	/* A slave of its outside master since it was mounted (move_ext_master()). */
	if (m->ext_master)
		master_id = 0;
	else if (master_id && !master)
		return 1;
	if (m->mns != all_mntns[0] && (ret = enter_mntns(m->mns)))
		return ret;
	if (master) {
		ret = join_group(master, m);
		ret = ret ?: set_propagation(m, MS_SLAVE, "a slave");
	}
	if (!ret && m->e->shared_id)
		ret = set_propagation(m, MS_SHARED, "shared");
	if (m->mns != all_mntns[0])
		ret = enter_mntns(all_mntns[0]) ?: ret;
	return ret;
}

/* The n-th mount of all the namespaces, the root's first; NULL past the last. */
static struct mount *nth_mount(size_t n)
{
	for (size_t i = 0; i < nr_mntns; n -= all_mntns[i++]->nr)
		if (n < all_mntns[i]->nr)
			return &all_mntns[i]->mounts[n];
	return NULL;
}

/*
 * Peer groups and slaves of all the namespaces, on trees all private until now (nothing
 * propagated while they were built); then unbindable mounts, which nothing could have
 * bound from after. The root task is in the root's namespace before and after.
 */
static int restore_propagation(void)
{
	size_t left = 0, before;
	struct mount *m;
	int ret = 0;

	for (size_t i = 0; (m = nth_mount(i)); i++) {
		m->done = !m->e->shared_id && (m == all_mntns[0]->root || !m->e->master_id);
		left += !m->done;
	}
	/* Peers of criu's mounts first: the tree's other mounts of their groups join them. */
	for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
		if (!m->ext_peer)
			continue;
		ret = join_criu_group(m);
		m->done = true;
		left--;
	}
	do {
		before = left;
		for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
			if (m->done)
				continue;
			ret = propagate_one(m);
			if (ret == 0) {
				m->done = true;
				left--;
			}
			ret = ret < 0 ? ret : 0;
		}
	} while (!ret && left && left < before);
	if (!ret && left) {
		pr_err("%zu mounts cannot get their propagation: no mount of their peer group or "
		       "master's group has a root that holds theirs\n",
		       left);
		return -EINVAL;
	}
	for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
		if (!(m->e->flags & MS_UNBINDABLE))
			continue;
		ret = m->mns != all_mntns[0] ? enter_mntns(m->mns) : 0;
		ret = ret ?: set_propagation(m, MS_UNBINDABLE, "unbindable");
		if (m->mns != all_mntns[0])
			ret = enter_mntns(all_mntns[0]) ?: ret;
	}
	return ret;
}

/* The root task's root becomes the restored root mount; what was criu's is let go. */
static int enter_root(const struct mount_ns *mns)
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
	char *from = path_join(m->source->e->mountpoint, m->e->root);
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

			if (!is_pty_bind(m))
				continue;
			if (!item) {
				pr_err("mount %u at %s: no task of mount namespace %u to bind it in\n",
				       m->e->mnt_id, m->e->mountpoint, all_mntns[n]->id);
				return -ENOENT;
			}
			ret = bind_pty(m, pidns_host_pid(item->pid));
		}
	}
	return ret;
}

/* The mounts of mns under --root, with their flags; binds of ptys come later. */
static int build_mounts(struct mount_ns *mns)
{
	int ret = 0;

	for (size_t i = 0; i < mns->nr && !ret; i++)
		if (!is_pty_bind(&mns->mounts[i]))
			ret = mount_one(&mns->mounts[i]);
	for (size_t i = 0; i < mns->nr && !ret; i++)
		if (!is_pty_bind(&mns->mounts[i]))
			ret = set_mount_flags(&mns->mounts[i]);
	return ret;
}

static int open_own_mntns(struct mount_ns *mns)
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
static int build_nested(struct mount_ns *mns)
{
	int ret;

	if (unshare(CLONE_NEWNS)) {
		pr_perror("mount namespace %u: cannot make it", mns->id);
		return -errno;
	}
	ret = open_own_mntns(mns);
	ret = ret ?: open_root_sources(mns);
	ret = ret ?: build_mounts(mns);
	ret = ret ?: enter_root(mns);
	/* Back in any case: the root's namespace is the one the root task goes on in. */
	ret = enter_mntns(all_mntns[0]) ?: ret;
	if (!ret)
		pr_info("nested mount namespace %u: %zu mounts restored\n", mns->id, mns->nr);
	return ret;
}

/*
 * The root task, before its pivot_root: a proc of the tree's pid namespace, detached (no
 * namespace shows it), at PROC_SFD for every task (proc_open()): a namespace of the tree
 * may have no proc at /proc, and the tasks read theirs (fds, maps) until the restorer has
 * run. Made in the copy of criu's namespace, whose proc lets one be mounted in a user
 * namespace (the kernel wants a proc fully visible in the caller's).
 */
static int install_proc(void)
{
	int fs = fsopen("proc", FSOPEN_CLOEXEC), mnt = -1, err;

	if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) ||
	    (mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
							MOUNT_ATTR_NOEXEC)) < 0) {
		err = errno;
		pr_perror("cannot make a proc for the tasks");
		if (fs >= 0)
			close(fs);
		return -err;
	}
	close(fs);
	return install_service_fd(PROC_SFD, mnt) < 0 ? -EIO : 0;
}

/* Each namespace at its service fd, which tasks inherit (mntns_enter()). */
static int install_mntns_fds(void)
{
	for (size_t i = 0; i < nr_mntns; i++) {
		int fd = install_service_fd(MNTNS_SFD + i, all_mntns[i]->ns_fd);

		all_mntns[i]->ns_fd = -1;
		if (fd < 0)
			return fd;
	}
	return 0;
}

/* The mount namespace task is in, as criu's copy of its image's ids says. */
static uint32_t cur_mntns_id;

/*
 * In the root task, born into a copy of criu's mount namespace: nothing it does may reach
 * criu's (all private first), then the mounts and their flags, the nested namespaces, the
 * root, the propagation of all of them.
 */
static int mnt_restore(const struct ns_id *ns)
{
	struct mount_ns *mns = ns->priv;
	int ret = 0;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		pr_perror("mount namespace %u: cannot make criu's mounts private in it", ns->id);
		return -errno;
	}
	ret = open_own_mntns(mns);
	ret = ret ?: install_proc();
	ret = ret ?: build_mounts(mns);
	for (size_t i = 1; i < nr_mntns && !ret; i++)
		ret = build_nested(all_mntns[i]);
	/* pivot_root() refuses a shared new root: propagation comes after. */
	ret = ret ?: enter_root(mns);
	ret = ret ?: restore_propagation();
	for (size_t i = 0; i < nr_mntns; i++) {
		for (size_t j = 0; j < all_mntns[i]->nr; j++) {
			struct mount *m = &all_mntns[i]->mounts[j];

			if (m->fd >= 0)
				close(m->fd);
			if (m->src_fd >= 0)
				close(m->src_fd);
			m->fd = m->src_fd = -1;
		}
	}
	ret = ret ?: install_mntns_fds();
	if (!ret) {
		cur_mntns_id = ns->id;
		pr_info("mount namespace %u: %zu mounts restored under %s, %zu nested\n", ns->id,
			mns->nr, opts.root, nr_mntns - 1);
	}
	return ret;
}

static int mntns_index(uint32_t id)
{
	for (size_t i = 0; i < nr_mntns; i++)
		if (all_mntns[i]->id == id)
			return i;
	return -1;
}

int mntns_enter(uint32_t id)
{
	int i = mntns_index(id);

	if (!cur_mntns_id || !id || id == cur_mntns_id)
		return 0;
	if (i < 0) {
		pr_err("mount namespace %u is not one of the tree's\n", id);
		return -ENOENT;
	}
	if (setns(get_service_fd(MNTNS_SFD + i), CLONE_NEWNS)) {
		pr_perror("cannot enter mount namespace %u", id);
		return -errno;
	}
	cur_mntns_id = id;
	return 0;
}

/* The namespace of the image's mount mnt_id; 0 where no image names it. */
static uint32_t mount_mntns(int32_t mnt_id)
{
	for (size_t i = 0; i < nr_mntns; i++)
		for (size_t j = 0; j < all_mntns[i]->nr; j++)
			if ((int32_t)all_mntns[i]->mounts[j].e->mnt_id == mnt_id)
				return all_mntns[i]->id;
	return 0;
}

const char *mntns_restore_path(int32_t mnt_id, const char *path, char *buf, size_t size)
{
	uint32_t id = mount_mntns(mnt_id);
	struct pstree_item *item;

	if (!restoring_mntns)
		return path;
	for (item = root_item; item; item = pstree_next(item))
		if (item->ids.mnt_ns_id == (id ? id : all_mntns[0]->id) && pidns_host_pid(item->pid))
			break;
	snprintf(buf, size, "/proc/%d/root%s", item ? pidns_host_pid(item->pid) : 0, path);
	return buf;
}

/* The image's mount mnt_id of the namespace the task is in; NULL where it is not one. */
static const struct mount *current_mount(int32_t mnt_id)
{
	for (size_t i = 0; i < nr_mntns; i++)
		for (size_t j = 0; all_mntns[i]->id == cur_mntns_id && j < all_mntns[i]->nr; j++)
			if ((int32_t)all_mntns[i]->mounts[j].e->mnt_id == mnt_id)
				return &all_mntns[i]->mounts[j];
	return NULL;
}

/* The mount id of the mount path reaches; 0 where it reaches nothing. */
static uint64_t reached_mount_id(int dirfd, const char *path)
{
	struct statx stx;

	return statx(dirfd, path, 0, STATX_MNT_ID, &stx) ? 0 : stx.stx_mnt_id;
}

int mntns_uncovered_dir(int32_t mnt_id, const char *dir, const char *name)
{
	const struct mount *m = current_mount(mnt_id);
	char parent[PATH_MAX];
	const char *rest;
	int clone, fd;

	if (!m || !path_holds(m->e->mountpoint, dir))
		return -ENOENT;
	snprintf(parent, sizeof(parent), "%s/%.*s", dir,
		 strrchr(name, '/') ? (int)(strrchr(name, '/') - name) : 0, name);
	/* The top of m's mount point is m, unless another is stacked there: left as it is. */
	if (reached_mount_id(AT_FDCWD, parent) == reached_mount_id(AT_FDCWD, m->e->mountpoint))
		return -ENOENT;
	clone = syscall(SYS_open_tree, AT_FDCWD, m->e->mountpoint,
			OPEN_TREE_CLONE | O_CLOEXEC);
	if (clone < 0) {
		pr_perror("mount %u at %s: cannot clone it", m->e->mnt_id, m->e->mountpoint);
		return -errno;
	}
	rest = dir + (strcmp(m->e->mountpoint, "/") ? strlen(m->e->mountpoint) : 0);
	fd = openat(clone, *rest ? rest + 1 : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		pr_perror("mount %u: cannot open %s in a copy of it", m->e->mnt_id, dir);
	}
	close(clone);
	return fd;
}

int64_t mntns_enter_mount(int32_t mnt_id)
{
	uint32_t own = cur_mntns_id;
	int ret = mntns_enter(mount_mntns(mnt_id));

	return ret ? ret : (int64_t)own;
}

static void mnt_fini(struct ns_id *ns)
{
	for (size_t i = 0; i < nr_mntns; i++)
		if (all_mntns[i] == ns->priv)
			all_mntns[i] = NULL;
	while (nr_mntns && !all_mntns[nr_mntns - 1])
		nr_mntns--;
	free_mount_ns(ns->priv);
	ns->priv = NULL;
	dump_root_pid = 0;
	restoring_mntns = false;
	cur_mntns_id = 0;
}

const struct ns_kind mnt_ns_kind = {
	.name = "mnt",
	.clone_flag = CLONE_NEWNS,
	.dump_check = mnt_dump_check,
	.dump = mnt_dump,
	.dump_from_criu = true,
	.nested = true,
	.collect = mnt_collect,
	.restore = mnt_restore,
	.fini = mnt_fini,
};
