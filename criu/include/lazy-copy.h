#ifndef CR_LAZY_COPY_H
#define CR_LAZY_COPY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The lazy-pages daemon's copier threads: background chunks are copied into the tasks by
 * several threads at once. The copy into memory the task never had is what bounds the
 * background fetch (each page is allocated and filled, in a VM each new page also backed by
 * the host), and it goes about twice as fast on two cores as on one.
 */

/* One chunk: [addr, addr + len) of the task behind uffd, from data. */
struct lazy_copy_job {
	struct lazy_copy_job *next;
	void *owner; /* the daemon's task */
	int uffd;
	uint64_t addr, len;
	const void *data;
	uint8_t *buf; /* the job's own buffer (buf_size bytes), for pages fetched from afar */
	/* The daemon's: where a remote chunk is on the source, the owner's gen when picked. */
	uint64_t src_at;
	int32_t src_pid;
	uint32_t gen;
	/* Set by the copier: the bytes dealt with from addr on, and 0 or -errno. */
	uint64_t done;
	int err;
};

struct lazy_copiers {
	pthread_mutex_t lock;
	pthread_cond_t todo_cond, finished_cond;
	struct lazy_copy_job *todo, **todo_tail, *finished, *free_jobs;
	struct lazy_copy_job *jobs;
	size_t buf_size;
	unsigned int nr_jobs, nr_threads;
	unsigned int in_flight; /* submitted, not finished (under lock) */
	pthread_t *threads;
	int event_fd; /* readable while finished jobs wait for lazy_copy_finished() */
	bool stop;
};

/* Copies len bytes of data to addr through uffd; *done as lazy_copy_job's. */
int uffd_copy(int uffd, uint64_t addr, uint64_t len, const void *data, uint64_t *done);
void uffd_wake(int uffd, uint64_t addr);

int lazy_copiers_start(struct lazy_copiers *c, unsigned int nr_threads, unsigned int nr_jobs,
		       size_t buf_size);
void lazy_copiers_stop(struct lazy_copiers *c);

/* A job to fill and submit, or NULL while every one is taken. */
struct lazy_copy_job *lazy_copy_job_get(struct lazy_copiers *c);
void lazy_copy_submit(struct lazy_copiers *c, struct lazy_copy_job *job);
/* The owner's jobs not taken by a copier yet: finished at once, nothing copied (EAGAIN). */
void lazy_copy_cancel(struct lazy_copiers *c, const void *owner);
/* A finished job (to be put back once read), waiting for one if wait; else NULL if none. */
struct lazy_copy_job *lazy_copy_finished(struct lazy_copiers *c, bool wait);
void lazy_copy_job_put(struct lazy_copiers *c, struct lazy_copy_job *job);

#endif
