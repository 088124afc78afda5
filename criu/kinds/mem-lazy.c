/*
 * dump --lazy-pages: the private pages restore leaves to the lazy-pages daemon stay in the
 * frozen tree (PE_LAZY runs, no data in the images); once the images are written they are
 * served from the tasks' memory, which cannot change while they are frozen, to the
 * criu lazy-pages --page-server of the restore (the protocol's end is page-server.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "namespaces.h"
#include "page-server.h"

#define PAGE_SIZE 4096UL

int mem_lazy_add_task(struct mem_dump_ctx *ctx, pid_t pid, struct mem_lazy_task **out)
{
	struct mem_lazy_task **tasks, *t;

	tasks = realloc(ctx->lazy_tasks, (ctx->nr_lazy_tasks + 1) * sizeof(*tasks));
	t = calloc(1, sizeof(*t));
	if (tasks)
		ctx->lazy_tasks = tasks;
	if (!tasks || !t) {
		free(t);
		pr_err("task %d: no memory to note its lazy pages\n", pid);
		return -ENOMEM;
	}
	*t = (struct mem_lazy_task){ .pid = pid, .img_pid = pidns_img_pid(pid), .mem_fd = -1 };
	ctx->lazy_tasks[ctx->nr_lazy_tasks++] = t;
	*out = t;
	return 0;
}

int mem_lazy_add_run(struct mem_lazy_task *t, uint64_t vaddr, uint64_t nr_pages)
{
	uint64_t *runs;

	if (t->nr_runs == t->cap_runs) {
		runs = realloc(t->runs, (t->cap_runs * 2 + 16) * 2 * sizeof(*runs));
		if (!runs) {
			pr_err("task %d: no memory for %u lazy runs\n", t->pid, t->nr_runs);
			return -ENOMEM;
		}
		t->runs = runs;
		t->cap_runs = t->cap_runs * 2 + 16;
	}
	t->runs[2 * t->nr_runs] = vaddr;
	t->runs[2 * t->nr_runs + 1] = vaddr + nr_pages * PAGE_SIZE;
	t->nr_runs++;
	return 0;
}

void mem_lazy_free(struct mem_dump_ctx *ctx)
{
	for (unsigned int i = 0; i < ctx->nr_lazy_tasks; i++) {
		if (ctx->lazy_tasks[i]->mem_fd >= 0)
			close(ctx->lazy_tasks[i]->mem_fd);
		free(ctx->lazy_tasks[i]->runs);
		free(ctx->lazy_tasks[i]);
	}
	free(ctx->lazy_tasks);
	ctx->lazy_tasks = NULL;
	ctx->nr_lazy_tasks = 0;
}

static struct mem_lazy_task *find_task(const struct mem_dump_ctx *ctx, uint64_t img_pid)
{
	for (unsigned int i = 0; i < ctx->nr_lazy_tasks; i++)
		if ((uint64_t)ctx->lazy_tasks[i]->img_pid == img_pid)
			return ctx->lazy_tasks[i];
	return NULL;
}

/* The run holding vaddr: its end, or 0. */
static uint64_t run_end(const struct mem_lazy_task *t, uint64_t vaddr)
{
	unsigned int lo = 0, hi = t->nr_runs, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (t->runs[2 * mid + 1] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nr_runs && t->runs[2 * lo] <= vaddr ? t->runs[2 * lo + 1] : 0;
}

/* Through /proc/PID/mem, which reads what process_vm_readv cannot (PROT_NONE). */
static int read_mem_file(struct mem_lazy_task *t, uint64_t vaddr, uint64_t len, void *buf)
{
	char path[64];
	ssize_t got;

	if (t->mem_fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
		t->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (t->mem_fd < 0) {
			pr_perror("lazy source: task %d: cannot open its memory", t->pid);
			return -errno;
		}
	}
	got = pread(t->mem_fd, buf, len, vaddr);
	if (got != (ssize_t)len) {
		pr_err("lazy source: task %d: cannot read %llu bytes at %#llx: %s\n", t->pid,
		       (unsigned long long)len, (unsigned long long)vaddr,
		       got < 0 ? strerror(errno) : "short read");
		return got < 0 ? -errno : -EIO;
	}
	return 0;
}

/*
 * The lazy source's get(): the pages of one PE_LAZY run from vaddr on, as many as asked
 * and fit. process_vm_readv() copies them once, straight from the task's pages (a read of
 * /proc/PID/mem copies each page twice, through a kernel buffer); what it cannot read
 * (PROT_NONE) comes through the file.
 */
static int lazy_get(void *arg, uint64_t img_pid, uint64_t vaddr, uint64_t *nr_pages, void *buf)
{
	struct mem_lazy_task *t = find_task(arg, img_pid);
	uint64_t end = t ? run_end(t, vaddr) : 0, len;
	struct iovec local, remote;
	ssize_t got;

	if (!end || vaddr % PAGE_SIZE) {
		pr_err("lazy source: no lazy pages at %#llx of task %lld in this dump\n",
		       (unsigned long long)vaddr, (long long)img_pid);
		return -ENOENT;
	}
	if (*nr_pages > (end - vaddr) / PAGE_SIZE)
		*nr_pages = (end - vaddr) / PAGE_SIZE;
	len = *nr_pages * PAGE_SIZE;
	local = (struct iovec){ buf, len };
	remote = (struct iovec){ (void *)(uintptr_t)vaddr, len };
	got = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
	if (got < 0)
		got = 0;
	if ((uint64_t)got == len)
		return 0;
	return read_mem_file(t, vaddr + got, len - got, (uint8_t *)buf + got);
}

int mem_lazy_serve(struct mem_dump_ctx *ctx, int listen_sk)
{
	pr_info("serving %llu lazy pages of %u tasks on %s\n",
		(unsigned long long)ctx->stats.pages_lazy, ctx->nr_lazy_tasks, page_server_name());
	return page_server_serve_lazy(listen_sk, lazy_get, ctx);
}
