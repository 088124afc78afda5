/*
 * The dump pipeline's tasks (cr-dump.c): what is learnt about each process of the tree,
 * seized in dump-seize.c and its state collected in dump-task.c.
 */
#ifndef CR_DUMP_TASK_H
#define CR_DUMP_TASK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mem.h"
#include "proc_parse.h"
#include "pstree.h"
#include "regs-x86.h"

#include "core.pb-c.h"

#define NR_SIGNALS 64
#define NR_ITIMERS 3  /* ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF */
#define COMM_LEN   32 /* TASK_COMM_LEN (16) with room to spare */

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
	bool rseq_abort;  /* ... which the kernel restarts: the thread goes to its abort handler */
	ThreadSasEntry sas;
	struct dump_sigqueue pending;
	char comm[COMM_LEN];
};

/* Everything learnt about one task, and the storage its TaskCoreEntry points into. */
struct mem_task_dump;

struct dump_task {
	struct pstree_item *item;
	bool seized;
	struct dump_thread main_thread;
	/* The other threads, seized ones first: nr_other_threads of them are seized. */
	struct dump_thread *other_threads;
	unsigned int nr_other_threads;
	char proc_state;	 /* /proc/PID/stat state before seizing */
	unsigned int proc_flags; /* PF_* of /proc/PID/stat */
	struct proc_vma *vmas;
	unsigned int nr_vmas;
	struct task_mm_misc mm_misc;
	struct mem_task_dump *mem; /* its VMAs, from mem_dump_task_collect() to dump_mem_task() */

	TaskCoreEntry tc;
	char comm[COMM_LEN];
	CredsEntry creds;    /* the process's, in every thread's core */
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

/* Every process of the tree, parents before their children (dump-seize.c). */
extern struct dump_task **dump_tasks;
extern unsigned int nr_dump_tasks;

/*
 * dump-seize.c. 1. The tree of pid seized, each process and thread, within --timeout:
 * 0 or -errno after one line; what was seized is in dump_tasks either way.
 */
int dump_seize_tree(pid_t pid);
/* 7. Kill the tree (or let it run, -R, or leave it stopped, -s); resume it on failure. */
void dump_release_tree(bool dumped);

/* dump-task.c. A live, seized process's state: threads, creds, signals, timers, cgroups. */
int dump_collect_task_state(struct dump_task *task);
/* An executable address of the task where compel injects its syscalls. */
int dump_find_syscall_ip(struct dump_task *task, unsigned long *ip);
/*
 * The task's parasite (design.md §6), started once its fds are dumped (its own must not be
 * seen), for what the task itself tells: its sigactions and its pages. One that does not
 * start leaves the task as it was (compel_cure()): NULL then, and the same state is read
 * with injected syscalls, the pages from outside.
 */
struct compel_ctl *dump_start_parasite(struct dump_task *task);
/* Every signal's disposition into the task's core, through parasite or, NULL, injected. */
int dump_collect_sigactions(struct dump_task *task, struct compel_ctl *parasite);
/* What collection allocated, and the task. */
void dump_task_free(struct dump_task *task);

#endif
