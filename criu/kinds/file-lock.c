/*
 * File locks (--file-locks): POSIX record locks, flock() locks, OFD locks and leases the
 * dumped tree holds, in filelocks.img. Dump reads them from /proc/locks and from each fd's
 * fdinfo "lock:" lines, which say which open description holds a lock; restore decodes
 * the image before forking, and each task's restorer blob re-takes its own locks once
 * nothing of criu's closes a file in it any more (criu/pie/restorer.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_options.h"
#include "file-lock.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "restorer-args.h"

#include "fdinfo.pb-c.h"
#include "file-lock.pb-c.h"

/* ---------------------------------------------------------------- dump ---- */

/*
 * One lock as the kernel prints it, in /proc/locks or after "lock:" in fdinfo:
 * "ID: [-> ]CLASS MODE TYPE PID MAJ:MIN:INO START END", e.g.
 * "5: POSIX  ADVISORY  WRITE 4466 fe:00:10953186 10 14" (END "EOF": to the end of file).
 */
struct lock_line {
	char class[16]; /* POSIX, FLOCK, OFDLCK, LEASE, DELEG, ... */
	char mode[16];	/* ADVISORY; MANDATORY (old kernels); ACTIVE, BREAKING, BREAKER (leases) */
	char type[16];	/* READ, WRITE, UNLCK */
	bool blocked;	/* "->": a waiter, not a holder */
	pid_t pid;	/* POSIX: the owner; FLOCK: who took it; OFD: -1 */
	unsigned int maj, min;
	unsigned long ino;
	long long start;
	long long end; /* -1: EOF */
};

/* A lock of the tree, as it goes to filelocks.img, and what it was matched by. */
struct held_lock {
	uint32_t kind; /* FILE_LOCK_* */
	uint32_t type; /* F_RDLCK / F_WRLCK */
	pid_t pid;
	int fd;
	struct lock_line line;
};

/* /proc/locks, each line claimed once by the fd that shows it. */
struct system_lock {
	struct lock_line line;
	bool claimed;
};

struct lock_dump {
	struct system_lock *sys;
	size_t nr_sys;
	struct held_lock *held;
	size_t nr_held;
};

static int parse_lock_line(const char *text, struct lock_line *l)
{
	char end[24];
	int pos = -1;

	memset(l, 0, sizeof(*l));
	if (sscanf(text, "%*d: %n", &pos) != 0 || pos < 0)
		return -EINVAL;
	text += pos;
	if (!strncmp(text, "-> ", 3)) {
		l->blocked = true;
		text += 3;
	}
	if (sscanf(text, "%15s %15s %15s %d %x:%x:%lu %lld %23s", l->class, l->mode, l->type,
		   &l->pid, &l->maj, &l->min, &l->ino, &l->start, end) != 9)
		return -EINVAL;
	if (!strcmp(end, "EOF"))
		l->end = -1;
	else if (sscanf(end, "%lld", &l->end) != 1)
		return -EINVAL;
	return 0;
}

static bool same_lock(const struct lock_line *a, const struct lock_line *b)
{
	return !strcmp(a->class, b->class) && !strcmp(a->mode, b->mode) &&
	       !strcmp(a->type, b->type) && a->pid == b->pid && a->maj == b->maj &&
	       a->min == b->min && a->ino == b->ino && a->start == b->start && a->end == b->end;
}

/*
 * Other processes' locks are none of our business: a line this parser does not know is
 * skipped here, and one on a file of the tree fails the dump when its fdinfo shows it.
 */
static int read_system_locks(struct lock_dump *ld)
{
	char text[256];
	FILE *f = fopen("/proc/locks", "re");
	int ret = 0;

	if (!f) {
		pr_perror("cannot open /proc/locks");
		return -errno;
	}
	while (fgets(text, sizeof(text), f)) {
		struct system_lock *grown;
		struct lock_line l;

		if (parse_lock_line(text, &l)) {
			pr_warn("/proc/locks: a line not understood, skipped: %s", text);
			continue;
		}
		grown = realloc(ld->sys, (ld->nr_sys + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("out of memory reading /proc/locks (%zu locks)\n", ld->nr_sys);
			ret = -ENOMEM;
			break;
		}
		ld->sys = grown;
		ld->sys[ld->nr_sys++] = (struct system_lock){ .line = l };
	}
	fclose(f);
	return ret;
}

static bool in_live_tree(pid_t pid)
{
	const struct pstree_item *item = pid > 0 ? pstree_find(pid) : NULL;

	return item && !item->zombie;
}

/*
 * A task waiting for a lock leaves the wait when it is seized (the syscall restarts once
 * it runs again, restored or not), so the tree should have no waiter here.
 */
static int check_no_waiters(const struct lock_dump *ld)
{
	for (size_t i = 0; i < ld->nr_sys; i++) {
		const struct lock_line *l = &ld->sys[i].line;

		if (l->blocked && in_live_tree(l->pid)) {
			pr_err("task %d waits for a %s lock on %02x:%02x:%lu: not supported\n",
			       l->pid, l->class, l->maj, l->min, l->ino);
			return -ENOTSUP;
		}
	}
	return 0;
}

static const char *fd_path(pid_t pid, int fd, char *buf, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/fd/%d", pid, fd);
	n = readlink(link, buf, len - 1);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* A word of a lock line among names[]: its index, or -1. */
static int word_index(const char *word, const char *const names[], int nr)
{
	for (int i = 0; i < nr; i++)
		if (!strcmp(word, names[i]))
			return i;
	return -1;
}

/*
 * A lease: "ACTIVE READ|WRITE", or "BREAKING READ|UNLCK", where the kernel prints the
 * type a broken lease is going to (also what F_GETLEASE says).
 */
static int lease_type(const struct lock_line *l, uint32_t *type)
{
	static const char *const types[] = { "READ", "WRITE", "UNLCK" }; /* F_RDLCK.. F_UNLCK */
	int t = word_index(l->type, types, 3);

	if (!strcmp(l->mode, "ACTIVE") && (t == F_RDLCK || t == F_WRLCK))
		*type = t;
	else if (!strcmp(l->mode, "BREAKING") && (t == F_RDLCK || t == F_UNLCK))
		*type = t | FILE_LOCK_LEASE_BREAKING;
	else
		return -ENOTSUP;
	return 0;
}

static int record_lock_type(const struct lock_line *l, uint32_t *type)
{
	static const char *const types[] = { "READ", "WRITE" }; /* F_RDLCK, F_WRLCK */
	int t = word_index(l->type, types, 2);

	if (t < 0 || strcmp(l->mode, "ADVISORY"))
		return -ENOTSUP;
	*type = t;
	return 0;
}

/* The kind and type filelocks.img gives the lock; -ENOTSUP after one line if none fits. */
static int lock_kind_type(pid_t pid, int fd, const struct lock_line *l, struct held_lock *h)
{
	static const char *const classes[] = { "POSIX", "FLOCK", "OFDLCK", "LEASE" };
	static const uint32_t kinds[] = { FILE_LOCK_POSIX, FILE_LOCK_FLOCK, FILE_LOCK_OFD,
					  FILE_LOCK_LEASE };
	int class = word_index(l->class, classes, 4);
	char path[256];
	int ret = -ENOTSUP;

	if (class >= 0) {
		h->kind = kinds[class];
		ret = h->kind == FILE_LOCK_LEASE ? lease_type(l, &h->type) :
						   record_lock_type(l, &h->type);
	}
	if (ret)
		pr_err("fd %d of task %d (%s) holds a %s %s %s lock, which is not supported\n", fd,
		       pid, fd_path(pid, fd, path, sizeof(path)), l->class, l->mode, l->type);
	return ret;
}

/*
 * fdinfo shows a lock on every fd of its description: dups, and for flock() and OFD
 * locks the copies other tasks inherited. *seen: the lock is already held by an earlier
 * fd. A process has one POSIX lock per range (the kernel merges them).
 */
static int seen_before(const struct lock_dump *ld, const struct held_lock *h, bool *seen)
{
	*seen = false;
	for (size_t i = 0; i < ld->nr_held && !*seen; i++) {
		const struct held_lock *o = &ld->held[i];
		int ret;

		if (o->kind != h->kind || !same_lock(&o->line, &h->line))
			continue;
		if (h->kind == FILE_LOCK_POSIX) {
			*seen = o->pid == h->pid;
			continue;
		}
		ret = same_file_desc(h->pid, h->fd, o->pid, o->fd);
		if (ret < 0)
			return ret;
		*seen = ret;
	}
	return 0;
}

/* The /proc/locks line of a lock an fd shows. */
static int claim_system_lock(struct lock_dump *ld, const struct held_lock *h)
{
	for (size_t i = 0; i < ld->nr_sys; i++) {
		struct system_lock *s = &ld->sys[i];

		if (!s->claimed && !s->line.blocked && same_lock(&s->line, &h->line)) {
			s->claimed = true;
			return 0;
		}
	}
	pr_err("fd %d of task %d: its %s lock on %02x:%02x:%lu is not in /proc/locks\n", h->fd,
	       h->pid, h->line.class, h->line.maj, h->line.min, h->line.ino);
	return -EIO;
}

static int add_held_lock(struct lock_dump *ld, const struct held_lock *h)
{
	struct held_lock *grown = realloc(ld->held, (ld->nr_held + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("out of memory noting the file locks of task %d\n", h->pid);
		return -ENOMEM;
	}
	ld->held = grown;
	ld->held[ld->nr_held++] = *h;
	return 0;
}

/* One "lock:" line of fd's fdinfo. */
static int note_fd_lock(struct lock_dump *ld, pid_t pid, int fd, const struct lock_line *l)
{
	struct held_lock h = { .pid = pid, .fd = fd, .line = *l };
	char path[256];
	bool seen;
	int ret;

	ret = lock_kind_type(pid, fd, l, &h);
	if (ret)
		return ret;
	if (!opts.file_locks) {
		pr_err("task %d holds a %s lock on fd %d (%s): dump it with --file-locks\n", pid,
		       l->class, fd, fd_path(pid, fd, path, sizeof(path)));
		return -ENOTSUP;
	}
	/* Only a task sharing the fd table of another (CLONE_FILES) shows the other's. */
	if (h.kind == FILE_LOCK_POSIX && l->pid != pid) {
		pr_err("fd %d of task %d shows a POSIX lock of process %d: not supported\n", fd,
		       pid, l->pid);
		return -ENOTSUP;
	}
	ret = seen_before(ld, &h, &seen);
	if (ret || seen)
		return ret;
	ret = claim_system_lock(ld, &h);
	if (ret)
		return ret;
	if (l->end < 0)
		pr_info("fd %d of task %d: %s %s lock %lld-EOF\n", fd, pid, l->class, l->type,
			l->start);
	else
		pr_info("fd %d of task %d: %s %s lock %lld-%lld\n", fd, pid, l->class, l->type,
			l->start, l->end);
	return add_held_lock(ld, &h);
}

static int read_fd_locks(struct lock_dump *ld, pid_t pid, int fd)
{
	char path[64], text[256];
	struct lock_line l;
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while (!ret && fgets(text, sizeof(text), f)) {
		if (strncmp(text, "lock:", 5))
			continue;
		ret = parse_lock_line(text + 5, &l);
		if (ret)
			pr_err("%s: a lock line not understood: %s", path, text);
		else
			ret = note_fd_lock(ld, pid, fd, &l);
	}
	fclose(f);
	return ret;
}

/* The task is seized: its fds stay as they are while we read them. */
static int read_task_locks(struct lock_dump *ld, pid_t pid)
{
	struct dirent *de;
	char path[64];
	DIR *dir;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while (!ret && (de = readdir(dir)))
		if (de->d_name[0] != '.')
			ret = read_fd_locks(ld, pid, atoi(de->d_name));
	closedir(dir);
	return ret;
}

/*
 * A POSIX lock belongs to its process and shows on the fd it was taken through, which
 * stays open while the lock exists (any close() on the file drops it): one of the tree
 * no fd showed would be lost. flock() and OFD locks of descriptions no task of the tree
 * holds any more are not the tree's.
 */
static int check_all_claimed(const struct lock_dump *ld)
{
	for (size_t i = 0; i < ld->nr_sys; i++) {
		const struct lock_line *l = &ld->sys[i].line;

		if (ld->sys[i].claimed || l->blocked || strcmp(l->class, "POSIX") ||
		    !in_live_tree(l->pid))
			continue;
		pr_err("task %d holds a POSIX lock on %02x:%02x:%lu that none of its fds shows "
		       "(no \"lock:\" lines in fdinfo?)\n",
		       l->pid, l->maj, l->min, l->ino);
		return -ENOTSUP;
	}
	return 0;
}

static void held_to_entry(const struct held_lock *h, FileLockEntry *fle)
{
	file_lock_entry__init(fle);
	fle->flag = h->kind;
	fle->type = h->type;
	fle->pid = pidns_img_pid(h->pid);
	fle->fd = h->fd;
	if (h->kind == FILE_LOCK_FLOCK)
		return; /* whole file: 0, 0 */
	fle->start = h->line.start;
	fle->len = h->line.end < 0 ? 0 : h->line.end - h->line.start + 1;
}

static int write_file_locks(const struct lock_dump *ld)
{
	struct cr_img *img;
	int ret = 0;

	if (!ld->nr_held)
		return 0;
	img = open_image(CR_IMG_FILE_LOCKS, O_WRONLY, 0);
	if (!img)
		return -EIO;
	for (size_t i = 0; i < ld->nr_held && !ret; i++) {
		FileLockEntry fle;

		held_to_entry(&ld->held[i], &fle);
		ret = pb_write_one(img, &fle);
	}
	close_image(img);
	return ret;
}

static int find_tree_locks(struct lock_dump *ld)
{
	struct pstree_item *item;
	int ret;

	ret = check_no_waiters(ld);
	for (item = root_item; item && !ret; item = pstree_next(item))
		if (!item->zombie)
			ret = read_task_locks(ld, item->pid);
	return ret ? ret : check_all_claimed(ld);
}

int dump_file_locks(void)
{
	struct lock_dump ld = { 0 };
	int ret;

	ret = read_system_locks(&ld);
	/* No lock on the whole system: no fdinfo to read. */
	if (!ret && ld.nr_sys)
		ret = find_tree_locks(&ld);
	if (!ret)
		ret = write_file_locks(&ld);
	if (!ret)
		pr_info("%zu file locks held by the tree\n", ld.nr_held);
	free(ld.sys);
	free(ld.held);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

/* filelocks.img as read, then sorted by task: each task's locks are one run of it. */
struct task_lock {
	pid_t pid;
	size_t idx; /* in the image */
	struct rst_file_lock lock;
	bool has_file; /* the task's fdinfo image has the fd: file_id */
	uint32_t file_id;
};

static struct task_lock *task_locks;
static size_t nr_task_locks;
/* The locks of task_locks in the same order, as the blob takes them: one array a task. */
static struct rst_file_lock *blob_locks;

static const char *lock_kind_name(uint32_t kind)
{
	switch (kind) {
	case FILE_LOCK_POSIX:
		return "POSIX";
	case FILE_LOCK_FLOCK:
		return "flock";
	case FILE_LOCK_OFD:
		return "OFD";
	case FILE_LOCK_LEASE:
		return "lease";
	}
	return "unknown";
}

static int check_lock_entry(size_t idx, const FileLockEntry *fle)
{
	const struct pstree_item *item = pstree_find(fle->pid);

	if (fle->flag != FILE_LOCK_POSIX && fle->flag != FILE_LOCK_FLOCK &&
	    fle->flag != FILE_LOCK_OFD && fle->flag != FILE_LOCK_LEASE) {
		pr_err("filelocks.img: lock %zu has kind %u, not a lock kind\n", idx, fle->flag);
		return -EINVAL;
	}
	if (fle->flag == FILE_LOCK_LEASE && fle->type != F_RDLCK && fle->type != F_WRLCK &&
	    fle->type != (F_RDLCK | FILE_LOCK_LEASE_BREAKING) &&
	    fle->type != (F_UNLCK | FILE_LOCK_LEASE_BREAKING)) {
		pr_err("filelocks.img: lock %zu (lease) has type %u, not a lease's\n", idx, fle->type);
		return -EINVAL;
	}
	if (fle->flag != FILE_LOCK_LEASE && fle->type != F_RDLCK && fle->type != F_WRLCK) {
		pr_err("filelocks.img: lock %zu (%s) has type %u, neither read nor write\n", idx,
		       lock_kind_name(fle->flag), fle->type);
		return -EINVAL;
	}
	if (fle->start < 0 || fle->len < 0 || fle->start > INT64_MAX - fle->len) {
		pr_err("filelocks.img: lock %zu has the range %lld+%lld\n", idx,
		       (long long)fle->start, (long long)fle->len);
		return -EINVAL;
	}
	if (!item || item->zombie || fle->fd < 0) {
		pr_err("filelocks.img: lock %zu is on fd %d of task %d, which is not a live task "
		       "of pstree.img\n",
		       idx, fle->fd, fle->pid);
		return -EINVAL;
	}
	return 0;
}

static int add_task_lock(void *msg, void *arg)
{
	const FileLockEntry *fle = msg;
	struct task_lock *grown;
	int ret;

	(void)arg;
	ret = check_lock_entry(nr_task_locks, fle);
	if (ret)
		return ret;
	grown = realloc(task_locks, (nr_task_locks + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("filelocks.img: out of memory (%zu locks)\n", nr_task_locks);
		return -ENOMEM;
	}
	task_locks = grown;
	task_locks[nr_task_locks++] = (struct task_lock){
		.pid = fle->pid,
		.idx = nr_task_locks,
		.lock = { .kind = fle->flag, .type = fle->type, .fd = fle->fd,
			  .start = fle->start, .len = fle->len },
	};
	return 0;
}

/* By pid, and in image order within a task. */
static int cmp_task_lock(const void *a, const void *b)
{
	const struct task_lock *x = a, *y = b;

	if (x->pid != y->pid)
		return (x->pid > y->pid) - (x->pid < y->pid);
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The fdinfo image of the task whose locks are task_locks[first, end): their files. */
static int find_lock_files(const struct pstree_item *item, size_t first, size_t end)
{
	struct cr_img *img = open_image(CR_IMG_FDINFO, O_RDONLY, item->ids.files_id);
	FdinfoEntry *fdi;
	int ret;

	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&fdi)) > 0) {
		for (size_t i = first; i < end; i++) {
			if (task_locks[i].lock.fd != (int)fdi->fd)
				continue;
			task_locks[i].has_file = true;
			task_locks[i].file_id = fdi->id;
		}
		pb_free(img, fdi);
	}
	close_image(img);
	return ret;
}

/*
 * A lease is on a regular file; a read lease only on a read-only fd, and a lease that
 * breaks to a read lease was a write lease (blob: take_lease()), so not on one.
 */
static int check_lease_file(const struct task_lock *tl, const FileEntry *fe)
{
	const struct rst_file_lock *lk = &tl->lock;
	bool read_only = fe->reg && (fe->reg->flags & O_ACCMODE) == O_RDONLY;
	const char *why = NULL;

	if (fe->type != FD_TYPES__REG || !fe->reg)
		why = "not a regular file";
	else if (lk->type == F_RDLCK && !read_only)
		why = "a read lease on an fd open for writing";
	else if (lk->type == (F_RDLCK | FILE_LOCK_LEASE_BREAKING) && read_only)
		why = "a read lease breaking to a read lease";
	if (!why)
		return 0;
	pr_err("filelocks.img: task %d has a lease (type %u) on fd %d: %s\n", tl->pid, lk->type,
	       lk->fd, why);
	return -EINVAL;
}

/* flock() needs only an open fd; the record locks need the access they lock against. */
static int check_lock_file(const struct task_lock *tl)
{
	const struct rst_file_lock *lk = &tl->lock;
	const FileEntry *fe = tl->has_file ? find_file_entry(tl->file_id) : NULL;
	uint32_t acc;

	if (!fe) {
		pr_err("filelocks.img: task %d has a %s lock on fd %d, which it does not have\n",
		       tl->pid, lock_kind_name(lk->kind), lk->fd);
		return -EINVAL;
	}
	if (lk->kind == FILE_LOCK_LEASE)
		return check_lease_file(tl, fe);
	if (lk->kind == FILE_LOCK_FLOCK || fe->type != FD_TYPES__REG || !fe->reg)
		return 0;
	acc = fe->reg->flags & O_ACCMODE;
	if ((lk->type == F_RDLCK && acc == O_WRONLY) || (lk->type == F_WRLCK && acc == O_RDONLY)) {
		pr_err("filelocks.img: task %d has a %s %s lock on fd %d (%s), which is not open "
		       "for %s\n",
		       tl->pid, lock_kind_name(lk->kind), lk->type == F_RDLCK ? "read" : "write",
		       lk->fd, fe->reg->name, lk->type == F_RDLCK ? "reading" : "writing");
		return -EINVAL;
	}
	return 0;
}

/* Each task's run of the sorted table at once: its fdinfo image is read once. */
static int check_lock_files(void)
{
	size_t first = 0, end;
	int ret = 0;

	for (; first < nr_task_locks && !ret; first = end) {
		pid_t pid = task_locks[first].pid;

		for (end = first; end < nr_task_locks && task_locks[end].pid == pid; end++)
			;
		ret = find_lock_files(pstree_find(pid), first, end);
		for (size_t i = first; i < end && !ret; i++)
			ret = check_lock_file(&task_locks[i]);
	}
	return ret;
}

int file_locks_collect(void)
{
	int ret = pb_collect_optional_image(CR_IMG_FILE_LOCKS, add_task_lock, NULL);

	if (ret)
		return ret;
	if (!nr_task_locks)
		return 0;
	qsort(task_locks, nr_task_locks, sizeof(*task_locks), cmp_task_lock);
	ret = check_lock_files();
	if (ret)
		return ret;
	blob_locks = calloc(nr_task_locks, sizeof(*blob_locks));
	if (!blob_locks) {
		pr_err("filelocks.img: out of memory (%zu locks)\n", nr_task_locks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_task_locks; i++)
		blob_locks[i] = task_locks[i].lock;
	pr_info("collected %zu file locks\n", nr_task_locks);
	return 0;
}

void file_locks_collect_fini(void)
{
	free(task_locks);
	task_locks = NULL;
	free(blob_locks);
	blob_locks = NULL;
	nr_task_locks = 0;
}

void file_locks_of_task(pid_t pid, const struct rst_file_lock **locks, unsigned int *nr)
{
	size_t first = 0, end;

	while (first < nr_task_locks && task_locks[first].pid != pid)
		first++;
	for (end = first; end < nr_task_locks && task_locks[end].pid == pid; end++)
		;
	*locks = end > first ? &blob_locks[first] : NULL;
	*nr = end - first;
}

/*
 * A record lock someone else took since the dump would fail the blob's F_SETLK: say who
 * holds it, while a message can still name it. The task holds no lock of its own yet,
 * and the tree's other locks were held together with this one.
 */
static int check_lock_free(pid_t pid, const struct rst_file_lock *lk)
{
	struct flock fl = { .l_type = lk->type, .l_whence = SEEK_SET, .l_start = lk->start,
			    .l_len = lk->len };
	char holder[32] = "an OFD lock";

	/* A lease is not tested: F_SETLEASE itself fails if the file is open elsewhere. */
	if (lk->kind == FILE_LOCK_FLOCK || lk->kind == FILE_LOCK_LEASE)
		return 0;
	if (fcntl(lk->fd, lk->kind == FILE_LOCK_OFD ? F_OFD_GETLK : F_GETLK, &fl)) {
		pr_perror("task %d: cannot test its %s lock on fd %d", pid,
			  lock_kind_name(lk->kind), lk->fd);
		return -errno;
	}
	if (fl.l_type == F_UNLCK)
		return 0;
	if (fl.l_pid > 0)
		snprintf(holder, sizeof(holder), "process %d", fl.l_pid);
	pr_err("task %d: its %s %s lock on fd %d at %lld+%lld is taken: %s holds it now\n", pid,
	       lock_kind_name(lk->kind), lk->type == F_RDLCK ? "read" : "write", lk->fd,
	       (long long)lk->start, (long long)lk->len, holder);
	return -EAGAIN;
}

int file_locks_check_task(pid_t pid)
{
	const struct rst_file_lock *locks;
	unsigned int nr;
	int ret = 0;

	file_locks_of_task(pid, &locks, &nr);
	for (unsigned int i = 0; i < nr && !ret; i++)
		ret = check_lock_free(pid, &locks[i]);
	return ret;
}
