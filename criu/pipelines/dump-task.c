/*
 * Dump, one seized task's state: what /proc and ptrace show from outside (registers,
 * signals, creds, rlimits, rseq) and what the task reads for criu through compel's
 * injected syscalls (sigactions, itimers, prctls, POSIX timers); its cgroups.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/time.h>

#include "cgroup.h"
#include "compel.h"
#include "dump-task.h"
#include "log.h"
#include "lsm.h"
#include "namespaces.h"
#include "proc_parse.h"
#include "parasite-proto.h"
#include "pstree.h"
#include "regs-x86.h"
#include "seccomp.h"
#include "task-sched.h"

/* The kernel's struct sigaction as rt_sigaction() reads and writes it on x86_64. */
struct kernel_sigaction {
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

/* ------------------------------------------------ state read from outside ---- */

static void thread_name(const struct dump_thread *th, char *buf, size_t len)
{
	snprintf(buf, len, "thread %d", th->tid);
}

static int collect_thread_regs(struct dump_thread *th)
{
	struct user_regs_struct regs;
	struct user_desc tls[X86_GDT_TLS_NUM];
	char who[32];
	size_t xstate_len;
	void *xstate;
	int ret;

	ret = compel_get_regs(th->tid, &regs);
	if (ret)
		return ret;
	/* Stored as the thread must resume: an interrupted syscall is set up to restart. */
	compel_fixup_syscall_restart(&regs);
	gpregs_to_image(&regs, &th->regs);
	pr_debug("thread %d: ip %llx sp %llx ax %llx orig_ax %llx fs_base %llx\n", th->tid,
		 regs.rip, regs.rsp, regs.rax, regs.orig_rax, regs.fs_base);

	ret = compel_get_xstate(th->tid, &xstate, &xstate_len);
	if (ret)
		return ret;
	thread_name(th, who, sizeof(who));
	ret = xsave_to_image(xstate, xstate_len, &th->fpregs, who);
	/* Cheap (a few KiB), and the dump fails rather than lose state the image cannot hold. */
	if (!ret)
		ret = xsave_check_round_trip(xstate, xstate_len, &th->fpregs, who);
	free(xstate);
	if (ret)
		return ret;
	pr_debug("thread %d: %zu bytes of xstate, xstate_bv %#llx\n", th->tid, xstate_len,
		 (unsigned long long)th->fpregs.xsave.xstate_bv);
	ret = compel_get_tls(th->tid, X86_GDT_TLS_FIRST, X86_GDT_TLS_NUM, tls);
	if (ret)
		return ret;
	tls_to_image(tls, &th->tls);
	th->info.gpregs = &th->regs;
	th->info.fpregs = &th->fpregs.fpregs;
	th->info.n_tls = X86_GDT_TLS_NUM;
	th->info.tls = th->tls.ptrs;
	th->tcore.has_blk_sigset = true;
	return compel_get_sigmask(th->tid, &th->tcore.blk_sigset);
}

/* The raw siginfos as a signal_queue_entry (its arrays are owned by q). */
static int collect_sigqueue(pid_t tid, bool shared, struct dump_sigqueue *q)
{
	unsigned int nr, i;
	int ret;

	signal_queue_entry__init(&q->entry);
	ret = compel_get_pending(tid, shared, &q->infos, &nr);
	if (ret || !nr)
		return ret;
	q->entries = calloc(nr, sizeof(*q->entries));
	q->ptrs = calloc(nr, sizeof(*q->ptrs));
	if (!q->entries || !q->ptrs) {
		pr_err("no memory for %u pending signals of %d\n", nr, tid);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		siginfo_entry__init(&q->entries[i]);
		q->entries[i].siginfo.data = (uint8_t *)&q->infos[i];
		q->entries[i].siginfo.len = sizeof(q->infos[i]);
		q->ptrs[i] = &q->entries[i];
	}
	q->entry.n_signals = nr;
	q->entry.signals = q->ptrs;
	pr_debug("%d: %u %s pending signals\n", tid, nr, shared ? "shared" : "own");
	return 0;
}

static void free_sigqueue(struct dump_sigqueue *q)
{
	free(q->infos);
	free(q->entries);
	free(q->ptrs);
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
		th->tcore.rseq_entry = &th->rseq;
	}
	if (syscall(SYS_get_robust_list, th->tid, &head, &len)) {
		int err = errno;

		pr_perror("cannot read the robust list of thread %d", th->tid);
		return -err;
	}
	th->tcore.futex_rla = head;
	th->tcore.futex_rla_len = len;
	return 0;
}

/* The uapi layouts: struct rseq's rseq_cs and flags fields, and struct rseq_cs. */
#define RSEQ_AREA_CS		  8
#define RSEQ_AREA_FLAGS		  16
#define RSEQ_NO_RESTART_ON_SIGNAL (1u << 1) /* RSEQ_CS_FLAG_NO_RESTART_ON_SIGNAL */
struct rseq_cs_desc {
	uint32_t version, flags;
	uint64_t start_ip, post_commit_offset, abort_ip;
};

static int thread_mem(pid_t tid, bool write, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len}, remote = {(void *)addr, len};
	ssize_t n = write ? process_vm_writev(tid, &local, 1, &remote, 1, 0)
			  : process_vm_readv(tid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	pr_err("thread %d: cannot %s %zu bytes of its rseq state at %#llx: %s\n", tid,
	       write ? "write" : "read", len, (unsigned long long)addr,
	       n < 0 ? strerror(errno) : "short");
	return n < 0 ? -errno : -EIO;
}

/*
 * A thread stopped inside an rseq critical section. The kernel takes a thread out of the
 * section it was preempted in (to its abort handler, clearing rseq_cs) when it next goes
 * back to user space, unless the section may not be restarted (NO_RESTART_ON_SIGNAL). The
 * parasite's run goes back to user space outside the section, where the kernel only
 * clears rseq_cs. So the section is read before, the image has the thread where the kernel
 * would have put it (its abort handler; or, not restartable, where it is, with rseq_cs
 * kept: rseq_cs_pointer, as CRIU records it), and settle_rseq_cs() puts the running thread
 * there too once its parasite is gone.
 */
static int collect_rseq_cs(struct dump_thread *th)
{
	uint64_t area = th->rseq.rseq_abi_pointer, ip = th->regs.ip;
	struct rseq_cs_desc cs;
	uint32_t area_flags;
	int ret;

	if (!th->tcore.rseq_entry)
		return 0;
	ret = thread_mem(th->tid, false, area + RSEQ_AREA_CS, &th->rseq_cs, sizeof(th->rseq_cs));
	if (ret || !th->rseq_cs)
		return ret;
	ret = thread_mem(th->tid, false, th->rseq_cs, &cs, sizeof(cs))
		      ?: thread_mem(th->tid, false, area + RSEQ_AREA_FLAGS, &area_flags,
				    sizeof(area_flags));
	if (ret)
		return ret;
	if (ip < cs.start_ip || ip - cs.start_ip >= cs.post_commit_offset) {
		th->rseq_cs = 0; /* a section left already: the kernel clears it lazily */
		return 0;
	}
	th->rseq_abort = !((cs.flags | area_flags) & RSEQ_NO_RESTART_ON_SIGNAL);
	if (th->rseq_abort) {
		th->regs.ip = cs.abort_ip;
	} else {
		th->rseq.has_rseq_cs_pointer = true;
		th->rseq.rseq_cs_pointer = th->rseq_cs;
	}
	pr_info("thread %d: in the rseq critical section %#llx at %#llx: %s\n", th->tid,
		(unsigned long long)th->rseq_cs, (unsigned long long)ip,
		th->rseq_abort ? "it resumes at its abort handler" : "it may not be restarted");
	return 0;
}

/* The running thread, its parasite gone, as collect_rseq_cs() left its image. */
static int settle_rseq_cs(const struct dump_thread *th)
{
	uint64_t area_cs = th->rseq.rseq_abi_pointer + RSEQ_AREA_CS, none = 0;
	struct user_regs_struct regs;
	int ret;

	if (!th->rseq_cs)
		return 0;
	if (!th->rseq_abort)
		return thread_mem(th->tid, true, area_cs, (void *)&th->rseq_cs,
				  sizeof(th->rseq_cs));
	ret = thread_mem(th->tid, true, area_cs, &none, sizeof(none))
		      ?: compel_get_regs(th->tid, &regs);
	if (ret)
		return ret;
	regs.rip = th->regs.ip;
	return compel_set_regs(th->tid, &regs);
}

/* A 64-bit capability set as creds_entry holds it: two u32 words, the low one first. */
static void cap_words(uint64_t set, uint32_t words[2], size_t *n, uint32_t **field)
{
	words[0] = (uint32_t)set;
	words[1] = (uint32_t)(set >> 32);
	*n = 2;
	*field = words;
}

/*
 * The ids of /proc/PID/status, as criu reads them, as the task sees them in its user
 * namespace (ns-user.c): the images keep those.
 */
static int ids_as_tree_sees(struct proc_pid_status *st, pid_t pid)
{
	char what[32];
	int ret = 0;

	snprintf(what, sizeof(what), "task %d", pid);
	for (int i = 0; i < 4 && !ret; i++)
		ret = userns_tree_uid(st->uid[i], &st->uid[i], what)
			      ?: userns_tree_gid(st->gid[i], &st->gid[i], what);
	for (unsigned int i = 0; i < st->nr_groups && !ret; i++)
		ret = userns_tree_gid(st->groups[i], &st->groups[i], what);
	return ret;
}

static int collect_creds(struct dump_task *task)
{
	struct proc_pid_status *st = &task->status;
	CredsEntry *ce = &task->creds;
	int ret;

	ret = parse_pid_status(task->item->pid, st);
	if (!ret)
		ret = ids_as_tree_sees(st, task->item->pid);
	if (ret)
		return ret;
	creds_entry__init(ce);
	ce->uid = st->uid[0];
	ce->euid = st->uid[1];
	ce->suid = st->uid[2];
	ce->fsuid = st->uid[3];
	ce->gid = st->gid[0];
	ce->egid = st->gid[1];
	ce->sgid = st->gid[2];
	ce->fsgid = st->gid[3];
	cap_words(st->cap_inh, task->caps[0], &ce->n_cap_inh, &ce->cap_inh);
	cap_words(st->cap_prm, task->caps[1], &ce->n_cap_prm, &ce->cap_prm);
	cap_words(st->cap_eff, task->caps[2], &ce->n_cap_eff, &ce->cap_eff);
	cap_words(st->cap_bnd, task->caps[3], &ce->n_cap_bnd, &ce->cap_bnd);
	cap_words(st->cap_amb, task->caps[4], &ce->n_cap_amb, &ce->cap_amb);
	ce->n_groups = st->nr_groups;
	ce->groups = st->groups;
	ce->has_no_new_privs = true;
	ce->no_new_privs = st->no_new_privs;
	/* secbits are not in /proc: filled by an injected prctl(PR_GET_SECUREBITS). */
	return lsm_dump_task(task->item->pid, ce);
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
	task_rlimits_entry__init(&task->rlimits);
	for (i = 0; i < PROC_NR_RLIMITS; i++) {
		rlimit_entry__init(&task->rlimit[i]);
		task->rlimit[i].cur = lims[i].cur;
		task->rlimit[i].max = lims[i].max;
		task->rlimit_ptrs[i] = &task->rlimit[i];
	}
	task->rlimits.n_rlimits = PROC_NR_RLIMITS;
	task->rlimits.rlimits = task->rlimit_ptrs;
	task->tc.rlimits = &task->rlimits;
	return 0;
}

/* loginuid (as criu sees it, as CRIU keeps it) and oom_score_adj. */
static int collect_audit_and_oom(struct dump_task *task)
{
	long long value;
	int ret;

	ret = parse_pid_number(task->item->pid, "loginuid", &value);
	if (ret)
		return ret;
	task->tc.has_loginuid = true;
	task->tc.loginuid = (uint32_t)value;
	ret = parse_pid_number(task->item->pid, "oom_score_adj", &value);
	if (ret)
		return ret;
	task->tc.has_oom_score_adj = true;
	task->tc.oom_score_adj = (int32_t)value;
	return 0;
}

/*
 * The signal that stopped a group-stopped task, which /proc does not show: seized, it
 * reports its group stop with that signal in its siginfo (an interrupt stop would say
 * SIGTRAP). SIGSTOP when it cannot be told, which stops it all the same.
 */
static uint32_t group_stop_signal(pid_t pid)
{
	siginfo_t si;

	if (ptrace(PTRACE_GETSIGINFO, pid, NULL, &si) == 0 &&
	    (si.si_signo == SIGSTOP || si.si_signo == SIGTSTP || si.si_signo == SIGTTIN ||
	     si.si_signo == SIGTTOU))
		return si.si_signo;
	return SIGSTOP;
}

static int collect_proc_misc(struct dump_task *task)
{
	pid_t pid = task->item->pid;
	int ret;

	ret = parse_pid_personality(pid, &task->tc.personality);
	if (!ret)
		ret = parse_pid_comm(pid, task->comm, sizeof(task->comm));
	if (!ret)
		ret = collect_audit_and_oom(task);
	if (ret)
		return ret;
	task->tc.comm = task->comm;
	task->tc.flags = task->proc_flags;
	if (task->proc_state == 'T') {
		task->tc.task_state = TASK_STOPPED;
		task->tc.has_stop_signo = true;
		task->tc.stop_signo = group_stop_signal(pid);
	} else {
		task->tc.task_state = TASK_ALIVE;
	}
	return parse_pid_timers(pid, &task->proc_timers, &task->nr_proc_timers);
}

/* --------------------------------------------- state read by the task itself ---- */

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9) /* Linux 6.3 */
#endif

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

/* Signal sig's disposition as the nr-th of the task's sigactions (signal order). */
static void keep_sigaction(struct dump_task *task, unsigned int nr, const struct kernel_sigaction *ksa)
{
	SaEntry *sa = &task->sa[nr];

	sa_entry__init(sa);
	sa->sigaction = ksa->handler;
	sa->flags = ksa->flags;
	sa->restorer = ksa->restorer;
	sa->mask = ksa->mask;
	sa->has_compat_sigaction = true;
	sa->compat_sigaction = false;
	task->sa_ptrs[nr] = sa;
}

/* Every signal's disposition with injected syscalls, one rt_sigaction() each. */
static int collect_sigactions_injected(struct dump_task *task, struct compel_ctl *ctl)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	unsigned int sig, nr = 0;
	int ret;

	for (sig = 1; sig <= NR_SIGNALS; sig++) {
		struct kernel_sigaction ksa;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		ret = remote_call_read(ctl, "rt_sigaction", &ksa, sizeof(ksa), __NR_rt_sigaction,
				       sig, 0, scratch, sizeof(ksa.mask));
		if (ret)
			return ret;
		keep_sigaction(task, nr++, &ksa);
	}
	task->tc.n_sigactions = nr;
	return 0;
}

/* Every signal's disposition, read by the parasite in one go. */
static int collect_sigactions_parasite(struct dump_task *task, struct compel_ctl *parasite)
{
	struct parasite_cmd cmd = { .cmd = PARASITE_CMD_SIGACTIONS };
	const struct parasite_args *args = compel_parasite_args(parasite);
	struct parasite_answer answer;
	unsigned int sig, nr = 0;
	int ret;

	ret = compel_parasite_send(parasite, &cmd, NULL, 0);
	if (!ret)
		ret = compel_parasite_recv(parasite, &answer);
	if (!ret && answer.ret) {
		pr_err("task %d: its parasite cannot read the sigactions: %s\n", task->item->pid,
		       strerror(-answer.ret));
		ret = (int)answer.ret;
	}
	for (sig = 1; sig <= NR_SIGNALS && !ret; sig++) {
		struct kernel_sigaction ksa;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		memcpy(&ksa, &args->sigactions[sig - 1], sizeof(ksa));
		keep_sigaction(task, nr++, &ksa);
	}
	task->tc.n_sigactions = nr;
	return ret;
}

int dump_collect_sigactions(struct dump_task *task, struct compel_ctl *parasite)
{
	struct compel_ctl *ctl;
	unsigned long ip;
	int ret, cure_ret;

	task->tc.sigactions = task->sa_ptrs;
	if (parasite)
		return collect_sigactions_parasite(task, parasite);
	ret = dump_find_syscall_ip(task, &ip);
	if (!ret)
		ret = compel_infect(task->item->pid, ip, &ctl);
	if (ret)
		return ret;
	ret = collect_sigactions_injected(task, ctl);
	cure_ret = compel_cure(ctl);
	return ret ?: cure_ret;
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
	}
	task_timers_entry__init(&task->timers);
	task->timers.real = &task->itimers[ITIMER_REAL];
	task->timers.virt = &task->itimers[ITIMER_VIRTUAL];
	task->timers.prof = &task->itimers[ITIMER_PROF];
	task->tc.timers = &task->timers;
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
	th->info.clear_tid_addr = tid_address;

	ret = remote_call_read(ctl, "sigaltstack", &ss, sizeof(ss), __NR_sigaltstack, 0, scratch, 0,
			       0);
	if (ret)
		return ret;
	thread_sas_entry__init(&th->sas);
	th->sas.ss_sp = (unsigned long)ss.ss_sp;
	th->sas.ss_size = ss.ss_size;
	th->sas.ss_flags = ss.ss_flags;
	th->tcore.sas = &th->sas;
	return 0;
}

/*
 * membarrier registrations belong to the address space and only the task itself can list
 * them. Kernels before 6.3 cannot (EINVAL): nothing is written, as CRIU does there.
 */
static int collect_membarrier(struct compel_ctl *ctl, TaskCoreEntry *tc)
{
	long result;
	int ret = compel_syscall(ctl, &result, __NR_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0,
				 0, 0, 0, 0);

	if (ret || result == -EINVAL)
		return ret;
	if (result < 0) {
		pr_err("remote membarrier(GET_REGISTRATIONS) failed: %s\n", strerror(-result));
		return (int)result;
	}
	tc->has_membarrier_registration_mask = true;
	tc->membarrier_registration_mask = result;
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
	task->pdeath_sig = value;

	ret = remote_call_read(ctl, "prctl(PR_GET_CHILD_SUBREAPER)", &value, sizeof(value),
			       __NR_prctl, PR_GET_CHILD_SUBREAPER, scratch, 0, 0);
	if (ret)
		return ret;
	tc->has_child_subreaper = true;
	tc->child_subreaper = value != 0;

	ret = remote_call(ctl, "prctl(PR_GET_DUMPABLE)", &result, __NR_prctl, PR_GET_DUMPABLE, 0, 0,
			  0);
	if (ret)
		return ret;
	task->mm_misc.dumpable = result;

	ret = remote_call(ctl, "prctl(PR_GET_THP_DISABLE)", &result, __NR_prctl, PR_GET_THP_DISABLE,
			  0, 0, 0);
	if (ret)
		return ret;
	task->mm_misc.thp_disabled = result != 0;

	ret = remote_call(ctl, "prctl(PR_GET_SECUREBITS)", &result, __NR_prctl, PR_GET_SECUREBITS,
			  0, 0, 0);
	if (ret)
		return ret;
	task->creds.secbits = result;

	/* brk(0) fails to move the break and returns where it is: not in /proc. */
	ret = remote_call(ctl, "brk", &result, __NR_brk, 0, 0, 0, 0);
	if (ret)
		return ret;
	task->mm_misc.brk = result;

	return collect_membarrier(ctl, tc);
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
	pte->notify_thread_id = pidns_img_pid(pt->notify_tid);
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
	task->timers.n_posix = nr;
	task->timers.posix = task->posix_timer_ptrs;
	return 0;
}

/*
 * Where the syscall instruction goes: code of the program or a library (never the
 * vDSO or vsyscall page, which ptrace may not write), one that stays mapped.
 */
int dump_find_syscall_ip(struct dump_task *task, unsigned long *ip)
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

struct compel_ctl *dump_start_parasite(struct dump_task *task)
{
	struct compel_ctl *ctl;
	unsigned long ip;

	if (dump_find_syscall_ip(task, &ip) || compel_infect(task->item->pid, ip, &ctl))
		return NULL;
	if (!compel_parasite_start(ctl))
		return ctl;
	if (compel_cure(ctl))
		return NULL;
	pr_warn("task %d: no parasite, its state is read with injected syscalls and its pages "
		"from outside\n",
		task->item->pid);
	return NULL;
}

static int collect_injected_state(struct dump_task *task)
{
	struct compel_ctl *ctl;
	unsigned long ip;
	int ret, cure_ret;

	ret = dump_find_syscall_ip(task, &ip);
	if (ret)
		return ret;
	ret = compel_infect(task->item->pid, ip, &ctl);
	if (ret)
		return ret;
	ret = collect_thread_misc(&task->main_thread, ctl);
	/* The itimers first: the posix timers go into the timers entry they fill. */
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

	core_entry__init(&th->core);
	thread_info_x86__init(&th->info);
	thread_core_entry__init(&th->tcore);
	th->core.mtype = CORE_ENTRY__MARCH__X86_64;
	th->core.thread_info = &th->info;
	th->core.thread_core = &th->tcore;
	ret = collect_thread_regs(th);
	if (!ret)
		ret = collect_sigqueue(th->tid, false, &th->pending);
	if (!ret)
		ret = parse_pid_comm(th->tid, th->comm, sizeof(th->comm));
	if (ret)
		return ret;
	th->tcore.signals_p = &th->pending.entry;
	th->tcore.comm = th->comm;
	ret = dump_thread_sched(th->tid, &th->tcore);
	if (!ret)
		ret = seccomp_dump_thread(th->tid, &th->tcore);
	if (!ret)
		ret = collect_rseq_and_robust_list(th);
	return ret ? ret : collect_rseq_cs(th);
}

/* Every thread but the main one: its own state, read by ptrace and by itself. */
static int collect_other_threads(struct dump_task *task)
{
	unsigned int i;
	unsigned long ip;
	int ret;

	if (!task->nr_other_threads)
		return 0;
	ret = dump_find_syscall_ip(task, &ip);
	for (i = 0; i < task->nr_other_threads && !ret; i++) {
		struct dump_thread *th = &task->other_threads[i];

		ret = collect_thread_state(th);
		if (!ret)
			ret = collect_other_thread_injected(th, ip);
		if (!ret)
			ret = settle_rseq_cs(th);
	}
	return ret;
}

/* Each thread's cgroup set, the process's (its main thread's) in tc too. */
static int collect_cgroups(struct dump_task *task)
{
	pid_t pid = task->item->pid;
	uint32_t id;
	int ret;

	ret = cg_dump_thread(pid, pid, &id);
	if (ret || !id)
		return ret;
	task->tc.has_cg_set = task->main_thread.tcore.has_cg_set = true;
	task->tc.cg_set = task->main_thread.tcore.cg_set = id;
	for (unsigned int i = 0; i < task->nr_other_threads && !ret; i++) {
		struct dump_thread *th = &task->other_threads[i];

		ret = cg_dump_thread(pid, th->tid, &th->tcore.cg_set);
		th->tcore.has_cg_set = true;
	}
	return ret;
}

/* The process-wide parts every thread's core points to: creds; the main one's: tc. */
static void link_task_core(struct dump_task *task)
{
	struct dump_thread *main_th = &task->main_thread;
	unsigned int i;

	task->tc.blk_sigset = main_th->tcore.blk_sigset;
	task->tc.signals_s = &task->shared_pending.entry;
	main_th->core.tc = &task->tc;
	main_th->tcore.has_pdeath_sig = true;
	main_th->tcore.pdeath_sig = task->pdeath_sig;
	main_th->tcore.creds = &task->creds;
	for (i = 0; i < task->nr_other_threads; i++)
		task->other_threads[i].tcore.creds = &task->creds;
}

int dump_collect_task_state(struct dump_task *task)
{
	int ret;

	pr_info("collecting the state of task %d\n", task->item->pid);
	task_core_entry__init(&task->tc);
	task->main_thread.tid = task->item->pid;

	/* VMAs first: the injection needs an executable address of the task. */
	ret = parse_pid_smaps(task->item->pid, &task->vmas, &task->nr_vmas);
	if (!ret)
		ret = collect_thread_state(&task->main_thread);
	if (!ret)
		ret = collect_sigqueue(task->item->pid, true, &task->shared_pending);
	if (!ret)
		ret = collect_creds(task);
	if (!ret)
		ret = collect_rlimits(task);
	if (!ret)
		ret = collect_proc_misc(task);
	if (!ret)
		ret = collect_injected_state(task);
	if (!ret)
		ret = settle_rseq_cs(&task->main_thread);
	if (!ret)
		ret = collect_other_threads(task);
	if (!ret)
		ret = collect_cgroups(task);
	if (!ret)
		link_task_core(task);
	return ret;
}

static void free_dump_thread(struct dump_thread *th)
{
	free_sigqueue(&th->pending);
}

void dump_task_free(struct dump_task *task)
{
	free_proc_vmas(task->vmas, task->nr_vmas);
	free_dump_thread(&task->main_thread);
	for (unsigned int i = 0; i < task->nr_other_threads; i++)
		free_dump_thread(&task->other_threads[i]);
	free(task->other_threads);
	free_sigqueue(&task->shared_pending);
	free(task->posix_timers);
	free(task->posix_timer_ptrs);
	free(task->proc_timers);
	free_pid_status(&task->status);
	lsm_free_creds(&task->creds);
	free(task);
}
