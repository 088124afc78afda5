/*
 * The memory of a dump's tasks, several at a time (dump-mem.h). A job per task, in a ring
 * of as many as run at once, finished oldest first: its thread joined, its parasite
 * stopped (on the main thread, the tracer), its numbers added to the dump's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compel.h"
#include "dump-mem.h"
#include "dump-task.h"
#include "log.h"
#include "mem.h"
#include "pstree.h"

/* More threads than this would only wait for the disk. */
#define MAX_MEM_JOBS 16

struct mem_job {
	struct dump_task *task;
	struct compel_ctl *parasite;
	struct mem_task_dump *mem;
	struct timespec start;
	pthread_t thread;
	bool threaded;
	int ret;
};

struct dump_mem_pool {
	struct mem_dump_ctx *ctx;
	uint64_t *memdump_us;
	unsigned int max_jobs;
	struct mem_job jobs[MAX_MEM_JOBS];
	unsigned int first, nr; /* the running jobs: a ring from first */
	int error; /* the first failure of a finished job */
};

static uint64_t usec_since(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000000ULL + (now.tv_nsec - since->tv_nsec) / 1000;
}

/* One page server socket, one list of lazy tasks: shared by every task, so one at a time. */
static unsigned int jobs_at_once(const struct mem_dump_ctx *ctx)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (ctx->page_server_sk >= 0 || ctx->lazy || cpus <= 1)
		return 1;
	return cpus > MAX_MEM_JOBS ? MAX_MEM_JOBS : cpus;
}

int dump_mem_pool_init(struct dump_mem_pool **out, struct mem_dump_ctx *ctx,
		       uint64_t *memdump_us)
{
	struct dump_mem_pool *pool = calloc(1, sizeof(*pool));

	*out = pool;
	if (!pool) {
		pr_err("no memory for the memory jobs\n");
		return -ENOMEM;
	}
	pool->ctx = ctx;
	pool->memdump_us = memdump_us;
	pool->max_jobs = jobs_at_once(ctx);
	pr_info("dumping the memory of up to %u tasks at a time\n", pool->max_jobs);
	return 0;
}

static void *dump_pages_thread(void *arg)
{
	struct mem_job *job = arg;

	job->ret = mem_dump_task_pages(job->mem);
	return NULL;
}

/* The oldest job: waited for, its parasite stopped, its numbers kept. */
static void finish_oldest(struct dump_mem_pool *pool)
{
	struct mem_job *job = &pool->jobs[pool->first];
	int ret;

	if (job->threaded)
		pthread_join(job->thread, NULL);
	ret = job->ret;
	if (job->parasite) {
		int cure_ret = compel_cure(job->parasite);

		ret = ret ?: cure_ret;
	}
	mem_dump_task_end(job->mem, pool->ctx);
	*pool->memdump_us += usec_since(&job->start);
	if (ret && !pool->error)
		pool->error = ret;
	memset(job, 0, sizeof(*job));
	pool->first = (pool->first + 1) % pool->max_jobs;
	pool->nr--;
}

int dump_mem_task(struct dump_mem_pool *pool, struct dump_task *task, struct compel_ctl *parasite)
{
	struct mem_job *job;
	int ret;

	if (pool->nr == pool->max_jobs)
		finish_oldest(pool);
	if (pool->error) {
		int ret = parasite ? compel_cure(parasite) : 0;

		mem_dump_task_end(task->mem, NULL);
		task->mem = NULL;
		return pool->error ?: ret;
	}
	job = &pool->jobs[(pool->first + pool->nr++) % pool->max_jobs];
	job->task = task;
	pr_info("dumping the memory of task %d\n", task->item->pid);
	clock_gettime(CLOCK_MONOTONIC, &job->start);
	job->parasite = parasite;
	job->mem = task->mem;
	task->mem = NULL;
	ret = mem_dump_task_begin(job->mem, &task->mm_misc, pool->ctx, job->parasite);
	if (!ret && pool->max_jobs > 1) {
		int err = pthread_create(&job->thread, NULL, dump_pages_thread, job);

		job->threaded = !err;
		if (err) {
			pr_err("cannot start a thread for the pages of %d: %s\n", task->item->pid,
			       strerror(err));
			ret = -err;
		}
	} else if (!ret) {
		ret = mem_dump_task_pages(job->mem);
	}
	/* A failed job is finished with the others: its parasite is stopped there. */
	if (!job->threaded)
		job->ret = ret;
	if (pool->max_jobs == 1)
		finish_oldest(pool);
	return ret ?: pool->error;
}

int dump_mem_pool_finish(struct dump_mem_pool *pool)
{
	int ret;

	if (!pool)
		return 0;
	while (pool->nr)
		finish_oldest(pool);
	ret = pool->error;
	free(pool);
	return ret;
}
