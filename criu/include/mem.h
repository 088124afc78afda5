/*
 * Dumping a task's address space: mm-PID.img (mm fields and VMAs), mm-ext-PID.img (VMA
 * state CRIU's format has no field for), pagemap-PID.img with its pages-ID.img, and the
 * contents of the shared anonymous memory it maps (pagemap-shmem-SHMID.img).
 */
#ifndef CR_MEM_H
#define CR_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc_parse.h"

/* pagemap_entry.flags: where a run's pages are. Only PE_PRESENT runs are in pages-ID.img. */
#define PE_PARENT (1u << 0) /* in the parent images (--prev-images-dir) */
#define PE_LAZY (1u << 1) /* may be fetched lazily; with PE_PRESENT, also stored here */
#define PE_PRESENT (1u << 2)

struct mem_dump_stats {
	uint64_t pages_scanned; /* pages of the VMAs whose contents are dumped */
	uint64_t pages_written;
	uint64_t pages_in_parent; /* named PE_PARENT: in the parent images, not written since */
	uint64_t shpages_scanned; /* of the shared memory objects (pagemap-shmem) */
	uint64_t shpages_written;
	uint64_t write_us; /* time spent writing page data */
	uint64_t pages_lazy; /* dump --lazy-pages: left in the tree (PE_LAZY) */
};

/* dump --lazy-pages: a task whose private pages stay in the frozen tree (mem-lazy.c). */
struct mem_lazy_task {
	pid_t pid; /* as criu sees it: whose memory is read */
	pid_t img_pid; /* as the images name it: the daemon asks by it */
	int mem_fd; /* /proc/PID/mem, opened at the first request; -1 before */
	uint64_t *runs; /* vaddr, end pairs of the PE_LAZY runs, by address */
	unsigned int nr_runs, cap_runs;
};

/* State of one dump's memory images, across its tasks. */
struct mem_dump_ctx {
	/* pagemap_head.pages_id: each pagemap image of the dump gets the next, from 1. */
	uint32_t next_pages_id;
	/* Shared memory objects whose pages are stored already (by shmid). */
	uint64_t *shmem_dumped;
	unsigned int nr_shmem_dumped;
	struct mem_dump_stats stats;
	/*
	 * Pre-dump chains: the parent images directory (images_chain_dir(1)) holds the pages
	 * not written since (parent); pre-dumping, the tracker protects pages again (protect);
	 * auto_dedup: the parent's copies of pages stored again become holes (--auto-dedup).
	 */
	bool parent, protect, auto_dedup;
	/* --page-server: pagemaps and pages go to this socket, not into the images dir; or -1. */
	int page_server_sk;
	/* dump --lazy-pages: the tasks whose lazy VMAs' pages stay in the tree (PE_LAZY). */
	bool lazy;
	struct mem_lazy_task **lazy_tasks;
	unsigned int nr_lazy_tasks;
};

void mem_dump_init(struct mem_dump_ctx *ctx);
void mem_dump_fini(struct mem_dump_ctx *ctx);

/* What only the task itself could tell (injected syscalls), for mm_entry. */
struct task_mm_misc {
	unsigned long brk; /* brk(0) */
	int dumpable; /* PR_GET_DUMPABLE */
	bool thp_disabled; /* PR_GET_THP_DISABLE */
};

/*
 * Dump the address space of a seized task whose VMAs are vmas (parse_pid_smaps(), read
 * while the task was stopped), in three steps, so that the private pages (the expensive
 * part) of several tasks may be dumped in parallel:
 * - mem_dump_task_collect() classifies the VMAs, HANDLE_DEVICE_VMA for device ones (before
 *   the task's files are dumped, as CRIU runs the hooks); *out is set whatever happens,
 *   for mem_dump_task_end().
 * - mem_dump_task_begin() writes mm-PID.img, mm-ext-PID.img when some VMA has a name or is
 *   locked and, for each shared anonymous object not stored yet in this dump,
 *   pagemap-shmem-SHMID.img (vaddr: the offset in the object) with its own pages-ID.img;
 *   VMAs it cannot restore (SysV shm, devices no plugin takes) fail the dump, logged.
 * - mem_dump_task_pages() writes pagemap-PID.img (pagemap_head, then one entry per run of
 *   stored pages in address order, the data following each other in pages-ID.img from
 *   offset 0); it reads ctx but writes only into *d: it may run on any thread, with
 *   others. parasite: the task's running parasite (compel_parasite_start()), which
 *   vmsplices the private pages into pipes; NULL: they are read with process_vm_readv.
 * - mem_dump_task_end() adds the task's numbers to ctx's (ctx NULL: a dump that failed
 *   before its pages) and frees d.
 * 0 or -errno.
 */
struct compel_ctl;
struct mem_task_dump;
int mem_dump_task_collect(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas,
			  struct mem_task_dump **out);
int mem_dump_task_begin(struct mem_task_dump *d, const struct task_mm_misc *misc,
			struct mem_dump_ctx *ctx, struct compel_ctl *parasite);
int mem_dump_task_pages(struct mem_task_dump *d);
void mem_dump_task_end(struct mem_task_dump *d, struct mem_dump_ctx *ctx);

/*
 * A pre-dump: pagemap-PID.img and its pages of the task's private anonymous memory only
 * (mem_track_vma()), which the task goes on writing; no other image. parasite: as for
 * mem_dump_task_begin() (every page is spliced out before it returns, so the task may
 * run again afterwards). 0 or -errno.
 */
int predump_task_mm(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas,
		    struct mem_dump_ctx *ctx, struct compel_ctl *parasite);

/*
 * dump --lazy-pages (mem-lazy.c): a task whose lazy runs follow (*out, owned by ctx), one
 * run of nr_pages at vaddr of it, in address order. 0 or -ENOMEM (logged).
 */
int mem_lazy_add_task(struct mem_dump_ctx *ctx, pid_t pid, struct mem_lazy_task **out);
int mem_lazy_add_run(struct mem_lazy_task *t, uint64_t vaddr, uint64_t nr_pages);
/*
 * Once the images are written, the tree still frozen: serves the PE_LAZY pages from the
 * tasks' memory to the criu lazy-pages --page-server that connects to listen_sk, until it
 * has them all. 0, or -errno after one line (the daemon went away before the end).
 */
int mem_lazy_serve(struct mem_dump_ctx *ctx, int listen_sk);
void mem_lazy_free(struct mem_dump_ctx *ctx);

/* Whether the pages of shared memory object shmid are stored in this dump already. */
bool shmem_already_dumped(const struct mem_dump_ctx *ctx, uint64_t shmid);

/*
 * The contents of a shared memory object criu holds as fd (a memfd), size bytes, into
 * pagemap-shmem-SHMID.img and its pages, as for shared anonymous memory; what names it in
 * errors. An SHMID already stored in this dump is refused. 0 or -errno.
 */
int dump_shmem_fd(int fd, uint64_t shmid, uint64_t size, const char *what,
		  struct mem_dump_ctx *ctx);

#endif
