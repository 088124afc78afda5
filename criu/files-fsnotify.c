/*
 * inotify instances (file_entry.ify): the description's flags and every watch, each with
 * its wd, mask and the watched inode named by a file handle, as /proc/PID/fdinfo shows
 * them. Restore opens each inode by its handle and adds the watches back under their
 * dumped wd numbers. Events queued at dump time are not restored: the kernel offers no way
 * to read them without consuming them, nor to queue them again (as in CRIU).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"
#include "log.h"

#include "fsnotify.pb-c.h"

#define INOTIFY_LINK "anon_inode:inotify"

/*
 * What fdinfo shows of a watch's mask (the kernel's inotify_mark_user_mask()): the events
 * and the two flags the mark keeps. The add-time flags (IN_ONLYDIR, IN_DONT_FOLLOW,
 * IN_MASK_ADD, IN_MASK_CREATE) only steer inotify_add_watch() and are not kept.
 */
#define INOTIFY_KEPT_MASK (IN_ALL_EVENTS | IN_ONESHOT | IN_EXCL_UNLINK)
/* FS_EVENT_ON_CHILD: older kernels showed it for directories; the kernel sets it again. */
#define INOTIFY_OLD_CHILD_BIT 0x08000000u

#define HANDLE_WORDS FH_ENTRY_SIZES__min_entries

/* ------------------------------------------------- watched inodes by handle ---- */

/* A watched inode as the image names it. */
struct watched_inode {
	uint64_t ino;
	uint32_t s_dev; /* the kernel's encoding, as fdinfo shows it */
	int handle_type;
	uint32_t handle_bytes;
	unsigned char handle[MAX_HANDLE_SZ];
	const char *path; /* fh_entry.path, in the collected entry; or NULL */
};

/* mountinfo escapes blanks and backslashes in paths as \ooo. */
static void unescape_mountinfo(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0');
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/*
 * The directory of mount mnt_id at mount_point, O_PATH; -1 when it is not one (a mount
 * of a file) or another mount now covers it.
 */
static int open_uncovered_mount(const char *mount_point, unsigned int mnt_id)
{
	struct statx stx;
	int fd = open(mount_point, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID) ||
	    stx.stx_mnt_id != mnt_id) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A directory of criu's mount table on the filesystem s_dev (O_PATH), or -errno with *why
 * set to the step that failed.
 */
static int open_mount_of(uint32_t s_dev, const char **why)
{
	unsigned int maj = s_dev >> 20, min = s_dev & 0xfffff;
	char *line = NULL;
	size_t size = 0;
	int fd = -1;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		*why = "cannot read /proc/self/mountinfo";
		return -errno;
	}
	while (fd < 0 && getline(&line, &size, f) > 0) {
		unsigned int mnt_id, line_maj, line_min;
		char mount_point[4096];

		if (sscanf(line, "%u %*u %u:%u %*s %4095s", &mnt_id, &line_maj, &line_min,
			   mount_point) != 4 ||
		    line_maj != maj || line_min != min)
			continue;
		unescape_mountinfo(mount_point);
		fd = open_uncovered_mount(mount_point, mnt_id);
	}
	free(line);
	fclose(f);
	if (fd < 0) {
		*why = "no directory of its filesystem is mounted here";
		return -ENOENT;
	}
	return fd;
}

/*
 * open_by_handle_at() finds the filesystem through a mount fd but refuses an O_PATH one,
 * and opening the mount's directory for reading is itself an event (IN_OPEN,
 * IN_CLOSE_NOWRITE) that watches restored before, on that directory, would queue. Given
 * AT_FDCWD it takes the working directory's mount, and chdir is no event: the handle is
 * opened from inside the mount and the working directory put back at once. O_PATH: the
 * inode is not opened for I/O, so no event either. The fd, or -errno and *why.
 */
static int open_handle_in_mount(int mnt_fd, const struct watched_inode *wi, const char **why)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h;
	int cwd_fd, fd, err = 0;

	h.fh.handle_bytes = wi->handle_bytes;
	h.fh.handle_type = wi->handle_type;
	memcpy(h.fh.f_handle, wi->handle, wi->handle_bytes);
	cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd_fd < 0) {
		*why = "cannot open criu's working directory";
		return -errno;
	}
	*why = "cannot enter its mount";
	if (fchdir(mnt_fd)) {
		err = errno;
		close(cwd_fd);
		return -err;
	}
	fd = open_by_handle_at(AT_FDCWD, &h.fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		*why = "open_by_handle_at";
	}
	if (fchdir(cwd_fd)) {
		err = errno;
		*why = "cannot return to criu's working directory";
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	close(cwd_fd);
	return fd >= 0 ? fd : -err;
}

/* By its handle: the fd (O_PATH) or -errno and *why. */
static int open_by_watched_handle(const struct watched_inode *wi, const char **why)
{
	int mnt_fd, fd;

	mnt_fd = open_mount_of(wi->s_dev, why);
	if (mnt_fd < 0)
		return mnt_fd;
	fd = open_handle_in_mount(mnt_fd, wi, why);
	close(mnt_fd);
	return fd;
}

/* By the image's path, taken from the root: the fd (O_PATH) or -errno and *why. */
static int open_by_image_path(const struct watched_inode *wi, const char **why)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "/%s", wi->path + (wi->path[0] == '/'));
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		*why = "neither by its handle nor by its path in the image";
		return -errno;
	}
	return fd;
}

/*
 * The watched inode, O_PATH: by its handle, else by the path the image may carry;
 * it must be the inode dumped (a handle or a path could name a reused one). The fd, or
 * -errno after one line naming what, the inode and why.
 */
static int open_watched_inode(const struct watched_inode *wi, struct stat *st, const char *what)
{
	const char *why = NULL;
	int fd;

	fd = open_by_watched_handle(wi, &why);
	if (fd < 0 && wi->path)
		fd = open_by_image_path(wi, &why);
	if (fd >= 0 && fstat(fd, st)) {
		int err = errno;

		why = "fstat";
		close(fd);
		fd = -err;
	}
	if (fd >= 0 && (uint64_t)st->st_ino != wi->ino) {
		why = "its handle now names another inode";
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0)
		pr_err("%s: watched inode %#llx on device %u:%u cannot be found (%s: %s)\n", what,
		       (unsigned long long)wi->ino, wi->s_dev >> 20, wi->s_dev & 0xfffff, why,
		       strerror(-fd));
	return fd;
}

/* ---------------------------------------------------------------- dump ---- */

/* One watch as dump writes it, with the storage its entry points into. */
struct dumped_watch {
	InotifyWdEntry wde;
	FhEntry fh;
	uint64_t handle[HANDLE_WORDS];
	char *path; /* fh.path, malloc'ed; or NULL */
};

static void free_watches(struct dumped_watch *watches, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(watches[i].path);
	free(watches);
}

static bool inotify_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, INOTIFY_LINK);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The f_handle hex of an fdinfo line into buf (len bytes): 0, or -EINVAL. */
static int parse_handle_hex(const char *hex, unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hi < 0 ? -1 : hex_digit(hex[2 * i + 1]);

		if (lo < 0)
			return -EINVAL;
		buf[i] = hi << 4 | lo;
	}
	return 0;
}

/*
 * "inotify wd:%x ino:%lx sdev:%x mask:%x ignored_mask:%x fhandle-bytes:%x fhandle-type:%x
 * f_handle:HEX" (every number in hex) into w; the kernel leaves the handle out where the
 * filesystem cannot encode one.
 */
static int parse_watch_line(const char *line, struct dumped_watch *w, const char *what)
{
	unsigned int wd, sdev, mask, ignored, bytes, type;
	unsigned long long ino;
	int hex_at = 0, n;

	*w = (struct dumped_watch){ .wde = INOTIFY_WD_ENTRY__INIT, .fh = FH_ENTRY__INIT };
	n = sscanf(line,
		   "inotify wd:%x ino:%llx sdev:%x mask:%x ignored_mask:%x fhandle-bytes:%x "
		   "fhandle-type:%x f_handle:%n",
		   &wd, &ino, &sdev, &mask, &ignored, &bytes, &type, &hex_at);
	if (n < 5) {
		pr_err("%s: cannot parse its fdinfo line: %s", what, line);
		return -EINVAL;
	}
	if (n < 7 || !hex_at) {
		pr_err("%s: watch wd %u on inode %#llx of device %u:%u has no file handle (its "
		       "filesystem cannot name it): not supported\n",
		       what, wd, ino, sdev >> 20, sdev & 0xfffff);
		return -ENOTSUP;
	}
	if (bytes > MAX_HANDLE_SZ ||
	    parse_handle_hex(line + hex_at, (unsigned char *)w->handle, bytes)) {
		pr_err("%s: bad file handle of watch wd %u in fdinfo: %s", what, wd, line);
		return -EINVAL;
	}
	w->wde.wd = wd;
	w->wde.i_ino = ino;
	w->wde.s_dev = sdev;
	w->wde.mask = mask;
	w->wde.ignored_mask = ignored;
	w->fh.bytes = bytes;
	w->fh.type = type;
	return 0;
}

/* The watches fdinfo lists for p, in its order. */
static int read_watches(const struct fd_parms *p, struct dumped_watch **out, size_t *nr_out,
			const char *what)
{
	struct dumped_watch *watches = NULL;
	char path[64], *line = NULL;
	size_t nr = 0, size = 0;
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", p->pid, p->fd);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("%s: cannot open %s", what, path);
		return -errno;
	}
	while (!ret && getline(&line, &size, f) > 0) {
		struct dumped_watch *grown;

		if (strncmp(line, "inotify ", 8))
			continue;
		grown = realloc(watches, (nr + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("%s: out of memory reading %zu watches\n", what, nr + 1);
			ret = -ENOMEM;
			break;
		}
		watches = grown;
		ret = parse_watch_line(line, &watches[nr++], what);
	}
	free(line);
	fclose(f);
	if (ret) {
		free_watches(watches, nr);
		return ret;
	}
	*out = watches;
	*nr_out = nr;
	return 0;
}

static struct watched_inode watched_inode_of(const InotifyWdEntry *wde, const FhEntry *fh,
					     const uint64_t *handle)
{
	struct watched_inode wi = {
		.ino = wde->i_ino,
		.s_dev = wde->s_dev,
		.handle_type = fh->type,
		.handle_bytes = fh->bytes,
		.path = fh->path,
	};

	memcpy(wi.handle, handle, fh->bytes);
	return wi;
}

/*
 * A path to the inode beside its handle, as upstream criu writes (its restore opens the
 * path, and the handle only with the mount images it dumps): the name the kernel gives the
 * opened inode, when that still leads to it. *path stays NULL when no name does.
 */
static int find_watched_path(int fd, const struct stat *st, char **path, const char *what)
{
	char link[32], name[PATH_MAX];
	struct stat now;
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, name, sizeof(name) - 1);
	if (len <= 0 || name[0] != '/')
		return 0;
	name[len] = '\0';
	/* lstat: a watched symlink is named by its own path. */
	if (lstat(name, &now) || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		pr_debug("%s: inode %#llx is not reachable as %s\n", what,
			 (unsigned long long)st->st_ino, name);
		return 0;
	}
	*path = strdup(name);
	if (!*path) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	return 0;
}

/*
 * Restore finds the inode by its handle: it must open now. A deleted inode that an open
 * file still keeps opens too, but it will be gone by then (a deleted file comes back as a
 * new inode): refused.
 */
static int check_watch_restorable(struct dumped_watch *w, const char *fd_what)
{
	struct watched_inode wi = watched_inode_of(&w->wde, &w->fh, w->handle);
	char what[96];
	struct stat st;
	int fd, ret = 0;

	snprintf(what, sizeof(what), "%s, watch wd %u", fd_what, w->wde.wd);
	fd = open_watched_inode(&wi, &st, what);
	if (fd < 0)
		return fd;
	if (st.st_nlink == 0) {
		pr_err("%s: watched inode %#llx on device %u:%u is deleted: not supported\n", what,
		       (unsigned long long)wi.ino, wi.s_dev >> 20, wi.s_dev & 0xfffff);
		ret = -ENOTSUP;
	}
	if (!ret)
		ret = find_watched_path(fd, &st, &w->path, what);
	close(fd);
	return ret;
}

static int cmp_dumped_wd(const void *a, const void *b)
{
	uint32_t x = ((const struct dumped_watch *)a)->wde.wd;
	uint32_t y = ((const struct dumped_watch *)b)->wde.wd;

	return (x > y) - (x < y);
}

/* In ascending wd order, the order restore adds them in. */
static int write_inotify_entry(const struct fd_parms *p, uint32_t id, struct dumped_watch *w,
			       size_t nr, const char *what)
{
	InotifyFileEntry ife = INOTIFY_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	InotifyWdEntry **wdes;
	int ret;

	wdes = calloc(nr ? nr : 1, sizeof(*wdes));
	if (!wdes) {
		pr_err("%s: out of memory writing %zu watches\n", what, nr);
		return -ENOMEM;
	}
	if (nr) /* else w is NULL */
		qsort(w, nr, sizeof(*w), cmp_dumped_wd);
	for (size_t i = 0; i < nr; i++) {
		w[i].fh.n_handle = HANDLE_WORDS;
		w[i].fh.handle = w[i].handle;
		w[i].fh.path = w[i].path;
		w[i].wde.f_handle = &w[i].fh;
		wdes[i] = &w[i].wde;
	}
	ife.id = id;
	ife.flags = p->flags;
	ife.fown = &fown;
	ife.n_wd = nr;
	ife.wd = wdes;
	fe.type = FD_TYPES__INOTIFY;
	fe.id = id;
	fe.ify = &ife;
	ret = write_file_entry(&fe);
	free(wdes);
	return ret;
}

static int inotify_dump(const struct fd_parms *p, uint32_t id)
{
	struct dumped_watch *watches = NULL;
	char what[64];
	size_t nr = 0;
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (inotify)", p->fd, p->pid);
	/* inotify_init1() sets O_NONBLOCK alone; O_ASYNC would need the owner, not dumped. */
	if (p->flags & ~O_NONBLOCK) {
		pr_err("%s: file flags %#o: only O_NONBLOCK is supported\n", what, p->flags);
		return -ENOTSUP;
	}
	ret = read_watches(p, &watches, &nr, what);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr && !ret; i++)
		ret = check_watch_restorable(&watches[i], what);
	if (!ret)
		ret = write_inotify_entry(p, id, watches, nr, what);
	free_watches(watches, nr);
	if (!ret)
		pr_info("%s: %zu watches\n", what, nr);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

struct inotify_watch {
	struct watched_inode inode;
	int wd;
	uint32_t mask; /* for inotify_add_watch() */
};

/* d->kind of an inotify entry: one allocation (files.c frees it). */
struct inotify_desc {
	uint32_t flags;
	size_t nr_watches;
	struct inotify_watch watches[]; /* ascending wd */
};

static int collect_watch(const struct file_desc *d, const InotifyWdEntry *wde,
			 struct inotify_watch *w)
{
	const FhEntry *fh = wde->f_handle;
	uint32_t stray = wde->mask & ~(INOTIFY_KEPT_MASK | INOTIFY_OLD_CHILD_BIT);

	if (wde->id && wde->id != d->id) {
		pr_err("files.img: inotify file %u: its watch wd %u names file %u\n", d->id,
		       wde->wd, wde->id);
		return -EINVAL;
	}
	if (wde->wd == 0 || wde->wd > INT32_MAX) {
		pr_err("files.img: inotify file %u: %u is not a watch descriptor\n", d->id,
		       wde->wd);
		return -EINVAL;
	}
	if (stray || wde->ignored_mask) {
		pr_err("files.img: inotify file %u: watch wd %u has mask %#x, ignored mask %#x: "
		       "bits inotify does not keep\n",
		       d->id, wde->wd, wde->mask, wde->ignored_mask);
		return -EINVAL;
	}
	if (fh->bytes > MAX_HANDLE_SZ || fh->bytes > fh->n_handle * sizeof(*fh->handle)) {
		pr_err("files.img: inotify file %u: watch wd %u has a %u-byte file handle in %zu "
		       "words\n",
		       d->id, wde->wd, fh->bytes, fh->n_handle);
		return -EINVAL;
	}
	w->inode = watched_inode_of(wde, fh, fh->handle);
	w->wd = wde->wd;
	w->mask = wde->mask & INOTIFY_KEPT_MASK;
	return 0;
}

static int cmp_watch_wd(const void *a, const void *b)
{
	int x = ((const struct inotify_watch *)a)->wd, y = ((const struct inotify_watch *)b)->wd;

	return (x > y) - (x < y);
}

/*
 * Sorted by wd, each wd once; and every watched inode must be found now, so that a missing
 * one stops the restore before any task exists.
 */
static int check_watches(const struct file_desc *d, const struct inotify_desc *in)
{
	for (size_t i = 0; i < in->nr_watches; i++) {
		char what[64];
		struct stat st;
		int fd;

		snprintf(what, sizeof(what), "files.img: inotify file %u, watch wd %d", d->id,
			 in->watches[i].wd);
		if (i && in->watches[i].wd == in->watches[i - 1].wd) {
			pr_err("%s: appears twice\n", what);
			return -EINVAL;
		}
		fd = open_watched_inode(&in->watches[i].inode, &st, what);
		if (fd < 0)
			return fd;
		close(fd);
	}
	return 0;
}

static int inotify_collect(struct file_desc *d)
{
	const InotifyFileEntry *ife = d->fe->ify;
	struct inotify_desc *in;
	int ret;

	if (!ife || ife->id != d->id) {
		pr_err("files.img: inotify file %u has no inotify entry of its own\n", d->id);
		return -EINVAL;
	}
	if (ife->flags & ~O_NONBLOCK) {
		pr_err("files.img: inotify file %u: flags %#o: only O_NONBLOCK is supported\n",
		       d->id, ife->flags);
		return -ENOTSUP;
	}
	ret = collect_owner(d, ife->fown);
	if (ret)
		return ret;
	in = malloc(sizeof(*in) + ife->n_wd * sizeof(in->watches[0]));
	if (!in) {
		pr_err("files.img: out of memory collecting inotify file %u (%zu watches)\n", d->id,
		       ife->n_wd);
		return -ENOMEM;
	}
	d->kind = in;
	in->flags = ife->flags;
	in->nr_watches = ife->n_wd;
	for (size_t i = 0; i < ife->n_wd; i++) {
		ret = collect_watch(d, ife->wd[i], &in->watches[i]);
		if (ret)
			return ret;
	}
	/* Upstream criu writes them in the order fdinfo lists them: newest first. */
	if (in->nr_watches)
		qsort(in->watches, in->nr_watches, sizeof(in->watches[0]), cmp_watch_wd);
	return check_watches(d, in);
}

/*
 * wd numbers come from idr_alloc_cyclic(): a new watch gets the lowest free number above
 * the last one handed out (1 in a fresh instance), never a lower one until they wrap at
 * INT_MAX. So the watches are added in ascending wd order, and the numbers below each one's
 * are used up by adding it and removing it again until the kernel hands out the dumped
 * number: a removed wd is not given out again. Each removal queues an IN_IGNORED event,
 * drained once all are in place.
 *
 * The inode is named by its magic link /proc/self/fd/N, not by a path: a path may not lead
 * there from here, and a watched symlink would be followed to its target.
 */
static int add_watch_at_wd(int ifd, const struct inotify_desc *in, size_t idx, uint32_t id)
{
	const struct inotify_watch *w = &in->watches[idx];
	int last_wd = idx ? in->watches[idx - 1].wd : 0;
	char what[64], path[32];
	struct stat st;
	int inode_fd, wd, err;

	snprintf(what, sizeof(what), "inotify file %u, watch wd %d", id, w->wd);
	inode_fd = open_watched_inode(&w->inode, &st, what);
	if (inode_fd < 0)
		return inode_fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", inode_fd);
	while ((wd = inotify_add_watch(ifd, path, w->mask)) > last_wd && wd < w->wd)
		if (inotify_rm_watch(ifd, wd))
			break;
	err = errno;
	close(inode_fd);
	if (wd < 0 || (wd > last_wd && wd < w->wd)) {
		pr_err("%s: cannot %s it on inode %#llx: %s\n", what, wd < 0 ? "add" : "number",
		       (unsigned long long)w->inode.ino, strerror(err));
		return -err;
	}
	if (wd != w->wd) {
		/* An earlier watch's wd: the image names its inode twice. */
		pr_err("%s: on inode %#llx, it came back as wd %d\n", what,
		       (unsigned long long)w->inode.ino, wd);
		return -EINVAL;
	}
	return 0;
}

/* What the restore queued (IN_IGNORED of the removed watches) is not the task's. */
static int drain_events(int ifd, uint32_t id)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n;

	while ((n = read(ifd, buf, sizeof(buf))) > 0)
		;
	if (n < 0 && errno != EAGAIN) {
		pr_perror("inotify file %u: cannot drain its queue", id);
		return -errno;
	}
	return 0;
}

static int inotify_open(const struct file_desc *d)
{
	const struct inotify_desc *in = d->kind;
	int ifd, ret = 0;

	/* Non-blocking until drained; the dumped flags are set last. */
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd < 0) {
		pr_perror("inotify file %u: inotify_init1", d->id);
		return -errno;
	}
	for (size_t i = 0; i < in->nr_watches && !ret; i++)
		ret = add_watch_at_wd(ifd, in, i, d->id);
	if (!ret)
		ret = drain_events(ifd, d->id);
	if (!ret && fcntl(ifd, F_SETFL, in->flags)) {
		pr_perror("inotify file %u: cannot set its flags %#o", d->id, in->flags);
		ret = -errno;
	}
	if (ret) {
		close(ifd);
		return ret;
	}
	pr_debug("inotify file %u: %zu watches\n", d->id, in->nr_watches);
	return ifd;
}

const struct fdtype_ops inotify_fdtype_ops = {
	.type = FD_TYPES__INOTIFY,
	.name = "inotify",
	.owns = inotify_owns,
	.dump = inotify_dump,
	.collect = inotify_collect,
	.open = inotify_open,
	.inheritable = true,
};
