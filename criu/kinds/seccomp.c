/*
 * Seccomp (seccomp.h). Dump reads each thread's filters through ptrace; restore gives
 * them to the restorer blob, which installs them once nothing of the restore is left
 * that a filter could refuse (criu traces the tasks with PTRACE_O_SUSPEND_SECCOMP until
 * they run their own code again).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "image.h"
#include "log.h"
#include "restorer-args.h"
#include "seccomp.h"
#include "task-image.h"

#include "seccomp.pb-c.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef PTRACE_SECCOMP_GET_METADATA
#define PTRACE_SECCOMP_GET_METADATA 0x420d
#endif

/* The flags a filter keeps that restore gives it again (the kernel's metadata). */
#define SECCOMP_KEPT_FLAGS SECCOMP_FILTER_FLAG_LOG

/* ---------------------------------------------------------------- dump ---- */

static SeccompFilter *dumped;
static size_t nr_dumped;

/* The thread's own /proc/TID/status "Seccomp:": 0 disabled, 1 strict, 2 filter. */
static int read_thread_mode(pid_t tid, int *mode)
{
	char path[64], line[128];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("thread %d: cannot open %s", tid, path);
		return -errno;
	}
	while (ret && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", mode) == 1)
			ret = 0;
	fclose(f);
	if (ret)
		pr_err("thread %d: no Seccomp line in %s\n", tid, path);
	return ret;
}

/* Filter off of the thread (0: the oldest) into *f; 1 when there is no such filter. */
static int read_filter(pid_t tid, unsigned long off, SeccompFilter *f)
{
	struct {
		uint64_t filter_off, flags;
	} meta = { off, 0 };
	long nr = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, off, NULL);
	struct sock_filter *prog;

	if (nr < 0 && errno == ENOENT)
		return 1;
	if (nr <= 0 || ptrace(PTRACE_SECCOMP_GET_METADATA, tid, sizeof(meta), &meta) < 0) {
		pr_perror("thread %d: cannot read seccomp filter %lu", tid, off);
		return -errno ?: -EIO;
	}
	prog = calloc(nr, sizeof(*prog));
	if (!prog || ptrace(PTRACE_SECCOMP_GET_FILTER, tid, off, prog) != nr) {
		pr_perror("thread %d: cannot read the %ld instructions of seccomp filter %lu", tid,
			  nr, off);
		free(prog);
		return -EIO;
	}
	seccomp_filter__init(f);
	f->filter.data = (uint8_t *)prog;
	f->filter.len = nr * sizeof(*prog);
	f->has_flags = true;
	f->flags = meta.flags & SECCOMP_KEPT_FLAGS;
	return 0;
}

static int add_dumped(SeccompFilter *f)
{
	SeccompFilter *grown = realloc(dumped, (nr_dumped + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("out of memory keeping %zu seccomp filters\n", nr_dumped);
		free(f->filter.data);
		return -ENOMEM;
	}
	dumped = grown;
	dumped[nr_dumped++] = *f;
	return 0;
}

/* How many filters the thread has. */
static long count_filters(pid_t tid)
{
	long nr = 0;

	while (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, nr, NULL) > 0)
		nr++;
	if (errno != ENOENT) {
		pr_perror("thread %d: cannot read seccomp filter %ld", tid, nr);
		return -errno;
	}
	return nr;
}

/*
 * As CRIU lays a chain out: the newest filter first, each older one's prev naming the
 * one written before it (the next newer), the thread naming the oldest.
 */
static int dump_filters(pid_t tid, ThreadCoreEntry *tc)
{
	long off = count_filters(tid);
	bool newest = true;
	SeccompFilter f;
	int ret = 0;

	if (off == 0) {
		pr_err("thread %d: seccomp filter mode without a filter\n", tid);
		return -EIO;
	}
	if (off < 0)
		return off;
	pr_info("thread %d: %ld seccomp filters\n", tid, off);
	while (off-- > 0 && !ret) {
		ret = read_filter(tid, off, &f);
		if (ret > 0) {
			pr_err("thread %d: its seccomp filter %ld went away\n", tid, off);
			ret = -EIO;
		}
		if (ret)
			break;
		f.has_prev = !newest;
		f.prev = newest ? 0 : nr_dumped - 1;
		newest = false;
		ret = add_dumped(&f);
	}
	if (ret)
		return ret;
	tc->has_seccomp_filter = true;
	tc->seccomp_filter = nr_dumped - 1;
	return 0;
}

int seccomp_dump_thread(pid_t tid, ThreadCoreEntry *tc)
{
	int mode, ret = read_thread_mode(tid, &mode);

	if (ret || mode == SECCOMP_MODE__disabled)
		return ret;
	tc->has_seccomp_mode = true;
	tc->seccomp_mode = mode;
	if (mode == SECCOMP_MODE__strict)
		return 0;
	if (mode != SECCOMP_MODE__filter) {
		pr_err("thread %d: seccomp mode %d is not known\n", tid, mode);
		return -ENOTSUP;
	}
	return dump_filters(tid, tc);
}

int seccomp_dump_write(void)
{
	SeccompEntry se = SECCOMP_ENTRY__INIT;
	SeccompFilter **ptrs;
	struct cr_img *img;
	int ret;

	if (!nr_dumped)
		return 0;
	ptrs = calloc(nr_dumped, sizeof(*ptrs));
	if (!ptrs) {
		pr_err("out of memory writing %zu seccomp filters\n", nr_dumped);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_dumped; i++)
		ptrs[i] = &dumped[i];
	se.n_seccomp_filters = nr_dumped;
	se.seccomp_filters = ptrs;
	img = open_image(CR_IMG_SECCOMP, O_WRONLY, 0);
	ret = img ? pb_write_one(img, &se) : -EIO;
	if (img)
		close_image(img);
	free(ptrs);
	return ret;
}

void seccomp_dump_fini(void)
{
	for (size_t i = 0; i < nr_dumped; i++)
		free(dumped[i].filter.data);
	free(dumped);
	dumped = NULL;
	nr_dumped = 0;
}

/* ------------------------------------------------------------- restore ---- */

static SeccompEntry *image_entry;
static struct seccomp_filter_image *filters;
static size_t nr_filters;

static int check_filter(size_t idx, const SeccompFilter *f)
{
	const char *why = NULL;

	if (!f->filter.len || f->filter.len % sizeof(struct sock_filter) ||
	    f->filter.len / sizeof(struct sock_filter) > BPF_MAXINSNS)
		why = "is not a BPF program of 1 to 4096 instructions";
	else if (f->has_prev && f->prev >= image_entry->n_seccomp_filters)
		why = "names a filter past the end of the image";
	else if (f->flags & ~SECCOMP_KEPT_FLAGS)
		why = "has flags restore does not know";
	if (!why)
		return 0;
	pr_err("seccomp.img: filter %zu (%zu bytes, prev %d, flags %#x) %s\n", idx, f->filter.len,
	       f->has_prev ? (int)f->prev : -1, f->flags, why);
	return -EINVAL;
}

int seccomp_collect(void)
{
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_SECCOMP, 0))
		return 0;
	img = open_image(CR_IMG_SECCOMP, O_RDONLY, 0);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&image_entry);
	close_image(img);
	if (ret)
		return ret;
	nr_filters = image_entry->n_seccomp_filters;
	filters = calloc(nr_filters ? nr_filters : 1, sizeof(*filters));
	if (!filters) {
		pr_err("seccomp.img: out of memory (%zu filters)\n", nr_filters);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_filters; i++) {
		const SeccompFilter *f = image_entry->seccomp_filters[i];

		ret = check_filter(i, f);
		if (ret)
			return ret;
		filters[i] = (struct seccomp_filter_image){ f->filter.data, f->filter.len,
							    f->has_flags ? f->flags : 0 };
	}
	pr_info("collected %zu seccomp filters\n", nr_filters);
	return 0;
}

void seccomp_collect_fini(void)
{
	free(filters);
	filters = NULL;
	nr_filters = 0;
	if (image_entry)
		pb_free(NULL, image_entry);
	image_entry = NULL;
}

const struct seccomp_filter_image *seccomp_filter_at(uint32_t idx)
{
	return idx < nr_filters ? &filters[idx] : NULL;
}

int seccomp_thread_chain(bool has_mode, SeccompMode mode, bool has_filter, uint32_t filter,
			 uint32_t **chain, uint32_t *nr, const char *img)
{
	uint32_t idx = filter;

	*chain = NULL;
	*nr = 0;
	if (!has_mode || mode != SECCOMP_MODE__filter)
		return 0;
	if (!has_filter || filter >= nr_filters) {
		pr_err("%s: seccomp filter mode, but filter %d is not in seccomp.img (%zu filters)\n",
		       img, has_filter ? (int)filter : -1, nr_filters);
		return -EINVAL;
	}
	*chain = calloc(nr_filters, sizeof(**chain));
	if (!*chain)
		return -ENOMEM;
	for (;;) {
		const SeccompFilter *f = image_entry->seccomp_filters[idx];

		if (*nr == nr_filters) {
			pr_err("%s: the seccomp filters from %u on form a loop\n", img, filter);
			free(*chain);
			*chain = NULL;
			return -EINVAL;
		}
		(*chain)[(*nr)++] = idx;
		if (!f->has_prev)
			return 0;
		idx = f->prev;
	}
}

/* ------------------------------------------------- restore, the region ---- */

#define CAP_SYS_ADMIN_BIT (1ull << 21)

static bool same_filter(uint32_t a, uint32_t b)
{
	return a == b || (filters[a].len == filters[b].len && filters[a].flags == filters[b].flags &&
			  !memcmp(filters[a].prog, filters[b].prog, filters[a].len));
}

/* How many filters, oldest first, every thread of the task has alike (none in strict mode). */
static uint32_t shared_prefix(const struct task_image *ti)
{
	const struct thread_image *first = &ti->threads[0];
	uint32_t n = first->nr_seccomp;

	for (unsigned int i = 0; i < ti->nr_threads; i++) {
		const struct thread_image *th = &ti->threads[i];
		uint32_t k = 0;

		if (th->seccomp_mode != SECCOMP_MODE__filter)
			return 0;
		while (k < n && k < th->nr_seccomp && same_filter(first->seccomp_chain[k], th->seccomp_chain[k]))
			k++;
		n = k;
	}
	return n;
}

static bool has_filters(const struct task_image *ti)
{
	for (unsigned int i = 0; i < ti->nr_threads; i++)
		if (ti->threads[i].nr_seccomp)
			return true;
	return false;
}

size_t seccomp_region_size(const struct task_image *ti)
{
	size_t size = 0;

	for (unsigned int i = 0; i < ti->nr_threads; i++)
		for (uint32_t k = 0; k < ti->threads[i].nr_seccomp; k++)
			size += sizeof(struct rst_seccomp_filter) +
				filters[ti->threads[i].seccomp_chain[k]].len;
	return size;
}

void seccomp_fill_region(const struct task_image *ti, void *dst, uint64_t dst_addr,
			 struct rst_args *args, struct rst_thread *threads)
{
	struct rst_seccomp_filter *out = dst;
	size_t nr = 0, progs = 0;

	for (unsigned int i = 0; i < ti->nr_threads; i++)
		nr += ti->threads[i].nr_seccomp;
	progs = nr * sizeof(*out);
	args->seccomp_filters = dst_addr;
	args->nr_seccomp_shared = shared_prefix(ti);
	nr = 0;
	for (unsigned int i = 0; i < ti->nr_threads; i++) {
		const struct thread_image *th = &ti->threads[i];

		threads[i].seccomp_mode = th->seccomp_mode;
		threads[i].nr_seccomp = th->nr_seccomp;
		threads[i].seccomp_first = nr;
		for (uint32_t k = 0; k < th->nr_seccomp; k++, nr++) {
			const struct seccomp_filter_image *f = &filters[th->seccomp_chain[k]];

			memcpy((char *)dst + progs, f->prog, f->len);
			out[nr] = (struct rst_seccomp_filter){ dst_addr + progs,
							       f->len / sizeof(struct sock_filter),
							       f->flags };
			progs += f->len;
		}
	}
	if (has_filters(ti) && !args->creds.no_new_privs && !(args->creds.cap_eff & CAP_SYS_ADMIN_BIT))
		args->creds.keep_caps = CAP_SYS_ADMIN_BIT;
}
