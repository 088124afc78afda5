/*
 * Pipes and FIFOs: a pipe end (pipe:[INO]) or a FIFO opened by its path, with the pipe's
 * size and the bytes queued in it. Dump copies the queue without consuming it (tee from a
 * second opening of the pipe); restore re-creates each pipe once and refills it, in the
 * one task that uses it or, when several do, in their common ancestor (files.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "files.h"
#include "log.h"

#define PIPE_LINK_PREFIX "pipe:["

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

/* Pipes and FIFOs whose size and queue are already in an entry: stored once per pipe. */
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
	dumped_pipes[nr_dumped_pipes++] = (struct dumped_pipe){st->st_dev, st->st_ino};
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

/*
 * The size and queue of the pipe behind fd p->fd. It is opened anew through /proc: a
 * read-write opening works whichever end the task holds and never blocks. On success
 * pde->queued.data is malloc'ed.
 */
static int read_pipe_data(const struct fd_parms *p, PipeDataEntry *pde, const char *what)
{
	int peek_fd, pipe_size, queued, ret = 0;
	char path[64];
	uint8_t *buf;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->fd);
	peek_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (peek_fd < 0) {
		pr_perror("%s: cannot open %s to read its queue", what, path);
		return -errno;
	}
	pipe_size = fcntl(peek_fd, F_GETPIPE_SZ);
	if (pipe_size < 0 || ioctl(peek_fd, FIONREAD, &queued)) {
		ret = -errno;
		pr_perror("%s: cannot read its size or queue length", what);
		goto out;
	}
	buf = malloc(queued ? queued : 1);
	if (!buf) {
		ret = -ENOMEM;
		pr_err("%s: out of memory for %d queued bytes\n", what, queued);
		goto out;
	}
	if (queued)
		ret = peek_queue(peek_fd, pipe_size, buf, queued, what);
	if (ret) {
		free(buf);
		goto out;
	}
	pde->pipe_size = pipe_size;
	pde->queued.data = buf;
	pde->queued.len = queued;
	pr_debug("%s: size %d, %d bytes queued\n", what, pipe_size, queued);
out:
	close(peek_fd);
	return ret;
}

/* *data: pde filled for the first end dumped of this pipe, NULL for the others. */
static int dump_pipe_data_once(const struct fd_parms *p, PipeDataEntry *pde, PipeDataEntry **data,
			       const char *what)
{
	int ret;

	*data = NULL;
	if (pipe_data_dumped(&p->st))
		return 0;
	ret = read_pipe_data(p, pde, what);
	if (ret)
		return ret;
	ret = remember_dumped_pipe(&p->st, what);
	if (ret) {
		free(pde->queued.data);
		return ret;
	}
	*data = pde;
	return 0;
}

/*
 * Packet mode (O_DIRECT) keeps write boundaries that the copied queue no longer has, and
 * O_ASYNC needs its owner and signal, which nobody dumps: refuse rather than restore less.
 */
static int check_pipe_flags(uint32_t flags, const char *what)
{
	if (flags & O_DIRECT) {
		pr_err("%s is a packet-mode (O_DIRECT) pipe, which is not supported\n", what);
		return -ENOTSUP;
	}
	if (flags & O_ASYNC) {
		pr_err("%s has O_ASYNC set, which is not supported\n", what);
		return -ENOTSUP;
	}
	return 0;
}

static int pipe_dump(const struct fd_parms *p, uint32_t id)
{
	PipeDataEntry pde = PIPE_DATA_ENTRY__INIT;
	PipeFileEntry pfe = PIPE_FILE_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	char what[PATH_MAX + 64];
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (%s)", p->fd, p->pid, p->link);
	ret = check_pipe_flags(p->flags, what);
	if (!ret)
		ret = dump_pipe_data_once(p, &pde, &pfe.data, what);
	if (ret)
		return ret;
	pfe.pipe_id = p->st.st_ino;
	pfe.flags = p->flags;
	fe.type = FD_TYPES__PIPE;
	fe.id = id;
	fe.pipe = &pfe;
	ret = write_file_entry(&fe);
	if (pfe.data)
		free(pde.queued.data);
	return ret;
}

static int fifo_dump(const struct fd_parms *p, uint32_t id)
{
	PipeDataEntry pde = PIPE_DATA_ENTRY__INIT;
	FifoFileEntry ffe = FIFO_FILE_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	char what[PATH_MAX + 64];
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (FIFO %s)", p->fd, p->pid, p->link);
	if (p->st.st_nlink == 0) {
		pr_err("%s: the FIFO was unlinked while open, which is not supported\n", what);
		return -ENOTSUP;
	}
	ret = check_pipe_flags(p->flags, what);
	if (!ret)
		ret = dump_pipe_data_once(p, &pde, &ffe.data, what);
	if (ret)
		return ret;
	ffe.name = (char *)p->link;
	ffe.flags = p->flags;
	ffe.dev = p->st.st_dev;
	ffe.ino = p->st.st_ino;
	fe.type = FD_TYPES__FIFO;
	fe.id = id;
	fe.fifo = &ffe;
	ret = write_file_entry(&fe);
	if (ffe.data)
		free(pde.queued.data);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

/*
 * One pipe or FIFO of the images. Collected in the main process before forking, so each
 * restored task has its own copy: "restored" means "re-created in this task".
 */
struct pipe_obj {
	bool fifo;
	uint64_t dev, ino; /* as dumped; dev is 0 for pipes */
	const PipeDataEntry *data;
	bool restored;
	ino_t restored_ino; /* pipes: the new pipe, to find an end this task already holds */
};

static struct pipe_obj *pipe_objs;
static size_t nr_pipe_objs;

static struct pipe_obj *find_pipe_obj(bool fifo, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < nr_pipe_objs; i++)
		if (pipe_objs[i].fifo == fifo && pipe_objs[i].dev == dev && pipe_objs[i].ino == ino)
			return &pipe_objs[i];
	return NULL;
}

static int collect_pipe_obj(bool fifo, uint64_t dev, uint64_t ino, const PipeDataEntry *data,
			    uint32_t file_id)
{
	struct pipe_obj *obj = find_pipe_obj(fifo, dev, ino);

	if (data && data->queued.len > data->pipe_size) {
		pr_err("files.img: file %u: %zu queued bytes do not fit its pipe size %u\n",
		       file_id, data->queued.len, data->pipe_size);
		return -EINVAL;
	}
	if (!obj) {
		struct pipe_obj *grown = realloc(pipe_objs, (nr_pipe_objs + 1) * sizeof(*grown));

		if (!grown) {
			pr_err("files.img: out of memory collecting file %u\n", file_id);
			return -ENOMEM;
		}
		pipe_objs = grown;
		obj = &pipe_objs[nr_pipe_objs++];
		*obj = (struct pipe_obj){.fifo = fifo, .dev = dev, .ino = ino};
	}
	if (data && obj->data) {
		pr_err("files.img: file %u: its pipe's queue is stored twice\n", file_id);
		return -EINVAL;
	}
	if (data)
		obj->data = data;
	return 0;
}

static int pipe_collect(const FileEntry *fe)
{
	if (!fe->pipe) {
		pr_err("files.img: pipe file %u has no pipe entry\n", fe->id);
		return -EINVAL;
	}
	return collect_pipe_obj(false, 0, fe->pipe->pipe_id, fe->pipe->data, fe->id);
}

static int fifo_collect(const FileEntry *fe)
{
	if (!fe->fifo || !fe->fifo->name) {
		pr_err("files.img: FIFO file %u has no fifo entry\n", fe->id);
		return -EINVAL;
	}
	return collect_pipe_obj(true, fe->fifo->dev, fe->fifo->ino, fe->fifo->data, fe->id);
}

/*
 * The dumped size, then the dumped queue. The size first: it may be larger than the
 * default the queue would not fit in. fd is non-blocking, so a queue that does not fit
 * is an error, not a hang.
 */
static int refill_pipe(int fd, const struct pipe_obj *obj, const char *what)
{
	const PipeDataEntry *data = obj->data;
	size_t done = 0;

	if (!data) {
		pr_err("%s: no entry carries its size and queue (corrupt files.img)\n", what);
		return -EINVAL;
	}
	if (fcntl(fd, F_SETPIPE_SZ, data->pipe_size) < 0) {
		pr_perror("%s: cannot set its size to %u bytes (the limit is "
			  "/proc/sys/fs/pipe-max-size)",
			  what, data->pipe_size);
		return -errno;
	}
	while (done < data->queued.len) {
		ssize_t n = write(fd, data->queued.data + done, data->queued.len - done);

		if (n <= 0) {
			pr_err("%s: cannot restore %zu queued bytes (%zu written): %s\n", what,
			       data->queued.len, done, n < 0 ? strerror(errno) : "short write");
			return n < 0 ? -errno : -EIO;
		}
		done += n;
	}
	pr_debug("%s: size %u, %zu bytes queued again\n", what, data->pipe_size, done);
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

	snprintf(path, sizeof(path), "/proc/self/fd/%d", pin_fd);
	rdwr_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (rdwr_fd < 0) {
		pr_perror("%s: cannot open %s read-write", what, path);
		return -errno;
	}
	if (accmode == O_RDWR)
		return rdwr_fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", rdwr_fd);
	fd = open(path, accmode | O_NONBLOCK | O_CLOEXEC);
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
 * The first end of a pipe this task needs: pipe2, refill, keep the wanted end and close
 * the other. Closing it loses nothing: the queue lives as long as either end does, and a
 * later end is opened anew from the kept one (reopen_pipe_end()), so no fd of criu's sits
 * where a restored fd may still have to go.
 */
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
		close(ends[1]);
		break;
	case O_WRONLY:
		fd = ends[1];
		close(ends[0]);
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
	dir = opendir("/proc/self/fd");
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

static int reopen_pipe_end(const struct pipe_obj *obj, uint32_t flags, const char *what)
{
	int held_fd = find_held_end(obj, what);

	return held_fd < 0 ? held_fd : open_end_via(held_fd, flags, what);
}

static int pipe_open(const FileEntry *fe)
{
	const PipeFileEntry *pfe = fe->pipe;
	struct pipe_obj *obj = find_pipe_obj(false, 0, pfe->pipe_id);
	char what[64];
	int fd;

	snprintf(what, sizeof(what), "pipe:[%llu] (file %u)", (unsigned long long)pfe->pipe_id,
		 fe->id);
	fd = obj->restored ? reopen_pipe_end(obj, pfe->flags, what)
			   : create_pipe(obj, pfe->flags, what);
	return fd < 0 ? fd : set_status_flags(fd, pfe->flags, what);
}

/*
 * Opened read-write first: on a FIFO that never blocks (Linux), and it keeps the pipe,
 * and so its refilled queue, alive until the real end exists.
 */
static int fifo_open(const FileEntry *fe)
{
	const FifoFileEntry *ffe = fe->fifo;
	struct pipe_obj *obj = find_pipe_obj(true, ffe->dev, ffe->ino);
	char what[PATH_MAX + 32];
	struct stat st;
	int pin_fd, fd, ret = 0;

	snprintf(what, sizeof(what), "FIFO %s (file %u)", ffe->name, fe->id);
	pin_fd = open(ffe->name, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (pin_fd < 0) {
		pr_perror("%s: cannot open it", what);
		return -errno;
	}
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
	fd = (ffe->flags & O_ACCMODE) == O_RDWR ? pin_fd : open_end_via(pin_fd, ffe->flags, what);
	if (fd != pin_fd)
		close(pin_fd);
	return fd < 0 ? fd : set_status_flags(fd, ffe->flags, what);
}

/*
 * Both ends of a pipe, and every opening of a FIFO, reach one queue: restored once, by
 * the task that opens them all when several tasks use them. pipe_objs is complete once
 * files.img is collected, so its index names the object.
 */
static uint64_t pipe_object_key(const FileEntry *fe)
{
	const struct pipe_obj *obj = fe->pipe ? find_pipe_obj(false, 0, fe->pipe->pipe_id)
					      : find_pipe_obj(true, fe->fifo->dev, fe->fifo->ino);

	return obj - pipe_objs + 1;
}

const struct fdtype_ops pipe_fdtype_ops = {
	.type = FD_TYPES__PIPE,
	.name = "pipe",
	.owns = pipe_owns,
	.dump = pipe_dump,
	.collect = pipe_collect,
	.open = pipe_open,
	.inheritable = true,
	.object_key = pipe_object_key,
};

const struct fdtype_ops fifo_fdtype_ops = {
	.type = FD_TYPES__FIFO,
	.name = "FIFO",
	.owns = fifo_owns,
	.dump = fifo_dump,
	.collect = fifo_collect,
	.open = fifo_open,
	.inheritable = true,
	.object_key = pipe_object_key,
};
