/*
 * Where a dump's pagemap entries and page data go: a target (the pagemap and pages images
 * in the images directory, or a page server's socket) fed by a thread of its own while
 * the dump reads the next pages into another buffer of a small ring.
 */
#ifndef CR_PAGE_XFER_H
#define CR_PAGE_XFER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "image.h"

#define PAGE_XFER_NR_BUFS 4

struct page_xfer;

/* A target: each member is called by the dumping thread but write(), the writer's. */
struct page_xfer_ops {
	/* Starts pagemap map_type/map_id whose pages are pages-pages_id. 0 or -errno (logged). */
	int (*open)(struct page_xfer *px, enum cr_img_type map_type, unsigned long map_id,
		    uint32_t pages_id);
	/* One pagemap entry, in order with the pages committed around it. 0 or -errno. */
	int (*entry)(struct page_xfer *px, uint64_t vaddr, uint64_t nr_pages, uint32_t flags);
	/* The writer thread: len bytes of the ring. 0 or -errno (logged). */
	int (*write)(struct page_xfer *px, const void *buf, size_t len);
	/* Optional: after open(), whether it succeeded; the writer is stopped. */
	void (*close)(struct page_xfer *px);
	/* Where page_xfer_splice() moves pages to. */
	int (*splice_fd)(struct page_xfer *px);
};

struct page_xfer {
	const struct page_xfer_ops *ops;
	struct cr_img *pagemap_img, *pages_img; /* the images target */
	int sk; /* the page server target: its socket, not owned */
	uint64_t dst_id; /* the page server target: the pagemap's id on the wire */
	bool server_has_parent; /* the page server target: its parent images hold the pagemap */
	bool keep_pagemap; /* the page server target: PAGE_XFER_KEEP_PAGEMAP */
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

/*
 * Over a socket, the pagemap is also written into the images directory (not the pages):
 * a pre-dump's, which the next dump of the chain reads to know what its parent holds.
 */
#define PAGE_XFER_KEEP_PAGEMAP 1u

/*
 * Starts pagemap map_type/map_id (pages in pages-pages_id) and its writer: into the images
 * directory when page_server_sk < 0, else over that socket (flags: PAGE_XFER_*). 0 or
 * -errno (logged); on failure page_xfer_close() still runs. px must be zeroed or closed
 * before.
 */
int page_xfer_open(struct page_xfer *px, int page_server_sk, enum cr_img_type map_type,
		   unsigned long map_id, uint32_t pages_id, unsigned int flags);

/* One pagemap entry; with PE_PRESENT its nr_pages pages are committed next. 0 or -errno. */
int page_xfer_entry(struct page_xfer *px, uint64_t vaddr, uint64_t nr_pages, uint32_t flags);
/*
 * The free part of the buffer being filled, *room bytes (never 0): the caller reads pages
 * into it and calls page_xfer_commit() with how many it put there. May wait for the writer
 * to free a buffer. NULL when the writer failed (logged), with *room = 0.
 */
char *page_xfer_room(struct page_xfer *px, size_t *room);
/* len bytes were put at page_xfer_room(); a full buffer goes to the writer. 0 or -errno. */
int page_xfer_commit(struct page_xfer *px, size_t len);
/*
 * Puts up to len bytes into buf (the ring's room): how many (> 0), or -errno after one
 * line of its own.
 */
typedef ssize_t (*page_xfer_fill_fn)(void *arg, char *buf, size_t len);
/* len bytes into the ring, as fill() produces them: page_xfer_room() and commit in a loop. */
int page_xfer_fill(struct page_xfer *px, size_t len, page_xfer_fill_fn fill, void *arg);
/*
 * The next len bytes of pages from a pipe (filled by vmsplice in the task: page-splice.h),
 * moved to the target with splice(), after everything committed before. 0 or -errno
 * (logged).
 */
int page_xfer_splice(struct page_xfer *px, int pipe_fd, size_t len);
/* Everything committed is written when it returns 0; -errno: the writer's failure. */
int page_xfer_flush(struct page_xfer *px);
/* Stops the writer (what is still queued is written), closes the target, frees the buffers. */
void page_xfer_close(struct page_xfer *px);

#endif
