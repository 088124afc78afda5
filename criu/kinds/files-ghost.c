/*
 * Deleted files (ghosts) of the regular-file kind. Dump saves an inode deleted while open
 * into ghost-file-ID.img: its attributes, and a regular file's data runs (holes stay holes,
 * within --ghost-limit). Restore collects those images, re-creates the inode at its path
 * (the deleted directories above it too, through a writable clone on a read-only mount)
 * with its attributes and contents, opens it and unlinks it again.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_options.h"
#include "files-reg-internal.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "servicefd.h"

#include "ghost-file.pb-c.h"

#define GHOST_COPY_CHUNK (1u << 20)

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
				pr_err("deleted file %s shrank while being saved (%llu bytes "
				       "missing)\n",
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

int ghost_dump(const char *src, const char *path, const struct stat *st, uint32_t *ghost_id)
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
		(struct dumped_ghost){st->st_dev, st->st_ino, *ghost_id};
	return 0;
}

/*
 * What a deleted inode may be to be re-created: a regular file (with its contents), a
 * symlink (with its target), a directory, a FIFO or a device node (mode and numbers).
 */
bool ghost_kind(mode_t mode)
{
	return S_ISREG(mode) || S_ISDIR(mode) || S_ISFIFO(mode) || S_ISCHR(mode) || S_ISBLK(mode) ||
	       S_ISLNK(mode);
}

/* ------------------------------------------------------------- restore ---- */

static struct ghost_file **ghosts;
size_t nr_ghosts;

/* remap-fpath.img: which file id is which ghost. */
struct ghost_remap {
	uint32_t file_id;
	struct ghost_file *ghost;
};

static struct ghost_remap *ghost_remaps;
size_t nr_ghost_remaps;

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

struct ghost_file *ghost_of_file(uint32_t file_id)
{
	for (size_t i = 0; i < nr_ghost_remaps; i++)
		if (ghost_remaps[i].file_id == file_id)
			return ghost_remaps[i].ghost;
	return NULL;
}

/* remap-fpath.img names file_id a ghost: its image is collected once, however many name it. */
int ghost_collect_remap(uint32_t file_id, uint32_t ghost_id)
{
	struct ghost_remap *grown;
	struct ghost_file *g;

	g = find_or_add_ghost(ghost_id);
	if (!g)
		return -EINVAL;
	grown = realloc(ghost_remaps, (nr_ghost_remaps + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("remap-fpath.img: out of memory\n");
		return -ENOMEM;
	}
	ghost_remaps = grown;
	ghost_remaps[nr_ghost_remaps++] = (struct ghost_remap){file_id, g};
	return 0;
}

/* The ghosts and their remaps, freed (reg_collect_fini()). */
void ghost_collect_fini(void)
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
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
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
	struct ghost_fill fill = {.fd = fd, .path = path, .buf = malloc(GHOST_COPY_CHUNK)};
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
	struct ghost_inode_req req = {.dir_fd = dir_fd, .path = path, .g = g};

	return make_as_tree_owner(make_ghost_inode_as_owner, &req, g->uid, g->gid);
}

static int mkdir_private(void *path)
{
	return mkdir(path, 0700) ? -errno : 0;
}

/*
 * mkdir() each missing directory above path, outermost first, remembering each one; made
 * by uid and gid, the owner of what goes in them.
 */
int ghost_make_parents(const char *path, uint32_t uid, uint32_t gid, struct ghost_parents *gp)
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
				pr_err("%s: more than %u deleted directories to re-create\n", path,
				       gp->nr);
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
void ghost_remove_parents(struct ghost_parents *gp)
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
	struct mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
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
			pr_err("deleted file %s: its read-only mount cannot be cloned writable: "
			       "%s\n",
			       path, strerror(-*rw_dir));
			return -EROFS;
		}
		path = strrchr(path, '/') + 1;
		snprintf(created, len, "%s", path);
		fd = make_ghost_inode(*rw_dir, created, g);
	}
	if (fd == -EEXIST) {
		if ((size_t)snprintf(created, len, "%s.cr-ghost-%x", path, g->id) >= len) {
			pr_err("deleted file %s: the path exists again and a sibling name is too "
			       "long\n",
			       path);
			return -ENAMETOOLONG;
		}
		pr_warn("deleted file %s: the path exists again, re-creating it as %s\n", path,
			created);
		fd = make_ghost_inode(*rw_dir >= 0 ? *rw_dir : AT_FDCWD, created, g);
	}
	if (fd < 0)
		pr_err("cannot re-create deleted %s %s: %s\n", reg_file_kind(g->mode), created,
		       strerror(-fd));
	return fd;
}

/*
 * A node's owner (through fd, its O_PATH fd), mode and times, set by its name (relative to
 * dir_fd): an O_PATH fd cannot chmod.
 */
static int restore_node_attrs(int fd, int dir_fd, const char *path, const struct ghost_file *g)
{
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
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
	ret = ghost_make_parents(rf->path, g->uid, g->gid, &parents);
	wfd = ret ? ret : create_ghost_file(rf->path, g, created, sizeof(created), &rw_dir);
	if (wfd < 0) {
		ghost_remove_parents(&parents);
		return wfd;
	}
	made_in = rw_dir >= 0 ? rw_dir : AT_FDCWD;
	ret = S_ISREG(g->mode) ? fill_ghost_file(wfd, created, g)
			       : restore_node_attrs(wfd, made_in, created, g);
	if (!ret) {
		/* Through the fd, not the name: the inode just made, whatever the name is now. */
		fd = rw_dir >= 0 ? open_on_readonly_mount(rf->path, created, wfd, flags, g->mode)
				 : reopen_inode(wfd, flags, g->mode);
		if (fd < 0) {
			ret = fd;
			pr_err("cannot open re-created %s: %s\n", created, strerror(-fd));
		}
	}
	if (unlinkat(made_in, created, S_ISDIR(g->mode) ? AT_REMOVEDIR : 0) && !ret) {
		ret = -errno;
		pr_perror("cannot remove re-created %s", created);
	}
	ghost_remove_parents(&parents);
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
	pr_debug("deleted %s %s re-created from ghost %#x\n", reg_file_kind(g->mode), rf->path,
		 g->id);
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
	} h = {.fh.handle_bytes = MAX_HANDLE_SZ};
	int dir = S_ISLNK(mode) ? -1 : other_mount_dir(path, held), on_mount, fd, mount_id;
	const char *why = "name_to_handle_at";

	if (dir < 0)
		return reopen_inode(held, flags, mode);
	on_mount = name_to_handle_at(held, "", &h.fh, &mount_id, AT_EMPTY_PATH)
			   ? -errno
			   : userns_open_handle(dir, &h.fh, &why);
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
int ghost_open(const struct reg_file *rf, int flags)
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
