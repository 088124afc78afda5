/*
 * The dump pipeline (DESIGN.md §3): seize the process tree, collect each task's state,
 * memory and files, write the images (inventory.img last), then kill the tree or let it
 * run. Any failure on the way leaves every task running as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>

#include "compel.h"
#include "cr_options.h"
#include "crtools.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "mem.h"
#include "plugin.h"
#include "proc_parse.h"
#include "pstree.h"
#include "core.pb-c.h"
#include "inventory.pb-c.h"

#define NR_SIGNALS 64
#define NR_ITIMERS 3 /* ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF */

/* The kernel's struct sigaction as rt_sigaction() reads and writes it on x86_64. */
struct kernel_sigaction {
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

/* One thread's own state, and the storage its ThreadCoreEntry points into. */
struct dump_thread {
	pid_t tid;
	ThreadCoreEntry core;
	UserX86RegsEntry regs;
	RseqEntry rseq;
	SigaltstackEntry sas;
	void *xstate;
	siginfo_t *pending;
	SiginfoEntry *pending_entries;
	SiginfoEntry **pending_ptrs;
};

/* Everything learnt about one task, and the storage its CoreEntry points into. */
struct dump_task {
	struct pstree_item *item;
	bool seized;
	struct dump_thread main_thread;
	/* The other threads, seized ones first: nr_other_threads of them are seized. */
	struct dump_thread *other_threads;
	unsigned int nr_other_threads;
	ThreadCoreEntry **other_thread_ptrs;
	char proc_state; /* /proc/PID/stat state before seizing */
	struct proc_vma *vmas;
	unsigned int nr_vmas;
	unsigned long brk;

	CoreEntry core;
	TaskCoreEntry tc;
	CredsEntry creds;
	char comm[32];
	SaEntry sa[NR_SIGNALS];
	SaEntry *sa_ptrs[NR_SIGNALS];
	RlimitEntry rlimits[PROC_NR_RLIMITS];
	RlimitEntry *rlimit_ptrs[PROC_NR_RLIMITS];
	ItimerEntry itimers[NR_ITIMERS];
	ItimerEntry *itimer_ptrs[NR_ITIMERS];
	PosixTimerEntry *posix_timers;
	PosixTimerEntry **posix_timer_ptrs;
	struct proc_posix_timer *proc_timers;
	unsigned int nr_proc_timers;
	siginfo_t *shared_pending;
	SiginfoEntry *shared_pending_entries;
	SiginfoEntry **shared_pending_ptrs;
	struct proc_pid_status status;
};

struct dump_stats {
	struct timespec start, freeze_start;
	uint64_t freezing_us;
	uint64_t memdump_us;
	struct mem_dump_stats mem;
};

static uint64_t usec_since(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000000ULL + (now.tv_nsec - since->tv_nsec) / 1000;
}

/* ------------------------------------------------------ the process tree ---- */

/* Every process of the tree, parents before their children. */
static struct dump_task **dump_tasks;
static unsigned int nr_dump_tasks;

static bool thread_seized(const struct dump_task *task, pid_t tid)
{
	unsigned int i;

	if (tid == task->item->pid)
		return true;
	for (i = 0; i < task->nr_other_threads; i++)
		if (task->other_threads[i].tid == tid)
			return true;
	return false;
}

static int seize_one_thread(struct dump_task *task, pid_t tid)
{
	struct dump_thread *grown;
	int ret;

	grown = realloc(task->other_threads, (task->nr_other_threads + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("no memory for the threads of %d\n", task->item->pid);
		return -ENOMEM;
	}
	task->other_threads = grown;
	ret = compel_seize(tid);
	if (ret)
		return ret;
	memset(&grown[task->nr_other_threads], 0, sizeof(*grown));
	grown[task->nr_other_threads++].tid = tid;
	pr_info("seized thread %d of %d\n", tid, task->item->pid);
	return 0;
}

/* pstree.img lists the threads in the order their core entries are written: ours. */
static int fix_thread_list(struct dump_task *task)
{
	struct pstree_item *item = task->item;
	unsigned int i;

	/* Every listed thread is seized; fewer listed means a seized one died (SIGKILL). */
	if (item->nr_threads != task->nr_other_threads + 1) {
		pr_err("process %d: a thread exited while the process was being seized\n", item->pid);
		return -ESRCH;
	}
	item->threads[0] = item->pid;
	for (i = 0; i < task->nr_other_threads; i++)
		item->threads[i + 1] = task->other_threads[i].tid;
	return 0;
}

/*
 * The main thread is seized; seize the others as /proc/PID/task lists them. A thread
 * still running may start new ones, so the list is read again until a pass finds no
 * thread that is not seized; seized threads start no more, so this ends.
 */
static int seize_other_threads(struct dump_task *task)
{
	struct pstree_item *item = task->item;
	unsigned int i, found;
	int ret;

	do {
		found = 0;
		for (i = 0; i < item->nr_threads; i++) {
			if (thread_seized(task, item->threads[i]))
				continue;
			ret = seize_one_thread(task, item->threads[i]);
			if (ret)
				return ret;
			found++;
		}
		if (found) {
			ret = pstree_collect_ids(item);
			if (ret)
				return ret;
		}
	} while (found);
	return fix_thread_list(task);
}

static struct dump_task *new_dump_task(pid_t pid)
{
	struct dump_task *task = calloc(1, sizeof(*task));
	struct dump_task **grown = realloc(dump_tasks, (nr_dump_tasks + 1) * sizeof(*grown));

	if (grown)
		dump_tasks = grown;
	if (!task || !grown) {
		pr_err("no memory for process %d\n", pid);
		free(task);
		return NULL;
	}
	dump_tasks[nr_dump_tasks++] = task;
	return task;
}

/*
 * Put pid in the tree under parent and seize it. A zombie cannot be traced and has
 * nothing left but its exit status, which /proc/PID/stat still shows.
 */
static int add_task(struct pstree_item *parent, pid_t pid)
{
	struct proc_pid_stat st;
	struct dump_task *task;
	int ret;

	ret = parse_pid_stat(pid, &st);
	if (ret)
		return ret;
	if (!parent && st.state == 'Z') {
		pr_err("process %d is a zombie, there is nothing to dump\n", pid);
		return -EINVAL;
	}
	task = new_dump_task(pid);
	if (!task)
		return -ENOMEM;
	task->proc_state = st.state;
	task->item = pstree_add_item(parent, pid);
	if (!task->item)
		return -ENOMEM;
	if (st.state == 'Z') {
		task->item->zombie = true;
		task->item->exit_status = st.exit_code;
		pr_info("process %d is a zombie (wait status %#x)\n", pid, st.exit_code);
		return pstree_collect_ids(task->item);
	}
	ret = compel_seize(pid);
	if (ret)
		return ret;
	task->seized = true;
	pr_info("seized task %d\n", pid);
	/* Ids once it is stopped: a running process may still change its group. */
	ret = pstree_collect_ids(task->item);
	return ret ? ret : seize_other_threads(task);
}

/* Seize and add the children of task that the tree does not hold yet; *added counts them. */
static int add_new_children(struct dump_task *task, unsigned int *added)
{
	struct pstree_item *item = task->item;
	unsigned int nr = 0, i;
	pid_t *children = NULL;
	int ret = 0;

	for (i = 0; i < item->nr_threads && !ret; i++)
		ret = pstree_read_children(item->pid, item->threads[i], &children, &nr);
	for (i = 0; i < nr && !ret; i++) {
		if (pstree_find(children[i]))
			continue;
		ret = add_task(item, children[i]);
		(*added)++;
	}
	free(children);
	return ret;
}

/*
 * The root, then its children, theirs and so on, each seized as it is found. Passes
 * repeat until one finds nobody new: a child forked while its parent was being seized
 * shows up only in the next pass. Seized processes fork no more, so this ends.
 */
static int collect_and_seize_tree(pid_t root_pid)
{
	unsigned int added, i;
	int ret;

	ret = add_task(NULL, root_pid);
	while (!ret) {
		added = 0;
		/* dump_tasks grows inside the loop: new tasks are scanned in the same pass. */
		for (i = 0; i < nr_dump_tasks && !ret; i++)
			if (!dump_tasks[i]->item->zombie)
				ret = add_new_children(dump_tasks[i], &added);
		if (!added)
			break;
	}
	if (!ret)
		pr_info("the tree of %d holds %u processes\n", root_pid, nr_dump_tasks);
	/* Sessions and groups restore cannot give back fail the dump before any state is read. */
	return ret ? ret : pstree_check_leaders(opts.shell_job);
}

/* ------------------------------------------------ state read from outside ---- */

static void fill_regs(UserX86RegsEntry *re, const struct user_regs_struct *r)
{
	user_x86_regs_entry__init(re);
	re->r15 = r->r15;
	re->r14 = r->r14;
	re->r13 = r->r13;
	re->r12 = r->r12;
	re->bp = r->rbp;
	re->bx = r->rbx;
	re->r11 = r->r11;
	re->r10 = r->r10;
	re->r9 = r->r9;
	re->r8 = r->r8;
	re->ax = r->rax;
	re->cx = r->rcx;
	re->dx = r->rdx;
	re->si = r->rsi;
	re->di = r->rdi;
	re->orig_ax = r->orig_rax;
	re->ip = r->rip;
	re->cs = r->cs;
	re->flags = r->eflags;
	re->sp = r->rsp;
	re->ss = r->ss;
	re->fs_base = r->fs_base;
	re->gs_base = r->gs_base;
	re->ds = r->ds;
	re->es = r->es;
	re->fs = r->fs;
	re->gs = r->gs;
}

static int collect_thread_regs(struct dump_thread *th)
{
	struct user_regs_struct regs;
	size_t xstate_len;
	int ret;

	ret = compel_get_regs(th->tid, &regs);
	if (ret)
		return ret;
	/* Stored as the thread must resume: an interrupted syscall is set up to restart. */
	compel_fixup_syscall_restart(&regs);
	fill_regs(&th->regs, &regs);
	th->core.gpregs = &th->regs;
	pr_debug("thread %d: ip %llx sp %llx ax %llx orig_ax %llx fs_base %llx\n", th->tid,
		 regs.rip, regs.rsp, regs.rax, regs.orig_rax, regs.fs_base);

	ret = compel_get_xstate(th->tid, &th->xstate, &xstate_len);
	if (ret)
		return ret;
	th->core.xsave.data = th->xstate;
	th->core.xsave.len = xstate_len;
	pr_debug("thread %d: %zu bytes of xstate\n", th->tid, xstate_len);
	return compel_get_sigmask(th->tid, &th->core.blk_sigset);
}

/* Wrap the raw siginfos in image entries (the arrays are owned by task). */
static int wrap_siginfos(siginfo_t *infos, unsigned int nr, SiginfoEntry **entries,
			 SiginfoEntry ***ptrs)
{
	unsigned int i;

	if (!nr)
		return 0;
	*entries = calloc(nr, sizeof(**entries));
	*ptrs = calloc(nr, sizeof(**ptrs));
	if (!*entries || !*ptrs) {
		pr_err("no memory for %u pending signals\n", nr);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		siginfo_entry__init(&(*entries)[i]);
		(*entries)[i].siginfo.data = (uint8_t *)&infos[i];
		(*entries)[i].siginfo.len = sizeof(infos[i]);
		(*ptrs)[i] = &(*entries)[i];
	}
	return 0;
}

/* Signals queued for this thread alone. */
static int collect_thread_pending(struct dump_thread *th)
{
	unsigned int nr;
	int ret;

	ret = compel_get_pending(th->tid, false, &th->pending, &nr);
	if (ret)
		return ret;
	ret = wrap_siginfos(th->pending, nr, &th->pending_entries, &th->pending_ptrs);
	if (ret)
		return ret;
	th->core.n_pending = nr;
	th->core.pending = th->pending_ptrs;
	pr_debug("thread %d: %u pending signals\n", th->tid, nr);
	return 0;
}

/* Signals queued for the whole process. */
static int collect_shared_pending(struct dump_task *task)
{
	pid_t pid = task->item->pid;
	unsigned int nr;
	int ret;

	ret = compel_get_pending(pid, true, &task->shared_pending, &nr);
	if (ret)
		return ret;
	ret = wrap_siginfos(task->shared_pending, nr, &task->shared_pending_entries,
			    &task->shared_pending_ptrs);
	if (ret)
		return ret;
	task->tc.n_shared_pending = nr;
	task->tc.shared_pending = task->shared_pending_ptrs;
	pr_debug("task %d: %u shared pending signals\n", pid, nr);
	return 0;
}

static int collect_rseq_and_robust_list(struct dump_thread *th)
{
	struct compel_rseq rseq;
	unsigned long head;
	size_t len;
	int ret;

	ret = compel_get_rseq(th->tid, &rseq);
	if (ret)
		return ret;
	if (rseq.abi_pointer) {
		rseq_entry__init(&th->rseq);
		th->rseq.rseq_abi_pointer = rseq.abi_pointer;
		th->rseq.rseq_abi_size = rseq.abi_size;
		th->rseq.signature = rseq.signature;
		th->rseq.has_flags = true;
		th->rseq.flags = rseq.flags;
		th->core.rseq = &th->rseq;
	}
	if (syscall(SYS_get_robust_list, th->tid, &head, &len)) {
		int err = errno;

		pr_perror("cannot read the robust list of thread %d", th->tid);
		return -err;
	}
	th->core.robust_list = head;
	th->core.robust_list_len = len;
	return 0;
}

static int collect_creds(struct dump_task *task)
{
	struct proc_pid_status *st = &task->status;
	CredsEntry *ce = &task->creds;
	int ret;

	ret = parse_pid_status(task->item->pid, st);
	if (ret)
		return ret;
	/* Filters are not in the images yet: a restored task would silently lose them. */
	if (st->seccomp_mode) {
		pr_err("task %d uses seccomp (mode %d), which is not supported yet\n",
		       task->item->pid, st->seccomp_mode);
		return -ENOTSUP;
	}
	creds_entry__init(ce);
	ce->uid = st->uid[0];
	ce->euid = st->uid[1];
	ce->suid = st->uid[2];
	ce->fsuid = st->uid[3];
	ce->gid = st->gid[0];
	ce->egid = st->gid[1];
	ce->sgid = st->gid[2];
	ce->fsgid = st->gid[3];
	ce->cap_inh = st->cap_inh;
	ce->cap_prm = st->cap_prm;
	ce->cap_eff = st->cap_eff;
	ce->cap_bnd = st->cap_bnd;
	ce->has_cap_amb = true;
	ce->cap_amb = st->cap_amb;
	ce->n_groups = st->nr_groups;
	ce->groups = st->groups;
	ce->has_no_new_privs = true;
	ce->no_new_privs = st->no_new_privs;
	/* secbits are not in /proc: filled by an injected prctl(PR_GET_SECUREBITS). */
	task->tc.creds = ce;
	task->tc.umask = st->umask;
	return 0;
}

/* Limits come from /proc: prlimit64() on another process fails without CAP_SYS_RESOURCE. */
static int collect_rlimits(struct dump_task *task)
{
	struct proc_rlimit lims[PROC_NR_RLIMITS];
	unsigned int i;
	int ret;

	ret = parse_pid_limits(task->item->pid, lims);
	if (ret)
		return ret;
	for (i = 0; i < PROC_NR_RLIMITS; i++) {
		rlimit_entry__init(&task->rlimits[i]);
		task->rlimits[i].resource = i;
		task->rlimits[i].cur = lims[i].cur;
		task->rlimits[i].max = lims[i].max;
		task->rlimit_ptrs[i] = &task->rlimits[i];
	}
	task->tc.n_rlimits = PROC_NR_RLIMITS;
	task->tc.rlimits = task->rlimit_ptrs;
	return 0;
}

static int collect_proc_misc(struct dump_task *task)
{
	pid_t pid = task->item->pid;
	int ret;

	ret = parse_pid_personality(pid, &task->tc.personality);
	if (ret)
		return ret;
	ret = parse_pid_comm(pid, task->comm, sizeof(task->comm));
	if (ret)
		return ret;
	task->tc.comm = task->comm;
	task->tc.state = task->proc_state == 'T' ? TASK_STATE__TASK_STOPPED : TASK_STATE__TASK_ALIVE;
	return parse_pid_timers(pid, &task->proc_timers, &task->nr_proc_timers);
}

/* --------------------------------------------- state read by the task itself ---- */

/* Run one syscall in the task; a syscall that fails there is an error too. */
static int remote_call(struct compel_ctl *ctl, const char *what, long *result, long nr,
		       unsigned long a1, unsigned long a2, unsigned long a3, unsigned long a4)
{
	int ret = compel_syscall(ctl, result, nr, a1, a2, a3, a4, 0, 0);

	if (ret)
		return ret;
	if (*result < 0 && *result > -4096) {
		pr_err("remote %s failed: %s\n", what, strerror(-*result));
		return (int)*result;
	}
	return 0;
}

/* A remote call whose result the kernel writes into the scratch page. */
static int remote_call_read(struct compel_ctl *ctl, const char *what, void *out, size_t len,
			    long nr, unsigned long a1, unsigned long a2, unsigned long a3,
			    unsigned long a4)
{
	long result;
	int ret;

	ret = remote_call(ctl, what, &result, nr, a1, a2, a3, a4);
	if (ret)
		return ret;
	return compel_scratch_read(ctl, 0, out, len);
}

static int collect_sigactions(struct dump_task *task, struct compel_ctl *ctl)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	unsigned int sig, nr = 0;
	int ret;

	for (sig = 1; sig <= NR_SIGNALS; sig++) {
		struct kernel_sigaction ksa;
		SaEntry *sa = &task->sa[nr];

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		ret = remote_call_read(ctl, "rt_sigaction", &ksa, sizeof(ksa), __NR_rt_sigaction,
				       sig, 0, scratch, sizeof(ksa.mask));
		if (ret)
			return ret;
		sa_entry__init(sa);
		sa->sig = sig;
		sa->handler = ksa.handler;
		sa->flags = ksa.flags;
		sa->restorer = ksa.restorer;
		sa->mask = ksa.mask;
		task->sa_ptrs[nr++] = sa;
	}
	task->tc.n_sigactions = nr;
	task->tc.sigactions = task->sa_ptrs;
	return 0;
}

static int collect_itimers(struct dump_task *task, struct compel_ctl *ctl)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	int which, ret;

	for (which = 0; which < NR_ITIMERS; which++) {
		struct itimerval itv;
		ItimerEntry *ie = &task->itimers[which];

		ret = remote_call_read(ctl, "getitimer", &itv, sizeof(itv), __NR_getitimer, which,
				       scratch, 0, 0);
		if (ret)
			return ret;
		itimer_entry__init(ie);
		ie->isec = itv.it_interval.tv_sec;
		ie->iusec = itv.it_interval.tv_usec;
		ie->vsec = itv.it_value.tv_sec;
		ie->vusec = itv.it_value.tv_usec;
		task->itimer_ptrs[which] = ie;
	}
	task->tc.n_itimers = NR_ITIMERS;
	task->tc.itimers = task->itimer_ptrs;
	return 0;
}

static int collect_thread_misc(struct dump_thread *th, struct compel_ctl *ctl)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	uint64_t tid_address;
	stack_t ss;
	int ret;

	ret = remote_call_read(ctl, "prctl(PR_GET_TID_ADDRESS)", &tid_address, sizeof(tid_address),
			       __NR_prctl, PR_GET_TID_ADDRESS, scratch, 0, 0);
	if (ret)
		return ret;
	th->core.clear_tid_addr = tid_address;

	ret = remote_call_read(ctl, "sigaltstack", &ss, sizeof(ss), __NR_sigaltstack, 0, scratch,
			       0, 0);
	if (ret)
		return ret;
	sigaltstack_entry__init(&th->sas);
	th->sas.ss_sp = (unsigned long)ss.ss_sp;
	th->sas.ss_size = ss.ss_size;
	th->sas.ss_flags = ss.ss_flags;
	th->core.sas = &th->sas;
	return 0;
}

static int collect_prctls(struct dump_task *task, struct compel_ctl *ctl)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	TaskCoreEntry *tc = &task->tc;
	long result;
	int value, ret;

	ret = remote_call_read(ctl, "prctl(PR_GET_PDEATHSIG)", &value, sizeof(value), __NR_prctl,
			       PR_GET_PDEATHSIG, scratch, 0, 0);
	if (ret)
		return ret;
	tc->has_pdeath_sig = true;
	tc->pdeath_sig = value;

	ret = remote_call_read(ctl, "prctl(PR_GET_CHILD_SUBREAPER)", &value, sizeof(value),
			       __NR_prctl, PR_GET_CHILD_SUBREAPER, scratch, 0, 0);
	if (ret)
		return ret;
	tc->has_child_subreaper = true;
	tc->child_subreaper = value;

	ret = remote_call(ctl, "prctl(PR_GET_DUMPABLE)", &result, __NR_prctl, PR_GET_DUMPABLE, 0,
			  0, 0);
	if (ret)
		return ret;
	tc->has_dumpable = true;
	tc->dumpable = result;

	ret = remote_call(ctl, "prctl(PR_GET_THP_DISABLE)", &result, __NR_prctl,
			  PR_GET_THP_DISABLE, 0, 0, 0);
	if (ret)
		return ret;
	tc->has_thp_disabled = true;
	tc->thp_disabled = result;

	ret = remote_call(ctl, "prctl(PR_GET_SECUREBITS)", &result, __NR_prctl, PR_GET_SECUREBITS,
			  0, 0, 0);
	if (ret)
		return ret;
	task->creds.secbits = result;

	/* brk(0) fails to move the break and returns where it is: not in /proc. */
	ret = remote_call(ctl, "brk", &result, __NR_brk, 0, 0, 0, 0);
	if (ret)
		return ret;
	task->brk = result;
	return 0;
}

static int collect_one_posix_timer(struct compel_ctl *ctl, const struct proc_posix_timer *pt,
				   PosixTimerEntry *pte)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	struct itimerspec its;
	long overrun;
	int ret;

	ret = remote_call_read(ctl, "timer_gettime", &its, sizeof(its), __NR_timer_gettime, pt->id,
			       scratch, 0, 0);
	if (ret)
		return ret;
	ret = remote_call(ctl, "timer_getoverrun", &overrun, __NR_timer_getoverrun, pt->id, 0, 0,
			  0);
	if (ret)
		return ret;
	posix_timer_entry__init(pte);
	pte->it_id = pt->id;
	pte->clock_id = pt->clock_id;
	pte->si_signo = pt->signo;
	pte->it_sigev_notify = pt->sigev_notify;
	pte->sival_ptr = pt->sival_ptr;
	pte->overrun = overrun;
	pte->isec = its.it_interval.tv_sec;
	pte->insec = its.it_interval.tv_nsec;
	pte->vsec = its.it_value.tv_sec;
	pte->vnsec = its.it_value.tv_nsec;
	pte->has_notify_thread_id = true;
	pte->notify_thread_id = pt->notify_tid;
	return 0;
}

static int collect_posix_timers(struct dump_task *task, struct compel_ctl *ctl)
{
	unsigned int i, nr = task->nr_proc_timers;
	int ret;

	if (!nr)
		return 0;
	task->posix_timers = calloc(nr, sizeof(*task->posix_timers));
	task->posix_timer_ptrs = calloc(nr, sizeof(*task->posix_timer_ptrs));
	if (!task->posix_timers || !task->posix_timer_ptrs) {
		pr_err("no memory for %u posix timers\n", nr);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		ret = collect_one_posix_timer(ctl, &task->proc_timers[i], &task->posix_timers[i]);
		if (ret)
			return ret;
		task->posix_timer_ptrs[i] = &task->posix_timers[i];
	}
	task->tc.n_posix_timers = nr;
	task->tc.posix_timers = task->posix_timer_ptrs;
	return 0;
}

/*
 * Where the syscall instruction goes: code of the program or a library (never the
 * vDSO or vsyscall page, which ptrace may not write), one that stays mapped.
 */
static int find_syscall_ip(struct dump_task *task, unsigned long *ip)
{
	unsigned int i;

	for (i = 0; i < task->nr_vmas; i++) {
		const struct proc_vma *vma = &task->vmas[i];

		if ((vma->prot & PROT_EXEC) && vma->path[0] != '[' && !vma->shared) {
			*ip = vma->start;
			return 0;
		}
	}
	pr_err("task %d has no executable mapping to run syscalls from\n", task->item->pid);
	return -ENOENT;
}

static int collect_injected_state(struct dump_task *task)
{
	struct compel_ctl *ctl;
	unsigned long ip;
	int ret, cure_ret;

	ret = find_syscall_ip(task, &ip);
	if (ret)
		return ret;
	ret = compel_infect(task->item->pid, ip, &ctl);
	if (ret)
		return ret;
	ret = collect_sigactions(task, ctl);
	if (!ret)
		ret = collect_thread_misc(&task->main_thread, ctl);
	if (!ret)
		ret = collect_itimers(task, ctl);
	if (!ret)
		ret = collect_prctls(task, ctl);
	if (!ret)
		ret = collect_posix_timers(task, ctl);
	/* Cure whatever happened: the task must get its registers and code back. */
	cure_ret = compel_cure(ctl);
	return ret ? ret : cure_ret;
}

/*
 * The tid address and sigaltstack of another thread are read by that thread itself.
 * Threads share the code page the syscall goes to: one thread is infected at a time.
 */
static int collect_other_thread_injected(struct dump_thread *th, unsigned long ip)
{
	struct compel_ctl *ctl;
	int ret, cure_ret;

	ret = compel_infect(th->tid, ip, &ctl);
	if (ret)
		return ret;
	ret = collect_thread_misc(th, ctl);
	cure_ret = compel_cure(ctl);
	return ret ? ret : cure_ret;
}

/* Registers, signals, rseq and robust list: what ptrace shows of one thread. */
static int collect_thread_state(struct dump_thread *th)
{
	int ret;

	thread_core_entry__init(&th->core);
	th->core.tid = th->tid;
	ret = collect_thread_regs(th);
	if (!ret)
		ret = collect_thread_pending(th);
	return ret ? ret : collect_rseq_and_robust_list(th);
}

/* Every thread but the main one: its own state, then core.threads in pstree order. */
static int collect_other_threads(struct dump_task *task)
{
	unsigned int i, nr = task->nr_other_threads;
	unsigned long ip;
	int ret;

	if (!nr)
		return 0;
	ret = find_syscall_ip(task, &ip);
	if (ret)
		return ret;
	task->other_thread_ptrs = calloc(nr, sizeof(*task->other_thread_ptrs));
	if (!task->other_thread_ptrs) {
		pr_err("no memory for the %u threads of %d\n", nr, task->item->pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		struct dump_thread *th = &task->other_threads[i];

		ret = collect_thread_state(th);
		if (!ret)
			ret = collect_other_thread_injected(th, ip);
		if (ret)
			return ret;
		task->other_thread_ptrs[i] = &th->core;
	}
	task->core.n_threads = nr;
	task->core.threads = task->other_thread_ptrs;
	return 0;
}

static int collect_task_state(struct dump_task *task)
{
	int ret;

	pr_info("collecting the state of task %d\n", task->item->pid);
	core_entry__init(&task->core);
	task_core_entry__init(&task->tc);
	task->core.mtype = MARCH__X86_64;
	task->core.tc = &task->tc;
	task->core.thread = &task->main_thread.core;
	task->main_thread.tid = task->item->pid;

	/* VMAs first: the injection needs an executable address of the task. */
	ret = parse_pid_smaps(task->item->pid, &task->vmas, &task->nr_vmas);
	if (!ret)
		ret = collect_thread_state(&task->main_thread);
	if (!ret)
		ret = collect_shared_pending(task);
	if (!ret)
		ret = collect_creds(task);
	if (!ret)
		ret = collect_rlimits(task);
	if (!ret)
		ret = collect_proc_misc(task);
	if (!ret)
		ret = collect_injected_state(task);
	if (!ret)
		ret = collect_other_threads(task);
	return ret;
}

/* ------------------------------------------------------------- images ---- */

static int write_core(struct dump_task *task)
{
	struct cr_img *img;
	int ret;

	img = open_image(CR_IMG_CORE, O_WRONLY, task->item->pid);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &task->core);
	close_image(img);
	return ret;
}

static int write_inventory(pid_t root_pid)
{
	InventoryEntry inv = INVENTORY_ENTRY__INIT;
	struct utsname uts;
	struct cr_img *img;
	int ret;

	if (uname(&uts)) {
		int err = errno;

		pr_perror("uname");
		return -err;
	}
	inv.img_version = IMG_FORMAT_VERSION;
	inv.root_pid = root_pid;
	inv.kernel_release = uts.release;
	inv.has_page_size = true;
	inv.page_size = sysconf(_SC_PAGESIZE);
	/* Restore refuses these images without the plugins that took objects here. */
	ret = cr_plugins_to_inventory(&inv);
	if (ret)
		return ret;
	img = open_image(CR_IMG_INVENTORY, O_WRONLY, 0);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &inv);
	close_image(img);
	return ret;
}

/* A stale inventory.img would make a half-written directory look like a valid dump. */
static int remove_old_inventory(void)
{
	char name[64];

	snprintf(name, sizeof(name), cr_img_descs[CR_IMG_INVENTORY].fmt, 0UL);
	if (unlinkat(images_dir_fd, name, 0) && errno != ENOENT) {
		int err = errno;

		pr_perror("cannot remove the old %s", name);
		return -err;
	}
	return 0;
}

/*
 * Devices first, before any of the task's state is read: a plugin must quiesce a device
 * (stop its queues) before criu looks at the memory the device writes into.
 */
static int checkpoint_devices(pid_t pid)
{
	int ret = run_plugins(PAUSE_DEVICES, pid);

	/* -ENOTSUP: no plugin has a device in this task, nothing to do. */
	if (ret >= 0 || ret == -ENOTSUP)
		ret = run_plugins(CHECKPOINT_DEVICES, pid);
	return ret >= 0 || ret == -ENOTSUP ? 0 : ret;
}

static int dump_task_memory(struct dump_task *task, struct dump_stats *stats)
{
	struct timespec start;
	int ret;

	pr_info("dumping the memory of task %d\n", task->item->pid);
	clock_gettime(CLOCK_MONOTONIC, &start);
	ret = dump_task_mm(task->item->pid, task->vmas, task->nr_vmas, task->brk, &stats->mem);
	stats->memdump_us += usec_since(&start);
	return ret;
}

static int dump_files(struct dump_task *task)
{
	int ret;

	pr_info("dumping the files of task %d\n", task->item->pid);
	ret = dump_task_files(task->item->pid);

	return ret ? ret : dump_task_fs(task->item->pid);
}

/* A live process: its state, memory, files and core image. */
static int dump_one_task(struct dump_task *task, struct dump_stats *stats)
{
	int ret = collect_task_state(task);

	if (!ret)
		ret = dump_task_memory(task, stats);
	if (!ret)
		ret = dump_files(task);
	return ret ? ret : write_core(task);
}

/* A zombie has no memory or files left: its core holds its name and exit status. */
static int dump_zombie(struct dump_task *task)
{
	int ret;

	core_entry__init(&task->core);
	task_core_entry__init(&task->tc);
	thread_core_entry__init(&task->main_thread.core);
	user_x86_regs_entry__init(&task->main_thread.regs);
	task->core.mtype = MARCH__X86_64;
	task->core.tc = &task->tc;
	task->core.thread = &task->main_thread.core;
	task->main_thread.core.tid = task->item->pid;
	task->main_thread.core.gpregs = &task->main_thread.regs;
	ret = parse_pid_comm(task->item->pid, task->comm, sizeof(task->comm));
	if (ret)
		return ret;
	task->tc.comm = task->comm;
	task->tc.state = TASK_STATE__TASK_ZOMBIE;
	task->tc.has_exit_code = true;
	task->tc.exit_code = task->item->exit_status;
	return write_core(task);
}

static int dump_tree(struct dump_stats *stats)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < nr_dump_tasks && !ret; i++) {
		struct dump_task *task = dump_tasks[i];

		ret = task->item->zombie ? dump_zombie(task) : dump_one_task(task, stats);
	}
	return ret;
}

/* Devices of every process, before any process's state is read. */
static int checkpoint_tree_devices(void)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < nr_dump_tasks && !ret; i++)
		if (dump_tasks[i]->seized)
			ret = checkpoint_devices(dump_tasks[i]->item->pid);
	return ret;
}

/* ------------------------------------------------------------ the end ---- */

static void release_task(struct dump_task *task, bool dumped)
{
	pid_t pid;

	if (!task->seized)
		return;
	pid = task->item->pid;
	if (dumped && !opts.leave_running) {
		/* After a dump every thread the item lists is seized (fix_thread_list). */
		compel_kill_process(pid, task->item->threads, task->item->nr_threads);
		pr_info("task %d killed after the dump\n", pid);
		return;
	}
	/* A task that was group-stopped stays stopped: the kernel re-stops it on detach. */
	for (unsigned int i = 0; i < task->nr_other_threads; i++)
		compel_detach(task->other_threads[i].tid);
	if (compel_detach(pid))
		return;
	pr_info("task %d resumed\n", pid);
}

static void free_dump_thread(struct dump_thread *th)
{
	free(th->xstate);
	free(th->pending);
	free(th->pending_entries);
	free(th->pending_ptrs);
}

static void free_dump_task(struct dump_task *task)
{
	free_proc_vmas(task->vmas, task->nr_vmas);
	free_dump_thread(&task->main_thread);
	for (unsigned int i = 0; i < task->nr_other_threads; i++)
		free_dump_thread(&task->other_threads[i]);
	free(task->other_threads);
	free(task->other_thread_ptrs);
	free(task->shared_pending);
	free(task->shared_pending_entries);
	free(task->shared_pending_ptrs);
	free(task->posix_timers);
	free(task->posix_timer_ptrs);
	free(task->proc_timers);
	free_pid_status(&task->status);
	free(task);
}

/* 7. Kill the tree (or resume it with --leave-running); resume it on failure. */
static void release_tree(bool dumped)
{
	unsigned int i;

	for (i = 0; i < nr_dump_tasks; i++)
		release_task(dump_tasks[i], dumped);
}

static void free_tree(void)
{
	unsigned int i;

	for (i = 0; i < nr_dump_tasks; i++)
		free_dump_task(dump_tasks[i]);
	free(dump_tasks);
	dump_tasks = NULL;
	nr_dump_tasks = 0;
	pstree_free();
}

static void print_stats(const struct dump_stats *stats)
{
	if (!opts.display_stats)
		return;
	pr_msg("Displaying dump stats:\n");
	pr_msg("Freezing time: %" PRIu64 " us\n", stats->freezing_us);
	pr_msg("Memory dump time: %" PRIu64 " us\n", stats->memdump_us);
	pr_msg("Memory pages scanned: %" PRIu64 " (0x%" PRIx64 ")\n", stats->mem.pages_scanned,
	       stats->mem.pages_scanned);
	pr_msg("Memory pages written: %" PRIu64 " (0x%" PRIx64 ")\n", stats->mem.pages_written,
	       stats->mem.pages_written);
	pr_msg("Total dump time: %" PRIu64 " us\n", usec_since(&stats->start));
}

int cr_dump_tasks(pid_t pid)
{
	struct dump_stats stats = { 0 };
	bool files_open = false;
	int ret;

	pr_info("Dumping process %d\n", pid);
	clock_gettime(CLOCK_MONOTONIC, &stats.start);
	/* Before touching the task: a plugin that fails to load leaves it as it was. */
	ret = cr_plugin_init(CR_PLUGIN_STAGE__DUMP);
	if (ret)
		return -1;
	ret = remove_old_inventory();
	if (ret)
		goto out;

	/* 1. Freeze the whole tree. */
	clock_gettime(CLOCK_MONOTONIC, &stats.freeze_start);
	ret = collect_and_seize_tree(pid);
	stats.freezing_us = usec_since(&stats.freeze_start);
	if (ret)
		goto out;

	/* 2. Devices: once the whole tree is seized and before any of its state is read. */
	ret = checkpoint_tree_devices();
	if (ret)
		goto out;

	/* files.img stays open across memory (mapped files, exe) and fds of every task. */
	ret = files_dump_init();
	if (ret)
		goto out;
	files_open = true;

	/* 3.-5. Each task: its state, memory, files and core image. */
	ret = dump_tree(&stats);
	if (ret)
		goto out;

	/* 6. Images: pstree, then inventory.img last, once all else is on disk. */
	ret = pstree_write();
	if (ret)
		goto out;
	files_open = false;
	ret = files_dump_fini();
	if (ret)
		goto out;
	/* Plugins may still add images; inventory.img, written last, seals the dump. */
	ret = run_plugins(DUMP_DEVICES_LATE, pid);
	if (ret)
		goto out;
	ret = write_inventory(pid);
out:
	if (files_open)
		files_dump_fini();
	/* Before the tree runs again: on failure plugins resume the devices they paused. */
	cr_plugin_fini(CR_PLUGIN_STAGE__DUMP, ret);
	release_tree(ret == 0);
	if (!ret)
		print_stats(&stats);
	free_tree();
	return ret ? -1 : 0;
}
