/*
 * Regular files (and directories, and the "memory" character devices /dev/null, zero,
 * full, random, urandom), reopened by path: fds, mapped files, the exe, cwd and root; the
 * path a file is dumped by, and its opening at restore. A file deleted while open is a
 * ghost (files-ghost.c); one linked back with --link-remap, or in /proc/PID of a process
 * gone, is a remap of remap-fpath.img (files-remap.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cr_options.h"
#include "files-reg-internal.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"

#include "remap-file-path.pb-c.h"

#define DELETED_SUFFIX	 " (deleted)"

/* Flags open() must not see again: they would create or truncate, not reopen. */
#define REOPEN_DROP_FLAGS (O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC | (O_TMPFILE & ~O_DIRECTORY))

/* /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom: stateless, reopened by path. */
static bool is_memory_device(const struct stat *st)
{
	unsigned int mi = minor(st->st_rdev);

	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 &&
	       (mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9);
}

/* ---------------------------------------------------------------- dump ---- */

/* Mapped files and exes, one entry per (inode, path, access), shared by every mapping. */
struct dumped_vma_file {
	dev_t dev;
	ino_t ino;
	uint32_t flags;
	char *path;
	uint32_t id;
};

static struct dumped_vma_file *dumped_vma_files;
static size_t nr_dumped_vma_files;

/*
 * Kernel-internal files show up as deleted files with made-up paths; re-creating them
 * on disk would be wrong, so they are refused until their own kinds exist.
 */
static bool is_internal_file(const char *path)
{
	return !strncmp(path, "/memfd:", 7) || !strncmp(path, "/SYSV", 5) ||
	       !strcmp(path, "/dev/zero") || path[0] != '/';
}

/*
 * A deleted file is re-created at its path on restore, and so are the directories above
 * it that were deleted too (ghost_parents): the nearest one that exists must be a
 * directory.
 */
static int check_ghost_path(const char *src, const char *path, const char *what)
{
	char buf[PATH_MAX + 32], *dir = strdup(mntns_dump_path(src, path, buf, sizeof(buf)));
	char *slash, *root;
	struct stat st;
	int ret = 0;

	if (!dir) {
		pr_err("out of memory checking %s\n", path);
		return -ENOMEM;
	}
	/* The tree's "/" (a /proc/PID/root prefix, a symlink) is kept with its slash: followed. */
	root = dir + strlen(dir) - strlen(path);
	do {
		slash = strrchr(dir, '/');
		slash[slash == root] = '\0';
	} while (lstat(dir, &st) && errno == ENOENT && slash != root);
	if (!S_ISDIR(st.st_mode)) {
		ret = -ENOTDIR;
		pr_err("%s: deleted file %s cannot be re-created on restore: %s is not a directory\n",
		       what, path, dir);
	}
	free(dir);
	return ret;
}

/*
 * The path restore will open: the link text, minus the " (deleted)" mark for deleted
 * files. A file still linked must still be reachable there, or restore would open
 * something else.
 */
enum reg_path_kind {
	PATH_LIVE, /* the path names the file */
	PATH_DEAD_PROC, /* in /proc/PID of a process gone: opened while a helper has PID */
	PATH_GHOST, /* deleted: contents in a ghost image */
	PATH_LINK_REMAP, /* its name removed, other names left: linked back (--link-remap) */
};

/*
 * A file still linked whose own name was removed: --link-remap saves it as a hard link,
 * in the same directory (a hard link cannot leave the filesystem).
 */
static int resolve_unlinked_path(const char *src, const struct stat *st, const char *what,
				 char *path, bool marked, enum reg_path_kind *kind)
{
	size_t sfx = strlen(DELETED_SUFFIX);

	if (!marked || !S_ISREG(st->st_mode) || !opts.link_remap) {
		pr_err("%s: %s no longer names the open file (renamed, replaced, in another mount "
		       "namespace, or removed while other links remain: --link-remap)\n",
		       what, path);
		return -ENOENT;
	}
	path[strlen(path) - sfx] = '\0';
	*kind = PATH_LINK_REMAP;
	return check_ghost_path(src, path, what);
}

/*
 * The pid of "/proc/PID[/...]" when st is on procfs there (as the task behind the /proc
 * link src sees it): a directory or file of a process that is gone shows as deleted. 0
 * when it is no such path.
 */
static pid_t dead_proc_pid(const char *src, const char *path, const struct stat *st)
{
	char buf[PATH_MAX + 32];
	struct stat proc;
	char *end;
	long pid;

	/* The tree's /proc, of its own pid namespace where it has one: pids are the tree's. */
	if (strncmp(path, "/proc/", 6) || stat(mntns_dump_path(src, "/proc", buf, sizeof(buf)), &proc) ||
	    proc.st_dev != st->st_dev)
		return 0;
	pid = strtol(path + 6, &end, 10);
	if (end == path + 6 || (*end && *end != '/') || pid <= 0 || pid > INT32_MAX)
		return 0;
	return pid;
}

/*
 * --evasive-devices, as CRIU: a device file whose path now names another node (a mount
 * covers it, or the task's root changed since it opened it, as a container's /dev/null) is
 * dumped by that path where the node there is of the same device; restore opens it.
 */
static bool evasive_device(const struct stat *st, const struct stat *now)
{
	return opts.evasive_devices && (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) &&
	       (now->st_mode & S_IFMT) == (st->st_mode & S_IFMT) && now->st_rdev == st->st_rdev &&
	       (now->st_dev != st->st_dev || now->st_ino != st->st_ino);
}

static int resolve_path(const char *src, const char *link, const struct stat *st, const char *what,
			char *path, enum reg_path_kind *kind)
{
	size_t len = strlen(link), sfx = strlen(DELETED_SUFFIX);
	bool marked = len > sfx && !strcmp(link + len - sfx, DELETED_SUFFIX);
	struct stat now;

	snprintf(path, PATH_MAX, "%s", link);
	if (marked) {
		path[len - sfx] = '\0';
		if (dead_proc_pid(src, path, st)) {
			*kind = PATH_DEAD_PROC;
			return 0;
		}
		path[len - sfx] = DELETED_SUFFIX[0];
	}
	*kind = st->st_nlink ? PATH_LIVE : PATH_GHOST;
	if (st->st_nlink) {
		char buf[PATH_MAX + 32];
		const char *where = mntns_dump_path(src, path, buf, sizeof(buf));
		int ret = S_ISLNK(st->st_mode) ? lstat(where, &now) : stat(where, &now);

		/*
		 * Only the directory /proc/PID of a process gone is marked deleted: the files in
		 * it keep their name, which no longer resolves.
		 */
		if (ret && errno == ENOENT && !marked && dead_proc_pid(src, path, st)) {
			*kind = PATH_DEAD_PROC;
			return 0;
		}
		if (!ret && !marked && evasive_device(st, &now)) {
			pr_info("%s: %s names another node of device %u:%u now: dumped by that path "
				"(--evasive-devices)\n",
				what, path, major(st->st_rdev), minor(st->st_rdev));
			return 0;
		}
		if (ret || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
			return resolve_unlinked_path(src, st, what, path, marked, kind);
		return 0;
	}
	if (marked)
		path[len - sfx] = '\0';
	if (!ghost_kind(st->st_mode) || is_internal_file(path)) {
		pr_err("%s: %s is deleted and not a file on disk (memfd, shared memory?): not "
		       "supported\n",
		       what, link);
		return -ENOTSUP;
	}
	return check_ghost_path(src, path, what);
}

/*
 * fown: the owner of an fd's I/O signals; NULL for a file no fd holds (cwd, a mapping).
 * src: the /proc link to the file, for its mount id; NULL: none written.
 */
int reg_write_entry(uint32_t id, const char *path, const struct stat *st, uint32_t flags,
		    uint64_t pos, FownEntry *fown, const char *src)
{
	FileEntry fe = FILE_ENTRY__INIT;
	RegFileEntry rfe = REG_FILE_ENTRY__INIT;
	FownEntry no_owner = FOWN_ENTRY__INIT;
	int ret = src ? mntns_file_mnt_id(src, &rfe.mnt_id) : 0;

	if (ret)
		return ret;
	rfe.has_mnt_id = rfe.mnt_id >= 0;

	rfe.id = id;
	rfe.name = (char *)path; /* protobuf-c's field is not const; it is only read */
	rfe.flags = flags;
	rfe.pos = pos;
	rfe.fown = fown ? fown : &no_owner;
	rfe.has_mode = true;
	rfe.mode = st->st_mode;
	/* Only a regular file's size means something to check on restore. */
	rfe.has_size = S_ISREG(st->st_mode);
	rfe.size = st->st_size;
	fe.type = FD_TYPES__REG;
	fe.id = id;
	fe.reg = &rfe;
	return write_file_entry(&fe);
}

/*
 * The mount id of path (from the root of the namespace of src's mount), or of the nearest
 * directory above it that exists when the name does not resolve (a file removed or renamed
 * since, or hidden under a mount over a directory above it).
 */
static int path_mount_id(const char *src, const char *path, uint64_t *mnt_id)
{
	char dir[PATH_MAX], buf[PATH_MAX + 32];
	struct statx stx;

	snprintf(dir, sizeof(dir), "%s", path);
	for (;;) {
		char *slash = strrchr(dir, '/');

		if (!statx(AT_FDCWD, mntns_dump_path(src, *dir ? dir : "/", buf, sizeof(buf)),
			   AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) &&
		    (stx.stx_mask & STATX_MNT_ID)) {
			*mnt_id = stx.stx_mnt_id;
			return 0;
		}
		if ((errno != ENOENT && errno != ENOTDIR) || !*dir || !slash)
			return -errno ?: -EIO;
		*slash = '\0';
	}
}

/*
 * An fd whose mount another mount covers at the file's path (one mounted over it, or over a
 * directory above it): restore opens (or makes) the file by its path, which would give an
 * fd on the covering mount (even the same inode, where that binds the same directory), so
 * such an fd is refused, as CRIU refuses open files on overmounted mounts. Only for a mount
 * of the tree's own mount namespaces: elsewhere there are no mount ids to restore.
 */
static int check_path_reaches_mount(const char *src, const char *path, const char *what)
{
	uint64_t path_mnt;
	int32_t mnt_id;
	int ret = mntns_file_mnt_id(src, &mnt_id);

	if (ret || !mntns_has_mount(mnt_id))
		return ret;
	ret = path_mount_id(src, path, &path_mnt);
	if (ret) {
		pr_err("%s: cannot read the mount id of %s: %s\n", what, path, strerror(-ret));
		return ret;
	}
	if (path_mnt == (uint64_t)mnt_id)
		return 0;
	pr_err("%s: %s is on mount %d, which mount %llu covers at that path (overmounted): "
	       "not supported\n",
	       what, path, mnt_id, (unsigned long long)path_mnt);
	return -ENOTSUP;
}

/*
 * One REG file_entry (plus, when deleted, its ghost or link and the remap naming it); src
 * is the /proc link the contents of a deleted file are read from.
 */
static int dump_reg_entry(uint32_t id, const char *src, const char *link, const struct stat *st,
			  uint32_t flags, uint64_t pos, FownEntry *fown, const char *what)
{
	enum reg_path_kind kind;
	char path[PATH_MAX];
	uint32_t remap_id;
	int ret;

	/* An fd (fown: it has an owner), whatever its path names now. */
	ret = fown ? check_path_reaches_mount(src, link, what) : 0;
	if (!ret)
		ret = resolve_path(src, link, st, what, path, &kind);
	if (!ret && kind == PATH_GHOST) {
		ret = ghost_dump(src, path, st, &remap_id);
		if (!ret)
			ret = remap_write(id, remap_id, REMAP_TYPE__GHOST);
	} else if (!ret && kind == PATH_LINK_REMAP) {
		ret = remap_link_back(src, path, st, &remap_id);
		if (!ret)
			ret = remap_write(id, remap_id, REMAP_TYPE__LINKED);
	} else if (!ret && kind == PATH_DEAD_PROC) {
		ret = remap_write(id, dead_proc_pid(src, path, st), REMAP_TYPE__PROCFS);
	}
	return ret ? ret : reg_write_entry(id, path, st, flags, pos, fown, src);
}

/* A symlink is held only by an O_PATH | O_NOFOLLOW fd, reopened the same way. */
static bool reg_owns(const struct fd_parms *p)
{
	return (S_ISREG(p->st.st_mode) && !fd_is_mqueue(p)) || S_ISDIR(p->st.st_mode) ||
	       S_ISLNK(p->st.st_mode) || is_memory_device(&p->st);
}

int dump_reg_file(const struct fd_parms *p, uint32_t id)
{
	char src[64], what[64];
	FownEntry fown;
	int ret;

	snprintf(src, sizeof(src), "/proc/%d/fd/%d", p->pid, p->fd);
	snprintf(what, sizeof(what), "fd %d of task %d", p->fd, p->pid);
	ret = dump_fown(p, &fown);
	return ret ? ret : dump_reg_entry(id, src, p->link, &p->st, p->flags, p->pos, &fown, what);
}

int dump_reg_path(const struct fd_parms *p, uint32_t id, const char *path)
{
	FownEntry fown;
	int ret = dump_fown(p, &fown);

	return ret ? ret : reg_write_entry(id, path, &p->st, p->flags, p->pos, &fown, NULL);
}

/* The target of a /proc link and its inode. */
static int read_proc_link(const char *src, const char *what, char *link, struct stat *st)
{
	ssize_t len = readlink(src, link, PATH_MAX - 1);

	if (len < 0 || stat(src, st)) {
		pr_perror("%s: cannot read %s", what, src);
		return -errno;
	}
	link[len] = '\0';
	return 0;
}

int dump_dir_file(const char *src, const char *what, uint32_t *file_id)
{
	char link[PATH_MAX];
	struct stat st;
	int ret;

	ret = read_proc_link(src, what, link, &st);
	if (ret)
		return ret;
	if (!S_ISDIR(st.st_mode)) {
		pr_err("%s: %s is not a directory\n", what, link);
		return -ENOTDIR;
	}
	*file_id = files_new_id();
	return dump_reg_entry(*file_id, src, link, &st, O_RDONLY, 0, NULL, what);
}

static int remember_vma_file(const struct stat *st, const char *path, uint32_t flags, uint32_t id)
{
	char *path_copy = strdup(path);
	struct dumped_vma_file *grown = NULL;

	if (path_copy)
		grown = realloc(dumped_vma_files, (nr_dumped_vma_files + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory remembering mapped file %s\n", path);
		free(path_copy);
		return -ENOMEM;
	}
	dumped_vma_files = grown;
	dumped_vma_files[nr_dumped_vma_files++] =
		(struct dumped_vma_file){ st->st_dev, st->st_ino, flags, path_copy, id };
	return 0;
}

/*
 * The access the mapped file was opened with: the permission bits of its map_files link
 * are the file's FMODE_READ / FMODE_WRITE.
 */
static uint32_t vma_file_flags(const char *src)
{
	struct stat lst;

	if (lstat(src, &lst))
		return O_RDONLY;
	if ((lst.st_mode & S_IRUSR) && (lst.st_mode & S_IWUSR))
		return O_RDWR;
	return (lst.st_mode & S_IWUSR) ? O_WRONLY : O_RDONLY;
}

/* A mapped file or exe, reached through the /proc link src. */
static int dump_vma_file(const char *src, const char *what, uint32_t flags, uint32_t *file_id)
{
	char link[PATH_MAX];
	struct stat st;
	uint32_t id;
	int ret;

	ret = read_proc_link(src, what, link, &st);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_dumped_vma_files; i++) {
		struct dumped_vma_file *vf = &dumped_vma_files[i];

		if (vf->dev == st.st_dev && vf->ino == st.st_ino && vf->flags == flags &&
		    !strcmp(vf->path, link)) {
			*file_id = vf->id;
			return 0;
		}
	}
	if (!S_ISREG(st.st_mode)) {
		pr_err("%s: %s is not a regular file: not supported\n", what, link);
		return -ENOTSUP;
	}
	id = files_new_id();
	/* The mapping code opens it with the access the VMA needs (open_vma_file()). */
	ret = dump_reg_entry(id, src, link, &st, flags, 0, NULL, what);
	if (!ret)
		ret = remember_vma_file(&st, link, flags, id);
	if (!ret) {
		pr_debug("%s: %s is file id %u\n", what, link, id);
		*file_id = id;
	}
	return ret;
}

int dump_mapped_file(pid_t pid, unsigned long start, unsigned long end, uint32_t *file_id)
{
	char src[96], what[96];

	snprintf(src, sizeof(src), "/proc/%d/map_files/%lx-%lx", pid, start, end);
	snprintf(what, sizeof(what), "mapping %lx-%lx of task %d", start, end, pid);
	return dump_vma_file(src, what, vma_file_flags(src), file_id);
}

int dump_exe_file(pid_t pid, uint32_t *file_id)
{
	char src[64], what[64];

	snprintf(src, sizeof(src), "/proc/%d/exe", pid);
	snprintf(what, sizeof(what), "exe of task %d", pid);
	return dump_vma_file(src, what, O_RDONLY, file_id);
}

/* ------------------------------------------------------------- restore ---- */

/* remap-fpath.img exists only when some file was deleted. */
static int reg_collect_images(void)
{
	int ret = pb_collect_optional_image(CR_IMG_REMAP_FPATH, remap_collect_one, NULL);

	if (!ret)
		pr_info("collected %zu deleted files (ghosts) for %zu file entries, %zu linked back\n",
			nr_ghosts, nr_ghost_remaps, nr_linked_remaps);
	return ret;
}

static void reg_collect_fini(void)
{
	ghost_collect_fini();
	remap_collect_fini();
}

/*
 * A path from an image is only written to where a dump could have named a file: an
 * absolute path without "." or ".." components or empty ones, so a crafted name cannot
 * climb out of the directory it names.
 */
bool reg_is_plain_path(const char *path)
{
	const char *p = path;

	if (*p != '/')
		return false;
	while (*p) {
		const char *comp = p + 1, *end = strchrnul(comp, '/');
		size_t len = end - comp;

		if (len == 0 || (len == 1 && comp[0] == '.') ||
		    (len == 2 && comp[0] == '.' && comp[1] == '.'))
			return false;
		p = end;
	}
	return true;
}

static int check_reg_name(uint32_t id, const char *name)
{
	if (!name || name[0] != '/') {
		pr_err("files.img: regular file %u has no absolute path\n", id);
		return -EINVAL;
	}
	if (strnlen(name, PATH_MAX) >= PATH_MAX) {
		pr_err("files.img: regular file %u: path longer than PATH_MAX\n", id);
		return -ENAMETOOLONG;
	}
	return 0;
}

/*
 * A remapped entry names a path restore re-creates or links: a plain absolute one, of
 * the kind the ghost re-creates (a link is always to a regular file).
 */
static bool remap_mismatch(const struct reg_file *rf)
{
	if (!rf->ghost && !rf->link_id)
		return false;
	if (!reg_is_plain_path(rf->path))
		return true;
	if (!rf->has_mode)
		return false;
	if (rf->ghost)
		return (rf->mode & S_IFMT) != (rf->ghost->mode & S_IFMT);
	return !S_ISREG(rf->mode);
}

/* A file of a dead process's /proc directory must lie in /proc/PID of that pid. */
static bool dead_pid_mismatch(const struct reg_file *rf)
{
	char dir[32];
	size_t len;

	if (!rf->dead_pid)
		return false;
	len = snprintf(dir, sizeof(dir), "/proc/%d", rf->dead_pid);
	return strncmp(rf->path, dir, len) || (rf->path[len] && rf->path[len] != '/') ||
	       !reg_is_plain_path(rf->path);
}

static int reg_collect(struct file_desc *d)
{
	const RegFileEntry *rfe = d->fe->reg;
	struct reg_file *rf;
	int ret;

	if (!rfe) {
		pr_err("files.img: file %u has type REG but no reg entry\n", d->id);
		return -EINVAL;
	}
	ret = check_reg_name(d->id, rfe->name);
	if (!ret)
		ret = collect_owner(d, rfe->fown);
	if (ret)
		return ret;
	rf = calloc(1, sizeof(*rf));
	if (!rf) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	*rf = (struct reg_file){
		.id = d->id, .path = rfe->name, .flags = rfe->flags, .pos = rfe->pos,
		.has_mode = rfe->has_mode, .mode = rfe->mode,
		.has_size = rfe->has_size, .size = rfe->size,
		.ghost = ghost_of_file(d->id),
		.link_id = remap_target(d->id, REMAP_TYPE__LINKED),
		.dead_pid = remap_target(d->id, REMAP_TYPE__PROCFS),
		.mnt_id = rfe->has_mnt_id ? rfe->mnt_id : -1,
	};
	if (dead_pid_mismatch(rf)) {
		pr_err("files.img: file %u (%s) is remapped to dead pid %d but does not lie in its /proc directory\n",
		       d->id, rf->path, rf->dead_pid);
		free(rf);
		return -EINVAL;
	}
	if (remap_mismatch(rf)) {
		pr_err("files.img: file %u (%s) is remapped to a %s but is not a %s at a plain "
		       "absolute path\n",
		       d->id, rf->path, rf->ghost ? "ghost" : "link",
		       rf->ghost ? "file of the ghost's kind" : "regular file");
		free(rf);
		return -EINVAL;
	}
	d->kind = rf;
	return 0;
}

const struct reg_file *find_reg_file(uint32_t id, const char *user)
{
	const struct file_desc *d = find_file_desc(id);

	if (!d || d->fe->type != FD_TYPES__REG) {
		pr_err("%s: file id %u is not a regular file entry of files.img\n", user, id);
		return NULL;
	}
	return d->kind;
}

const char *reg_file_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return "regular file";
	if (S_ISDIR(mode))
		return "directory";
	if (S_ISCHR(mode))
		return "character device";
	if (S_ISFIFO(mode))
		return "FIFO";
	if (S_ISLNK(mode))
		return "symlink";
	if (S_ISBLK(mode))
		return "block device";
	return "special file";
}

/* Restore must not silently open something other than what was dumped. */
static int check_reopened(int fd, const struct reg_file *rf)
{
	struct stat st;
	mode_t rwx;

	if (fstat(fd, &st)) {
		pr_perror("cannot stat reopened %s", rf->path);
		return -errno;
	}
	if (rf->has_mode && (st.st_mode & S_IFMT) != (rf->mode & S_IFMT)) {
		pr_err("%s: was a %s at dump, is a %s now\n", rf->path, reg_file_kind(rf->mode),
		       reg_file_kind(st.st_mode));
		return -EINVAL;
	}
	/*
	 * As CRIU: a file's or directory's whole mode must be the dumped one, the rwx bits too
	 * unless --skip-file-rwx-check (set-id and sticky bits still count). Not a device
	 * node's: a pty's slave, reopened here, gets the mode its devpts gives a new one.
	 */
	rwx = opts.skip_file_rwx_check ? (S_IRWXU | S_IRWXG | S_IRWXO) : 0;
	if (rf->has_mode && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
	    (st.st_mode & ~rwx) != (rf->mode & ~rwx)) {
		pr_err("%s: its mode is %#o now, %#o at dump%s\n", rf->path, st.st_mode & 07777,
		       rf->mode & 07777,
		       rwx ? "" : " (--skip-file-rwx-check lets the rwx bits differ)");
		return -EPERM;
	}
	if (!rf->has_size || !S_ISREG(st.st_mode) || (uint64_t)st.st_size == rf->size)
		return 0;
	/* --file-validation filesize: not the file that was dumped; else only a warning. */
	if (opts.file_validation_size) {
		pr_err("%s: size changed since dump (%llu, now %lld bytes)\n", rf->path,
		       (unsigned long long)rf->size, (long long)st.st_size);
		return -ESTALE;
	}
	pr_warn("%s: size changed since dump (%llu, now %lld bytes)\n", rf->path,
		(unsigned long long)rf->size, (long long)st.st_size);
	return 0;
}

int chdir_reg_dir(const struct reg_file *rf)
{
	int fd;

	if (rf->dead_pid) {
		fd = remap_open_dead_proc(rf, O_PATH | O_DIRECTORY | O_CLOEXEC, true);
	} else {
		fd = open_reg_file(rf, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && fchdir(fd)) {
			pr_perror("cannot chdir to %s", rf->path);
			close(fd);
			fd = -errno;
		}
	}
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int open_reg_file(const struct reg_file *rf, uint32_t flags)
{
	int open_flags = (flags & ~REOPEN_DROP_FLAGS) | O_NOCTTY;
	int64_t own_mntns;
	int fd, ret;

	/* O_TMPFILE is O_DIRECTORY plus a bit of its own: the file is no directory. */
	if ((flags & O_TMPFILE) == O_TMPFILE)
		open_flags &= ~O_DIRECTORY;

	/* Its path is the namespace's of the mount it was on: the task goes there for it. */
	own_mntns = mntns_enter_mount(rf->mnt_id);
	if (own_mntns < 0)
		return own_mntns;
	if (rf->ghost) {
		fd = ghost_open(rf, open_flags);
	} else if (rf->dead_pid) {
		fd = remap_open_dead_proc(rf, open_flags, false);
	} else if (rf->link_id) {
		fd = remap_open_linked(rf, open_flags);
	} else {
		fd = open(rf->path, open_flags);
		if (fd < 0) {
			fd = -errno;
			pr_perror("cannot open %s (flags %#o)", rf->path, open_flags);
		}
	}
	ret = mntns_enter(own_mntns);
	if (ret && fd >= 0)
		close(fd);
	if (ret || fd < 0)
		return ret ?: fd;
	ret = check_reopened(fd, rf);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

static int reg_open(const struct file_desc *d)
{
	const struct reg_file *rf = d->kind;
	int fd = open_reg_file(rf, rf->flags);

	/* An O_PATH fd has no offset (lseek fails with EBADF). */
	if (fd < 0 || (rf->flags & O_PATH))
		return fd;
	if (lseek(fd, rf->pos, SEEK_SET) < 0) {
		int err = errno;

		pr_err("%s: cannot restore offset %llu: %s\n", rf->path,
		       (unsigned long long)rf->pos, strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}

/* A deleted file is re-created once: every opening of its ghost must find that inode. */
static uint64_t reg_object_key(const struct file_desc *d)
{
	const struct reg_file *rf = d->kind;

	return rf->ghost ? (uint64_t)rf->ghost->id + 1 : 0;
}

int open_vma_file(uint32_t file_id, uint32_t fdflags)
{
	char user[48];
	const struct reg_file *rf;

	snprintf(user, sizeof(user), "mapped file %u", file_id);
	rf = find_reg_file(file_id, user);
	return rf ? open_reg_file(rf, fdflags) : -ENOENT;
}

/* --inherit-fd names a regular file by its path. */
static void reg_inherit_key(const struct file_desc *d, char *buf, size_t len)
{
	const struct reg_file *rf = d->kind;

	snprintf(buf, len, "%s", rf->path);
}

const struct fdtype_ops reg_fdtype_ops = {
	.type = FD_TYPES__REG,
	.name = "regular file",
	.owns = reg_owns,
	.dump = dump_reg_file,
	.collect_images = reg_collect_images,
	.collect = reg_collect,
	.collect_fini = reg_collect_fini,
	.open = reg_open,
	.inheritable = true,
	.object_key = reg_object_key,
	.inherit_key = reg_inherit_key,
};
