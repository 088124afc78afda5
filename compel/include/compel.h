/*
 * compel: ptrace "infection" of a task. Seize/interrupt/detach, reading the state a
 * stopped task exposes through ptrace, and running syscalls inside a stopped task.
 */
#ifndef COMPEL_H
#define COMPEL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include <asm/ldt.h>

/*
 * PTRACE_SEIZE + PTRACE_INTERRUPT, then wait until the task sits in its interrupt stop.
 * Signals that arrive meanwhile are delivered to the task, as they would have been.
 */
/* The PTRACE_SEIZE options compel uses (probed once): also for criu's own seizes. */
long compel_seize_options(void);
int compel_seize(pid_t pid);
/*
 * compel_seize() for a task that may exit meanwhile (a child found in its stopped parent's
 * list): -ESRCH (it exited before it stopped) and -EPERM (PTRACE_SEIZE refused it: a
 * zombie by then, or a task we may not trace) come back without a log line, for the
 * caller to look at the task again. Other failures are logged as by compel_seize().
 */
int compel_try_seize(pid_t pid);
/*
 * A seized task with a stop signal queued: let it take the signal now and wait for the
 * group stop it starts, so that it is dumped stopped, as it was about to be, and no
 * remote syscall meets the signal later. Signals queued before it are passed on.
 * 0 or -errno.
 */
int compel_take_pending_stop(pid_t pid);
/* A seized task that runs (its parasite): PTRACE_INTERRUPT and wait for the stop. */
int compel_interrupt(pid_t pid);
/* PTRACE_DETACH: the task resumes from wherever it is stopped. */
int compel_detach(pid_t pid);
/*
 * --freeze-cgroup: attach to a task of a frozen cgroup (PTRACE_SEIZE, PTRACE_INTERRUPT)
 * without waiting: it stops once thawed, before it runs anything of its own. A later
 * compel_seize()/compel_try_seize() of it waits for that stop. A task gone already: 0.
 */
int compel_attach_frozen(pid_t pid);
/* Those attached so but never seized (not in the tree): let go once they stopped. */
void compel_release_frozen(void);
/* SIGKILL a seized task and wait until it is gone from the tracer's view. */
int compel_kill(pid_t pid);
/*
 * SIGKILL a process whose leader pid and other threads (nr tids) are all seized, and
 * reap every one: the leader's exit is held back until its traced threads are reaped.
 */
int compel_kill_process(pid_t pid, const pid_t *tids, unsigned int nr);

int compel_get_regs(pid_t pid, struct user_regs_struct *regs);
int compel_set_regs(pid_t pid, const struct user_regs_struct *regs);
/* NT_X86_XSTATE: *buf (malloc'ed, caller frees) holds *len bytes, as many as the kernel gave. */
int compel_get_xstate(pid_t pid, void **buf, size_t *len);
/* GDT TLS slots first..first+nr-1 (PTRACE_GET_THREAD_AREA), as get_thread_area() gives them. */
int compel_get_tls(pid_t pid, unsigned int first, unsigned int nr, struct user_desc *descs);
int compel_get_sigmask(pid_t pid, uint64_t *mask);
int compel_set_sigmask(pid_t pid, uint64_t mask);
/*
 * Queued signals without dequeuing them: the thread's own queue, or with shared the
 * process-wide one. *infos (malloc'ed, caller frees; NULL when none) holds *nr entries.
 */
int compel_get_pending(pid_t pid, bool shared, siginfo_t **infos, unsigned int *nr);

struct compel_rseq {
	uint64_t abi_pointer; /* 0: not registered */
	uint32_t abi_size;
	uint32_t signature;
	uint32_t flags;
};
int compel_get_rseq(pid_t pid, struct compel_rseq *rseq);

/*
 * A syscall would restart when the task resumes: return what the registers must say so
 * that a fresh task resuming from them does what the kernel would have done
 * (re-execute the syscall, or restart_syscall for ERESTART_RESTARTBLOCK).
 */
void compel_fixup_syscall_restart(struct user_regs_struct *regs);

/* An infected task: registers and sigmask saved, a scratch page mapped in it. */
struct compel_ctl;

/*
 * Prepare remote syscalls in a seized, stopped task. syscall_ip is the address of an
 * executable page of the task where the syscall instruction may be written for the
 * duration (its original bytes are restored by compel_cure()).
 */
int compel_infect(pid_t pid, unsigned long syscall_ip, struct compel_ctl **ctl);
/*
 * Run syscall nr with args in the task; *result gets its return value (-errno on
 * failure of the syscall itself). Returns 0 or -errno when the injection itself failed.
 */
int compel_syscall(struct compel_ctl *ctl, long *result, long nr, unsigned long a1,
		   unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5,
		   unsigned long a6);
/* Address in the task of the scratch page (COMPEL_SCRATCH_SIZE bytes, read-write). */
unsigned long compel_scratch_addr(struct compel_ctl *ctl);
#define COMPEL_SCRATCH_SIZE 4096UL
/* Copy len bytes at offset off of the scratch page out of the task. */
int compel_scratch_read(struct compel_ctl *ctl, size_t off, void *buf, size_t len);
/*
 * The parasite (compel/parasite/, parasite-proto.h) loaded into an infected task and
 * started: it serves commands until compel_cure() stops it (no compel_syscall() while it
 * runs). 0 or -errno (logged); compel_cure() undoes
 * a failed start too. If criu dies while it runs, the parasite puts the task back itself.
 */
struct parasite_args;
struct parasite_cmd;
struct parasite_answer;
int compel_parasite_start(struct compel_ctl *ctl);
/* criu's view of the parasite's arguments (shared memory): the iovec slots. */
struct parasite_args *compel_parasite_args(struct compel_ctl *ctl);
/* One command, with nr_fds fds (SCM_RIGHTS). 0 or -errno (logged). */
int compel_parasite_send(struct compel_ctl *ctl, const struct parasite_cmd *cmd, const int *fds,
			 unsigned int nr_fds);
/* The next answer, in order. -EIO (logged) when the parasite is gone or the task stopped. */
int compel_parasite_recv(struct compel_ctl *ctl, struct parasite_answer *answer);
/*
 * Undo the infection: stop the parasite, unmap the scratch page and the parasite's area,
 * put back the original code bytes, the sigmask and the registers exactly as
 * compel_infect() found them; frees ctl. The task stays stopped and seized. Every step is tried even if one fails; returns the first error.
 */
int compel_cure(struct compel_ctl *ctl);

#endif
