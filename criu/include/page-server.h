/*
 * CRIU's page-server protocol: `criu dump --page-server` sends the pagemaps and pages of
 * a dump over TCP, `criu page-server` writes them as pagemap-*.img and pages-*.img in its
 * images directory. Wire-compatible with upstream CRIU in both directions.
 */
#ifndef CR_PAGE_SERVER_H
#define CR_PAGE_SERVER_H

#include <stdint.h>

#include "image.h"

/*
 * One command, native byte order (both ends are the same machine kind, as with CRIU):
 * 32 bytes, nr_pages 8-aligned after cmd. What follows a command on the wire: the
 * nr_pages pages of an ADD with PE_PRESENT; nothing for the others.
 */
struct ps_iov {
	uint32_t cmd; /* the command word, the pagemap flags (PE_*) above PS_CMD_BITS */
	uint64_t nr_pages;
	uint64_t vaddr;
	uint64_t dst_id; /* the pagemap image: its id above PS_TYPE_BITS, its kind below */
};

_Static_assert(sizeof(struct ps_iov) == 32, "CRIU's struct page_server_iov is 32 bytes");

/* Command words, CRIU's numbers. */
#define PS_IOV_ADD 1 /* a run of pages, PE_PRESENT: data follow */
#define PS_IOV_HOLE 2 /* a run in the parent images (PE_PARENT) */
#define PS_IOV_OPEN 3 /* start pagemap dst_id */
#define PS_IOV_OPEN2 4 /* the same; the server answers one byte: whether it has a parent */
#define PS_IOV_PARENT 5 /* whether the server has a parent for dst_id: an int answers */
#define PS_IOV_ADD_F 6 /* a run with the flags in cmd's high bits */
#define PS_IOV_GET 7 /* lazy pages: the server sends pages back */
#define PS_IOV_FLUSH 0x1023 /* everything is sent: the server answers an int32 status */
#define PS_IOV_FLUSH_N_CLOSE 0x1024 /* the same, and the session ends without EOF */

#define PS_CMD_BITS 16
#define PS_CMD_MASK ((1u << PS_CMD_BITS) - 1)
#define PS_TYPE_BITS 8
#define PS_TYPE_MASK ((1u << PS_TYPE_BITS) - 1)
#define PS_TYPE_PID 1 /* pagemap-PID.img */
#define PS_TYPE_SHMEM 2 /* pagemap-shmem-SHMID.img */

/*
 * dst_id of a pagemap image: CR_IMG_PAGEMAP or CR_IMG_SHMEM_PAGEMAP (the only kinds a
 * page server stores) and its id.
 */
static inline uint64_t ps_dst_id(enum cr_img_type map_type, unsigned long map_id)
{
	return (uint64_t)map_id << PS_TYPE_BITS |
	       (map_type == CR_IMG_SHMEM_PAGEMAP ? PS_TYPE_SHMEM : PS_TYPE_PID);
}

/* Sends all of buf; 0 or -errno (not logged). No SIGPIPE when the peer is gone. */
int ps_send(int sk, const void *buf, size_t len);
/* Receives exactly len bytes; 0, -EPIPE at EOF before them, or -errno (not logged). */
int ps_recv(int sk, void *buf, size_t len);

/* Where a dump's pages go: "ADDR:PORT" of --address/--port, for messages. */
const char *page_server_name(void);

/*
 * criu dump --page-server: connects to --address:--port. The socket, or -errno after one
 * line (the server does not listen: nothing of the tree was touched yet).
 */
int page_server_connect(void);
/*
 * The dump's pages are all sent: the server confirms it has written them (PS_IOV_FLUSH).
 * 0 or -errno (logged). The caller closes sk.
 */
int page_server_finish(int sk);

/*
 * criu page-server: listens on --address (every address when not given):--port, takes
 * one dump's connection and writes its pagemaps and pages into the images directory.
 * 0 once the dump flushed and closed the session, -1 after one error line.
 */
int cr_page_server(void);

/* --address (all without it):--port listening, or -1 after one line. */
int page_server_listen(void);

/*
 * The pages of task dst_id (its pid in the images) from vaddr on: at most *nr_pages (> 0),
 * cut to what the source holds there in one piece (never to 0), into buf. 0, or -errno
 * after one line (vaddr is none of the task's lazy pages).
 */
typedef int (*ps_lazy_get_fn)(void *arg, uint64_t dst_id, uint64_t vaddr, uint64_t *nr_pages,
			      void *buf);
/*
 * dump --lazy-pages: takes one criu lazy-pages --page-server on listen_sk and answers its
 * PS_IOV_GETs with get() until it says it has every page (PS_IOV_FLUSH, answered with a
 * status as CRIU's source does). 0, or -errno after one line.
 */
int page_server_serve_lazy(int listen_sk, ps_lazy_get_fn get, void *arg);
/*
 * criu page-server --lazy-pages (page-server-images.c): the same, the pages read from the
 * pagemap and pages images of the images directory (up its pre-dump chain).
 */
int page_server_serve_images(int listen_sk);

#endif
