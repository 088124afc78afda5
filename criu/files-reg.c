/*
 * Regular files (and directories, and the "memory" character devices /dev/null, zero,
 * full, random, urandom), reopened by path: fds, mapped files and the exe. A file that
 * was deleted while open is a ghost: its contents go to ghost-file-ID.img on dump, and
 * restore re-creates it at its path, opens it and unlinks it again.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"

#define DELETED_SUFFIX	 " (deleted)"
#define GHOST_COPY_CHUNK (1u << 20)

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

/* Mapped files and exes, one entry per (inode, path), shared by every mapping of it. */
struct dumped_vma_file {
	dev_t dev;
	ino_t ino;
	char *path;
	uint32_t id;
};

static struct dumped_vma_file *dumped_vma_files;
static size_t nr_dumped_vma_files;

static int copy_to_image(int src_fd, const char *src, struct cr_img *img, uint64_t size)
{
	char *buf = malloc(GHOST_COPY_CHUNK);
	int ret = 0;

	if (!buf) {
		pr_err("out of memory copying %s\n", src);
		return -ENOMEM;
	}
	while (size && !ret) {
		size_t want = size < GHOST_COPY_CHUNK ? size : GHOST_COPY_CHUNK;
		ssize_t n = read(src_fd, buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				pr_perror("cannot read %s", src);
			else
				pr_err("%s: shrank while being saved (%llu bytes missing)\n", src,
				       (unsigned long long)size);
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		ret = img_write_raw(img, buf, n);
		size -= n;
	}
	free(buf);
	return ret;
}

/* ghost-file-ID.img: the header, then the contents read through src (a /proc link). */
static int write_ghost_image(const char *src, const char *path, const struct stat *st,
			     uint32_t ghost_id)
{
	GhostFileEntry ge = GHOST_FILE_ENTRY__INIT;
	struct cr_img *img;
	int src_fd, ret;

	src_fd = open(src, O_RDONLY | O_CLOEXEC);
	if (src_fd < 0) {
		pr_perror("cannot open deleted file %s through %s", path, src);
		return -errno;
	}
	img = open_image(CR_IMG_GHOST_FILE, O_WRONLY, ghost_id);
	if (!img) {
		close(src_fd);
		return -EIO;
	}
	ge.mode = st->st_mode;
	ge.size = st->st_size;
	ge.uid = st->st_uid;
	ge.gid = st->st_gid;
	ret = pb_write_one(img, &ge);
	if (!ret)
		ret = copy_to_image(src_fd, path, img, st->st_size);
	close_image(img);
	close(src_fd);
	if (!ret)
		pr_debug("deleted file %s: %lld bytes saved as ghost %u\n", path,
			 (long long)st->st_size, ghost_id);
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
static bool is_internal_file(const char *path)
{
	return !strncmp(path, "/memfd:", 7) || !strncmp(path, "/SYSV", 5) ||
	       !strcmp(path, "/dev/zero") || path[0] != '/';
}

/* A deleted file is re-created in its directory on restore: that directory must exist. */
static int check_ghost_path(const char *path, const char *what)
{
	char *dir = strdup(path), *slash;
	int ret = 0;

	if (!dir) {
		pr_err("out of memory checking %s\n", path);
		return -ENOMEM;
	}
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (access(dir, F_OK)) {
		ret = -errno;
		pr_err("%s: deleted file %s cannot be re-created on restore: its directory %s: %s\n",
		       what, path, dir, strerror(errno));
	}
	free(dir);
	return ret;
}

/*
 * The path restore will open: the link text, minus the " (deleted)" mark for deleted
 * files. A file still linked must still be reachable there, or restore would open
 * something else.
 */
static int resolve_path(const char *link, const struct stat *st, const char *what, char *path,
			bool *deleted)
{
	size_t len = strlen(link), sfx = strlen(DELETED_SUFFIX);
	struct stat now;

	snprintf(path, PATH_MAX, "%s", link);
	*deleted = st->st_nlink == 0;
	if (!*deleted) {
		if (stat(path, &now) || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
			pr_err("%s: %s no longer names the open file (renamed, replaced or in another "
			       "mount namespace)\n",
			       what, path);
			return -ENOENT;
		}
		return 0;
	}
	if (len > sfx && !strcmp(link + len - sfx, DELETED_SUFFIX))
		path[len - sfx] = '\0';
	if (!S_ISREG(st->st_mode) || is_internal_file(path)) {
		pr_err("%s: %s is deleted and not a regular file on disk (memfd, shared memory, deleted "
		       "directory?): not supported\n",
		       what, link);
		return -ENOTSUP;
	}
	return check_ghost_path(path, what);
}

/* Write one REG file_entry; src is the /proc link its contents are read from if deleted. */
static int dump_reg_entry(uint32_t id, const char *src, const char *link, const struct stat *st,
			  uint32_t flags, uint64_t pos, const char *what)
{
	FileEntry fe = FILE_ENTRY__INIT;
	RegFileEntry rfe = REG_FILE_ENTRY__INIT;
	char path[PATH_MAX];
	bool deleted;
	int ret;

	ret = resolve_path(link, st, what, path, &deleted);
	if (ret)
		return ret;
	if (deleted) {
		ret = dump_ghost(src, path, st, &rfe.ghost_id);
		if (ret)
			return ret;
		rfe.has_ghost_id = true;
	}
	rfe.name = path;
	rfe.flags = flags;
	rfe.pos = pos;
	rfe.has_mode = true;
	rfe.mode = st->st_mode;
	rfe.has_size = true;
	rfe.size = st->st_size;
	fe.type = FD_TYPES__REG;
	fe.id = id;
	fe.reg = &rfe;
	return write_file_entry(&fe);
}

static bool reg_owns(const struct fd_parms *p)
{
	return S_ISREG(p->st.st_mode) || S_ISDIR(p->st.st_mode) || is_memory_device(&p->st);
}

static int reg_dump(const struct fd_parms *p, uint32_t id)
{
	char src[64], what[64];

	snprintf(src, sizeof(src), "/proc/%d/fd/%d", p->pid, p->fd);
	snprintf(what, sizeof(what), "fd %d of task %d", p->fd, p->pid);
	return dump_reg_entry(id, src, p->link, &p->st, p->flags, p->pos, what);
}

static int remember_vma_file(const struct stat *st, const char *path, uint32_t id)
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
		(struct dumped_vma_file){ st->st_dev, st->st_ino, path_copy, id };
	return 0;
}

/* A mapped file or exe, reached through the /proc link src. */
static int dump_vma_file(const char *src, const char *what, uint32_t *file_id)
{
	char link[PATH_MAX];
	struct stat st;
	ssize_t len;
	uint32_t id;
	int ret;

	len = readlink(src, link, sizeof(link) - 1);
	if (len < 0 || stat(src, &st)) {
		pr_perror("%s: cannot read %s", what, src);
		return -errno;
	}
	link[len] = '\0';
	for (size_t i = 0; i < nr_dumped_vma_files; i++) {
		struct dumped_vma_file *vf = &dumped_vma_files[i];

		if (vf->dev == st.st_dev && vf->ino == st.st_ino && !strcmp(vf->path, link)) {
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
	ret = dump_reg_entry(id, src, link, &st, O_RDONLY, 0, what);
	if (!ret)
		ret = remember_vma_file(&st, link, id);
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
	return dump_vma_file(src, what, file_id);
}

int dump_exe_file(pid_t pid, uint32_t *file_id)
{
	char src[64], what[64];

	snprintf(src, sizeof(src), "/proc/%d/exe", pid);
	snprintf(what, sizeof(what), "exe of task %d", pid);
	return dump_vma_file(src, what, file_id);
}

/* ------------------------------------------------------------- restore ---- */

static int reg_collect(const FileEntry *fe)
{
	if (!fe->reg || !fe->reg->name || fe->reg->name[0] != '/') {
		pr_err("files.img: regular file %u has no absolute path\n", fe->id);
		return -EINVAL;
	}
	if (fe->reg->has_ghost_id && !img_exists(CR_IMG_GHOST_FILE, fe->reg->ghost_id)) {
		pr_err("files.img: deleted file %s (file %u) has no ghost-file-%u.img\n",
		       fe->reg->name, fe->id, fe->reg->ghost_id);
		return -ENOENT;
	}
	return 0;
}

/* The ghosts this task has re-created, so each deleted inode exists once again. */
struct restored_ghost {
	uint32_t id;
	dev_t dev;
	ino_t ino;
};

static struct restored_ghost *restored_ghosts;
static size_t nr_restored_ghosts;

/* Any fd of ours on the given inode, or -ENOENT. */
static int find_fd_on_inode(dev_t dev, ino_t ino)
{
	DIR *dir = opendir("/proc/self/fd");
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

static int copy_from_image(struct cr_img *img, int dst_fd, const char *path, uint64_t size)
{
	char *buf = malloc(GHOST_COPY_CHUNK);
	int ret = 0;

	if (!buf) {
		pr_err("out of memory re-creating %s\n", path);
		return -ENOMEM;
	}
	while (size && !ret) {
		size_t chunk = size < GHOST_COPY_CHUNK ? size : GHOST_COPY_CHUNK;

		ret = img_read_raw(img, buf, chunk);
		if (!ret) {
			/* A short write to a regular file means the filesystem is full. */
			ssize_t n = write(dst_fd, buf, chunk);

			if (n != (ssize_t)chunk) {
				ret = n < 0 ? -errno : -ENOSPC;
				pr_err("cannot write %s: %s\n", path, strerror(-ret));
			}
		}
		size -= chunk;
	}
	free(buf);
	return ret;
}

/*
 * The ghost goes back where it was, so /proc/PID/fd shows "path (deleted)" again. If
 * someone created a new file there since, a sibling name is the best we can do.
 */
static int create_ghost_file(const char *path, uint32_t ghost_id, char *created, size_t len)
{
	int fd;

	snprintf(created, len, "%s", path);
	fd = open(created, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		snprintf(created, len, "%s.cr-ghost-%u", path, ghost_id);
		pr_warn("deleted file %s: the path exists again, re-creating it as %s\n", path,
			created);
		fd = open(created, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		pr_perror("cannot re-create deleted file %s", created);
	return fd < 0 ? -errno : fd;
}

static int fill_ghost_file(int fd, const char *path, uint32_t ghost_id)
{
	struct cr_img *img = open_image(CR_IMG_GHOST_FILE, O_RDONLY, ghost_id);
	GhostFileEntry *ge;
	int ret;

	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&ge);
	if (ret) {
		close_image(img);
		return ret;
	}
	ret = copy_from_image(img, fd, path, ge->size);
	if (!ret && (fchown(fd, ge->uid, ge->gid) || fchmod(fd, ge->mode & 07777))) {
		ret = -errno;
		pr_perror("cannot set owner/mode of re-created %s", path);
	}
	pb_free(img, ge);
	close_image(img);
	return ret;
}

static int remember_restored_ghost(uint32_t ghost_id, int fd)
{
	struct restored_ghost *grown;
	struct stat st;

	if (fstat(fd, &st)) {
		pr_perror("cannot stat re-created ghost %u", ghost_id);
		return -errno;
	}
	grown = realloc(restored_ghosts, (nr_restored_ghosts + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("out of memory remembering ghost %u\n", ghost_id);
		return -ENOMEM;
	}
	restored_ghosts = grown;
	restored_ghosts[nr_restored_ghosts++] =
		(struct restored_ghost){ ghost_id, st.st_dev, st.st_ino };
	return 0;
}

/* Create, fill, open with the wanted flags, unlink. */
static int recreate_ghost(const RegFileEntry *rfe, int flags)
{
	char created[PATH_MAX + 32];
	int wfd, fd, ret;

	wfd = create_ghost_file(rfe->name, rfe->ghost_id, created, sizeof(created));
	if (wfd < 0)
		return wfd;
	ret = fill_ghost_file(wfd, created, rfe->ghost_id);
	fd = ret ? -1 : open(created, flags);
	if (!ret && fd < 0) {
		ret = -errno;
		pr_perror("cannot open re-created %s", created);
	}
	if (unlink(created) && !ret) {
		ret = -errno;
		pr_perror("cannot unlink re-created %s", created);
	}
	close(wfd);
	if (!ret)
		ret = remember_restored_ghost(rfe->ghost_id, fd);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	pr_debug("deleted file %s re-created from ghost %u\n", rfe->name, rfe->ghost_id);
	return fd;
}

/*
 * Every open of one deleted inode must reach the same inode again: if this task already
 * re-created it and still holds it open, reopen that through /proc; else re-create it.
 */
static int open_ghost(const RegFileEntry *rfe, int flags)
{
	for (size_t i = 0; i < nr_restored_ghosts; i++) {
		struct restored_ghost *g = &restored_ghosts[i];
		char link[64];
		int held, fd;

		if (g->id != rfe->ghost_id)
			continue;
		held = find_fd_on_inode(g->dev, g->ino);
		if (held == -ENOENT)
			break;
		if (held < 0)
			return held;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", held);
		fd = open(link, flags);
		if (fd < 0)
			pr_perror("cannot reopen deleted file %s through %s", rfe->name, link);
		return fd < 0 ? -errno : fd;
	}
	return recreate_ghost(rfe, flags);
}

static const char *file_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return "regular file";
	if (S_ISDIR(mode))
		return "directory";
	if (S_ISCHR(mode))
		return "character device";
	return "special file";
}

/* Restore must not silently open something other than what was dumped. */
static int check_reopened(int fd, const RegFileEntry *rfe)
{
	struct stat st;

	if (fstat(fd, &st)) {
		pr_perror("cannot stat reopened %s", rfe->name);
		return -errno;
	}
	if (rfe->has_mode && (st.st_mode & S_IFMT) != (rfe->mode & S_IFMT)) {
		pr_err("%s: was a %s at dump, is a %s now\n", rfe->name, file_kind(rfe->mode),
		       file_kind(st.st_mode));
		return -EINVAL;
	}
	if (rfe->has_size && S_ISREG(st.st_mode) && (uint64_t)st.st_size != rfe->size)
		pr_warn("%s: size changed since dump (%llu, now %lld bytes)\n", rfe->name,
			(unsigned long long)rfe->size, (long long)st.st_size);
	return 0;
}

static int reopen_reg(const RegFileEntry *rfe, uint32_t flags)
{
	int open_flags = (flags & ~REOPEN_DROP_FLAGS) | O_NOCTTY;
	int fd, ret;

	if (rfe->has_ghost_id) {
		fd = open_ghost(rfe, open_flags);
	} else {
		fd = open(rfe->name, open_flags);
		if (fd < 0) {
			fd = -errno;
			pr_perror("cannot open %s (flags %#o)", rfe->name, open_flags);
		}
	}
	if (fd < 0)
		return fd;
	ret = check_reopened(fd, rfe);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

static int reg_open(const FileEntry *fe)
{
	const RegFileEntry *rfe = fe->reg;
	int fd = reopen_reg(rfe, rfe->flags);

	/* An O_PATH fd has no offset (lseek fails with EBADF). */
	if (fd < 0 || (rfe->flags & O_PATH))
		return fd;
	if (lseek(fd, rfe->pos, SEEK_SET) < 0) {
		int err = errno;

		pr_err("%s: cannot restore offset %llu: %s\n", rfe->name,
		       (unsigned long long)rfe->pos, strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}

/* A deleted file is re-created once: every opening of its ghost must find that inode. */
static uint64_t reg_object_key(const FileEntry *fe)
{
	return fe->reg->has_ghost_id ? (uint64_t)fe->reg->ghost_id + 1 : 0;
}

int open_vma_file(uint32_t file_id, uint32_t fdflags)
{
	const FileEntry *fe = find_file_entry(file_id);

	if (!fe || !fe->reg) {
		pr_err("mapped file id %u is not a regular file in files.img\n", file_id);
		return -ENOENT;
	}
	return reopen_reg(fe->reg, fdflags);
}

const struct fdtype_ops reg_fdtype_ops = {
	.type = FD_TYPES__REG,
	.name = "regular file",
	.owns = reg_owns,
	.dump = reg_dump,
	.collect = reg_collect,
	.open = reg_open,
	.inheritable = true,
	.object_key = reg_object_key,
};
