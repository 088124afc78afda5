/*
 * Restore side: each task's images decoded once into struct task_image (task-image.h),
 * one small collect function per kind of entry. The protobuf messages are freed as soon
 * as they are decoded; nothing after this file reads a field of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "lsm.h"
#include "mem.h"
#include "memfd.h"
#include "namespaces.h"
#include "pstree.h"
#include "regs-x86.h"
#include "seccomp.h"
#include "task-image.h"
#include "vma.h"

#include "core.pb-c.h"
#include "ext.pb-c.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"

/* Top of the 47-bit user address space. */
#define TASK_SIZE 0x7ffffffff000ull
#define CAP_WORDS 2 /* a capability set in creds_entry: two u32, low first */

/* Names an image (and an entry in it) in messages: "core-123.img". */
struct img_ref {
	char name[64];
};

static void img_ref(struct img_ref *ref, enum cr_img_type type, unsigned long id)
{
	img_name(type, id, ref->name, sizeof(ref->name));
}

static void *alloc_array(size_t nr, size_t size, const char *what)
{
	void *p = calloc(nr ? nr : 1, size);

	if (!p)
		pr_err("no memory for %zu %s\n", nr, what);
	return p;
}

/* ------------------------------------------------------------- signals ---- */

static int collect_siginfos(const SignalQueueEntry *q, struct rst_siginfo **out, unsigned int *nr,
			    const char *img)
{
	size_t i;

	*nr = 0;
	if (!q || !q->n_signals)
		return 0;
	*out = alloc_array(q->n_signals, sizeof(**out), "pending signals");
	if (!*out)
		return -ENOMEM;
	for (i = 0; i < q->n_signals; i++) {
		const ProtobufCBinaryData *raw = &q->signals[i]->siginfo;

		if (raw->len != RST_SIGINFO_SIZE) {
			pr_err("%s: pending signal %zu has a siginfo of %zu bytes, %d expected\n", img,
			       i, raw->len, RST_SIGINFO_SIZE);
			return -EINVAL;
		}
		memcpy((*out)[i].raw, raw->data, RST_SIGINFO_SIZE);
	}
	*nr = q->n_signals;
	return 0;
}

/* ------------------------------------------------------------- threads ---- */

static int collect_thread_info(const ThreadInfoX86 *ti, struct thread_image *th, const char *img)
{
	int ret;

	if (!ti->gpregs || !ti->fpregs) {
		pr_err("%s: thread_info without registers\n", img);
		return -EINVAL;
	}
	th->clear_tid_addr = ti->clear_tid_addr;
	ret = gpregs_from_image(ti->gpregs, &th->regs, img);
	if (!ret)
		ret = tls_check_unused(ti, img);
	if (ret)
		return ret;
	th->xsave_len = xsave_user_size();
	th->xsave = alloc_array(th->xsave_len, 1, "bytes of XSAVE state");
	if (!th->xsave)
		return -ENOMEM;
	return xsave_from_image(ti->fpregs, th->xsave, th->xsave_len, img);
}

/* Old images kept one seccomp mode for the whole task: CRIU writes it per thread now. */
static int check_no_old_seccomp(bool has_mode, SeccompMode mode, const char *img)
{
	if (has_mode && mode != SECCOMP_MODE__disabled) {
		pr_err("%s: a task-wide seccomp mode %d (an old image), which is not supported\n",
		       img, mode);
		return -ENOTSUP;
	}
	return 0;
}

static int collect_thread_seccomp(const ThreadCoreEntry *tc, struct thread_image *th,
				  const char *img)
{
	th->seccomp_mode = tc->has_seccomp_mode ? tc->seccomp_mode : SECCOMP_MODE__disabled;
	if (th->seccomp_mode > SECCOMP_MODE__filter) {
		pr_err("%s: seccomp mode %u is not known\n", img, th->seccomp_mode);
		return -EINVAL;
	}
	return seccomp_thread_chain(tc->has_seccomp_mode, tc->seccomp_mode, tc->has_seccomp_filter,
				    tc->seccomp_filter, &th->seccomp_chain, &th->nr_seccomp, img);
}

static int collect_thread_core(const ThreadCoreEntry *tc, struct thread_image *th, const char *img)
{
	int ret = collect_thread_sched(tc, &th->sched, img);

	if (ret)
		return ret;
	th->robust_list = tc->futex_rla;
	th->robust_list_len = tc->futex_rla_len;
	if (tc->has_blk_sigset)
		th->blk_sigset = tc->blk_sigset;
	if (tc->sas) {
		th->has_sas = true;
		th->sas_sp = tc->sas->ss_sp;
		th->sas_size = tc->sas->ss_size;
		th->sas_flags = tc->sas->ss_flags;
	}
	if (tc->rseq_entry && tc->rseq_entry->rseq_abi_pointer) {
		th->has_rseq = true;
		th->rseq_ptr = tc->rseq_entry->rseq_abi_pointer;
		th->rseq_len = tc->rseq_entry->rseq_abi_size;
		th->rseq_sig = tc->rseq_entry->signature;
		th->rseq_cs = tc->rseq_entry->has_rseq_cs_pointer ?
				      tc->rseq_entry->rseq_cs_pointer : 0;
	}
	return collect_thread_seccomp(tc, th, img) ?:
	       collect_siginfos(tc->signals_p, &th->pending, &th->nr_pending, img);
}

static int read_core(pid_t tid, CoreEntry **core, struct img_ref *ref)
{
	struct cr_img *img;
	int ret;

	img_ref(ref, CR_IMG_CORE, tid);
	img = open_image(CR_IMG_CORE, O_RDONLY, tid);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)core);
	close_image(img);
	if (ret)
		return ret;
	if ((*core)->mtype != CORE_ENTRY__MARCH__X86_64) {
		pr_err("%s: not an x86_64 task (machine type %d)\n", ref->name, (*core)->mtype);
		pb_free(NULL, *core);
		return -EINVAL;
	}
	return 0;
}

static int collect_thread(const CoreEntry *core, struct thread_image *th, const char *img)
{
	int ret;

	if (!core->thread_info || !core->thread_core) {
		pr_err("%s: a live thread without thread_info or thread_core\n", img);
		return -EINVAL;
	}
	/* 0: in its process's cgroups (CRIU writes a thread's own set since 3.16). */
	th->cg_set = core->thread_core->has_cg_set ? core->thread_core->cg_set : 0;
	ret = collect_thread_info(core->thread_info, th, img);
	return ret ? ret : collect_thread_core(core->thread_core, th, img);
}

/* A thread other than the main one: core-TID.img holds its own state only. */
static int collect_other_thread(struct thread_image *th)
{
	struct img_ref ref;
	CoreEntry *core;
	int ret;

	ret = read_core(th->tid, &core, &ref);
	if (ret)
		return ret;
	ret = collect_thread(core, th, ref.name);
	pb_free(NULL, core);
	return ret;
}

/* ----------------------------------------------------------- task core ---- */

/*
 * CRIU writes one entry per signal that has a disposition: 1..64 without SIGKILL and
 * SIGSTOP, 62 in all. An image with 64 entries has one for every signal instead.
 */
#define NR_SIGACTIONS_CRIU (RST_NSIG - 2)

static int collect_sigactions(const TaskCoreEntry *tc, struct task_image *ti, const char *img)
{
	bool every_signal = tc->n_sigactions == RST_NSIG;
	size_t i;
	int sig = 0;

	if (tc->n_sigactions && tc->n_sigactions != NR_SIGACTIONS_CRIU && !every_signal) {
		pr_err("%s: %zu sigactions, %d expected\n", img, tc->n_sigactions, NR_SIGACTIONS_CRIU);
		return -EINVAL;
	}
	for (i = 0; i < tc->n_sigactions; i++) {
		const SaEntry *sa = tc->sigactions[i];

		sig++;
		if (!every_signal && (sig == SIGKILL || sig == SIGSTOP))
			sig++;
		if (sa->has_compat_sigaction && sa->compat_sigaction) {
			pr_err("%s: signal %d has a 32-bit (compat) sigaction, which is not supported\n",
			       img, sig);
			return -ENOTSUP;
		}
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		ti->sigactions[sig - 1] = (struct rst_sigaction){ sa->sigaction, sa->flags,
								  sa->restorer, sa->mask };
		ti->sigaction_set |= 1ull << (sig - 1);
	}
	return 0;
}

static int collect_rlimits(const TaskRlimitsEntry *rl, struct task_image *ti, const char *img)
{
	size_t i;

	if (!rl)
		return 0;
	if (rl->n_rlimits > TASK_NR_RLIMITS) {
		pr_err("%s: %zu rlimits, this kernel has %d\n", img, rl->n_rlimits, TASK_NR_RLIMITS);
		return -EINVAL;
	}
	for (i = 0; i < rl->n_rlimits; i++)
		ti->rlimits[i] = (struct rlimit_image){ rl->rlimits[i]->cur, rl->rlimits[i]->max };
	ti->nr_rlimits = rl->n_rlimits;
	return 0;
}

/*
 * A periodic ITIMER_REAL that expired while its SIGALRM was pending reads a value of 0:
 * the kernel re-arms it only when that signal is dequeued. Set with a value of 0 it would
 * be disarmed for good (its interval dropped), so it is set to expire at once instead, as
 * CRIU does: its SIGALRM merges with the restored pending one, and the dequeue re-arms it.
 */
static void collect_itimer(const ItimerEntry *it, uint64_t out[4])
{
	out[0] = it->isec;
	out[1] = it->iusec;
	out[2] = it->vsec;
	out[3] = it->vusec;
	if ((out[0] || out[1]) && !out[2] && !out[3])
		out[3] = 1;
}

static int collect_timers(const TaskTimersEntry *t, struct task_image *ti)
{
	size_t i;

	if (!t)
		return 0;
	ti->has_itimers = true;
	collect_itimer(t->real, ti->itimers[0]);
	collect_itimer(t->virt, ti->itimers[1]);
	collect_itimer(t->prof, ti->itimers[2]);
	if (!t->n_posix)
		return 0;
	ti->posix_timers = alloc_array(t->n_posix, sizeof(*ti->posix_timers), "posix timers");
	if (!ti->posix_timers)
		return -ENOMEM;
	for (i = 0; i < t->n_posix; i++) {
		const PosixTimerEntry *pt = t->posix[i];

		ti->posix_timers[i] = (struct rst_posix_timer){
			.id = pt->it_id, .clock_id = pt->clock_id, .signo = pt->si_signo,
			.notify = pt->it_sigev_notify,
			/* As the task sees its thread: in a nested pid namespace, its own tid. */
			.notify_tid = (uint32_t)pidns_own_pid(pt->has_notify_thread_id ?
								      pt->notify_thread_id :
								      ti->item->pid),
			.sival = pt->sival_ptr, .interval_sec = pt->isec, .interval_nsec = pt->insec,
			.value_sec = pt->vsec, .value_nsec = pt->vnsec,
		};
	}
	ti->nr_posix_timers = t->n_posix;
	return 0;
}

/* A capability set: two u32 words, low first; none at all reads as an empty set. */
static int cap_set(size_t n, const uint32_t *words, uint64_t *set, const char *what, const char *img)
{
	if (n != 0 && n != CAP_WORDS) {
		pr_err("%s: creds: %s has %zu words, %d expected\n", img, what, n, CAP_WORDS);
		return -EINVAL;
	}
	*set = n ? ((uint64_t)words[1] << 32) | words[0] : 0;
	return 0;
}

static int collect_creds(const CredsEntry *c, struct task_image *ti, const char *img)
{
	struct rst_creds *rc = &ti->creds;
	size_t i;
	int ret;

	if (!c)
		return 0;
	ret = lsm_restore_labels(c, img, rc);
	if (ret)
		return ret;
	ret = cap_set(c->n_cap_inh, c->cap_inh, &rc->cap_inh, "cap_inh", img) ?:
	      cap_set(c->n_cap_prm, c->cap_prm, &rc->cap_prm, "cap_prm", img) ?:
	      cap_set(c->n_cap_eff, c->cap_eff, &rc->cap_eff, "cap_eff", img) ?:
	      cap_set(c->n_cap_bnd, c->cap_bnd, &rc->cap_bnd, "cap_bnd", img) ?:
	      cap_set(c->n_cap_amb, c->cap_amb, &rc->cap_amb, "cap_amb", img);
	if (ret)
		return ret;
	rc->uid = c->uid, rc->gid = c->gid, rc->euid = c->euid, rc->egid = c->egid;
	rc->suid = c->suid, rc->sgid = c->sgid, rc->fsuid = c->fsuid, rc->fsgid = c->fsgid;
	rc->secbits = c->secbits;
	rc->no_new_privs = c->has_no_new_privs ? c->no_new_privs : 0;
	rc->nr_groups = c->n_groups;
	ti->groups = alloc_array(c->n_groups, sizeof(*ti->groups), "groups");
	if (!ti->groups)
		return -ENOMEM;
	for (i = 0; i < c->n_groups; i++)
		ti->groups[i] = c->groups[i];
	ti->has_creds = true;
	return 0;
}

static int collect_task_state(const TaskCoreEntry *tc, struct task_image *ti, const char *img)
{
	switch (tc->task_state) {
	case TASK_ALIVE:
		ti->state = TASK_ALIVE;
		break;
	case TASK_STOPPED:
		ti->state = TASK_STOPPED;
		ti->stop_signo = tc->has_stop_signo ? tc->stop_signo : SIGSTOP;
		if (ti->stop_signo != SIGSTOP && ti->stop_signo != SIGTSTP &&
		    ti->stop_signo != SIGTTIN && ti->stop_signo != SIGTTOU) {
			pr_err("%s: stopped by signal %u, which does not stop a task\n", img,
			       ti->stop_signo);
			return -EINVAL;
		}
		break;
	case TASK_DEAD:
	case TASK_ZOMBIE:
		ti->state = TASK_DEAD;
		ti->exit_code = tc->exit_code;
		break;
	default:
		pr_err("%s: task state %u is not supported\n", img, tc->task_state);
		return -EINVAL;
	}
	return 0;
}

/* The process-wide part of the main thread's core. */
static int collect_task_core(const TaskCoreEntry *tc, struct task_image *ti, const char *img)
{
	int ret;

	strncpy(ti->comm, tc->comm, sizeof(ti->comm) - 1);
	ti->personality = tc->personality;
	ti->cg_set = tc->has_cg_set ? tc->cg_set : 0;
	if (tc->has_membarrier_registration_mask &&
	    (tc->membarrier_registration_mask & ~MEMBARRIER_REGISTER_CMDS)) {
		pr_err("%s: membarrier registrations %#x include unknown commands\n", img,
		       tc->membarrier_registration_mask);
		return -EINVAL;
	}
	ti->membarrier_registrations =
		tc->has_membarrier_registration_mask ? tc->membarrier_registration_mask : 0;
	ti->has_oom_score_adj = tc->has_oom_score_adj;
	ti->oom_score_adj = tc->oom_score_adj;
	ti->has_loginuid = tc->has_loginuid;
	ti->loginuid = tc->loginuid;
	ti->has_child_subreaper = tc->has_child_subreaper;
	ti->child_subreaper = tc->child_subreaper;
	ret = check_no_old_seccomp(tc->has_old_seccomp_mode, tc->old_seccomp_mode, img) ?:
	      collect_sigactions(tc, ti, img) ?: collect_rlimits(tc->rlimits, ti, img) ?:
	      collect_timers(tc->timers, ti);
	return ret ? ret : collect_siginfos(tc->signals_s, &ti->shared_pending,
					    &ti->nr_shared_pending, img);
}

/* What a live task's main thread holds beyond its own thread state. */
static int collect_main_thread(const CoreEntry *core, struct task_image *ti, const char *img)
{
	const ThreadCoreEntry *tcore = core->thread_core;
	struct thread_image *th = &ti->threads[0];
	int ret;

	ret = collect_thread(core, th, img);
	if (ret)
		return ret;
	/* CRIU keeps the main thread's mask in tc; ours is in both. */
	if (!tcore->has_blk_sigset)
		th->blk_sigset = core->tc->blk_sigset;
	ti->has_pdeath_sig = tcore->has_pdeath_sig;
	ti->pdeath_sig = tcore->pdeath_sig;
	ret = collect_creds(tcore->creds, ti, img);
	if (!ret)
		ret = collect_task_core(core->tc, ti, img);
	/* CRIU 4 writes the process's cgroup set in its main thread's core only. */
	if (!ti->cg_set)
		ti->cg_set = th->cg_set;
	return ret;
}

/*
 * The threads pstree.img lists, the process itself first. A zombie has only itself (CRIU
 * writes no usable thread list for it) and no thread state.
 */
static int take_thread_list(struct task_image *ti)
{
	struct pstree_item *item = ti->item;
	unsigned int i;

	if (task_image_zombie(ti)) {
		item->nr_threads = 1;
		item->threads[0] = item->pid;
		return 0;
	}
	if (item->threads[0] != item->pid) {
		pr_err("pstree.img: the first thread of %d is %d, not the process itself\n",
		       item->pid, item->threads[0]);
		return -EINVAL;
	}
	ti->threads = alloc_array(item->nr_threads, sizeof(*ti->threads), "threads");
	if (!ti->threads)
		return -ENOMEM;
	ti->nr_threads = item->nr_threads;
	for (i = 0; i < ti->nr_threads; i++)
		ti->threads[i].tid = item->threads[i];
	return 0;
}

/*
 * core-PID.img first: whether the task is alive (then every thread's core follows) or a
 * zombie (its core is all there is).
 */
static int collect_cores(struct task_image *ti)
{
	struct img_ref ref;
	CoreEntry *core;
	unsigned int i;
	int ret;

	ret = read_core(ti->item->pid, &core, &ref);
	if (ret)
		return ret;
	if (!core->tc) {
		pr_err("%s: the main thread's core has no task_core_entry\n", ref.name);
		ret = -EINVAL;
	}
	if (!ret)
		ret = collect_task_state(core->tc, ti, ref.name);
	if (!ret)
		ret = take_thread_list(ti);
	if (!ret && !task_image_zombie(ti))
		ret = collect_main_thread(core, ti, ref.name);
	pb_free(NULL, core);
	for (i = 1; i < ti->nr_threads && !ret; i++)
		ret = collect_other_thread(&ti->threads[i]);
	return ret;
}

/* ----------------------------------------------------------------- VMAs ---- */

bool vma_image_mapped(const struct vma_image *vma)
{
	return (vma->status & VMA_AREA_REGULAR) &&
	       !(vma->status & (VMA_AREA_VDSO | VMA_AREA_VVAR | VMA_AREA_VSYSCALL));
}

/* How the VMA is backed: exactly one of these bits. */
#define VMA_KIND_BITS (VMA_ANON_PRIVATE | VMA_ANON_SHARED | VMA_FILE_PRIVATE | VMA_FILE_SHARED)

/* The kinds of mapping an image may have that this criu does not restore, by status bit. */
static const char *unsupported_vma_kind(uint32_t status)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} kinds[] = {
		{ VMA_AREA_SHSTK, "a shadow stack (VMA_AREA_SHSTK)" },
		{ VMA_AREA_UPROBES, "the uprobes area (VMA_AREA_UPROBES)" },
		{ VMA_UNSUPP, "a mapping its dump could not handle (VMA_UNSUPP)" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (status & kinds[i].bit)
			return kinds[i].name;
	return NULL;
}

static int check_vma(const struct vma_image *vma, const struct vma_image *prev, const char *img)
{
	uint32_t kind = vma->status & VMA_KIND_BITS;
	const char *unsupported = unsupported_vma_kind(vma->status);
	const char *why = NULL;

	if (unsupported) {
		pr_err("%s: vma %#llx-%#llx (status %#x) is %s, which this criu does not restore\n",
		       img, (unsigned long long)vma->start, (unsigned long long)vma->end, vma->status,
		       unsupported);
		return -ENOTSUP;
	}
	if (vma->start >= vma->end || vma->start % PAGE_SIZE || vma->end % PAGE_SIZE)
		why = "not a page-aligned, non-empty range";
	else if (prev && vma->start < prev->end)
		why = "overlaps the VMA before it or is out of order";
	else if ((vma->status & VMA_AREA_SOCKET) && kind)
		why = "a socket's ring with a kind of anonymous or file mapping";
	else if (!(vma->status & VMA_AREA_SOCKET) && (kind & (kind - 1) || !kind))
		why = "not exactly one of anonymous/file, private/shared";
	else if (!(vma->status & (VMA_AREA_REGULAR | VMA_AREA_VSYSCALL)))
		why = "neither a regular mapping nor [vsyscall]";
	else if (vma->end > TASK_SIZE && !(vma->status & VMA_AREA_VSYSCALL))
		why = "above the user address space";
	else if ((vma->status & VMA_AREA_SYSVIPC) && kind != VMA_ANON_SHARED)
		why = "SysV shared memory that is not shared anonymous memory";
	else if ((vma->status & VMA_EXT_PLUGIN) && !(kind & (VMA_FILE_PRIVATE | VMA_FILE_SHARED)))
		why = "a device mapping without its file";
	else if (vma_image_mapped(vma) && vma->pgoff % PAGE_SIZE)
		why = "a file offset that is not page aligned";
	if (!why)
		return 0;
	pr_err("%s: vma %#llx-%#llx (status %#x): %s\n", img, (unsigned long long)vma->start,
	       (unsigned long long)vma->end, vma->status, why);
	return -ENOTSUP;
}

/*
 * A VMA_AREA_MEMFD VMA maps the memfd of a file entry (shmid: its id), and restore maps
 * that object (memfd_open_mapped()). CRIU also dumps shared anonymous memory as a memfd
 * where the kernel shows it as one: a shared VMA of it becomes the shared anonymous
 * mapping it stands for.
 */
static int resolve_memfd_vma(struct vma_image *vma, const char *img)
{
	uint64_t shmid;
	int ret;

	if (!(vma->status & VMA_AREA_MEMFD))
		return 0;
	if (!(vma->status & VMA_AREA_REGULAR) || !(vma->status & (VMA_FILE_SHARED | VMA_FILE_PRIVATE))) {
		pr_err("%s: vma %#llx-%#llx (status %#x): a memfd mapping that is not a file mapping\n",
		       img, (unsigned long long)vma->start, (unsigned long long)vma->end, vma->status);
		return -ENOTSUP;
	}
	if (vma->shmid > UINT32_MAX) {
		pr_err("%s: vma %#llx-%#llx maps file %#llx, not a files.img id\n", img,
		       (unsigned long long)vma->start, (unsigned long long)vma->end,
		       (unsigned long long)vma->shmid);
		return -EINVAL;
	}
	ret = memfd_vma_shmem(vma->shmid, &shmid, img);
	if (ret <= 0 || !(vma->status & VMA_FILE_SHARED))
		return ret < 0 ? ret : 0;
	vma->status = (vma->status & ~(VMA_AREA_MEMFD | VMA_FILE_SHARED)) | VMA_ANON_SHARED;
	vma->flags |= MAP_ANONYMOUS;
	vma->shmid = shmid;
	return 0;
}

/*
 * An AIO ring's VMA (CRIU's status is VMA_AREA_AIORING alone; the mapping is the aio
 * filesystem's, shared): restore maps private anonymous memory for its pages there, and
 * the blob makes it a ring again (struct rst_aio_ring), so its pages are never lazy (the
 * AIORING bit stays). It must be one of mm's aios.
 */
static int resolve_aio_vma(struct vma_image *vma, const struct task_image *ti, const char *img)
{
	unsigned int i;

	if (!(vma->status & VMA_AREA_AIORING))
		return 0;
	for (i = 0; i < ti->nr_aio_rings; i++)
		if (ti->aio_rings[i].addr == vma->start && ti->aio_rings[i].len == vma->end - vma->start)
			break;
	if (i == ti->nr_aio_rings) {
		pr_err("%s: vma %#llx-%#llx is an AIO ring no aios entry describes\n", img,
		       (unsigned long long)vma->start, (unsigned long long)vma->end);
		return -EINVAL;
	}
	vma->status = VMA_AREA_REGULAR | VMA_ANON_PRIVATE | VMA_AREA_AIORING;
	vma->flags = MAP_PRIVATE | MAP_ANONYMOUS;
	return 0;
}

/* mm's aios; each must have its VMA (collect_vmas() counts them). */
static int collect_aio_rings(const MmEntry *mm, struct task_image *ti, const char *img)
{
	size_t i;

	if (!mm->n_aios)
		return 0;
	ti->aio_rings = alloc_array(mm->n_aios, sizeof(*ti->aio_rings), "AIO rings");
	if (!ti->aio_rings)
		return -ENOMEM;
	for (i = 0; i < mm->n_aios; i++) {
		const AioRingEntry *a = mm->aios[i];

		if (!a->nr_req || !a->ring_len || a->id % PAGE_SIZE || a->ring_len % PAGE_SIZE) {
			pr_err("%s: AIO ring at %#llx (%u bytes, %u requests) is not a ring this kernel makes\n",
			       img, (unsigned long long)a->id, a->ring_len, a->nr_req);
			return -EINVAL;
		}
		ti->aio_rings[i] = (struct rst_aio_ring){ .addr = a->id, .len = a->ring_len,
							  .nr_req = a->nr_req };
	}
	ti->nr_aio_rings = mm->n_aios;
	return 0;
}

/*
 * A guard region (MADV_GUARD_INSTALL), which CRIU lists among the VMAs with the status
 * VMA_AREA_GUARD alone, after them: page-aligned ranges in address order, each covered by
 * VMAs restore maps (checked once the VMAs are collected); PAGEMAP_SCAN joins the guards
 * of adjacent VMAs into one range.
 */
static int collect_guard(const VmaEntry *ve, struct task_image *ti, const char *img)
{
	const struct rst_guard *prev = ti->nr_guards ? &ti->guards[ti->nr_guards - 1] : NULL;

	if (ve->status != VMA_AREA_GUARD || ve->start >= ve->end || ve->start % PAGE_SIZE ||
	    ve->end % PAGE_SIZE || (prev && ve->start < prev->end)) {
		pr_err("%s: guard region %#llx-%#llx (status %#x): not a page-aligned range in "
		       "address order with the status VMA_AREA_GUARD alone\n",
		       img, (unsigned long long)ve->start, (unsigned long long)ve->end, ve->status);
		return -EINVAL;
	}
	ti->guards[ti->nr_guards++] = (struct rst_guard){ .start = ve->start, .end = ve->end };
	return 0;
}

static int check_guards_in_vmas(const struct task_image *ti, const char *img)
{
	for (unsigned int g = 0; g < ti->nr_guards; g++) {
		const struct rst_guard *guard = &ti->guards[g];
		uint64_t covered = guard->start;

		for (unsigned int i = 0; i < ti->nr_vmas && covered < guard->end; i++)
			if (vma_image_mapped(&ti->vmas[i]) && covered >= ti->vmas[i].start &&
			    covered < ti->vmas[i].end)
				covered = ti->vmas[i].end;
		if (covered < guard->end) {
			pr_err("%s: guard region %#llx-%#llx is not inside mapped VMAs (none at "
			       "%#llx)\n",
			       img, (unsigned long long)guard->start, (unsigned long long)guard->end,
			       (unsigned long long)covered);
			return -EINVAL;
		}
	}
	return 0;
}

static int collect_vmas(const MmEntry *mm, struct task_image *ti, const char *img)
{
	unsigned int nr_aio_vmas = 0;
	size_t i;
	int ret;

	ti->vmas = alloc_array(mm->n_vmas, sizeof(*ti->vmas), "VMAs");
	ti->guards = alloc_array(mm->n_vmas, sizeof(*ti->guards), "guard regions");
	if (!ti->vmas || !ti->guards)
		return -ENOMEM;
	for (i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *ve = mm->vmas[i];
		struct vma_image *vma = &ti->vmas[ti->nr_vmas];

		if (ve->status & VMA_AREA_GUARD) {
			ret = collect_guard(ve, ti, img);
			if (ret)
				return ret;
			continue;
		}

		*vma = (struct vma_image){
			.start = ve->start, .end = ve->end, .pgoff = ve->pgoff, .shmid = ve->shmid,
			.madv = ve->has_madv ? ve->madv : 0, .prot = ve->prot, .flags = ve->flags,
			.status = ve->status, .fdflags = ve->has_fdflags ? ve->fdflags : O_RDONLY,
		};
		nr_aio_vmas += !!(vma->status & VMA_AREA_AIORING);
		ret = resolve_memfd_vma(vma, img) ?: resolve_aio_vma(vma, ti, img);
		if (!ret)
			ret = check_vma(vma, ti->nr_vmas ? &ti->vmas[ti->nr_vmas - 1] : NULL, img);
		if (ret)
			return ret;
		ti->nr_vmas++;
	}
	ret = check_guards_in_vmas(ti, img);
	if (ret)
		return ret;
	if (nr_aio_vmas != ti->nr_aio_rings) {
		pr_err("%s: %u AIO rings, %u VMAs of AIO rings\n", img, ti->nr_aio_rings, nr_aio_vmas);
		return -EINVAL;
	}
	return 0;
}

static void collect_mm_fields(const MmEntry *mm, struct task_image *ti)
{
	ti->mm_map = (struct rst_mm_map){
		.start_code = mm->mm_start_code, .end_code = mm->mm_end_code,
		.start_data = mm->mm_start_data, .end_data = mm->mm_end_data,
		.start_brk = mm->mm_start_brk, .brk = mm->mm_brk, .start_stack = mm->mm_start_stack,
		.arg_start = mm->mm_arg_start, .arg_end = mm->mm_arg_end,
		.env_start = mm->mm_env_start, .env_end = mm->mm_env_end,
	};
	ti->exe_file_id = mm->exe_file_id;
	ti->has_dumpable = mm->has_dumpable;
	ti->dumpable = mm->dumpable;
	ti->has_thp_disabled = mm->has_thp_disabled;
	ti->thp_disabled = mm->thp_disabled;
}

static int collect_mm_entry(const MmEntry *mm, struct task_image *ti, const char *img)
{
	size_t i;

	int ret;

	collect_mm_fields(mm, ti);
	ret = collect_aio_rings(mm, ti, img);
	if (ret)
		return ret;
	ti->auxv = alloc_array(mm->n_mm_saved_auxv, sizeof(*ti->auxv), "auxv words");
	if (!ti->auxv)
		return -ENOMEM;
	for (i = 0; i < mm->n_mm_saved_auxv; i++)
		ti->auxv[i] = mm->mm_saved_auxv[i];
	ti->nr_auxv = mm->n_mm_saved_auxv;
	return collect_vmas(mm, ti, img);
}

static int collect_mm(struct task_image *ti)
{
	pid_t pid = ti->item->pid;
	struct img_ref ref;
	struct cr_img *img;
	MmEntry *mm;
	int ret;

	img_ref(&ref, CR_IMG_MM, pid);
	img = open_image(CR_IMG_MM, O_RDONLY, pid);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&mm);
	close_image(img);
	if (ret)
		return ret;
	ret = collect_mm_entry(mm, ti, ref.name);
	pb_free(NULL, mm);
	return ret;
}

/* ----------------------------------------------------------- mm-ext ---- */

static struct vma_image *find_vma_at(struct task_image *ti, uint64_t start)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++)
		if (ti->vmas[i].start == start)
			return &ti->vmas[i];
	return NULL;
}

/*
 * A name the restorer gives again with prctl(PR_SET_VMA_ANON_NAME), checked against the
 * kernel's rules (under RST_ANON_NAME_MAX bytes with the NUL; printable ASCII but
 * \ ` $ [ ]) so that a bad image fails before any task exists.
 */
static int check_anon_name(const struct vma_image *vma, const char *name, const char *img)
{
	const char *c;

	if (!(vma->status & (VMA_ANON_PRIVATE | VMA_ANON_SHARED)) ||
	    strlen(name) >= RST_ANON_NAME_MAX) {
		pr_err("%s: vma %#llx: name \"%.100s\" is not an anonymous VMA name under %d bytes\n",
		       img, (unsigned long long)vma->start, name, RST_ANON_NAME_MAX);
		return -EINVAL;
	}
	for (c = name; *c; c++) {
		if (*c < 0x20 || *c > 0x7e || strchr("\\`$[]", *c)) {
			pr_err("%s: vma %#llx: name \"%s\" has a character the kernel refuses (%#x)\n",
			       img, (unsigned long long)vma->start, name, (unsigned char)*c);
			return -EINVAL;
		}
	}
	return 0;
}

static int collect_vma_ext(const CrVmaExtEntry *ve, struct task_image *ti, const char *img)
{
	struct vma_image *vma = find_vma_at(ti, ve->start);
	int ret;

	if (!vma) {
		pr_err("%s: state for a vma at %#llx, which mm-%d.img does not have\n", img,
		       (unsigned long long)ve->start, ti->item->pid);
		return -EINVAL;
	}
	vma->locked = ve->has_locked && ve->locked;
	if (!ve->anon_name)
		return 0;
	ret = check_anon_name(vma, ve->anon_name, img);
	if (ret)
		return ret;
	vma->anon_name = strdup(ve->anon_name);
	if (!vma->anon_name) {
		pr_err("no memory for a VMA name\n");
		return -ENOMEM;
	}
	return 0;
}

/* mm-ext-PID.img is ours and optional: none means no VMA is named or locked. */
static int collect_mm_ext(struct task_image *ti)
{
	pid_t pid = ti->item->pid;
	CrMmExtEntry *ext = NULL;
	struct img_ref ref;
	struct cr_img *img;
	size_t i;
	int ret;

	if (!img_exists(CR_IMG_MM_EXT, pid))
		return 0;
	img_ref(&ref, CR_IMG_MM_EXT, pid);
	img = open_image(CR_IMG_MM_EXT, O_RDONLY, pid);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&ext);
	close_image(img);
	for (i = 0; !ret && i < ext->n_vmas; i++)
		ret = collect_vma_ext(ext->vmas[i], ti, ref.name);
	if (ext)
		pb_free(NULL, ext);
	return ret;
}

/* ------------------------------------------------------------- pagemap ---- */

unsigned int page_run_after(const struct page_run *runs, unsigned int nr_runs, uint64_t addr)
{
	unsigned int lo = 0, hi = nr_runs, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (runs[mid].vaddr + runs[mid].len <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void page_map_free(struct page_map *map)
{
	free(map->runs);
	memset(map, 0, sizeof(*map));
}

static int add_page_run(struct page_map *map, uint64_t vaddr, uint64_t len, uint64_t file_off,
			uint32_t level, bool remote)
{
	struct page_run *runs;

	if (!(map->nr_runs & (map->nr_runs + 1))) {
		runs = realloc(map->runs, (map->nr_runs * 2 + 2) * sizeof(*runs));
		if (!runs) {
			pr_err("no memory for %u page runs\n", map->nr_runs);
			return -ENOMEM;
		}
		map->runs = runs;
	}
	map->runs[map->nr_runs++] = (struct page_run){ vaddr, len, file_off, level, remote };
	map->total_bytes += len;
	return 0;
}

/* Older images have in_parent and no flags; a run without PE_PRESENT has no data here. */
static uint32_t pagemap_flags(const PagemapEntry *pe)
{
	if (pe->has_flags)
		return pe->flags | (pe->has_in_parent && pe->in_parent ? PE_PARENT : 0);
	return pe->has_in_parent && pe->in_parent ? PE_PARENT : PE_PRESENT;
}

/* How one pagemap image is read: at which chain level, and whether parents may be used. */
struct page_map_reader {
	enum cr_img_type type;
	unsigned long id;
	unsigned int level;
	bool chain;
	struct page_map parent; /* level + 1, read at the first PE_PARENT entry */
	bool parent_read;
};

static int check_page_entry(const struct page_map_reader *rd, const struct page_map *map,
			    const PagemapEntry *pe, uint64_t nr_pages, uint64_t pages_size,
			    unsigned int idx, const char *img)
{
	uint32_t flags = pagemap_flags(pe);
	uint64_t len = nr_pages * PAGE_SIZE;
	const struct page_run *last = map->nr_runs ? &map->runs[map->nr_runs - 1] : NULL;
	const char *why = NULL;

	if ((flags & PE_PARENT) && !rd->chain)
		why = "its pages are in a parent image, which shared memory cannot use";
	else if (!(flags & (PE_PRESENT | PE_PARENT | PE_LAZY)))
		why = "it says neither where its pages are nor that they are lazy";
	else if (!(flags & (PE_PRESENT | PE_PARENT)) && (rd->type != CR_IMG_PAGEMAP || rd->level))
		why = "its pages are left on the dump's source, which only a task's pagemap may do";
	else if (!nr_pages || nr_pages > TASK_SIZE / PAGE_SIZE || pe->vaddr % PAGE_SIZE ||
		 pe->vaddr + len > TASK_SIZE)
		why = "not a page-aligned range of the address space";
	else if (last && pe->vaddr < last->vaddr + last->len)
		why = "overlaps the entry before it or is out of order";
	else if ((flags & PE_PRESENT) && map->data_bytes + len > pages_size)
		why = "its data lie past the end of the pages image";
	if (!why)
		return 0;
	pr_err("%s: entry %u (vaddr %#llx, %llu pages, flags %#x): %s\n", img, idx,
	       (unsigned long long)pe->vaddr, (unsigned long long)nr_pages, flags, why);
	return -EINVAL;
}

static int page_map_read_level(enum cr_img_type type, unsigned long id, unsigned int level,
			       bool chain, struct page_map *map);

/* [vaddr, vaddr + len) as the parent's runs hold it, each piece where its data are. */
static int add_parent_pieces(struct page_map_reader *rd, struct page_map *map, uint64_t vaddr,
			     uint64_t len, const char *img)
{
	const struct page_map *parent = &rd->parent;
	uint64_t pos = vaddr, end = vaddr + len;
	unsigned int lo = 0, hi = parent->nr_runs;
	int ret = 0;

	/* The first parent run ending after pos: runs are sorted and do not overlap. */
	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (parent->runs[mid].vaddr + parent->runs[mid].len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; pos < end && lo < parent->nr_runs && !ret; lo++) {
		const struct page_run *run = &parent->runs[lo];
		uint64_t piece_end = run->vaddr + run->len < end ? run->vaddr + run->len : end;

		if (run->vaddr > pos)
			break;
		ret = add_page_run(map, pos, piece_end - pos, run->file_off + (pos - run->vaddr),
				   run->level, false);
		pos = piece_end;
	}
	if (!ret && pos < end) {
		pr_err("%s: pages at %#llx are in the parent's images, which do not hold them\n",
		       img, (unsigned long long)pos);
		ret = -EINVAL;
	}
	return ret;
}

static int add_parent_entry(struct page_map_reader *rd, struct page_map *map, uint64_t vaddr,
			    uint64_t len, const char *img)
{
	int ret;

	if (!rd->parent_read) {
		/* What is missing up the chain was named there. */
		ret = page_map_read_level(rd->type, rd->id, rd->level + 1, true, &rd->parent);
		if (ret)
			return ret;
		rd->parent_read = true;
	}
	return add_parent_pieces(rd, map, vaddr, len, img);
}

static int read_page_entries(struct page_map_reader *rd, struct cr_img *img, struct page_map *map,
			     uint64_t pages_size)
{
	unsigned int idx = 1; /* entry 0 is the head */
	PagemapEntry *pe;
	int ret;

	while ((ret = pb_read_one(img, (void **)&pe)) == 1) {
		uint64_t nr_pages = pe->has_nr_pages ? pe->nr_pages : pe->compat_nr_pages;
		uint64_t len = nr_pages * PAGE_SIZE;

		ret = check_page_entry(rd, map, pe, nr_pages, pages_size, idx++, img->name);
		if (!ret && (pagemap_flags(pe) & PE_PARENT)) {
			ret = add_parent_entry(rd, map, pe->vaddr, len, img->name);
		} else if (!ret && !(pagemap_flags(pe) & PE_PRESENT)) {
			/* dump --lazy-pages: the source serves them by their address (uffd.h). */
			ret = add_page_run(map, pe->vaddr, len, pe->vaddr, rd->level, true);
		} else if (!ret) {
			ret = add_page_run(map, pe->vaddr, len, map->data_bytes, rd->level, false);
			map->data_bytes += len;
		}
		pb_free(img, pe);
		if (ret)
			return ret;
	}
	return ret;
}

/*
 * The size of pages-ID.img, which bounds every run. A parent level without it is a
 * pre-dump --page-server's (its pages are the server's, its pagemap was kept here): its
 * runs are only known, never read here (a restore of it fails to open the image).
 */
static int pages_image_size(int dir_fd, uint32_t pages_id, unsigned int level, uint64_t *size)
{
	struct cr_img *img;
	char name[64];

	img_name(CR_IMG_PAGES, pages_id, name, sizeof(name));
	if (level && faccessat(dir_fd, name, F_OK, 0) && errno == ENOENT) {
		pr_info("parent images (level %u): no %s, its pages went to a page server\n", level,
			name);
		*size = UINT64_MAX;
		return 0;
	}
	img = open_image_at(dir_fd, CR_IMG_PAGES, O_RDONLY, pages_id);

	if (!img)
		return -EIO;
	*size = img->size;
	close_image(img);
	return 0;
}

/* The levels the parent's runs use, for the blob to open. */
static void take_parent_levels(struct page_map *map, const struct page_map_reader *rd)
{
	unsigned int i;

	if (!rd->parent_read)
		return;
	for (i = rd->level + 1; i < rd->parent.nr_levels; i++)
		map->level_pages_id[i] = rd->parent.level_pages_id[i];
	map->nr_levels = rd->parent.nr_levels;
}

static int page_map_read_level(enum cr_img_type type, unsigned long id, unsigned int level,
			       bool chain, struct page_map *map)
{
	struct page_map_reader rd = { .type = type, .id = id, .level = level, .chain = chain };
	int dir_fd = images_chain_dir(level);
	struct cr_img *img;
	uint64_t pages_size;
	PagemapHead *head;
	char name[64];
	int ret;

	memset(map, 0, sizeof(*map));
	if (dir_fd < 0)
		return dir_fd;
	img_name(type, id, name, sizeof(name));
	if (level && faccessat(dir_fd, name, F_OK, 0)) {
		pr_err("parent images (level %u): no %s, which the images above use\n", level, name);
		close(dir_fd);
		return -ENOENT;
	}
	img = open_image_at(dir_fd, type, O_RDONLY, id);
	if (!img) {
		close(dir_fd);
		return -EIO;
	}
	ret = pb_read_one_required_as(img, &pagemap_head__descriptor, (void **)&head);
	if (!ret) {
		map->pages_id = head->pages_id;
		map->level_pages_id[level] = head->pages_id;
		map->nr_levels = level + 1;
		pb_free(img, head);
		ret = pages_image_size(dir_fd, map->pages_id, level, &pages_size);
	}
	if (!ret)
		ret = read_page_entries(&rd, img, map, pages_size);
	if (!ret) {
		take_parent_levels(map, &rd);
		pr_debug("%s (level %u): %u page runs, %llu bytes in pages-%u.img\n", img->name,
			 level, map->nr_runs, (unsigned long long)map->data_bytes, map->pages_id);
	}
	close_image(img);
	close(dir_fd);
	page_map_free(&rd.parent);
	if (ret)
		page_map_free(map);
	return ret;
}

int page_map_read(enum cr_img_type type, unsigned long id, struct page_map *map)
{
	return page_map_read_level(type, id, 0, false, map);
}

int page_map_read_chain(enum cr_img_type type, unsigned long id, struct page_map *map)
{
	return page_map_read_level(type, id, 0, true, map);
}

int page_map_read_parent(enum cr_img_type type, unsigned long id, struct page_map *map)
{
	return page_map_read_level(type, id, 1, true, map);
}

/* The VMA holding addr, or NULL. */
static const struct vma_image *vma_at(const struct task_image *ti, uint64_t addr)
{
	unsigned int i;

	for (i = 0; i < ti->nr_vmas; i++)
		if (ti->vmas[i].start <= addr && addr < ti->vmas[i].end)
			return &ti->vmas[i];
	return NULL;
}

/*
 * The blob reads a task's pages into its private VMAs only: shared memory comes from its
 * object (pagemap-shmem-SHMID.img), file-backed shared memory from the file.
 */
static bool vma_takes_pages(const struct vma_image *vma)
{
	return vma && vma_image_mapped(vma) && (vma->status & (VMA_ANON_PRIVATE | VMA_FILE_PRIVATE)) &&
	       !(vma->status & VMA_EXT_PLUGIN);
}

static int check_run_in_vmas(const struct task_image *ti, const struct page_run *run, const char *img)
{
	uint64_t pos = run->vaddr, end = run->vaddr + run->len;
	const struct vma_image *vma;

	while (pos < end && vma_takes_pages(vma = vma_at(ti, pos)))
		pos = vma->end;
	if (pos < end) {
		pr_err("%s: pages at %#llx-%#llx lie outside the task's private VMAs\n", img,
		       (unsigned long long)run->vaddr, (unsigned long long)end);
		return -EINVAL;
	}
	return 0;
}

/*
 * CRIU stores the pages of [vdso] (and [vvar]) too; the kernel provides them afresh, so
 * such runs are dropped here (their data stay where they are in the pages image).
 */
static bool run_in_special(const struct task_image *ti, const struct page_run *run)
{
	const struct vma_image *vma = vma_at(ti, run->vaddr);

	return vma && (vma->status & (VMA_AREA_VDSO | VMA_AREA_VVAR)) &&
	       run->vaddr + run->len <= vma->end;
}

static int collect_pagemap(struct task_image *ti)
{
	struct page_map *map = &ti->pages;
	unsigned int i, nr_kept = 0;
	struct img_ref ref;
	int ret;

	img_ref(&ref, CR_IMG_PAGEMAP, ti->item->pid);
	ret = page_map_read_chain(CR_IMG_PAGEMAP, ti->item->pid, map);
	for (i = 0; i < map->nr_runs && !ret; i++) {
		if (run_in_special(ti, &map->runs[i])) {
			pr_debug("%s: pages at %#llx of a special mapping skipped\n", ref.name,
				 (unsigned long long)map->runs[i].vaddr);
			continue;
		}
		ret = check_run_in_vmas(ti, &map->runs[i], ref.name);
		map->runs[nr_kept++] = map->runs[i];
	}
	map->nr_runs = nr_kept;
	/* What the blob reads: the kept runs only. */
	for (i = 0, map->total_bytes = 0; i < map->nr_runs; i++)
		map->total_bytes += map->runs[i].len;
	return ret;
}

/* ---------------------------------------------------------------- tasks ---- */

static void free_task_image(struct task_image *ti)
{
	unsigned int i;

	for (i = 0; i < ti->nr_threads; i++) {
		free(ti->threads[i].pending);
		free(ti->threads[i].xsave);
		free(ti->threads[i].seccomp_chain);
	}
	for (i = 0; i < ti->nr_vmas; i++)
		free(ti->vmas[i].anon_name);
	free(ti->threads);
	free(ti->vmas);
	free(ti->aio_rings);
	free(ti->guards);
	free(ti->auxv);
	free(ti->groups);
	free(ti->posix_timers);
	free(ti->shared_pending);
	page_map_free(&ti->pages);
	free(ti);
}

/* A live task's object ids come from ids-PID.img, which pstree_read() found or not. */
static int check_task_ids(const struct task_image *ti)
{
	if (task_image_zombie(ti) || ti->item->ids.files_id)
		return 0;
	pr_err("ids-%d.img: missing, a live task needs it\n", ti->item->pid);
	return -EINVAL;
}

static int collect_task(struct pstree_item *item)
{
	struct task_image *ti = calloc(1, sizeof(*ti));
	int ret;

	if (!ti) {
		pr_err("no memory for the images of task %d\n", item->pid);
		return -ENOMEM;
	}
	ti->item = item;
	item->image = ti;
	ret = collect_cores(ti);
	if (!ret)
		ret = check_task_ids(ti);
	if (!ret && task_image_zombie(ti) && has_children(item)) {
		pr_err("pstree.img: zombie %d has children\n", item->pid);
		ret = -EINVAL;
	}
	if (ret || task_image_zombie(ti))
		return ret;
	ret = collect_mm(ti);
	if (!ret)
		ret = collect_mm_ext(ti);
	return ret ? ret : collect_pagemap(ti);
}

int task_images_collect(void)
{
	struct pstree_item *item;
	int ret = 0;

	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = collect_task(item);
	if (ret)
		task_images_free();
	return ret;
}

void task_images_free(void)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item)) {
		if (item->image)
			free_task_image(item->image);
		item->image = NULL;
	}
}
