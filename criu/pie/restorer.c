/*
 * The restorer blob: runs inside the task being restored, on a stack in its own region,
 * after restorer-setup.c jumped here. Freestanding: no libc, no globals, raw syscalls
 * through syscalls.h only; everything comes from the args block (restorer-args.h).
 * It rebuilds the address space and task state, creates the other threads (each restores
 * its own state), reports to criu, stops until criu releases it, and every thread
 * becomes the dumped program with rt_sigreturn.
 */
#include <stdint.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <linux/mman.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <linux/ioctl.h>
#include <linux/userfaultfd.h>
#include <asm/prctl.h>

#include "file-lock.h"
#include "pie-lib.h"
#include "syscalls.h"
#include "restorer-args.h"
#include "sigframe-x86.h"
#include "vma.h"

#define PAGE_SIZE 4096ul
#define EINTR 4
#define EIO 5
#define EBUSY 16
#define EEXIST 17
#define EINVAL 22
#define EPROTO 71
#define EAGAIN 11

#define SIGKILL 9
#define SIGSTOP 19
#define SS_DISABLE 2

#define PR_TIMER_CREATE_RESTORE_IDS 77 /* kernel 6.17+: timer_create() takes the id asked for */

#define pr_log(a, level, fmt, ...) rst_log((a)->log_fd, (a)->loglevel, (a)->log_pid, level, fmt, ##__VA_ARGS__)
#define pr_err(a, fmt, ...) pr_log(a, RST_LOG_ERROR, fmt, ##__VA_ARGS__)
#define pr_warn(a, fmt, ...) pr_log(a, RST_LOG_WARN, fmt, ##__VA_ARGS__)
#define pr_info(a, fmt, ...) pr_log(a, RST_LOG_INFO, fmt, ##__VA_ARGS__)
#define pr_debug(a, fmt, ...) pr_log(a, RST_LOG_DEBUG, fmt, ##__VA_ARGS__)

/* The x86_64 signal frame as rt_sigreturn reads it (sigframe-x86.h). */
struct rst_sigframe {
	uint64_t pretcode; /* rt_sigreturn finds the frame at sp - 8 */
	struct x86_ucontext uc;
	uint8_t info[RST_SIGINFO_SIZE];
};

static __attribute__((noreturn)) void fail(struct rst_args *a, long err)
{
	struct rst_report report = { RST_REPORT_MAGIC, (int32_t)err, a->region_start, a->region_len, 0, 0 };

	sys_write(a->sync_fd, &report, sizeof(report));
	sys_exit_group(1);
	__builtin_unreachable();
}

/* ---- 1. unmap everything that is not ours ---- */

struct range {
	uint64_t start, end;
};

/*
 * Keeps the region, the current special mappings and the copy-on-write arena (its
 * premapped VMAs: move_premapped()); everything else goes.
 */
static long unmap_old(struct rst_args *a)
{
	struct range keep[2 + RST_NR_SPECIALS], tmp;
	uint64_t pos = 0;
	int nr = 0, i, j;
	long ret;

	keep[nr++] = (struct range){ a->region_start, a->region_start + a->region_len };
	if (a->cow_arena_len)
		keep[nr++] = (struct range){ a->cow_arena_start, a->cow_arena_start + a->cow_arena_len };
	for (i = 0; i < RST_NR_SPECIALS; i++)
		if (a->specials[i].cur_start)
			keep[nr++] = (struct range){ a->specials[i].cur_start,
						     a->specials[i].cur_start + a->specials[i].len };
	for (i = 1; i < nr; i++)
		for (j = i; j > 0 && keep[j - 1].start > keep[j].start; j--) {
			tmp = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = tmp;
		}
	for (i = 0; i <= nr; i++) {
		uint64_t hole_end = i < nr ? keep[i].start : a->task_size;

		if (hole_end > pos) {
			ret = sys_munmap(pos, hole_end - pos);
			if (ret) {
				pr_err(a, "unmap %lx-%lx: %ld", pos, hole_end, ret);
				return ret;
			}
		}
		if (i < nr)
			pos = keep[i].end;
	}
	pr_debug(a, "unmapped all but the region %lx-%lx and the vdso", a->region_start,
		 a->region_start + a->region_len);
	return 0;
}

/* ---- 2. special mappings to their dumped addresses ---- */

static long move_special(struct rst_args *a, uint64_t from, uint64_t len, uint64_t to)
{
	long ret = sys_mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);

	if (ret != (long)to) {
		pr_err(a, "move special mapping %lx (%lu bytes) to %lx: %ld", from, len, to, ret);
		return ret < 0 ? ret : -EINVAL;
	}
	return 0;
}

/*
 * MREMAP_FIXED unmaps whatever sits at the destination, which may be another special
 * mapping not moved yet, or, for a premapped VMA, a special one: all of them wait in
 * scratch space (park_specials()) while the others move, then go to their places.
 */
static long park_specials(struct rst_args *a)
{
	struct rst_special *sp;
	long ret;
	int i;

	for (i = 0; i < RST_NR_SPECIALS; i++) {
		sp = &a->specials[i];
		if (sp->cur_start && sp->cur_start != sp->dumped_start) {
			ret = move_special(a, sp->cur_start, sp->len, sp->scratch);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static long place_specials(struct rst_args *a)
{
	struct rst_special *sp;
	long ret;
	int i;

	for (i = 0; i < RST_NR_SPECIALS; i++) {
		sp = &a->specials[i];
		if (sp->cur_start && sp->cur_start != sp->dumped_start) {
			ret = move_special(a, sp->scratch, sp->len, sp->dumped_start);
			if (ret)
				return ret;
			pr_debug(a, "special mapping %d: %lx -> %lx", i, sp->cur_start, sp->dumped_start);
		}
	}
	return 0;
}

/* ---- 3. map every VMA ---- */

/*
 * Which VMAs are mapped writable while their pages are read in. Only those with
 * VM_ACCOUNT (private and once writable: where stored pages live): adding PROT_WRITE to
 * any other private VMA would give it VM_ACCOUNT, and the kernel would then merge it
 * with a neighbour it stood apart from at dump time. Shared anonymous memory comes
 * filled from criu's object (shmem.c).
 */
static int vma_is_filled(const struct rst_vma *vma)
{
	/*
	 * A VMA without VM_ACCOUNT holding stored pages (a ptrace poke COW'ed them) must be
	 * writable too; it then may merge with a neighbour, which the dump side avoids by
	 * not storing pages equal to the file.
	 */
	return (vma->status & (RST_VMA_ACCOUNT | RST_VMA_HAS_PAGES)) != 0;
}

static long apply_madvise(struct rst_args *a, const struct rst_vma *vma)
{
	static const struct {
		uint32_t bit;
		int advice;
	} madv_map[] = {
		{ VMA_MADV_DONTFORK, MADV_DONTFORK },	{ VMA_MADV_DONTDUMP, MADV_DONTDUMP },
		{ VMA_MADV_HUGEPAGE, MADV_HUGEPAGE },	{ VMA_MADV_NOHUGEPAGE, MADV_NOHUGEPAGE },
		{ VMA_MADV_RANDOM, MADV_RANDOM },	{ VMA_MADV_SEQUENTIAL, MADV_SEQUENTIAL },
		{ VMA_MADV_WIPEONFORK, MADV_WIPEONFORK }, { VMA_MADV_MERGEABLE, MADV_MERGEABLE },
	};
	unsigned int i;
	long ret;

	for (i = 0; i < sizeof(madv_map) / sizeof(madv_map[0]); i++) {
		if (!(vma->madv & madv_map[i].bit))
			continue;
		ret = sys_madvise(vma->start, vma->end - vma->start, madv_map[i].advice);
		if (ret) {
			pr_err(a, "madvise(%d) %lx-%lx: %ld", madv_map[i].advice, vma->start, vma->end, ret);
			return ret;
		}
	}
	return 0;
}

/*
 * The name is per VMA, for shared anonymous memory too, so each mapping is named again
 * right after it is mapped. It also keeps apart neighbours that stood apart at dump only
 * by their names: the kernel merges adjacent VMAs that differ in nothing else.
 */
static long name_vma(struct rst_args *a, const struct rst_vma *vma)
{
	long ret;

	if (!vma->anon_name)
		return 0;
	ret = sys_prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, vma->start, vma->end - vma->start,
			vma->anon_name);
	if (ret)
		pr_err(a, "prctl(PR_SET_VMA_ANON_NAME) %lx-%lx \"%s\": %ld%s", vma->start, vma->end,
		       (const char *)vma->anon_name, ret,
		       ret == -EINVAL ? " (a kernel without CONFIG_ANON_VMA_NAME?)" : "");
	return ret;
}

/* The piece at offset 0 attaches the whole segment; each piece then gets its own prot. */
static long map_sysv_vma(struct rst_args *a, const struct rst_vma *vma)
{
	long addr, ret;

	if (!vma->pgoff) {
		addr = sys_shmat(vma->fd, vma->start, vma->flags);
		if (addr != (long)vma->start) {
			pr_err(a, "shmat SysV shared memory %d at %lx flags %x: %ld", vma->fd, vma->start,
			       vma->flags, addr);
			return addr < 0 ? addr : -EINVAL;
		}
	}
	ret = sys_mprotect(vma->start, vma->end - vma->start, vma->prot);
	if (ret)
		pr_err(a, "mprotect SysV piece %lx-%lx prot %x: %ld", vma->start, vma->end, vma->prot,
		       ret);
	return ret ? ret : apply_madvise(a, vma);
}

static long map_vma(struct rst_args *a, const struct rst_vma *vma)
{
	uint32_t prot = vma->prot;
	long addr, ret;

	if (vma->status & RST_VMA_SYSV)
		return map_sysv_vma(a, vma);
	if (vma_is_filled(vma))
		prot |= PROT_READ | PROT_WRITE;
	addr = sys_mmap(vma->start, vma->end - vma->start, prot, vma->flags | MAP_FIXED_NOREPLACE, vma->fd,
			vma->fd >= 0 ? vma->pgoff : 0);
	if (addr != (long)vma->start) {
		pr_err(a, "map vma %lx-%lx prot %x flags %x fd %d: %ld", vma->start, vma->end, vma->prot,
		       vma->flags, vma->fd, addr);
		if (addr >= 0) {
			sys_munmap(addr, vma->end - vma->start);
			return -EINVAL;
		}
		return addr;
	}
	pr_debug(a, "mapped %lx-%lx prot %x flags %x fd %d", vma->start, vma->end, vma->prot, vma->flags,
		 vma->fd);
	ret = name_vma(a, vma);
	return ret ? ret : apply_madvise(a, vma);
}

/*
 * A VMA premapped before the fork (it may share pages with the parent and children) to its
 * place, named and advised as a mapped one; still writable until finish_vmas().
 */
static long move_premapped_vma(struct rst_args *a, const struct rst_vma *vma)
{
	uint64_t len = vma->end - vma->start;
	long ret = sys_mremap(vma->premapped, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, vma->start);

	if (ret != (long)vma->start) {
		pr_err(a, "move premapped vma %lx (%lu bytes) to %lx: %ld", vma->premapped, len,
		       vma->start, ret);
		return ret < 0 ? ret : -EINVAL;
	}
	pr_debug(a, "moved premapped %lx-%lx from %lx", vma->start, vma->end, vma->premapped);
	ret = name_vma(a, vma);
	return ret ? ret : apply_madvise(a, vma);
}

/*
 * Before anything else is mapped: no dumped VMA of any task lies in the arena, so no move
 * lands on a premapped VMA not moved yet. What the arena still holds then (its reservation,
 * the parent's VMAs this task does not share) goes.
 */
static long move_premapped(struct rst_args *a)
{
	struct rst_vma *vmas = (struct rst_vma *)a->vmas;
	uint32_t i;
	long ret;

	if (!a->cow_arena_len)
		return 0;
	for (i = 0; i < a->nr_vmas; i++) {
		if (!(vmas[i].status & RST_VMA_PREMAPPED))
			continue;
		ret = move_premapped_vma(a, &vmas[i]);
		if (ret)
			return ret;
	}
	ret = sys_munmap(a->cow_arena_start, a->cow_arena_len);
	if (ret)
		pr_err(a, "unmap the copy-on-write arena %lx-%lx: %ld", a->cow_arena_start,
		       a->cow_arena_start + a->cow_arena_len, ret);
	return ret;
}

static long map_vmas(struct rst_args *a)
{
	struct rst_vma *vmas = (struct rst_vma *)a->vmas;
	uint32_t i;
	long ret;

	for (i = 0; i < a->nr_vmas; i++) {
		if (vmas[i].status & RST_VMA_PREMAPPED)
			continue;
		ret = map_vma(a, &vmas[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- 3b. lazy pages: registered on the uffd, handed to the lazy-pages daemon ---- */

#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define MSG_NOSIGNAL 0x4000

/* struct msghdr and a cmsghdr with one fd, as the kernel reads them on x86_64. */
struct rst_msghdr {
	uint64_t name;
	uint32_t namelen;
	uint32_t pad;
	uint64_t iov;
	uint64_t iovlen;
	uint64_t control;
	uint64_t controllen;
	int32_t flags;
	uint32_t pad2;
};

struct rst_cmsg_fd {
	uint64_t len;
	int32_t level;
	int32_t type;
	int32_t fd;
	uint32_t pad;
};

static long register_lazy_vma(struct rst_args *a, const struct rst_vma *vma)
{
	struct uffdio_register reg = {
		.range = { vma->start, vma->end - vma->start },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	long ret = sys_ioctl(a->uffd, UFFDIO_REGISTER, &reg);

	if (ret)
		pr_err(a, "register %lx-%lx on the userfaultfd: %ld", vma->start, vma->end, ret);
	return ret;
}

/* One byte carrying the uffd (SCM_RIGHTS) on the daemon connection. */
static long send_uffd(struct rst_args *a)
{
	char byte = 'U';
	struct rst_iovec iov = { (uint64_t)&byte, 1 };
	struct rst_cmsg_fd cmsg = { 16 + sizeof(int32_t), SOL_SOCKET, SCM_RIGHTS, a->uffd, 0 };
	struct rst_msghdr mh = {
		.iov = (uint64_t)&iov, .iovlen = 1, .control = (uint64_t)&cmsg, .controllen = sizeof(cmsg),
	};
	long ret = sys_sendmsg(a->lazy_sock, &mh, MSG_NOSIGNAL);

	if (ret != 1) {
		pr_err(a, "send the userfaultfd to the lazy-pages daemon: %ld", ret);
		return ret < 0 ? ret : -EIO;
	}
	return 0;
}

/*
 * Right after the VMAs are mapped, before any step that may touch their memory (the
 * kernel writes the rseq area of a thread, often in a lazy VMA, on its way back to user
 * mode): a fault on a lazy page waits until the daemon, which needs the uffd, serves it.
 */
static long start_lazy_pages(struct rst_args *a)
{
	struct rst_vma *vmas = (struct rst_vma *)a->vmas;
	uint32_t i, nr = 0;
	long ret = 0;

	if (a->uffd < 0)
		return 0;
	for (i = 0; i < a->nr_vmas && !ret; i++)
		if (vmas[i].status & RST_VMA_LAZY) {
			ret = register_lazy_vma(a, &vmas[i]);
			nr++;
		}
	if (!ret)
		ret = send_uffd(a);
	sys_close(a->uffd);
	sys_close(a->lazy_sock);
	a->uffd = a->lazy_sock = -1;
	if (!ret)
		pr_debug(a, "%u vmas left to the lazy-pages daemon", nr);
	return ret;
}

/* ---- 4. pages, read straight into place ---- */

/* One page-image read; a short preadv (over 2 GiB, signals) continues where it stopped. */
static long do_page_read(struct rst_args *a, struct rst_page_read *rd)
{
	struct rst_iovec *iov = (struct rst_iovec *)a->iovs + rd->iov_first;
	uint64_t off = rd->file_off, left = rd->bytes;
	uint32_t nr_iov = rd->nr_iov;
	long done;

	while (left) {
		done = sys_preadv(rd->fd, iov, nr_iov, off);
		if (done == -EINTR)
			continue;
		if (done <= 0) {
			pr_err(a, "read %lu bytes of pages at file offset %lx into %lx: %ld", left, off,
			       iov->base, done ? done : -EIO);
			return done ? done : -EIO;
		}
		off += done;
		left -= done;
		while (done) {
			if ((uint64_t)done >= iov->len) {
				done -= iov->len;
				iov++;
				nr_iov--;
			} else {
				iov->base += done;
				iov->len -= done;
				done = 0;
			}
		}
	}
	return 0;
}

/* Every reader (the task and its workers) takes the next read until none is left. */
static long read_pages_loop(struct rst_args *a)
{
	struct rst_page_read *reads = (struct rst_page_read *)a->page_reads;
	uint32_t idx;
	long ret;

	while ((idx = __atomic_fetch_add(&a->next_read, 1, __ATOMIC_RELAXED)) < a->nr_page_reads) {
		if (__atomic_load_n(&a->worker_err, __ATOMIC_RELAXED))
			return 0;
		ret = do_page_read(a, &reads[idx]);
		if (ret)
			return ret;
	}
	return 0;
}

static void page_worker(struct rst_args *a)
{
	long ret = read_pages_loop(a);
	int32_t none = 0;

	if (ret)
		__atomic_compare_exchange_n(&a->worker_err, &none, (int32_t)ret, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
}

/*
 * clone() a thread of this task running fn(a) on its own stack, then exiting. The kernel
 * stores its tid in *tid and clears it (with a futex wake) when the thread is gone.
 */
static long clone_worker(struct rst_args *a, uint64_t stack_top, uint32_t *tid, void (*fn)(struct rst_args *))
{
	register ulong r10 asm("r10") = (ulong)tid; /* child_tid */
	register ulong r8 asm("r8") = 0; /* tls */
	register ulong r12 asm("r12") = (ulong)fn;
	register ulong r13 asm("r13") = (ulong)a;
	ulong flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
		      CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
	long ret;

	asm volatile("syscall\n\t"
		     "test %%rax, %%rax\n\t"
		     "jnz 1f\n\t"
		     "xor %%ebp, %%ebp\n\t"
		     "mov %%r13, %%rdi\n\t"
		     "call *%%r12\n\t"
		     "mov %[nr_exit], %%eax\n\t"
		     "xor %%edi, %%edi\n\t"
		     "syscall\n\t"
		     "hlt\n"
		     "1:"
		     : "=a"(ret)
		     : "a"(__NR_clone), "D"(flags), "S"(stack_top), "d"(tid), "r"(r10), "r"(r8), "r"(r12),
		       "r"(r13), [nr_exit] "i"(__NR_exit)
		     : "rcx", "r11", "memory");
	return ret;
}

static void join_workers(struct rst_args *a, uint32_t nr_started)
{
	uint32_t i, tid;

	for (i = 0; i < nr_started; i++)
		while ((tid = __atomic_load_n(&a->worker_tids[i], __ATOMIC_ACQUIRE)) != 0)
			sys_futex(&a->worker_tids[i], FUTEX_WAIT, tid, 0);
}

/*
 * First-touch faults, not the copy, dominate restore time (Documentation/design.md §14): several
 * threads reading disjoint parts spread the faults over the cores.
 */
static long read_pages(struct rst_args *a)
{
	uint32_t started = 0;
	long ret = 0;

	while (started < a->nr_workers) {
		ret = clone_worker(a, a->worker_stack_top[started], &a->worker_tids[started], page_worker);
		if (ret < 0) {
			pr_warn(a, "cannot start page reader %u: %ld; reading with fewer", started, ret);
			break;
		}
		started++;
	}
	ret = read_pages_loop(a);
	join_workers(a, started);
	if (!ret)
		ret = a->worker_err;
	if (!ret)
		pr_debug(a, "read %lu bytes of pages in %u reads with %u threads", a->total_page_bytes,
			 a->nr_page_reads, started + 1);
	return ret;
}

/* ---- 5. final protections, mlock ---- */

#define MADV_GUARD_INSTALL 102

/*
 * Guard regions, once the pages are in (installing one zaps what its range holds) and
 * before mlock (the kernel refuses to install one in a locked VMA).
 */
static long install_guards(struct rst_args *a)
{
	const struct rst_guard *guards = (const struct rst_guard *)a->guards;
	long ret;

	for (uint32_t i = 0; i < a->nr_guards; i++) {
		ret = sys_madvise(guards[i].start, guards[i].end - guards[i].start, MADV_GUARD_INSTALL);
		if (ret) {
			pr_err(a, "guard region %lx-%lx (MADV_GUARD_INSTALL): %ld", guards[i].start,
			       guards[i].end, ret);
			return ret;
		}
	}
	return 0;
}

static long finish_vmas(struct rst_args *a)
{
	struct rst_vma *vmas = (struct rst_vma *)a->vmas, *vma;
	uint32_t i;
	long ret;

	for (i = 0; i < a->nr_vmas; i++) {
		vma = &vmas[i];
		if (vma_is_filled(vma)) {
			ret = sys_mprotect(vma->start, vma->end - vma->start, vma->prot);
			if (ret) {
				pr_err(a, "mprotect %lx-%lx to %x: %ld", vma->start, vma->end, vma->prot, ret);
				return ret;
			}
		}
		if (vma->status & RST_VMA_LOCKED) {
			ret = sys_mlock(vma->start, vma->end - vma->start);
			if (ret) {
				pr_err(a, "mlock %lx-%lx: %ld", vma->start, vma->end, ret);
				return ret;
			}
		}
	}
	return 0;
}

/* ---- 5b. AIO rings ---- */

#define O_ACCMODE 3
#define O_RDONLY 0
#define O_WRONLY 1
#define O_NONBLOCK 04000
#define O_CLOEXEC 02000000
#define AT_FDCWD -100

/* The ring's header as the kernel lays it out at the context's address (fs/aio.c). */
struct aio_ring_head {
	uint32_t id, nr, head, tail;
	uint32_t magic, compat_features, incompat_features, header_length;
};

struct aio_event {
	uint64_t data, obj;
	int64_t res, res2;
};

struct aio_iocb {
	uint64_t data;
	uint32_t key, rw_flags;
	uint16_t opcode;
	int16_t reqprio;
	uint32_t fildes;
	uint64_t buf, nbytes;
	int64_t offset;
	uint64_t reserved2;
	uint32_t flags, resfd;
};

#define AIO_CMD_PWRITE 1

/*
 * The kernel keeps a context's tail to itself: it advances only as requests complete.
 * One-byte writes to /dev/null complete at once; each is reaped right away, so the ring
 * never fills. Afterwards head == tail == the dumped tail.
 */
static long advance_aio_tail(struct rst_args *a, uint64_t ctx, uint32_t tail)
{
	struct aio_iocb cb = { .opcode = AIO_CMD_PWRITE, .nbytes = 1 };
	struct aio_iocb *cbp = &cb;
	struct aio_event ev;
	char byte = 0;
	long fd, ret = 0;
	uint32_t i;

	if (!tail)
		return 0;
	fd = sys_openat(AT_FDCWD, "/dev/null", O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err(a, "open /dev/null to advance an AIO ring: %ld", fd);
		return fd;
	}
	cb.fildes = fd;
	cb.buf = (uint64_t)&byte;
	for (i = 0; i < tail && !ret; i++) {
		ret = sys_io_submit(ctx, 1, &cbp);
		if (ret == 1)
			ret = sys_io_getevents(ctx, 1, 1, &ev, 0);
		ret = ret == 1 ? 0 : ret < 0 ? ret : -EIO;
	}
	sys_close(fd);
	if (ret)
		pr_err(a, "AIO ring %lx: advancing its tail to %u: %ld", ctx, tail, ret);
	return ret;
}

static long restore_aio_ring(struct rst_args *a, const struct rst_aio_ring *r)
{
	const struct aio_ring_head *old = (const struct aio_ring_head *)r->addr;
	struct aio_ring_head *ring;
	uint64_t ctx = 0;
	long ret;

	ret = sys_io_setup(r->nr_req, &ctx);
	if (ret) {
		pr_err(a, "io_setup(%u) for the AIO ring at %lx: %ld", r->nr_req, r->addr, ret);
		return ret;
	}
	ring = (struct aio_ring_head *)ctx;
	if (ring->nr != old->nr || old->tail >= old->nr || old->head >= old->nr) {
		pr_err(a, "AIO ring at %lx: %u events, head %u, tail %u; io_setup(%u) made %u events",
		       r->addr, old->nr, old->head, old->tail, r->nr_req, ring->nr);
		sys_io_destroy(ctx);
		return -EINVAL;
	}
	ret = advance_aio_tail(a, ctx, old->tail);
	if (ret) {
		sys_io_destroy(ctx);
		return ret;
	}
	/* The events not yet reaped come back with the head: the task reaps them as before. */
	memcpy(ring + 1, old + 1, old->nr * sizeof(struct aio_event));
	ring->head = old->head;
	ret = sys_mremap(ctx, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED, r->addr);
	if (ret != (long)r->addr) {
		pr_err(a, "mremap the new AIO ring %lx to %lx (%lu bytes): %ld", ctx, r->addr, r->len,
		       ret);
		sys_io_destroy(ctx);
		return ret < 0 ? ret : -EINVAL;
	}
	return 0;
}

static long restore_aio_rings(struct rst_args *a)
{
	const struct rst_aio_ring *rings = (const struct rst_aio_ring *)a->aio_rings;
	uint32_t i;
	long ret;

	for (i = 0; i < a->nr_aio_rings; i++) {
		ret = restore_aio_ring(a, &rings[i]);
		if (ret)
			return ret;
	}
	if (a->nr_aio_rings)
		pr_debug(a, "%u AIO rings restored", a->nr_aio_rings);
	return 0;
}

/* ---- 6. mm fields ---- */

static long restore_mm(struct rst_args *a)
{
	long ret = sys_prctl(PR_SET_MM, PR_SET_MM_MAP, &a->mm_map, sizeof(a->mm_map), 0);

	if (ret)
		pr_err(a, "prctl(PR_SET_MM_MAP) brk %lx-%lx stack %lx exe_fd %d: %ld", a->mm_map.start_brk,
		       a->mm_map.brk, a->mm_map.start_stack, (int)a->mm_map.exe_fd, ret);
	return ret;
}

/* ---- 6b. file locks ---- */

#define F_RDLCK 0
#define F_WRLCK 1
#define F_SETLK 6
#define F_UNLCK 2
#define F_GETFL 3
#define F_OFD_SETLK 37
#define F_GETSIG 11
#define F_SETLEASE 1024
#define SIGIO 29

struct rst_timespec {
	int64_t sec, nsec;
};
#define LOCK_SH 1
#define LOCK_EX 2
#define LOCK_NB 4
#define SEEK_SET 0

/* The kernel's struct flock on x86_64 (fcntl, not fcntl64). */
struct rst_flock {
	int16_t type;
	int16_t whence;
	int64_t start;
	int64_t len;
	int32_t pid;
};

/*
 * "/proc/self/fd/N" into buf (32 bytes); through proc_fd where there is one (the task's
 * namespace may have no /proc), "self/fd/N", relative to it.
 */
static void self_fd_path(char *buf, int fd, int proc_fd)
{
	static const char prefix[] = "/proc/self/fd/";
	const char *from = proc_fd >= 0 ? prefix + 6 : prefix;
	char digits[12];
	int n = 0;

	memcpy(buf, from, sizeof(prefix) - 1 - (from - prefix));
	buf += sizeof(prefix) - 1 - (from - prefix);
	do {
		digits[n++] = '0' + fd % 10;
		fd /= 10;
	} while (fd);
	while (n)
		*buf++ = digits[--n];
	*buf = '\0';
}

/*
 * F_SETLEASE lets the file's owner (by fsuid) take a lease, or a holder of CAP_LEASE in the
 * initial user namespace: the task took it as its dumped fsuid, which the restorer does not
 * have yet (in a user namespace criu's root maps to none of the tree's ids, so it has neither).
 */
static long set_lease(struct rst_args *a, int fd, long type)
{
	long old_fsuid, ret;

	if (!a->has_creds)
		return sys_fcntl(fd, F_SETLEASE, type);
	old_fsuid = sys_setfsuid(a->creds.fsuid);
	ret = sys_fcntl(fd, F_SETLEASE, type);
	sys_setfsuid(old_fsuid);
	return ret;
}

/*
 * A lease being broken: the lease it had (what the fd's access mode allows), then an
 * open of the file that conflicts with it the way the dumped break did, which fails with
 * EWOULDBLOCK and starts the break again (the kernel's timer starts over). F_SETLEASE
 * made the task the file's owner, so the break's signal (F_SETSIG's, SIGIO without) is
 * the task's: it is taken back here, with every signal blocked, before the dumped ones
 * are queued (criu sets the dumped owner later).
 */
static long take_breaking_lease(struct rst_args *a, const struct rst_file_lock *lk)
{
	uint32_t target = lk->type & ~FILE_LOCK_LEASE_BREAKING;
	struct rst_timespec no_wait = { 0, 0 };
	long flags, signo, ret;
	uint64_t break_sig;
	char path[32];

	flags = sys_fcntl(lk->fd, F_GETFL, 0);
	signo = sys_fcntl(lk->fd, F_GETSIG, 0);
	if (flags < 0 || signo < 0)
		return flags < 0 ? flags : signo;
	break_sig = 1ull << ((signo ? signo : SIGIO) - 1);
	ret = set_lease(a, lk->fd, (flags & O_ACCMODE) == O_RDONLY ? F_RDLCK : F_WRLCK);
	if (ret)
		return ret;
	self_fd_path(path, lk->fd, a->proc_fd);
	ret = sys_openat(a->proc_fd >= 0 ? a->proc_fd : AT_FDCWD, path,
			 (target == F_RDLCK ? O_RDONLY : O_WRONLY) | O_NONBLOCK, 0);
	if (ret >= 0) {
		sys_close(ret);
		pr_err(a, "fd %d: opening its file again did not break its lease", lk->fd);
		return -EINVAL;
	}
	if (ret != -EAGAIN)
		return ret;
	ret = sys_rt_sigtimedwait(&break_sig, 0, &no_wait, sizeof(break_sig));
	return ret > 0 || ret == -EAGAIN ? 0 : ret;
}

static long take_file_lock(struct rst_args *a, const struct rst_file_lock *lk)
{
	struct rst_flock fl = { (int16_t)lk->type, SEEK_SET, lk->start, lk->len, 0 };

	if (lk->kind == FILE_LOCK_LEASE)
		return lk->type & FILE_LOCK_LEASE_BREAKING ? take_breaking_lease(a, lk) :
							     set_lease(a, lk->fd, lk->type);
	/* Never wait: a lock someone else took since the dump fails the restore. */
	if (lk->kind == FILE_LOCK_FLOCK)
		return sys_flock(lk->fd, (lk->type == F_WRLCK ? LOCK_EX : LOCK_SH) | LOCK_NB);
	return sys_fcntl(lk->fd, lk->kind == FILE_LOCK_OFD ? F_OFD_SETLK : F_SETLK, &fl);
}

/*
 * A close() of any fd on a file drops every POSIX lock the process holds on it: the
 * fds criu opened to map files and set the exe are closed first (restore_mm() was their
 * last use), then the locks are taken, and nothing closes a file of the task after that
 * but criu's own images and sockets (close_criu_fds()).
 */
static long retake_file_locks(struct rst_args *a)
{
	const struct rst_file_lock *locks = (const struct rst_file_lock *)a->file_locks;
	int32_t *fds = (int32_t *)a->close_fds;
	uint32_t i;
	long ret;

	for (i = 0; i < a->nr_file_fds; i++)
		sys_close(fds[i]);
	for (i = 0; i < a->nr_file_locks; i++) {
		const struct rst_file_lock *lk = &locks[i];

		ret = take_file_lock(a, lk);
		if (ret) {
			pr_err(a, "fd %d: cannot re-take its %s lock (type %u) at %ld+%ld: %ld%s", lk->fd,
			       lk->kind == FILE_LOCK_POSIX ? "POSIX" :
			       lk->kind == FILE_LOCK_OFD   ? "OFD" :
			       lk->kind == FILE_LOCK_LEASE ? "lease" : "flock",
			       lk->type, lk->start, lk->len, ret,
			       ret != -EAGAIN			? "" :
			       lk->kind == FILE_LOCK_LEASE ? " (the file is open elsewhere)" :
							      " (someone else holds the file locked)");
			return ret;
		}
	}
	if (a->nr_file_locks)
		pr_debug(a, "%u file locks re-taken", a->nr_file_locks);
	return 0;
}

/* ---- 7. task-wide state ---- */

static long restore_sigactions(struct rst_args *a)
{
	long ret;
	int sig;

	for (sig = 1; sig <= RST_NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || !(a->sigaction_set & (1ull << (sig - 1))))
			continue;
		ret = sys_rt_sigaction(sig, &a->sigactions[sig - 1], 0, sizeof(uint64_t));
		if (ret) {
			pr_err(a, "rt_sigaction(%d) handler %lx flags %lx: %ld", sig, a->sigactions[sig - 1].handler,
			       a->sigactions[sig - 1].flags, ret);
			return ret;
		}
	}
	return 0;
}

static long restore_itimers(struct rst_args *a)
{
	uint32_t which;
	long ret;

	for (which = 0; which < a->nr_itimers; which++) {
		ret = sys_setitimer(which, a->itimers[which], 0);
		if (ret) {
			pr_err(a, "setitimer(%u): %ld", which, ret);
			return ret;
		}
	}
	return 0;
}

/* The kernel's struct sigevent for timer_create(). */
struct rst_sigevent {
	uint64_t value;
	int32_t signo;
	int32_t notify;
	int32_t tid;
	int32_t pad[11];
};

static long create_posix_timer(struct rst_args *a, const struct rst_posix_timer *t)
{
	struct rst_sigevent sev = { .value = t->sival, .signo = t->signo, .notify = t->notify,
				    .tid = t->notify_tid };
	uint64_t spec[4] = { t->interval_sec, t->interval_nsec, t->value_sec, t->value_nsec };
	int32_t id = t->id;
	long ret;

	ret = sys_timer_create(t->clock_id, &sev, &id);
	if (!ret && id != (int32_t)t->id)
		ret = -EINVAL;
	if (!ret)
		ret = sys_timer_settime(id, 0, spec, 0);
	if (ret)
		pr_err(a, "posix timer %u (clock %u, signal %u): %ld", t->id, t->clock_id, t->signo, ret);
	return ret;
}

/* Timer ids are visible to the program; PR_TIMER_CREATE_RESTORE_IDS keeps them. */
static long restore_posix_timers(struct rst_args *a)
{
	struct rst_posix_timer *timers = (struct rst_posix_timer *)a->posix_timers;
	long ret = 0;
	uint32_t i;

	if (!a->nr_posix_timers)
		return 0;
	ret = sys_prctl(PR_TIMER_CREATE_RESTORE_IDS, 1, 0, 0, 0);
	if (ret) {
		pr_err(a, "prctl(PR_TIMER_CREATE_RESTORE_IDS): %ld", ret);
		return ret;
	}
	for (i = 0; i < a->nr_posix_timers && !ret; i++)
		ret = create_posix_timer(a, &timers[i]);
	sys_prctl(PR_TIMER_CREATE_RESTORE_IDS, 0, 0, 0, 0);
	return ret;
}

/* One prctl option the dump recorded (has != 0), set again. */
static long prctl_set_recorded(struct rst_args *a, uint32_t has, int option, uint32_t value,
			       const char *name)
{
	long ret;

	if (!has)
		return 0;
	ret = sys_prctl(option, value, 0, 0, 0);
	if (ret)
		pr_err(a, "prctl(%s, %u): %ld", name, value, ret);
	return ret;
}

static long restore_task_state(struct rst_args *a)
{
	long ret = sys_prctl(PR_SET_NAME, a->comm, 0, 0, 0);

	if (ret) {
		pr_err(a, "prctl(PR_SET_NAME): %ld", ret);
		return ret;
	}
	ret = prctl_set_recorded(a, a->has_thp_disabled, PR_SET_THP_DISABLE, a->thp_disabled,
				 "PR_SET_THP_DISABLE");
	if (!ret)
		ret = prctl_set_recorded(a, a->has_child_subreaper, PR_SET_CHILD_SUBREAPER,
					 a->child_subreaper, "PR_SET_CHILD_SUBREAPER");
	if (!ret)
		ret = restore_sigactions(a);
	if (!ret)
		ret = restore_itimers(a);
	if (!ret)
		ret = restore_posix_timers(a);
	return ret;
}

/* ---- 8. per-thread kernel state ---- */

/* Run by each thread for itself: these calls act on the calling thread only. */
static long restore_thread_state(struct rst_args *a, const struct rst_thread *th)
{
	long ret;

	if (th->has_rseq) {
		ret = sys_rseq(th->rseq_ptr, th->rseq_len, 0, th->rseq_sig);
		if (ret) {
			pr_err(a, "thread %d: rseq register %lx len %u: %ld", th->tid, th->rseq_ptr,
			       th->rseq_len, ret);
			return ret;
		}
		/* struct rseq's rseq_cs: the section the thread may not be taken out of. */
		if (th->rseq_cs)
			*(volatile uint64_t *)(th->rseq_ptr + 8) = th->rseq_cs;
	}
	sys_set_tid_address(th->clear_tid_addr);
	if (th->robust_list_len) {
		ret = sys_set_robust_list(th->robust_list, th->robust_list_len);
		if (ret) {
			pr_err(a, "thread %d: set_robust_list %lx len %lu: %ld", th->tid, th->robust_list,
			       th->robust_list_len, ret);
			return ret;
		}
	}
	/* rt_sigreturn does not touch the segment bases. */
	ret = sys_arch_prctl(ARCH_SET_FS, th->regs.fs_base);
	if (!ret)
		ret = sys_arch_prctl(ARCH_SET_GS, th->regs.gs_base);
	if (ret)
		pr_err(a, "thread %d: arch_prctl fs_base %lx gs_base %lx: %ld", th->tid, th->regs.fs_base,
		       th->regs.gs_base, ret);
	return ret;
}

/* ---- 9. pending signals, queued while everything is blocked ---- */

static int siginfo_signo(const struct rst_siginfo *info)
{
	return *(const int32_t *)info->raw;
}

/*
 * Run by each thread for itself: the kernel lets a thread queue a kernel-made siginfo
 * (si_code >= 0, or a tkill's) only to itself (or, process-wide, when its tid is the pid).
 */
static long queue_thread_pending(struct rst_args *a, const struct rst_thread *th)
{
	struct rst_siginfo *info;
	uint32_t i;
	long ret;

	for (i = 0; i < th->nr_pending; i++) {
		info = (struct rst_siginfo *)th->pending + i;
		ret = sys_rt_tgsigqueueinfo(a->pid, th->tid, siginfo_signo(info), info->raw);
		if (ret) {
			pr_err(a, "queue signal %d for thread %d: %ld", siginfo_signo(info), th->tid, ret);
			return ret;
		}
	}
	return 0;
}

/* The main thread's own signals and the process-wide ones. */
static long queue_pending(struct rst_args *a, const struct rst_thread *main_thread)
{
	struct rst_siginfo *info;
	uint32_t i;
	long ret;

	ret = queue_thread_pending(a, main_thread);
	if (ret)
		return ret;
	for (i = 0; i < a->nr_shared_pending; i++) {
		info = (struct rst_siginfo *)a->shared_pending + i;
		ret = sys_rt_sigqueueinfo(a->pid, siginfo_signo(info), info->raw);
		if (ret) {
			pr_err(a, "queue process signal %d: %ld", siginfo_signo(info), ret);
			return ret;
		}
	}
	return 0;
}

/* ---- 10. credentials: last, they may drop what the steps above needed ---- */

static long drop_bounding_caps(struct rst_args *a, uint64_t keep)
{
	long ret;
	int cap;

	for (cap = 0; cap < 64; cap++) {
		if (keep & (1ull << cap))
			continue;
		ret = sys_prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (ret == -EINVAL)
			break; /* past the kernel's last capability */
		if (ret <= 0)
			continue;
		ret = sys_prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
		if (ret) {
			pr_err(a, "drop capability %d from the bounding set: %ld", cap, ret);
			return ret;
		}
	}
	return 0;
}

static long set_ids(struct rst_args *a, const struct rst_creds *c)
{
	long ret = sys_setgroups(c->nr_groups, c->groups);

	if (!ret)
		ret = sys_setresgid(c->gid, c->egid, c->sgid);
	if (!ret)
		ret = sys_setresuid(c->uid, c->euid, c->suid);
	if (ret) {
		pr_err(a, "set ids uid %u/%u/%u gid %u/%u/%u: %ld", c->uid, c->euid, c->suid, c->gid, c->egid,
		       c->sgid, ret);
		return ret;
	}
	/* setfs[ug]id return the previous id, never an error. */
	sys_setfsgid(c->fsgid);
	sys_setfsuid(c->fsuid);
	return 0;
}

/* The capability sets, with keep also in the effective and permitted ones. */
static long capset_with(struct rst_args *a, const struct rst_creds *c, uint64_t keep)
{
	struct {
		uint32_t version;
		int32_t pid;
	} hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	uint64_t eff = c->cap_eff | keep, prm = c->cap_prm | keep;
	struct {
		uint32_t effective, permitted, inheritable;
	} data[2] = {
		{ (uint32_t)eff, (uint32_t)prm, (uint32_t)c->cap_inh },
		{ (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(c->cap_inh >> 32) },
	};
	long ret = sys_capset(&hdr, data);

	if (ret)
		pr_err(a, "capset eff %lx prm %lx inh %lx: %ld", eff, prm, c->cap_inh, ret);
	return ret;
}

static long set_caps(struct rst_args *a, const struct rst_creds *c)
{
	long ret = capset_with(a, c, c->keep_caps);
	int cap;

	if (ret)
		return ret;
	for (cap = 0; cap < 64; cap++) {
		if (!(c->cap_amb & (1ull << cap)))
			continue;
		ret = sys_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0);
		if (ret) {
			pr_err(a, "raise ambient capability %d: %ld", cap, ret);
			return ret;
		}
	}
	return 0;
}

/*
 * One of the calling thread's LSM attributes (attr/current, attr/sockcreate), through
 * thread-self: a thread's label is its own. Nothing where the label is "".
 */
static long set_lsm_attr(struct rst_args *a, const char *attr, const char *label)
{
	char path[48] = "/proc/thread-self/attr/";
	size_t len = 0, at = sizeof("/proc/thread-self/attr/") - 1;
	long fd, ret;

	if (!label[0])
		return 0;
	while (label[len])
		len++;
	for (size_t i = 0; attr[i] && at < sizeof(path) - 1; i++)
		path[at++] = attr[i];
	path[at] = '\0';
	/* Through proc's root where the task's own /proc may be missing. */
	fd = sys_openat(a->proc_fd >= 0 ? a->proc_fd : AT_FDCWD, a->proc_fd >= 0 ? path + 6 : path,
			O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err(a, "open %s to set the LSM label: %ld", path, fd);
		return fd;
	}
	ret = sys_write(fd, label, len);
	sys_close(fd);
	if (ret != (long)len) {
		pr_err(a, "write \"%s\" to %s: %ld", label, path, ret);
		return ret < 0 ? ret : -EIO;
	}
	return 0;
}

static long set_lsm_labels(struct rst_args *a)
{
	long ret = set_lsm_attr(a, "sockcreate", a->creds.lsm_sockcreate);

	return ret ? ret : set_lsm_attr(a, "current", a->creds.lsm_current);
}

/* SELinux: the main thread's label, before it clones the others (they inherit it). */
static long set_lsm_before_threads(struct rst_args *a)
{
	return a->has_creds && a->creds.lsm_before_threads ? set_lsm_labels(a) : 0;
}

/*
 * Order: the bounding set and ids need CAP_SETPCAP/CAP_SET[UG]ID, so they go first;
 * SECBIT_NO_SETUID_FIXUP keeps the kernel from clearing capabilities on the uid change,
 * then the dumped securebits and capability sets are set exactly.
 */
static long restore_creds(struct rst_args *a)
{
	const struct rst_creds *c = &a->creds;
	long ret;

	if (!a->has_creds)
		return 0;
	ret = drop_bounding_caps(a, c->cap_bnd);
	if (ret)
		return ret;
	ret = sys_prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0);
	if (ret) {
		pr_err(a, "prctl(PR_SET_SECUREBITS, NO_SETUID_FIXUP): %ld", ret);
		return ret;
	}
	ret = set_ids(a, c);
	if (ret)
		return ret;
	ret = sys_prctl(PR_SET_SECUREBITS, c->secbits, 0, 0, 0);
	if (ret) {
		pr_err(a, "prctl(PR_SET_SECUREBITS, %x): %ld", c->secbits, ret);
		return ret;
	}
	ret = set_caps(a, c);
	if (!ret && c->no_new_privs) {
		ret = sys_prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (ret)
			pr_err(a, "prctl(PR_SET_NO_NEW_PRIVS): %ld", ret);
	}
	/* Last: a new AppArmor profile may forbid what the steps above do. */
	if (!ret && !c->lsm_before_threads)
		ret = set_lsm_labels(a);
	return ret;
}

/*
 * A credential change resets the parent-death signal (the thread's) and dumpable (the mm's,
 * so after every thread has set its own): set them after.
 */
static long restore_post_creds(struct rst_args *a)
{
	long ret = prctl_set_recorded(a, a->has_pdeath_sig, PR_SET_PDEATHSIG, a->pdeath_sig,
				      "PR_SET_PDEATHSIG");

	if (!ret)
		ret = prctl_set_recorded(a, a->has_dumpable, PR_SET_DUMPABLE, a->dumpable,
					 "PR_SET_DUMPABLE");
	return ret;
}

/* ---- 10b. seccomp: last, since criu suspends it only for the traced ---- */

#define SECCOMP_SET_MODE_STRICT 0
#define SECCOMP_SET_MODE_FILTER 1
#define SECCOMP_FILTER_FLAG_TSYNC 1
#define RST_SECCOMP_STRICT 1

/* struct sock_fprog */
struct rst_sock_fprog {
	uint16_t len;
	uint16_t pad[3];
	uint64_t filter;
};

/* Filters [from, to) of th's chain, each with its flags and extra_flags. */
static long install_filters(struct rst_args *a, const struct rst_thread *th, uint32_t from,
			    uint32_t to, uint32_t extra_flags)
{
	const struct rst_seccomp_filter *f =
		(const struct rst_seccomp_filter *)a->seccomp_filters + th->seccomp_first;
	uint32_t i;
	long ret;

	for (i = from; i < to; i++) {
		struct rst_sock_fprog prog = { .len = (uint16_t)f[i].len, .filter = f[i].prog };

		ret = sys_seccomp(SECCOMP_SET_MODE_FILTER, f[i].flags | extra_flags, &prog);
		if (ret) {
			/* TSYNC gives the tid of a thread it could not give the filter to. */
			pr_err(a, "thread %d: seccomp filter %u of %u (flags %x): %ld", th->tid, i,
			       th->nr_seccomp, f[i].flags | extra_flags, ret);
			return ret > 0 ? -EBUSY : ret;
		}
	}
	return 0;
}

/*
 * A thread's own part: its filters after the shared ones, or strict mode; then the
 * capabilities kept to install them go (criu still traces the thread, with its seccomp
 * suspended, so the syscalls left to the restorer pass whatever the filters say).
 */
static long restore_own_seccomp(struct rst_args *a, const struct rst_thread *th)
{
	long ret = install_filters(a, th, a->nr_seccomp_shared, th->nr_seccomp, 0);

	if (!ret && th->seccomp_mode == RST_SECCOMP_STRICT) {
		ret = sys_seccomp(SECCOMP_SET_MODE_STRICT, 0, 0);
		if (ret)
			pr_err(a, "thread %d: seccomp strict mode: %ld", th->tid, ret);
	}
	if (!ret && a->has_creds && a->creds.keep_caps)
		ret = capset_with(a, &a->creds, 0);
	return ret;
}

/*
 * Main thread, the others restored and waiting: the filters all threads share, given to
 * every thread at once (TSYNC) so that they are one filter again, then its own.
 */
static long restore_seccomp(struct rst_args *a, const struct rst_thread *main_thread)
{
	uint32_t tsync = a->nr_threads > 1 ? SECCOMP_FILTER_FLAG_TSYNC : 0;
	long ret = install_filters(a, main_thread, 0, a->nr_seccomp_shared, tsync);

	return ret ? ret : restore_own_seccomp(a, main_thread);
}

/* ---- 11. report, wait for criu's release, become the program ---- */

/*
 * criu traces the task from its creation. The stop parks the task here until criu has
 * run RESUME_DEVICES_LATE for every task; criu then lets it go on to rt_sigreturn and
 * unmaps this region once the task has left it (the blob cannot unmap the code it
 * runs). If criu dies, PTRACE_O_EXITKILL kills the task: it never runs half restored.
 */
static long report_and_stop(struct rst_args *a)
{
	struct rst_report report = { RST_REPORT_MAGIC, 0, a->region_start, a->region_len, 0, 0 };
	long ret;

	pr_info(a, "restored; waiting for criu to release the task");
	ret = sys_write(a->sync_fd, &report, sizeof(report));
	if (ret != sizeof(report)) {
		pr_err(a, "report to criu: %ld", ret);
		return ret < 0 ? ret : -EIO;
	}
	/*
	 * SIGSTOP, not int3: a trap with SIGTRAP blocked makes the kernel reset the
	 * program's SIGTRAP handler to SIG_DFL; SIGSTOP touches no handler. Sent to this
	 * thread alone: a process-wide SIGSTOP taken by an untraced thread would stop the
	 * whole group.
	 */
	ret = sys_tgkill(a->pid, a->pid, SIGSTOP);
	if (ret)
		pr_err(a, "cannot stop for criu: %ld", ret);
	return ret;
}

static void build_sigframe(const struct rst_thread *th, struct rst_sigframe *frame)
{
	const struct rst_gpregs *r = &th->regs;
	struct x86_sigcontext *mc = &frame->uc.mcontext;

	memset(frame, 0, sizeof(*frame));
	frame->uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS | (th->xsave ? UC_FP_XSTATE : 0);
	if (th->has_sas) {
		frame->uc.ss_sp = th->sas_sp;
		frame->uc.ss_size = th->sas_size;
		frame->uc.ss_flags = th->sas_flags;
	} else {
		frame->uc.ss_flags = SS_DISABLE;
	}
	mc->r8 = r->r8, mc->r9 = r->r9, mc->r10 = r->r10, mc->r11 = r->r11;
	mc->r12 = r->r12, mc->r13 = r->r13, mc->r14 = r->r14, mc->r15 = r->r15;
	mc->di = r->di, mc->si = r->si, mc->bp = r->bp, mc->bx = r->bx;
	mc->dx = r->dx, mc->ax = r->ax, mc->cx = r->cx, mc->sp = r->sp;
	mc->ip = r->ip, mc->flags = r->flags;
	mc->cs = 0x33; /* __USER_CS: 64-bit user code */
	mc->ss = 0x2b; /* __USER_DS */
	mc->fpstate = th->xsave;
	frame->uc.sigmask = th->blk_sigset;
}

static __attribute__((noreturn)) void sigreturn_to_program(struct rst_sigframe *frame)
{
	asm volatile("mov %0, %%rsp\n\t"
		     "mov %1, %%eax\n\t"
		     "syscall\n\t"
		     "hlt"
		     :
		     : "r"(&frame->uc), "i"(__NR_rt_sigreturn)
		     : "memory");
	__builtin_unreachable();
}

/* The mapped files' fds are closed already (retake_file_locks()). */
static void close_criu_fds(struct rst_args *a)
{
	int32_t *fds = (int32_t *)a->close_fds;
	uint32_t i;

	for (i = a->nr_file_fds; i < a->nr_close_fds; i++)
		sys_close(fds[i]);
}

/* ---- 12. the other threads ---- */

static void wait_for_release(struct rst_args *a)
{
	while (!__atomic_load_n(&a->threads_release, __ATOMIC_ACQUIRE))
		sys_futex(&a->threads_release, FUTEX_WAIT, 0, 0);
}

/*
 * A restored thread, on its own stack in the region: its per-thread state and the
 * credentials (per thread in the kernel), then it waits until the main thread is
 * released by criu. criu catches it on its way out (it traces every thread by then).
 */
static __attribute__((noreturn, used)) void thread_main(struct rst_args *a, struct rst_thread *th)
{
	struct rst_sigframe frame;
	int32_t none = 0;
	long ret;

	ret = restore_thread_state(a, th);
	if (!ret)
		ret = queue_thread_pending(a, th);
	if (!ret)
		ret = restore_creds(a);
	if (ret)
		__atomic_compare_exchange_n(&a->thread_err, &none, (int32_t)ret, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	__atomic_add_fetch(&a->threads_restored, 1, __ATOMIC_RELEASE);
	sys_futex(&a->threads_restored, FUTEX_WAKE, 1, 0);
	/* A failed restore ends with the main thread's exit_group(); never go on. */
	wait_for_release(a);
	if (ret)
		sys_exit(1);
	/* criu follows this thread out: a thread that exits instead fails the restore. */
	if (restore_own_seccomp(a, th))
		sys_exit_group(1);
	build_sigframe(th, &frame);
	sigreturn_to_program(&frame);
}

/*
 * clone3() a thread with the tids it had (one per pid namespace), running thread_main(a, th) on th's stack.
 * The child starts with the parent's registers but rax = 0 and rsp = the stack top.
 */
static long clone_thread(struct rst_args *a, struct rst_thread *th)
{
	struct clone_args args = {
		.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM,
		.stack = th->stack_top - RST_THREAD_STACK_SIZE,
		.stack_size = RST_THREAD_STACK_SIZE,
		.set_tid = (uint64_t)th->set_tid,
		.set_tid_size = th->nr_set_tid,
	};
	register ulong r12 asm("r12") = (ulong)thread_main;
	register ulong r13 asm("r13") = (ulong)a;
	register ulong r14 asm("r14") = (ulong)th;
	long ret;

	asm volatile("syscall\n\t"
		     "test %%rax, %%rax\n\t"
		     "jnz 1f\n\t"
		     "xor %%ebp, %%ebp\n\t"
		     "mov %%r13, %%rdi\n\t"
		     "mov %%r14, %%rsi\n\t"
		     "call *%%r12\n\t"
		     "hlt\n"
		     "1:"
		     : "=a"(ret)
		     : "a"(__NR_clone3), "D"(&args), "S"(sizeof(args)), "r"(r12), "r"(r13), "r"(r14)
		     : "rcx", "r11", "memory");
	return ret;
}

/*
 * A page reader thread (read_pages) may still hold a tid we want for a moment after
 * its exit woke us (its tid is freed a little later): EEXIST then is worth a retry.
 */
#define CLONE_EEXIST_RETRIES 10000

static long start_threads(struct rst_args *a)
{
	struct rst_thread *threads = (struct rst_thread *)a->threads;
	uint32_t i, tries;
	long ret;

	for (i = 1; i < a->nr_threads; i++) {
		tries = 0;
		do
			ret = clone_thread(a, &threads[i]);
		while (ret == -EEXIST && ++tries < CLONE_EEXIST_RETRIES && !sys_sched_yield());
		if (ret != threads[i].tid) {
			pr_err(a, "create thread %d: %ld", threads[i].tid, ret);
			return ret < 0 ? ret : -EINVAL;
		}
	}
	if (a->nr_threads > 1)
		pr_debug(a, "created %u threads", a->nr_threads - 1);
	return 0;
}

/* Before the report: criu is told the task is ready only once every thread is. */
static long wait_threads_restored(struct rst_args *a)
{
	uint32_t done;

	while ((done = __atomic_load_n(&a->threads_restored, __ATOMIC_ACQUIRE)) < a->nr_threads - 1)
		sys_futex(&a->threads_restored, FUTEX_WAIT, done, 0);
	/* The failing thread logged why. */
	return __atomic_load_n(&a->thread_err, __ATOMIC_RELAXED);
}

/*
 * criu released the main thread; the others wake now or, if criu holds them in a
 * ptrace stop, find the flag set when criu lets them go after us.
 */
static void release_threads(struct rst_args *a)
{
	__atomic_store_n(&a->threads_release, 1, __ATOMIC_RELEASE);
	sys_futex(&a->threads_release, FUTEX_WAKE, a->nr_threads, 0);
}

#define STEP(a, call)                      \
	do {                               \
		long __ret = (call);       \
		if (__ret)                 \
			fail(a, __ret);    \
	} while (0)

/* Entry, at offset 0 of the blob (pie.lds): called with the region stack and the args. */
__attribute__((section(".text.entry"), noreturn, used)) void rst_entry(struct rst_args *a)
{
	struct rst_thread *main_thread = (struct rst_thread *)a->threads;
	struct rst_sigframe frame;

	if (a->magic != RST_ARGS_MAGIC || !a->nr_threads)
		fail(a, -EINVAL);
	pr_debug(a, "in the restorer at %lx, %u vmas, %lu bytes of pages", a->region_start, a->nr_vmas,
		 a->total_page_bytes);
	STEP(a, unmap_old(a));
	STEP(a, park_specials(a));
	STEP(a, move_premapped(a));
	STEP(a, place_specials(a));
	STEP(a, map_vmas(a));
	STEP(a, start_lazy_pages(a));
	STEP(a, read_pages(a));
	STEP(a, install_guards(a));
	STEP(a, finish_vmas(a));
	STEP(a, restore_aio_rings(a));
	STEP(a, restore_mm(a));
	STEP(a, retake_file_locks(a));
	STEP(a, set_lsm_before_threads(a));
	/* Threads before timers (one may signal a thread) and creds (clone3 set_tid needs caps). */
	STEP(a, start_threads(a));
	STEP(a, restore_task_state(a));
	STEP(a, restore_thread_state(a, main_thread));
	STEP(a, queue_pending(a, main_thread));
	STEP(a, restore_creds(a));
	/* Each thread's change of credentials clears the mm's dumpable flag: all done first. */
	STEP(a, wait_threads_restored(a));
	STEP(a, restore_post_creds(a));
	STEP(a, restore_seccomp(a, main_thread));
	STEP(a, report_and_stop(a));

	release_threads(a);
	build_sigframe(main_thread, &frame);
	close_criu_fds(a);
	sigreturn_to_program(&frame);
}
