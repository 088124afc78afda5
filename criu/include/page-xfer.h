/*
 * Where dumped page data go: a pages image, written by a thread of its own while the
 * dump reads the next pages into another buffer of a small ring.
 */
#ifndef CR_PAGE_XFER_H
#define CR_PAGE_XFER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"

#define PAGE_XFER_NR_BUFS 4

struct page_xfer {
	struct cr_img *img; /* the pages image; the caller opens and closes it */
	char *bufs[PAGE_XFER_NR_BUFS];
	size_t used[PAGE_XFER_NR_BUFS];
	/* Buffers handed to the writer and written, counted from 0: filled - written <= NR. */
	uint64_t filled, written;
	int error; /* the writer's first failure, -errno; logged where it happened */
	uint64_t write_us; /* the writer's time in write() */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t writer;
	int stop, started;
};

/* Starts the writer on img. 0 or -errno (logged); on failure page_xfer_close() still runs. */
int page_xfer_open(struct page_xfer *px, struct cr_img *img);

/*
 * The free part of the buffer being filled, *room bytes (never 0): the caller reads pages
 * into it and calls page_xfer_commit() with how many it put there. May wait for the writer
 * to free a buffer. NULL when the writer failed (logged), with *room = 0.
 */
char *page_xfer_room(struct page_xfer *px, size_t *room);
/* len bytes were put at page_xfer_room(); a full buffer goes to the writer. 0 or -errno. */
int page_xfer_commit(struct page_xfer *px, size_t len);
/* Everything committed is written when it returns 0; -errno: the writer's failure. */
int page_xfer_flush(struct page_xfer *px);
/* Stops the writer (what is still queued is written) and frees the buffers. */
void page_xfer_close(struct page_xfer *px);

#endif
