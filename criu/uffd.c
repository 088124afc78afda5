/*
 * `criu lazy-pages`, the daemon that serves the restored tasks' page faults from the images
 * (or the dump's source, --page-server) and streams the remaining pages in while they run.
 * What the restore side does is in uffd-task.c; the daemon's guardian in uffd-guard.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cr_options.h"
#include "daemon.h"
#include "image.h"
#include "lazy-copy.h"
#include "log.h"
#include "mem.h"
#include "page-server.h"
#include "pstree.h"
#include "uffd.h"
#include "uffd-daemon.h"
#include "vma.h"

#define PAGE_SIZE 4096ul
/* A fault brings this much of its run along: a task that walks its memory faults less. */
#define FAULT_CHUNK (64ul << 10)
/*
 * One background copy: small enough that a fault or an event (a munmap, a fork waits
 * for the daemon to read it) is served within a millisecond or so.
 */
#define BACKGROUND_CHUNK (2ul << 20)

/* ---- the daemon: tasks and what is left of their pages ---- */

static void src_put(struct lazy_src *src)
{
	if (src && !--src->refs) {
		munmap((void *)src->addr, src->len);
		free(src);
	}
}

static int src_open(struct lazy_daemon *d, pid_t pid, uint32_t pages_id, struct lazy_src **out)
{
	struct cr_img *img = open_image(CR_IMG_PAGES, O_RDONLY, pages_id);
	struct lazy_src *src;
	struct stat st;
	void *addr;

	if (!img)
		return -EIO;
	if (fstat(img->fd, &st)) {
		pr_perror("%s: cannot stat", img->name);
		close_image(img);
		return -EIO;
	}
	addr = st.st_size ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, img->fd, 0) : NULL;
	if (addr == MAP_FAILED) {
		pr_perror("%s: cannot map %lld bytes", img->name, (long long)st.st_size);
		close_image(img);
		return -EIO;
	}
	close_image(img);
	src = malloc(sizeof(*src));
	if (!src) {
		munmap(addr, st.st_size);
		return -ENOMEM;
	}
	*src = (struct lazy_src){ 1, addr, st.st_size, pid, d->remote.sk >= 0 ? &d->remote : NULL };
	*out = src;
	return 0;
}

static const void *image_data(const struct lazy_src *src, const struct page_run *r,
			      uint64_t addr)
{
	return src->addr + r->file_off + (addr - r->vaddr);
}

static int image_fetch(struct lazy_daemon *d, struct lazy_task *t, const struct page_run *r,
		       uint64_t addr, uint64_t *len, const void **data)
{
	(void)d, (void)len;
	*data = image_data(t->src, r, addr);
	return 0;
}

static int image_queue(struct lazy_daemon *d, struct lazy_copy_job *job,
		       const struct page_run *r)
{
	struct lazy_task *t = job->owner;

	job->data = image_data(t->src, r, job->addr);
	t->copying++;
	lazy_copy_submit(&d->copiers, job);
	return 0;
}

static int remote_ask(struct lazy_remote *rm, pid_t pid, uint64_t at, uint64_t nr)
{
	struct ps_iov pi = { PS_IOV_GET, nr, at, pid };
	int ret = ps_send(rm->sk, &pi, sizeof(pi));

	if (ret)
		pr_err("the dump's source %s: cannot ask for the pages at %#llx of task %d: %s\n",
		       page_server_name(), (unsigned long long)at, pid,
		       ret == -EPIPE ? "it closed the connection" : strerror(-ret));
	return ret;
}

/*
 * The answer to a request for nr pages at at of task pid, into buf; CRIU's: PS_IOV_ADD_F
 * with PE_PRESENT naming the same task and address, nr_pages at most those asked for,
 * then the pages. *got: how many came.
 */
static int remote_answer(struct lazy_remote *rm, pid_t pid, uint64_t at, uint64_t nr,
			 uint8_t *buf, uint64_t *got)
{
	struct ps_iov ans;
	int ret = ps_recv(rm->sk, &ans, sizeof(ans));

	if (!ret && ((ans.cmd & PS_CMD_MASK) != PS_IOV_ADD_F ||
		     !((ans.cmd >> PS_CMD_BITS) & PE_PRESENT) || ans.vaddr != at ||
		     ans.dst_id != (uint64_t)pid || !ans.nr_pages || ans.nr_pages > nr)) {
		pr_err("the dump's source %s answered %#x (%llu pages at %#llx of %lld) to a "
		       "request for %llu pages at %#llx of task %d\n",
		       page_server_name(), ans.cmd, (unsigned long long)ans.nr_pages,
		       (unsigned long long)ans.vaddr, (long long)ans.dst_id,
		       (unsigned long long)nr, (unsigned long long)at, pid);
		return -EPROTO;
	}
	if (!ret)
		ret = ps_recv(rm->sk, buf, ans.nr_pages * PAGE_SIZE);
	if (ret) {
		pr_err("the dump's source %s: cannot get the pages at %#llx of task %d: %s\n",
		       page_server_name(), (unsigned long long)at, pid,
		       ret == -EPIPE ? "it closed the connection" : strerror(-ret));
		return ret;
	}
	rm->requests++;
	rm->bytes += ans.nr_pages * PAGE_SIZE;
	*got = ans.nr_pages;
	return 0;
}

static int no_remote(const struct lazy_src *src, const struct page_run *r, uint64_t addr)
{
	pr_err("task %d: its pages at %#llx are left on the dump's source: start criu "
	       "lazy-pages with --page-server --address --port\n",
	       src->pid, (unsigned long long)(r->file_off + (addr - r->vaddr)));
	return -ENOTSUP;
}

/*
 * The oldest chunk asked for: its pages into its job, which goes to the copiers unless
 * its task went away or changed its address space meanwhile.
 */
static int remote_recv_asked(struct lazy_daemon *d)
{
	struct lazy_remote *rm = &d->remote;
	struct lazy_copy_job *job = rm->asked;
	struct lazy_task *t = job->owner;
	uint64_t got;
	int ret;

	rm->asked = job->next;
	if (!rm->asked)
		rm->asked_tail = &rm->asked;
	ret = remote_answer(rm, job->src_pid, job->src_at, job->len / PAGE_SIZE, job->buf, &got);
	if (t)
		t->asked--;
	if (ret || !t || t->gen != job->gen) {
		lazy_copy_job_put(&d->copiers, job);
		return ret;
	}
	job->len = got * PAGE_SIZE;
	job->data = job->buf;
	t->copying++;
	lazy_copy_submit(&d->copiers, job);
	return 0;
}

/* A fault's pages: asked for now, their answer read after those of the chunks before. */
static int remote_fetch(struct lazy_daemon *d, struct lazy_task *t, const struct page_run *r,
			uint64_t addr, uint64_t *len, const void **data)
{
	struct lazy_remote *rm = t->src->remote;
	uint64_t at = r->file_off + (addr - r->vaddr), nr = *len / PAGE_SIZE, got;
	int ret;

	if (!rm)
		return no_remote(t->src, r, addr);
	ret = remote_ask(rm, t->src->pid, at, nr);
	while (!ret && rm->asked)
		ret = remote_recv_asked(d);
	if (!ret)
		ret = remote_answer(rm, t->src->pid, at, nr, rm->buf, &got);
	if (ret)
		return ret;
	*len = got * PAGE_SIZE;
	*data = rm->buf;
	return 0;
}

static int remote_queue(struct lazy_daemon *d, struct lazy_copy_job *job,
			const struct page_run *r)
{
	struct lazy_task *t = job->owner;
	struct lazy_remote *rm = t->src->remote;
	int ret;

	if (!rm) {
		lazy_copy_job_put(&d->copiers, job);
		return no_remote(t->src, r, job->addr);
	}
	job->src_pid = t->src->pid;
	job->src_at = r->file_off + (job->addr - r->vaddr);
	ret = remote_ask(rm, job->src_pid, job->src_at, job->len / PAGE_SIZE);
	if (ret) {
		lazy_copy_job_put(&d->copiers, job);
		return ret;
	}
	job->next = NULL;
	*rm->asked_tail = job;
	rm->asked_tail = &job->next;
	t->asked++;
	return 0;
}

static const struct lazy_src_ops image_src_ops = { .fetch = image_fetch, .queue = image_queue };
static const struct lazy_src_ops remote_src_ops = { .fetch = remote_fetch,
						    .queue = remote_queue };

static const struct lazy_src_ops *run_src_ops(const struct page_run *r)
{
	return r->remote ? &remote_src_ops : &image_src_ops;
}

static struct lazy_task *task_new(struct lazy_daemon *d)
{
	struct lazy_task *t = calloc(1, sizeof(*t));

	if (!t) {
		pr_err("out of memory for a lazy task\n");
		return NULL;
	}
	t->sock = t->uffd = -1;
	t->sock_watch = (struct lazy_watch){ WATCH_SOCK, t };
	t->uffd_watch = (struct lazy_watch){ WATCH_UFFD, t };
	t->next = d->tasks;
	d->tasks = t;
	return t;
}

static void wait_copies(struct lazy_daemon *d, struct lazy_task *t);

static void task_free(struct lazy_daemon *d, struct lazy_task *t)
{
	struct lazy_task **p;

	wait_copies(d, t);
	/* Its chunks still to come from the source are dropped when they come. */
	for (struct lazy_copy_job *job = d->remote.asked; job; job = job->next)
		if (job->owner == t)
			job->owner = NULL;
	for (p = &d->tasks; *p != t; p = &(*p)->next)
		;
	*p = t->next;
	if (t->id && d->guardian_sock >= 0)
		lazy_guard_done(d, t);
	/*
	 * Out of epoll first: the guardian's copy (or one in flight to it) keeps the file
	 * open, and epoll forgets a file only once it is released. Our last uffd reference
	 * gone, the kernel unregisters whatever is left.
	 */
	if (t->sock >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, t->sock, NULL);
		close(t->sock);
	}
	if (t->uffd >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, t->uffd, NULL);
		close(t->uffd);
	}
	src_put(t->src);
	free(t->runs);
	free(t->retry);
	free(t);
}

static const char *task_name(const struct lazy_task *t, char *buf, size_t len)
{
	if (t->pid)
		snprintf(buf, len, "task %d", t->pid);
	else
		snprintf(buf, len, "forked child (uffd %d)", t->uffd);
	return buf;
}

static int watch(struct lazy_daemon *d, int fd, struct lazy_watch *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev)) {
		pr_perror("lazy pages: cannot watch fd %d", fd);
		return -errno;
	}
	return 0;
}

/* ---- runs: find, remove, move ---- */

/* The first run ending after addr. */
static unsigned int run_after(const struct lazy_task *t, uint64_t addr)
{
	return page_run_after(t->runs, t->nr_runs, addr);
}

static int runs_reserve(struct lazy_task *t, unsigned int more)
{
	struct page_run *runs;
	unsigned int cap;

	if (t->nr_runs + more <= t->cap_runs)
		return 0;
	cap = (t->nr_runs + more) * 2;
	runs = realloc(t->runs, cap * sizeof(*runs));
	if (!runs) {
		pr_err("out of memory for %u lazy page runs\n", cap);
		return -ENOMEM;
	}
	t->runs = runs;
	t->cap_runs = cap;
	return 0;
}

/* Forgets [start, end): copied, or the task unmapped or discarded it. */
static int remove_range(struct lazy_task *t, uint64_t start, uint64_t end)
{
	unsigned int i = run_after(t, start), j;
	struct page_run *r;
	uint64_t cut;

	if (i < t->nr_runs && t->runs[i].vaddr < start && t->runs[i].vaddr + t->runs[i].len > end) {
		/* Inside one run: it becomes two. */
		if (runs_reserve(t, 1))
			return -ENOMEM;
		r = &t->runs[i];
		memmove(r + 1, r, (t->nr_runs - i) * sizeof(*r));
		t->nr_runs++;
		cut = end - r->vaddr;
		r[1].vaddr += cut, r[1].file_off += cut, r[1].len -= cut;
		r->len = start - r->vaddr;
		return 0;
	}
	if (i < t->nr_runs && t->runs[i].vaddr < start) {
		t->runs[i].len = start - t->runs[i].vaddr;
		i++;
	}
	for (j = i; j < t->nr_runs && t->runs[j].vaddr + t->runs[j].len <= end; j++)
		;
	if (j < t->nr_runs && t->runs[j].vaddr < end) {
		r = &t->runs[j];
		cut = end - r->vaddr;
		r->vaddr += cut, r->file_off += cut, r->len -= cut;
	}
	memmove(&t->runs[i], &t->runs[j], (t->nr_runs - j) * sizeof(*t->runs));
	t->nr_runs -= j - i;
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct page_run *ra = a, *rb = b;

	return ra->vaddr < rb->vaddr ? -1 : ra->vaddr > rb->vaddr;
}

/* mremap moved [from, from + len) to `to`: what was left to copy there moves along. */
static int move_range(struct lazy_task *t, uint64_t from, uint64_t to, uint64_t len)
{
	unsigned int i, first = run_after(t, from), nr_moved = 0;
	struct page_run *moved;
	int ret;

	for (i = first; i < t->nr_runs && t->runs[i].vaddr < from + len; i++)
		nr_moved++;
	moved = malloc((nr_moved + 1) * sizeof(*moved));
	if (!moved)
		return -ENOMEM;
	for (i = 0; i < nr_moved; i++) {
		struct page_run r = t->runs[first + i];
		uint64_t lo = r.vaddr > from ? r.vaddr : from;
		uint64_t hi = r.vaddr + r.len < from + len ? r.vaddr + r.len : from + len;

		/* file_off keeps where the data are: the image's offset or the source's address. */
		moved[i] = (struct page_run){ lo - from + to, hi - lo, r.file_off + (lo - r.vaddr),
					      r.level, r.remote };
	}
	ret = remove_range(t, from, from + len);
	/* Whatever was at the destination is gone (mremap unmapped it). */
	if (!ret)
		ret = remove_range(t, to, to + len);
	if (!ret)
		ret = runs_reserve(t, nr_moved);
	if (!ret) {
		memcpy(&t->runs[t->nr_runs], moved, nr_moved * sizeof(*moved));
		t->nr_runs += nr_moved;
		qsort(t->runs, t->nr_runs, sizeof(*t->runs), cmp_run);
	}
	free(moved);
	return ret;
}

/* ---- copying pages in ---- */

/* Up to len bytes of run r from addr on, now, from where the run's pages are. */
static int copy_run(struct lazy_daemon *d, struct lazy_task *t, const struct page_run *r,
		    uint64_t addr, uint64_t len, uint64_t *done)
{
	const void *data;
	int ret = run_src_ops(r)->fetch(d, t, r, addr, &len, &data);

	*done = 0;
	if (!ret)
		ret = uffd_copy(t->uffd, addr, len, data, done);
	t->copied += *done;
	return ret;
}

/* A fault outside the stored pages: the page was never written (a hole) or discarded. */
static int zero_page(struct lazy_task *t, uint64_t addr)
{
	struct uffdio_zeropage zp = { .range = { addr, PAGE_SIZE } };

	if (!ioctl(t->uffd, UFFDIO_ZEROPAGE, &zp))
		return 0;
	if (errno == EEXIST) {
		uffd_wake(t->uffd, addr);
		return 0;
	}
	return errno == ENOENT ? 0 : -errno;
}

static int serve_fault(struct lazy_daemon *d, struct lazy_task *t, uint64_t addr)
{
	unsigned int i = run_after(t, addr);
	uint64_t off, len, done = 0;
	struct page_run *r;
	int ret;

	if (i >= t->nr_runs || t->runs[i].vaddr > addr)
		return zero_page(t, addr);
	r = &t->runs[i];
	off = addr - r->vaddr;
	len = r->len - off < FAULT_CHUNK ? r->len - off : FAULT_CHUNK;
	ret = copy_run(d, t, r, addr, len, &done);
	if (done && remove_range(t, addr, addr + done))
		return -ENOMEM;
	/* Moved or unmapped under the fault: the runs follow when its event is read. */
	return done || ret == -ENOENT ? 0 : ret;
}

static int add_retry(struct lazy_task *t, uint64_t addr)
{
	uint64_t *retry;

	if (t->nr_retry == t->cap_retry) {
		retry = realloc(t->retry, (t->cap_retry * 2 + 8) * sizeof(*retry));
		if (!retry) {
			pr_err("out of memory for faults to retry\n");
			return -ENOMEM;
		}
		t->retry = retry;
		t->cap_retry = t->cap_retry * 2 + 8;
	}
	t->retry[t->nr_retry++] = addr;
	return 0;
}

/* A fault that found the address space changing is served again after the events. */
static int fault(struct lazy_daemon *d, struct lazy_task *t, uint64_t addr)
{
	int ret = serve_fault(d, t, addr);

	t->faults++;
	return ret == -EAGAIN ? add_retry(t, addr) : ret;
}

static int retry_faults(struct lazy_daemon *d, struct lazy_task *t)
{
	unsigned int i, n = t->nr_retry;
	int ret = 0;

	t->nr_retry = 0;
	for (i = 0; i < n && !ret; i++) {
		ret = serve_fault(d, t, t->retry[i]);
		if (ret == -EAGAIN)
			ret = add_retry(t, t->retry[i]);
	}
	return ret;
}

/* ---- the background copy ---- */

/*
 * The run holding the task's next background chunk, or -1. Past the last run with runs
 * left and nothing of its own in flight (chunks cut short put bg_from back; this is the
 * net under that), it starts from the lowest run again.
 */
static int next_chunk_run(struct lazy_task *t)
{
	unsigned int i = run_after(t, t->bg_from);

	if (i < t->nr_runs)
		return i;
	if (!t->nr_runs || t->asked || t->copying)
		return -1;
	t->bg_from = 0;
	return 0;
}

static bool has_chunk(struct lazy_task *t)
{
	return t->uffd >= 0 && !t->gone && !t->job_err && !t->blocked && next_chunk_run(t) >= 0;
}

/* One chunk of the task to the copiers (through its source); 0, or -errno (logged). */
static int queue_chunk(struct lazy_daemon *d, struct lazy_task *t, struct lazy_copy_job *job)
{
	const struct page_run *r = &t->runs[next_chunk_run(t)];
	uint64_t addr = r->vaddr > t->bg_from ? r->vaddr : t->bg_from;
	uint64_t left = r->vaddr + r->len - addr;

	job->owner = t;
	job->uffd = t->uffd;
	job->addr = addr;
	job->len = left < BACKGROUND_CHUNK ? left : BACKGROUND_CHUNK;
	job->gen = t->gen;
	t->bg_from = addr + job->len;
	return run_src_ops(r)->queue(d, job, r);
}

/*
 * A copier's job back: what it copied is forgotten, the rest taken again later. A chunk
 * that met no mapping (ENOENT) keeps its runs: the task moved or unmapped it and the event
 * saying where to is not read yet; the task's chunks wait for it (blocked).
 */
static void job_finish(struct lazy_daemon *d, struct lazy_copy_job *job)
{
	struct lazy_task *t = job->owner;

	t->copying--;
	t->copied += job->done;
	if (job->done && remove_range(t, job->addr, job->addr + job->done))
		t->job_err = -ENOMEM;
	if (job->done < job->len && job->addr + job->done < t->bg_from)
		t->bg_from = job->addr + job->done;
	if (job->err == -ESRCH)
		t->gone = true;
	else if (job->err == -ENOENT)
		t->blocked = true;
	else if (job->err && job->err != -EAGAIN)
		t->job_err = job->err;
	lazy_copy_job_put(&d->copiers, job);
}

/*
 * Until none of the task's chunks is being copied: its uffd may be read then. Those no
 * copier took yet are taken back (picked again later), so a fault waits for one chunk's
 * copy at most.
 */
static void wait_copies(struct lazy_daemon *d, struct lazy_task *t)
{
	struct lazy_copy_job *job;

	if (t->copying)
		lazy_copy_cancel(&d->copiers, t);
	while (t->copying && (job = lazy_copy_finished(&d->copiers, true)))
		job_finish(d, job);
}

/* ---- events ---- */

static int on_fork(struct lazy_daemon *d, struct lazy_task *parent, int ufd)
{
	struct lazy_task *child = task_new(d);

	if (!child) {
		close(ufd);
		return -ENOMEM;
	}
	child->uffd = ufd;
	child->has_msg = true;
	child->src = parent->src;
	child->src->refs++;
	/* Its memory is the parent's: the same pages are still missing in it. */
	if (runs_reserve(child, parent->nr_runs))
		return -ENOMEM;
	memcpy(child->runs, parent->runs, parent->nr_runs * sizeof(*child->runs));
	child->nr_runs = parent->nr_runs;
	pr_debug("task %d forked a child (uffd %d), %u runs left in it\n", parent->pid, ufd,
		 child->nr_runs);
	return lazy_guard_task(d, child) ?: watch(d, ufd, &child->uffd_watch);
}

/* Chunks picked or asked for before are of another layout: dropped, taken again. */
static void moved_or_cut(struct lazy_task *t)
{
	t->gen++;
	t->bg_from = 0;
	t->blocked = false;
}

static int on_uffd_msg(struct lazy_daemon *d, struct lazy_task *t, const struct uffd_msg *msg)
{
	char name[48];

	switch (msg->event) {
	case UFFD_EVENT_PAGEFAULT:
		return fault(d, t, msg->arg.pagefault.address & ~(PAGE_SIZE - 1));
	case UFFD_EVENT_FORK:
		return on_fork(d, t, msg->arg.fork.ufd);
	case UFFD_EVENT_REMAP:
		moved_or_cut(t);
		pr_debug("%s: mremap %#llx -> %#llx (%llu bytes)\n", task_name(t, name, sizeof(name)),
			 (unsigned long long)msg->arg.remap.from, (unsigned long long)msg->arg.remap.to,
			 (unsigned long long)msg->arg.remap.len);
		return move_range(t, msg->arg.remap.from, msg->arg.remap.to, msg->arg.remap.len);
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		moved_or_cut(t);
		pr_debug("%s: %s %#llx-%#llx\n", task_name(t, name, sizeof(name)),
			 msg->event == UFFD_EVENT_UNMAP ? "munmap" : "madvise",
			 (unsigned long long)msg->arg.remove.start,
			 (unsigned long long)msg->arg.remove.end);
		return remove_range(t, msg->arg.remove.start, msg->arg.remove.end);
	}
	pr_err("%s: unexpected userfaultfd event %u\n", task_name(t, name, sizeof(name)), msg->event);
	return -EINVAL;
}

/*
 * One message at a time, and none while a chunk of the task is being copied: an event is
 * applied to the runs before anything is copied again (a copy into an address the event
 * moved away would land in whatever the task put there next).
 */
static int on_uffd(struct lazy_daemon *d, struct lazy_task *t)
{
	struct uffd_msg msg;
	int ret = 0;

	while (!ret) {
		/* A fault's remote fetch may have handed the copiers chunks of this task. */
		wait_copies(d, t);
		if (read(t->uffd, &msg, sizeof(msg)) != sizeof(msg))
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		ret = on_uffd_msg(d, t, &msg);
	}
	return ret;
}

/* ---- connections ---- */

static int recv_all(int sock, void *buf, size_t len)
{
	ssize_t n;

	do
		n = recv(sock, buf, len, MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EPIPE;
}

/* The runs must lie in the pages image the task named. */
static int check_runs(const struct lazy_task *t)
{
	for (unsigned int i = 0; i < t->nr_runs; i++) {
		const struct page_run *r = &t->runs[i];

		if ((!r->remote && (r->file_off + r->len > t->src->len ||
				    r->file_off + r->len < r->file_off)) ||
		    r->vaddr % PAGE_SIZE || r->len % PAGE_SIZE || r->file_off % PAGE_SIZE) {
			pr_err("task %d: lazy run %#llx (%llu bytes at %llu) is not in its pages image (%llu bytes)\n",
			       t->pid, (unsigned long long)r->vaddr, (unsigned long long)r->len,
			       (unsigned long long)r->file_off, (unsigned long long)t->src->len);
			return -EINVAL;
		}
	}
	return 0;
}

static int on_task_msg(struct lazy_daemon *d, struct lazy_task *t, const struct lazy_msg *msg)
{
	uint64_t local = 0, remote = 0;
	int ret;

	t->pid = msg->pid;
	if (msg->nr_runs > (1u << 28)) {
		pr_err("task %d: %llu lazy runs is not believable\n", t->pid,
		       (unsigned long long)msg->nr_runs);
		return -EINVAL;
	}
	ret = runs_reserve(t, msg->nr_runs);
	if (!ret)
		ret = recv_all(t->sock, t->runs, msg->nr_runs * sizeof(*t->runs));
	if (ret) {
		pr_err("task %d: cannot read its %llu lazy runs: %s\n", t->pid,
		       (unsigned long long)msg->nr_runs, strerror(-ret));
		return ret;
	}
	t->nr_runs = msg->nr_runs;
	ret = src_open(d, t->pid, msg->pages_id, &t->src);
	if (!ret)
		ret = check_runs(t);
	for (unsigned int i = 0; i < t->nr_runs; i++)
		*(t->runs[i].remote ? &remote : &local) += t->runs[i].len;
	if (!ret)
		pr_info("task %d: %u runs, %llu bytes to serve from pages-%u.img, %llu from the "
			"dump's source\n",
			t->pid, t->nr_runs, (unsigned long long)local, msg->pages_id,
			(unsigned long long)remote);
	return ret;
}

/* The blob's byte with the uffd attached. */
static int recv_uffd(struct lazy_daemon *d, struct lazy_task *t)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	char byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm;
	ssize_t n;

	n = recvmsg(t->sock, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0) {
		/* Its restore failed before the blob registered its memory: nothing to serve. */
		pr_info("task %d: gone before it sent its userfaultfd\n", t->pid);
		return -ESRCH;
	}
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int))) {
		pr_err("task %d: its message carries no userfaultfd\n", t->pid);
		return -EPROTO;
	}
	memcpy(&t->uffd, CMSG_DATA(cm), sizeof(int));
	close(t->sock);
	t->sock = -1;
	pr_debug("task %d: userfaultfd %d\n", t->pid, t->uffd);
	return lazy_guard_task(d, t) ?: watch(d, t->uffd, &t->uffd_watch);
}

static int on_sock(struct lazy_daemon *d, struct lazy_task *t)
{
	struct lazy_msg msg;
	int ret;

	if (t->has_msg)
		return recv_uffd(d, t);
	ret = recv_all(t->sock, &msg, sizeof(msg));
	if (ret || msg.magic != LAZY_MSG_MAGIC) {
		pr_err("lazy pages: a connection sent no valid message: %s\n",
		       ret ? strerror(-ret) : "bad magic");
		return -EPROTO;
	}
	t->has_msg = true;
	switch (msg.kind) {
	case LAZY_MSG_PROBE:
		return -ESRCH; /* nothing to serve: close it */
	case LAZY_MSG_DONE:
		pr_info("criu restore ended: no more tasks\n");
		d->restore_done = true;
		return -ESRCH;
	case LAZY_MSG_FAILED:
		/* Not "every page is in": a dump's source would kill the only copy left. */
		pr_err("criu restore failed: its tasks are gone, the pages stay with their "
		       "source\n");
		return -ECANCELED;
	case LAZY_MSG_TASK:
		return on_task_msg(d, t, &msg);
	}
	pr_err("lazy pages: unknown message %u\n", msg.kind);
	return -EPROTO;
}

static int on_listen(struct lazy_daemon *d, int listen_fd)
{
	int sock = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct lazy_task *t;

	if (sock < 0) {
		pr_perror("lazy pages: accept");
		return errno == EINTR || errno == ECONNABORTED ? 0 : -errno;
	}
	t = task_new(d);
	if (!t) {
		close(sock);
		return -ENOMEM;
	}
	t->sock = sock;
	if (!getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		t->peer_pid = cred.pid;
	return watch(d, sock, &t->sock_watch);
}

/* ---- the loop ---- */

/*
 * A task is done once nothing is left to copy (its uffd then closes: what it faults on
 * afterwards is ordinary anonymous memory) or once it is gone. Errors other than a task
 * going away end the daemon: a half-served task must not go on with zeroes.
 */
static int task_result(struct lazy_daemon *d, struct lazy_task *t, int ret)
{
	char name[48];

	if (ret == -ESRCH) {
		if (t->uffd >= 0 && t->nr_runs)
			pr_info("%s exited with %u runs not copied\n", task_name(t, name, sizeof(name)),
				t->nr_runs);
		task_free(d, t);
		return 0;
	}
	if (ret) {
		pr_err("%s: %s\n", task_name(t, name, sizeof(name)), strerror(-ret));
		return ret;
	}
	if (t->uffd >= 0 && !t->nr_runs && !t->nr_retry && !t->asked && !t->copying) {
		pr_info("%s: all pages in (%llu faults, %llu bytes copied)\n",
			task_name(t, name, sizeof(name)), (unsigned long long)t->faults,
			(unsigned long long)t->copied);
		d->nr_served++;
		task_free(d, t);
	}
	return 0;
}

/* Tasks a copier found gone or failing, or whose last chunk came in, are done with. */
static int settle_tasks(struct lazy_daemon *d)
{
	struct lazy_task *t, *next;
	int ret = 0;

	for (t = d->tasks; t && !ret; t = next) {
		next = t->next;
		ret = task_result(d, t, t->gone ? -ESRCH : t->job_err);
	}
	return ret;
}

/* Only the records: the tasks are settled after the batch (other events name them). */
static int on_copiers(struct lazy_daemon *d)
{
	struct lazy_copy_job *job;

	while ((job = lazy_copy_finished(&d->copiers, false)))
		job_finish(d, job);
	return 0;
}

/*
 * The source's answers. Readable with nothing asked: a fault's fetch that read the answers
 * after epoll saw them (nothing there now), the source gone, or a protocol error.
 */
static int on_remote(struct lazy_daemon *d)
{
	char byte;
	ssize_t n;

	if (d->remote.asked)
		return remote_recv_asked(d);
	n = recv(d->remote.sk, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	pr_err("the dump's source %s %s\n", page_server_name(),
	       n > 0 ? "sent what was not asked for" : "closed the connection");
	return -EPROTO;
}

static int on_event(struct lazy_daemon *d, struct lazy_watch *w, int listen_fd)
{
	switch (w->kind) {
	case WATCH_LISTEN:
		return on_listen(d, listen_fd);
	case WATCH_SOCK:
		return task_result(d, w->task, on_sock(d, w->task));
	case WATCH_UFFD:
		return task_result(d, w->task, on_uffd(d, w->task));
	case WATCH_COPIERS:
		return on_copiers(d);
	case WATCH_REMOTE:
		return on_remote(d);
	}
	return -EINVAL;
}

static bool has_work(struct lazy_daemon *d)
{
	for (struct lazy_task *t = d->tasks; t; t = t->next)
		if (t->uffd >= 0 && t->nr_retry)
			return true;
	if (!d->restore_done || !d->copiers.free_jobs)
		return false;
	for (struct lazy_task *t = d->tasks; t; t = t->next)
		if (has_chunk(t))
			return true;
	return false;
}

/* Faults to serve again first, then a chunk of each task in turn while copy jobs are free. */
static int copy_step(struct lazy_daemon *d)
{
	struct lazy_copy_job *job;
	struct lazy_task *t, *next;
	bool queued = true;
	int ret = 0;

	for (t = d->tasks; t && !ret; t = next) {
		next = t->next;
		if (t->uffd >= 0 && t->nr_retry)
			ret = task_result(d, t, retry_faults(d, t));
	}
	/*
	 * The background copy waits for the restore's end: until then it would only take
	 * the CPUs from criu releasing the tree, which is what the time to run is made of.
	 */
	while (!ret && d->restore_done && queued) {
		queued = false;
		for (t = d->tasks; t && !ret; t = t->next) {
			if (!has_chunk(t))
				continue;
			job = lazy_copy_job_get(&d->copiers);
			if (!job)
				return 0;
			ret = queue_chunk(d, t, job);
			queued = true;
		}
	}
	return ret;
}

/*
 * A blocked task's chunks are tried again after this long without its event (which comes
 * at once in every case known; the pause keeps a task that left no event from stalling).
 */
#define BLOCKED_PAUSE_MS 10

static int wait_ms(struct lazy_daemon *d)
{
	if (has_work(d))
		return 0;
	for (struct lazy_task *t = d->tasks; t; t = t->next)
		if (t->blocked)
			return BLOCKED_PAUSE_MS;
	return -1;
}

static int serve(struct lazy_daemon *d, int listen_fd)
{
	struct epoll_event evs[16];
	int n, ret = 0, timeout;

	while (!ret && !(d->restore_done && !d->tasks)) {
		timeout = wait_ms(d);
		n = epoll_wait(d->ep, evs, 16, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			pr_perror("lazy pages: epoll_wait");
			return -errno;
		}
		for (struct lazy_task *t = d->tasks; t && !n && timeout > 0; t = t->next)
			t->blocked = false;
		for (int i = 0; i < n && !ret; i++)
			ret = on_event(d, evs[i].data.ptr, listen_fd);
		if (!ret)
			ret = settle_tasks(d) ?: copy_step(d);
	}
	return ret;
}

static int listen_socket(struct sockaddr_un *addr)
{
	int sock;

	if (lazy_socket_addr(addr))
		return -1;
	unlink(addr->sun_path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)addr, sizeof(*addr)) || listen(sock, 128)) {
		pr_perror("lazy pages: cannot listen on %s", addr->sun_path);
		if (sock >= 0)
			close(sock);
		return -1;
	}
	pr_info("listening on %s\n", addr->sun_path);
	return sock;
}

/* --page-server: the dump --lazy-pages that keeps the pages, before any task comes. */
static int connect_remote(struct lazy_remote *rm)
{
	int one = 1;

	rm->asked_tail = &rm->asked;
	if (!opts.use_page_server)
		return 0;
	rm->buf = malloc(FAULT_CHUNK);
	if (!rm->buf) {
		pr_err("lazy pages: no memory for the pages from the dump's source\n");
		return -1;
	}
	rm->sk = page_server_connect();
	if (rm->sk < 0)
		return -1;
	/* Each request is waited for: it must not sit in Nagle's queue. */
	setsockopt(rm->sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/*
 * Every page is in: the source may let its tree go (PS_IOV_FLUSH, CRIU's close, answered
 * with a status). After a failure the connection just closes: the source then keeps its
 * tree, whose copy here is being killed.
 */
static int disconnect_remote(struct lazy_daemon *d, bool done)
{
	struct lazy_remote *rm = &d->remote;
	struct ps_iov pi = { .cmd = PS_IOV_FLUSH };
	int32_t status = 0;
	int ret = 0;

	if (rm->sk >= 0 && done) {
		status = -1;
		/* Chunks of tasks that went away meanwhile: their answers first. */
		while (!ret && rm->asked)
			ret = remote_recv_asked(d);
		ret = ret ?: ps_send(rm->sk, &pi, sizeof(pi));
		if (!ret)
			ret = ps_recv(rm->sk, &status, sizeof(status));
		if (ret || status)
			pr_err("the dump's source %s did not confirm the end: %s\n",
			       page_server_name(), ret ? strerror(-ret) : "bad status");
		else
			pr_info("the dump's source %s served %llu requests, %llu bytes\n",
				page_server_name(), (unsigned long long)rm->requests,
				(unsigned long long)rm->bytes);
	}
	if (rm->sk >= 0)
		close(rm->sk);
	free(rm->buf);
	return ret || status ? -1 : 0;
}

/* As many copiers as CPUs, up to 4 (the copy into new pages scales about so far). */
static unsigned int nr_copiers(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus < 1 ? 1 : cpus > 4 ? 4 : cpus;
}

/* The copiers, after every fork of the daemon (it daemonizes, starts its guardian). */
static int start_copiers(struct lazy_daemon *d)
{
	unsigned int nr = nr_copiers();
	/* Two chunks per copier, one copied while the other waits; one more each from afar. */
	unsigned int nr_jobs = 2 * nr + (d->remote.sk >= 0 ? nr : 0);

	if (lazy_copiers_start(&d->copiers, nr, nr_jobs, d->remote.sk >= 0 ? BACKGROUND_CHUNK : 0))
		return -1;
	d->copiers_watch = (struct lazy_watch){ WATCH_COPIERS, NULL };
	d->remote_watch = (struct lazy_watch){ WATCH_REMOTE, NULL };
	if (watch(d, d->copiers.event_fd, &d->copiers_watch))
		return -1;
	return d->remote.sk >= 0 ? watch(d, d->remote.sk, &d->remote_watch) : 0;
}

int cr_lazy_pages(void)
{
	struct lazy_daemon d = { .ep = -1,
				 .listen_watch = { WATCH_LISTEN, NULL },
				 .guardian_sock = -1,
				 .remote = { .sk = -1 },
				 .copiers = { .event_fd = -1 } };
	struct sockaddr_un addr;
	int listen_fd = listen_socket(&addr), ret = -1;

	if (listen_fd < 0)
		return -1;
	if (connect_remote(&d.remote))
		goto out;
	if (daemonize())
		goto out;
	/* --status-fd: restore may connect now (CRIU's test driver waits for this byte). */
	report_status_ready();
	if (run_action_scripts(ACT_STATUS_READY, 0))
		goto out;
	if (lazy_guard_start(&d, listen_fd))
		goto out;
	d.ep = epoll_create1(EPOLL_CLOEXEC);
	if (d.ep < 0) {
		pr_perror("lazy pages: epoll_create1");
		goto out;
	}
	if (watch(&d, listen_fd, &d.listen_watch) || start_copiers(&d))
		goto out;
	ret = serve(&d, listen_fd);
	if (!ret)
		pr_info("every page is in: %u tasks served\n", d.nr_served);
out:
	/* On an error the tasks still waiting for pages are killed: never zeroes for them. */
	if (ret && d.guardian_sock >= 0) {
		close(d.guardian_sock);
		d.guardian_sock = -1;
		while (waitpid(d.guardian_pid, NULL, 0) < 0 && errno == EINTR)
			;
	} else if (!ret) {
		lazy_guard_stop(&d);
	}
	while (d.tasks)
		task_free(&d, d.tasks);
	if (disconnect_remote(&d, !ret))
		ret = -1;
	lazy_copiers_stop(&d.copiers);
	if (d.ep >= 0)
		close(d.ep);
	close(listen_fd);
	unlink(addr.sun_path);
	return ret ? -1 : 0;
}
