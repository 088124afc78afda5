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
 *
 * Building the mounts, the nested namespaces and the pivot_root is in mnt-build.c; the
 * files of a tmpfs (and the clones of mounts that dump reads through) in mnt-tmpfs.c; the
 * peer groups and slaves set up at the end in mnt-propagation.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "mnt-binfmt.h"
#include "namespaces.h"
#include "pstree.h"
#include "ns-mnt.h"
#include "servicefd.h"

#include "mnt.pb-c.h"

/* How mountinfo shows the root of a bind whose directory (or file) was removed since. */
#define DELETED_ROOT "//deleted"

/*
 * Both sides: every mount namespace of the tree, the root's first (namespaces.c collects
 * it first). Restore keeps each in a service fd: MNTNS_SFD_NR at most.
 */
struct mount_ns *all_mntns[MNTNS_SFD_NR];
size_t nr_mntns;

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

const char *mnt_fstype_name(uint32_t nr)
{
	for (size_t i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		if (fstypes[i].nr == nr)
			return fstypes[i].name;
	return "an unsupported filesystem";
}

/* The type to mount: CRIU's "auto" ones (--enable-fs) carry their name in fsname. */
const char *mnt_type_name(const MntEntry *e)
{
	return e->fstype == FSTYPE__AUTO && e->fsname ? e->fsname : mnt_fstype_name(e->fstype);
}

static bool fstype_new_fs(uint32_t nr)
{
	for (size_t i = 0; i < sizeof(fstypes) / sizeof(fstypes[0]); i++)
		if (fstypes[i].nr == nr)
			return fstypes[i].new_fs;
	return false;
}

/*
 * A superblock's first mount that comes back mounted anew: one of the filesystems above
 * that restore knows how to fill, or, dumped with --enable-fs, one of the types named
 * there, recorded as CRIU records them (fstype AUTO, its name in fsname) and at restore
 * mounted again from its source and options alone: its files are not saved. false with
 * ENOMEM in *err where its name could not be kept.
 */
static bool comes_back_new(const struct mount_ns *mns, struct mount *m, int *err)
{
	MntEntry *e = m->e;

	if (fstype_new_fs(e->fstype) || e->fstype == FSTYPE__AUTO)
		return true;
	if (mns->from_image || !m->type || !opts_fs_enabled(m->type))
		return false;
	e->fsname = strdup(m->type);
	if (!e->fsname) {
		*err = -ENOMEM;
		return false;
	}
	e->fstype = FSTYPE__AUTO;
	pr_info("mount %u at %s: %s, mounted anew at restore, its files not saved (--enable-fs)\n",
		e->mnt_id, e->mountpoint, e->fsname);
	return true;
}

/* Whether directory a of a filesystem holds directory b of it (or is it). */
bool mnt_path_holds(const char *a, const char *b)
{
	size_t len = strlen(a);

	if (!strcmp(a, "/"))
		return true;
	return !strncmp(a, b, len) && (b[len] == '/' || !b[len]);
}

/* b, a path inside directory a, as one path (b's leading / kept). */
char *mnt_path_join(const char *a, const char *b)
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
			     (s->e->ext_key && mnt_path_holds(s->e->root, m->e->root))))
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
			    !mnt_path_holds(s->e->root, m->e->root))
				continue;
			if (s->how == MOUNT_ROOT || s->how == MOUNT_EXTERNAL ||
			    s->how == MOUNT_NEW_FS)
				return s;
		}
	}
	return NULL;
}

/* mountinfo escapes blanks and backslashes in paths as \ooo. */
char *mnt_unescaped_dup(const char *s)
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
		r = mnt_unescaped_dup(root);
		p = mnt_unescaped_dup(point);
		if (r && p && mnt_path_holds(r, e->root))
			found = mnt_path_join(p, e->root + (strcmp(r, "/") ? strlen(r) : 0));
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
	int err = 0;

	if (!binds) {
		if (m == mns->root && mns == all_mntns[0])
			m->how = MOUNT_ROOT;
		else if (e->ext_key)
			m->how = MOUNT_EXTERNAL;
		else if (!strcmp(e->root, "/") && !sb_taken(mns, m) && comes_back_new(mns, m, &err))
			/* criu's mounts show it too: --external mnt[] takes it from there */
			m->how = auto_external(mns, m) ? MOUNT_EXTERNAL : MOUNT_NEW_FS;
		if (err)
			return err;
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
	       e->mnt_id, e->mountpoint, m->type ?: mnt_type_name(e), e->source, e->root,
	       fstype_new_fs(e->fstype) || e->fstype == FSTYPE__AUTO
		       ? "bound from a mount of its filesystem's root"
		       : "bound from the root mount's filesystem (--enable-fs mounts others anew)");
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
	       m->e->mnt_id, m->e->mountpoint, mnt_fstype_name(m->e->fstype), mns->id, other->id);
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
		free(m->e->fsname);
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
	e->root = mnt_unescaped_dup(f[3]);
	/* A bind of a directory or file removed since: CRIU keeps the root without the mark. */
	if (e->root && strlen(e->root) > strlen(DELETED_ROOT) &&
	    !strcmp(e->root + strlen(e->root) - strlen(DELETED_ROOT), DELETED_ROOT)) {
		e->root[strlen(e->root) - strlen(DELETED_ROOT)] = '\0';
		e->has_deleted = e->deleted = true;
	}
	e->mountpoint = mnt_unescaped_dup(f[4]);
	e->source = mnt_unescaped_dup(source);
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

/*
 * --skip-mnt: the mount at a point named there, and every mount below it, is left out of
 * the images (mountinfo lists a mount after its parent, whose point holds its own).
 */
static bool skipped_mount(const struct mount *m)
{
	for (unsigned int i = 0; i < opts.nr_skip_mnts; i++) {
		if (!strcmp(opts.skip_mnts[i], "/") ||
		    !mnt_path_holds(opts.skip_mnts[i], m->e->mountpoint))
			continue;
		pr_info("mount %u at %s: left out (--skip-mnt %s)\n", m->e->mnt_id,
			m->e->mountpoint, opts.skip_mnts[i]);
		return true;
	}
	return false;
}

/* The last mount read, which is not kept after all. */
static void drop_last_mount(struct mount_ns *mns)
{
	MntEntry *e = mns->mounts[--mns->nr].e;

	free(mns->mounts[mns->nr].type);
	free(e->root);
	free(e->mountpoint);
	free(e->source);
	free(e->options);
	free(e->ext_key);
	free(e);
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
		if (skipped_mount(m)) {
			drop_last_mount(mns);
			continue;
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

/* The handlers of a binfmt_misc mount (mnt-binfmt.c), read through a clone of it. */
static int dump_binfmt(pid_t pid, const struct mount *m)
{
	int tree = mnt_clone_mount(pid, m);
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
			 mnt_type_name(m->e), m->e->flags, m->e->sb_flags, m->e->options,
			 m->e->ext_key ? ", external " : "", m->e->ext_key ?: "");
		ret = pb_write_one(img, m->e);
		if (!ret && m->how == MOUNT_NEW_FS && m->e->fstype == FSTYPE__TMPFS)
			ret = mnt_dump_tmpfs(ns->pid, m);
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

		m->path = mnt_path_join(opts.root, m->e->mountpoint);
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
		if (m->how == MOUNT_EXTERNAL && mnt_find_ext_peer(m))
			return -EIO;
		if (m->ext_master && mnt_clone_ext_master(m))
			return -EIO;
		if (mnt_is_pty_bind(m) && mnt_check_pty_bind(m))
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
	       mnt_path_holds(c->e->mountpoint, a->e->mountpoint);
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
	ret = mnt_open_own_ns(mns);
	ret = ret ?: install_proc();
	ret = ret ?: mnt_build_mounts(mns);
	for (size_t i = 1; i < nr_mntns && !ret; i++)
		ret = mnt_build_nested(all_mntns[i]);
	/* pivot_root() refuses a shared new root: propagation comes after. */
	ret = ret ?: mnt_enter_root(mns);
	ret = ret ?: mnt_restore_propagation();
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

	if (!m || !mnt_path_holds(m->e->mountpoint, dir))
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
