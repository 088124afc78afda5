/*
 * The dump's page data leave through a ring of buffers: the dumping thread reads the
 * task's pages into one while a writer thread writes the others to the target (the pages
 * image, or a page server's socket), so reading the task and writing overlap instead of
 * adding up. The two targets: the images directory and a page server (page-server.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "page-server.h"
#include "page-xfer.h"
#include "pagemap.pb-c.h"

/*
 * Small buffers, so that what the reader just copied is still in the CPU caches when the
 * writer copies it again into the page cache: with 8 MiB buffers the write's copy ran
 * from memory and took most of a 1 GiB dump (perf: copy_folio_from_iter_atomic).
 */
#define PAGE_XFER_BUF_SIZE (1UL << 20)

static uint64_t usec_now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec * 1000000ULL + now.tv_nsec / 1000;
}

/* The writer: each handed-over buffer in turn, until told to stop with none queued. */
static void *page_xfer_writer(void *arg)
{
	struct page_xfer *px = arg;

	pthread_mutex_lock(&px->lock);
	for (;;) {
		unsigned int idx;
		uint64_t start;
		int ret = 0;

		while (px->written == px->filled && !px->stop)
			pthread_cond_wait(&px->cond, &px->lock);
		if (px->written == px->filled)
			break;
		idx = px->written % PAGE_XFER_NR_BUFS;
		pthread_mutex_unlock(&px->lock);
		/* After a failure the rest is dropped: the dump fails anyway. */
		start = usec_now();
		if (!px->error)
			ret = px->ops->write(px, px->bufs[idx], px->used[idx]);
		pthread_mutex_lock(&px->lock);
		px->write_us += usec_now() - start;
		if (ret && !px->error)
			px->error = ret;
		px->used[idx] = 0;
		px->written++;
		pthread_cond_broadcast(&px->cond);
	}
	pthread_mutex_unlock(&px->lock);
	return NULL;
}

/* ------------------------------------------------------ the images target ---- */

/* The pagemap image with its head; its entries follow through images_entry(). */
static int open_pagemap_image(struct page_xfer *px, enum cr_img_type map_type,
			      unsigned long map_id, uint32_t pages_id)
{
	PagemapHead head = PAGEMAP_HEAD__INIT;

	head.pages_id = pages_id;
	px->pagemap_img = open_image(map_type, O_WRONLY, map_id);
	if (!px->pagemap_img)
		return -EIO;
	return pb_write_one(px->pagemap_img, &head);
}

static int images_open(struct page_xfer *px, enum cr_img_type map_type, unsigned long map_id,
		       uint32_t pages_id)
{
	px->pages_img = open_image(CR_IMG_PAGES, O_WRONLY, pages_id);
	if (!px->pages_img)
		return -EIO;
	return open_pagemap_image(px, map_type, map_id, pages_id);
}

static int images_entry(struct page_xfer *px, uint64_t vaddr, uint64_t nr_pages, uint32_t flags)
{
	PagemapEntry pe = PAGEMAP_ENTRY__INIT;

	pe.vaddr = vaddr;
	pe.compat_nr_pages = 0;
	pe.has_flags = true;
	pe.flags = flags;
	pe.has_nr_pages = true;
	pe.nr_pages = nr_pages;
	return pb_write_one(px->pagemap_img, &pe);
}

static int images_write(struct page_xfer *px, const void *buf, size_t len)
{
	return img_write_raw(px->pages_img, buf, len);
}

static int images_splice_fd(struct page_xfer *px)
{
	return px->pages_img->fd;
}

static void images_close(struct page_xfer *px)
{
	if (px->pages_img)
		close_image(px->pages_img);
	if (px->pagemap_img)
		close_image(px->pagemap_img);
}

static const struct page_xfer_ops images_ops = {
	.open = images_open,
	.entry = images_entry,
	.write = images_write,
	.close = images_close,
	.splice_fd = images_splice_fd,
};

/* ------------------------------------------------- the page server target ---- */

/*
 * The pages ids are the server's: it numbers the pages images it writes. OPEN2, as
 * CRIU's dump sends it; the answer says whether the server's parent images hold this
 * pagemap, which runs named PE_PARENT need.
 */
static int server_open(struct page_xfer *px, enum cr_img_type map_type, unsigned long map_id,
		       uint32_t pages_id)
{
	struct ps_iov pi = { .cmd = PS_IOV_OPEN2 };
	char has_parent;
	int ret;

	px->dst_id = pi.dst_id = ps_dst_id(map_type, map_id);
	ret = ps_send(px->sk, &pi, sizeof(pi));
	if (!ret)
		ret = ps_recv(px->sk, &has_parent, 1);
	px->server_has_parent = has_parent;
	if (ret)
		pr_err("page server %s: cannot open the pagemap of %s %lu: %s\n",
		       page_server_name(), map_type == CR_IMG_SHMEM_PAGEMAP ? "shmem" : "task",
		       map_id, ret == -EPIPE ? "the server closed the connection" : strerror(-ret));
	/* PAGE_XFER_KEEP_PAGEMAP: the entries, not the pages, go into the images dir too. */
	if (!ret && px->keep_pagemap)
		ret = open_pagemap_image(px, map_type, map_id, pages_id);
	return ret;
}

static ssize_t fill_from_memory(void *arg, char *buf, size_t len)
{
	const char **data = arg;

	memcpy(buf, *data, len);
	*data += len;
	return len;
}

static int server_entry(struct page_xfer *px, uint64_t vaddr, uint64_t nr_pages, uint32_t flags)
{
	struct ps_iov pi = {
		.cmd = flags << PS_CMD_BITS | PS_IOV_ADD_F,
		.nr_pages = nr_pages,
		.vaddr = vaddr,
		.dst_id = px->dst_id,
	};

	const char *data = (const char *)&pi;
	int ret = px->pagemap_img ? images_entry(px, vaddr, nr_pages, flags) : 0;

	/* In the ring: it leaves in order with the pages around it. */
	return ret ? ret : page_xfer_fill(px, sizeof(pi), fill_from_memory, &data);
}

static int server_write(struct page_xfer *px, const void *buf, size_t len)
{
	int ret = ps_send(px->sk, buf, len);

	if (ret)
		pr_err("page server %s: cannot send pages: %s\n", page_server_name(),
		       strerror(-ret));
	return ret;
}

static int server_splice_fd(struct page_xfer *px)
{
	return px->sk;
}

static const struct page_xfer_ops server_ops = {
	.open = server_open,
	.entry = server_entry,
	.write = server_write,
	/* the socket stays the dump's, for its next pagemaps; the kept pagemap is closed */
	.close = images_close,
	.splice_fd = server_splice_fd,
};

/* ----------------------------------------------------------------- the ring ---- */

int page_xfer_open(struct page_xfer *px, int page_server_sk, enum cr_img_type map_type,
		   unsigned long map_id, uint32_t pages_id, unsigned int flags)
{
	unsigned int i;
	int ret;

	memset(px, 0, sizeof(*px));
	px->sk = page_server_sk;
	px->keep_pagemap = flags & PAGE_XFER_KEEP_PAGEMAP;
	pthread_mutex_init(&px->lock, NULL);
	pthread_cond_init(&px->cond, NULL);
	for (i = 0; i < PAGE_XFER_NR_BUFS; i++) {
		px->bufs[i] = malloc(PAGE_XFER_BUF_SIZE);
		if (!px->bufs[i]) {
			pr_err("no memory for the page buffers\n");
			return -ENOMEM;
		}
	}
	px->ops = page_server_sk < 0 ? &images_ops : &server_ops;
	ret = px->ops->open(px, map_type, map_id, pages_id);
	if (ret)
		return ret;
	ret = pthread_create(&px->writer, NULL, page_xfer_writer, px);
	if (ret) {
		pr_err("cannot start the page writer: %s\n", strerror(ret));
		return -ret;
	}
	px->started = 1;
	return 0;
}

int page_xfer_entry(struct page_xfer *px, uint64_t vaddr, uint64_t nr_pages, uint32_t flags)
{
	return px->ops->entry(px, vaddr, nr_pages, flags);
}

char *page_xfer_room(struct page_xfer *px, size_t *room)
{
	unsigned int idx;
	int error;

	pthread_mutex_lock(&px->lock);
	while (px->filled - px->written == PAGE_XFER_NR_BUFS && !px->error)
		pthread_cond_wait(&px->cond, &px->lock);
	error = px->error;
	pthread_mutex_unlock(&px->lock);
	/* The buffer being filled is the writer's only once handed over: no lock needed. */
	idx = px->filled % PAGE_XFER_NR_BUFS;
	*room = error ? 0 : PAGE_XFER_BUF_SIZE - px->used[idx];
	return *room ? px->bufs[idx] + px->used[idx] : NULL;
}

/* The buffer being filled goes to the writer. */
static int hand_over(struct page_xfer *px)
{
	int ret;

	pthread_mutex_lock(&px->lock);
	ret = px->error;
	px->filled++;
	pthread_cond_broadcast(&px->cond);
	pthread_mutex_unlock(&px->lock);
	return ret;
}

int page_xfer_commit(struct page_xfer *px, size_t len)
{
	unsigned int idx = px->filled % PAGE_XFER_NR_BUFS;

	px->used[idx] += len;
	return px->used[idx] == PAGE_XFER_BUF_SIZE ? hand_over(px) : 0;
}

int page_xfer_flush(struct page_xfer *px)
{
	int ret;

	if (px->used[px->filled % PAGE_XFER_NR_BUFS])
		hand_over(px); /* its failure is px->error, returned below */
	pthread_mutex_lock(&px->lock);
	while (px->written != px->filled)
		pthread_cond_wait(&px->cond, &px->lock);
	ret = px->error;
	pthread_mutex_unlock(&px->lock);
	return ret;
}

int page_xfer_fill(struct page_xfer *px, size_t len, page_xfer_fill_fn fill, void *arg)
{
	while (len) {
		size_t room;
		char *buf = page_xfer_room(px, &room);
		ssize_t got;
		int ret;

		if (!buf)
			return page_xfer_flush(px);
		got = fill(arg, buf, len < room ? len : room);
		if (got < 0)
			return got;
		len -= got;
		ret = page_xfer_commit(px, got);
		if (ret)
			return ret;
	}
	return 0;
}

/* Pipe to target without passing through criu's memory: the pages go into the page cache. */
int page_xfer_splice(struct page_xfer *px, int pipe_fd, size_t len)
{
	int ret = page_xfer_flush(px), out = px->ops->splice_fd(px);
	uint64_t start = usec_now();

	while (!ret && len) {
		ssize_t moved = splice(pipe_fd, NULL, out, NULL, len, SPLICE_F_MOVE | SPLICE_F_MORE);

		if (moved < 0 && errno == EINTR)
			continue;
		if (moved <= 0) {
			ret = moved < 0 ? -errno : -EIO;
			pr_err("cannot move pages from a pipe to %s: %s\n",
			       px->ops == &images_ops ? px->pages_img->name : "the page server",
			       moved < 0 ? strerror(errno) : "the pipe ran dry");
			break;
		}
		len -= moved;
	}
	pthread_mutex_lock(&px->lock);
	px->write_us += usec_now() - start;
	pthread_mutex_unlock(&px->lock);
	return ret;
}

void page_xfer_close(struct page_xfer *px)
{
	unsigned int i;

	if (px->started) {
		pthread_mutex_lock(&px->lock);
		px->stop = 1;
		pthread_cond_broadcast(&px->cond);
		pthread_mutex_unlock(&px->lock);
		pthread_join(px->writer, NULL);
	}
	if (px->ops && px->ops->close)
		px->ops->close(px);
	for (i = 0; i < PAGE_XFER_NR_BUFS; i++)
		free(px->bufs[i]);
	pthread_cond_destroy(&px->cond);
	pthread_mutex_destroy(&px->lock);
	memset(px, 0, sizeof(*px));
}
