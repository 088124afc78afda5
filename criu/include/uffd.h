/*
 * Lazy restore with userfaultfd: `criu restore --lazy-pages` leaves the pages of a task's
 * private anonymous VMAs out of the restore and `criu lazy-pages` (uffd.c) fills them in
 * while the task runs: first touches on demand, the rest streamed in the background.
 * What the restore side calls is in uffd-task.c.
 */
#ifndef CR_UFFD_H
#define CR_UFFD_H

#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdint.h>

#include "task-image.h"

/* In the work dir (-W, default the images dir), as CRIU names it. */
#define LAZY_PAGES_SOCKET "lazy-pages.socket"

/*
 * The protocol on the daemon's socket: each connection starts with one struct lazy_msg.
 * LAZY_MSG_TASK (from a restore task, libc side): nr_runs struct page_run follow, the
 * task's lazy pages (address, length, offset in pages-<pages_id>.img or, for remote runs,
 * the address in the dump's source), sorted by address;
 * later the restorer blob sends one byte carrying the task's userfaultfd (SCM_RIGHTS), once
 * the runs' VMAs are registered on it. LAZY_MSG_PROBE (criu restore, before forking): is a
 * daemon there. LAZY_MSG_DONE (criu restore, at its end): no more tasks will come.
 * LAZY_MSG_FAILED instead when the restore failed: the tasks it made are gone, and the
 * pages must stay with their source (dump --lazy-pages resumes its tree).
 */
#define LAZY_MSG_MAGIC 0x505a4c4cu /* "LLZP" */
enum lazy_msg_kind {
	LAZY_MSG_PROBE = 1,
	LAZY_MSG_TASK,
	LAZY_MSG_DONE,
	LAZY_MSG_FAILED,
};

struct lazy_msg {
	uint32_t magic;
	uint32_t kind; /* enum lazy_msg_kind */
	int32_t pid; /* LAZY_MSG_TASK: the task's pid in the images */
	uint32_t pages_id;
	uint64_t nr_runs;
};

/* The features lazy restore asks of UFFDIO_API: a task may fork, mremap, munmap, madvise. */
#define LAZY_UFFD_FEATURES                                                                     \
	(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |       \
	 UFFD_FEATURE_EVENT_UNMAP)

/* check --feature uffd: a userfaultfd with the API handshake; uffd-noncoop: with the events. */
bool kerndat_has_uffd(void);
bool kerndat_has_uffd_noncoop(void);

/* A private anonymous VMA whose stored pages the daemon serves instead of the restorer. */
bool vma_is_lazy(const struct vma_image *vma);

/*
 * The task's runs split at VMA boundaries into those the restorer reads (eager) and the
 * lazy ones, two page_maps of the same pages image. 0 or -ENOMEM (logged).
 */
int lazy_split_pages(const struct task_image *ti, struct page_map *eager, struct page_map *lazy);

/*
 * A restore that is not lazy: the task's runs left on a dump's source (dump --lazy-pages)
 * fail it. 0 or -ENOTSUP (logged).
 */
int lazy_refuse_remote(const struct task_image *ti);

/*
 * criu restore --lazy-pages, main process: lazy_pages_probe() before forking waits (up to
 * a few seconds, the daemon may still be starting) for the daemon's socket; 0 or -1
 * (logged). lazy_pages_done() at the end tells the daemon no task comes any more, and
 * whether the restore succeeded.
 */
int lazy_pages_probe(void);
void lazy_pages_done(bool restored);

/*
 * In a restore task with lazy runs, before the blob: a userfaultfd for its address space
 * and a connection to the daemon, which gets the runs. *uffd and *sock go to the blob,
 * which registers the VMAs, sends the uffd and closes both. 0 or -errno (logged).
 */
int lazy_pages_connect_task(pid_t pid, const struct page_map *lazy, int *uffd, int *sock);

/*
 * criu lazy-pages: serves every task that connects until all pages are in, from the pages
 * images, and with --page-server the runs left on the dump's source (dump --lazy-pages at
 * --address:--port) through CRIU's PS_IOV_GET. 0 or -1.
 */
int cr_lazy_pages(void);

struct sockaddr_un;
/* The daemon's socket, in the work dir (uffd-task.c; both sides): 0 or -ENAMETOOLONG. */
int lazy_socket_addr(struct sockaddr_un *addr);

#endif
