/*
 * Restore side: every task's images (core-TID per thread, mm, mm-ext, pagemap) decoded
 * once, in criu's main process before anything is forked, into the objects the restore
 * works on. The tasks inherit them over fork. All checks on those images happen while
 * they are decoded, so an image this criu cannot restore fails before any task exists,
 * with one line naming the image and the entry.
 */
#ifndef CR_TASK_IMAGE_H
#define CR_TASK_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "image.h"
#include "pstree.h"
#include "restorer-args.h"
#include "task-sched.h"

/* One VMA: vma_entry with what mm-ext-PID.img adds to it. */
struct vma_image {
	uint64_t start, end;
	uint64_t pgoff; /* bytes, as mmap() takes it */
	uint64_t shmid; /* VMA_ANON_SHARED: the object; file-backed: the files.img id */
	uint64_t madv; /* VMA_MADV_* (vma.h) */
	uint32_t prot, flags; /* PROT_*, MAP_* as mmap() takes them */
	uint32_t status; /* VMA_* (vma.h) */
	uint32_t fdflags; /* file-backed: how the file is opened */
	bool locked; /* mlock()ed */
	char *anon_name; /* PR_SET_VMA_ANON_NAME; NULL: none */
};

/*
 * A run of stored pages: len bytes at vaddr, at byte file_off of the pages image of chain
 * level `level` (0: this dump; N: the Nth parent images directory, images_chain_dir()).
 * remote: a PE_LAZY run without data (dump --lazy-pages): the pages are in the dump's
 * source, which `criu lazy-pages --page-server` asks for them at address file_off.
 */
struct page_run {
	uint64_t vaddr, len, file_off;
	uint32_t level;
	uint32_t remote;
};

/*
 * One pagemap image: its runs in image order, their data in pages-<pages_id>.img, or, for
 * runs a pre-dump chain holds (PE_PARENT), in level_pages_id[run->level] of that level.
 */
struct page_map {
	uint32_t pages_id;
	uint32_t level_pages_id[IMG_CHAIN_MAX];
	unsigned int nr_levels; /* levels the runs use: 1 without parents */
	struct page_run *runs;
	unsigned int nr_runs;
	uint64_t total_bytes; /* of all runs */
	uint64_t data_bytes; /* of this level's runs, in its pages image */
};

/* One thread: core-TID.img's thread_info and thread_core. */
struct thread_image {
	pid_t tid;
	struct rst_gpregs regs;
	uint64_t blk_sigset;
	uint64_t clear_tid_addr;
	uint64_t robust_list, robust_list_len;
	bool has_rseq;
	uint32_t rseq_len, rseq_sig;
	uint64_t rseq_ptr, rseq_cs;
	bool has_sas;
	uint32_t sas_flags;
	uint64_t sas_sp, sas_size;
	struct rst_siginfo *pending; /* queued for this thread alone */
	unsigned int nr_pending;
	uint8_t *xsave; /* standard-format XSAVE buffer of this machine's size */
	uint32_t xsave_len;
	struct sched_image sched;
	uint32_t seccomp_mode; /* SECCOMP_MODE__* */
	uint32_t *seccomp_chain; /* filter mode: seccomp.img indices, oldest first */
	uint32_t nr_seccomp;
	uint32_t cg_set; /* cgroup.img's set; 0: none recorded */
};

/*
 * MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, _PRIVATE_EXPEDITED, _PRIVATE_EXPEDITED_SYNC_CORE
 * and _PRIVATE_EXPEDITED_RSEQ: what MEMBARRIER_CMD_GET_REGISTRATIONS can report.
 */
#define MEMBARRIER_REGISTER_CMDS ((1u << 2) | (1u << 4) | (1u << 6) | (1u << 8))

#define TASK_NR_RLIMITS 16 /* RLIM_NLIMITS: task_rlimits_entry is indexed by resource */

struct rlimit_image {
	uint64_t cur, max;
};

/* One process: the main thread's task_core_entry, every thread, its address space. */
struct task_image {
	struct pstree_item *item;
	uint32_t state; /* TASK_ALIVE, TASK_STOPPED, or TASK_DEAD for a zombie */
	uint32_t exit_code; /* a zombie's wait status */
	uint32_t stop_signo; /* TASK_STOPPED: the signal that stops it again */
	char comm[16];
	uint32_t personality;
	uint32_t cg_set; /* cgroup.img's set; 0: none recorded (a zombie) */

	struct rst_sigaction sigactions[RST_NSIG]; /* index sig - 1 */
	uint64_t sigaction_set; /* bit sig - 1: restore it */
	struct rlimit_image rlimits[TASK_NR_RLIMITS];
	unsigned int nr_rlimits;
	bool has_itimers;
	uint64_t itimers[3][4]; /* as rst_args.itimers */
	struct rst_posix_timer *posix_timers;
	unsigned int nr_posix_timers;
	struct rst_siginfo *shared_pending;
	unsigned int nr_shared_pending;
	/* The MEMBARRIER_CMD_REGISTER_* commands the address space was registered with. */
	uint32_t membarrier_registrations;
	bool has_oom_score_adj;
	int32_t oom_score_adj;
	bool has_loginuid;
	uint32_t loginuid; /* as criu sees it */
	bool has_pdeath_sig, has_child_subreaper;
	uint32_t pdeath_sig, child_subreaper;
	bool has_creds;
	struct rst_creds creds; /* .groups is set when the args are filled */
	uint32_t *groups;

	/* mm-PID.img: .auxv, .auxv_size and .exe_fd are set when the args are filled. */
	struct rst_mm_map mm_map;
	uint64_t *auxv;
	unsigned int nr_auxv;
	uint32_t exe_file_id;
	bool has_dumpable, has_thp_disabled;
	uint32_t dumpable, thp_disabled;
	struct vma_image *vmas; /* in address order */
	unsigned int nr_vmas;
	struct rst_aio_ring *aio_rings; /* mm's aios: their VMAs are private anonymous memory */
	unsigned int nr_aio_rings;
	struct rst_guard *guards; /* mm's VMA_AREA_GUARD entries, in address order */
	unsigned int nr_guards;
	struct page_map pages; /* pagemap-PID.img */

	struct thread_image *threads; /* as pstree.img lists them: threads[0] is the main one */
	unsigned int nr_threads;
};

static inline bool task_image_zombie(const struct task_image *ti)
{
	return ti->state == TASK_DEAD;
}

/*
 * After pstree_read(): decode the images of every task into item->image. A zombie's
 * thread list becomes its pid alone (CRIU does not write one for it). 0 or -errno.
 */
int task_images_collect(void);
void task_images_free(void);

/* A VMA the restorer maps itself (not the kernel's [vdso], [vvar] or [vsyscall]). */
bool vma_image_mapped(const struct vma_image *vma);

/*
 * A pagemap image (pagemap-PID or pagemap-shmem-SHMID) into map, each run checked against
 * the size of its pages image; runs with data elsewhere (a parent image, lazy pages) are
 * refused. 0 or -errno (logged, naming the image and entry).
 */
int page_map_read(enum cr_img_type type, unsigned long id, struct page_map *map);
/* The same, with PE_PARENT runs found in the parent images directories (pre-dumps). */
int page_map_read_chain(enum cr_img_type type, unsigned long id, struct page_map *map);
/* The parent images directory's, as page_map_read_chain() (its levels counted from 1). */
int page_map_read_parent(enum cr_img_type type, unsigned long id, struct page_map *map);
void page_map_free(struct page_map *map);
/* The first of runs (sorted by address, not overlapping) that ends after addr; nr_runs: none. */
unsigned int page_run_after(const struct page_run *runs, unsigned int nr_runs, uint64_t addr);

#endif
