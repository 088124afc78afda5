/*
 * The args block handed from restorer-setup.c (criu, libc) to the restorer blob
 * (criu/pie, freestanding): fixed-width types only, so both sides agree on the layout.
 * The block and every array it points to live inside the restorer region, already at
 * their final addresses, so plain pointers (as u64) are valid in the blob.
 */
#ifndef CR_RESTORER_ARGS_H
#define CR_RESTORER_ARGS_H

#include <stdint.h>

/* The sync protocol with the main criu process (sync_fd). */
#define RST_REPORT_MAGIC 0x52535452u /* "RSTR" */
#define RST_CMD_GO 'G'

/* Sent once by the task: status 0 when parked before its final sigreturn, or -errno. */
struct rst_report {
	uint32_t magic;
	int32_t status;
	/* The region the blob runs in: criu unmaps it once the task has left it. */
	uint64_t region_start;
	uint64_t region_len;
	/* The task already printed its error on criu's stderr: criu need not repeat it. */
	uint32_t error_shown;
	uint32_t pad;
};

#define RST_ARGS_MAGIC 0x52535441u /* "RSTA": the blob checks it came from this criu */

#define RST_NSIG 64
#define RST_SIGINFO_SIZE 128
#define RST_MAX_WORKERS 8
#define RST_WORKER_STACK_SIZE (64u << 10)
#define RST_MAIN_STACK_SIZE (128u << 10)
/* A restored thread's stack in the region: its own state, a log line and its sigframe. */
#define RST_THREAD_STACK_SIZE (32u << 10)

/*
 * rst_vma.status: what the blob needs to know of a VMA (not the image's status bits).
 * RST_VMA_ACCOUNT: the VMA had VM_ACCOUNT (private, once writable); the blob maps exactly
 * these (and those it reads pages into) writable first, since PROT_WRITE on a private
 * mapping gives it VM_ACCOUNT and the kernel merges neighbours that agree in it.
 */
#define RST_VMA_ACCOUNT (1u << 0)
#define RST_VMA_LOCKED (1u << 1) /* mlock()ed (VmFlags "lo") */
/*
 * SysV shared memory (sysv-shm.h): fd is the segment's id. The piece at pgoff 0 attaches
 * the whole segment with shmat() (flags: its SHM_* flags); every piece is then
 * mprotect()ed to its prot.
 */
#define RST_VMA_SYSV (1u << 2)
/*
 * Lazy restore (uffd.h): the blob registers the VMA on rst_args.uffd (missing pages) and
 * reads none of its pages: the lazy-pages daemon copies them in.
 */
#define RST_VMA_LAZY (1u << 3)
/*
 * Mapped and filled before the fork (mem-cow.h), at rst_vma.premapped in the arena,
 * sharing pages with the parent or children: the blob moves it to its place (mremap) and
 * reads none of its pages.
 */
#define RST_VMA_PREMAPPED (1u << 4)
#define RST_VMA_HAS_PAGES (1u << 31) /* stored pages must be read into this VMA */

/* One VMA to recreate (those the blob maps: not the kernel's special mappings). */

struct rst_vma {
	uint64_t start;
	uint64_t end;
	uint64_t pgoff; /* bytes, as mmap() takes it */
	uint64_t madv; /* VMA_MADV_* (vma.h): 1 << MADV_x */
	uint32_t prot; /* final PROT_* */
	uint32_t flags; /* MAP_* as mmap() takes them */
	uint32_t status; /* RST_VMA_* */
	int32_t fd; /* the mapped file or shared memory object, -1 for private anonymous memory */
	uint64_t anon_name; /* NUL-terminated PR_SET_VMA_ANON_NAME name in the region; 0: none */
	uint64_t premapped; /* RST_VMA_PREMAPPED: where it waits in the arena */
};

/*
 * An AIO context's ring (io_setup()): its id is the ring's address. Restore maps it as
 * private anonymous memory holding the dumped ring, then makes a context of nr_req
 * requests, brings its kernel-kept tail to the dumped one, copies the events and head in
 * and moves the new ring over the old (mremap), so the id the task holds names it again.
 */
struct rst_aio_ring {
	uint64_t addr;
	uint64_t len;
	uint32_t nr_req;
	uint32_t pad;
};

/* A guard region (MADV_GUARD_INSTALL) inside a VMA: its pages fault with SIGSEGV. */
struct rst_guard {
	uint64_t start;
	uint64_t end;
};

/* The kernel's limit on an anonymous VMA name (ANON_VMA_NAME_MAX_LEN), NUL included. */
#define RST_ANON_NAME_MAX 80

/* A special mapping ([vvar], [vvar_vclock], [vdso]): where it is now, where it goes. */
struct rst_special {
	uint64_t cur_start; /* 0: this kernel does not have it */
	uint64_t dumped_start;
	uint64_t len;
	uint64_t scratch; /* where it waits in the region while the others move */
};

enum {
	RST_SPECIAL_VVAR,
	RST_SPECIAL_VVAR_VCLOCK,
	RST_SPECIAL_VDSO,
	RST_NR_SPECIALS,
};

/*
 * One preadv() of the page image: nr_iov iovecs (struct iovec layout: base, len)
 * starting at iov_first, filled from the file starting at file_off. Workers pull
 * reads from a shared counter.
 */
struct rst_page_read {
	uint64_t file_off;
	uint64_t bytes;
	uint32_t iov_first;
	uint32_t nr_iov;
	int32_t fd; /* the pages image of its chain level (pre-dumps) */
	uint32_t level;
};

struct rst_iovec {
	uint64_t base;
	uint64_t len;
};

/* The kernel's struct sigaction for rt_sigaction() on x86_64. */
struct rst_sigaction {
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

struct rst_siginfo {
	uint8_t raw[RST_SIGINFO_SIZE];
};

struct rst_posix_timer {
	uint32_t id;
	uint32_t clock_id;
	uint32_t signo;
	uint32_t notify; /* SIGEV_* */
	uint32_t notify_tid;
	uint32_t pad;
	uint64_t sival;
	uint64_t interval_sec, interval_nsec;
	uint64_t value_sec, value_nsec;
};

/* struct user_regs_struct order; the blob turns it into a sigcontext. */
struct rst_gpregs {
	uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	uint64_t ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
	uint64_t fs_base, gs_base;
};

/* The kernel's struct prctl_mm_map (PR_SET_MM_MAP). */
struct rst_mm_map {
	uint64_t start_code, end_code, start_data, end_data;
	uint64_t start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint64_t auxv; /* pointer to the auxv words */
	uint32_t auxv_size; /* bytes */
	uint32_t exe_fd; /* (u32)-1: leave /proc/PID/exe alone */
};

/* One thread's own state: threads[0] of the args is the main thread (the task itself). */
/* Pid namespaces a thread may be in, the tree's own and those nested below it. */
#define RST_PID_LEVELS 8

struct rst_thread {
	int32_t tid; /* as the task sees it: set_tid[0] */
	/* clone3()'s set_tid: the tid in its own pid namespace first, the tree's last. */
	int32_t set_tid[RST_PID_LEVELS];
	uint32_t nr_set_tid;
	uint32_t has_rseq;
	uint64_t rseq_ptr;
	uint32_t rseq_len;
	uint32_t rseq_sig;
	uint64_t rseq_cs; /* put in the area once registered: a section the thread is in */
	uint64_t clear_tid_addr;
	uint64_t robust_list, robust_list_len;
	uint32_t has_sas;
	uint32_t sas_flags;
	uint64_t sas_sp, sas_size;
	uint32_t nr_pending;
	uint32_t xsave_len;
	uint64_t pending; /* struct rst_siginfo[nr_pending], queued for this thread alone */
	/* The final frame. */
	struct rst_gpregs regs; /* fs_base/gs_base are set with arch_prctl */
	uint64_t blk_sigset;
	uint64_t xsave; /* 64-byte aligned copy of the NT_X86_XSTATE buffer, + 4 for magic2 */
	uint64_t stack_top; /* other threads run on this stack in the region; 0 for the main one */
	/*
	 * Seccomp (seccomp.h): the mode (0 none, 1 strict, 2 filter); in filter mode its
	 * nr_seccomp filters, oldest first, at seccomp_first of rst_args.seccomp_filters.
	 */
	uint32_t seccomp_mode;
	uint32_t nr_seccomp;
	uint32_t seccomp_first;
	uint32_t pad;
};

/* One seccomp filter to install: len BPF instructions at prog, with flags. */
struct rst_seccomp_filter {
	uint64_t prog;
	uint32_t len;
	uint32_t flags;
};

/* The longest LSM label the restorer sets, with its NUL. */
#define RST_LSM_LABEL_MAX 1024

struct rst_creds {
	uint32_t uid, gid, euid, egid, suid, sgid, fsuid, fsgid;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	uint32_t secbits;
	uint32_t no_new_privs;
	uint32_t nr_groups;
	uint32_t pad;
	uint64_t groups; /* pointer to u32 gids */
	/*
	 * Capabilities kept in the effective and permitted sets beyond the dumped ones until
	 * the seccomp filters are in: a task without no_new_privs installs them only with
	 * CAP_SYS_ADMIN, which the dumped sets may lack (dropped after installing them).
	 */
	uint64_t keep_caps;
	/*
	 * LSM labels each thread writes to its /proc/thread-self/attr/ once its creds are
	 * set, as lsm.c rendered them ("changeprofile NAME" for AppArmor, a context for
	 * SELinux); "" for none. SELinux refuses a new current label to a task with threads:
	 * there the main thread writes it before it clones the others (lsm_before_threads).
	 */
	uint32_t lsm_before_threads;
	uint32_t pad2;
	char lsm_current[RST_LSM_LABEL_MAX];
	char lsm_sockcreate[RST_LSM_LABEL_MAX];
};

/*
 * A lock the task re-takes (file-lock.c): kind FILE_LOCK_POSIX, _FLOCK or _OFD
 * (file-lock.h), type F_RDLCK or F_WRLCK, the range as struct flock takes it from the
 * start of the file (len 0: to its end); flock() locks are whole-file.
 */
struct rst_file_lock {
	uint32_t kind;
	uint32_t type;
	int32_t fd;
	uint32_t pad;
	int64_t start;
	int64_t len;
};

struct rst_args {
	uint32_t magic;
	int32_t pid; /* as the task sees itself: in a nested pid namespace, its innermost pid */
	int32_t log_fd; /* -1: no log */
	int32_t loglevel;
	int32_t sync_fd;
	int32_t log_pid; /* as the images name it, for the log's prefix */
	int32_t proc_fd; /* proc's root (PROC_SFD) where the task's /proc may be missing; -1 */

	uint64_t region_start; /* the restorer region: blob, this block, arrays, stacks */
	uint64_t region_len;
	uint64_t task_size; /* top of user address space: unmap up to here */

	uint64_t vmas; /* struct rst_vma[nr_vmas] */
	uint32_t nr_vmas;
	uint32_t nr_page_reads;
	uint64_t page_reads; /* struct rst_page_read[nr_page_reads] */
	uint64_t iovs; /* struct rst_iovec[] */
	uint64_t total_page_bytes;

	/* Parallel page reading: worker i runs on the stack ending at worker_stack_top[i]. */
	uint32_t nr_workers; /* extra threads besides the task itself; 0: read alone */
	uint32_t next_read; /* shared work counter */
	uint32_t worker_tids[RST_MAX_WORKERS]; /* cleared by the kernel at thread exit */
	int32_t worker_err; /* first failure of a worker, -errno */
	uint32_t pad0;
	uint64_t worker_stack_top[RST_MAX_WORKERS];

	struct rst_special specials[RST_NR_SPECIALS];

	struct rst_mm_map mm_map;
	char comm[16];

	struct rst_sigaction sigactions[RST_NSIG]; /* index sig - 1 */
	uint64_t sigaction_set; /* bit sig - 1: dumped, restore it */

	uint64_t itimers[3][4]; /* ITIMER_REAL/VIRTUAL/PROF: interval s, us, value s, us */
	uint32_t nr_itimers;
	uint32_t nr_posix_timers;
	uint64_t posix_timers; /* struct rst_posix_timer[] */

	uint32_t has_pdeath_sig, pdeath_sig;
	uint32_t has_dumpable, dumpable;
	uint32_t has_child_subreaper, child_subreaper;
	uint32_t has_thp_disabled, thp_disabled;

	uint32_t nr_shared_pending;
	uint32_t pad1;
	uint64_t shared_pending; /* struct rst_siginfo[] */

	/*
	 * Threads: the main one creates the others (clone3 with their tids); each restores
	 * its own state, counts itself in threads_restored (futex), and waits until the main
	 * one, released by criu, sets threads_release (futex).
	 */
	uint32_t nr_threads;
	uint32_t threads_restored;
	uint64_t threads; /* struct rst_thread[nr_threads] */
	int32_t thread_err; /* first failure of another thread, -errno */
	uint32_t threads_release;

	uint32_t has_creds;
	uint32_t pad2;
	struct rst_creds creds;

	/* criu's fds (sync, log, pages, mapped files, images dir): closed before sigreturn. */
	uint32_t nr_close_fds;
	uint64_t close_fds; /* int32_t[] */

	/*
	 * The first nr_file_fds of close_fds are the mapped files' and the exe's: closed as
	 * soon as they are mapped and set, before the file locks are re-taken, since any
	 * close() of a file drops the POSIX locks the process holds on it.
	 */
	uint32_t nr_file_fds;
	uint32_t nr_file_locks;
	uint64_t file_locks; /* struct rst_file_lock[] */

	/* AIO rings: mapped as anonymous memory with their pages, made rings again. */
	uint32_t nr_aio_rings;
	uint64_t aio_rings; /* struct rst_aio_ring[] */

	/* Installed once the pages are in: installing one zaps what the range holds. */
	uint32_t nr_guards;
	uint64_t guards; /* struct rst_guard[] */

	/*
	 * struct rst_seccomp_filter[], the threads' chains one after another. The first
	 * nr_seccomp_shared filters are the same in every thread: the main thread installs
	 * them for all (SECCOMP_FILTER_FLAG_TSYNC), so that they are one filter again, as
	 * TSYNC later needs; each thread then adds the rest of its own.
	 */
	uint64_t seccomp_filters;
	uint32_t nr_seccomp_shared;

	/*
	 * Lazy restore: the task's userfaultfd and its connection to the lazy-pages daemon
	 * (-1: none). Once the lazy VMAs are mapped and registered the blob sends the uffd
	 * over lazy_sock and closes both: no later step may touch a lazy page before that,
	 * and the restored program never sees either fd.
	 */
	int32_t uffd;
	int32_t lazy_sock;
	uint32_t pad3;

	/*
	 * The copy-on-write arena (mem-cow.h): the tree's premapped VMAs wait there, out of
	 * the way of every dumped VMA. Kept by unmap_old(), unmapped once they are moved out.
	 */
	uint64_t cow_arena_start;
	uint64_t cow_arena_len;
};

#endif
