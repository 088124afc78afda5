/*
 * The generic part of file descriptors: walking a stopped task's fds on dump (one
 * file_entry per open file description, one fdinfo_entry per fd), and on restore the
 * file table by id and placing each fd at its number. Kinds plug in through fdtype_ops.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "files-plan.h"
#include "image.h"
#include "log.h"
#include "mem-track.h"
#include "namespaces.h"
#include "pstree.h"
#include "servicefd.h"

/* The kinds, in the order kinds.c gives them (files_set_kinds()). */
static const struct fdtype_ops *const *fdtype_ops_table;
static size_t nr_fdtype_ops;

void files_set_kinds(const struct fdtype_ops *const *kinds, size_t nr)
{
	fdtype_ops_table = kinds;
	nr_fdtype_ops = nr;
}

static const struct fdtype_ops *ops_by_type(FdTypes type)
{
	for (size_t i = 0; i < nr_fdtype_ops; i++)
		if (fdtype_ops_table[i]->type == type)
			return fdtype_ops_table[i];
	return NULL;
}

/* CRIU's name of an fd_types value (UNIXSK, EVENTFD, ...), for messages. */
static const char *fd_type_name(FdTypes type, char *buf, size_t len)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&fd_types__descriptor, type);

	if (v)
		return v->name;
	snprintf(buf, len, "of unknown type %d", type);
	return buf;
}

/* ---------------------------------------------------------------- dump ---- */

static struct cr_img *files_img;
static uint32_t last_file_id;
static struct cr_img *side_images[CR_IMG_MAX];

/* The first fd seen of each dumped description: later fds are compared to it by kcmp. */
struct dumped_desc {
	pid_t pid;
	int fd;
	dev_t dev;
	ino_t ino;
	uint32_t id;
};

static struct dumped_desc *dumped_descs;
static size_t nr_dumped_descs;

/*
 * criu's own fds on files in flight (files_dump_in_flight()): open until the dump ends, as
 * fds of tasks dumped later are compared with them.
 */
static int *in_flight_fds;
static size_t nr_in_flight_fds;

/*
 * The pidfd of the task whose fds are read, kept for its next fd: every fd is grabbed at
 * least once (dump_fown()). Dropped once the task's fds are done: its pid may be reused.
 */
static int cached_pidfd = -1;
static pid_t cached_pidfd_pid;

static void drop_task_pidfd(void)
{
	if (cached_pidfd >= 0)
		close(cached_pidfd);
	cached_pidfd = -1;
}

static int task_pidfd(pid_t pid)
{
	if (cached_pidfd >= 0 && cached_pidfd_pid == pid)
		return cached_pidfd;
	drop_task_pidfd();
	cached_pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (cached_pidfd < 0) {
		pr_perror("task %d: pidfd_open", pid);
		return -errno;
	}
	cached_pidfd_pid = pid;
	return cached_pidfd;
}

int files_dump_init(void)
{
	files_img = open_image(CR_IMG_FILES, O_WRONLY, 0);
	return files_img ? 0 : -EIO;
}

int files_dump_fini(void)
{
	drop_task_pidfd();
	close_image(files_img);
	files_img = NULL;
	for (size_t i = 0; i < CR_IMG_MAX; i++) {
		close_image(side_images[i]);
		side_images[i] = NULL;
	}
	free(dumped_descs);
	dumped_descs = NULL;
	nr_dumped_descs = 0;
	for (size_t i = 0; i < nr_in_flight_fds; i++)
		close(in_flight_fds[i]);
	free(in_flight_fds);
	in_flight_fds = NULL;
	nr_in_flight_fds = 0;
	for (size_t k = 0; k < nr_fdtype_ops; k++)
		if (fdtype_ops_table[k]->dump_fini)
			fdtype_ops_table[k]->dump_fini();
	return 0;
}

int files_dump_check(void)
{
	for (size_t k = 0; k < nr_fdtype_ops; k++) {
		int ret = fdtype_ops_table[k]->dump_check ? fdtype_ops_table[k]->dump_check() : 0;

		if (ret)
			return ret;
	}
	return 0;
}

/* CRIU's tools do not expect empty images of these kinds: a dump without ghosts has none. */
struct cr_img *files_side_image(enum cr_img_type type)
{
	if (!side_images[type])
		side_images[type] = open_image(type, O_WRONLY, 0);
	return side_images[type];
}

uint32_t files_new_id(void)
{
	return ++last_file_id;
}

int write_file_entry(const FileEntry *fe)
{
	if (!files_img) {
		pr_err("file %u: files.img is not open (files_dump_init() not called)\n", fe->id);
		return -EBADF;
	}
	return pb_write_one(files_img, fe);
}

#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif

bool fd_is_mqueue(const struct fd_parms *p)
{
	struct statfs sfs;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->fd);
	return S_ISREG(p->st.st_mode) && !statfs(path, &sfs) && sfs.f_type == MQUEUE_MAGIC;
}

/*
 * pidfd_getfd() and not an open() of /proc/PID/fd/N: sockets cannot be re-opened by
 * path (ENXIO), a terminal in exclusive mode refuses a new opening, and a plugin must
 * see the same description (offsets, device state), not a fresh open.
 */
int grab_task_fd(const struct fd_parms *p)
{
	int pidfd = task_pidfd(p->pid), fd;

	if (pidfd < 0)
		return pidfd;
	fd = syscall(SYS_pidfd_getfd, pidfd, p->fd, 0);
	if (fd < 0) {
		pr_perror("fd %d of task %d: cannot get a copy of it (pidfd_getfd)", p->fd, p->pid);
		return -errno;
	}
	return fd;
}

/* The kernel's (asm-generic/fcntl.h); glibc's fcntl.h does not have it. */
#ifndef F_GETOWNER_UIDS
#define F_GETOWNER_UIDS 17
#endif

/*
 * Whether restore can give a file the owner of its I/O signals back: a thread, process
 * or process group of the tree that keeps its id. Both sides.
 */
static bool owner_in_tree(uint32_t type, uint32_t id)
{
	if (id > INT_MAX)
		return false;
	switch (type) {
	case F_OWNER_TID:
		return pstree_find_thread(id);
	case F_OWNER_PID:
		return pstree_find(id);
	case F_OWNER_PGRP:
		return pstree_group_kept(id);
	}
	return false;
}

static const char *owner_kind(uint32_t type)
{
	switch (type) {
	case F_OWNER_TID:
		return "thread";
	case F_OWNER_PID:
		return "process";
	case F_OWNER_PGRP:
		return "process group";
	}
	return "owner of an unknown type";
}

/*
 * Nothing in /proc shows the owner, nor the signal (fdinfo's flags only show O_ASYNC, and
 * an owner matters without it: a socket's SIGURG, a lease's break signal), so every file
 * is asked through criu's copy of it, the same description. An owner that died reads 0:
 * it gets no signal any more, and none is dumped.
 */
int dump_fown(const struct fd_parms *p, FownEntry *fown)
{
	struct f_owner_ex owner = { 0, 0 };
	uint32_t ids[2] = { 0, 0 };
	int fd, sig, ret = 0;

	fown_entry__init(fown);
	/* fcntl refuses both on O_PATH files, which cannot have either. */
	if (p->flags & O_PATH)
		return 0;
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	sig = fcntl(fd, F_GETSIG);
	if (sig < 0 || fcntl(fd, F_GETOWN_EX, &owner) ||
	    (owner.pid && fcntl(fd, F_GETOWNER_UIDS, ids))) {
		ret = -errno;
		pr_perror("fd %d of task %d: cannot read the owner of its I/O signals", p->fd,
			  p->pid);
	}
	close(fd);
	if (ret)
		return ret;
	fown->signum = sig;
	if (!owner.pid)
		return 0;
	if (!owner_in_tree(owner.type, owner.pid)) {
		pr_err("fd %d of task %d (%s): its I/O signals (F_SETOWN) go to %s %d, which is "
		       "outside the dumped tree: not supported\n",
		       p->fd, p->pid, p->link, owner_kind(owner.type), owner.pid);
		return -ENOTSUP;
	}
	ret = userns_tree_uid(ids[0], &fown->uid, p->link) ?:
		      userns_tree_uid(ids[1], &fown->euid, p->link);
	if (ret)
		return ret;
	fown->pid_type = owner.type;
	fown->pid = pidns_img_pid(owner.pid);
	pr_debug("fd %d of task %d: I/O signal %d to %s %d (uid %u, euid %u)\n", p->fd, p->pid,
		 sig, owner_kind(owner.type), owner.pid, ids[0], ids[1]);
	return 0;
}

static int read_fdinfo_fields(struct fd_parms *p)
{
	char path[64], line[256];
	bool have_pos = false, have_flags = false;
	unsigned int flags;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", p->pid, p->fd);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long pos;

		if (sscanf(line, "pos: %llu", &pos) == 1) {
			p->pos = pos;
			have_pos = true;
		} else if (sscanf(line, "flags: %o", &flags) == 1) {
			have_flags = true;
		}
	}
	fclose(f);
	if (!have_pos || !have_flags) {
		pr_err("%s: no pos or flags line\n", path);
		return -EINVAL;
	}
	/* fdinfo shows the fd's close-on-exec as O_CLOEXEC: it belongs to the fd, not the file. */
	p->cloexec = flags & O_CLOEXEC;
	p->flags = flags & ~O_CLOEXEC;
	return 0;
}

static int fill_fd_parms(pid_t pid, int fd, struct fd_parms *p)
{
	char path[64];
	ssize_t len;

	p->pid = pid;
	p->fd = fd;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	len = readlink(path, p->link, sizeof(p->link) - 1);
	if (len < 0) {
		pr_perror("cannot read link %s", path);
		return -errno;
	}
	p->link[len] = '\0';
	if (stat(path, &p->st)) {
		pr_perror("cannot stat %s (%s)", path, p->link);
		return -errno;
	}
	return read_fdinfo_fields(p);
}

/* The last kind, ext, owns every fd: what no core kind takes goes to the plugins. */
static const struct fdtype_ops *ops_owning(const struct fd_parms *p)
{
	size_t i = 0;

	while (!fdtype_ops_table[i]->owns || !fdtype_ops_table[i]->owns(p))
		i++;
	return fdtype_ops_table[i];
}

int same_file_desc(pid_t pid1, int fd1, pid_t pid2, int fd2)
{
	int ret = syscall(SYS_kcmp, pid1, pid2, KCMP_FILE, fd1, fd2);

	if (ret < 0) {
		pr_perror("kcmp of fd %d of task %d with fd %d of task %d", fd1, pid1, fd2, pid2);
		return -errno;
	}
	return ret == 0;
}

/*
 * fds that are dups (or were inherited over fork, in this task or another of the tree)
 * share one description: it must be restored once and dup'ed or inherited, or offsets
 * and flags would stop being shared. Only the same inode can be the same description,
 * so kcmp runs on those candidates alone. *found: the first fd dumped of it, or NULL for
 * a new description. 0 or -errno.
 */
static int find_dumped_desc(const struct fd_parms *p, const struct dumped_desc **found)
{
	*found = NULL;
	for (size_t i = 0; i < nr_dumped_descs; i++) {
		struct dumped_desc *d = &dumped_descs[i];
		int ret;

		if (d->dev != p->st.st_dev || d->ino != p->st.st_ino)
			continue;
		ret = same_file_desc(p->pid, p->fd, d->pid, d->fd);
		if (ret < 0)
			return ret;
		if (ret) {
			*found = d;
			return 0;
		}
	}
	return 0;
}

static int remember_dumped_desc(const struct fd_parms *p, uint32_t id)
{
	struct dumped_desc *grown = realloc(dumped_descs, (nr_dumped_descs + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("out of memory remembering fd %d of task %d\n", p->fd, p->pid);
		return -ENOMEM;
	}
	dumped_descs = grown;
	dumped_descs[nr_dumped_descs++] = (struct dumped_desc){
		.pid = p->pid, .fd = p->fd, .dev = p->st.st_dev, .ino = p->st.st_ino, .id = id
	};
	return 0;
}

/*
 * The file id of fd of task pid (*p filled for it) and its kind, the description dumped
 * when new. A file in flight (pid is criu) is in no task's fd table, which a kind with a
 * finish() step needs: refused when new.
 */
static int desc_of_fd(pid_t pid, int fd, struct fd_parms *p, uint32_t *id,
		      const struct fdtype_ops **ops_out)
{
	bool in_flight = pid == getpid();
	const struct dumped_desc *first;
	const struct fdtype_ops *ops;
	int ret;

	ret = fill_fd_parms(pid, fd, p);
	if (!ret)
		ret = find_dumped_desc(p, &first);
	if (ret)
		return ret;
	ops = *ops_out = ops_owning(p);

	if (first) {
		*id = first->id;
		pr_debug("fd %d of task %d: shares file id %u\n", fd, pid, *id);
		/* Restore opens these in each task (see fdtype_ops.inheritable). */
		if (first->pid != pid && !ops->inheritable && !ops->parked)
			pr_warn("fd %d of task %d (%s) shares its description with fd %d of "
				"task %d: it will be restored as a separate copy in each task\n",
				fd, pid, p->link, first->fd, first->pid);
		return 0;
	}
	if (in_flight && ops->finish && !ops->finish_in_flight) {
		pr_err("a file in flight (%s, a %s file) has state that only a task holding it "
		       "restores: not supported\n",
		       p->link, ops->name);
		return -ENOTSUP;
	}
	*id = files_new_id();
	/* First: the dump of a socket may meet the socket itself, in flight in its queue. */
	ret = remember_dumped_desc(p, *id);
	if (!ret)
		ret = ops->dump(p, *id);
	if (!ret)
		pr_debug("fd %d of task %d: %s %s, file id %u\n", fd, pid, ops->name, p->link, *id);
	return ret;
}

int files_dump_in_flight(int fd, uint32_t *id)
{
	int *grown = realloc(in_flight_fds, (nr_in_flight_fds + 1) * sizeof(*grown));
	const struct fdtype_ops *ops;
	struct fd_parms p;

	if (!grown) {
		pr_err("out of memory keeping a file in flight\n");
		close(fd);
		return -ENOMEM;
	}
	in_flight_fds = grown;
	in_flight_fds[nr_in_flight_fds++] = fd;
	return desc_of_fd(getpid(), fd, &p, id, &ops);
}

int files_dump_task_fd(pid_t pid, int fd, uint32_t *id, FdTypes *type)
{
	const struct fdtype_ops *ops;
	struct fd_parms p;
	int ret = desc_of_fd(pid, fd, &p, id, &ops);

	if (!ret)
		*type = ops->type;
	return ret;
}

static int dump_one_fd(pid_t pid, int fd, struct cr_img *fdinfo_img)
{
	FdinfoEntry fdi = FDINFO_ENTRY__INIT;
	const struct fdtype_ops *ops;
	struct fd_parms p;
	uint32_t id;
	int ret;

	ret = desc_of_fd(pid, fd, &p, &id, &ops);
	if (ret)
		return ret;
	fdi.fd = fd;
	fdi.id = id;
	fdi.type = ops->type;
	fdi.flags = p.cloexec ? FD_CLOEXEC : 0;
	return pb_write_one(fdinfo_img, &fdi);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The fd numbers listed in a /proc fd directory ("/proc/..."), sorted. */
int list_fds(const char *path, int **fds_out, size_t *nr_out)
{
	struct dirent *de;
	int *fds = NULL;
	size_t nr = 0;
	DIR *dir;

	/* A restored task may be in a mount namespace without /proc: proc_opendir() knows. */
	dir = proc_opendir(path + strlen("/proc/"));
	if (!dir) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while ((de = readdir(dir))) {
		int *grown;

		if (de->d_name[0] == '.')
			continue;
		grown = realloc(fds, (nr + 1) * sizeof(*fds));
		if (!grown) {
			pr_err("out of memory listing %s\n", path);
			free(fds);
			closedir(dir);
			return -ENOMEM;
		}
		fds = grown;
		fds[nr++] = atoi(de->d_name);
	}
	closedir(dir);
	qsort(fds, nr, sizeof(*fds), cmp_int);
	*fds_out = fds;
	*nr_out = nr;
	return 0;
}

/* fdinfo images are named by the files table they describe, not by the task. */
static int task_files_id(pid_t pid, uint32_t *files_id)
{
	const struct pstree_item *item = pstree_find(pid);

	if (!item || !item->ids.files_id) {
		pr_err("task %d has no files id (ids-%d.img): its fds cannot be named\n", pid, pid);
		return -EINVAL;
	}
	*files_id = item->ids.files_id;
	return 0;
}

int dump_task_files(pid_t pid)
{
	struct cr_img *fdinfo_img;
	uint32_t files_id;
	size_t nr_fds;
	char path[64];
	int *fds, ret, tracker_fd;

	pr_info("dumping the fds of task %d\n", pid);
	ret = task_files_id(pid, &files_id);
	if (ret)
		return ret;
	/* The task is stopped, so the list cannot change under us. */
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	ret = list_fds(path, &fds, &nr_fds);
	if (ret)
		return ret;
	fdinfo_img = open_image(CR_IMG_FDINFO, O_WRONLY, files_id);
	if (!fdinfo_img) {
		free(fds);
		return -EIO;
	}
	/* A pre-dump's write tracker is criu's, not the task's: never in the images. */
	tracker_fd = mem_track_fd(pid);
	for (size_t i = 0; i < nr_fds && !ret; i++)
		if (fds[i] != tracker_fd)
			ret = dump_one_fd(pid, fds[i], fdinfo_img);
	drop_task_pidfd();
	close_image(fdinfo_img);
	free(fds);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

struct file_desc *file_descs;
size_t nr_file_descs;

static int cmp_desc_id(const void *a, const void *b)
{
	uint32_t x = ((const struct file_desc *)a)->id, y = ((const struct file_desc *)b)->id;

	return (x > y) - (x < y);
}

/* Reading files.img: by id, then type (a REG twin before its kind's entry). */
static int cmp_desc_id_type(const void *a, const void *b)
{
	const struct file_desc *x = a, *y = b;

	return cmp_desc_id(a, b) ?: (x->fe->type > y->fe->type) - (x->fe->type < y->fe->type);
}

const struct file_desc *find_file_desc(uint32_t id)
{
	struct file_desc key = { .id = id };

	if (!file_descs)
		return NULL;
	return bsearch(&key, file_descs, nr_file_descs, sizeof(*file_descs), cmp_desc_id);
}

const FileEntry *find_file_entry(uint32_t id)
{
	const struct file_desc *d = find_file_desc(id);

	return d ? d->fe : NULL;
}

size_t desc_index(const struct file_desc *d)
{
	return d - file_descs;
}

/*
 * The owner (F_SETOWN_EX) names a thread, process or group by id: one of the restored
 * tree, set once all of it exists (restore_file_owners()). The signal (F_SETSIG) is a
 * plain number, set when the file is opened.
 */
int collect_owner(struct file_desc *d, const FownEntry *fown)
{
	if (!fown)
		return 0;
	if (fown->signum > 64) {
		pr_err("files.img: file %u: I/O signal %u is not a signal\n", d->id, fown->signum);
		return -EINVAL;
	}
	if (fown->pid && !owner_in_tree(fown->pid_type, fown->pid)) {
		pr_err("files.img: file %u: its I/O signals go to %s %u (type %u), which is not "
		       "in the restored tree\n",
		       d->id, owner_kind(fown->pid_type), fown->pid, fown->pid_type);
		return -EINVAL;
	}
	d->owner_signum = fown->signum;
	d->owner = fown->pid ? fown : NULL;
	return 0;
}

int restore_status_flags(int fd, uint32_t flags, const struct file_desc *d)
{
	int err;

	if (!fcntl(fd, F_SETFL, flags))
		return fd;
	err = errno;
	pr_err("%s file %u: cannot set its flags %#o: %s\n", d->ops->name, d->id, flags,
	       strerror(err));
	close(fd);
	return -err;
}

static int append_desc(FileEntry *fe, size_t *capacity)
{
	if (nr_file_descs == *capacity) {
		size_t grown_cap = *capacity ? *capacity * 2 : 64;
		struct file_desc *grown = realloc(file_descs, grown_cap * sizeof(*grown));

		if (!grown) {
			pr_err("out of memory reading files.img (%zu entries)\n", nr_file_descs);
			return -ENOMEM;
		}
		file_descs = grown;
		*capacity = grown_cap;
	}
	file_descs[nr_file_descs++] = (struct file_desc){ .id = fe->id, .fe = fe };
	return 0;
}

/* Refused by kind before anything else is read: sockets, eventfd, epoll, ... */
static int check_kind_supported(const FileEntry *fe)
{
	char buf[32];

	if (ops_by_type(fe->type))
		return 0;
	pr_err("files.img: file %u is %s, not supported\n", fe->id,
	       fd_type_name(fe->type, buf, sizeof(buf)));
	return -ENOTSUP;
}

static int read_files_img(struct cr_img *img)
{
	size_t capacity = 0;
	FileEntry *fe;
	int ret;

	while ((ret = pb_read_one(img, (void **)&fe)) > 0) {
		ret = check_kind_supported(fe);
		if (!ret)
			ret = append_desc(fe, &capacity);
		if (ret) {
			pb_free(img, fe);
			return ret;
		}
		file_descs[nr_file_descs - 1].ops = ops_by_type(fe->type);
	}
	return ret;
}

/*
 * A kind with a REG twin (fdtype_ops.reg_twin): its entry takes the REG entry of the same
 * id, which leaves the table. The table is sorted by id, then type, so the REG comes first.
 */
static void pair_reg_twins(void)
{
	size_t kept = 0;

	for (size_t i = 0; i < nr_file_descs; i++) {
		struct file_desc *d = &file_descs[i];

		if (i + 1 < nr_file_descs && file_descs[i + 1].id == d->id &&
		    d->fe->type == FD_TYPES__REG && file_descs[i + 1].ops->reg_twin &&
		    !file_descs[i + 1].reg_twin) {
			file_descs[i + 1].reg_twin = d->fe;
			continue;
		}
		file_descs[kept++] = *d;
	}
	nr_file_descs = kept;
}

static int check_unique_ids(void)
{
	for (size_t i = 1; i < nr_file_descs; i++) {
		if (file_descs[i].id == file_descs[i - 1].id) {
			pr_err("files.img: file id %u appears twice\n", file_descs[i].id);
			return -EINVAL;
		}
	}
	return 0;
}

/* Each kind in table order: its own images, then its entries. */
static int collect_kinds(void)
{
	for (size_t k = 0; k < nr_fdtype_ops; k++) {
		const struct fdtype_ops *ops = fdtype_ops_table[k];
		int ret;

		if (ops->collect_images) {
			ret = ops->collect_images();
			if (ret)
				return ret;
		}
		for (size_t i = 0; i < nr_file_descs; i++) {
			if (file_descs[i].ops != ops)
				continue;
			ret = ops->collect(&file_descs[i]);
			if (ret)
				return ret;
		}
		if (ops->collect_done) {
			ret = ops->collect_done();
			if (ret)
				return ret;
		}
	}
	return 0;
}

int files_collect(void)
{
	struct cr_img *img = open_image(CR_IMG_FILES, O_RDONLY, 0);
	int ret;

	if (!img)
		return -EIO;
	ret = read_files_img(img);
	close_image(img);
	if (ret)
		return ret;
	/* An empty files.img leaves file_descs NULL, which qsort() must not be given. */
	if (nr_file_descs)
		qsort(file_descs, nr_file_descs, sizeof(*file_descs), cmp_desc_id_type);
	pair_reg_twins();
	ret = check_unique_ids();
	if (!ret)
		ret = collect_kinds();
	if (ret)
		return ret;
	pr_info("collected %zu files from files.img\n", nr_file_descs);
	return plan_shared_files();
}

static int cmp_fdinfo_fd(const void *a, const void *b)
{
	uint32_t x = (*(FdinfoEntry *const *)a)->fd, y = (*(FdinfoEntry *const *)b)->fd;

	return (x > y) - (x < y);
}

void free_fdinfos(FdinfoEntry **fdis, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		fdinfo_entry__free_unpacked(fdis[i], NULL);
	free(fdis);
}

/* An fdinfo entry must name a collected file of its own type at a number we can use. */
static int check_fdinfo(const char *img_name, const FdinfoEntry *fdi)
{
	const struct file_desc *d = find_file_desc(fdi->id);
	char want[32], have[32];
	int lowest, highest;

	if (!d) {
		pr_err("%s: fd %u refers to file id %u, which is not in files.img\n", img_name,
		       fdi->fd, fdi->id);
		return -ENOENT;
	}
	if (d->fe->type != fdi->type) {
		pr_err("%s: fd %u has type %s but file %u is %s\n", img_name, fdi->fd,
		       fd_type_name(fdi->type, want, sizeof(want)), fdi->id,
		       fd_type_name(d->fe->type, have, sizeof(have)));
		return -EINVAL;
	}
	if (!d->ops->open) {
		pr_err("%s: fd %u is a %s (file %u), which this criu restores only as a mapping\n",
		       img_name, fdi->fd, d->ops->name, fdi->id);
		return -ENOTSUP;
	}
	service_fd_range(&lowest, &highest);
	if (fdi->fd >= (uint32_t)lowest) {
		pr_err("%s: fd %u is not below criu's service fds %d..%d (criu's RLIMIT_NOFILE is "
		       "%d); restore with a higher soft RLIMIT_NOFILE\n",
		       img_name, fdi->fd, lowest, highest, highest + 1);
		return -EBUSY;
	}
	return 0;
}

static int check_unique_fds(const char *img_name, FdinfoEntry **fdis, size_t nr)
{
	for (size_t i = 1; i < nr; i++) {
		if (fdis[i]->fd == fdis[i - 1]->fd) {
			pr_err("%s: fd %u appears twice\n", img_name, fdis[i]->fd);
			return -EINVAL;
		}
	}
	return 0;
}

/* The fds of one files table, sorted by number and checked against the file table. */
int read_fdinfos(uint32_t files_id, FdinfoEntry ***fdis_out, size_t *nr_out)
{
	struct cr_img *img = open_image(CR_IMG_FDINFO, O_RDONLY, files_id);
	FdinfoEntry **fdis = NULL, *fdi;
	size_t nr = 0;
	int ret;

	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&fdi)) > 0) {
		FdinfoEntry **grown = realloc(fdis, (nr + 1) * sizeof(*grown));

		if (!grown) {
			pr_err("out of memory reading %s\n", img->name);
			pb_free(img, fdi);
			ret = -ENOMEM;
			break;
		}
		fdis = grown;
		fdis[nr++] = fdi;
		ret = check_fdinfo(img->name, fdi);
		if (ret)
			break;
	}
	if (ret >= 0) {
		if (nr) /* else fdis is NULL */
			qsort(fdis, nr, sizeof(*fdis), cmp_fdinfo_fd);
		ret = check_unique_fds(img->name, fdis, nr);
	}
	close_image(img);
	if (ret < 0) {
		free_fdinfos(fdis, nr);
		return ret;
	}
	*fdis_out = fdis;
	*nr_out = nr;
	return 0;
}

/*
 * The entries first, then the kinds' tables their kinds point into. An entry's
 * --inherit-fd copy (place_given_fds()) is criu's own: closed with it.
 */
void files_collect_fini(void)
{
	for (size_t i = 0; i < nr_file_descs; i++) {
		if (file_sharing && file_sharing[i].given_fd >= 0)
			close(file_sharing[i].given_fd);
		free(file_descs[i].kind);
		file_entry__free_unpacked((FileEntry *)file_descs[i].fe, NULL);
		if (file_descs[i].reg_twin)
			file_entry__free_unpacked((FileEntry *)file_descs[i].reg_twin, NULL);
	}
	free(file_sharing);
	file_sharing = NULL;
	free(file_descs);
	file_descs = NULL;
	nr_file_descs = 0;
	for (size_t k = 0; k < nr_fdtype_ops; k++)
		if (fdtype_ops_table[k]->collect_fini)
			fdtype_ops_table[k]->collect_fini();
}

/*
 * Open d and give it the I/O signal it had; or, named by --inherit-fd, take the
 * descriptor criu was given for it. The fd or -errno.
 */
static int open_desc(const struct file_desc *d)
{
	int given_fd = file_sharing[desc_index(d)].given_fd, fd;

	if (given_fd >= 0) {
		fd = fcntl(given_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			pr_perror("file %u: cannot take its --inherit-fd descriptor", d->id);
		return fd < 0 ? -errno : fd;
	}
	fd = d->ops->open(d);

	if (fd < 0 || !d->owner_signum)
		return fd;
	if (fcntl(fd, F_SETSIG, d->owner_signum)) {
		int err = errno;

		pr_err("file %u: cannot set its I/O signal %u: %s\n", d->id, d->owner_signum,
		       strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}

/*
 * At its inherited number, which nothing of criu's may hold: the task inherited criu's
 * low-numbered fds, so a collision means the range is too close to them.
 */
static int open_inherited(const struct file_desc *d, int inherited_fd)
{
	int fd;

	if (fcntl(inherited_fd, F_GETFD) >= 0) {
		pr_err("file %u: its inherited fd %d is already in use\n", d->id, inherited_fd);
		return -EBUSY;
	}
	fd = open_desc(d);
	if (fd < 0 || fd == inherited_fd)
		return fd < 0 ? fd : 0;
	if (dup2(fd, inherited_fd) < 0) {
		int err = errno;

		pr_err("file %u: cannot move it to inherited fd %d: %s\n", d->id, inherited_fd,
		       strerror(err));
		close(fd);
		return -err;
	}
	close(fd);
	return 0;
}

int files_dep_fd(uint32_t id)
{
	const struct file_desc *d = find_file_desc(id);

	if (!d || file_sharing[desc_index(d)].inherited_fd < 0) {
		pr_err("file %u is not open for the files that need it\n", id);
		return -EBADF;
	}
	return file_sharing[desc_index(d)].inherited_fd;
}

int files_keep_for(uint32_t id, int fd)
{
	const struct file_desc *d = find_file_desc(id);
	int kept_fd = d ? file_sharing[desc_index(d)].kept_fd : -1;

	if (d && !desc_in_use(desc_index(d))) {
		close(fd);
		return 0;
	}
	if (kept_fd < 0 || fcntl(kept_fd, F_GETFD) >= 0) {
		pr_err("file %u: %s to keep it at while its object is made\n", id,
		       kept_fd < 0 ? "no fd number was set aside"
				   : "the fd number set aside is taken");
		close(fd);
		return -EBADF;
	}
	if (dup3(fd, kept_fd, O_CLOEXEC) < 0) {
		int err = errno;

		pr_err("file %u: cannot keep it at fd %d: %s\n", id, kept_fd, strerror(err));
		close(fd);
		return -err;
	}
	close(fd);
	return 0;
}

int files_take_kept(uint32_t id)
{
	const struct file_desc *d = find_file_desc(id);
	int kept_fd = d ? file_sharing[desc_index(d)].kept_fd : -1;

	/* Taken once: the engine moves it to its place and closes this number. */
	if (kept_fd < 0 || fcntl(kept_fd, F_GETFD) < 0)
		return -ENOENT;
	return kept_fd;
}

/*
 * Entry idx at its inherited number in item, after the dependencies item opens itself
 * (those an ancestor opened are inherited already). opened: per entry, in this task.
 */
static int open_inherited_after_deps(const struct pstree_item *item, size_t idx, bool *opened)
{
	uint32_t *ids;
	size_t nr;
	int ret;

	if (opened[idx])
		return 0;
	ret = desc_deps(idx, &ids, &nr);
	for (size_t k = 0; k < nr && !ret; k++) {
		size_t j = desc_index(find_file_desc(ids[k]));

		if (file_sharing[j].opener == item)
			ret = open_inherited_after_deps(item, j, opened);
	}
	free(ids);
	if (!ret)
		ret = open_inherited(&file_descs[idx], file_sharing[idx].inherited_fd);
	if (ret)
		return ret;
	opened[idx] = true;
	pr_debug("file %u opened for the subtree at fd %d\n", file_descs[idx].id,
		 file_sharing[idx].inherited_fd);
	return 0;
}

int files_tree_forked(void)
{
	for (size_t k = 0; k < nr_fdtype_ops; k++) {
		int ret = fdtype_ops_table[k]->tree_forked ? fdtype_ops_table[k]->tree_forked() : 0;

		if (ret)
			return ret;
	}
	return 0;
}

int files_tree_ready(void)
{
	for (size_t k = 0; k < nr_fdtype_ops; k++) {
		int ret = fdtype_ops_table[k]->tree_ready ? fdtype_ops_table[k]->tree_ready() : 0;

		if (ret)
			return ret;
	}
	return 0;
}

int prepare_inherited_files(const struct pstree_item *item)
{
	bool *opened = calloc(nr_file_descs ? nr_file_descs : 1, sizeof(*opened));
	int ret = 0;

	if (!opened) {
		pr_err("out of memory opening the inherited files\n");
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_file_descs && !ret; i++)
		if (file_sharing[i].inherited_fd >= 0 && file_sharing[i].opener == item)
			ret = open_inherited_after_deps(item, i, opened);
	free(opened);
	return ret;
}

/*
 * Open (or dup, when an earlier fd shares the description or an ancestor opened it for
 * its subtree) and move to its number.
 * Whatever of criu's still sits at that number is not a service fd (check_fdinfo), so
 * dup2 may replace it.
 */
static int place_fd(FdinfoEntry **fdis, size_t idx)
{
	const FdinfoEntry *fdi = fdis[idx];
	const struct file_desc *d = find_file_desc(fdi->id);
	int fd = fdi->fd, src = -1;
	bool opened = false;

	for (size_t i = 0; i < idx && src < 0; i++)
		if (fdis[i]->id == fdi->id)
			src = fdis[i]->fd;
	if (src < 0)
		src = file_sharing[desc_index(d)].inherited_fd;
	if (src < 0) {
		src = open_desc(d);
		if (src < 0)
			return src;
		opened = true;
	}
	if (src != fd) {
		if (dup2(src, fd) < 0) {
			int err = errno;

			pr_err("cannot place file %u at fd %d: %s\n", fdi->id, fd, strerror(err));
			if (opened)
				close(src);
			return -err;
		}
		if (opened)
			close(src);
	}
	if (fcntl(fd, F_SETFD, fdi->flags & FD_CLOEXEC)) {
		pr_perror("cannot set the fd flags of fd %d", fd);
		return -errno;
	}
	pr_debug("fd %d: file %u%s%s\n", fd, fdi->id, opened ? "" : " (shared)",
		 (fdi->flags & FD_CLOEXEC) ? ", cloexec" : "");
	return 0;
}

/* The entry of fd in a task's fdinfo list sorted by fd, or NULL. */
static FdinfoEntry *find_fdinfo(FdinfoEntry **fdis, size_t nr, int fd)
{
	FdinfoEntry key = { .fd = fd }, *keyp = &key, **found;

	if (fd < 0 || !nr)
		return NULL;
	found = bsearch(&keyp, fdis, nr, sizeof(*fdis), cmp_fdinfo_fd);
	return found ? *found : NULL;
}

/*
 * Whatever criu inherited or left open must not leak into the restored task: this also
 * closes the inherited range, whose descriptions the task now holds at its own numbers.
 */
static int close_stray_fds(FdinfoEntry **fdis, size_t nr)
{
	int *fds;
	size_t nr_fds;
	int ret;

	ret = list_fds("/proc/self/fd", &fds, &nr_fds);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_fds; i++) {
		int fd = fds[i];

		if (is_service_fd(fd) || find_fdinfo(fdis, nr, fd))
			continue;
		/* The directory list_fds read is already closed: EBADF is expected once. */
		if (close(fd) == 0)
			pr_debug("closed criu's fd %d\n", fd);
	}
	free(fds);
	return 0;
}

uint32_t task_fd_file(const struct task_fds *fds, int fd)
{
	const FdinfoEntry *fdi = find_fdinfo(fds->fdis, fds->nr, fd);

	return fdi ? fdi->id : 0;
}

int task_fd_of_file(const struct task_fds *fds, uint32_t id)
{
	for (size_t i = 0; i < fds->nr; i++)
		if (fds->fdis[i]->id == id)
			return fds->fdis[i]->fd;
	return -1;
}

/* fdtype_ops.finish of each file the task holds first, at its lowest fd. */
static int finish_files(const struct task_fds *fds)
{
	for (size_t i = 0; i < fds->nr; i++) {
		const FdinfoEntry *fdi = fds->fdis[i];
		const struct file_desc *d = find_file_desc(fdi->id);
		int ret;

		if (!d->ops->finish || file_sharing[desc_index(d)].first_user != fds->pid ||
		    task_fd_of_file(fds, fdi->id) != (int)fdi->fd)
			continue;
		ret = d->ops->finish(d, fdi->fd, fds);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * finish() of the files this task opened for others that no task holds, on the fd it
 * keeps each at, before close_stray_fds() closes it (the file lives on where it was put:
 * a socket's queue).
 */
static int finish_opened_files(const struct task_fds *fds)
{
	for (size_t i = 0; i < nr_file_descs; i++) {
		int ret;

		if (!finished_by_opener(i) || file_sharing[i].opener->pid != fds->pid)
			continue;
		ret = file_descs[i].ops->finish(&file_descs[i], file_sharing[i].inherited_fd, fds);
		if (ret)
			return ret;
	}
	return 0;
}

/* criu's own uids again, after setown_as() took others; and its dumpable flag. */
static int take_own_uids(uid_t uid, uid_t euid, uid_t suid, int dumpable)
{
	if (syscall(SYS_setresuid, uid, euid, suid)) {
		pr_perror("cannot take criu's uids %u/%u/%u back", uid, euid, suid);
		return -errno;
	}
	/* A change of euid makes a process not dumpable. */
	if (dumpable == 0 || dumpable == 1)
		prctl(PR_SET_DUMPABLE, dumpable);
	return 0;
}

/*
 * The kernel keeps the uid and euid of whoever sets the owner, and checks them against
 * the receiver's before each signal (sigio_perm() in fs/fcntl.c): criu makes the call as
 * the image's ids. Its saved uid stays, so that it can take its own ids back. The raw
 * system call changes this thread's ids alone (glibc's setresuid() changes every
 * thread's), so a plugin's worker thread keeps criu's meanwhile. criu runs this in its
 * own user namespace: the image's ids are the tree's, which its user namespace, if it
 * has one, maps to the ids criu takes (the kernel compares those).
 */
static int setown_as(int fd, const struct f_owner_ex *owner, const FownEntry *fown, uint32_t id)
{
	uid_t uid, euid, suid, own_uid, own_euid;
	int dumpable = -1, err = 0;
	bool other_ids;
	char what[32];

	snprintf(what, sizeof(what), "file %u's owner", id);
	if (userns_host_uid(fown->uid, &own_uid, what) ||
	    userns_host_uid(fown->euid, &own_euid, what))
		return -EOVERFLOW;
	if (getresuid(&uid, &euid, &suid)) {
		pr_perror("cannot read criu's uids");
		return -errno;
	}
	other_ids = own_uid != uid || own_euid != euid;
	if (other_ids) {
		dumpable = prctl(PR_GET_DUMPABLE);
		if (syscall(SYS_setresuid, own_uid, own_euid, -1)) {
			pr_perror("file %u: cannot take uid %u and euid %u to set its owner", id,
				  own_uid, own_euid);
			return -errno;
		}
	}
	if (fcntl(fd, F_SETOWN_EX, owner))
		err = errno;
	if (other_ids) {
		int ret = take_own_uids(uid, euid, suid, dumpable);

		if (ret)
			return ret;
	}
	if (err) {
		pr_err("file %u: cannot give its I/O signals to %s %d: %s\n", id,
		       owner_kind(owner->type), owner->pid, strerror(err));
		return -err;
	}
	return 0;
}

/*
 * Through criu's copy of fd of task pid, the same description. The owner is named as criu
 * sees it: criu sets it from outside the tree's pid namespace, if the tree has one.
 */
static int set_file_owner(const struct file_desc *d, pid_t pid, int fd)
{
	struct f_owner_ex owner = { .type = d->owner->pid_type,
				    .pid = pidns_host_pid(d->owner->pid) };
	struct fd_parms p = { .pid = pid, .fd = fd };
	int own_fd = grab_task_fd(&p), ret;

	if (own_fd < 0)
		return own_fd;
	ret = setown_as(own_fd, &owner, d->owner, d->id);
	close(own_fd);
	if (!ret)
		pr_debug("file %u: I/O signals to %s %d\n", d->id, owner_kind(owner.type),
			 owner.pid);
	return ret;
}

/*
 * Whether fdi is the fd through which the restored tree's state of its description is
 * set once: the task's lowest fd on it; a shared description by its first user only; a
 * file each user opened for itself (fdtype_ops.inheritable) by each; never a descriptor
 * --inherit-fd gave, which stays as it was given.
 */
static bool first_fd_of_file(const struct task_fds *fds, const FdinfoEntry *fdi)
{
	const struct file_desc *d = find_file_desc(fdi->id);
	const struct file_sharing *fs = &file_sharing[desc_index(d)];

	if (fs->given_fd >= 0 || task_fd_of_file(fds, fdi->id) != (int)fdi->fd)
		return false;
	return !d->ops->inheritable || fs->first_user == fds->pid;
}

static int set_task_owners(const struct pstree_item *item)
{
	struct task_fds fds = { .pid = item->pid };
	int ret;

	if (item->zombie || !item->ids.files_id || pstree_shares_parent_files(item))
		return 0;
	ret = read_fdinfos(item->ids.files_id, &fds.fdis, &fds.nr);
	for (size_t i = 0; i < fds.nr && !ret; i++) {
		const FdinfoEntry *fdi = fds.fdis[i];
		const struct file_desc *d = find_file_desc(fdi->id);

		if (d->owner && first_fd_of_file(&fds, fdi))
			ret = set_file_owner(d, pidns_host_pid(item->pid), fdi->fd);
	}
	free_fdinfos(fds.fdis, fds.nr);
	return ret;
}

/*
 * Not when the files are opened: an owner may be a thread, which the restorer creates
 * last, or a task not forked yet; and a signal raised while the tree is restored would
 * wait, pending, in a task that did not ask for it.
 */
int restore_file_owners(void)
{
	struct pstree_item *item;
	size_t nr_owned = 0;
	int ret = 0;

	for (size_t i = 0; i < nr_file_descs; i++)
		nr_owned += file_descs[i].owner != NULL;
	if (!nr_owned)
		return 0;
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = set_task_owners(item);
	drop_task_pidfd();
	if (!ret)
		pr_info("owners of I/O signals set for %zu files\n", nr_owned);
	return ret;
}

/*
 * A signal-driven file's signal carries the fd number O_ASYNC was last set through
 * (si_fd): that was where the file was opened, so it is set again at the task's number.
 * Off and on, since F_SETFL registers only a change (a file without fasync ignores
 * both). A terminal makes its foreground group or the caller the owner then: none, until
 * restore_file_owners() sets the image's.
 */
static int rearm_async(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags >= 0 && !(flags & O_ASYNC))
		return 0;
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_ASYNC) || fcntl(fd, F_SETFL, flags) ||
	    fcntl(fd, F_SETOWN, 0)) {
		pr_perror("fd %d: cannot set O_ASYNC at its number", fd);
		return -errno;
	}
	return 0;
}

int files_dup_task_fd(pid_t pid, uint32_t id)
{
	struct task_fds fds = { .pid = pid };
	uint32_t files_id;
	int ret, fd;

	ret = task_files_id(pid, &files_id);
	if (!ret)
		ret = read_fdinfos(files_id, &fds.fdis, &fds.nr);
	if (ret)
		return ret;
	fd = task_fd_of_file(&fds, id);
	free_fdinfos(fds.fdis, fds.nr);
	if (fd < 0) {
		pr_err("task %d holds no fd of file %u\n", pid, id);
		return -ENOENT;
	}
	ret = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ret < 0) {
		ret = -errno;
		pr_perror("task %d: cannot duplicate fd %d of file %u", pid, fd, id);
	}
	return ret;
}

int prepare_fds(pid_t pid)
{
	struct task_fds fds = { .pid = pid };
	uint32_t files_id;
	int ret;

	pr_info("restoring the fds of task %d\n", pid);
	ret = task_files_id(pid, &files_id);
	if (!ret)
		ret = read_fdinfos(files_id, &fds.fdis, &fds.nr);
	if (ret)
		return ret;
	for (size_t i = 0; i < fds.nr && !ret; i++)
		ret = place_fd(fds.fdis, i);
	if (!ret)
		ret = finish_opened_files(&fds);
	if (!ret)
		ret = close_stray_fds(fds.fdis, fds.nr);
	for (size_t i = 0; i < fds.nr && !ret; i++)
		if (first_fd_of_file(&fds, fds.fdis[i]))
			ret = rearm_async(fds.fdis[i]->fd);
	if (!ret)
		ret = finish_files(&fds);
	free_fdinfos(fds.fdis, fds.nr);
	return ret;
}
