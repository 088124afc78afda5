/*
 * The last libc-side step of a restore task: apply what libc can still set (personality,
 * rlimits), open what the blob maps, map the restorer region in a hole, fill its args
 * block (restorer-args.h) from the task's decoded images and jump into the blob
 * (criu/pie) on the region's own stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "file-lock.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "loginuid.h"
#include "mem-cow.h"
#include "memfd.h"
#include "namespaces.h"
#include "plugin.h"
#include "pstree.h"
#include "regs-x86.h"
#include "restorer-setup.h"
#include "servicefd.h"
#include "seccomp.h"
#include "shmem.h"
#include "sysv-shm.h"
#include "task-image.h"
#include "uffd.h"
#include "vma.h"

#define PAGE_SIZE 4096ul
#define ALIGN_UP(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))
/* Top of the 47-bit user address space: the blob unmaps everything up to here. */
#define RST_TASK_SIZE 0x7ffffffff000ull
/* The region goes above the first 1 MiB (mmap_min_addr and old-style low mappings). */
#define RST_REGION_LO (1ull << 20)
/* A reader thread pays off only for larger images; reads are split into this many bytes. */
#define RST_PARALLEL_MIN_BYTES (16ull << 20)
#define RST_READ_CHUNK (4ull << 20)
#define RST_IOV_MAX 1024
#define FP_XSTATE_MAGIC1 0x46505853u
#define FP_XSTATE_MAGIC2 0x46505845u
#define XSAVE_SW_BYTES_OFF 464 /* fpx_sw_bytes in the fxsave area's software-reserved part */

extern const char restorer_blob[], restorer_blob_end[];

/* Where each piece of the region lives, as offsets from its start. */
struct region_layout {
	uint64_t code_len; /* the blob, page aligned: made executable */
	uint64_t args, vmas, reads, iovs, shared_pending, timers;
	uint64_t groups, auxv, close_fds, file_locks, aio_rings, guards, seccomp;
	uint64_t anon_names; /* the VMAs' names, NUL-terminated, one after the other */
	uint64_t threads; /* struct rst_thread[] */
	uint64_t thread_data; /* where each thread's pieces start (take_thread_layout()) */
	uint64_t scratch[RST_NR_SPECIALS];
	uint64_t worker_stack_top[RST_MAX_WORKERS];
	uint64_t main_stack_top;
	uint64_t size;
};

/* Everything counted before the region is sized. */
struct rst_plan {
	const struct page_map *pages; /* the task's, from its image */
	int pages_fds[IMG_CHAIN_MAX]; /* per chain level its runs use (pages->nr_levels) */
	unsigned int nr_vmas, nr_reads, nr_iovs, nr_workers, nr_close_fds;
	size_t anon_names_len; /* bytes of all VMA names, NULs included */
	struct rst_range cur_special[RST_NR_SPECIALS];
	struct rst_range dumped_special[RST_NR_SPECIALS];
	int *close_fds; /* criu's fds the blob closes last */
	unsigned int nr_file_fds; /* the first of close_fds: mapped files and exe */
	const struct rst_file_lock *file_locks; /* the task's (file-lock.c) */
	unsigned int nr_file_locks;
	int *vma_fds; /* per image VMA, -1 for anonymous private memory */
	uint64_t *vma_pgoffs; /* per image VMA: the offset its fd is mapped at */
	int exe_fd;
	/* restore --lazy-pages: the runs the blob reads and those the daemon serves (uffd.h). */
	struct page_map eager, lazy;
	/* The runs outside the VMAs premapped before the fork (mem-cow.h): what the blob reads. */
	struct page_map unshared;
	int uffd, lazy_sock; /* -1: nothing lazy */
	struct region_layout layout;
};

static const char *const special_names[RST_NR_SPECIALS] = { "[vvar]", "[vvar_vclock]", "[vdso]" };

/* ---- page image ---- */

/* The pages image of one chain level, opened for the blob to read. */
static int open_level_pages(struct rst_plan *plan, unsigned int level)
{
	int dir_fd = images_chain_dir(level);
	struct cr_img *img;

	if (dir_fd < 0)
		return dir_fd;
	img = open_image_at(dir_fd, CR_IMG_PAGES, O_RDONLY, plan->pages->level_pages_id[level]);
	close(dir_fd);
	if (!img)
		return -EIO;
	plan->pages_fds[level] = fcntl(img->fd, F_DUPFD_CLOEXEC, 0);
	if (plan->pages_fds[level] < 0) {
		int err = errno;

		pr_perror("%s: cannot keep the page image open", img->name);
		close_image(img);
		return -err;
	}
	close_image(img);
	return 0;
}

/* pages-ID.img of the task's pagemap, and of each parent images directory its runs use. */
static int open_task_pages(struct rst_plan *plan)
{
	unsigned int level;
	int ret = 0;

	for (level = 0; level < plan->pages->nr_levels && !ret; level++)
		ret = open_level_pages(plan, level);
	if (!ret)
		pr_debug("%u page runs, %llu bytes to read from %u pages images\n",
			 plan->pages->nr_runs, (unsigned long long)plan->pages->total_bytes,
			 plan->pages->nr_levels);
	return ret;
}

/*
 * restore --lazy-pages: the blob reads only the eager runs; the task's lazy runs go to the
 * daemon now, its uffd once the blob has registered their VMAs.
 */
static int plan_lazy_pages(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	int ret;

	if (!ctx->lazy_pages)
		return lazy_refuse_remote(ctx->image);
	ret = lazy_split_pages(ctx->image, &plan->eager, &plan->lazy);
	if (ret)
		return ret;
	plan->pages = &plan->eager;
	if (!plan->lazy.nr_runs)
		return 0;
	return lazy_pages_connect_task(ctx->pid, &plan->lazy, &plan->uffd, &plan->lazy_sock);
}

/* The VMAs premapped before the fork (mem-cow.h) are filled already: the blob skips their runs. */
static int plan_premapped_pages(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	int ret = mem_cow_blob_pages(ctx->image, plan->pages, &plan->unshared);

	if (!ret)
		plan->pages = &plan->unshared;
	return ret;
}

/* ---- task state libc can still apply ---- */

static int restore_rlimit(int resource, const struct rlimit_image *rl)
{
	struct rlimit want = { rl->cur, rl->max }, now;

	if (!prlimit(0, resource, &want, NULL))
		return 0;
	/* Without CAP_SYS_RESOURCE a hard limit cannot be raised: fine if it already matches. */
	if (!prlimit(0, resource, NULL, &now) && now.rlim_cur == want.rlim_cur &&
	    now.rlim_max == want.rlim_max)
		return 0;
	pr_perror("cannot restore rlimit %d to cur %llu max %llu", resource,
		  (unsigned long long)rl->cur, (unsigned long long)rl->max);
	return -errno;
}

/* umask is restore_task_fs()'s (fs-PID.img). */
static int apply_libc_state(const struct task_image *ti)
{
	unsigned int i;
	int ret;

	if (personality(ti->personality) < 0) {
		pr_perror("cannot set personality %#x", ti->personality);
		return -errno;
	}
	for (i = 0; i < ti->nr_rlimits; i++) {
		ret = restore_rlimit(i, &ti->rlimits[i]);
		if (ret)
			return ret;
	}
	return loginuid_restore(ti);
}

/* ---- the address space: specials, VMAs, hole ---- */

static int special_index(const char *path)
{
	int i;

	for (i = 0; i < RST_NR_SPECIALS; i++)
		if (!strcmp(path, special_names[i]))
			return i;
	return -1;
}

/* A growable list of address ranges. */
struct range_vec {
	struct rst_range *ranges;
	unsigned int nr, cap;
};

static int range_push(struct range_vec *vec, uint64_t start, uint64_t end)
{
	struct rst_range *grown;

	if (vec->nr == vec->cap) {
		grown = realloc(vec->ranges, (vec->cap * 2 + 64) * sizeof(*grown));
		if (!grown) {
			pr_err("out of memory for %u address ranges\n", vec->nr);
			return -ENOMEM;
		}
		vec->ranges = grown;
		vec->cap = vec->cap * 2 + 64;
	}
	vec->ranges[vec->nr++] = (struct rst_range){ start, end };
	return 0;
}

/* Reads /proc/self/maps: every current mapping into busy, the specials into cur_special (or NULL). */
static int read_own_maps(struct rst_range *cur_special, struct range_vec *busy)
{
	unsigned long long start, end;
	char *line = NULL, path[64];
	size_t line_size = 0;
	int idx, ret = 0;
	FILE *maps;

	maps = proc_fopen("self/maps", "re");
	if (!maps) {
		pr_perror("cannot open /proc/self/maps");
		return -errno;
	}
	while (!ret && getline(&line, &line_size, maps) > 0) {
		path[0] = '\0';
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %63s", &start, &end, path) < 2)
			continue;
		if (start >= RST_TASK_SIZE)
			continue; /* [vsyscall]: the kernel's, outside the user range */
		idx = special_index(path);
		if (idx >= 0 && cur_special)
			cur_special[idx] = (struct rst_range){ start, end };
		ret = range_push(busy, start, end);
	}
	free(line);
	fclose(maps);
	return ret;
}

static uint64_t range_len(const struct rst_range *r)
{
	return r->end - r->start;
}

static const struct vma_image *find_special_vma(const struct task_image *ti, uint32_t status)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++)
		if ((ti->vmas[i].status & VMA_AREA_REGULAR) && (ti->vmas[i].status & status))
			return &ti->vmas[i];
	return NULL;
}

/*
 * Where the specials go. The image has [vdso] and one VMA_AREA_VVAR entry covering [vvar]
 * and, on 6.13+ kernels, [vvar_vclock] right after it: split at this kernel's sizes. The
 * blob moves them with mremap, which cannot change their size: the sizes must match.
 */
static int plan_specials(struct rst_plan *plan, const struct task_image *ti)
{
	const struct vma_image *vdso = find_special_vma(ti, VMA_AREA_VDSO);
	const struct vma_image *vvar = find_special_vma(ti, VMA_AREA_VVAR);
	struct rst_range *cur = plan->cur_special, *dumped = plan->dumped_special;
	uint64_t cur_vvar_len = range_len(&cur[RST_SPECIAL_VVAR]) +
				range_len(&cur[RST_SPECIAL_VVAR_VCLOCK]);
	uint64_t dumped_vvar_len = vvar ? vvar->end - vvar->start : 0;
	uint64_t dumped_vdso_len = vdso ? vdso->end - vdso->start : 0;

	/* The task had unmapped them all: the blob unmaps ours with the rest (unmap_old()). */
	if (!vdso && !vvar) {
		memset(cur, 0, RST_NR_SPECIALS * sizeof(*cur));
		pr_info("no [vdso] or [vvar] in the images: the task gets none\n");
		return 0;
	}
	if (cur_vvar_len != dumped_vvar_len || range_len(&cur[RST_SPECIAL_VDSO]) != dumped_vdso_len) {
		pr_err("[vvar]+[vvar_vclock] and [vdso] are %llu and %llu bytes on this kernel but %llu and %llu in the images: restore on the kernel that dumped the task\n",
		       (unsigned long long)cur_vvar_len,
		       (unsigned long long)range_len(&cur[RST_SPECIAL_VDSO]),
		       (unsigned long long)dumped_vvar_len, (unsigned long long)dumped_vdso_len);
		return -EINVAL;
	}
	if (vdso)
		dumped[RST_SPECIAL_VDSO] = (struct rst_range){ vdso->start, vdso->end };
	if (vvar) {
		uint64_t split = vvar->start + range_len(&cur[RST_SPECIAL_VVAR]);

		dumped[RST_SPECIAL_VVAR] = (struct rst_range){ vvar->start, split };
		dumped[RST_SPECIAL_VVAR_VCLOCK] = (struct rst_range){ split, vvar->end };
	}
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct rst_range *ra = a, *rb = b;

	return ra->start < rb->start ? -1 : ra->start > rb->start;
}

int rst_find_hole(struct rst_range *busy, unsigned int nr, uint64_t len, uint64_t lo, uint64_t hi,
		  uint64_t *start)
{
	uint64_t cand = ALIGN_UP(lo, PAGE_SIZE);
	unsigned int i;

	qsort(busy, nr, sizeof(*busy), cmp_range);
	for (i = 0; i < nr && cand + len <= hi; i++) {
		if (busy[i].end <= cand)
			continue;
		if (busy[i].start >= cand + len)
			break;
		cand = ALIGN_UP(busy[i].end, PAGE_SIZE);
	}
	if (cand + len > hi || cand + len < cand)
		return -ENOMEM;
	*start = cand;
	return 0;
}

/* ---- the copy-on-write arena ---- */

/* Every dumped VMA of every task of the tree (the specials' dumped places too) into busy. */
static int push_tree_vmas(struct range_vec *busy)
{
	struct pstree_item *item;
	unsigned int i;
	int ret = 0;

	for (item = root_item; item && !ret; item = pstree_next(item))
		for (i = 0; i < item->image->nr_vmas && !ret; i++)
			ret = range_push(busy, item->image->vmas[i].start, item->image->vmas[i].end);
	return ret;
}

int rst_reserve_cow_arena(void)
{
	uint64_t len = mem_cow_arena_len(), start = 0;
	struct range_vec busy = { 0 };
	void *addr;
	int ret;

	if (!len)
		return 0;
	ret = push_tree_vmas(&busy);
	if (!ret)
		ret = read_own_maps(NULL, &busy);
	if (ret) {
		free(busy.ranges);
		return ret;
	}
	/* Room to align its start: its VMAs wait at their addresses modulo the alignment. */
	ret = rst_find_hole(busy.ranges, busy.nr, len + MEM_COW_HUGE_ALIGN, RST_REGION_LO,
			    RST_TASK_SIZE, &start);
	start = ALIGN_UP(start, MEM_COW_HUGE_ALIGN);
	free(busy.ranges);
	if (ret) {
		pr_warn("no hole of %llu bytes out of every task's way: private memory shared across fork is restored unshared\n",
			(unsigned long long)len);
		return 0;
	}
	addr = mmap((void *)(uintptr_t)start, len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (addr != (void *)(uintptr_t)start) {
		pr_perror("cannot reserve the copy-on-write arena at %#llx (%llu bytes)",
			  (unsigned long long)start, (unsigned long long)len);
		if (addr != MAP_FAILED)
			munmap(addr, len);
		return -ENOMEM;
	}
	pr_debug("copy-on-write arena %#llx-%#llx\n", (unsigned long long)start,
		 (unsigned long long)(start + len));
	mem_cow_set_arena(start);
	return 0;
}

/* ---- splitting the page runs into reads ---- */

/*
 * Runs that follow each other in the file share one preadv (up to RST_READ_CHUNK);
 * big runs are cut into chunks so reader threads can share them. With reads/iovs
 * NULL only counts.
 */
static void build_page_reads(const struct page_map *pages, const int *fds,
			     struct rst_page_read *reads, struct rst_iovec *iovs,
			     unsigned int *nr_reads, unsigned int *nr_iovs)
{
	struct rst_page_read cur = { 0 };
	unsigned int i, reads_done = 0, iovs_done = 0;
	uint64_t pos, piece, file_off;
	bool have = false;

	for (i = 0; i < pages->nr_runs; i++) {
		const struct page_run *run = &pages->runs[i];

		for (pos = 0; pos < run->len; pos += piece) {
			file_off = run->file_off + pos;
			if (have && cur.file_off + cur.bytes == file_off && cur.nr_iov < RST_IOV_MAX &&
			    cur.bytes < RST_READ_CHUNK && cur.level == run->level) {
				piece = run->len - pos;
				if (piece > RST_READ_CHUNK - cur.bytes)
					piece = RST_READ_CHUNK - cur.bytes;
			} else {
				if (have && reads)
					reads[reads_done] = cur;
				reads_done += have;
				piece = run->len - pos;
				if (piece > RST_READ_CHUNK)
					piece = RST_READ_CHUNK;
				cur = (struct rst_page_read){ file_off, 0, iovs_done, 0, fds[run->level],
							      run->level };
				have = true;
			}
			if (iovs)
				iovs[iovs_done] = (struct rst_iovec){ run->vaddr + pos, piece };
			iovs_done++;
			cur.nr_iov++;
			cur.bytes += piece;
		}
	}
	if (have && reads)
		reads[reads_done] = cur;
	*nr_reads = reads_done + have;
	*nr_iovs = iovs_done;
}

/* ---- fds for the blob ---- */

static void add_close_fd(struct rst_plan *plan, int fd)
{
	unsigned int i;

	if (fd < 0)
		return;
	for (i = 0; i < plan->nr_close_fds; i++)
		if (plan->close_fds[i] == fd)
			return;
	plan->close_fds[plan->nr_close_fds++] = fd;
}

/* A VMA's file, opened once per (file id, flags) however many VMAs map it. */
static int vma_file_fd(struct rst_plan *plan, const struct task_image *ti, unsigned int idx)
{
	const struct vma_image *vma = &ti->vmas[idx];
	unsigned int i;
	int fd;

	for (i = 0; i < idx; i++) {
		const struct vma_image *other = &ti->vmas[i];

		if (plan->vma_fds[i] >= 0 && (other->status & (VMA_FILE_PRIVATE | VMA_FILE_SHARED)) &&
		    !(other->status & VMA_EXT_PLUGIN) && other->shmid == vma->shmid &&
		    other->fdflags == vma->fdflags)
			return plan->vma_fds[i];
	}
	if (vma->status & VMA_AREA_MEMFD)
		fd = memfd_open_mapped(vma->shmid, vma->fdflags);
	else
		fd = open_vma_file(vma->shmid, vma->fdflags);
	if (fd < 0)
		pr_err("vma %#llx-%#llx: cannot open its file %llu: %s\n", (unsigned long long)vma->start,
		       (unsigned long long)vma->end, (unsigned long long)vma->shmid, strerror(-fd));
	return fd;
}

/* The device's name as files.img holds it: what UPDATE_VMA_MAP gets to find the object. */
static const char *device_path(const struct vma_image *vma)
{
	const FileEntry *fe = find_file_entry(vma->shmid);

	if (!fe || fe->type != FD_TYPES__REG || !fe->reg) {
		pr_err("vma %#llx-%#llx: device file %llu is not a regular file entry of files.img\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end,
		       (unsigned long long)vma->shmid);
		return NULL;
	}
	return fe->reg->name;
}

/* The dumped path itself, when UPDATE_VMA_MAP's plugin says it is still valid (returns 0). */
static int open_device_path(const struct vma_image *vma, const char *path)
{
	int fd = open(path, vma->fdflags | O_CLOEXEC);

	if (fd < 0) {
		fd = -errno;
		pr_perror("vma %#llx-%#llx: cannot open %s, which its plugin left to criu",
			  (unsigned long long)vma->start, (unsigned long long)vma->end, path);
	}
	return fd;
}

/*
 * A VMA a plugin took at dump (VMA_EXT_PLUGIN): UPDATE_VMA_MAP, here in the task before
 * its memory is rebuilt, returns 1 with the re-created object's fd and the offset into it
 * (bytes, like vma_entry.pgoff), which goes to the blob in *pgoff.
 */
static int device_vma_fd(const struct vma_image *vma, uint64_t *pgoff)
{
	const char *path = device_path(vma);
	uint64_t new_pgoff = vma->pgoff;
	int plugin_fd = -1, ret;

	if (!path)
		return -EINVAL;
	ret = run_plugins(UPDATE_VMA_MAP, path, vma->start, vma->pgoff, &new_pgoff, &plugin_fd);
	if (ret == -ENOTSUP)
		pr_err("vma %#llx-%#llx maps %s, which a plugin took at dump: no loaded plugin restores it\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end, path);
	if (ret < 0)
		return ret; /* other errors: run_plugins() named the plugin */
	if (ret == 0)
		return open_device_path(vma, path);
	if (plugin_fd < 0 || new_pgoff % PAGE_SIZE) {
		pr_err("vma %#llx-%#llx (%s): UPDATE_VMA_MAP gave fd %d at offset %#llx: not a mappable fd at a page boundary\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end, path, plugin_fd,
		       (unsigned long long)new_pgoff);
		if (plugin_fd >= 0)
			close(plugin_fd);
		return -EINVAL;
	}
	pr_debug("vma %#llx-%#llx (%s): plugin fd %d at offset %#llx (dumped at %#llx)\n",
		 (unsigned long long)vma->start, (unsigned long long)vma->end, path, plugin_fd,
		 (unsigned long long)new_pgoff, (unsigned long long)vma->pgoff);
	*pgoff = new_pgoff;
	return plugin_fd;
}

/* Shared anonymous memory: the object criu re-created, one fd for all VMAs of one shmid. */
static int shmem_vma_fd(struct rst_plan *plan, const struct task_image *ti, unsigned int idx)
{
	unsigned int i;

	for (i = 0; i < idx; i++)
		if (plan->vma_fds[i] >= 0 && (ti->vmas[i].status & VMA_ANON_SHARED) &&
		    ti->vmas[i].shmid == ti->vmas[idx].shmid)
			return plan->vma_fds[i];
	return shmem_open(ti->vmas[idx].shmid);
}

static bool vma_needs_fd(const struct vma_image *vma)
{
	return vma_image_mapped(vma) && !(vma->status & VMA_ANON_PRIVATE) && !vma_is_sysv_shm(vma);
}

/* One fd per mapped object; device VMAs may also get another offset (plan->vma_pgoffs). */
static int open_vma_fds(struct rst_plan *plan, const struct task_image *ti)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++) {
		const struct vma_image *vma = &ti->vmas[i];

		plan->vma_fds[i] = -1;
		plan->vma_pgoffs[i] = vma->pgoff;
		if (!vma_needs_fd(vma))
			continue;
		if (vma->status & VMA_EXT_PLUGIN)
			plan->vma_fds[i] = device_vma_fd(vma, &plan->vma_pgoffs[i]);
		else if (vma->status & VMA_AREA_SOCKET)
			plan->vma_fds[i] = files_dup_task_fd(ti->item->pid, vma->shmid);
		else if (vma->status & VMA_ANON_SHARED)
			plan->vma_fds[i] = shmem_vma_fd(plan, ti, i);
		else
			plan->vma_fds[i] = vma_file_fd(plan, ti, i);
		if (plan->vma_fds[i] < 0)
			return plan->vma_fds[i];
		add_close_fd(plan, plan->vma_fds[i]);
	}
	return 0;
}

static int open_task_fds(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	const struct task_image *ti = ctx->image;
	unsigned int i;
	int ret, type;

	/* vma fds + exe + pages (one per chain level) + sync + log + service fds */
	plan->close_fds = calloc(ti->nr_vmas + 4 + SERVICE_FD_MAX + IMG_CHAIN_MAX, sizeof(int));
	plan->vma_fds = calloc(ti->nr_vmas ? ti->nr_vmas : 1, sizeof(int));
	plan->vma_pgoffs = calloc(ti->nr_vmas ? ti->nr_vmas : 1, sizeof(uint64_t));
	if (!plan->close_fds || !plan->vma_fds || !plan->vma_pgoffs) {
		pr_err("out of memory for %u vma fds\n", ti->nr_vmas);
		return -ENOMEM;
	}
	ret = open_vma_fds(plan, ti);
	if (ret)
		return ret;
	plan->exe_fd = open_vma_file(ti->exe_file_id, O_RDONLY);
	if (plan->exe_fd < 0) {
		pr_err("cannot open the exe file %u: %s\n", ti->exe_file_id, strerror(-plan->exe_fd));
		return plan->exe_fd;
	}
	add_close_fd(plan, plan->exe_fd);
	plan->nr_file_fds = plan->nr_close_fds;
	for (i = 0; i < plan->pages->nr_levels; i++)
		add_close_fd(plan, plan->pages_fds[i]);
	add_close_fd(plan, ctx->sync_fd);
	add_close_fd(plan, ctx->log_fd);
	for (type = 0; type < SERVICE_FD_MAX; type++)
		add_close_fd(plan, get_service_fd(type));
	return 0;
}

/* ---- the region ---- */

static uint64_t region_take(uint64_t *pos, uint64_t len, uint64_t align)
{
	uint64_t off = ALIGN_UP(*pos, align);

	*pos = off + len;
	return off;
}

/* Where one thread's pieces go: one walk sizes the region, the same walk fills it. */
struct thread_layout {
	uint64_t pending, xsave, stack_top;
};

static void take_thread_layout(uint64_t *pos, const struct thread_image *th, bool main_thread,
			       struct thread_layout *tl)
{
	tl->pending = region_take(pos, th->nr_pending * sizeof(struct rst_siginfo), 64);
	/* XRSTOR from the signal frame needs 64-byte alignment; magic2 follows the buffer. */
	tl->xsave = region_take(pos, th->xsave_len + sizeof(uint32_t), 64);
	/* The main thread runs on the region's main stack. */
	tl->stack_top = 0;
	if (!main_thread)
		tl->stack_top = region_take(pos, RST_THREAD_STACK_SIZE, PAGE_SIZE) +
				RST_THREAD_STACK_SIZE;
}

static void plan_layout(struct rst_plan *plan, const struct task_image *ti)
{
	struct region_layout *l = &plan->layout;
	struct thread_layout tl;
	uint64_t pos = restorer_blob_end - restorer_blob;
	unsigned int i;

	l->code_len = ALIGN_UP(pos, PAGE_SIZE);
	pos = l->code_len;
	l->args = region_take(&pos, sizeof(struct rst_args), 64);
	l->vmas = region_take(&pos, plan->nr_vmas * sizeof(struct rst_vma), 64);
	l->anon_names = region_take(&pos, plan->anon_names_len, 1);
	l->reads = region_take(&pos, plan->nr_reads * sizeof(struct rst_page_read), 64);
	l->iovs = region_take(&pos, plan->nr_iovs * sizeof(struct rst_iovec), 64);
	l->shared_pending = region_take(&pos, ti->nr_shared_pending * sizeof(struct rst_siginfo), 64);
	l->timers = region_take(&pos, ti->nr_posix_timers * sizeof(struct rst_posix_timer), 64);
	l->groups = region_take(&pos, ti->creds.nr_groups * sizeof(uint32_t), 64);
	l->auxv = region_take(&pos, ti->nr_auxv * sizeof(uint64_t), 64);
	l->close_fds = region_take(&pos, plan->nr_close_fds * sizeof(int32_t), 64);
	l->seccomp = region_take(&pos, seccomp_region_size(ti), 64);
	l->file_locks = region_take(&pos, plan->nr_file_locks * sizeof(struct rst_file_lock), 64);
	l->aio_rings = region_take(&pos, ti->nr_aio_rings * sizeof(struct rst_aio_ring), 64);
	l->guards = region_take(&pos, ti->nr_guards * sizeof(struct rst_guard), 64);
	l->threads = region_take(&pos, ti->nr_threads * sizeof(struct rst_thread), 64);
	l->thread_data = pos;
	for (i = 0; i < ti->nr_threads; i++)
		take_thread_layout(&pos, &ti->threads[i], i == 0, &tl);
	for (i = 0; i < RST_NR_SPECIALS; i++)
		l->scratch[i] = region_take(&pos, range_len(&plan->cur_special[i]), PAGE_SIZE);
	for (i = 0; i < plan->nr_workers; i++)
		l->worker_stack_top[i] = region_take(&pos, RST_WORKER_STACK_SIZE, PAGE_SIZE) +
					 RST_WORKER_STACK_SIZE;
	l->main_stack_top = region_take(&pos, RST_MAIN_STACK_SIZE, PAGE_SIZE) + RST_MAIN_STACK_SIZE;
	l->size = ALIGN_UP(pos, PAGE_SIZE);
}

static unsigned int count_reader_threads(uint64_t total_bytes)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (total_bytes < RST_PARALLEL_MIN_BYTES || cpus <= 1)
		return 0;
	return cpus - 1 < RST_MAX_WORKERS ? cpus - 1 : RST_MAX_WORKERS;
}

/* Counts what goes into the region and sizes it. */
static void plan_region(struct rst_plan *plan, const struct task_image *ti)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++) {
		if (!vma_image_mapped(&ti->vmas[i]))
			continue;
		plan->nr_vmas++;
		if (ti->vmas[i].anon_name)
			plan->anon_names_len += strlen(ti->vmas[i].anon_name) + 1;
	}
	build_page_reads(plan->pages, plan->pages_fds, NULL, NULL, &plan->nr_reads, &plan->nr_iovs);
	plan->nr_workers = count_reader_threads(plan->pages->total_bytes);
	plan_layout(plan, ti);
}

/* Maps the region where neither the task's VMAs nor our own mappings are, blob inside. */
static int map_region(struct rst_plan *plan, const struct task_image *ti, uint64_t *region)
{
	struct range_vec busy = { 0 };
	uint64_t start = 0;
	unsigned int i;
	void *addr;
	int ret = 0;

	for (i = 0; i < ti->nr_vmas && !ret; i++)
		ret = range_push(&busy, ti->vmas[i].start, ti->vmas[i].end);
	if (!ret)
		ret = read_own_maps(plan->cur_special, &busy);
	if (!ret)
		ret = plan_specials(plan, ti);
	if (!ret) {
		plan_region(plan, ti);
		ret = rst_find_hole(busy.ranges, busy.nr, plan->layout.size, RST_REGION_LO, RST_TASK_SIZE,
				    &start);
		if (ret)
			pr_err("no hole of %llu bytes for the restorer in the address space\n",
			       (unsigned long long)plan->layout.size);
	}
	free(busy.ranges);
	if (ret)
		return ret;

	addr = mmap((void *)start, plan->layout.size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (addr != (void *)start) {
		pr_perror("cannot map the restorer region at %#llx (%llu bytes)", (unsigned long long)start,
			  (unsigned long long)plan->layout.size);
		if (addr != MAP_FAILED)
			munmap(addr, plan->layout.size);
		return -ENOMEM;
	}
	memcpy(addr, restorer_blob, restorer_blob_end - restorer_blob);
	if (mprotect(addr, plan->layout.code_len, PROT_READ | PROT_EXEC)) {
		pr_perror("cannot make the restorer code executable");
		return -errno;
	}
	pr_debug("restorer region %#llx-%#llx, %u reader threads\n", (unsigned long long)start,
		 (unsigned long long)(start + plan->layout.size), plan->nr_workers);
	*region = start;
	return 0;
}

/* ---- the args block ---- */

#define REGION_PTR(region, off) ((void *)(uintptr_t)((region) + (off)))

/* Whether any stored page falls into the VMA (runs are sorted by address). */
static bool vma_has_pages(const struct page_map *pages, const struct vma_image *vma)
{
	for (unsigned int i = 0; i < pages->nr_runs; i++) {
		const struct page_run *run = &pages->runs[i];

		if (run->vaddr >= vma->end)
			break;
		if (run->vaddr + run->len > vma->start)
			return true;
	}
	return false;
}

/*
 * What the blob needs of a VMA's status. VM_ACCOUNT: a private mapping the image does not
 * mark NOT_ACCOUNTABLE (images without the bit: every private one).
 */
static uint32_t rst_vma_status(const struct rst_plan *plan, const struct vma_image *vma)
{
	uint32_t status = 0;

	if ((vma->status & (VMA_ANON_PRIVATE | VMA_FILE_PRIVATE)) &&
	    !(vma->status & VMA_AREA_NOT_ACCOUNTABLE))
		status |= RST_VMA_ACCOUNT;
	if (vma->locked)
		status |= RST_VMA_LOCKED;
	if (vma_has_pages(plan->pages, vma))
		status |= RST_VMA_HAS_PAGES;
	if (plan->uffd >= 0 && vma_has_pages(&plan->lazy, vma))
		status |= RST_VMA_LAZY;
	if (vma_is_sysv_shm(vma))
		status |= RST_VMA_SYSV;
	return status;
}

/* A SysV attach: the segment id where the fd goes, shmat() flags where mmap()'s go. */
static void fill_sysv_vma(const struct task_image *ti, unsigned int idx, struct rst_vma *out)
{
	out->fd = (int32_t)ti->vmas[idx].shmid;
	out->pgoff = ti->vmas[idx].pgoff;
	out->flags = out->pgoff ? 0 : sysv_shm_attach_flags(ti, idx);
}

/* Names go to names, which the blob reads at the same address (the region is mapped in place). */
static void fill_vmas(const struct rst_plan *plan, const struct task_image *ti, struct rst_vma *out,
		      char *names)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++) {
		const struct vma_image *vma = &ti->vmas[i];
		bool has_fd = plan->vma_fds[i] >= 0;

		if (!vma_image_mapped(vma))
			continue;
		*out = (struct rst_vma){
			.premapped = mem_cow_premapped_at(ti, i),
			.start = vma->start,
			.end = vma->end,
			.pgoff = has_fd ? plan->vma_pgoffs[i] : 0,
			.madv = vma->madv,
			.prot = vma->prot,
			/* Shared anonymous memory is mapped from its object's fd. */
			.flags = has_fd ? vma->flags & ~MAP_ANONYMOUS : vma->flags,
			.status = rst_vma_status(plan, vma),
			.fd = plan->vma_fds[i],
			.anon_name = vma->anon_name ? (uintptr_t)names : 0,
		};
		if (vma_is_sysv_shm(vma))
			fill_sysv_vma(ti, i, out);
		/* Its runs are not in plan->pages: they were read before the fork. */
		if (out->premapped)
			out->status |= RST_VMA_PREMAPPED | RST_VMA_HAS_PAGES;
		out++;
		if (vma->anon_name)
			names = stpcpy(names, vma->anon_name) + 1;
	}
}

/*
 * rt_sigreturn restores the full xstate only when the buffer carries the software bytes
 * (magic1, sizes, feature mask) and magic2 right after it; otherwise it silently falls
 * back to the legacy FPU/SSE part. They describe this machine's frame.
 */
static void fill_xsave(uint8_t *dst, const struct thread_image *th)
{
	uint32_t magic1 = FP_XSTATE_MAGIC1, magic2 = FP_XSTATE_MAGIC2;
	uint32_t size = th->xsave_len, ext_size = th->xsave_len + sizeof(magic2);
	uint64_t features = xsave_user_features();

	memcpy(dst, th->xsave, th->xsave_len);
	memcpy(dst + XSAVE_SW_BYTES_OFF, &magic1, sizeof(magic1));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 4, &ext_size, sizeof(ext_size));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 8, &features, sizeof(features));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 16, &size, sizeof(size));
	memset(dst + XSAVE_SW_BYTES_OFF + 20, 0, 48 - 20);
	memcpy(dst + th->xsave_len, &magic2, sizeof(magic2));
}

static void fill_timers(struct rst_args *args, const struct task_image *ti, struct rst_posix_timer *out)
{
	if (ti->has_itimers) {
		args->nr_itimers = 3;
		memcpy(args->itimers, ti->itimers, sizeof(args->itimers));
	}
	args->nr_posix_timers = ti->nr_posix_timers;
	memcpy(out, ti->posix_timers, ti->nr_posix_timers * sizeof(*out));
}

static void fill_creds(struct rst_args *args, const struct task_image *ti, uint32_t *groups)
{
	if (!ti->has_creds)
		return;
	args->has_creds = 1;
	args->creds = ti->creds;
	args->creds.groups = (uint64_t)(uintptr_t)groups;
	memcpy(groups, ti->groups, ti->creds.nr_groups * sizeof(*groups));
}

static void fill_mm_map(struct rst_args *args, const struct task_image *ti, uint64_t *auxv, int exe_fd)
{
	memcpy(auxv, ti->auxv, ti->nr_auxv * sizeof(*auxv));
	args->mm_map = ti->mm_map;
	args->mm_map.auxv = (uint64_t)(uintptr_t)auxv;
	args->mm_map.auxv_size = ti->nr_auxv * sizeof(uint64_t);
	args->mm_map.exe_fd = exe_fd >= 0 ? (uint32_t)exe_fd : (uint32_t)-1;
}

static void fill_thread(struct rst_thread *out, const struct thread_image *th, uint64_t region,
			const struct thread_layout *tl)
{
	*out = (struct rst_thread){
		.tid = th->tid, .clear_tid_addr = th->clear_tid_addr, .robust_list = th->robust_list,
		.robust_list_len = th->robust_list_len, .nr_pending = th->nr_pending,
		.pending = region + tl->pending, .regs = th->regs, .blk_sigset = th->blk_sigset,
		.xsave = region + tl->xsave, .xsave_len = th->xsave_len,
		.stack_top = tl->stack_top ? region + tl->stack_top : 0,
		.has_rseq = th->has_rseq, .rseq_ptr = th->rseq_ptr, .rseq_len = th->rseq_len,
		.rseq_sig = th->rseq_sig, .rseq_cs = th->rseq_cs, .has_sas = th->has_sas, .sas_sp = th->sas_sp,
		.sas_size = th->sas_size, .sas_flags = th->sas_flags,
	};
	/* In a nested pid namespace the thread sees itself by its innermost tid. */
	out->nr_set_tid = pidns_set_tid(th->tid, out->set_tid, RST_PID_LEVELS);
	out->tid = out->set_tid[0];
}

/* Every thread's entry, pending signals and xstate, laid out as plan_layout() sized them. */
static void fill_threads(struct rst_args *args, const struct rst_plan *plan, const struct task_image *ti,
			 uint64_t region)
{
	struct rst_thread *out = REGION_PTR(region, plan->layout.threads);
	uint64_t pos = plan->layout.thread_data;
	struct thread_layout tl;
	unsigned int i;

	args->nr_threads = ti->nr_threads;
	args->threads = region + plan->layout.threads;
	for (i = 0; i < ti->nr_threads; i++) {
		const struct thread_image *th = &ti->threads[i];

		take_thread_layout(&pos, th, i == 0, &tl);
		fill_thread(&out[i], th, region, &tl);
		memcpy(REGION_PTR(region, tl.pending), th->pending, th->nr_pending * sizeof(struct rst_siginfo));
		fill_xsave(REGION_PTR(region, tl.xsave), th);
	}
}

static void fill_task_misc(struct rst_args *args, const struct task_image *ti, struct rst_siginfo *shared)
{
	memcpy(args->comm, ti->comm, sizeof(args->comm));
	memcpy(args->sigactions, ti->sigactions, sizeof(args->sigactions));
	args->sigaction_set = ti->sigaction_set;
	args->has_pdeath_sig = ti->has_pdeath_sig, args->pdeath_sig = ti->pdeath_sig;
	args->has_dumpable = ti->has_dumpable, args->dumpable = ti->dumpable;
	args->has_child_subreaper = ti->has_child_subreaper, args->child_subreaper = ti->child_subreaper;
	args->has_thp_disabled = ti->has_thp_disabled, args->thp_disabled = ti->thp_disabled;
	args->nr_shared_pending = ti->nr_shared_pending;
	memcpy(shared, ti->shared_pending, ti->nr_shared_pending * sizeof(*shared));
}

static void fill_specials(struct rst_args *args, const struct rst_plan *plan, uint64_t region)
{
	int i;

	for (i = 0; i < RST_NR_SPECIALS; i++)
		args->specials[i] = (struct rst_special){
			.cur_start = plan->cur_special[i].start,
			.dumped_start = plan->dumped_special[i].start,
			.len = range_len(&plan->cur_special[i]),
			.scratch = region + plan->layout.scratch[i],
		};
}

static struct rst_args *fill_args(struct rst_plan *plan, const struct rst_task_ctx *ctx, uint64_t region)
{
	const struct region_layout *l = &plan->layout;
	const struct task_image *ti = ctx->image;
	struct rst_args *args = REGION_PTR(region, l->args);
	unsigned int i, nr_reads, nr_iovs;

	*args = (struct rst_args){
		.magic = RST_ARGS_MAGIC, .pid = pidns_own_pid(ctx->pid), .log_pid = ctx->pid, .log_fd = ctx->log_fd, .loglevel = ctx->loglevel,
		.sync_fd = ctx->sync_fd, .proc_fd = get_service_fd(PROC_SFD), .region_start = region,
		.region_len = l->size, .task_size = RST_TASK_SIZE, .nr_vmas = plan->nr_vmas,
		.vmas = region + l->vmas, .page_reads = region + l->reads, .iovs = region + l->iovs,
		.nr_page_reads = plan->nr_reads, .total_page_bytes = plan->pages->total_bytes,
		.nr_workers = plan->nr_workers, .posix_timers = region + l->timers,
		.shared_pending = region + l->shared_pending,
		.close_fds = region + l->close_fds, .nr_close_fds = plan->nr_close_fds,
		.nr_file_fds = plan->nr_file_fds, .file_locks = region + l->file_locks,
		.nr_file_locks = plan->nr_file_locks, .uffd = plan->uffd, .lazy_sock = plan->lazy_sock,
		.nr_aio_rings = ti->nr_aio_rings, .aio_rings = region + l->aio_rings,
		.nr_guards = ti->nr_guards, .guards = region + l->guards,
		.cow_arena_start = mem_cow_arena_start(), .cow_arena_len = mem_cow_arena_len(),
	};
	for (i = 0; i < plan->nr_workers; i++)
		args->worker_stack_top[i] = region + l->worker_stack_top[i];
	fill_vmas(plan, ti, REGION_PTR(region, l->vmas), REGION_PTR(region, l->anon_names));
	build_page_reads(plan->pages, plan->pages_fds, REGION_PTR(region, l->reads), REGION_PTR(region, l->iovs), &nr_reads,
			 &nr_iovs);
	fill_specials(args, plan, region);
	fill_mm_map(args, ti, REGION_PTR(region, l->auxv), plan->exe_fd);
	fill_task_misc(args, ti, REGION_PTR(region, l->shared_pending));
	fill_timers(args, ti, REGION_PTR(region, l->timers));
	fill_creds(args, ti, REGION_PTR(region, l->groups));
	memcpy(REGION_PTR(region, l->close_fds), plan->close_fds, plan->nr_close_fds * sizeof(int32_t));
	if (plan->nr_file_locks)
		memcpy(REGION_PTR(region, l->file_locks), plan->file_locks,
		       plan->nr_file_locks * sizeof(struct rst_file_lock));
	if (ti->nr_aio_rings)
		memcpy(REGION_PTR(region, l->aio_rings), ti->aio_rings,
		       ti->nr_aio_rings * sizeof(struct rst_aio_ring));
	if (ti->nr_guards)
		memcpy(REGION_PTR(region, l->guards), ti->guards,
		       ti->nr_guards * sizeof(struct rst_guard));
	fill_threads(args, plan, ti, region);
	/* After the threads and creds: it fills in its part of both. */
	seccomp_fill_region(ti, REGION_PTR(region, l->seccomp), region + l->seccomp, args,
			    REGION_PTR(region, l->threads));
	return args;
}

/* ---- the jump ---- */

/*
 * glibc registered an rseq area in criu's TLS, which the blob unmaps: the kernel would
 * fault writing it on the next preemption. Drop the registration first.
 */
static int unregister_own_rseq(void)
{
	void *area = (char *)__builtin_thread_pointer() + __rseq_offset;

	if (!__rseq_size)
		return 0;
	if (!syscall(SYS_rseq, area, __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG))
		return 0;
	/* glibc registers the whole 32-byte area but may report only the used size. */
	if (errno == EINVAL && !syscall(SYS_rseq, area, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG))
		return 0;
	pr_perror("cannot unregister criu's rseq area");
	return -errno;
}

static __attribute__((noreturn)) void jump_to_blob(uint64_t entry, uint64_t stack_top,
						   struct rst_args *args)
{
	/* A zero return address keeps the ABI's stack alignment at the blob's entry. */
	asm volatile("mov %0, %%rsp\n\t"
		     "xor %%ebp, %%ebp\n\t"
		     "push $0\n\t"
		     "jmp *%1"
		     :
		     : "r"(stack_top), "r"(entry), "D"(args)
		     : "memory");
	__builtin_unreachable();
}

int restorer_jump(struct rst_task_ctx *ctx)
{
	struct rst_plan plan = { .pages = &ctx->image->pages, .exe_fd = -1, .uffd = -1,
				 .lazy_sock = -1 };
	struct rst_args *args = NULL;
	uint64_t region = 0;
	int ret;

	/* On failure the task exits right after reporting: what was opened or mapped goes with it. */
	pr_info("preparing the restorer\n");
	file_locks_of_task(ctx->pid, &plan.file_locks, &plan.nr_file_locks);
	ret = plan_lazy_pages(&plan, ctx);
	if (!ret)
		ret = plan_premapped_pages(&plan, ctx);
	if (!ret)
		ret = open_task_pages(&plan);
	if (!ret)
		ret = apply_libc_state(ctx->image);
	if (!ret)
		ret = open_task_fds(&plan, ctx);
	if (!ret)
		ret = map_region(&plan, ctx->image, &region);
	if (!ret)
		args = fill_args(&plan, ctx, region);
	/* cwd and root last: once chrooted, the paths used above (/proc, files) would not resolve. */
	if (!ret)
		ret = restore_task_fs(ctx->pid);
	if (!ret)
		ret = unregister_own_rseq();
	if (ret)
		return ret;
	pr_info("jumping into the restorer at %#llx\n", (unsigned long long)region);
	jump_to_blob(region, region + plan.layout.main_stack_top, args);
}
