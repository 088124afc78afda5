/*
 * Pipes and FIFOs: a pipe end (pipe:[INO], a PIPE entry) or a FIFO opened by its path (a
 * FIFO entry naming a REG entry for the path and flags), with the pipe's size and the
 * bytes queued in it (pipes-data.img / fifo-data.img: a pipe_data_entry, then the bytes).
 * Dump copies the queue without consuming it (tee from a second opening of the pipe);
 * restore re-creates each pipe once and refills it, in the one task that uses it or, when
 * several do, in their common ancestor (files.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "servicefd.h"

#include "pipe.pb-c.h"

#define PIPE_LINK_PREFIX "pipe:["
/* What pipe2() gives (PIPE_DEF_BUFFERS pages): a pipe of that size and empty needs no entry. */
#define PIPE_DEF_BUFFERS 16

static bool pipe_owns(const struct fd_parms *p)
{
	return S_ISFIFO(p->st.st_mode) &&
	       !strncmp(p->link, PIPE_LINK_PREFIX, strlen(PIPE_LINK_PREFIX));
}

static bool fifo_owns(const struct fd_parms *p)
{
	return S_ISFIFO(p->st.st_mode) && p->link[0] == '/';
}

/* ---------------------------------------------------------------- dump ---- */

/* Pipes and FIFOs whose size and queue are already in an image: stored once per pipe. */
struct dumped_pipe {
	dev_t dev;
	ino_t ino;
};

static struct dumped_pipe *dumped_pipes;
static size_t nr_dumped_pipes;

static bool pipe_data_dumped(const struct stat *st)
{
	for (size_t i = 0; i < nr_dumped_pipes; i++)
		if (dumped_pipes[i].dev == st->st_dev && dumped_pipes[i].ino == st->st_ino)
			return true;
	return false;
}

static int remember_dumped_pipe(const struct stat *st, const char *what)
{
	struct dumped_pipe *grown = realloc(dumped_pipes, (nr_dumped_pipes + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	dumped_pipes = grown;
	dumped_pipes[nr_dumped_pipes++] = (struct dumped_pipe){ st->st_dev, st->st_ino };
	return 0;
}

/*
 * tee() duplicates buffer references without consuming them, one slot of the copy per
 * buffer of the source: a copy with the source's capacity has a slot for each. Then
 * reading the copy gives the queue while the task's pipe keeps it.
 */
static int peek_queue(int peek_fd, int pipe_size, uint8_t *buf, size_t queued, const char *what)
{
	size_t done = 0;
	int copy[2], ret = 0;
	ssize_t n;

	if (pipe2(copy, O_NONBLOCK | O_CLOEXEC)) {
		pr_perror("%s: cannot create a pipe to copy its queue into", what);
		return -errno;
	}
	if (fcntl(copy[1], F_SETPIPE_SZ, pipe_size) < 0) {
		ret = -errno;
		pr_perror("%s: cannot size the copy pipe to %d bytes", what, pipe_size);
		goto out;
	}
	n = tee(peek_fd, copy[1], queued, SPLICE_F_NONBLOCK);
	if (n < 0 || (size_t)n != queued) {
		ret = n < 0 ? -errno : -EIO;
		pr_err("%s: tee copied %zd of %zu queued bytes: %s\n", what, n, queued,
		       n < 0 ? strerror(errno) : "short copy");
		goto out;
	}
	while (done < queued) {
		n = read(copy[0], buf + done, queued - done);
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			pr_err("%s: reading the copied queue stopped at %zu of %zu bytes\n", what,
			       done, queued);
			goto out;
		}
		done += n;
	}
out:
	close(copy[0]);
	close(copy[1]);
	return ret;
}

/* The queue of a pipe, read by the dump and written after its pipe_data_entry. */
struct pipe_queue {
	int size; /* F_GETPIPE_SZ */
	int queued;
	uint8_t *bytes; /* malloc'ed */
};

/*
 * The size and queue of the pipe behind fd p->fd. It is opened anew through /proc: a
 * read-write opening works whichever end the task holds and never blocks.
 */
static int read_pipe_queue(const struct fd_parms *p, struct pipe_queue *q, const char *what)
{
	int peek_fd, ret = 0;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->fd);
	peek_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (peek_fd < 0) {
		pr_perror("%s: cannot open %s to read its queue", what, path);
		return -errno;
	}
	q->size = fcntl(peek_fd, F_GETPIPE_SZ);
	if (q->size < 0 || ioctl(peek_fd, FIONREAD, &q->queued)) {
		ret = -errno;
		pr_perror("%s: cannot read its size or queue length", what);
		goto out;
	}
	q->bytes = malloc(q->queued ? q->queued : 1);
	if (!q->bytes) {
		ret = -ENOMEM;
		pr_err("%s: out of memory for %d queued bytes\n", what, q->queued);
		goto out;
	}
	if (q->queued)
		ret = peek_queue(peek_fd, q->size, q->bytes, q->queued, what);
	if (ret)
		free(q->bytes);
	else
		pr_debug("%s: size %d, %d bytes queued\n", what, q->size, q->queued);
out:
	close(peek_fd);
	return ret;
}

/* CRIU writes no entry for an empty pipe; one of a non-default size needs it for the size. */
static int write_pipe_queue(enum cr_img_type type, uint32_t pipe_id, const struct pipe_queue *q)
{
	PipeDataEntry pde = PIPE_DATA_ENTRY__INIT;
	struct cr_img *img;
	int ret;

	if (!q->queued && q->size == PIPE_DEF_BUFFERS * getpagesize())
		return 0;
	img = files_side_image(type);
	if (!img)
		return -EIO;
	pde.pipe_id = pipe_id;
	pde.bytes = q->queued;
	pde.has_size = true;
	pde.size = q->size;
	ret = pb_write_one(img, &pde);
	return ret ? ret : img_write_raw(img, q->bytes, q->queued);
}

/* The first end dumped of each pipe (or opening of each FIFO) stores its queue. */
static int dump_queue_once(const struct fd_parms *p, enum cr_img_type type, const char *what)
{
	struct pipe_queue q;
	int ret;

	if (pipe_data_dumped(&p->st))
		return 0;
	ret = read_pipe_queue(p, &q, what);
	if (ret)
		return ret;
	ret = write_pipe_queue(type, p->st.st_ino, &q);
	free(q.bytes);
	return ret ? ret : remember_dumped_pipe(&p->st, what);
}

/*
 * Packet mode (O_DIRECT) keeps write boundaries that the copied queue no longer has: refuse
 * rather than restore less. The image names a pipe by 32 bits of its inode: a larger one
 * could be taken for another.
 */
static int check_pipe_dumpable(const struct fd_parms *p, const char *what)
{
	if (p->flags & O_DIRECT) {
		pr_err("%s is a packet-mode (O_DIRECT) pipe, which is not supported\n", what);
		return -ENOTSUP;
	}
	if (p->st.st_ino > UINT32_MAX) {
		pr_err("%s: inode %llu does not fit the image's 32-bit pipe id\n", what,
		       (unsigned long long)p->st.st_ino);
		return -EOVERFLOW;
	}
	return 0;
}

static int pipe_dump(const struct fd_parms *p, uint32_t id)
{
	PipeEntry pe = PIPE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	char what[PATH_MAX + 64];
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (%s)", p->fd, p->pid, p->link);
	ret = check_pipe_dumpable(p, what);
	if (!ret)
		ret = dump_queue_once(p, CR_IMG_PIPES_DATA, what);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	pe.id = id;
	pe.pipe_id = p->st.st_ino;
	pe.flags = p->flags;
	pe.fown = &fown;
	fe.type = FD_TYPES__PIPE;
	fe.id = id;
	fe.pipe = &pe;
	return write_file_entry(&fe);
}

/* The path and flags go to a REG entry of their own, as CRIU writes FIFOs. */
static int fifo_dump(const struct fd_parms *p, uint32_t id)
{
	FifoEntry ffe = FIFO_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	char what[PATH_MAX + 64];
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (FIFO %s)", p->fd, p->pid, p->link);
	ret = check_pipe_dumpable(p, what);
	if (!ret)
		ret = dump_queue_once(p, CR_IMG_FIFO_DATA, what);
	if (ret)
		return ret;
	ffe.id = id;
	ffe.pipe_id = p->st.st_ino;
	ffe.has_regf_id = true;
	ffe.regf_id = files_new_id();
	ret = dump_reg_file(p, ffe.regf_id);
	if (ret)
		return ret;
	fe.type = FD_TYPES__FIFO;
	fe.id = id;
	fe.fifo = &ffe;
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/* One pipe_data_entry with its bytes (from pipes-data.img or fifo-data.img). */
struct pipe_data {
	uint32_t pipe_id;
	bool has_size;
	uint32_t size;
	uint32_t nr_bytes;
	uint8_t *bytes;
};

struct pipe_data_table {
	enum cr_img_type type;
	struct pipe_data *data;
	size_t nr;
};

static struct pipe_data_table pipes_data = { .type = CR_IMG_PIPES_DATA };
static struct pipe_data_table fifos_data = { .type = CR_IMG_FIFO_DATA };

/*
 * One pipe or FIFO of the images. Collected in the main process before forking, so each
 * restored task has its own copy: "restored" means "re-created in this task".
 */
struct pipe_obj {
	bool fifo;
	uint32_t pipe_id; /* the inode at dump time */
	const struct pipe_data *data; /* NULL: empty, default size */
	bool restored;
	ino_t restored_ino; /* pipes: the new pipe, to find an end this task already holds */
	/* pipes: the end pipe2() made that the task did not take yet, parked; or -1 */
	int spare_fd;
	uint32_t spare_accmode;
	pid_t spare_pid; /* the task that parked it: its children do not take it */
};

static struct pipe_obj *pipe_objs;
static size_t nr_pipe_objs;

/* What a pipe or FIFO entry decodes to. */
struct pipe_end {
	size_t obj; /* index in pipe_objs, which grows while entries are collected */
	uint32_t flags;
	const struct reg_file *regf; /* FIFOs: the REG entry naming it (maybe deleted) */
};

static const struct pipe_data *find_pipe_data(const struct pipe_data_table *t, uint32_t pipe_id)
{
	for (size_t i = 0; i < t->nr; i++)
		if (t->data[i].pipe_id == pipe_id)
			return &t->data[i];
	return NULL;
}

static int check_pipe_data(struct cr_img *img, const struct pipe_data_table *t,
			   const PipeDataEntry *pde)
{
	off_t left = img_bytes_left(img);

	if (find_pipe_data(t, pde->pipe_id)) {
		pr_err("%s: pipe %u appears twice\n", img->name, pde->pipe_id);
		return -EINVAL;
	}
	if (left < 0 || (uint64_t)left < pde->bytes) {
		pr_err("%s: pipe %u claims %u queued bytes, %lld are left in the image\n", img->name,
		       pde->pipe_id, pde->bytes, (long long)left);
		return -EINVAL;
	}
	if (pde->has_size && pde->bytes > pde->size) {
		pr_err("%s: pipe %u: %u queued bytes do not fit its size %u\n", img->name,
		       pde->pipe_id, pde->bytes, pde->size);
		return -EINVAL;
	}
	return 0;
}

static int read_one_pipe_data(struct cr_img *img, struct pipe_data_table *t,
			      const PipeDataEntry *pde)
{
	struct pipe_data *grown, *pd;
	int ret = check_pipe_data(img, t, pde);

	if (ret)
		return ret;
	grown = realloc(t->data, (t->nr + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("%s: out of memory\n", img->name);
		return -ENOMEM;
	}
	t->data = grown;
	pd = &t->data[t->nr];
	*pd = (struct pipe_data){ .pipe_id = pde->pipe_id, .has_size = pde->has_size,
				  .size = pde->size, .nr_bytes = pde->bytes };
	pd->bytes = malloc(pde->bytes ? pde->bytes : 1);
	if (!pd->bytes) {
		pr_err("%s: out of memory for %u queued bytes\n", img->name, pde->bytes);
		return -ENOMEM;
	}
	ret = img_read_raw(img, pd->bytes, pde->bytes);
	if (ret) {
		free(pd->bytes);
		return ret;
	}
	t->nr++;
	return 0;
}

/* The image exists only when some pipe had queued bytes or a size of its own. */
static int collect_pipe_data(struct pipe_data_table *t)
{
	PipeDataEntry *pde;
	struct cr_img *img;
	int ret;

	if (!img_exists(t->type, 0))
		return 0;
	img = open_image(t->type, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&pde)) > 0) {
		ret = read_one_pipe_data(img, t, pde);
		pb_free(img, pde);
		if (ret)
			break;
	}
	close_image(img);
	return ret;
}

static int pipe_collect_images(void)
{
	return collect_pipe_data(&pipes_data);
}

static int fifo_collect_images(void)
{
	return collect_pipe_data(&fifos_data);
}

static void free_pipe_data(struct pipe_data_table *t)
{
	for (size_t i = 0; i < t->nr; i++)
		free(t->data[i].bytes);
	free(t->data);
	t->data = NULL;
	t->nr = 0;
}

/* pipe_objs holds the FIFOs too: freed here, once. */
static void pipe_collect_fini(void)
{
	free_pipe_data(&pipes_data);
	free(pipe_objs);
	pipe_objs = NULL;
	nr_pipe_objs = 0;
}

static void fifo_collect_fini(void)
{
	free_pipe_data(&fifos_data);
}

/* The index of the pipe or FIFO pipe_id in pipe_objs, added at its first entry. */
static ssize_t collect_pipe_obj(bool fifo, uint32_t pipe_id, uint32_t file_id)
{
	const struct pipe_data_table *t = fifo ? &fifos_data : &pipes_data;
	struct pipe_obj *grown;

	for (size_t i = 0; i < nr_pipe_objs; i++)
		if (pipe_objs[i].fifo == fifo && pipe_objs[i].pipe_id == pipe_id)
			return i;
	grown = realloc(pipe_objs, (nr_pipe_objs + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("files.img: out of memory collecting file %u\n", file_id);
		return -ENOMEM;
	}
	pipe_objs = grown;
	pipe_objs[nr_pipe_objs] = (struct pipe_obj){
		.fifo = fifo, .pipe_id = pipe_id, .data = find_pipe_data(t, pipe_id), .spare_fd = -1
	};
	return nr_pipe_objs++;
}

static int collect_end(struct file_desc *d, bool fifo, uint32_t pipe_id, uint32_t flags,
		       const struct reg_file *regf)
{
	ssize_t obj = collect_pipe_obj(fifo, pipe_id, d->id);
	struct pipe_end *end;

	if (obj < 0)
		return obj;
	end = malloc(sizeof(*end));
	if (!end) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	*end = (struct pipe_end){ .obj = obj, .flags = flags, .regf = regf };
	d->kind = end;
	return 0;
}

static int pipe_collect(struct file_desc *d)
{
	const PipeEntry *pe = d->fe->pipe;
	int ret;

	if (!pe) {
		pr_err("files.img: file %u has type PIPE but no pipe entry\n", d->id);
		return -EINVAL;
	}
	ret = collect_owner(d, pe->fown);
	return ret ? ret : collect_end(d, false, pe->pipe_id, pe->flags, NULL);
}

/* The FIFO's path, flags and owner are its REG entry's. */
static int fifo_collect(struct file_desc *d)
{
	const FifoEntry *ffe = d->fe->fifo;
	const struct reg_file *regf;
	char user[48];

	if (!ffe || !ffe->has_regf_id) {
		pr_err("files.img: file %u has type FIFO but no fifo entry with a regf_id\n", d->id);
		return -EINVAL;
	}
	snprintf(user, sizeof(user), "files.img: FIFO %u", d->id);
	regf = find_reg_file(ffe->regf_id, user);
	if (!regf)
		return -EINVAL;
	d->owner_signum = find_file_desc(ffe->regf_id)->owner_signum;
	d->owner = find_file_desc(ffe->regf_id)->owner;
	return collect_end(d, true, ffe->pipe_id, regf->flags, regf);
}

/*
 * The dumped size, then the dumped queue. The size first: it may be larger than the
 * default the queue would not fit in. fd is non-blocking, so a queue that does not fit
 * is an error, not a hang.
 */
static int refill_pipe(int fd, const struct pipe_obj *obj, const char *what)
{
	const struct pipe_data *data = obj->data;
	size_t done = 0;

	if (!data)
		return 0;
	if (data->has_size && fcntl(fd, F_GETPIPE_SZ) != (int)data->size &&
	    fcntl(fd, F_SETPIPE_SZ, data->size) < 0) {
		pr_perror("%s: cannot set its size to %u bytes (the limit is "
			  "/proc/sys/fs/pipe-max-size)",
			  what, data->size);
		return -errno;
	}
	while (done < data->nr_bytes) {
		ssize_t n = write(fd, data->bytes + done, data->nr_bytes - done);

		if (n <= 0) {
			pr_err("%s: cannot restore %u queued bytes (%zu written): %s\n", what,
			       data->nr_bytes, done, n < 0 ? strerror(errno) : "short write");
			return n < 0 ? -errno : -EIO;
		}
		done += n;
	}
	pr_debug("%s: %zu bytes queued again\n", what, done);
	return 0;
}

/*
 * A new description of the pipe behind pin_fd with the access mode of flags. Through a
 * read-write opening first: that never blocks, and while it exists a read-only or
 * write-only opening finds its partner and does not block (nor fail with ENXIO) either.
 */
static int open_end_via(int pin_fd, uint32_t flags, const char *what)
{
	int accmode = flags & O_ACCMODE, rdwr_fd, fd;
	char path[64];

	snprintf(path, sizeof(path), "self/fd/%d", pin_fd);
	rdwr_fd = proc_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (rdwr_fd < 0) {
		pr_perror("%s: cannot open %s read-write", what, path);
		return -errno;
	}
	if (accmode == O_RDWR)
		return rdwr_fd;
	snprintf(path, sizeof(path), "self/fd/%d", rdwr_fd);
	fd = proc_open(path, accmode | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("%s: cannot open %s with access mode %#o", what, path, accmode);
		fd = -errno;
	}
	close(rdwr_fd);
	return fd;
}

/* The status flags as dumped (O_NONBLOCK, ...); the access mode was set by open. */
static int set_status_flags(int fd, uint32_t flags, const char *what)
{
	if (fcntl(fd, F_SETFL, flags)) {
		pr_perror("%s: cannot set its flags %#o", what, flags);
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * The first end of a pipe this task needs: pipe2, refill, keep the wanted end and park the
 * other (files_park_fd()), out of the way of the fds still to be placed, for the task's
 * next end of the pipe (take_spare_end()). Any other end is opened anew from one the task
 * holds (reopen_pipe_end()); the queue lives as long as either end does.
 */
static void park_spare_end(struct pipe_obj *obj, int fd, uint32_t accmode)
{
	obj->spare_fd = files_park_fd(fd);
	obj->spare_accmode = accmode;
	obj->spare_pid = getpid();
}

static int create_pipe(struct pipe_obj *obj, uint32_t flags, const char *what)
{
	int ends[2], fd, ret;
	struct stat st;

	if (pipe2(ends, O_NONBLOCK | O_CLOEXEC)) {
		pr_perror("%s: cannot create the pipe", what);
		return -errno;
	}
	ret = refill_pipe(ends[1], obj, what);
	if (!ret && fstat(ends[0], &st)) {
		ret = -errno;
		pr_perror("%s: cannot stat the new pipe", what);
	}
	if (ret) {
		close(ends[0]);
		close(ends[1]);
		return ret;
	}
	switch (flags & O_ACCMODE) {
	case O_RDONLY:
		fd = ends[0];
		park_spare_end(obj, ends[1], O_WRONLY);
		break;
	case O_WRONLY:
		fd = ends[1];
		park_spare_end(obj, ends[0], O_RDONLY);
		break;
	default:
		fd = open_end_via(ends[0], flags, what);
		close(ends[0]);
		close(ends[1]);
		break;
	}
	if (fd >= 0) {
		obj->restored = true;
		obj->restored_ino = st.st_ino;
	}
	return fd;
}

/* An fd of this task on the re-created pipe: an end restored earlier. */
static int find_held_end(const struct pipe_obj *obj, const char *what)
{
	char want[64], link[64];
	struct dirent *de;
	int found = -ENOENT;
	DIR *dir;

	snprintf(want, sizeof(want), PIPE_LINK_PREFIX "%lu]", (unsigned long)obj->restored_ino);
	dir = proc_opendir("self/fd");
	if (!dir) {
		pr_perror("%s: cannot open /proc/self/fd", what);
		return -errno;
	}
	while (found < 0 && (de = readdir(dir))) {
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		len = readlinkat(dirfd(dir), de->d_name, link, sizeof(link) - 1);
		if (len < 0)
			continue; /* the directory's own fd, closed by now */
		link[len] = '\0';
		if (!strcmp(link, want))
			found = atoi(de->d_name);
	}
	closedir(dir);
	if (found < 0)
		pr_err("%s: the end restored before is no longer open in this task\n", what);
	return found;
}

/*
 * An end reopened through /proc/self/fd gets O_LARGEFILE (open(2) adds it on 64-bit),
 * which F_SETFL cannot take away: one pipe2() made has the flags a pipe() end has.
 */
static int take_spare_end(struct pipe_obj *obj, uint32_t flags)
{
	int fd = obj->spare_fd;

	if (fd < 0 || obj->spare_pid != getpid() || (flags & O_ACCMODE) != obj->spare_accmode)
		return -1;
	obj->spare_fd = -1;
	return fd;
}

static int reopen_pipe_end(struct pipe_obj *obj, uint32_t flags, const char *what)
{
	int held_fd = take_spare_end(obj, flags);

	if (held_fd >= 0)
		return held_fd;
	held_fd = find_held_end(obj, what);
	return held_fd < 0 ? held_fd : open_end_via(held_fd, flags, what);
}

static int pipe_open(const struct file_desc *d)
{
	const struct pipe_end *end = d->kind;
	struct pipe_obj *obj = &pipe_objs[end->obj];
	char what[64];
	int fd;

	snprintf(what, sizeof(what), "pipe:[%u] (file %u)", obj->pipe_id, d->id);
	fd = obj->restored ? reopen_pipe_end(obj, end->flags, what)
			   : create_pipe(obj, end->flags, what);
	return fd < 0 ? fd : set_status_flags(fd, end->flags, what);
}

/*
 * Opened read-write first: on a FIFO that never blocks (Linux), and it keeps the pipe,
 * and so its refilled queue, alive until the real end exists.
 */
static int fifo_open(const struct file_desc *d)
{
	const struct pipe_end *end = d->kind;
	struct pipe_obj *obj = &pipe_objs[end->obj];
	char what[PATH_MAX + 32];
	struct stat st;
	int pin_fd, fd, ret = 0;

	snprintf(what, sizeof(what), "FIFO %s (file %u)", end->regf->path, d->id);
	/* Through its REG entry: a FIFO unlinked at dump is made again there. */
	pin_fd = open_reg_file(end->regf, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (pin_fd < 0)
		return pin_fd;
	if (fstat(pin_fd, &st)) {
		ret = -errno;
		pr_perror("%s: cannot stat it", what);
	} else if (!S_ISFIFO(st.st_mode)) {
		ret = -EINVAL;
		pr_err("%s: it is no longer a FIFO\n", what);
	}
	/* Once per task: a second fd of the same FIFO must not queue the bytes twice. */
	if (!ret && !obj->restored)
		ret = refill_pipe(pin_fd, obj, what);
	if (ret) {
		close(pin_fd);
		return ret;
	}
	obj->restored = true;
	fd = (end->flags & O_ACCMODE) == O_RDWR ? pin_fd : open_end_via(pin_fd, end->flags, what);
	if (fd != pin_fd)
		close(pin_fd);
	return fd < 0 ? fd : set_status_flags(fd, end->flags, what);
}

/* --inherit-fd names a pipe as its link did at dump: pipe:[INODE]. */
static void pipe_inherit_key(const struct file_desc *d, char *buf, size_t len)
{
	const struct pipe_end *end = d->kind;

	snprintf(buf, len, PIPE_LINK_PREFIX "%u]", pipe_objs[end->obj].pipe_id);
}

/*
 * Both ends of a pipe, and every opening of a FIFO, reach one queue: restored once, by
 * the task that opens them all when several tasks use them.
 */
static uint64_t pipe_object_key(const struct file_desc *d)
{
	const struct pipe_end *end = d->kind;

	return end->obj + 1;
}

const struct fdtype_ops pipe_fdtype_ops = {
	.type = FD_TYPES__PIPE,
	.name = "pipe",
	.owns = pipe_owns,
	.dump = pipe_dump,
	.collect_images = pipe_collect_images,
	.collect = pipe_collect,
	.collect_fini = pipe_collect_fini,
	.open = pipe_open,
	.inheritable = true,
	.object_key = pipe_object_key,
	.inherit_key = pipe_inherit_key,
};

const struct fdtype_ops fifo_fdtype_ops = {
	.type = FD_TYPES__FIFO,
	.name = "FIFO",
	.owns = fifo_owns,
	.dump = fifo_dump,
	.collect_images = fifo_collect_images,
	.collect = fifo_collect,
	.collect_fini = fifo_collect_fini,
	.open = fifo_open,
	.inheritable = true,
	.object_key = pipe_object_key,
};
