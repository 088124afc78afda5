/*
 * Regular files (and directories, and the "memory" character devices /dev/null, zero,
 * full, random, urandom), reopened by path: fds, mapped files, the exe, cwd and root. A
 * file that was deleted while open is a ghost: remap-fpath.img maps its file id to
 * ghost-file-ID.img, which holds its attributes and contents; restore re-creates it at
 * its path, opens it and unlinks it again. With --link-remap, a file whose name was removed
 * while other names remain is linked back as link_remap.ID beside it (a LINKED remap);
 * restore links that to the old name, opens it, unlinks the name, and removes the
 * link_remap file once the tree runs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "servicefd.h"

#include "ghost-file.pb-c.h"
#include "remap-file-path.pb-c.h"

#define DELETED_SUFFIX	 " (deleted)"
#define GHOST_COPY_CHUNK (1u << 20)
/* Old images mark a ghost remap by this bit of remap_id and carry no remap_type. */
#define REMAP_GHOST_BIT	 (1u << 31)

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

/* Each deleted inode is saved once, however many fds and mappings use it. */
struct dumped_ghost {
	dev_t dev;
	ino_t ino;
	uint32_t id;
};

static struct dumped_ghost *dumped_ghosts;
static size_t nr_dumped_ghosts;
static uint32_t last_ghost_id;

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

static int copy_range_to_image(int src_fd, const char *path, struct cr_img *img, off_t off,
			       uint64_t len, char *buf)
{
	while (len) {
		size_t want = len < GHOST_COPY_CHUNK ? len : GHOST_COPY_CHUNK;
		ssize_t n = pread(src_fd, buf, want, off);
		int ret;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				pr_perror("cannot read deleted file %s", path);
			else
				pr_err("deleted file %s shrank while being saved (%llu bytes missing)\n",
				       path, (unsigned long long)len);
			return n < 0 ? -errno : -EIO;
		}
		ret = img_write_raw(img, buf, n);
		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

static int write_chunk(int src_fd, const char *path, struct cr_img *img, off_t off, uint64_t len,
		       char *buf)
{
	GhostChunkEntry ce = GHOST_CHUNK_ENTRY__INIT;
	int ret;

	ce.off = off;
	ce.len = len;
	ret = pb_write_one(img, &ce);
	return ret ? ret : copy_range_to_image(src_fd, path, img, off, len, buf);
}

/*
 * The next run of data [*data, *hole) at or after off, below size; false when only a hole
 * is left (ENXIO). A filesystem without SEEK_DATA reports the whole file as data.
 */
static bool next_data_run(int fd, off_t off, off_t size, off_t *data, off_t *hole)
{
	*data = lseek(fd, off, SEEK_DATA);
	if (*data < 0 || *data >= size)
		return false;
	*hole = lseek(fd, *data, SEEK_HOLE);
	if (*hole < 0 || *hole > size)
		*hole = size;
	return true;
}

/*
 * --ghost-limit counts the bytes a ghost image would hold: its data, not its holes (a
 * sparse file of 2 GiB with 1 MB written costs 1 MB), as CRIU counts them.
 */
static int check_ghost_limit(int src_fd, const char *path, off_t size)
{
	uint64_t bytes = 0;
	off_t off = 0, data, hole;

	while (off < size && next_data_run(src_fd, off, size, &data, &hole)) {
		bytes += hole - data;
		off = hole;
	}
	if (bytes <= opts.ghost_limit)
		return 0;
	pr_err("deleted file %s holds %llu bytes of data, more than --ghost-limit %llu\n", path,
	       (unsigned long long)bytes, (unsigned long long)opts.ghost_limit);
	return -EFBIG;
}

/* The contents as chunks, one per run of data: holes (SEEK_HOLE) stay holes and cost nothing. */
static int write_ghost_chunks(int src_fd, const char *path, struct cr_img *img, off_t size)
{
	char *buf = malloc(GHOST_COPY_CHUNK);
	off_t off = 0, data, hole;
	int ret = 0;

	if (!buf) {
		pr_err("out of memory saving deleted file %s\n", path);
		return -ENOMEM;
	}
	while (off < size && !ret && next_data_run(src_fd, off, size, &data, &hole)) {
		ret = write_chunk(src_fd, path, img, data, hole - data, buf);
		off = hole;
	}
	free(buf);
	return ret;
}

static int fill_ghost_entry(GhostFileEntry *ge, const char *path, const struct stat *st,
			    Timeval *atim, Timeval *mtim)
{
	int ret = userns_tree_owner(st->st_uid, st->st_gid, &ge->uid, &ge->gid, path);

	if (ret)
		return ret;
	ge->mode = st->st_mode;
	ge->has_dev = ge->has_ino = true;
	ge->dev = kernel_dev(st->st_dev);
	ge->ino = st->st_ino;
	/* Unlike dev, CRIU writes a node's rdev as stat() gives it (glibc's dev_t encoding). */
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		ge->has_rdev = true;
		ge->rdev = st->st_rdev;
	}
	atim->tv_sec = st->st_atim.tv_sec;
	atim->tv_usec = st->st_atim.tv_nsec / 1000;
	mtim->tv_sec = st->st_mtim.tv_sec;
	mtim->tv_usec = st->st_mtim.tv_nsec / 1000;
	ge->atim = atim;
	ge->mtim = mtim;
	return 0;
}

/*
 * A deleted symlink's target. The /proc link src names the symlink itself: opened with
 * O_PATH (following src, not the symlink) it gives an fd on the symlink to read it from.
 */
static int read_symlink_target(const char *src, const char *path, char *target, size_t len)
{
	int fd = open(src, O_PATH | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : readlinkat(fd, "", target, len - 1);

	if (n < 0)
		pr_perror("cannot read the target of deleted symlink %s", path);
	if (fd >= 0)
		close(fd);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	return 0;
}

/*
 * ghost-file-ID.img: the inode's attributes, then a regular file's contents read through
 * src (a directory, FIFO or device node has none worth keeping; a symlink its target).
 */
static int write_ghost_image(const char *src, const char *path, const struct stat *st,
			     uint32_t ghost_id)
{
	GhostFileEntry ge = GHOST_FILE_ENTRY__INIT;
	Timeval atim = TIMEVAL__INIT, mtim = TIMEVAL__INIT;
	bool regular = S_ISREG(st->st_mode);
	char target[PATH_MAX];
	struct cr_img *img;
	int src_fd = -1, ret = 0;

	if (regular) {
		src_fd = open(src, O_RDONLY | O_CLOEXEC);
		if (src_fd < 0) {
			pr_perror("cannot open deleted file %s through %s", path, src);
			return -errno;
		}
		ret = check_ghost_limit(src_fd, path, st->st_size);
	}
	img = ret ? NULL : open_image(CR_IMG_GHOST_FILE, O_WRONLY, ghost_id);
	if (!img) {
		if (src_fd >= 0)
			close(src_fd);
		return ret ? ret : -EIO;
	}
	ret = fill_ghost_entry(&ge, path, st, &atim, &mtim);
	ge.has_size = ge.has_chunks = ge.chunks = regular;
	ge.size = st->st_size;
	if (!ret && S_ISLNK(st->st_mode))
		ret = read_symlink_target(src, path, target, sizeof(target));
	ge.symlnk_target = S_ISLNK(st->st_mode) ? target : NULL;
	if (!ret)
		ret = pb_write_one(img, &ge);
	if (!ret && regular)
		ret = write_ghost_chunks(src_fd, path, img, st->st_size);
	close_image(img);
	if (src_fd >= 0)
		close(src_fd);
	if (!ret)
		pr_debug("deleted %s %s: %lld bytes saved as ghost %u\n", regular ? "file" : "node",
			 path, regular ? (long long)st->st_size : 0LL, ghost_id);
	return ret;
}

static int dump_ghost(const char *src, const char *path, const struct stat *st, uint32_t *ghost_id)
{
	struct dumped_ghost *grown;
	int ret;

	for (size_t i = 0; i < nr_dumped_ghosts; i++) {
		if (dumped_ghosts[i].dev == st->st_dev && dumped_ghosts[i].ino == st->st_ino) {
			*ghost_id = dumped_ghosts[i].id;
			return 0;
		}
	}
	grown = realloc(dumped_ghosts, (nr_dumped_ghosts + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory saving deleted file %s\n", path);
		return -ENOMEM;
	}
	dumped_ghosts = grown;
	*ghost_id = ++last_ghost_id;
	ret = write_ghost_image(src, path, st, *ghost_id);
	if (ret)
		return ret;
	dumped_ghosts[nr_dumped_ghosts++] =
		(struct dumped_ghost){ st->st_dev, st->st_ino, *ghost_id };
	return 0;
}

/*
 * Kernel-internal files show up as deleted files with made-up paths; re-creating them
 * on disk would be wrong, so they are refused until their own kinds exist.
 */
/*
 * What a deleted inode may be to be re-created: a regular file (with its contents), a
 * symlink (with its target), a directory, a FIFO or a device node (mode and numbers).
 */
static bool ghost_kind(mode_t mode)
{
	return S_ISREG(mode) || S_ISDIR(mode) || S_ISFIFO(mode) || S_ISCHR(mode) ||
	       S_ISBLK(mode) || S_ISLNK(mode);
}

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
static int write_reg_entry(uint32_t id, const char *path, const struct stat *st, uint32_t flags,
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
 * --link-remap: each inode linked back once per mount it is open through, in its directory
 * (or the nearest one above that exists, when that was removed too) (a hard link
 * cannot cross mounts, and restore links it back to a path of that mount), removed again
 * if the dump fails.
 */
struct dumped_link_remap {
	dev_t dev;
	ino_t ino;
	int32_t mnt_id;
	uint32_t id; /* its REG entry */
	char *path; /* where criu made it (mntns_dump_path()) */
};

static struct dumped_link_remap *dumped_link_remaps;
static size_t nr_dumped_link_remaps;

/* link_remap.ID beside path: a new name of the file behind src, and its REG entry. */
/*
 * The length of the directory of path that still exists (its own, or the nearest one above
 * that was not removed with it): restore makes the others again around its open.
 */
static int existing_dir_len(const char *src, const char *path)
{
	char dir[PATH_MAX], buf[PATH_MAX + 32];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	do {
		slash = strrchr(dir, '/');
		*slash = '\0';
	} while (slash != dir && lstat(mntns_dump_path(src, dir, buf, sizeof(buf)), &st) &&
		 errno == ENOENT);
	return slash - dir;
}

/*
 * linkat() of the file behind src as made, as the root of the tree's user namespace where
 * it has one of its own: a filesystem mounted in there refuses ids it does not map
 * (EOVERFLOW), criu's among them. In a child, whose exit status is the errno. 0 or -errno.
 */
static int link_in_tree(const char *src, const char *made)
{
	const struct ns_id *user = ns_root_own(NS_USER);
	int status;
	pid_t child;

	if (!user)
		return linkat(AT_FDCWD, src, AT_FDCWD, made, AT_SYMLINK_FOLLOW) ? -errno : 0;
	child = fork();
	if (child == 0) {
		if (userns_join_tree(user->pid) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
			_exit(EPERM);
		_exit(linkat(AT_FDCWD, src, AT_FDCWD, made, AT_SYMLINK_FOLLOW) ? errno : 0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return -errno;
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
}

static int link_back(const char *src, const char *path, const struct stat *st, uint32_t *link_id)
{
	struct dumped_link_remap *grown, *lr;
	int dir_len = existing_dir_len(src, path);
	char *lpath, *made, buf[PATH_MAX + 32];
	int32_t mnt_id;
	int ret;

	ret = mntns_file_mnt_id(src, &mnt_id);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_dumped_link_remaps; i++) {
		lr = &dumped_link_remaps[i];
		if (lr->dev == st->st_dev && lr->ino == st->st_ino && lr->mnt_id == mnt_id) {
			*link_id = lr->id;
			return 0;
		}
	}
	*link_id = files_new_id();
	grown = realloc(dumped_link_remaps, (nr_dumped_link_remaps + 1) * sizeof(*grown));
	if (!grown || asprintf(&lpath, "%.*s/link_remap.%u", dir_len, path, *link_id) < 0) {
		pr_err("out of memory linking back %s\n", path);
		if (grown)
			dumped_link_remaps = grown;
		return -ENOMEM;
	}
	dumped_link_remaps = grown;
	/* Through the /proc link: the inode itself, whatever names it has left. */
	made = strdup(mntns_dump_path(src, lpath, buf, sizeof(buf)));
	ret = made ? link_in_tree(src, made) : -ENOMEM;
	if (ret) {
		pr_err("cannot link %s back as %s (--link-remap): %s\n", path, lpath,
		       strerror(-ret));
		free(made);
		free(lpath);
		return ret;
	}
	dumped_link_remaps[nr_dumped_link_remaps++] =
		(struct dumped_link_remap){ st->st_dev, st->st_ino, mnt_id, *link_id, made };
	pr_info("%s linked back as %s (file %u)\n", path, lpath, *link_id);
	ret = write_reg_entry(*link_id, lpath, st, O_RDONLY, 0, NULL, src);
	free(lpath);
	return ret;
}

void reg_dump_undo(void)
{
	for (size_t i = 0; i < nr_dumped_link_remaps; i++) {
		if (unlink(dumped_link_remaps[i].path) && errno != ENOENT)
			pr_warn("cannot remove %s: %s\n", dumped_link_remaps[i].path, strerror(errno));
		free(dumped_link_remaps[i].path);
	}
	free(dumped_link_remaps);
	dumped_link_remaps = NULL;
	nr_dumped_link_remaps = 0;
}

/* remap-fpath.img: file id -> the file holding its contents (a ghost, a link). */
static int write_remap(uint32_t file_id, uint32_t remap_id, RemapType type)
{
	RemapFilePathEntry rpe = REMAP_FILE_PATH_ENTRY__INIT;
	struct cr_img *img = files_side_image(CR_IMG_REMAP_FPATH);

	if (!img)
		return -EIO;
	rpe.orig_id = file_id;
	rpe.remap_id = remap_id;
	rpe.has_remap_type = true;
	rpe.remap_type = type;
	return pb_write_one(img, &rpe);
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
		ret = dump_ghost(src, path, st, &remap_id);
		if (!ret)
			ret = write_remap(id, remap_id, REMAP_TYPE__GHOST);
	} else if (!ret && kind == PATH_LINK_REMAP) {
		ret = link_back(src, path, st, &remap_id);
		if (!ret)
			ret = write_remap(id, remap_id, REMAP_TYPE__LINKED);
	} else if (!ret && kind == PATH_DEAD_PROC) {
		ret = write_remap(id, dead_proc_pid(src, path, st), REMAP_TYPE__PROCFS);
	}
	return ret ? ret : write_reg_entry(id, path, st, flags, pos, fown, src);
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

	return ret ? ret : write_reg_entry(id, path, &p->st, p->flags, p->pos, &fown, NULL);
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

/*
 * A deleted file of the images (one per ghost image, shared by every entry remapped to
 * it). Collected in the main process before forking, so each restored task has its own
 * copy: "restored" means "re-created by this task".
 */
struct ghost_file {
	uint32_t id; /* ghost-file-ID.img */
	uint32_t uid, gid, mode;
	dev_t rdev; /* a device node's numbers */
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

static struct ghost_file **ghosts;
static size_t nr_ghosts;

/* remap-fpath.img: which file id is which ghost. */
struct ghost_remap {
	uint32_t file_id;
	struct ghost_file *ghost;
};

static struct ghost_remap *ghost_remaps;
static size_t nr_ghost_remaps;

/* Bytes of contents that follow in a ghost image: never more than the image has left. */
static int check_ghost_bytes(struct cr_img *img, uint64_t len, const char *what)
{
	off_t left = img_bytes_left(img);

	if (left < 0 || (uint64_t)left < len) {
		pr_err("%s: %s claims %llu bytes of contents, %lld are left in the image\n",
		       img->name, what, (unsigned long long)len, (long long)left);
		return -EINVAL;
	}
	return 0;
}

static int check_chunk(struct cr_img *img, const struct ghost_file *g, const GhostChunkEntry *ce)
{
	if (ce->off > g->size || ce->len > g->size - ce->off) {
		pr_err("%s: chunk of %llu bytes at %llu lies beyond the file's size %llu\n",
		       img->name, (unsigned long long)ce->len, (unsigned long long)ce->off,
		       (unsigned long long)g->size);
		return -EINVAL;
	}
	return check_ghost_bytes(img, ce->len, "a chunk");
}

/*
 * Walks the contents of a ghost image, bounds-checked: for each chunk (or the one raw
 * run), fn gets its offset and length with the image positioned at its bytes, and must
 * consume them. Without fn the bytes are skipped (the check at collect time).
 */
typedef int (*ghost_run_fn)(struct cr_img *img, uint64_t off, uint64_t len, void *arg);

static int skip_run(struct cr_img *img, uint64_t off, uint64_t len, void *arg)
{
	(void)off;
	(void)arg;
	if (lseek(img->fd, len, SEEK_CUR) < 0) {
		pr_perror("%s: cannot skip %llu bytes", img->name, (unsigned long long)len);
		return -errno;
	}
	return 0;
}

static int walk_ghost_contents(struct cr_img *img, const struct ghost_file *g, ghost_run_fn fn,
			       void *arg)
{
	GhostChunkEntry *ce;
	int ret;

	if (!fn)
		fn = skip_run;
	if (!g->chunks) {
		ret = check_ghost_bytes(img, g->size, "the file");
		return ret ? ret : fn(img, 0, g->size, arg);
	}
	while ((ret = pb_read_one_as(img, &ghost_chunk_entry__descriptor, (void **)&ce)) > 0) {
		ret = check_chunk(img, g, ce);
		if (!ret)
			ret = fn(img, ce->off, ce->len, arg);
		pb_free(img, ce);
		if (ret)
			return ret;
	}
	return ret;
}

static void timeval_to_timespec(const Timeval *tv, bool *has, struct timespec *ts)
{
	*has = tv != NULL;
	if (tv) {
		ts->tv_sec = tv->tv_sec;
		ts->tv_nsec = (tv->tv_usec % 1000000) * 1000;
	}
}

static int decode_ghost_header(struct cr_img *img, struct ghost_file *g)
{
	GhostFileEntry *ge;
	int ret = pb_read_one_required(img, (void **)&ge);

	if (ret)
		return ret;
	if (!ghost_kind(ge->mode) || ((S_ISCHR(ge->mode) || S_ISBLK(ge->mode)) && !ge->has_rdev)) {
		pr_err("%s: the deleted file has mode %#o%s: not supported\n", img->name, ge->mode,
		       ge->has_rdev ? "" : " and no device number");
		pb_free(img, ge);
		return -ENOTSUP;
	}
	g->uid = ge->uid;
	g->gid = ge->gid;
	g->mode = ge->mode;
	g->rdev = ge->rdev;
	g->has_dumped_inode = ge->has_dev && ge->has_ino;
	g->dumped_dev = ge->dev;
	g->dumped_ino = ge->ino;
	if (S_ISLNK(ge->mode)) {
		if (!ge->symlnk_target || !*ge->symlnk_target) {
			pr_err("%s: a deleted symlink without its target\n", img->name);
			pb_free(img, ge);
			return -EINVAL;
		}
		g->target = strdup(ge->symlnk_target);
		if (!g->target) {
			pb_free(img, ge);
			return -ENOMEM;
		}
	}
	if (!S_ISREG(ge->mode)) {
		/* Nothing but the node: whatever follows the header is not read. */
		g->size = UINT64_MAX;
		timeval_to_timespec(ge->atim, &g->has_atim, &g->atim);
		timeval_to_timespec(ge->mtim, &g->has_mtim, &g->mtim);
		pb_free(img, ge);
		return 0;
	}
	g->chunks = ge->has_chunks && ge->chunks;
	g->size = ge->has_size ? ge->size : UINT64_MAX;
	/*
	 * Upstream CRIU writes a file that is not sparse as plain contents without a size:
	 * they run to the end of the image, as its restore copies them.
	 */
	if (!ge->has_size && !g->chunks) {
		off_t left = img_bytes_left(img);

		if (left < 0) {
			pr_err("%s: cannot tell the size of the contents: %s\n", img->name,
			       strerror(-left));
			pb_free(img, ge);
			return left;
		}
		g->size = left;
	}
	timeval_to_timespec(ge->atim, &g->has_atim, &g->atim);
	timeval_to_timespec(ge->mtim, &g->has_mtim, &g->mtim);
	pb_free(img, ge);
	return 0;
}

/* The ghost image read through once, so a corrupt one fails before anything is forked. */
static int collect_ghost_image(struct ghost_file *g)
{
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_GHOST_FILE, g->id)) {
		char name[64];

		img_name(CR_IMG_GHOST_FILE, g->id, name, sizeof(name));
		pr_err("remap-fpath.img: ghost %#x has no %s\n", g->id, name);
		return -ENOENT;
	}
	img = open_image(CR_IMG_GHOST_FILE, O_RDONLY, g->id);
	if (!img)
		return -EIO;
	ret = decode_ghost_header(img, g);
	if (!ret && S_ISREG(g->mode))
		ret = walk_ghost_contents(img, g, NULL, NULL);
	close_image(img);
	return ret;
}

static struct ghost_file *find_or_add_ghost(uint32_t ghost_id)
{
	struct ghost_file **grown, *g;

	for (size_t i = 0; i < nr_ghosts; i++)
		if (ghosts[i]->id == ghost_id)
			return ghosts[i];
	g = calloc(1, sizeof(*g));
	grown = g ? realloc(ghosts, (nr_ghosts + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		pr_err("remap-fpath.img: out of memory collecting ghost %#x\n", ghost_id);
		free(g);
		return NULL;
	}
	ghosts = grown;
	g->id = ghost_id;
	if (collect_ghost_image(g)) {
		free(g->target);
		free(g);
		return NULL;
	}
	ghosts[nr_ghosts++] = g;
	return g;
}

static struct ghost_file *ghost_of_file(uint32_t file_id)
{
	for (size_t i = 0; i < nr_ghost_remaps; i++)
		if (ghost_remaps[i].file_id == file_id)
			return ghost_remaps[i].ghost;
	return NULL;
}

/*
 * remap-fpath.img: which file id is reached through which link_remap file (LINKED: its
 * REG id), or lies in /proc/PID of a process gone at dump (PROCFS: the pid).
 */
struct linked_remap {
	uint32_t file_id;
	RemapType type;
	uint32_t target;
};

static struct linked_remap *linked_remaps;
static size_t nr_linked_remaps;

static const struct linked_remap *linked_remap_of(uint32_t file_id)
{
	for (size_t i = 0; i < nr_linked_remaps; i++)
		if (linked_remaps[i].file_id == file_id)
			return &linked_remaps[i];
	return NULL;
}

/* The target of file_id's remap of type type, or 0. */
static uint32_t remap_target(uint32_t file_id, RemapType type)
{
	const struct linked_remap *lr = linked_remap_of(file_id);

	return lr && lr->type == type ? lr->target : 0;
}

static RemapType remap_type_of(const RemapFilePathEntry *rpe)
{
	if (rpe->has_remap_type)
		return rpe->remap_type;
	return (rpe->remap_id & REMAP_GHOST_BIT) ? REMAP_TYPE__GHOST : REMAP_TYPE__LINKED;
}

/* The ghost an entry names. */
static int remap_ghost_id(const RemapFilePathEntry *rpe, uint32_t *ghost_id)
{
	if (remap_type_of(rpe) != REMAP_TYPE__GHOST) {
		pr_err("remap-fpath.img: file %u has remap type %d, which is not supported\n",
		       rpe->orig_id, remap_type_of(rpe));
		return -ENOTSUP;
	}
	*ghost_id = rpe->has_remap_type ? rpe->remap_id : rpe->remap_id & ~REMAP_GHOST_BIT;
	return 0;
}

/*
 * A process gone at dump: restore gives a helper its pid while the file is opened, so
 * the pid must be free now.
 */
static int check_dead_pid(const RemapFilePathEntry *rpe)
{
	if (rpe->remap_id == 0 || rpe->remap_id > INT32_MAX) {
		pr_err("remap-fpath.img: file %u lies in /proc of pid %u\n", rpe->orig_id,
		       rpe->remap_id);
		return -EINVAL;
	}
	if (!kill(rpe->remap_id, 0) || errno != ESRCH) {
		pr_err("remap-fpath.img: file %u lies in /proc/%u of a process gone at dump, but pid %u is in use now\n",
		       rpe->orig_id, rpe->remap_id, rpe->remap_id);
		return -EBUSY;
	}
	return 0;
}

/*
 * A file linked back by --link-remap (its REG entry is checked once all are collected),
 * or one in /proc/PID of a process gone.
 */
static int collect_linked_remap(const RemapFilePathEntry *rpe)
{
	struct linked_remap *grown;

	if (remap_type_of(rpe) == REMAP_TYPE__PROCFS && check_dead_pid(rpe))
		return -EINVAL;
	if (ghost_of_file(rpe->orig_id) || linked_remap_of(rpe->orig_id)) {
		pr_err("remap-fpath.img: file %u is remapped twice\n", rpe->orig_id);
		return -EINVAL;
	}
	grown = realloc(linked_remaps, (nr_linked_remaps + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("remap-fpath.img: out of memory\n");
		return -ENOMEM;
	}
	linked_remaps = grown;
	linked_remaps[nr_linked_remaps++] =
		(struct linked_remap){ rpe->orig_id, remap_type_of(rpe), rpe->remap_id };
	return 0;
}

static int collect_one_remap(void *msg, void *arg)
{
	const RemapFilePathEntry *rpe = msg;
	struct ghost_remap *grown;
	struct ghost_file *g;
	uint32_t ghost_id;
	int ret;

	(void)arg;
	if (remap_type_of(rpe) == REMAP_TYPE__LINKED || remap_type_of(rpe) == REMAP_TYPE__PROCFS)
		return collect_linked_remap(rpe);
	ret = remap_ghost_id(rpe, &ghost_id);
	if (ret)
		return ret;
	if (ghost_of_file(rpe->orig_id) || linked_remap_of(rpe->orig_id)) {
		pr_err("remap-fpath.img: file %u is remapped twice\n", rpe->orig_id);
		return -EINVAL;
	}
	g = find_or_add_ghost(ghost_id);
	if (!g)
		return -EINVAL;
	grown = realloc(ghost_remaps, (nr_ghost_remaps + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("remap-fpath.img: out of memory\n");
		return -ENOMEM;
	}
	ghost_remaps = grown;
	ghost_remaps[nr_ghost_remaps++] = (struct ghost_remap){ rpe->orig_id, g };
	return 0;
}

uint32_t reg_ghost_file_of_inode(uint32_t s_dev, uint64_t ino)
{
	for (size_t i = 0; i < nr_ghost_remaps; i++) {
		const struct ghost_file *g = ghost_remaps[i].ghost;

		if (g->has_dumped_inode && g->dumped_dev == s_dev && g->dumped_ino == ino)
			return ghost_remaps[i].file_id;
	}
	return 0;
}

/* remap-fpath.img exists only when some file was deleted. */
static int reg_collect_images(void)
{
	int ret = pb_collect_optional_image(CR_IMG_REMAP_FPATH, collect_one_remap, NULL);

	if (!ret)
		pr_info("collected %zu deleted files (ghosts) for %zu file entries, %zu linked back\n",
			nr_ghosts, nr_ghost_remaps, nr_linked_remaps);
	return ret;
}

static void reg_collect_fini(void)
{
	for (size_t i = 0; i < nr_ghosts; i++) {
		free(ghosts[i]->target);
		free(ghosts[i]);
	}
	free(ghosts);
	ghosts = NULL;
	nr_ghosts = 0;
	free(ghost_remaps);
	ghost_remaps = NULL;
	nr_ghost_remaps = 0;
	free(linked_remaps);
	linked_remaps = NULL;
	nr_linked_remaps = 0;
}

/*
 * A path from an image is only written to where a dump could have named a file: an
 * absolute path without "." or ".." components or empty ones, so a crafted name cannot
 * climb out of the directory it names.
 */
static bool is_plain_path(const char *path)
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
	if (!is_plain_path(rf->path))
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
	       !is_plain_path(rf->path);
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

/* Any fd of ours on the given inode, or -ENOENT. */
static int find_fd_on_inode(dev_t dev, ino_t ino)
{
	DIR *dir = proc_opendir("self/fd");
	struct dirent *de;
	int found = -ENOENT;

	if (!dir) {
		pr_perror("cannot open /proc/self/fd");
		return -errno;
	}
	while (found < 0 && (de = readdir(dir))) {
		struct stat st;
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd != dirfd(dir) && !fstat(fd, &st) &&
		    st.st_dev == dev && st.st_ino == ino)
			found = fd;
	}
	closedir(dir);
	return found;
}

/* Where the contents go: the new file and its name, for messages. */
struct ghost_fill {
	int fd;
	const char *path;
	char *buf;
};

static int fill_run(struct cr_img *img, uint64_t off, uint64_t len, void *arg)
{
	struct ghost_fill *fill = arg;

	while (len) {
		size_t chunk = len < GHOST_COPY_CHUNK ? len : GHOST_COPY_CHUNK;
		ssize_t n;
		int ret = img_read_raw(img, fill->buf, chunk);

		if (ret)
			return ret;
		/* A short write to a regular file means the filesystem is full. */
		n = pwrite(fill->fd, fill->buf, chunk, off);
		if (n != (ssize_t)chunk) {
			ret = n < 0 ? -errno : -ENOSPC;
			pr_err("cannot write re-created %s: %s\n", fill->path, strerror(-ret));
			return ret;
		}
		off += chunk;
		len -= chunk;
	}
	return 0;
}

static int restore_ghost_attrs(int fd, const char *path, const struct ghost_file *g)
{
	struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
	int ret;

	if (g->size != UINT64_MAX && ftruncate(fd, g->size)) {
		pr_perror("cannot set the size of re-created %s to %llu", path,
			  (unsigned long long)g->size);
		return -errno;
	}
	ret = userns_chown(fd, g->uid, g->gid, path);
	if (ret)
		return ret;
	if (fchmod(fd, g->mode & 07777)) {
		pr_perror("cannot set the mode of re-created %s", path);
		return -errno;
	}
	if (g->has_atim)
		times[0] = g->atim;
	if (g->has_mtim)
		times[1] = g->mtim;
	if (futimens(fd, times)) {
		pr_perror("cannot set the times of re-created %s", path);
		return -errno;
	}
	return 0;
}

static int fill_ghost_file(int fd, const char *path, const struct ghost_file *g)
{
	struct ghost_fill fill = { .fd = fd, .path = path, .buf = malloc(GHOST_COPY_CHUNK) };
	struct cr_img *img = NULL;
	void *header = NULL;
	int ret = -ENOMEM;

	if (!fill.buf) {
		pr_err("out of memory re-creating %s\n", path);
		return ret;
	}
	img = open_image(CR_IMG_GHOST_FILE, O_RDONLY, g->id);
	if (!img) {
		free(fill.buf);
		return -EIO;
	}
	/* The header was decoded at collect time: only read past it here. */
	ret = pb_read_one_required(img, &header);
	pb_free(img, header);
	if (!ret)
		ret = walk_ghost_contents(img, g, fill_run, &fill);
	if (!ret)
		ret = restore_ghost_attrs(fd, path, g);
	close_image(img);
	free(fill.buf);
	return ret;
}

static const char *file_kind(mode_t mode)
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

struct ghost_inode_req {
	int dir_fd; /* path is relative to it (AT_FDCWD: to the cwd) */
	const char *path;
	const struct ghost_file *g;
};

static int make_ghost_inode_as_owner(void *arg)
{
	const struct ghost_inode_req *req = arg;
	const struct ghost_file *g = req->g;
	const char *path = req->path;
	int dir_fd = req->dir_fd, ret;

	if (S_ISREG(g->mode)) {
		ret = openat(dir_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
		return ret < 0 ? -errno : ret;
	}
	if (S_ISDIR(g->mode))
		ret = mkdirat(dir_fd, path, 0700);
	else if (S_ISLNK(g->mode))
		ret = symlinkat(g->target, dir_fd, path);
	else
		ret = mknodat(dir_fd, path, (g->mode & S_IFMT) | 0600,
			      S_ISFIFO(g->mode) ? 0 : g->rdev);
	if (ret)
		return -errno;
	ret = openat(dir_fd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return ret < 0 ? -errno : ret;
}

/*
 * A fresh inode of the ghost's kind at path (relative to dir_fd), never through a symlink
 * nor over anything that exists: a regular file open for writing its contents, or the
 * directory, FIFO or device node made and held by an O_PATH fd; made by the ghost's owner.
 * The fd or -errno (EEXIST unlogged).
 */
static int make_ghost_inode(int dir_fd, const char *path, const struct ghost_file *g)
{
	struct ghost_inode_req req = { .dir_fd = dir_fd, .path = path, .g = g };

	return make_as_tree_owner(make_ghost_inode_as_owner, &req, g->uid, g->gid);
}

/* Directories above a ghost that were deleted with it, made again for its re-creation. */
struct ghost_parents {
	char path[PATH_MAX];
	size_t made[64]; /* lengths of the prefixes of path made, the outermost first */
	unsigned int nr;
};

static int mkdir_private(void *path)
{
	return mkdir(path, 0700) ? -errno : 0;
}

/*
 * mkdir() each missing directory above path, outermost first, remembering each one; made
 * by uid and gid, the owner of what goes in them.
 */
static int make_ghost_parents(const char *path, uint32_t uid, uint32_t gid,
			      struct ghost_parents *gp)
{
	int ret;

	char *end = gp->path;
	struct stat st;

	snprintf(gp->path, sizeof(gp->path), "%s", path);
	gp->nr = 0;
	while ((end = strchr(end + 1, '/'))) {
		*end = '\0';
		if (lstat(gp->path, &st) && errno == ENOENT) {
			if (gp->nr == sizeof(gp->made) / sizeof(gp->made[0])) {
				pr_err("%s: more than %u deleted directories to re-create\n", path, gp->nr);
				return -ENAMETOOLONG;
			}
			ret = make_as_tree_owner(mkdir_private, gp->path, uid, gid);
			if (ret) {
				pr_err("cannot re-create the deleted directory %s: %s\n", gp->path,
				       strerror(-ret));
				return ret;
			}
			gp->made[gp->nr++] = end - gp->path;
		}
		*end = '/';
	}
	return 0;
}

/* Removes them again, innermost first: the ghost's path then shows them deleted too. */
static void remove_ghost_parents(struct ghost_parents *gp)
{
	while (gp->nr--) {
		gp->path[gp->made[gp->nr]] = '\0';
		if (rmdir(gp->path))
			pr_warn("cannot remove the re-created directory %s: %s\n", gp->path,
				strerror(errno));
	}
}

/*
 * A detached clone of the mount dir is on, rooted at dir, made writable: a ghost on a
 * mount made read-only (its filesystem writable, as a read-only bind's is) is made and
 * removed through it. The clone's fd, or -errno.
 */
static int writable_clone(const char *dir)
{
	struct mount_attr attr = { .attr_clr = MOUNT_ATTR_RDONLY };
	int fd = syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The ghost goes back where it was, so /proc/PID/fd shows "path (deleted)" again. If
 * someone created a new file there since, a sibling name is the best we can do. On a
 * read-only mount, it is made through a writable clone of its directory (*rw_dir, else
 * -1), and created is its name relative to that fd: no /proc path, which a task in a mount
 * namespace without /proc could not follow.
 */
static int create_ghost_file(const char *path, const struct ghost_file *g, char *created,
			     size_t len, int *rw_dir)
{
	char dir[PATH_MAX];
	int fd;

	*rw_dir = -1;
	snprintf(created, len, "%s", path);
	fd = make_ghost_inode(AT_FDCWD, created, g);
	if (fd == -EROFS) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path), path);
		*rw_dir = writable_clone(dir[0] ? dir : "/");
		if (*rw_dir < 0) {
			pr_err("deleted file %s: its read-only mount cannot be cloned writable: %s\n",
			       path, strerror(-*rw_dir));
			return -EROFS;
		}
		path = strrchr(path, '/') + 1;
		snprintf(created, len, "%s", path);
		fd = make_ghost_inode(*rw_dir, created, g);
	}
	if (fd == -EEXIST) {
		if ((size_t)snprintf(created, len, "%s.cr-ghost-%x", path, g->id) >= len) {
			pr_err("deleted file %s: the path exists again and a sibling name is too long\n",
			       path);
			return -ENAMETOOLONG;
		}
		pr_warn("deleted file %s: the path exists again, re-creating it as %s\n", path,
			created);
		fd = make_ghost_inode(*rw_dir >= 0 ? *rw_dir : AT_FDCWD, created, g);
	}
	if (fd < 0)
		pr_err("cannot re-create deleted %s %s: %s\n", file_kind(g->mode), created,
		       strerror(-fd));
	return fd;
}

/*
 * A node's owner (through fd, its O_PATH fd), mode and times, set by its name (relative to
 * dir_fd): an O_PATH fd cannot chmod.
 */
static int restore_node_attrs(int fd, int dir_fd, const char *path, const struct ghost_file *g)
{
	struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
	int ret;

	if (g->has_atim)
		times[0] = g->atim;
	if (g->has_mtim)
		times[1] = g->mtim;
	ret = userns_chown(fd, g->uid, g->gid, path);
	if (ret)
		return ret;
	/* A symlink's mode is always 0777, and chmod() would follow it. */
	if ((!S_ISLNK(g->mode) && fchmodat(dir_fd, path, g->mode & 07777, 0)) ||
	    utimensat(dir_fd, path, times, AT_SYMLINK_NOFOLLOW)) {
		pr_perror("cannot set mode or times of re-created %s", path);
		return -errno;
	}
	return 0;
}

/*
 * A new opening of the inode fd holds, with flags. Through /proc, except a symlink: an
 * O_PATH | O_NOFOLLOW open of /proc/self/fd/N would hold the /proc link itself, and a
 * symlink has no other kind of opening, so it is a dup. The fd or -errno.
 */
static int reopen_inode(int fd, int flags, mode_t mode)
{
	char link[64];
	int ret;

	if (S_ISLNK(mode)) {
		ret = fcntl(fd, (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
		return ret < 0 ? -errno : ret;
	}
	snprintf(link, sizeof(link), "self/fd/%d", fd);
	ret = proc_open(link, flags);
	return ret < 0 ? -errno : ret;
}

/*
 * A ghost made through a writable clone (created, its name in it) is opened on the
 * read-only mount it was on, by its name there, when that is the inode made (wfd) and the
 * flags read only; else through the clone (the fd then shows another mount). The fd or
 * -errno.
 */
static int open_on_readonly_mount(const char *path, const char *created, int wfd, int flags,
				  mode_t mode)
{
	char name[PATH_MAX + 32];
	struct stat made, st;
	int fd, len;

	len = snprintf(name, sizeof(name), "%.*s/%s", (int)(strrchr(path, '/') - path), path,
		       created);
	/* A name too long to be a path is opened through the clone as well. */
	if (len >= (int)sizeof(name) || (flags & O_ACCMODE) != O_RDONLY || S_ISLNK(mode) ||
	    fstat(wfd, &made))
		return reopen_inode(wfd, flags, mode);
	fd = open(name, flags | O_NOFOLLOW);
	if (fd >= 0 && !fstat(fd, &st) && st.st_dev == made.st_dev && st.st_ino == made.st_ino)
		return fd;
	if (fd >= 0)
		close(fd);
	return reopen_inode(wfd, flags, mode);
}

/* Create, fill (or set up the node), open with the wanted flags, remove the name. */
static int recreate_ghost(const struct reg_file *rf, int flags)
{
	struct ghost_file *g = rf->ghost;
	char created[PATH_MAX + 32];
	struct ghost_parents parents;
	int wfd, fd = -1, rw_dir = -1, made_in, ret;
	char what[PATH_MAX + 16];
	uint32_t host;
	struct stat st;

	/* It is made as its owner (make_as_tree_owner()), who must be one of the tree's. */
	snprintf(what, sizeof(what), "deleted file %s", rf->path);
	if (userns_host_uid(g->uid, &host, what) || userns_host_gid(g->gid, &host, what))
		return -EOVERFLOW;
	ret = make_ghost_parents(rf->path, g->uid, g->gid, &parents);
	wfd = ret ? ret : create_ghost_file(rf->path, g, created, sizeof(created), &rw_dir);
	if (wfd < 0) {
		remove_ghost_parents(&parents);
		return wfd;
	}
	made_in = rw_dir >= 0 ? rw_dir : AT_FDCWD;
	ret = S_ISREG(g->mode) ? fill_ghost_file(wfd, created, g) :
				 restore_node_attrs(wfd, made_in, created, g);
	if (!ret) {
		/* Through the fd, not the name: the inode just made, whatever the name is now. */
		fd = rw_dir >= 0 ? open_on_readonly_mount(rf->path, created, wfd, flags, g->mode) :
				   reopen_inode(wfd, flags, g->mode);
		if (fd < 0) {
			ret = fd;
			pr_err("cannot open re-created %s: %s\n", created, strerror(-fd));
		}
	}
	if (unlinkat(made_in, created, S_ISDIR(g->mode) ? AT_REMOVEDIR : 0) && !ret) {
		ret = -errno;
		pr_perror("cannot remove re-created %s", created);
	}
	remove_ghost_parents(&parents);
	if (!ret && fstat(wfd, &st)) {
		ret = -errno;
		pr_perror("cannot stat re-created %s", created);
	}
	close(wfd);
	if (rw_dir >= 0)
		close(rw_dir);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	g->restored = true;
	g->restored_dev = st.st_dev;
	g->restored_ino = st.st_ino;
	pr_debug("deleted %s %s re-created from ghost %#x\n", file_kind(g->mode), rf->path, g->id);
	return fd;
}

/*
 * The mount of the directory path is in, where it is another than the one fd is on
 * (binds of one filesystem, other namespaces): O_PATH on that directory; else -1.
 */
static int other_mount_dir(const char *path, int fd)
{
	struct statx in_dir, on_fd;
	char dir_path[PATH_MAX];
	int dir;

	snprintf(dir_path, sizeof(dir_path), "%.*s", (int)(strrchr(path, '/') - path), path);
	dir = open(dir_path[0] ? dir_path : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -1;
	if (statx(dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &in_dir) ||
	    statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &on_fd) ||
	    in_dir.stx_mnt_id == on_fd.stx_mnt_id) {
		close(dir);
		return -1;
	}
	return dir;
}

/*
 * A deleted inode the task holds (held), opened again with flags for a file that was on
 * the mount path's directory is on: through a handle of the inode opened on that mount,
 * where it is another than held's, so the fd shows its mount as at dump; else, or where
 * the filesystem has no handles, through held (on held's mount). The fd or -errno.
 */
static int reopen_held(const char *path, int held, int flags, mode_t mode)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h = { .fh.handle_bytes = MAX_HANDLE_SZ };
	int dir = S_ISLNK(mode) ? -1 : other_mount_dir(path, held), on_mount, fd, mount_id;
	const char *why = "name_to_handle_at";

	if (dir < 0)
		return reopen_inode(held, flags, mode);
	on_mount = name_to_handle_at(held, "", &h.fh, &mount_id, AT_EMPTY_PATH) ?
			   -errno :
			   userns_open_handle(dir, &h.fh, &why);
	close(dir);
	if (on_mount < 0) {
		pr_warn("deleted file %s: opened on the mount of another of its fds: %s: %s\n",
			path, why, strerror(-on_mount));
		return reopen_inode(held, flags, mode);
	}
	fd = reopen_inode(on_mount, flags, mode);
	close(on_mount);
	return fd;
}

/*
 * Every open of one deleted inode must reach the same inode again: if this task already
 * re-created it and still holds it open, reopen that (on the mount of this open's path);
 * else re-create it.
 */
static int open_ghost(const struct reg_file *rf, int flags)
{
	const struct ghost_file *g = rf->ghost;
	int held, fd;

	if (!g->restored)
		return recreate_ghost(rf, flags);
	held = find_fd_on_inode(g->restored_dev, g->restored_ino);
	if (held == -ENOENT)
		return recreate_ghost(rf, flags);
	if (held < 0)
		return held;
	fd = reopen_held(rf->path, held, flags, g->mode);
	if (fd < 0)
		pr_err("cannot reopen deleted file %s through fd %d: %s\n", rf->path, held,
		       strerror(-fd));
	return fd;
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
		pr_err("%s: was a %s at dump, is a %s now\n", rf->path, file_kind(rf->mode),
		       file_kind(st.st_mode));
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

/* The link_remap file a linked-back file is reached through, and its inode. */
static const struct reg_file *find_link(const struct reg_file *rf, struct stat *st)
{
	const struct reg_file *lf = find_reg_file(rf->link_id, rf->path);

	if (!lf)
		return NULL;
	if (!is_plain_path(lf->path)) {
		pr_err("%s: its link %s is not a plain absolute path\n", rf->path, lf->path);
		return NULL;
	}
	if (stat(lf->path, st)) {
		pr_perror("%s: cannot find its link %s (--link-remap)", rf->path, lf->path);
		return NULL;
	}
	return lf;
}

struct link_names {
	const char *from, *to;
};

static int link_as_owner(void *arg)
{
	const struct link_names *names = arg;

	return link(names->from, names->to) ? -errno : 0;
}

/*
 * A file linked back at dump (--link-remap): its old name is given back for the open, so
 * /proc shows "PATH (deleted)" as at dump, then removed again (and the directories above
 * it that were removed too, made again for it). Tasks opening it at the same time may
 * find the name given back already (the same inode: fine) or removed again before their
 * open (retried); the second unlink finds nothing.
 */
static int open_linked(const struct reg_file *rf, int flags)
{
	struct ghost_parents parents;
	struct link_names names;
	const struct reg_file *lf;
	struct stat lst, st;
	int fd = -ENOENT, ret;

	lf = find_link(rf, &lst);
	if (!lf)
		return -ENOENT;
	names = (struct link_names){ .from = lf->path, .to = rf->path };
	fd = make_ghost_parents(rf->path, lst.st_uid, lst.st_gid, &parents) ?: -ENOENT;
	if (fd != -ENOENT) {
		remove_ghost_parents(&parents);
		return fd;
	}
	for (int tries = 0; tries < 100 && fd == -ENOENT; tries++) {
		ret = make_as_tree_owner(link_as_owner, &names, lst.st_uid, lst.st_gid);
		if (ret && ret != -EEXIST) {
			fd = ret;
			pr_err("cannot link %s back to %s: %s\n", lf->path, rf->path,
			       strerror(-ret));
			break;
		}
		if (stat(rf->path, &st))
			continue;
		if (st.st_dev != lst.st_dev || st.st_ino != lst.st_ino) {
			pr_err("%s: the path exists again and is another file\n", rf->path);
			remove_ghost_parents(&parents);
			return -EEXIST;
		}
		fd = open(rf->path, flags);
		if (fd < 0) {
			fd = -errno;
			if (fd != -ENOENT)
				pr_err("cannot open %s through its link: %s\n", rf->path,
				       strerror(-fd));
		}
	}
	if (unlink(rf->path) && errno != ENOENT)
		pr_warn("cannot remove %s again: %s\n", rf->path, strerror(errno));
	remove_ghost_parents(&parents);
	if (fd == -ENOENT)
		pr_err("cannot open %s through its link: its name kept being removed\n",
		       rf->path);
	return fd;
}

/*
 * A file in /proc/PID of a process gone at dump: a helper child gets PID while the file
 * is opened (and, with chdir_too, made the cwd: a dead process's directory cannot be
 * entered), then exits and is reaped, and the opened directory or file is a dead
 * process's again. The helper waits for EOF on a pipe: it goes if we die.
 */
static int open_dead_proc(const struct reg_file *rf, int flags, bool chdir_too)
{
	int hold[2], fd, status;
	pid_t helper;
	char c;

	if (pipe2(hold, O_CLOEXEC)) {
		pr_perror("%s: pipe for the helper of dead pid %d", rf->path, rf->dead_pid);
		return -errno;
	}
	helper = clone_with_pid(rf->dead_pid, 0);
	if (helper == 0) {
		close(hold[1]);
		_exit(read(hold[0], &c, 1) == 0 ? 0 : 1);
	}
	close(hold[0]);
	if (helper < 0) {
		pr_perror("%s: cannot create a helper with the dead pid %d", rf->path, rf->dead_pid);
		close(hold[1]);
		return -EBUSY;
	}
	fd = open(rf->path, flags);
	if (fd < 0) {
		fd = -errno;
		pr_perror("cannot open %s (flags %#o) of helper %d", rf->path, flags, helper);
	} else if (chdir_too && fchdir(fd)) {
		pr_perror("cannot chdir to %s of helper %d", rf->path, helper);
		close(fd);
		fd = -errno;
	}
	close(hold[1]);
	if (waitpid(helper, &status, 0) != helper)
		pr_warn("%s: cannot reap helper %d: %s\n", rf->path, helper, strerror(errno));
	return fd;
}

int chdir_reg_dir(const struct reg_file *rf)
{
	int fd;

	if (rf->dead_pid) {
		fd = open_dead_proc(rf, O_PATH | O_DIRECTORY | O_CLOEXEC, true);
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

void reg_remove_links(void)
{
	for (size_t i = 0; i < nr_linked_remaps; i++) {
		const struct file_desc *d = linked_remaps[i].type == REMAP_TYPE__LINKED ?
						    find_file_desc(linked_remaps[i].target) : NULL;
		const struct reg_file *lf = d && d->fe->type == FD_TYPES__REG ? d->kind : NULL;
		char buf[PATH_MAX + 32];

		if (lf && unlink(mntns_restore_path(lf->mnt_id, lf->path, buf, sizeof(buf))) &&
		    errno != ENOENT)
			pr_warn("cannot remove %s: %s\n", lf->path, strerror(errno));
	}
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
		fd = open_ghost(rf, open_flags);
	} else if (rf->dead_pid) {
		fd = open_dead_proc(rf, open_flags, false);
	} else if (rf->link_id) {
		fd = open_linked(rf, open_flags);
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
