/*
 * The lazy-pages daemon's copier threads (lazy-copy.h). The daemon's own thread picks the
 * chunks, fetches them and keeps every record; a copier only runs UFFDIO_COPY and says how
 * far it got, so nothing but the job lists is shared, under one lock.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lazy-copy.h"
#include "log.h"

#define PAGE_SIZE 4096ul
/* The copiers' nice value (the daemon's thread serves faults at its own). */
#define COPIER_NICE 10

void uffd_wake(int uffd, uint64_t addr)
{
	struct uffdio_range range = { addr, PAGE_SIZE };

	ioctl(uffd, UFFDIO_WAKE, &range);
}

/*
 * *done: bytes dealt with (copied, or found there already). 0, -EAGAIN (the address
 * space is changing: its events must be read first), -ENOENT (nothing registered there
 * any more: the task unmapped or moved it, and the event saying so is on its way or
 * unread), -ESRCH (the task is gone) or another -errno.
 */
int uffd_copy(int uffd, uint64_t addr, uint64_t len, const void *data, uint64_t *done)
{
	struct uffdio_copy uc;

	*done = 0;
	while (*done < len) {
		uc = (struct uffdio_copy){ .dst = addr + *done,
					   .src = (uintptr_t)data + *done,
					   .len = len - *done };
		if (!ioctl(uffd, UFFDIO_COPY, &uc)) {
			*done = len;
			break;
		}
		if (uc.copy > 0) {
			*done += uc.copy;
			continue;
		}
		if (errno == EEXIST) {
			/* Served by a fault meanwhile, or a fault raced the copy: wake it all the same. */
			uffd_wake(uffd, addr + *done);
			*done += PAGE_SIZE;
			continue;
		}
		return -errno;
	}
	return 0;
}

static void *copier_main(void *arg)
{
	struct lazy_copiers *c = arg;
	struct lazy_copy_job *job;
	uint64_t one = 1;

	/*
	 * Background work: a task that wakes up (or criu finishing its restore) takes the CPU
	 * from a copier at once; an idle machine gives the copiers all of it all the same.
	 */
	if (setpriority(PRIO_PROCESS, syscall(SYS_gettid), COPIER_NICE)) {
		/* Copies at the daemon's priority then: slower to yield, no less right. */
	}
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->todo && !c->stop)
			pthread_cond_wait(&c->todo_cond, &c->lock);
		if (c->stop)
			break;
		job = c->todo;
		c->todo = job->next;
		if (!c->todo)
			c->todo_tail = &c->todo;
		pthread_mutex_unlock(&c->lock);

		job->err = uffd_copy(job->uffd, job->addr, job->len, job->data, &job->done);

		pthread_mutex_lock(&c->lock);
		c->in_flight--;
		job->next = c->finished;
		c->finished = job;
		/* Under the lock: lazy_copy_finished() clears the count when the list is empty. */
		if (write(c->event_fd, &one, sizeof(one)) != sizeof(one)) {
			/* A full count already says there is something. */
		}
		pthread_cond_broadcast(&c->finished_cond);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static int alloc_jobs(struct lazy_copiers *c, unsigned int nr_jobs, size_t buf_size)
{
	uint8_t *bufs = NULL;

	c->jobs = calloc(nr_jobs, sizeof(*c->jobs));
	if (buf_size) {
		bufs = mmap(NULL, nr_jobs * buf_size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (bufs == MAP_FAILED)
			bufs = NULL;
	}
	if (!c->jobs || (buf_size && !bufs)) {
		pr_err("lazy pages: no memory for %u copy jobs of %zu bytes\n", nr_jobs, buf_size);
		return -ENOMEM;
	}
	c->nr_jobs = nr_jobs;
	for (unsigned int i = 0; i < nr_jobs; i++) {
		c->jobs[i].buf = bufs ? bufs + i * buf_size : NULL;
		c->jobs[i].next = c->free_jobs;
		c->free_jobs = &c->jobs[i];
	}
	return 0;
}

int lazy_copiers_start(struct lazy_copiers *c, unsigned int nr_threads, unsigned int nr_jobs,
		       size_t buf_size)
{
	int err;

	*c = (struct lazy_copiers){ .event_fd = -1, .todo_tail = &c->todo };
	c->buf_size = buf_size;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->todo_cond, NULL);
	pthread_cond_init(&c->finished_cond, NULL);
	c->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->event_fd < 0) {
		pr_perror("lazy pages: eventfd");
		return -1;
	}
	c->threads = calloc(nr_threads, sizeof(*c->threads));
	if (!c->threads || alloc_jobs(c, nr_jobs, buf_size))
		return -1;
	for (; c->nr_threads < nr_threads; c->nr_threads++) {
		err = pthread_create(&c->threads[c->nr_threads], NULL, copier_main, c);
		if (err) {
			pr_err("lazy pages: cannot start a copier thread: %s\n", strerror(err));
			return -1;
		}
	}
	pr_info("lazy pages: %u copier threads, %u chunks in flight at most\n", nr_threads,
		nr_jobs);
	return 0;
}

/* Queued jobs are dropped: a stop comes at the daemon's end or on its failure. */
void lazy_copiers_stop(struct lazy_copiers *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->todo_cond);
	pthread_mutex_unlock(&c->lock);
	for (unsigned int i = 0; i < c->nr_threads; i++)
		pthread_join(c->threads[i], NULL);
	c->nr_threads = 0;
	free(c->threads);
	if (c->jobs && c->jobs[0].buf)
		munmap(c->jobs[0].buf, c->nr_jobs * c->buf_size);
	free(c->jobs);
	if (c->event_fd >= 0)
		close(c->event_fd);
	*c = (struct lazy_copiers){ .event_fd = -1 };
}

struct lazy_copy_job *lazy_copy_job_get(struct lazy_copiers *c)
{
	struct lazy_copy_job *job = c->free_jobs;

	/* Only the daemon's thread takes and puts jobs back: no lock. */
	if (job)
		c->free_jobs = job->next;
	return job;
}

void lazy_copy_job_put(struct lazy_copiers *c, struct lazy_copy_job *job)
{
	job->next = c->free_jobs;
	c->free_jobs = job;
}

void lazy_copy_submit(struct lazy_copiers *c, struct lazy_copy_job *job)
{
	pthread_mutex_lock(&c->lock);
	job->next = NULL;
	job->done = 0;
	job->err = 0;
	*c->todo_tail = job;
	c->todo_tail = &job->next;
	c->in_flight++;
	pthread_cond_signal(&c->todo_cond);
	pthread_mutex_unlock(&c->lock);
}

void lazy_copy_cancel(struct lazy_copiers *c, const void *owner)
{
	struct lazy_copy_job **p, *job;
	uint64_t one = 1;

	pthread_mutex_lock(&c->lock);
	for (p = &c->todo; (job = *p);) {
		if (job->owner != owner) {
			p = &job->next;
			continue;
		}
		*p = job->next;
		c->in_flight--;
		job->err = -EAGAIN;
		job->next = c->finished;
		c->finished = job;
	}
	c->todo_tail = p;
	if (c->finished && write(c->event_fd, &one, sizeof(one)) != sizeof(one)) {
		/* A full count already says there is something. */
	}
	pthread_mutex_unlock(&c->lock);
}

struct lazy_copy_job *lazy_copy_finished(struct lazy_copiers *c, bool wait)
{
	struct lazy_copy_job *job;
	uint64_t count;

	pthread_mutex_lock(&c->lock);
	while (wait && !c->finished && c->in_flight)
		pthread_cond_wait(&c->finished_cond, &c->lock);
	job = c->finished;
	if (job)
		c->finished = job->next;
	if (!c->finished && read(c->event_fd, &count, sizeof(count)) < 0) {
		/* Already clear. */
	}
	pthread_mutex_unlock(&c->lock);
	return job;
}
