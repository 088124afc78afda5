/*
 * The last libc-side step of a restore task: read the page map, apply what libc can still
 * set (personality, rlimits, umask), map the restorer region in a hole, fill its args
 * block (restorer-args.h) and jump into the blob (criu/pie) on the region's own stack.
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

#include "files.h"
#include "image.h"
#include "log.h"
#include "plugin.h"
#include "pstree.h"
#include "restorer-setup.h"
#include "servicefd.h"
#include "shmem.h"
#include "vma.h"

#include "pagemap.pb-c.h"

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
#define XSAVE_HDR_OFF 512
#define XSAVE_MIN_LEN 576 /* legacy area + xsave header */

extern const char restorer_blob[], restorer_blob_end[];

/* A run of stored pages: len bytes at vaddr, at byte file_off of pages-ID.img. */
struct page_run {
	uint64_t vaddr, len, file_off;
};

struct task_pages {
	struct page_run *runs;
	unsigned int nr_runs;
	uint64_t total_bytes;
	int fd;
};

/* Where each piece of the region lives, as offsets from its start. */
struct region_layout {
	uint64_t code_len; /* the blob, page aligned: made executable */
	uint64_t args, vmas, reads, iovs, shared_pending, timers;
	uint64_t groups, auxv, close_fds;
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
	struct task_pages pages;
	unsigned int nr_vmas, nr_reads, nr_iovs, nr_workers, nr_close_fds;
	size_t anon_names_len; /* bytes of all VMA names, NULs included */
	struct rst_range cur_special[RST_NR_SPECIALS];
	struct rst_range dumped_special[RST_NR_SPECIALS];
	int *close_fds; /* criu's fds the blob closes last */
	int *vma_fds; /* per mm->vmas index, -1 for anonymous */
	int exe_fd;
	struct region_layout layout;
};

static const char *const special_names[RST_NR_SPECIALS] = { "[vvar]", "[vvar_vclock]", "[vdso]" };
static const uint32_t special_status[RST_NR_SPECIALS] = { VMA_AREA_VVAR, VMA_AREA_VVAR_VCLOCK,
							   VMA_AREA_VDSO };

/* ---- page map ---- */

static int add_page_run(struct task_pages *pages, const PagemapEntry *pe, uint64_t img_size)
{
	uint64_t len = pe->nr_pages * PAGE_SIZE;
	struct page_run *runs;

	if (!pe->nr_pages || pe->nr_pages > (RST_TASK_SIZE / PAGE_SIZE) || pe->vaddr % PAGE_SIZE ||
	    pe->vaddr + len > RST_TASK_SIZE || pe->pages_off % PAGE_SIZE ||
	    pe->pages_off < PAGES_IMG_HDR_SIZE || pe->pages_off + len > img_size) {
		pr_err("pagemap: bad entry vaddr %#llx nr_pages %llu pages_off %#llx (page image %llu bytes)\n",
		       (unsigned long long)pe->vaddr, (unsigned long long)pe->nr_pages,
		       (unsigned long long)pe->pages_off, (unsigned long long)img_size);
		return -EINVAL;
	}
	if (!(pages->nr_runs & (pages->nr_runs + 1))) {
		runs = realloc(pages->runs, (pages->nr_runs * 2 + 2) * sizeof(*runs));
		if (!runs) {
			pr_err("out of memory for %u page runs\n", pages->nr_runs);
			return -ENOMEM;
		}
		pages->runs = runs;
	}
	pages->runs[pages->nr_runs++] = (struct page_run){ pe->vaddr, len, pe->pages_off };
	pages->total_bytes += len;
	return 0;
}

static int read_page_runs(struct cr_img *img, struct task_pages *pages, uint64_t img_size)
{
	PagemapEntry *pe;
	int ret;

	while ((ret = pb_read_one(img, (void **)&pe)) == 1) {
		ret = add_page_run(pages, pe, img_size);
		pb_free(img, pe);
		if (ret)
			return ret;
	}
	return ret;
}

/* pagemap-PID.img, and the pages image it names, opened for the blob to read. */
static int open_task_pages(pid_t pid, struct task_pages *pages)
{
	struct cr_img *map_img, *pages_img;
	PagemapHead *head;
	struct stat st;
	int ret;

	map_img = open_image(CR_IMG_PAGEMAP, O_RDONLY, pid);
	if (!map_img)
		return -EIO;
	ret = pb_read_one_required_as(map_img, &pagemap_head__descriptor, (void **)&head);
	if (ret) {
		close_image(map_img);
		return ret;
	}
	pages_img = open_image(CR_IMG_PAGES, O_RDONLY, head->pages_id);
	pb_free(map_img, head);
	if (!pages_img) {
		close_image(map_img);
		return -EIO;
	}
	pages->fd = fcntl(pages_img->fd, F_DUPFD_CLOEXEC, 0);
	if (pages->fd < 0 || fstat(pages->fd, &st)) {
		ret = -errno;
		pr_perror("%s: cannot keep the page image open", pages_img->name);
	} else {
		ret = read_page_runs(map_img, pages, st.st_size);
	}
	close_image(pages_img);
	close_image(map_img);
	if (!ret)
		pr_debug("%u page runs, %llu bytes to read\n", pages->nr_runs,
			 (unsigned long long)pages->total_bytes);
	return ret;
}

/* ---- task state libc can still apply ---- */

static int restore_rlimit(const RlimitEntry *rl)
{
	struct rlimit want = { rl->cur, rl->max }, now;

	if (!prlimit(0, rl->resource, &want, NULL))
		return 0;
	/* Without CAP_SYS_RESOURCE a hard limit cannot be raised: fine if it already matches. */
	if (!prlimit(0, rl->resource, NULL, &now) && now.rlim_cur == want.rlim_cur &&
	    now.rlim_max == want.rlim_max)
		return 0;
	pr_perror("cannot restore rlimit %u to cur %llu max %llu", rl->resource,
		  (unsigned long long)rl->cur, (unsigned long long)rl->max);
	return -errno;
}

static int apply_libc_state(const TaskCoreEntry *tc)
{
	size_t i;
	int ret;

	if (personality(tc->personality) < 0) {
		pr_perror("cannot set personality %#x", tc->personality);
		return -errno;
	}
	for (i = 0; i < tc->n_rlimits; i++) {
		ret = restore_rlimit(tc->rlimits[i]);
		if (ret)
			return ret;
	}
	umask(tc->umask);
	return 0;
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

/* Reads /proc/self/maps: every current mapping into busy, the specials into the plan. */
static int read_own_maps(struct rst_plan *plan, struct range_vec *busy)
{
	unsigned long long start, end;
	char *line = NULL, path[64];
	size_t line_size = 0;
	int idx, ret = 0;
	FILE *maps;

	maps = fopen("/proc/self/maps", "re");
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
		if (idx >= 0)
			plan->cur_special[idx] = (struct rst_range){ start, end };
		ret = range_push(busy, start, end);
	}
	free(line);
	fclose(maps);
	return ret;
}

/* The blob moves the specials with mremap, which cannot change their size. */
static int check_specials(struct rst_plan *plan, const MmEntry *mm)
{
	uint64_t cur_len, dumped_len;
	size_t i;
	int s;

	for (i = 0; i < mm->n_vmas; i++)
		for (s = 0; s < RST_NR_SPECIALS; s++)
			if (mm->vmas[i]->status & special_status[s])
				plan->dumped_special[s] = (struct rst_range){ mm->vmas[i]->start, mm->vmas[i]->end };
	for (s = 0; s < RST_NR_SPECIALS; s++) {
		cur_len = plan->cur_special[s].end - plan->cur_special[s].start;
		dumped_len = plan->dumped_special[s].end - plan->dumped_special[s].start;
		if (cur_len != dumped_len) {
			pr_err("%s is %llu bytes on this kernel but %llu in the images: restore on the kernel that dumped the task\n",
			       special_names[s], (unsigned long long)cur_len, (unsigned long long)dumped_len);
			return -EINVAL;
		}
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

static bool vma_is_restored(const VmaEntry *vma)
{
	return vma->status & VMA_AREA_REGULAR;
}

/* Every stored page must land in a VMA the blob fills, or the images are inconsistent. */
static int check_run_in_vmas(const MmEntry *mm, const struct page_run *run)
{
	uint64_t pos = run->vaddr, end = run->vaddr + run->len;
	size_t i;

	for (i = 0; i < mm->n_vmas && pos < end; i++) {
		const VmaEntry *vma = mm->vmas[i];

		if (vma_is_restored(vma) && !(vma->status & (VMA_FILE_SHARED | VMA_DEVICE)) &&
		    vma->start <= pos && pos < vma->end)
			pos = vma->end;
	}
	if (pos < end) {
		pr_err("pagemap: pages at %#llx-%#llx lie outside the task's private or anonymous VMAs\n",
		       (unsigned long long)run->vaddr, (unsigned long long)end);
		return -EINVAL;
	}
	return 0;
}

/* ---- splitting the page runs into reads ---- */

/*
 * Runs that follow each other in the file share one preadv (up to RST_READ_CHUNK);
 * big runs are cut into chunks so reader threads can share them. With reads/iovs
 * NULL only counts.
 */
static void build_page_reads(const struct task_pages *pages, struct rst_page_read *reads,
			     struct rst_iovec *iovs, unsigned int *nr_reads, unsigned int *nr_iovs)
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
			    cur.bytes < RST_READ_CHUNK) {
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
				cur = (struct rst_page_read){ file_off, 0, iovs_done, 0 };
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

static int add_close_fd(struct rst_plan *plan, int fd)
{
	unsigned int i;

	if (fd < 0)
		return 0;
	for (i = 0; i < plan->nr_close_fds; i++)
		if (plan->close_fds[i] == fd)
			return 0;
	plan->close_fds[plan->nr_close_fds++] = fd;
	return 0;
}

/* A VMA's file, opened once per (file id, flags) however many VMAs map it. */
static int vma_file_fd(struct rst_plan *plan, const MmEntry *mm, size_t idx)
{
	const VmaEntry *vma = mm->vmas[idx];
	uint32_t fdflags = vma->has_fdflags ? vma->fdflags : O_RDONLY;
	size_t i;
	int fd;

	for (i = 0; i < idx; i++)
		if (plan->vma_fds[i] >= 0 && mm->vmas[i]->has_file_id && mm->vmas[i]->file_id == vma->file_id &&
		    (mm->vmas[i]->has_fdflags ? mm->vmas[i]->fdflags : O_RDONLY) == fdflags)
			return plan->vma_fds[i];
	fd = open_vma_file(vma->file_id, fdflags);
	if (fd < 0)
		pr_err("vma %#llx-%#llx: cannot open its file %u: %s\n", (unsigned long long)vma->start,
		       (unsigned long long)vma->end, vma->file_id, strerror(-fd));
	return fd;
}

/* The dumped path itself, when UPDATE_VMA_MAP's plugin says it is still valid (returns 0). */
static int open_device_path(const VmaEntry *vma)
{
	int fd = open(vma->device_path, (vma->has_fdflags ? vma->fdflags : O_RDONLY) | O_CLOEXEC);

	if (fd < 0) {
		fd = -errno;
		pr_perror("vma %#llx-%#llx: cannot open %s, which its plugin left to criu",
			  (unsigned long long)vma->start, (unsigned long long)vma->end, vma->device_path);
	}
	return fd;
}

/*
 * A VMA a plugin took at dump (VMA_DEVICE): UPDATE_VMA_MAP, here in the task before its
 * memory is rebuilt, returns 1 with the re-created object's fd and the offset into it
 * (bytes, like vma_entry.pgoff). The offset goes into the in-memory entry, which
 * fill_vmas() hands to the blob; the image is not changed.
 */
static int device_vma_fd(VmaEntry *vma)
{
	uint64_t new_pgoff = vma->pgoff;
	int plugin_fd = -1, ret;

	if (!vma->device_path) {
		pr_err("mm: device vma %#llx-%#llx has no path\n", (unsigned long long)vma->start,
		       (unsigned long long)vma->end);
		return -EINVAL;
	}
	ret = run_plugins(UPDATE_VMA_MAP, vma->device_path, vma->start, vma->pgoff, &new_pgoff,
			  &plugin_fd);
	if (ret == -ENOTSUP)
		pr_err("vma %#llx-%#llx maps %s, which a plugin took at dump: no loaded plugin restores it\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end, vma->device_path);
	if (ret < 0)
		return ret; /* other errors: run_plugins() named the plugin */
	if (ret == 0)
		return open_device_path(vma);
	if (plugin_fd < 0 || new_pgoff % PAGE_SIZE) {
		pr_err("vma %#llx-%#llx (%s): UPDATE_VMA_MAP gave fd %d at offset %#llx: not a mappable fd at a page boundary\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end, vma->device_path,
		       plugin_fd, (unsigned long long)new_pgoff);
		if (plugin_fd >= 0)
			close(plugin_fd);
		return -EINVAL;
	}
	pr_debug("vma %#llx-%#llx (%s): plugin fd %d at offset %#llx (dumped at %#llx)\n",
		 (unsigned long long)vma->start, (unsigned long long)vma->end, vma->device_path,
		 plugin_fd, (unsigned long long)new_pgoff, (unsigned long long)vma->pgoff);
	vma->pgoff = new_pgoff;
	return plugin_fd;
}

/* Shared anonymous memory: the object criu re-created, one fd for all VMAs of one shmid. */
static int shmem_vma_fd(struct rst_plan *plan, const MmEntry *mm, size_t idx)
{
	const VmaEntry *vma = mm->vmas[idx];
	size_t i;

	if (!vma->has_shmid) {
		pr_err("mm: shared anonymous vma %#llx-%#llx has no shmid\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end);
		return -EINVAL;
	}
	for (i = 0; i < idx; i++)
		if (plan->vma_fds[i] >= 0 && (mm->vmas[i]->status & VMA_ANON_SHARED) &&
		    mm->vmas[i]->shmid == vma->shmid)
			return plan->vma_fds[i];
	return shmem_open(vma->shmid);
}

static int open_task_fds(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	const MmEntry *mm = ctx->mm;
	size_t i;
	int type;

	/* vma fds + exe + pages + sync + log + service fds */
	plan->close_fds = calloc(mm->n_vmas + 4 + SERVICE_FD_MAX, sizeof(int));
	plan->vma_fds = calloc(mm->n_vmas ? mm->n_vmas : 1, sizeof(int));
	if (!plan->close_fds || !plan->vma_fds) {
		pr_err("out of memory for %zu vma fds\n", mm->n_vmas);
		return -ENOMEM;
	}
	for (i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *vma = mm->vmas[i];

		plan->vma_fds[i] = -1;
		if (!vma_is_restored(vma) ||
		    !(vma->status & (VMA_FILE_PRIVATE | VMA_FILE_SHARED | VMA_DEVICE | VMA_ANON_SHARED)))
			continue;
		if (vma->status & VMA_DEVICE)
			plan->vma_fds[i] = device_vma_fd(mm->vmas[i]);
		else if (vma->status & VMA_ANON_SHARED)
			plan->vma_fds[i] = shmem_vma_fd(plan, mm, i);
		else
			plan->vma_fds[i] = vma_file_fd(plan, mm, i);
		if (plan->vma_fds[i] < 0)
			return plan->vma_fds[i];
		add_close_fd(plan, plan->vma_fds[i]);
	}
	plan->exe_fd = -1;
	if (mm->has_exe_file_id) {
		plan->exe_fd = open_vma_file(mm->exe_file_id, O_RDONLY);
		if (plan->exe_fd < 0) {
			pr_err("cannot open the exe file %u: %s\n", mm->exe_file_id, strerror(-plan->exe_fd));
			return plan->exe_fd;
		}
	}
	add_close_fd(plan, plan->exe_fd);
	add_close_fd(plan, plan->pages.fd);
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

/* Thread i of the core: 0 is the main thread, then core->threads in order. */
static const ThreadCoreEntry *core_thread(const CoreEntry *core, size_t i)
{
	return i ? core->threads[i - 1] : core->thread;
}

/* Where one thread's pieces go: one walk sizes the region, the same walk fills it. */
struct thread_layout {
	uint64_t pending, xsave, stack_top;
};

static void take_thread_layout(uint64_t *pos, const ThreadCoreEntry *th, bool main_thread,
			       struct thread_layout *tl)
{
	tl->pending = region_take(pos, th->n_pending * sizeof(struct rst_siginfo), 64);
	/* XRSTOR from the signal frame needs 64-byte alignment; magic2 follows the buffer. */
	tl->xsave = region_take(pos, th->xsave.len + sizeof(uint32_t), 64);
	/* The main thread runs on the region's main stack. */
	tl->stack_top = 0;
	if (!main_thread)
		tl->stack_top = region_take(pos, RST_THREAD_STACK_SIZE, PAGE_SIZE) +
				RST_THREAD_STACK_SIZE;
}

static void plan_layout(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	const TaskCoreEntry *tc = ctx->core->tc;
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
	l->shared_pending = region_take(&pos, tc->n_shared_pending * sizeof(struct rst_siginfo), 64);
	l->timers = region_take(&pos, tc->n_posix_timers * sizeof(struct rst_posix_timer), 64);
	l->groups = region_take(&pos, (tc->creds ? tc->creds->n_groups : 0) * sizeof(uint32_t), 64);
	l->auxv = region_take(&pos, ctx->mm->n_mm_saved_auxv * sizeof(uint64_t), 64);
	l->close_fds = region_take(&pos, plan->nr_close_fds * sizeof(int32_t), 64);
	l->threads = region_take(&pos, (ctx->core->n_threads + 1) * sizeof(struct rst_thread), 64);
	l->thread_data = pos;
	for (i = 0; i <= ctx->core->n_threads; i++)
		take_thread_layout(&pos, core_thread(ctx->core, i), i == 0, &tl);
	for (i = 0; i < RST_NR_SPECIALS; i++)
		l->scratch[i] = region_take(&pos, plan->cur_special[i].end - plan->cur_special[i].start,
					    PAGE_SIZE);
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

/* The shared anonymous VMA holding addr, or the first one above it (NULL: none). */
static const VmaEntry *shmem_vma_at_or_above(const MmEntry *mm, uint64_t addr)
{
	const VmaEntry *best = NULL;
	size_t i;

	for (i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *vma = mm->vmas[i];

		if (!vma_is_restored(vma) || !(vma->status & VMA_ANON_SHARED) || vma->end <= addr)
			continue;
		if (!best || vma->start < best->start)
			best = vma;
	}
	return best;
}

/*
 * The parts of run outside shared anonymous VMAs, into out (NULL: only counted), from
 * index nr_out on. Returns the new count.
 */
static unsigned int split_run_outside_shmem(const struct page_run *run, const MmEntry *mm,
					    struct page_run *out, unsigned int nr_out)
{
	uint64_t pos, stop, end = run->vaddr + run->len;

	for (pos = run->vaddr; pos < end; pos = stop) {
		const VmaEntry *vma = shmem_vma_at_or_above(mm, pos);

		if (vma && vma->start <= pos) {
			stop = vma->end < end ? vma->end : end;
			continue;
		}
		stop = vma && vma->start < end ? vma->start : end;
		if (out)
			out[nr_out] = (struct page_run){ pos, stop - pos, run->file_off + (pos - run->vaddr) };
		nr_out++;
	}
	return nr_out;
}

/*
 * Pages of shared anonymous VMAs are already in the objects criu filled (shmem.c): cut
 * them out of the runs the blob reads, or it would write them a second time.
 */
static int drop_shmem_runs(struct task_pages *pages, const MmEntry *mm)
{
	unsigned int i, nr_kept = 0;
	struct page_run *kept;

	for (i = 0; i < pages->nr_runs; i++)
		nr_kept = split_run_outside_shmem(&pages->runs[i], mm, NULL, nr_kept);
	kept = calloc(nr_kept ? nr_kept : 1, sizeof(*kept));
	if (!kept) {
		pr_err("out of memory for %u page runs\n", nr_kept);
		return -ENOMEM;
	}
	for (i = 0, nr_kept = 0; i < pages->nr_runs; i++)
		nr_kept = split_run_outside_shmem(&pages->runs[i], mm, kept, nr_kept);
	pages->total_bytes = 0;
	for (i = 0; i < nr_kept; i++)
		pages->total_bytes += kept[i].len;
	free(pages->runs);
	pages->runs = kept;
	pages->nr_runs = nr_kept;
	return 0;
}

/*
 * A name the blob gives again with prctl(PR_SET_VMA_ANON_NAME): checked here against the
 * kernel's rules (under RST_ANON_NAME_MAX bytes with the NUL; printable ASCII but \ ` $ [ ])
 * so that a bad image fails before the task exists, naming the VMA.
 */
static int count_anon_name(struct rst_plan *plan, const VmaEntry *vma)
{
	const char *c;

	if (!vma->anon_name)
		return 0;
	if (!(vma->status & (VMA_ANON_PRIVATE | VMA_ANON_SHARED)) ||
	    strlen(vma->anon_name) >= RST_ANON_NAME_MAX) {
		pr_err("vma %#llx-%#llx: name \"%.100s\" is not an anonymous VMA name under %d bytes\n",
		       (unsigned long long)vma->start, (unsigned long long)vma->end, vma->anon_name,
		       RST_ANON_NAME_MAX);
		return -EINVAL;
	}
	for (c = vma->anon_name; *c; c++) {
		if (*c < 0x20 || *c > 0x7e || strchr("\\`$[]", *c)) {
			pr_err("vma %#llx-%#llx: name \"%s\" has a character the kernel refuses (%#x)\n",
			       (unsigned long long)vma->start, (unsigned long long)vma->end,
			       vma->anon_name, (unsigned char)*c);
			return -EINVAL;
		}
	}
	plan->anon_names_len += strlen(vma->anon_name) + 1;
	return 0;
}

/* Counts what goes into the region and sizes it. */
static int plan_region(struct rst_plan *plan, const struct rst_task_ctx *ctx)
{
	const MmEntry *mm = ctx->mm;
	unsigned int i;
	size_t v;
	int ret;

	for (v = 0; v < mm->n_vmas; v++) {
		if (!vma_is_restored(mm->vmas[v]))
			continue;
		plan->nr_vmas++;
		ret = count_anon_name(plan, mm->vmas[v]);
		if (ret)
			return ret;
	}
	ret = drop_shmem_runs(&plan->pages, mm);
	if (ret)
		return ret;
	for (i = 0; i < plan->pages.nr_runs; i++) {
		ret = check_run_in_vmas(mm, &plan->pages.runs[i]);
		if (ret)
			return ret;
	}
	build_page_reads(&plan->pages, NULL, NULL, &plan->nr_reads, &plan->nr_iovs);
	plan->nr_workers = count_reader_threads(plan->pages.total_bytes);
	plan_layout(plan, ctx);
	return 0;
}

/* Maps the region where neither the task's VMAs nor our own mappings are, blob inside. */
static int map_region(struct rst_plan *plan, const struct rst_task_ctx *ctx, uint64_t *region)
{
	struct range_vec busy = { 0 };
	uint64_t start = 0;
	size_t i;
	void *addr;
	int ret = 0;

	for (i = 0; i < ctx->mm->n_vmas && !ret; i++)
		ret = range_push(&busy, ctx->mm->vmas[i]->start, ctx->mm->vmas[i]->end);
	if (!ret)
		ret = read_own_maps(plan, &busy);
	if (!ret)
		ret = check_specials(plan, ctx->mm);
	if (!ret)
		ret = plan_region(plan, ctx);
	if (!ret) {
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
static bool vma_has_pages(const struct task_pages *pages, const VmaEntry *vma)
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

/* Names go to names, which the blob reads at the same address (the region is mapped in place). */
static void fill_vmas(const struct rst_plan *plan, const MmEntry *mm, struct rst_vma *out, char *names)
{
	size_t i;

	for (i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *vma = mm->vmas[i];

		if (!vma_is_restored(vma))
			continue;
		*out++ = (struct rst_vma){
			.start = vma->start,
			.end = vma->end,
			.pgoff = plan->vma_fds[i] >= 0 ? vma->pgoff : 0,
			.madv = vma->has_madv ? vma->madv : 0,
			.prot = vma->prot,
			/* Shared anonymous memory is mapped from its object's fd. */
			.flags = plan->vma_fds[i] >= 0 ? vma->flags & ~MAP_ANONYMOUS : vma->flags,
			.status = vma->status |
				  (vma_has_pages(&plan->pages, vma) ? RST_VMA_HAS_PAGES : 0),
			.fd = plan->vma_fds[i],
			.anon_name = vma->anon_name ? (uintptr_t)names : 0,
		};
		if (vma->anon_name)
			names = stpcpy(names, vma->anon_name) + 1;
	}
}

static void fill_gpregs(struct rst_gpregs *out, const UserX86RegsEntry *r)
{
	*out = (struct rst_gpregs){
		.r15 = r->r15, .r14 = r->r14, .r13 = r->r13, .r12 = r->r12, .bp = r->bp,
		.bx = r->bx, .r11 = r->r11, .r10 = r->r10, .r9 = r->r9, .r8 = r->r8,
		.ax = r->ax, .cx = r->cx, .dx = r->dx, .si = r->si, .di = r->di,
		.orig_ax = r->orig_ax, .ip = r->ip, .cs = r->cs, .flags = r->flags, .sp = r->sp,
		.ss = r->ss, .fs_base = r->fs_base, .gs_base = r->gs_base,
	};
}

static uint64_t read_xcr0(void)
{
	uint32_t lo, hi;

	asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

/*
 * rt_sigreturn restores the full xstate only when the buffer carries the software
 * bytes (magic1, sizes, feature mask) and magic2 right after it; otherwise it silently
 * falls back to the legacy FPU/SSE part.
 */
static int fill_xsave(uint8_t *dst, const ProtobufCBinaryData *xsave)
{
	uint32_t magic1 = FP_XSTATE_MAGIC1, magic2 = FP_XSTATE_MAGIC2;
	uint32_t size = xsave->len, ext_size = xsave->len + sizeof(magic2);
	uint64_t features;

	if (xsave->len < XSAVE_MIN_LEN) {
		pr_err("core: xsave area of %zu bytes is too short (at least %d)\n", xsave->len, XSAVE_MIN_LEN);
		return -EINVAL;
	}
	memcpy(dst, xsave->data, xsave->len);
	memcpy(&features, dst + XSAVE_SW_BYTES_OFF + 8, sizeof(features));
	if (memcmp(dst + XSAVE_SW_BYTES_OFF, &magic1, sizeof(magic1)))
		features = read_xcr0();
	memcpy(dst + XSAVE_SW_BYTES_OFF, &magic1, sizeof(magic1));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 4, &ext_size, sizeof(ext_size));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 8, &features, sizeof(features));
	memcpy(dst + XSAVE_SW_BYTES_OFF + 16, &size, sizeof(size));
	memcpy(dst + xsave->len, &magic2, sizeof(magic2));
	return 0;
}

static int fill_siginfos(struct rst_siginfo *out, SiginfoEntry **infos, size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++) {
		if (infos[i]->siginfo.len != RST_SIGINFO_SIZE) {
			pr_err("core: pending siginfo of %zu bytes, expected %d\n", infos[i]->siginfo.len,
			       RST_SIGINFO_SIZE);
			return -EINVAL;
		}
		memcpy(out[i].raw, infos[i]->siginfo.data, RST_SIGINFO_SIZE);
	}
	return 0;
}

static int fill_sigactions(struct rst_args *args, const TaskCoreEntry *tc)
{
	size_t i;

	for (i = 0; i < tc->n_sigactions; i++) {
		const SaEntry *sa = tc->sigactions[i];

		if (sa->sig < 1 || sa->sig > RST_NSIG) {
			pr_err("core: sigaction for bad signal %u\n", sa->sig);
			return -EINVAL;
		}
		args->sigactions[sa->sig - 1] = (struct rst_sigaction){ sa->handler, sa->flags, sa->restorer,
									sa->mask };
		args->sigaction_set |= 1ull << (sa->sig - 1);
	}
	return 0;
}

static void fill_timers(struct rst_args *args, const TaskCoreEntry *tc, struct rst_posix_timer *out,
			pid_t pid)
{
	size_t i;

	args->nr_itimers = tc->n_itimers < 3 ? tc->n_itimers : 3;
	for (i = 0; i < args->nr_itimers; i++) {
		const ItimerEntry *it = tc->itimers[i];

		args->itimers[i][0] = it->isec;
		args->itimers[i][1] = it->iusec;
		args->itimers[i][2] = it->vsec;
		args->itimers[i][3] = it->vusec;
	}
	args->nr_posix_timers = tc->n_posix_timers;
	for (i = 0; i < tc->n_posix_timers; i++) {
		const PosixTimerEntry *t = tc->posix_timers[i];

		out[i] = (struct rst_posix_timer){
			.id = t->it_id, .clock_id = t->clock_id, .signo = t->si_signo,
			.notify = t->it_sigev_notify,
			.notify_tid = t->has_notify_thread_id ? t->notify_thread_id : (uint32_t)pid,
			.sival = t->sival_ptr, .interval_sec = t->isec, .interval_nsec = t->insec,
			.value_sec = t->vsec, .value_nsec = t->vnsec,
		};
	}
}

static void fill_creds(struct rst_args *args, const CredsEntry *c, uint32_t *groups)
{
	size_t i;

	args->has_creds = 1;
	args->creds = (struct rst_creds){
		.uid = c->uid, .gid = c->gid, .euid = c->euid, .egid = c->egid,
		.suid = c->suid, .sgid = c->sgid, .fsuid = c->fsuid, .fsgid = c->fsgid,
		.cap_inh = c->cap_inh, .cap_prm = c->cap_prm, .cap_eff = c->cap_eff,
		.cap_bnd = c->cap_bnd, .cap_amb = c->has_cap_amb ? c->cap_amb : 0,
		.secbits = c->secbits, .no_new_privs = c->has_no_new_privs ? c->no_new_privs : 0,
		.nr_groups = c->n_groups, .groups = (uint64_t)(uintptr_t)groups,
	};
	for (i = 0; i < c->n_groups; i++)
		groups[i] = c->groups[i];
}

static void fill_mm_map(struct rst_args *args, const MmEntry *mm, uint64_t *auxv, int exe_fd)
{
	size_t i;

	for (i = 0; i < mm->n_mm_saved_auxv; i++)
		auxv[i] = mm->mm_saved_auxv[i];
	args->mm_map = (struct rst_mm_map){
		.start_code = mm->mm_start_code, .end_code = mm->mm_end_code,
		.start_data = mm->mm_start_data, .end_data = mm->mm_end_data,
		.start_brk = mm->mm_start_brk, .brk = mm->mm_brk, .start_stack = mm->mm_start_stack,
		.arg_start = mm->mm_arg_start, .arg_end = mm->mm_arg_end,
		.env_start = mm->mm_env_start, .env_end = mm->mm_env_end,
		.auxv = (uint64_t)(uintptr_t)auxv, .auxv_size = mm->n_mm_saved_auxv * sizeof(uint64_t),
		.exe_fd = exe_fd >= 0 ? (uint32_t)exe_fd : (uint32_t)-1,
	};
}

static void fill_thread(struct rst_thread *out, const ThreadCoreEntry *th, pid_t tid, uint64_t region,
			const struct thread_layout *tl)
{
	*out = (struct rst_thread){
		.tid = tid, .clear_tid_addr = th->clear_tid_addr, .robust_list = th->robust_list,
		.robust_list_len = th->robust_list_len, .nr_pending = th->n_pending,
		.pending = region + tl->pending, .blk_sigset = th->blk_sigset,
		.xsave = region + tl->xsave, .xsave_len = th->xsave.len,
		.stack_top = tl->stack_top ? region + tl->stack_top : 0,
	};
	fill_gpregs(&out->regs, th->gpregs);
	if (th->rseq && th->rseq->rseq_abi_pointer) {
		out->has_rseq = 1;
		out->rseq_ptr = th->rseq->rseq_abi_pointer;
		out->rseq_len = th->rseq->rseq_abi_size;
		out->rseq_sig = th->rseq->signature;
	}
	if (th->sas) {
		out->has_sas = 1;
		out->sas_sp = th->sas->ss_sp;
		out->sas_size = th->sas->ss_size;
		out->sas_flags = th->sas->ss_flags;
	}
}

/* Every thread's entry, pending signals and xstate, laid out as plan_layout() sized them. */
static int fill_threads(struct rst_args *args, const struct rst_plan *plan, const struct rst_task_ctx *ctx,
			uint64_t region)
{
	struct rst_thread *out = REGION_PTR(region, plan->layout.threads);
	uint64_t pos = plan->layout.thread_data;
	struct thread_layout tl;
	size_t i;
	int ret;

	args->nr_threads = ctx->core->n_threads + 1;
	args->threads = region + plan->layout.threads;
	for (i = 0; i < args->nr_threads; i++) {
		const ThreadCoreEntry *th = core_thread(ctx->core, i);

		take_thread_layout(&pos, th, i == 0, &tl);
		fill_thread(&out[i], th, i ? (pid_t)th->tid : ctx->pid, region, &tl);
		ret = fill_siginfos(REGION_PTR(region, tl.pending), th->pending, th->n_pending);
		if (!ret)
			ret = fill_xsave(REGION_PTR(region, tl.xsave), &th->xsave);
		if (ret)
			return ret;
	}
	return 0;
}

static void fill_task_misc(struct rst_args *args, const TaskCoreEntry *tc)
{
	strncpy(args->comm, tc->comm, sizeof(args->comm) - 1);
	args->has_pdeath_sig = tc->has_pdeath_sig, args->pdeath_sig = tc->pdeath_sig;
	args->has_dumpable = tc->has_dumpable, args->dumpable = tc->dumpable;
	args->has_child_subreaper = tc->has_child_subreaper, args->child_subreaper = tc->child_subreaper;
	args->has_thp_disabled = tc->has_thp_disabled, args->thp_disabled = tc->thp_disabled;
	args->nr_shared_pending = tc->n_shared_pending;
}

static void fill_specials(struct rst_args *args, const struct rst_plan *plan, uint64_t region)
{
	int i;

	for (i = 0; i < RST_NR_SPECIALS; i++)
		args->specials[i] = (struct rst_special){
			.cur_start = plan->cur_special[i].start,
			.dumped_start = plan->dumped_special[i].start,
			.len = plan->cur_special[i].end - plan->cur_special[i].start,
			.scratch = region + plan->layout.scratch[i],
		};
}

static int fill_args(struct rst_plan *plan, const struct rst_task_ctx *ctx, uint64_t region,
		     struct rst_args **out)
{
	const struct region_layout *l = &plan->layout;
	const TaskCoreEntry *tc = ctx->core->tc;
	struct rst_args *args = REGION_PTR(region, l->args);
	unsigned int i, nr_reads, nr_iovs;
	int ret;

	*args = (struct rst_args){
		.magic = RST_ARGS_MAGIC, .pid = ctx->pid, .log_fd = ctx->log_fd, .loglevel = ctx->loglevel,
		.sync_fd = ctx->sync_fd, .pages_fd = plan->pages.fd, .region_start = region,
		.region_len = l->size, .task_size = RST_TASK_SIZE, .nr_vmas = plan->nr_vmas,
		.vmas = region + l->vmas, .page_reads = region + l->reads, .iovs = region + l->iovs,
		.nr_page_reads = plan->nr_reads, .total_page_bytes = plan->pages.total_bytes,
		.nr_workers = plan->nr_workers, .posix_timers = region + l->timers,
		.shared_pending = region + l->shared_pending,
		.close_fds = region + l->close_fds, .nr_close_fds = plan->nr_close_fds,
	};
	for (i = 0; i < plan->nr_workers; i++)
		args->worker_stack_top[i] = region + l->worker_stack_top[i];
	fill_vmas(plan, ctx->mm, REGION_PTR(region, l->vmas), REGION_PTR(region, l->anon_names));
	build_page_reads(&plan->pages, REGION_PTR(region, l->reads), REGION_PTR(region, l->iovs), &nr_reads,
			 &nr_iovs);
	fill_specials(args, plan, region);
	fill_mm_map(args, ctx->mm, REGION_PTR(region, l->auxv), plan->exe_fd);
	fill_task_misc(args, tc);
	fill_timers(args, tc, REGION_PTR(region, l->timers), ctx->pid);
	if (tc->creds)
		fill_creds(args, tc->creds, REGION_PTR(region, l->groups));
	memcpy(REGION_PTR(region, l->close_fds), plan->close_fds, plan->nr_close_fds * sizeof(int32_t));
	ret = fill_sigactions(args, tc);
	if (!ret)
		ret = fill_siginfos(REGION_PTR(region, l->shared_pending), tc->shared_pending,
				    tc->n_shared_pending);
	if (!ret)
		ret = fill_threads(args, plan, ctx, region);
	*out = args;
	return ret;
}

/*
 * criu traces the threads pstree.img lists and the blob creates those the core holds:
 * a thread in one list and not the other would run unwatched, so they must agree.
 */
static int check_thread_list(const struct rst_task_ctx *ctx)
{
	const struct pstree_item *item = pstree_find(ctx->pid);
	const CoreEntry *core = ctx->core;
	size_t i;

	if (!item || item->nr_threads != core->n_threads + 1) {
		pr_err("core-%d.img holds %zu threads, pstree.img lists %u\n", ctx->pid,
		       core->n_threads + 1, item ? item->nr_threads : 0);
		return -EINVAL;
	}
	for (i = 0; i < core->n_threads; i++) {
		if (core->threads[i]->tid == (uint32_t)ctx->pid ||
		    core->threads[i]->tid != (uint32_t)item->threads[i + 1]) {
			pr_err("core-%d.img: thread %zu is %u, pstree.img says %d\n", ctx->pid, i + 1,
			       core->threads[i]->tid, item->threads[i + 1]);
			return -EINVAL;
		}
	}
	return 0;
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
	struct rst_plan plan = { .pages = { .fd = -1 }, .exe_fd = -1 };
	struct rst_args *args = NULL;
	uint64_t region = 0;
	int ret;

	/* On failure the task exits right after reporting: what was opened or mapped goes with it. */
	pr_info("preparing the restorer\n");
	ret = check_thread_list(ctx);
	if (!ret)
		ret = open_task_pages(ctx->pid, &plan.pages);
	if (!ret)
		ret = apply_libc_state(ctx->core->tc);
	if (!ret)
		ret = open_task_fds(&plan, ctx);
	if (!ret)
		ret = map_region(&plan, ctx, &region);
	if (!ret)
		ret = fill_args(&plan, ctx, region, &args);
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
