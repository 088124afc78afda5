/*
 * The dump's page data leave through a ring of buffers: the dumping thread reads the
 * task's pages into one while a writer thread writes the others to the pages image, so
 * reading the task and filling the page cache overlap instead of adding up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "page-xfer.h"

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
			ret = img_write_raw(px->img, px->bufs[idx], px->used[idx]);
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

int page_xfer_open(struct page_xfer *px, struct cr_img *img)
{
	unsigned int i;
	int ret;

	memset(px, 0, sizeof(*px));
	px->img = img;
	pthread_mutex_init(&px->lock, NULL);
	pthread_cond_init(&px->cond, NULL);
	for (i = 0; i < PAGE_XFER_NR_BUFS; i++) {
		px->bufs[i] = malloc(PAGE_XFER_BUF_SIZE);
		if (!px->bufs[i]) {
			pr_err("%s: no memory for the page buffers\n", img->name);
			return -ENOMEM;
		}
	}
	ret = pthread_create(&px->writer, NULL, page_xfer_writer, px);
	if (ret) {
		pr_err("%s: cannot start the page writer: %s\n", img->name, strerror(ret));
		return -ret;
	}
	px->started = 1;
	return 0;
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
	for (i = 0; i < PAGE_XFER_NR_BUFS; i++)
		free(px->bufs[i]);
	pthread_cond_destroy(&px->cond);
	pthread_mutex_destroy(&px->lock);
	memset(px, 0, sizeof(*px));
}
