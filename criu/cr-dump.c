/*
 * The dump pipeline: seize the process tree, collect each task's state,
 * memory and files, write the images (inventory.img last), then kill the tree or let it
 * run. Any failure on the way leaves every task running as it was.
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

#include "action-scripts.h"
#include "cgroup.h"
#include "compel.h"
#include "cr_options.h"
#include "crtools.h"
#include "file-lock.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "lsm.h"
#include "mem.h"
#include "mem-track.h"
#include "memfd.h"
#include "namespaces.h"
#include "net-lock.h"
#include "page-server.h"
#include "plugin.h"
#include "proc_parse.h"
#include "seccomp.h"
#include "pstree.h"
#include "regs-x86.h"
#include "task-sched.h"
#include "stats.h"
#include "netlock-nft.h"
#include "sk-inet.h"
#include "core.pb-c.h"
#include "inventory.pb-c.h"

#define NR_SIGNALS 64
#define NR_ITIMERS 3 /* ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF */
#define COMM_LEN 32 /* TASK_COMM_LEN (16) with room to spare */

/* The kernel's struct sigaction as rt_sigaction() reads and writes it on x86_64. */
struct kernel_sigaction {
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

/* Queued signals as signal_queue_entry, and the storage it points into. */
struct dump_sigqueue {
	SignalQueueEntry entry;
	siginfo_t *infos;
	SiginfoEntry *entries;
	SiginfoEntry **ptrs;
};

/* One thread's core-TID.img and the storage its entries point into. */
struct dump_thread {
	pid_t tid;
	CoreEntry core;
	ThreadInfoX86 info;
	UserX86RegsEntry regs;
	struct x86_fpregs_image fpregs;
	struct x86_tls_image tls;
	ThreadCoreEntry tcore;
	RseqEntry rseq;
	uint64_t rseq_cs; /* the rseq critical section the thread was stopped in, or 0 */
	bool rseq_abort; /* ... which the kernel restarts: the thread goes to its abort handler */
	ThreadSasEntry sas;
	struct dump_sigqueue pending;
	char comm[COMM_LEN];
};

/* Everything learnt about one task, and the storage its TaskCoreEntry points into. */
struct dump_task {
	struct pstree_item *item;
	bool seized;
	struct dump_thread main_thread;
	/* The other threads, seized ones first: nr_other_threads of them are seized. */
	struct dump_thread *other_threads;
	unsigned int nr_other_threads;
	char proc_state; /* /proc/PID/stat state before seizing */
	unsigned int proc_flags; /* PF_* of /proc/PID/stat */
	struct proc_vma *vmas;
	unsigned int nr_vmas;
	struct task_mm_misc mm_misc;

	TaskCoreEntry tc;
	char comm[COMM_LEN];
	CredsEntry creds; /* the process's, in every thread's core */
	uint32_t caps[5][2]; /* inh, prm, eff, bnd, amb: low word first */
	struct proc_pid_status status;
	SaEntry sa[NR_SIGNALS];
	SaEntry *sa_ptrs[NR_SIGNALS];
	TaskRlimitsEntry rlimits;
	RlimitEntry rlimit[PROC_NR_RLIMITS];
	RlimitEntry *rlimit_ptrs[PROC_NR_RLIMITS];
	TaskTimersEntry timers;
	ItimerEntry itimers[NR_ITIMERS];
	PosixTimerEntry *posix_timers;
	PosixTimerEntry **posix_timer_ptrs;
	struct proc_posix_timer *proc_timers;
	unsigned int nr_proc_timers;
	struct dump_sigqueue shared_pending;
	uint32_t pdeath_sig;
};

struct dump_stats {
	struct timespec start, freeze_start;
	uint64_t freezing_us;
	uint64_t memdump_us;
	struct mem_dump_ctx mem;
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

/*
 * Whether a thread that could not be seized has exited: gone from /proc/PID/task, or dead
 * ('Z', 'X') there until the kernel releases it, which it does at once for a thread that
 * is not its process's leader.
 */
static bool thread_exited(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *state;
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return errno == ESRCH;
	buf[len] = '\0';
	state = strrchr(buf, ')');
	return state && (state[2] == 'Z' || state[2] == 'X');
}

/*
 * 0: seized; 1: it exited first (a pool letting a thread go), and the next reading of
 * the list no longer holds it; or -errno.
 */
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
	ret = compel_try_seize(tid);
	if (ret == -ESRCH || ret == -EPERM) {
		if (thread_exited(task->item->pid, tid)) {
			pr_info("thread %d of %d exited while being seized\n", tid,
				task->item->pid);
			return 1;
		}
		pr_err("cannot seize thread %d of %d: %s\n", tid, task->item->pid, strerror(-ret));
	}
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
 * still running may start new ones (or exit), so the list is read again until a pass
 * finds no thread that is not seized; seized threads start no more, so this ends.
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
			if (ret < 0)
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
 * SIGSTOP (which nothing blocks) sent just before the dump, or sent again to a task
 * already stopped, may still be queued, once for the thread and once for the process: the
 * task takes it now and is dumped stopped, rather than meeting it in a remote syscall.
 * The task ends up as it would have (SIGCONT discards queued stop signals anyway). A task
 * resumed from a group stop may report that stop again before it takes the signal, so
 * this is tried a few times.
 */
#define MAX_PENDING_STOP_TRIES 8

static int settle_pending_stop(struct dump_task *task)
{
	pid_t pid = task->item->pid;
	uint64_t stop_bit = 1ull << (SIGSTOP - 1);
	struct proc_pid_status st;
	int ret;

	for (int tries = 0; tries < MAX_PENDING_STOP_TRIES; tries++) {
		ret = parse_pid_status(pid, &st);
		if (ret)
			return ret;
		free_pid_status(&st);
		if (!((st.sig_pending | st.shared_pending) & stop_bit))
			return 0;
		pr_info("task %d has SIGSTOP queued: it stops before the dump\n", pid);
		ret = compel_take_pending_stop(pid);
		if (ret)
			return ret;
		task->proc_state = 'T';
	}
	pr_err("task %d keeps a SIGSTOP queued after %d tries to let it stop\n", pid,
	       MAX_PENDING_STOP_TRIES);
	return -EAGAIN;
}

/*
 * A child listed in its stopped parent's children may exit before it is seized (a shell
 * loop's short `sleep`): its parent cannot reap it now, so it is a zombie, and is dumped
 * as one, as CRIU does. *st is read again for its state and wait status.
 */
static int seize_child(pid_t pid, struct proc_pid_stat *st)
{
	int ret = compel_try_seize(pid);
	int err;

	if (ret != -ESRCH && ret != -EPERM)
		return ret;
	err = parse_pid_stat(pid, st);
	if (err)
		return err;
	if (st->state != 'Z') {
		pr_err("cannot seize %d: %s\n", pid, strerror(-ret));
		return ret;
	}
	pr_info("process %d exited while being seized\n", pid);
	return 0;
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
	task->item = pstree_add_item(parent, pid);
	if (!task->item)
		return -ENOMEM;
	if (st.state != 'Z') {
		ret = parent ? seize_child(pid, &st) : compel_seize(pid);
		if (ret)
			return ret;
	}
	task->proc_state = st.state;
	task->proc_flags = st.flags;
	if (st.state == 'Z') {
		task->item->zombie = true;
		task->item->exit_status = st.exit_code;
		pr_info("process %d is a zombie (wait status %#x)\n", pid, st.exit_code);
		return pstree_collect_ids(task->item);
	}
	task->seized = true;
	pr_info("seized task %d\n", pid);
	ret = settle_pending_stop(task);
	if (ret)
		return ret;
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
	return ret;
}

static void seize_timer_fired(int sig)
{
	(void)sig; /* only interrupts the wait for a task to stop (compel_seize) */
}

/*
 * --timeout on dump, as upstream: seizing the whole tree gets that many seconds
 * (default 10; 0: no limit). A task that cannot stop (uninterruptible sleep) then fails
 * the dump instead of hanging it: the alarm interrupts compel's wait with EINTR.
 */
static int seize_tree_in_time(pid_t pid)
{
	unsigned int seconds = opts.timeout < 0 ? DEFAULT_DUMP_TIMEOUT : opts.timeout;
	struct sigaction sa = { .sa_handler = seize_timer_fired }, old;
	int ret;

	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: the wait must return when the time is up. */
	if (sigaction(SIGALRM, &sa, &old)) {
		pr_perror("cannot set up the --timeout alarm");
		return -errno;
	}
	alarm(seconds);
	ret = collect_and_seize_tree(pid);
	alarm(0);
	sigaction(SIGALRM, &old, NULL);
	return ret;
}

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
#define RSEQ_AREA_CS   8
#define RSEQ_AREA_FLAGS 16
#define RSEQ_NO_RESTART_ON_SIGNAL (1u << 1) /* RSEQ_CS_FLAG_NO_RESTART_ON_SIGNAL */
struct rseq_cs_desc {
	uint32_t version, flags;
	uint64_t start_ip, post_commit_offset, abort_ip;
};

static int thread_mem(pid_t tid, bool write, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	ssize_t n = write ? process_vm_writev(tid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(tid, &local, 1, &remote, 1, 0);

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
	ret = thread_mem(th->tid, false, th->rseq_cs, &cs, sizeof(cs)) ?:
	      thread_mem(th->tid, false, area + RSEQ_AREA_FLAGS, &area_flags, sizeof(area_flags));
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
		return thread_mem(th->tid, true, area_cs, (void *)&th->rseq_cs, sizeof(th->rseq_cs));
	ret = thread_mem(th->tid, true, area_cs, &none, sizeof(none)) ?:
	      compel_get_regs(th->tid, &regs);
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
		ret = userns_tree_uid(st->uid[i], &st->uid[i], what) ?:
			      userns_tree_gid(st->gid[i], &st->gid[i], what);
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

/* Every signal's disposition, in signal order, as CRIU writes them: no SIGKILL, SIGSTOP. */
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
		sa->sigaction = ksa.handler;
		sa->flags = ksa.flags;
		sa->restorer = ksa.restorer;
		sa->mask = ksa.mask;
		sa->has_compat_sigaction = true;
		sa->compat_sigaction = false;
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

	ret = remote_call_read(ctl, "sigaltstack", &ss, sizeof(ss), __NR_sigaltstack, 0, scratch,
			       0, 0);
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
	int ret = compel_syscall(ctl, &result, __NR_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS,
				 0, 0, 0, 0, 0);

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

	ret = remote_call(ctl, "prctl(PR_GET_DUMPABLE)", &result, __NR_prctl, PR_GET_DUMPABLE, 0,
			  0, 0);
	if (ret)
		return ret;
	task->mm_misc.dumpable = result;

	ret = remote_call(ctl, "prctl(PR_GET_THP_DISABLE)", &result, __NR_prctl,
			  PR_GET_THP_DISABLE, 0, 0, 0);
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
	ret = find_syscall_ip(task, &ip);
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

static int collect_task_state(struct dump_task *task)
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

/* ------------------------------------------------------------- images ---- */

static int write_core_image(pid_t tid, const CoreEntry *core)
{
	struct cr_img *img = open_image(CR_IMG_CORE, O_WRONLY, pidns_img_pid(tid));
	int ret;

	if (!img)
		return -EIO;
	ret = pb_write_one(img, core);
	close_image(img);
	return ret;
}

/* core-TID.img of every thread: the main one's also holds the process-wide tc. */
static int write_task_cores(struct dump_task *task)
{
	unsigned int i;
	int ret;

	ret = write_core_image(task->item->pid, &task->main_thread.core);
	for (i = 0; i < task->nr_other_threads && !ret; i++)
		ret = write_core_image(task->other_threads[i].tid, &task->other_threads[i].core);
	return ret;
}

static int write_inventory(void)
{
	InventoryEntry inv = INVENTORY_ENTRY__INIT;
	PluginsEntry plugins = PLUGINS_ENTRY__INIT;
	TaskKobjIdsEntry root_ids;
	struct cr_img *img;
	int ret;

	inv.img_version = CRIU_IMAGES_VERSION;
	inv.has_fdinfo_per_id = true;
	inv.fdinfo_per_id = true;
	pstree_fill_root_ids(&root_ids);
	inv.root_ids = &root_ids;
	inv.has_ns_per_id = true;
	inv.ns_per_id = true;
	inv.has_lsmtype = true;
	ret = lsm_host_kind(&inv.lsmtype);
	if (ret)
		return ret;
	inv.has_root_cg_set = cg_dump_criu_set(&inv.root_cg_set);
	/* Established connections dumped without their streams: restore closes them. */
	inv.has_tcp_close = opts.tcp_close && !opts.tcp_established;
	inv.tcp_close = inv.has_tcp_close;
	/* As CRIU's: restore unlocks with the method the dump locked with. */
	inv.has_network_lock_method = true;
	inv.network_lock_method = opts.network_lock_skip ? NETWORK_LOCK_SKIP :
				  opts.network_lock_nft	 ? NETWORK_LOCK_NFTABLES :
							   NETWORK_LOCK_IPTABLES;
	/* Restore refuses these images without the plugins that took objects here. */
	ret = cr_plugins_to_inventory(&plugins);
	if (ret)
		return ret;
	if (plugins.n_plugins)
		inv.plugins_entry = &plugins;
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

	img_name(CR_IMG_INVENTORY, 0, name, sizeof(name));
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
	ret = dump_task_mm(task->item->pid, task->vmas, task->nr_vmas, &task->mm_misc, &stats->mem);
	stats->memdump_us += usec_since(&start);
	return ret;
}

/* The files code names fdinfo-FILES_ID.img by the ids pstree_assign_ids() gave. */
static int dump_files(struct dump_task *task)
{
	int ret;

	pr_info("dumping the files of task %d\n", task->item->pid);
	/* A table shared with the parent (CLONE_FILES) is the parent's image. */
	ret = pstree_shares_parent_files(task->item) ? 0 : dump_task_files(task->item->pid);

	return ret ? ret : dump_task_fs(task->item->pid);
}

/* A failed pre-dump takes its write tracker (mem-track.h) back out of the task. */
static int disarm_write_tracker(struct dump_task *task)
{
	struct compel_ctl *ctl;
	unsigned long ip;
	int ret, cure_ret;

	ret = mem_track_fd(task->item->pid);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	ret = find_syscall_ip(task, &ip);
	if (!ret)
		ret = compel_infect(task->item->pid, ip, &ctl);
	if (ret)
		return ret;
	ret = mem_track_disarm(ctl, task->item->pid);
	cure_ret = compel_cure(ctl);
	return ret ? ret : cure_ret;
}

/* A live process: its state, memory, files, ids and core images. */
static int dump_one_task(struct dump_task *task, struct dump_stats *stats)
{
	int ret = collect_task_state(task);

	if (!ret)
		ret = dump_task_memory(task, stats);
	if (!ret)
		ret = dump_files(task);
	if (!ret)
		ret = pstree_write_ids(task->item);
	return ret ? ret : write_task_cores(task);
}

/*
 * A zombie has no memory or files left: its core holds its name and wait status, as
 * CRIU writes it (TASK_DEAD, no thread state).
 */
static int dump_zombie(struct dump_task *task)
{
	CoreEntry core = CORE_ENTRY__INIT;
	int ret;

	task_core_entry__init(&task->tc);
	ret = parse_pid_comm(task->item->pid, task->comm, sizeof(task->comm));
	if (ret)
		return ret;
	task->tc.comm = task->comm;
	task->tc.task_state = TASK_DEAD;
	task->tc.exit_code = task->item->exit_status;
	core.mtype = CORE_ENTRY__MARCH__X86_64;
	core.tc = &task->tc;
	return write_core_image(task->item->pid, &core);
}

static int dump_tree(struct dump_stats *stats)
{
	unsigned int i;
	int ret = 0;

	/* Before any task's files: fdinfo images are named by files_id. */
	ret = pstree_assign_ids();
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
	if (dumped && !opts.leave_running && !opts.leave_stopped) {
		/* After a dump every thread the item lists is seized (fix_thread_list). */
		compel_kill_process(pid, task->item->threads, task->item->nr_threads);
		pr_info("task %d killed after the dump\n", pid);
		return;
	}
	/*
	 * A task that was group-stopped stays stopped: the kernel re-stops it on detach.
	 * --leave-stopped: SIGSTOP queued while we hold every thread is taken on the way
	 * back to user mode, before the task runs an instruction of its own.
	 */
	if (dumped && opts.leave_stopped && kill(pid, SIGSTOP))
		pr_perror("task %d: cannot leave it stopped", pid);
	for (unsigned int i = 0; i < task->nr_other_threads; i++)
		compel_detach(task->other_threads[i].tid);
	if (compel_detach(pid))
		return;
	pr_info("task %d resumed\n", pid);
}

static void free_dump_thread(struct dump_thread *th)
{
	free_sigqueue(&th->pending);
}

static void free_dump_task(struct dump_task *task)
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

/* 7. Kill the tree (or let it run, -R, or leave it stopped, -s); resume it on failure. */
static void release_tree(bool dumped)
{
	unsigned int i;

	/*
	 * Children first: the init of a pid namespace, killed, waits until its children are
	 * reaped, and a traced child is reaped by its tracer, criu, first. Every task dies
	 * before any is reaped: a nested namespace's task whose parent is outside it (born
	 * after that parent's unshare) holds its init until that parent is gone too.
	 */
	for (i = 0; dumped && !opts.leave_running && !opts.leave_stopped && i < nr_dump_tasks; i++)
		if (dump_tasks[i]->seized)
			kill(dump_tasks[i]->item->pid, SIGKILL);
	for (i = nr_dump_tasks; i-- > 0;)
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
	ns_fini();
	cg_dump_fini();
}

/* stats-dump, once the tree is released: frozen time runs until then. */
static int write_stats(const struct dump_stats *stats)
{
	struct dump_stats_info info = {
		.freezing_us = stats->freezing_us,
		.frozen_us = usec_since(&stats->freeze_start),
		.memdump_us = stats->memdump_us,
		.memwrite_us = stats->mem.stats.write_us,
		.pages_scanned = stats->mem.stats.pages_scanned,
		.pages_written = stats->mem.stats.pages_written,
		.pages_in_parent = stats->mem.stats.pages_in_parent,
		.pages_lazy = stats->mem.stats.pages_lazy,
		.shpages_scanned = stats->mem.stats.shpages_scanned,
		.shpages_written = stats->mem.stats.shpages_written,
	};
	int ret = write_dump_stats(&info);

	if (!ret && opts.display_stats)
		ret = display_dump_stats();
	return ret;
}

/*
 * --prev-images-dir: the "parent" link in the images directory names it (relative to
 * the images directory, as CRIU makes it), and restore follows the link.
 */
static int link_parent_images(struct mem_dump_ctx *mem)
{
	int ret;

	if (!opts.prev_images_dir)
		return 0;
	ret = images_link_parent(opts.prev_images_dir);
	if (ret)
		return ret;
	mem->parent = true;
	mem->auto_dedup = opts.auto_dedup;
	return 0;
}

/* A pre-dump of one task: tracker armed, then its private anonymous pages. */
static int pre_dump_one_task(struct dump_task *task, struct dump_stats *stats)
{
	pid_t pid = task->item->pid;
	struct compel_ctl *ctl;
	unsigned long ip;
	int ret, cure_ret;

	pr_info("pre-dumping the memory of task %d\n", pid);
	ret = parse_pid_smaps(pid, &task->vmas, &task->nr_vmas);
	if (!ret)
		ret = find_syscall_ip(task, &ip);
	if (!ret)
		ret = compel_infect(pid, ip, &ctl);
	if (ret)
		return ret;
	ret = mem_track_arm(ctl, pid, task->vmas, task->nr_vmas);
	cure_ret = compel_cure(ctl);
	if (!ret)
		ret = cure_ret;
	return ret ? ret : predump_task_mm(pid, task->vmas, task->nr_vmas, &stats->mem);
}

/* A failed pre-dump leaves no tracking behind: the tree is as it was. */
static void pre_dump_undo(void)
{
	unsigned int i;

	for (i = 0; i < nr_dump_tasks; i++)
		if (dump_tasks[i]->seized && !dump_tasks[i]->item->zombie &&
		    disarm_write_tracker(dump_tasks[i]))
			pr_warn("task %d: its write tracker may be left\n", dump_tasks[i]->item->pid);
}

int cr_pre_dump_tasks(pid_t pid)
{
	struct dump_stats stats = { 0 };
	unsigned int i;
	int ret;

	pr_info("Pre-dumping process %d\n", pid);
	clock_gettime(CLOCK_MONOTONIC, &stats.start);
	mem_dump_init(&stats.mem);
	stats.mem.protect = true;
	ret = link_parent_images(&stats.mem);
	/* As for a dump: a server that does not listen leaves the tree as it was. */
	if (!ret && opts.use_page_server) {
		stats.mem.page_server_sk = page_server_connect();
		ret = stats.mem.page_server_sk < 0 ? stats.mem.page_server_sk : 0;
	}
	if (ret)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &stats.freeze_start);
	ret = seize_tree_in_time(pid);
	stats.freezing_us = usec_since(&stats.freeze_start);
	/* The pids the images use come with the namespaces. */
	if (!ret)
		ret = ns_dump_collect();
	for (i = 0; i < nr_dump_tasks && !ret; i++) {
		struct timespec start;

		if (dump_tasks[i]->item->zombie)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &start);
		ret = pre_dump_one_task(dump_tasks[i], &stats);
		stats.memdump_us += usec_since(&start);
	}
	if (!ret && stats.mem.page_server_sk >= 0)
		ret = page_server_finish(stats.mem.page_server_sk);
	if (ret)
		pre_dump_undo();
out:
	/* Resumed either way: a pre-dump never kills the tree. */
	release_tree(false);
	if (!ret)
		ret = write_stats(&stats);
	mem_dump_fini(&stats.mem);
	free_tree();
	return ret ? -1 : 0;
}

/*
 * dump --lazy-pages, the images written: the lazy-pages daemon gets the pages left in the
 * tree. Should it go away before it has them all, the tree runs again and the images are
 * no dump (inventory.img removed): its copy was being killed, this one is the only one.
 */
static int serve_lazy_pages(struct mem_dump_ctx *mem, int listen_sk)
{
	int ret;

	/* --status-fd (and CRIU's status-ready point): the daemon may connect now. */
	report_status_ready();
	ret = run_action_scripts(ACT_STATUS_READY, 0);
	if (!ret)
		ret = mem_lazy_serve(mem, listen_sk);
	if (ret)
		remove_old_inventory();
	return ret;
}

int cr_dump_tasks(pid_t pid)
{
	struct dump_stats stats = { 0 };
	bool files_open = false;
	int lazy_sk = -1; /* dump --lazy-pages: where the lazy-pages daemon connects */
	int ret;

	pr_info("Dumping process %d\n", pid);
	clock_gettime(CLOCK_MONOTONIC, &stats.start);
	mem_dump_init(&stats.mem);
	/* Before touching the task: a plugin that fails to load leaves it as it was. */
	ret = cr_plugin_init(CR_PLUGIN_STAGE__DUMP);
	if (ret)
		return -1;
	ret = remove_old_inventory();
	if (!ret)
		ret = link_parent_images(&stats.mem);
	/* Before the tree is touched: a server that does not listen leaves it as it was. */
	if (!ret && opts.use_page_server) {
		stats.mem.page_server_sk = page_server_connect();
		ret = stats.mem.page_server_sk < 0 ? stats.mem.page_server_sk : 0;
	}
	/* The same for the port dump --lazy-pages serves its pages on. */
	if (!ret && opts.lazy_pages) {
		lazy_sk = page_server_listen();
		ret = lazy_sk < 0 ? -EADDRNOTAVAIL : 0;
		stats.mem.lazy = true;
	}
	if (ret)
		goto out;

	ret = run_action_scripts(ACT_PRE_DUMP, pid);
	if (ret)
		goto out;

	/* 1. Freeze the whole tree (at once first, through its freezer cgroup, if asked). */
	clock_gettime(CLOCK_MONOTONIC, &stats.freeze_start);
	ret = cg_freeze_tree();
	if (!ret)
		ret = seize_tree_in_time(pid);
	/* Tasks of the freezer cgroup outside the tree are none of the dump's business. */
	compel_release_frozen();
	stats.freezing_us = usec_since(&stats.freeze_start);
	if (ret)
		goto out;
	/*
	 * Namespaces, sessions and groups that restore cannot give back fail the dump before any
	 * state is read; the namespaces first: the pids the images use come with them.
	 */
	ret = ns_dump_collect();
	if (!ret)
		ret = pstree_check_leaders(opts.shell_job);
	/* criu's own cgroups first: CRIU numbers its set 1, the tasks' sets after it. */
	if (!ret)
		ret = cg_dump_init();
	/*
	 * A net namespace of the tree's own, before its sockets are read (net-lock.h); CRIU's
	 * network-lock point comes first, whatever --network-lock says.
	 */
	if (!ret && ns_root_own(NS_NET))
		ret = run_action_scripts(ACT_NET_LOCK, pid);
	if (!ret)
		ret = netlock_dump_tree();
	if (ret)
		goto out;

	/* 2. Devices: once the whole tree is seized and before any of its state is read. */
	ret = checkpoint_tree_devices();
	if (ret)
		goto out;

	/* File locks, before any task's state is read: a lock the dump cannot keep fails it early. */
	ret = dump_file_locks();
	if (ret)
		goto out;

	/* files.img stays open across memory (mapped files, exe) and fds of every task. */
	ret = files_dump_init();
	if (ret)
		goto out;
	files_open = true;

	/* 3.-5. Each task: its state, memory, files and core images. */
	ret = dump_tree(&stats);
	if (ret)
		goto out;
	/* What ties fds of several tasks together (a socket and its peer) is known now. */
	ret = files_dump_check();
	if (ret)
		goto out;
	/* The memfds the tasks' fds and VMAs named: each object once. */
	ret = memfd_dump_objects(&stats.mem);
	if (!ret)
		ret = seccomp_dump_write();
	if (ret)
		goto out;

	/* The root's own namespaces, while the tree is still frozen. */
	ret = ns_dump_images();
	if (!ret)
		ret = cg_dump_write();
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
	/* The pages are safe on the server before inventory.img seals the dump. */
	if (!ret && stats.mem.page_server_sk >= 0)
		ret = page_server_finish(stats.mem.page_server_sk);
	if (ret)
		goto out;
	ret = write_inventory();
	if (ret)
		goto out;
	/* The images are complete and the tree still frozen; a failure here undoes the dump. */
	ret = run_action_scripts(ACT_POST_DUMP, pid);
	if (ret)
		remove_old_inventory();
	if (!ret && lazy_sk >= 0)
		ret = serve_lazy_pages(&stats.mem, lazy_sk);
out:
	if (lazy_sk >= 0)
		close(lazy_sk);
	if (files_open)
		files_dump_fini();
	memfd_dump_fini();
	seccomp_dump_fini();
	if (ret)
		reg_dump_undo();
	/* Before the tree runs again: on failure plugins resume the devices they paused. */
	cr_plugin_fini(CR_PLUGIN_STAGE__DUMP, ret);
	/*
	 * Before the tree runs again: its net namespace unlocked, then its TCP connections
	 * leave repair mode (their window probes must get through).
	 */
	netlock_dump_release(ret == 0 && !opts.leave_running && !opts.leave_stopped);
	/* CRIU's network-unlock point: the tree runs on (its namespace's lock goes). */
	if (!(ret == 0 && !opts.leave_running && !opts.leave_stopped) && ns_root_own(NS_NET) &&
	    run_action_scripts(ACT_NET_UNLOCK, pid) && !ret)
		ret = -1;
	tcp_dump_release(ret == 0 && !opts.leave_running && !opts.leave_stopped);
	release_tree(ret == 0);
	if (!ret)
		ret = write_stats(&stats);
	mem_dump_fini(&stats.mem);
	free_tree();
	return ret ? -1 : 0;
}
