/*
 * inotify instances (file_entry.ify) and fanotify groups (file_entry.ffy): the flags and
 * every watch or mark, the watched inodes named by file handles, as /proc/PID/fdinfo shows
 * them. Restore opens each inode by its handle and adds the watches back under their
 * dumped wd numbers, the marks in their dumped order. Events queued at dump time are not
 * restored: the kernel offers no way to read them without consuming them, nor to queue
 * them again (as in CRIU).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cr_options.h"
#include "fhandle.h"
#include "files.h"
#include "irmap.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "servicefd.h"

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
	int32_t mnt_id;	  /* fh_entry.mnt_id: a mount of the namespace path is in; or -1 */
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
 * The root of mount mnt_id through its mount point, O_PATH; -1 when that is not a
 * directory (a file bind-mounted) or another mount now covers it.
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

/* A mount as /proc/self/mountinfo lists it. */
struct mount_line {
	unsigned int id;
	unsigned int major, minor;
	char point[4096];
	pid_t pid; /* dump: a task of the tree's mount namespace it is in; 0: criu's */
};

/*
 * The root of the first mount of the mountinfo file of who (self, or a PID) that match()
 * takes and that its mount point reaches (O_PATH) through root (who's root, for PID), *m
 * filled in (its mount point as who sees it); -ENOENT when there is none.
 */
static int open_mount_of(const char *who, const char *root,
			 bool (*match)(const struct mount_line *m, const void *arg), const void *arg,
			 struct mount_line *m)
{
	char path[64], point[4096 + 64], *line = NULL;
	size_t size = 0;
	int fd = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/mountinfo", who);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fd < 0 && getline(&line, &size, f) > 0) {
		if (sscanf(line, "%u %*u %u:%u %*s %4095s", &m->id, &m->major, &m->minor,
			   m->point) != 4 ||
		    !match(m, arg))
			continue;
		unescape_mountinfo(m->point);
		snprintf(point, sizeof(point), "%s%s", root, m->point);
		fd = open_uncovered_mount(point, m->id);
		if (fd < 0)
			fd = -ENOENT;
	}
	free(line);
	fclose(f);
	return fd;
}

/*
 * The same (at dump) in each mount namespace of the tree's own, through a task in it, then
 * in criu's table: a path found through a mount of the tree's is the one the tree knows.
 */
static int open_mount(bool (*match)(const struct mount_line *m, const void *arg),
		      const void *arg, struct mount_line *m)
{
	int fd = -ENOENT;
	pid_t pid;

	for (unsigned int i = 0; fd < 0 && (pid = mntns_dump_pid(i)); i++) {
		char who[16], root[32];

		snprintf(who, sizeof(who), "%d", pid);
		snprintf(root, sizeof(root), "/proc/%d/root", pid);
		fd = open_mount_of(who, root, match, arg, m);
		m->pid = pid;
	}
	if (fd < 0) {
		fd = open_mount_of("self", "", match, arg, m);
		m->pid = 0;
	}
	return fd;
}

static bool mount_has_dev(const struct mount_line *m, const void *s_dev)
{
	return m->major == *(const uint32_t *)s_dev >> 20 &&
	       m->minor == (*(const uint32_t *)s_dev & 0xfffff);
}

static bool mount_has_id(const struct mount_line *m, const void *mnt_id)
{
	return m->id == *(const unsigned int *)mnt_id;
}

/* By its handle: the fd (O_PATH) or -errno and *why; *m the mount it was opened through. */
static int open_by_watched_handle(const struct watched_inode *wi, const char **why,
				  struct mount_line *m)
{
	int mnt_fd, fd;

	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h;

	mnt_fd = open_mount(mount_has_dev, &wi->s_dev, m);
	if (mnt_fd < 0) {
		*why = "no directory of its filesystem is mounted here";
		return mnt_fd;
	}
	h.fh.handle_bytes = wi->handle_bytes;
	h.fh.handle_type = wi->handle_type;
	memcpy(h.fh.f_handle, wi->handle, wi->handle_bytes);
	fd = userns_open_handle(mnt_fd, &h.fh, why);
	close(mnt_fd);
	return fd;
}

/*
 * By the image's path, taken from the root of the mount namespace of its mount (a restored
 * one: in a task, once the namespaces are built), else the task's own: the fd (O_PATH) or
 * -errno and *why.
 */
static int open_by_image_path(const struct watched_inode *wi, const char **why)
{
	char path[PATH_MAX];
	int64_t own_mntns = mntns_enter_mount(wi->mnt_id);
	int fd, err;

	if (own_mntns < 0) {
		*why = "cannot enter the mount namespace of its path";
		return own_mntns;
	}
	snprintf(path, sizeof(path), "/%s", wi->path + (wi->path[0] == '/'));
	fd = open(path, O_PATH | O_CLOEXEC);
	err = errno;
	if (mntns_enter(own_mntns)) {
		if (fd >= 0)
			close(fd);
		*why = "cannot return to its own mount namespace";
		return -EIO;
	}
	if (fd < 0) {
		*why = "neither by its handle nor by its path in the image";
		return -err;
	}
	return fd;
}

/* Whether the inode st is on the filesystem the image names (s_dev, the kernel's encoding). */
static bool on_dumped_fs(const struct stat *st, uint32_t s_dev)
{
	return major(st->st_dev) == s_dev >> 20 && minor(st->st_dev) == (s_dev & 0xfffff);
}

/*
 * The watched inode, O_PATH: by its handle, else by the path the image may carry;
 * it must be the inode dumped (a handle or a path could name a reused one), unless the
 * path leads to another filesystem: one the restore made anew (a tmpfs), whose inode
 * numbers are new. The fd, or -errno after one line naming what, the inode and why;
 * *where: the mount the handle was opened through (where not NULL).
 */
static int open_watched_inode(const struct watched_inode *wi, struct stat *st, const char *what,
			      struct mount_line *where)
{
	struct mount_line m = { .pid = 0 };
	const char *why = NULL;
	bool by_path = false;
	int fd;

	fd = open_by_watched_handle(wi, &why, &m);
	if (fd < 0 && wi->path) {
		fd = open_by_image_path(wi, &why);
		by_path = true;
	}
	if (fd >= 0 && fstat(fd, st)) {
		int err = errno;

		why = "fstat";
		close(fd);
		fd = -err;
	}
	if (where)
		*where = m;
	if (fd >= 0 && (uint64_t)st->st_ino != wi->ino &&
	    (!by_path || on_dumped_fs(st, wi->s_dev))) {
		why = "another inode is there now";
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0)
		pr_err("%s: watched inode %#llx on device %u:%u cannot be found (%s: %s)\n", what,
		       (unsigned long long)wi->ino, wi->s_dev >> 20, wi->s_dev & 0xfffff, why,
		       strerror(-fd));
	return fd;
}

/*
 * Whether the inode can only be looked for once the tree's mount namespaces exist, in a
 * task: its path is in one of them (a restored tmpfs has new handles and a new device).
 */
static bool found_in_restored_mntns(const struct watched_inode *wi)
{
	return wi->path && mntns_restored() && mntns_has_mount(wi->mnt_id);
}

/* The inode an image entry names; the handle's words are checked to hold fh->bytes. */
static struct watched_inode watched_inode_of(uint64_t ino, uint32_t s_dev, const FhEntry *fh,
					     const uint64_t *words)
{
	struct watched_inode wi = {
		.ino = ino,
		.s_dev = s_dev,
		.handle_type = fh->type,
		.handle_bytes = fh->bytes,
		.path = fh->path,
		.mnt_id = fh->has_mnt_id ? (int32_t)fh->mnt_id : -1,
	};

	memcpy(wi.handle, words, fh->bytes);
	return wi;
}

/* An image's fh_entry must hold its bytes: 0, or -EINVAL after a line naming what. */
static int check_fh_entry(const FhEntry *fh, const char *what)
{
	if (fh->bytes > MAX_HANDLE_SZ || fh->bytes > fh->n_handle * sizeof(*fh->handle)) {
		pr_err("%s: a %u-byte file handle in %zu words\n", what, fh->bytes, fh->n_handle);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------- dump, both kinds ---- */

/* A watched inode's handle as dump writes it, with the storage its fh_entry points into. */
struct dumped_handle {
	FhEntry fh;
	uint64_t words[HANDLE_WORDS];
	char *path; /* fh.path, malloc'ed; or NULL */
};

/* Once the array holding h stops moving. */
static void link_dumped_handle(struct dumped_handle *h)
{
	h->fh.n_handle = HANDLE_WORDS;
	h->fh.handle = h->words;
	h->fh.path = h->path;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * "fhandle-bytes:%x fhandle-type:%x f_handle:HEX" at s, which ends a mark's fdinfo line,
 * into h. The kernel leaves it out where the filesystem cannot encode a handle.
 */
static int parse_fdinfo_handle(const char *s, struct dumped_handle *h, const char *what)
{
	unsigned int bytes, type;
	unsigned char *buf = (unsigned char *)h->words;
	int hex_at = 0, n;

	*h = (struct dumped_handle){ .fh = FH_ENTRY__INIT };
	n = sscanf(s, "fhandle-bytes:%x fhandle-type:%x f_handle:%n", &bytes, &type, &hex_at);
	if (n != 2 || !hex_at) {
		pr_err("%s: no file handle in fdinfo (its filesystem cannot name it): not "
		       "supported\n",
		       what);
		return -ENOTSUP;
	}
	if (bytes > MAX_HANDLE_SZ) {
		pr_err("%s: a %u-byte file handle in fdinfo\n", what, bytes);
		return -EINVAL;
	}
	for (size_t i = 0; i < bytes; i++) {
		int hi = hex_digit(s[hex_at + 2 * i]);
		int lo = hi < 0 ? -1 : hex_digit(s[hex_at + 2 * i + 1]);

		if (lo < 0) {
			pr_err("%s: bad file handle in fdinfo: %s", what, s);
			return -EINVAL;
		}
		buf[i] = hi << 4 | lo;
	}
	h->fh.bytes = bytes;
	h->fh.type = type;
	return 0;
}

/*
 * A path to the inode beside its handle, as upstream criu writes (its restore opens the
 * path, and the handle only with the mount images it dumps): the name the kernel gives the
 * opened inode, when that still leads to it. The kernel names it from the root of the
 * mount namespace of the mount m it was opened through; one of the tree's (m->pid) is
 * named by that mount's id too (fh_entry.mnt_id), as restore makes it anew: a tmpfs, whose
 * handles do not survive. h->path stays NULL when no name leads to it.
 */
static int find_watched_path(int fd, const struct stat *st, const struct mount_line *m,
			     struct dumped_handle *h, const char *what)
{
	char link[32], name[PATH_MAX], where[PATH_MAX + 32];
	struct stat now;
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, name, sizeof(name) - 1);
	if (len <= 0 || name[0] != '/')
		return 0;
	name[len] = '\0';
	if (m->pid)
		snprintf(where, sizeof(where), "/proc/%d/root%s", m->pid, name);
	else
		snprintf(where, sizeof(where), "%s", name);
	/* lstat: a watched symlink is named by its own path. */
	if (lstat(where, &now) || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		pr_debug("%s: inode %#llx is not reachable as %s\n", what,
			 (unsigned long long)st->st_ino, where);
		return 0;
	}
	h->path = strdup(name);
	if (!h->path) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	h->fh.has_mnt_id = m->pid != 0;
	h->fh.mnt_id = m->id;
	return 0;
}

/* Whether a task of the tree has st's inode open: an fd of one (deleted: a ghost). */
static bool tree_holds_inode(const struct stat *st)
{
	struct pstree_item *item;
	bool found = false;

	for (item = root_item; item && !found; item = pstree_next(item)) {
		char dir[32];
		int *fds;
		size_t nr;

		snprintf(dir, sizeof(dir), "/proc/%d/fd", item->pid);
		if (item->zombie || list_fds(dir, &fds, &nr))
			continue;
		for (size_t i = 0; i < nr && !found; i++) {
			char link[64];
			struct stat fst;

			snprintf(link, sizeof(link), "%s/%d", dir, fds[i]);
			found = !stat(link, &fst) && fst.st_dev == st->st_dev &&
				fst.st_ino == st->st_ino;
		}
		free(fds);
	}
	return found;
}

/*
 * Restore finds the inode by its handle: it must open now. A deleted inode lives only as
 * long as something holds it open: if a task of the tree does, that file comes back as a
 * ghost (a new inode) and restore puts the watch on it (reg_ghost_file_of_inode()); any
 * other is refused. Fills in h->path.
 */
static int check_inode_restorable(uint64_t ino, uint32_t s_dev, struct dumped_handle *h,
				  const char *what)
{
	struct watched_inode wi = watched_inode_of(ino, s_dev, &h->fh, h->words);
	struct mount_line m;
	struct stat st;
	int fd, ret = 0;

	fd = open_watched_inode(&wi, &st, what, &m);
	if (fd < 0)
		return fd;
	if (st.st_nlink == 0 && !tree_holds_inode(&st)) {
		pr_err("%s: watched inode %#llx on device %u:%u is deleted and no task of the tree holds it open: not supported\n",
		       what, (unsigned long long)ino, s_dev >> 20, s_dev & 0xfffff);
		ret = -ENOTSUP;
	}
	if (st.st_nlink == 0) {
		close(fd);
		return ret;
	}
	if (!ret)
		ret = find_watched_path(fd, &st, &m, h, what);
	if (!ret && !h->path && opts.force_irmap) {
		ret = irmap_find_path(st.st_dev, st.st_ino, &h->path);
		if (ret == -ENOENT)
			pr_err("%s: --force-irmap: no path leads to watched inode %#llx on device %u:%u (--irmap-scan-path names where to look)\n",
			       what, (unsigned long long)ino, s_dev >> 20, s_dev & 0xfffff);
	}
	close(fd);
	return ret;
}

/* What fdinfo says of a notification group: the lines that start with prefix. */
struct fdinfo_lines {
	char **lines;
	size_t nr;
};

static void free_fdinfo_lines(struct fdinfo_lines *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->lines[i]);
	free(l->lines);
}

static int read_fdinfo_lines(const struct fd_parms *p, const char *prefix, struct fdinfo_lines *l,
			     const char *what)
{
	char path[64], *line = NULL;
	size_t size = 0;
	int ret = 0;
	FILE *f;

	*l = (struct fdinfo_lines){ NULL, 0 };
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", p->pid, p->fd);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("%s: cannot open %s", what, path);
		return -errno;
	}
	while (getline(&line, &size, f) > 0) {
		char **grown;

		if (strncmp(line, prefix, strlen(prefix)))
			continue;
		grown = realloc(l->lines, (l->nr + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("%s: out of memory reading %s\n", what, path);
			ret = -ENOMEM;
			break;
		}
		l->lines = grown;
		l->lines[l->nr++] = line;
		line = NULL;
		size = 0;
	}
	free(line);
	fclose(f);
	if (ret)
		free_fdinfo_lines(l);
	return ret;
}

/* ------------------------------------------------------------ inotify dump ---- */

/*
 * Restore uses up every number below the highest wd that no watch has, at about 8 us each
 * (add_watch_at_wd()): past this many it is refused rather than left running for minutes
 * (an instance whose numbers wrapped at INT_MAX has its wds in any order, for one).
 */
#define INOTIFY_MAX_SKIPPED_WDS (1u << 22)

static int check_wd_gaps(uint32_t max_wd, size_t nr_watches, const char *what)
{
	if (max_wd > nr_watches && max_wd - nr_watches > INOTIFY_MAX_SKIPPED_WDS) {
		pr_err("%s: wd %u with %zu watches: restore would add and remove %zu watches "
		       "first: not supported\n",
		       what, max_wd, nr_watches, max_wd - nr_watches);
		return -ENOTSUP;
	}
	return 0;
}

/* One watch as dump writes it. */
struct dumped_watch {
	InotifyWdEntry wde;
	struct dumped_handle h;
};

static void free_watches(struct dumped_watch *watches, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(watches[i].h.path);
	free(watches);
}

static bool inotify_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, INOTIFY_LINK);
}

/* "inotify wd:%x ino:%lx sdev:%x mask:%x ignored_mask:%x " then the handle, all in hex. */
static int parse_watch(const char *line, struct dumped_watch *w, const char *fd_what)
{
	unsigned int wd, sdev, mask, ignored;
	unsigned long long ino;
	char what[96];
	int at = 0, ret;

	w->wde = (InotifyWdEntry)INOTIFY_WD_ENTRY__INIT;
	w->h.path = NULL;
	if (sscanf(line, "inotify wd:%x ino:%llx sdev:%x mask:%x ignored_mask:%x %n", &wd, &ino,
		   &sdev, &mask, &ignored, &at) != 5 ||
	    !at) {
		pr_err("%s: cannot parse its fdinfo line: %s", fd_what, line);
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "%s, watch wd %u", fd_what, wd);
	ret = parse_fdinfo_handle(line + at, &w->h, what);
	if (!ret)
		ret = check_inode_restorable(ino, sdev, &w->h, what);
	w->wde.wd = wd;
	w->wde.i_ino = ino;
	w->wde.s_dev = sdev;
	w->wde.mask = mask;
	w->wde.ignored_mask = ignored;
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

	ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	wdes = calloc(nr ? nr : 1, sizeof(*wdes));
	if (!wdes) {
		pr_err("%s: out of memory writing %zu watches\n", what, nr);
		return -ENOMEM;
	}
	qsort(w, nr, sizeof(*w), cmp_dumped_wd);
	for (size_t i = 0; i < nr; i++) {
		link_dumped_handle(&w[i].h);
		w[i].wde.f_handle = &w[i].h.fh;
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
	struct dumped_watch *watches;
	struct fdinfo_lines lines;
	uint32_t max_wd = 0;
	char what[64];
	size_t nr = 0;
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (inotify)", p->fd, p->pid);
	/* inotify_init1() sets O_NONBLOCK, F_SETFL (finish_group()) also O_ASYNC. */
	if (p->flags & ~(O_NONBLOCK | O_ASYNC)) {
		pr_err("%s: file flags %#o: only O_NONBLOCK and O_ASYNC are supported\n", what,
		       p->flags);
		return -ENOTSUP;
	}
	ret = read_fdinfo_lines(p, "inotify ", &lines, what);
	if (ret)
		return ret;
	watches = calloc(lines.nr ? lines.nr : 1, sizeof(*watches));
	if (!watches) {
		pr_err("%s: out of memory reading %zu watches\n", what, lines.nr);
		ret = -ENOMEM;
	}
	for (; !ret && nr < lines.nr; nr++)
		ret = parse_watch(lines.lines[nr], &watches[nr], what);
	free_fdinfo_lines(&lines);
	for (size_t i = 0; i < nr; i++)
		max_wd = watches[i].wde.wd > max_wd ? watches[i].wde.wd : max_wd;
	if (!ret)
		ret = check_wd_gaps(max_wd, nr, what);
	if (!ret)
		ret = write_inotify_entry(p, id, watches, nr, what);
	free_watches(watches, nr);
	if (!ret)
		pr_info("%s: %zu watches\n", what, nr);
	return ret;
}

/* ------------------------------------------------- restore, both kinds ---- */

/*
 * The end of a group's open(): ret, what setting it up gave; the dumped file flags
 * (O_NONBLOCK, O_ASYNC) last. The fd, or -errno with the group closed.
 */
static int finish_group(int fd, int ret, uint32_t flags, const char *kind, uint32_t id)
{
	if (!ret && fcntl(fd, F_SETFL, flags)) {
		pr_perror("%s file %u: cannot set its flags %#o", kind, id, flags);
		ret = -errno;
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* --------------------------------------------------------- inotify restore ---- */

struct inotify_watch {
	struct watched_inode inode;
	uint32_t ghost_file; /* the inode was deleted: this REG entry's ghost is it now; or 0 */
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
	uint32_t stray = wde->mask & ~(INOTIFY_KEPT_MASK | INOTIFY_OLD_CHILD_BIT);
	char what[64];

	snprintf(what, sizeof(what), "files.img: inotify file %u, watch wd %u", d->id, wde->wd);
	if (wde->id && wde->id != d->id) {
		pr_err("%s: names file %u\n", what, wde->id);
		return -EINVAL;
	}
	if (wde->wd == 0 || wde->wd > INT32_MAX) {
		pr_err("%s: not a watch descriptor\n", what);
		return -EINVAL;
	}
	if (stray || wde->ignored_mask) {
		pr_err("%s: mask %#x, ignored mask %#x: bits inotify does not keep\n", what,
		       wde->mask, wde->ignored_mask);
		return -EINVAL;
	}
	if (check_fh_entry(wde->f_handle, what))
		return -EINVAL;
	w->inode = watched_inode_of(wde->i_ino, wde->s_dev, wde->f_handle, wde->f_handle->handle);
	w->ghost_file = reg_ghost_file_of_inode(wde->s_dev, wde->i_ino);
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
	char img_what[48];

	snprintf(img_what, sizeof(img_what), "files.img: inotify file %u", d->id);
	if (in->nr_watches &&
	    check_wd_gaps(in->watches[in->nr_watches - 1].wd, in->nr_watches, img_what))
		return -ENOTSUP;
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
		if (in->watches[i].ghost_file)
			continue; /* made by the restore: a dependency of d (inotify_deps()) */
		if (found_in_restored_mntns(&in->watches[i].inode))
			continue; /* the task finds it (add_watch_at_wd()) */
		fd = open_watched_inode(&in->watches[i].inode, &st, what, NULL);
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
	if (ife->flags & ~(O_NONBLOCK | O_ASYNC)) {
		pr_err("files.img: inotify file %u: flags %#o: only O_NONBLOCK and O_ASYNC are "
		       "supported\n",
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
struct watch_call {
	int ifd, last_wd, wd;
	uint32_t mask;
};

/* proc_path_call(): the watch through link, up to its wd (watch_call.wd). The wd got. */
static int add_watch_through(const char *link, void *arg)
{
	struct watch_call *c = arg;
	int wd;

	while ((wd = inotify_add_watch(c->ifd, link, c->mask)) > c->last_wd && wd < c->wd)
		if (inotify_rm_watch(c->ifd, wd))
			break;
	return wd;
}

static int add_watch_at_wd(int ifd, const struct inotify_desc *in, size_t idx, uint32_t id)
{
	const struct inotify_watch *w = &in->watches[idx];
	int last_wd = idx ? in->watches[idx - 1].wd : 0;
	char what[64], path[32];
	struct stat st;
	int inode_fd, wd, err;

	snprintf(what, sizeof(what), "inotify file %u, watch wd %d", id, w->wd);
	inode_fd = w->ghost_file ? files_dep_fd(w->ghost_file)
				 : open_watched_inode(&w->inode, &st, what, NULL);
	if (inode_fd < 0)
		return inode_fd;
	snprintf(path, sizeof(path), "self/fd/%d", inode_fd);
	wd = proc_path_call(path, add_watch_through,
			    &(struct watch_call){ .ifd = ifd, .last_wd = last_wd, .wd = w->wd,
						  .mask = w->mask });
	err = errno;
	if (!w->ghost_file)
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

/* The ghosts (REG entries) whose re-created inodes some watches are on. */
static size_t inotify_deps(const struct file_desc *d, uint32_t *ids, size_t max)
{
	const struct inotify_desc *in = d->kind;
	size_t nr = 0;

	for (size_t i = 0; i < in->nr_watches; i++) {
		if (!in->watches[i].ghost_file)
			continue;
		if (nr < max)
			ids[nr] = in->watches[i].ghost_file;
		nr++;
	}
	return nr;
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
	pr_debug("inotify file %u: %zu watches\n", d->id, in->nr_watches);
	return finish_group(ifd, ret, in->flags, "inotify", d->id);
}

const struct fdtype_ops inotify_fdtype_ops = {
	.type = FD_TYPES__INOTIFY,
	.name = "inotify",
	.owns = inotify_owns,
	.dump = inotify_dump,
	.collect = inotify_collect,
	.deps = inotify_deps,
	.open = inotify_open,
	.inheritable = true,
};

/* ---------------------------------------------------------- fanotify marks ---- */

/*
 * Permission events wait for the group's answer, and the restore itself opens and maps
 * files in the task that holds the group once it exists: it would wait for itself.
 */
#define FANOTIFY_PERM_EVENTS \
	(FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM | 0x00100000 /* FAN_PRE_ACCESS */)
/* The mark flags fdinfo shows (the kernel's fanotify_mark_user_flags()). */
#define FANOTIFY_KEPT_MFLAGS (FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE | FAN_MARK_IGNORE)

/* What restore can add again with fanotify_mark(): 0, or -errno after a line naming what. */
static int check_mark_flags(uint32_t mflags, uint32_t mask, uint32_t ignored, const char *what)
{
	if (mflags & ~FANOTIFY_KEPT_MFLAGS) {
		pr_err("%s: mark flags %#x: not supported\n", what, mflags);
		return -ENOTSUP;
	}
	if ((mask | ignored) & FANOTIFY_PERM_EVENTS) {
		pr_err("%s: permission events (mask %#x, ignored %#x) would stop the restore's own "
		       "file accesses: not supported\n",
		       what, mask, ignored);
		return -ENOTSUP;
	}
	/* These flags come with adding to the ignored mask, and no mask has no events. */
	if (!ignored && (mflags & (FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_IGNORE) || !mask)) {
		pr_err("%s: mark flags %#x with mask %#x, ignored mask %#x cannot be made again\n",
		       what, mflags, mask, ignored);
		return -ENOTSUP;
	}
	return 0;
}

/* ----------------------------------------------------------- fanotify dump ---- */

#define FANOTIFY_LINK "anon_inode:[fanotify]"

/* One mark as dump writes it. */
struct dumped_mark {
	FanotifyMarkEntry fme;
	FanotifyInodeMarkEntry ie;
	FanotifyMountMarkEntry me;
	struct dumped_handle h;
	char *mount_path; /* me.path, malloc'ed; or NULL */
};

static void free_marks(struct dumped_mark *marks, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(marks[i].h.path);
		free(marks[i].mount_path);
	}
	free(marks);
}

static bool fanotify_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, FANOTIFY_LINK);
}

/* "fanotify ino:%lx sdev:%x mflags:%x mask:%x ignored_mask:%x " then the handle. */
static int parse_inode_mark(const char *line, struct dumped_mark *m, const char *fd_what)
{
	unsigned int sdev, mflags, mask, ignored;
	unsigned long long ino;
	char what[96];
	int at = 0, ret;

	if (sscanf(line, "fanotify ino:%llx sdev:%x mflags:%x mask:%x ignored_mask:%x %n", &ino,
		   &sdev, &mflags, &mask, &ignored, &at) != 5 ||
	    !at) {
		pr_err("%s: cannot parse its fdinfo line: %s", fd_what, line);
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "%s, mark on inode %#llx", fd_what, ino);
	ret = check_mark_flags(mflags, mask, ignored, what);
	if (!ret)
		ret = parse_fdinfo_handle(line + at, &m->h, what);
	if (!ret)
		ret = check_inode_restorable(ino, sdev, &m->h, what);
	m->fme.type = MARK_TYPE__INODE;
	m->fme.mflags = mflags;
	m->fme.mask = mask;
	m->fme.ignored_mask = ignored;
	m->fme.s_dev = sdev;
	m->ie.i_ino = ino;
	return ret;
}

/* "fanotify mnt_id:%x mflags:%x mask:%x ignored_mask:%x": named by its mount point too. */
static int parse_mount_mark(const char *line, struct dumped_mark *m, const char *fd_what)
{
	unsigned int mnt_id, mflags, mask, ignored;
	struct mount_line mnt;
	char what[96];
	struct stat st;
	int fd, ret;

	if (sscanf(line, "fanotify mnt_id:%x mflags:%x mask:%x ignored_mask:%x", &mnt_id, &mflags,
		   &mask, &ignored) != 4) {
		pr_err("%s: cannot parse its fdinfo line: %s", fd_what, line);
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "%s, mark on mount %u", fd_what, mnt_id);
	ret = check_mark_flags(mflags, mask, ignored, what);
	if (ret)
		return ret;
	fd = open_mount(mount_has_id, &mnt_id, &mnt);
	if (fd < 0) {
		pr_err("%s: not reachable in criu's mount table nor the tree's (another mount "
		       "namespace, or its mount point covered): not supported\n",
		       what);
		return -ENOTSUP;
	}
	ret = fstat(fd, &st) ? -errno : 0;
	close(fd);
	if (ret) {
		pr_err("%s: cannot stat %s: %s\n", what, mnt.point, strerror(-ret));
		return ret;
	}
	m->mount_path = strdup(mnt.point);
	if (!m->mount_path) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	m->fme.type = MARK_TYPE__MOUNT;
	m->fme.mflags = mflags;
	m->fme.mask = mask;
	m->fme.ignored_mask = ignored;
	m->fme.s_dev = kernel_dev(st.st_dev);
	m->me.mnt_id = mnt_id;
	return 0;
}

static int parse_mark(const char *line, struct dumped_mark *m, const char *fd_what)
{
	*m = (struct dumped_mark){ .fme = FANOTIFY_MARK_ENTRY__INIT,
				   .ie = FANOTIFY_INODE_MARK_ENTRY__INIT,
				   .me = FANOTIFY_MOUNT_MARK_ENTRY__INIT };
	if (!strncmp(line, "fanotify ino:", 13))
		return parse_inode_mark(line, m, fd_what);
	if (!strncmp(line, "fanotify mnt_id:", 16))
		return parse_mount_mark(line, m, fd_what);
	/* CRIU's format knows inode and mount marks: not FAN_MARK_FILESYSTEM, nor newer ones. */
	pr_err("%s: a mark of a kind not supported (%s): %s", fd_what,
	       strncmp(line, "fanotify sdev:", 14) ? "unknown" : "a whole filesystem", line);
	return -ENOTSUP;
}

/* Marks as fdinfo lists them (newest first), as CRIU writes them. */
static int write_fanotify_entry(const struct fd_parms *p, uint32_t id, const char *flags_line,
				struct dumped_mark *marks, size_t nr, const char *what)
{
	FanotifyFileEntry ffe = FANOTIFY_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	FanotifyMarkEntry **fmes;
	int ret;

	ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	if (sscanf(flags_line, "fanotify flags:%x event-flags:%x", &ffe.faflags, &ffe.evflags) !=
	    2) {
		pr_err("%s: cannot parse its fdinfo line: %s", what, flags_line);
		return -EINVAL;
	}
	fmes = calloc(nr ? nr : 1, sizeof(*fmes));
	if (!fmes) {
		pr_err("%s: out of memory writing %zu marks\n", what, nr);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr; i++) {
		struct dumped_mark *m = &marks[i];

		link_dumped_handle(&m->h);
		m->ie.f_handle = &m->h.fh;
		m->me.path = m->mount_path;
		if (m->fme.type == MARK_TYPE__INODE)
			m->fme.ie = &m->ie;
		else
			m->fme.me = &m->me;
		fmes[i] = &m->fme;
	}
	ffe.id = id;
	ffe.flags = p->flags;
	ffe.fown = &fown;
	ffe.n_mark = nr;
	ffe.mark = fmes;
	fe.type = FD_TYPES__FANOTIFY;
	fe.id = id;
	fe.ffy = &ffe;
	ret = write_file_entry(&fe);
	free(fmes);
	return ret;
}

/* fanotify_init() opens it O_RDWR, with O_NONBLOCK for FAN_NONBLOCK. */
static int check_fanotify_flags(uint32_t flags, const char *what)
{
	if ((flags & O_ACCMODE) != O_RDWR || (flags & ~(O_ACCMODE | O_NONBLOCK))) {
		pr_err("%s: file flags %#o: only O_RDWR and O_NONBLOCK are supported\n", what,
		       flags);
		return -ENOTSUP;
	}
	return 0;
}

static int fanotify_dump(const struct fd_parms *p, uint32_t id)
{
	struct dumped_mark *marks;
	struct fdinfo_lines lines;
	char what[64];
	size_t nr = 0;
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (fanotify)", p->fd, p->pid);
	ret = check_fanotify_flags(p->flags, what);
	if (!ret)
		ret = read_fdinfo_lines(p, "fanotify ", &lines, what);
	if (ret)
		return ret;
	if (!lines.nr || strncmp(lines.lines[0], "fanotify flags:", 15)) {
		pr_err("%s: fdinfo does not start with its flags\n", what);
		free_fdinfo_lines(&lines);
		return -EINVAL;
	}
	marks = calloc(lines.nr, sizeof(*marks));
	if (!marks) {
		pr_err("%s: out of memory reading %zu marks\n", what, lines.nr - 1);
		ret = -ENOMEM;
	}
	for (; !ret && nr < lines.nr - 1; nr++)
		ret = parse_mark(lines.lines[nr + 1], &marks[nr], what);
	if (!ret)
		ret = write_fanotify_entry(p, id, lines.lines[0], marks, nr, what);
	free_fdinfo_lines(&lines);
	free_marks(marks, nr);
	if (!ret)
		pr_info("%s: %zu marks\n", what, nr);
	return ret;
}

/* -------------------------------------------------------- fanotify restore ---- */

struct fanotify_mark {
	MarkType type;
	uint32_t mflags, mask, ignored_mask;
	struct watched_inode inode; /* INODE */
	uint32_t mnt_id;	/* MOUNT */
	const char *mount_path; /* MOUNT: in the collected entry; or NULL */
};

/* d->kind of a fanotify entry: one allocation (files.c frees it). */
struct fanotify_desc {
	uint32_t flags, faflags, evflags;
	size_t nr_marks;
	struct fanotify_mark marks[]; /* as the image lists them: newest first */
};

static int collect_mark(const struct file_desc *d, const FanotifyMarkEntry *fme,
			struct fanotify_mark *m)
{
	char what[64];

	snprintf(what, sizeof(what), "files.img: fanotify file %u, a mark", d->id);
	if (fme->id && fme->id != d->id) {
		pr_err("%s: names file %u\n", what, fme->id);
		return -EINVAL;
	}
	if (check_mark_flags(fme->mflags, fme->mask, fme->ignored_mask, what))
		return -ENOTSUP;
	*m = (struct fanotify_mark){ .type = fme->type,
				     .mflags = fme->mflags,
				     .mask = fme->mask,
				     .ignored_mask = fme->ignored_mask };
	if (fme->type == MARK_TYPE__INODE && fme->ie) {
		if (check_fh_entry(fme->ie->f_handle, what))
			return -EINVAL;
		m->inode = watched_inode_of(fme->ie->i_ino, fme->s_dev, fme->ie->f_handle,
					    fme->ie->f_handle->handle);
		return 0;
	}
	if (fme->type == MARK_TYPE__MOUNT && fme->me) {
		m->mnt_id = fme->me->mnt_id;
		m->mount_path = fme->me->path;
		return 0;
	}
	pr_err("%s: of type %d without its inode or mount entry\n", what, fme->type);
	return -EINVAL;
}

/* The mount of a mount mark, O_PATH on a directory of it: by its path, else by its id. */
static int open_mark_mount(const struct fanotify_mark *m, const char *what)
{
	struct mount_line mnt;
	int fd;

	if (m->mount_path) {
		fd = open(m->mount_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			pr_perror("%s: cannot open mount point %s", what, m->mount_path);
		return fd < 0 ? -errno : fd;
	}
	fd = open_mount(mount_has_id, &m->mnt_id, &mnt);
	if (fd < 0)
		pr_err("%s: mount %u is not reachable in criu's mount table\n", what, m->mnt_id);
	return fd;
}

static int open_mark_target(const struct fanotify_mark *m, const char *what)
{
	struct stat st;

	if (m->type == MARK_TYPE__MOUNT)
		return open_mark_mount(m, what);
	return open_watched_inode(&m->inode, &st, what, NULL);
}

/*
 * The flags must be ones fanotify_init() takes, and every marked object must be found
 * now, so that a missing one stops the restore before any task exists.
 */
static int check_fanotify_desc(const struct file_desc *d, const struct fanotify_desc *fd_desc)
{
	char what[64];
	int fd;

	snprintf(what, sizeof(what), "files.img: fanotify file %u", d->id);
	if (check_fanotify_flags(fd_desc->flags, what))
		return -ENOTSUP;
	fd = fanotify_init(fd_desc->faflags | FAN_CLOEXEC, fd_desc->evflags);
	if (fd < 0) {
		pr_perror("%s: fanotify_init(%#x, %#x)", what, fd_desc->faflags, fd_desc->evflags);
		return -errno;
	}
	close(fd);
	for (size_t i = 0; i < fd_desc->nr_marks; i++) {
		const struct fanotify_mark *m = &fd_desc->marks[i];

		if (m->type == MARK_TYPE__INODE && found_in_restored_mntns(&m->inode))
			continue; /* the task finds it (add_mark()) */
		fd = open_mark_target(m, what);
		if (fd < 0)
			return fd;
		close(fd);
	}
	return 0;
}

static int fanotify_collect(struct file_desc *d)
{
	const FanotifyFileEntry *ffe = d->fe->ffy;
	struct fanotify_desc *fa;
	int ret;

	if (!ffe || ffe->id != d->id) {
		pr_err("files.img: fanotify file %u has no fanotify entry of its own\n", d->id);
		return -EINVAL;
	}
	ret = collect_owner(d, ffe->fown);
	if (ret)
		return ret;
	fa = malloc(sizeof(*fa) + ffe->n_mark * sizeof(fa->marks[0]));
	if (!fa) {
		pr_err("files.img: out of memory collecting fanotify file %u (%zu marks)\n", d->id,
		       ffe->n_mark);
		return -ENOMEM;
	}
	d->kind = fa;
	fa->flags = ffe->flags;
	fa->faflags = ffe->faflags;
	fa->evflags = ffe->evflags;
	fa->nr_marks = ffe->n_mark;
	for (size_t i = 0; i < ffe->n_mark; i++) {
		ret = collect_mark(d, ffe->mark[i], &fa->marks[i]);
		if (ret)
			return ret;
	}
	return check_fanotify_desc(d, fa);
}

/*
 * The mask and the ignored mask are added by separate calls, the ignored one with the API
 * the mark was given it by (FAN_MARK_IGNORE or the older FAN_MARK_IGNORED_MASK) and
 * whether it survives modification; an evictable mark is so from its first call.
 */
struct mark_call {
	int fafd;
	unsigned int add, ignore;
	const struct fanotify_mark *m;
};

/* proc_path_call(): the mark's masks through link. 0 or -1 (errno). */
static int add_mark_through(const char *link, void *arg)
{
	const struct mark_call *c = arg;
	const struct fanotify_mark *m = c->m;

	if (m->mask && fanotify_mark(c->fafd, c->add, m->mask, AT_FDCWD, link))
		return -1;
	if (m->ignored_mask &&
	    fanotify_mark(c->fafd, c->add | c->ignore | (m->mflags & FAN_MARK_IGNORED_SURV_MODIFY),
			  m->ignored_mask, AT_FDCWD, link))
		return -1;
	return 0;
}

static int add_mark(int fafd, const struct fanotify_mark *m, uint32_t id)
{
	unsigned int type = m->type == MARK_TYPE__MOUNT ? FAN_MARK_MOUNT : FAN_MARK_INODE;
	unsigned int add = FAN_MARK_ADD | type | (m->mflags & FAN_MARK_EVICTABLE);
	unsigned int ignore = m->mflags & FAN_MARK_IGNORE ? FAN_MARK_IGNORE : FAN_MARK_IGNORED_MASK;
	char what[64], path[32];
	int target, ret = 0;

	snprintf(what, sizeof(what), "fanotify file %u", id);
	target = open_mark_target(m, what);
	if (target < 0)
		return target;
	snprintf(path, sizeof(path), "self/fd/%d", target);
	if (proc_path_call(path, add_mark_through,
			   &(struct mark_call){ .fafd = fafd, .add = add, .ignore = ignore, .m = m }))
		ret = -errno;
	close(target);
	if (ret)
		pr_err("%s: cannot add its mark (flags %#x, mask %#x, ignored %#x): %s\n", what,
		       m->mflags, m->mask, m->ignored_mask, strerror(-ret));
	return ret;
}

static int fanotify_open(const struct file_desc *d)
{
	const struct fanotify_desc *fa = d->kind;
	int fafd, ret = 0;

	fafd = fanotify_init(fa->faflags, fa->evflags);
	if (fafd < 0) {
		pr_perror("fanotify file %u: fanotify_init(%#x, %#x)", d->id, fa->faflags,
			  fa->evflags);
		return -errno;
	}
	/* Oldest first, so that the group lists them in the dumped order. */
	for (size_t i = fa->nr_marks; i-- > 0 && !ret;)
		ret = add_mark(fafd, &fa->marks[i], d->id);
	pr_debug("fanotify file %u: %zu marks\n", d->id, fa->nr_marks);
	return finish_group(fafd, ret, fa->flags, "fanotify", d->id);
}

const struct fdtype_ops fanotify_fdtype_ops = {
	.type = FD_TYPES__FANOTIFY,
	.name = "fanotify",
	.owns = fanotify_owns,
	.dump = fanotify_dump,
	.collect = fanotify_collect,
	.open = fanotify_open,
	.inheritable = true,
};
