/*
 * The memory of a dump's tasks, several at a time: each task's parasite is started and
 * stopped by criu's main thread (the tracer: ptrace answers it alone), its private pages
 * are dumped by a thread of their own, at most one per CPU at a time.
 */
#ifndef CR_DUMP_MEM_H
#define CR_DUMP_MEM_H

#include <stdint.h>

struct dump_task;
struct dump_mem_pool;
struct mem_dump_ctx;

/*
 * A pool for the dump whose memory state is ctx; the time each task's memory took is added
 * to *memdump_us. With a page server or dump --lazy-pages (one socket, one list of lazy
 * tasks) the tasks go one at a time. 0 or -ENOMEM (logged).
 */
int dump_mem_pool_init(struct dump_mem_pool **pool, struct mem_dump_ctx *ctx,
		       uint64_t *memdump_us);
/*
 * The memory of a seized task whose state is collected: its mm images and shared objects
 * now, its private pages on a thread (waiting first for the oldest task when every thread
 * is busy), through its parasite (dump_start_parasite(), NULL: none), which the pool
 * stops, whatever happens. 0, or the first failure of this task or of one finished
 * meanwhile.
 */
struct compel_ctl;
int dump_mem_task(struct dump_mem_pool *pool, struct dump_task *task, struct compel_ctl *parasite);
/* Waits for every task, stops the parasites, frees the pool: 0 or the first failure. */
int dump_mem_pool_finish(struct dump_mem_pool *pool);

#endif
