/*
 * Copy-on-write sharing across fork, restored (mem-cow.h, Documentation/design.md §4).
 *
 * A VMA of a child that has the same range as one of its parent's, both private memory
 * (anonymous, or of the same file) with stored pages, came (most likely) from the fork:
 * the parent maps and fills it before forking, the child inherits it and writes in only
 * its pages that differ, so the pages both still had equal stay one page. Every VMA premapped this way waits in one arena
 * criu reserved for the whole tree, out of the way of every dumped VMA of every task: the
 * restorer moves it to its place (mremap) before it maps anything else.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "mem-cow.h"
#include "uffd.h"
#include "vma.h"

#define PAGE_SIZE 4096ul
/* Pages are read and compared this many bytes at a time. */
#define COW_CHUNK (4ul << 20)
#define NO_VMA (-1)

/* One VMA of a task, as the plan sees it. */
struct cow_vma {
	int parent_vma; /* the parent's VMA it inherits; NO_VMA: none */
	bool child_match; /* a child inherits it */
	uint64_t off; /* premapped: its place, from the arena's start */
};

struct cow_task {
	const struct task_image *ti;
	struct cow_task *parent; /* NULL: not forked by its parent */
	struct cow_vma *vmas; /* per image VMA */
};

static struct cow_task *cow_tasks;
static unsigned int nr_cow_tasks;
static uint64_t arena_start, arena_len;

static bool vma_premapped(const struct cow_vma *cv)
{
	return cv->parent_vma != NO_VMA || cv->child_match;
}

static bool vma_has_runs(const struct page_map *pages, const struct vma_image *vma, bool remote)
{
	unsigned int i = page_run_after(pages->runs, pages->nr_runs, vma->start);

	for (; i < pages->nr_runs && pages->runs[i].vaddr < vma->end; i++)
		if (!remote || pages->runs[i].remote)
			return true;
	return false;
}

/*
 * Private memory the restorer would map plainly and fill from the images, anonymous or of
 * a regular file (memfds and devices are opened otherwise): not hugetlb (its private pages are reserved for the task that mapped them: a child's copy
 * has none), not a stack growing down, not SysV, AIO or special memory, not a device a
 * plugin restores; with stored pages, none left on a dump's source, none left to the
 * lazy-pages daemon (a page still to come must not be copied into a child first).
 */
static bool vma_shareable(const struct task_image *ti, const struct vma_image *vma)
{
	if (!vma_image_mapped(vma) || !(vma->status & (VMA_ANON_PRIVATE | VMA_FILE_PRIVATE)))
		return false;
	if (vma->status & (VMA_AREA_STACK | VMA_AREA_SYSVIPC | VMA_AREA_AIORING | VMA_AREA_SOCKET |
			   VMA_AREA_SHSTK | VMA_AREA_UPROBES | VMA_AREA_MEMFD | VMA_EXT_PLUGIN |
			   VMA_UNSUPP))
		return false;
	if (vma->flags & (MAP_HUGETLB | MAP_GROWSDOWN))
		return false;
	if (!vma_has_runs(&ti->pages, vma, false) || vma_has_runs(&ti->pages, vma, true))
		return false;
	return !(opts.lazy_pages && vma_is_lazy(vma));
}

/* A child never shares what its parent kept from it (DONTFORK) or got zeroes of (WIPEONFORK). */
static bool vma_inheritable(const struct task_image *ti, const struct vma_image *vma)
{
	return vma_shareable(ti, vma) && !(vma->madv & (VMA_MADV_DONTFORK | VMA_MADV_WIPEONFORK));
}

/*
 * The same mapping: same range, flags and accounting, the same file at the same offset,
 * the same huge page advice (set before the fork, the child inherits it, and madvise()
 * cannot take both back).
 */
static bool same_kind(const struct vma_image *a, const struct vma_image *b)
{
	uint32_t kind = VMA_ANON_PRIVATE | VMA_FILE_PRIVATE | VMA_AREA_NOT_ACCOUNTABLE;
	uint64_t huge = VMA_MADV_HUGEPAGE | VMA_MADV_NOHUGEPAGE;

	if (a->start != b->start || a->end != b->end || a->flags != b->flags ||
	    (a->status & kind) != (b->status & kind) || (a->madv & huge) != (b->madv & huge))
		return false;
	return !(a->status & VMA_FILE_PRIVATE) ||
	       (a->shmid == b->shmid && a->pgoff == b->pgoff && a->fdflags == b->fdflags);
}

/*
 * The parent's VMA of the same range a child's VMA inherits, or NO_VMA. The images list
 * VMAs by address, as /proc/PID/maps does (a list out of order only finds fewer matches).
 */
static int find_parent_vma(const struct task_image *parent, const struct vma_image *vma)
{
	unsigned int lo = 0, hi = parent->nr_vmas, mid;
	const struct vma_image *pv;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (parent->vmas[mid].start < vma->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == parent->nr_vmas)
		return NO_VMA;
	pv = &parent->vmas[lo];
	if (!vma_image_mapped(pv) || pv->start != vma->start || !same_kind(pv, vma))
		return NO_VMA;
	return vma_inheritable(parent, pv) ? (int)lo : NO_VMA;
}

static void match_task(struct cow_task *t)
{
	const struct task_image *ti = t->ti;
	unsigned int i;
	int pv;

	for (i = 0; i < ti->nr_vmas; i++) {
		t->vmas[i].parent_vma = NO_VMA;
		if (!t->parent || !vma_shareable(ti, &ti->vmas[i]))
			continue;
		/* The parent opens the file in its mount namespace: the child's must be the same. */
		if ((ti->vmas[i].status & VMA_FILE_PRIVATE) &&
		    ti->item->ids.mnt_ns_id != t->parent->ti->item->ids.mnt_ns_id)
			continue;
		pv = find_parent_vma(t->parent->ti, &ti->vmas[i]);
		t->vmas[i].parent_vma = pv;
		if (pv != NO_VMA)
			t->parent->vmas[pv].child_match = true;
	}
}

/*
 * Parents first (pstree order): an inherited VMA waits where its parent's does, a fresh
 * one in the task's own slice of the arena, after those of the tasks before it. One that
 * can hold a huge page waits at its address modulo MEM_COW_HUGE_ALIGN (the arena starts
 * aligned): a huge page it is filled with stays one where it moves.
 */
static void place_vmas(void)
{
	unsigned int i, v;

	arena_len = 0;
	for (i = 0; i < nr_cow_tasks; i++) {
		struct cow_task *t = &cow_tasks[i];

		for (v = 0; v < t->ti->nr_vmas; v++) {
			struct cow_vma *cv = &t->vmas[v];
			const struct vma_image *vma = &t->ti->vmas[v];

			if (cv->parent_vma != NO_VMA) {
				cv->off = t->parent->vmas[cv->parent_vma].off;
			} else if (cv->child_match) {
				if (vma->end - vma->start >= MEM_COW_HUGE_ALIGN)
					arena_len += (vma->start - arena_len) & (MEM_COW_HUGE_ALIGN - 1);
				cv->off = arena_len;
				arena_len += vma->end - vma->start;
			}
		}
	}
}

static struct cow_task *cow_task_of(const struct task_image *ti)
{
	unsigned int i;

	for (i = 0; i < nr_cow_tasks; i++)
		if (cow_tasks[i].ti == ti)
			return &cow_tasks[i];
	return NULL;
}

int mem_cow_plan(bool (*forked_by_parent)(const struct pstree_item *item))
{
	struct pstree_item *item;
	unsigned int i = 0;

	for (item = root_item; item; item = pstree_next(item))
		nr_cow_tasks++;
	cow_tasks = calloc(nr_cow_tasks, sizeof(*cow_tasks));
	if (!cow_tasks)
		goto nomem;
	for (item = root_item; item; item = pstree_next(item), i++) {
		struct cow_task *t = &cow_tasks[i];

		t->ti = item->image;
		t->vmas = calloc(t->ti->nr_vmas ? t->ti->nr_vmas : 1, sizeof(*t->vmas));
		if (!t->vmas)
			goto nomem;
		/* Parents come first: the parent's entry is already there. */
		if (item->parent && forked_by_parent(item))
			t->parent = cow_task_of(item->parent->image);
		match_task(t);
	}
	place_vmas();
	if (arena_len)
		pr_info("copy-on-write: %llu bytes of private memory premapped before forking\n",
			(unsigned long long)arena_len);
	return 0;
nomem:
	pr_err("out of memory planning the copy-on-write memory of %u tasks\n", nr_cow_tasks);
	mem_cow_fini();
	return -ENOMEM;
}

uint64_t mem_cow_arena_len(void)
{
	return arena_len;
}

void mem_cow_set_arena(uint64_t start)
{
	arena_start = start;
}

uint64_t mem_cow_arena_start(void)
{
	return arena_start;
}

uint64_t mem_cow_premapped_at(const struct task_image *ti, unsigned int vma_idx)
{
	const struct cow_task *t = arena_start ? cow_task_of(ti) : NULL;

	if (!t || !vma_premapped(&t->vmas[vma_idx]))
		return 0;
	return arena_start + t->vmas[vma_idx].off;
}

void mem_cow_fini(void)
{
	unsigned int i;

	if (arena_start)
		munmap((void *)(uintptr_t)arena_start, arena_len);
	for (i = 0; i < nr_cow_tasks && cow_tasks; i++)
		free(cow_tasks[i].vmas);
	free(cow_tasks);
	cow_tasks = NULL;
	nr_cow_tasks = 0;
	arena_start = arena_len = 0;
}

/* ---- in the task ---- */

/* The pages image of each chain level the task's runs use, opened on first use. */
struct cow_reader {
	const struct page_map *pages;
	struct cr_img *imgs[IMG_CHAIN_MAX];
	char *buf; /* COW_CHUNK bytes */
};

static int level_fd(struct cow_reader *r, unsigned int level)
{
	int dir_fd;

	if (r->imgs[level])
		return r->imgs[level]->fd;
	dir_fd = images_chain_dir(level);
	if (dir_fd < 0)
		return dir_fd;
	r->imgs[level] = open_image_at(dir_fd, CR_IMG_PAGES, O_RDONLY, r->pages->level_pages_id[level]);
	close(dir_fd);
	return r->imgs[level] ? r->imgs[level]->fd : -EIO;
}

/* len bytes of a run's data, starting at vaddr, into dst. */
static int read_run(struct cow_reader *r, const struct page_run *run, uint64_t vaddr, uint64_t len,
		    char *dst)
{
	off_t off = run->file_off + (vaddr - run->vaddr);
	int fd = level_fd(r, run->level);
	ssize_t n;

	if (fd < 0)
		return fd;
	while (len) {
		n = pread(fd, dst, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n ? errno : EIO;

			pr_err("cannot read the pages at %#llx (level %u, offset %#llx): %s\n",
			       (unsigned long long)vaddr, run->level, (unsigned long long)off,
			       n ? strerror(err) : "end of the pages image");
			return -err;
		}
		dst += n, off += n, len -= n, vaddr += n;
	}
	return 0;
}

/* Only the pages that differ are written: an equal page stays the parent's. */
static int write_differing(struct cow_reader *r, const struct page_run *run, uint64_t vaddr,
			   uint64_t len, char *dst)
{
	uint64_t done, piece, p;
	int ret;

	for (done = 0; done < len; done += piece) {
		piece = len - done < COW_CHUNK ? len - done : COW_CHUNK;
		ret = read_run(r, run, vaddr + done, piece, r->buf);
		if (ret)
			return ret;
		for (p = 0; p < piece; p += PAGE_SIZE)
			if (memcmp(dst + done + p, r->buf + p, PAGE_SIZE))
				memcpy(dst + done + p, r->buf + p, PAGE_SIZE);
	}
	return 0;
}

/*
 * Pages the task did not have at dump read as in a fresh mapping: zeroes, or the file's
 * own pages for a private file mapping.
 */
static int drop_absent(const struct vma_image *vma, char *at, uint64_t from, uint64_t to)
{
	if (from >= to)
		return 0;
	if (madvise(at + (from - vma->start), to - from, MADV_DONTNEED)) {
		pr_perror("madvise(MADV_DONTNEED) %#llx-%#llx", (unsigned long long)from,
			  (unsigned long long)to);
		return -errno;
	}
	return 0;
}

/*
 * The task's runs of the VMA into its premapped copy at: written over what it inherited
 * (inherited), or read into a fresh mapping.
 */
static int fill_vma(struct cow_reader *r, const struct vma_image *vma, char *at, bool inherited)
{
	const struct page_map *pages = r->pages;
	unsigned int i = page_run_after(pages->runs, pages->nr_runs, vma->start);
	uint64_t pos = vma->start, from, to;
	int ret = 0;

	for (; !ret && i < pages->nr_runs && pages->runs[i].vaddr < vma->end; i++) {
		const struct page_run *run = &pages->runs[i];

		from = run->vaddr > vma->start ? run->vaddr : vma->start;
		to = run->vaddr + run->len < vma->end ? run->vaddr + run->len : vma->end;
		if (inherited) {
			ret = drop_absent(vma, at, pos, from);
			if (!ret)
				ret = write_differing(r, run, from, to - from, at + (from - vma->start));
		} else {
			ret = read_run(r, run, from, to - from, at + (from - vma->start));
		}
		pos = to;
	}
	if (!ret && inherited)
		ret = drop_absent(vma, at, pos, vma->end);
	return ret;
}

/*
 * Its huge page advice before its pages come in, as the blob gives it before reading
 * them: with THP in "madvise" mode the pages are huge only if the advice came first.
 */
static int advise_huge(const struct vma_image *vma, uint64_t at)
{
	int advice = vma->madv & VMA_MADV_HUGEPAGE ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;

	if (!(vma->madv & (VMA_MADV_HUGEPAGE | VMA_MADV_NOHUGEPAGE)))
		return 0;
	if (madvise((void *)(uintptr_t)at, vma->end - vma->start, advice)) {
		pr_perror("madvise(%d) of the premapped vma %#llx-%#llx", advice,
			  (unsigned long long)vma->start, (unsigned long long)vma->end);
		return -errno;
	}
	return 0;
}

/* A private file mapping maps its file (the pages it did not COW read from it). */
static int map_fresh(const struct vma_image *vma, uint64_t at)
{
	bool file = vma->status & VMA_FILE_PRIVATE;
	int fd = file ? open_vma_file(vma->shmid, vma->fdflags) : -1;
	void *addr;
	int err;

	if (file && fd < 0) {
		pr_err("vma %#llx-%#llx: cannot open its file %llu: %s\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end,
		       (unsigned long long)vma->shmid, strerror(-fd));
		return fd;
	}
	addr = mmap((void *)(uintptr_t)at, vma->end - vma->start, PROT_READ | PROT_WRITE,
		    (vma->flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd, file ? vma->pgoff : 0);
	err = errno;
	if (fd >= 0)
		close(fd);
	if (addr == MAP_FAILED) {
		errno = err;
		pr_perror("cannot premap vma %#llx-%#llx at %#llx", (unsigned long long)vma->start,
			  (unsigned long long)vma->end, (unsigned long long)at);
		return -err;
	}
	return advise_huge(vma, at);
}

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *ra = a, *rb = b;

	return ra[0] < rb[0] ? -1 : ra[0] > rb[0];
}

/* The arena reserved again (PROT_NONE) from start to end: what was there is dropped. */
static int reserve_again(uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	if (mmap((void *)(uintptr_t)start, end - start, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
		pr_perror("cannot reserve the copy-on-write arena at %#llx-%#llx",
			  (unsigned long long)start, (unsigned long long)end);
		return -errno;
	}
	return 0;
}

/*
 * The arena as the task found it holds its forker's premapped VMAs: all but those the task
 * inherits go, so that its children do not inherit them too.
 */
static int drop_unmatched(const struct cow_task *t)
{
	uint64_t (*keep)[2] = calloc(t->ti->nr_vmas + 1, sizeof(*keep));
	uint64_t pos = arena_start;
	unsigned int i, nr = 0;
	int ret = 0;

	if (!keep) {
		pr_err("out of memory for %u ranges\n", t->ti->nr_vmas);
		return -ENOMEM;
	}
	for (i = 0; i < t->ti->nr_vmas; i++)
		if (t->vmas[i].parent_vma != NO_VMA) {
			keep[nr][0] = arena_start + t->vmas[i].off;
			keep[nr++][1] = t->ti->vmas[i].end - t->ti->vmas[i].start;
		}
	qsort(keep, nr, sizeof(*keep), cmp_range);
	for (i = 0; i < nr && !ret; i++) {
		ret = reserve_again(pos, keep[i][0]);
		pos = keep[i][0] + keep[i][1];
	}
	if (!ret)
		ret = reserve_again(pos, arena_start + arena_len);
	free(keep);
	return ret;
}

static int premap_vmas(const struct cow_task *t, struct cow_reader *r)
{
	const struct task_image *ti = t->ti;
	uint64_t at, inherited = 0, fresh = 0;
	unsigned int i;
	int ret = 0;

	for (i = 0; i < ti->nr_vmas && !ret; i++) {
		const struct vma_image *vma = &ti->vmas[i];
		bool from_parent = t->vmas[i].parent_vma != NO_VMA;

		if (!vma_premapped(&t->vmas[i]))
			continue;
		at = arena_start + t->vmas[i].off;
		ret = from_parent ? 0 : map_fresh(vma, at);
		if (!ret)
			ret = fill_vma(r, vma, (char *)(uintptr_t)at, from_parent);
		*(from_parent ? &inherited : &fresh) += vma->end - vma->start;
	}
	if (!ret && (inherited || fresh))
		pr_debug("premapped %llu bytes inherited, %llu fresh\n", (unsigned long long)inherited,
			 (unsigned long long)fresh);
	return ret;
}

int mem_cow_premap(const struct task_image *ti)
{
	const struct cow_task *t = arena_start ? cow_task_of(ti) : NULL;
	struct cow_reader r = { .pages = &ti->pages };
	unsigned int i;
	int ret;

	if (!t)
		return 0;
	ret = drop_unmatched(t);
	if (ret)
		return ret;
	r.buf = malloc(COW_CHUNK);
	if (!r.buf) {
		pr_err("out of memory for a page buffer\n");
		return -ENOMEM;
	}
	ret = premap_vmas(t, &r);
	for (i = 0; i < IMG_CHAIN_MAX; i++)
		if (r.imgs[i])
			close_image(r.imgs[i]);
	free(r.buf);
	return ret;
}

/* ---- what the restorer still reads ---- */

static int add_run(struct page_map *out, unsigned int *cap, const struct page_run *run, uint64_t from,
		   uint64_t to)
{
	struct page_run *runs;

	if (out->nr_runs == *cap) {
		runs = realloc(out->runs, (*cap * 2 + 16) * sizeof(*runs));
		if (!runs) {
			pr_err("out of memory for %u page runs\n", out->nr_runs);
			return -ENOMEM;
		}
		out->runs = runs;
		*cap = *cap * 2 + 16;
	}
	out->runs[out->nr_runs++] = (struct page_run){ from, to - from, run->file_off + (from - run->vaddr),
						       run->level, run->remote };
	out->total_bytes += to - from;
	return 0;
}

/* The first VMA of ti that ends after addr (the images list VMAs by address). */
static unsigned int vma_ending_after(const struct task_image *ti, uint64_t addr)
{
	unsigned int lo = 0, hi = ti->nr_vmas, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (ti->vmas[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Where the piece of [pos, end) starting at pos stops: at the end of the premapped VMA
 * holding pos (*premapped set), or where the next premapped one starts, or at end.
 */
static uint64_t piece_end(const struct cow_task *t, uint64_t pos, uint64_t end, bool *premapped)
{
	const struct task_image *ti = t->ti;
	unsigned int i;

	*premapped = false;
	for (i = vma_ending_after(ti, pos); i < ti->nr_vmas && ti->vmas[i].start < end; i++) {
		if (!vma_premapped(&t->vmas[i]))
			continue;
		if (ti->vmas[i].start > pos)
			return ti->vmas[i].start;
		*premapped = true;
		return ti->vmas[i].end < end ? ti->vmas[i].end : end;
	}
	return end;
}

int mem_cow_blob_pages(const struct task_image *ti, const struct page_map *pages,
		       struct page_map *out)
{
	const struct cow_task *t = arena_start ? cow_task_of(ti) : NULL;
	unsigned int i, cap = 0;
	uint64_t pos, end, stop;
	bool premapped = false;
	int ret = 0;

	*out = *pages;
	out->runs = NULL;
	out->nr_runs = 0;
	out->total_bytes = 0;
	for (i = 0; i < pages->nr_runs && !ret; i++) {
		const struct page_run *run = &pages->runs[i];

		end = run->vaddr + run->len;
		for (pos = run->vaddr; pos < end && !ret; pos = stop) {
			stop = t ? piece_end(t, pos, end, &premapped) : end;
			if (!premapped)
				ret = add_run(out, &cap, run, pos, stop);
		}
	}
	if (ret)
		page_map_free(out);
	return ret;
}
