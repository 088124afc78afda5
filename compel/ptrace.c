/*
 * compel: seizing and releasing a task, and the task state ptrace exposes
 * (registers, xstate, sigmask, queued signals, rseq registration).
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <asm/unistd.h>

#include "compel.h"

#define LOG_PREFIX "compel: "
#include "log.h"

/* Kernel-internal restart codes a syscall interrupted by a stop leaves in ax. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

/* The x86 syscall instruction is two bytes long: restarting means going back over it. */
#define SYSCALL_INSN_LEN 2

/*
 * Wait for the interrupt stop. A signal may be on its way to the task when we interrupt
 * it: we then see its signal-delivery stop first, hand the signal over unchanged, and
 * wait again; the pending PTRACE_INTERRUPT makes the task stop right after. A task that
 * exits instead gives -ESRCH, unlogged: the callers say what it means to them.
 */
static int wait_interrupt_stop(pid_t pid)
{
	int status;

	for (;;) {
		if (waitpid(pid, &status, __WALL) != pid) {
			int err = errno;

			/* The caller's alarm: the task did not stop in the time it was given. */
			if (err == EINTR)
				pr_err("task %d did not stop in time (--timeout)\n", pid);
			else
				pr_err("waiting for %d to stop: %s\n", pid, strerror(err));
			return -err;
		}
		if (!WIFSTOPPED(status)) {
			pr_debug("task %d exited before it stopped (status %#x)\n", pid, status);
			return -ESRCH;
		}
		if (status >> 16 == PTRACE_EVENT_STOP)
			return 0;
		pr_debug("task %d: passing signal %d on before its stop\n", pid, WSTOPSIG(status));
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)WSTOPSIG(status))) {
			int err = errno;

			pr_err("resuming %d with signal %d: %s\n", pid, WSTOPSIG(status), strerror(err));
			return -err;
		}
	}
}

/*
 * TRACESYSGOOD tells syscall stops (used by remote syscalls) from real SIGTRAPs;
 * SUSPEND_SECCOMP lets the remote syscalls and the restorer's run whatever seccomp
 * filters or strict mode the task has (it needs CAP_SYS_ADMIN: without it, a task with
 * seccomp fails where a filter refuses what it is made to run).
 */
long compel_seize_options(void)
{
	static long options = -1;
	pid_t child;

	if (options >= 0)
		return options;
	options = PTRACE_O_TRACESYSGOOD | PTRACE_O_SUSPEND_SECCOMP;
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	if (child < 0 || ptrace(PTRACE_SEIZE, child, NULL, (void *)options)) {
		pr_warn("PTRACE_O_SUSPEND_SECCOMP is not available: %s\n", strerror(errno));
		options = PTRACE_O_TRACESYSGOOD;
	}
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, __WALL);
	}
	return options;
}

/* PTRACE_SEIZE, then PTRACE_INTERRUPT, not waited for. quiet_exit: see compel_try_seize(). */
static int seize_and_interrupt(pid_t pid, bool quiet_exit)
{
	int err;

	if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)compel_seize_options())) {
		err = errno;
		/* PTRACE_SEIZE refuses a zombie with EPERM, as it does a task we may not trace. */
		if (!quiet_exit || (err != EPERM && err != ESRCH))
			pr_err("cannot seize %d: %s\n", pid, strerror(err));
		return -err;
	}
	if (ptrace(PTRACE_INTERRUPT, pid, NULL, NULL)) {
		err = errno;
		pr_err("cannot interrupt %d: %s\n", pid, strerror(err));
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
		return -err;
	}
	return 0;
}

/*
 * Tasks attached while their freezer cgroup was frozen (compel_attach_frozen()), whose
 * interrupt stop is still to be waited for: by seize() when the tree walk comes to them,
 * or by compel_release_frozen() for those it never came to.
 */
static pid_t *frozen_attached;
static unsigned int nr_frozen_attached;

static bool take_frozen_attached(pid_t pid)
{
	for (unsigned int i = 0; i < nr_frozen_attached; i++) {
		if (frozen_attached[i] == pid) {
			frozen_attached[i] = frozen_attached[--nr_frozen_attached];
			return true;
		}
	}
	return false;
}

int compel_attach_frozen(pid_t pid)
{
	pid_t *grown = realloc(frozen_attached, (nr_frozen_attached + 1) * sizeof(*grown));
	int err;

	if (!grown) {
		pr_err("no memory to attach %d\n", pid);
		return -ENOMEM;
	}
	frozen_attached = grown;
	err = seize_and_interrupt(pid, true);
	/* Gone since the cgroup listed it: the walk will not find it either. */
	if (err == -ESRCH)
		return 0;
	if (err == -EPERM)
		pr_err("cannot seize %d: %s\n", pid, strerror(EPERM));
	if (err)
		return err;
	frozen_attached[nr_frozen_attached++] = pid;
	return 0;
}

void compel_release_frozen(void)
{
	while (nr_frozen_attached) {
		pid_t pid = frozen_attached[--nr_frozen_attached];

		/* A tracee is detached from a stop only. */
		if (!wait_interrupt_stop(pid))
			ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	free(frozen_attached);
	frozen_attached = NULL;
}

/* quiet_exit: see compel_try_seize(). */
static int seize(pid_t pid, bool quiet_exit)
{
	int err;

	/* Attached while its freezer cgroup was frozen: its stop is all there is to wait for. */
	err = take_frozen_attached(pid) ? 0 : seize_and_interrupt(pid, quiet_exit);
	if (err)
		return err;
	err = wait_interrupt_stop(pid);
	if (err == -ESRCH && !quiet_exit)
		pr_err("task %d exited while being seized\n", pid);
	if (err)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	return err;
}

int compel_seize(pid_t pid)
{
	return seize(pid, false);
}

int compel_try_seize(pid_t pid)
{
	return seize(pid, true);
}

/* A ptrace request that ends in a stop (what: for messages), and that stop waited for. */
static int request_stop(pid_t pid, enum __ptrace_request req, const char *what)
{
	int err;

	if (ptrace(req, pid, NULL, NULL)) {
		err = errno;
		pr_err("task %d: cannot %s: %s\n", pid, what, strerror(err));
		return -err;
	}
	err = wait_interrupt_stop(pid);
	if (err == -ESRCH)
		pr_err("task %d exited before it stopped (%s)\n", pid, what);
	return err;
}

int compel_interrupt(pid_t pid)
{
	return request_stop(pid, PTRACE_INTERRUPT, "interrupt");
}

int compel_take_pending_stop(pid_t pid)
{
	/* The signal's delivery stop first (passed on), then the group stop it starts. */
	return request_stop(pid, PTRACE_CONT, "take its pending stop");
}

int compel_detach(pid_t pid)
{
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL)) {
		int err = errno;

		pr_err("cannot detach from %d: %s\n", pid, strerror(err));
		return -err;
	}
	return 0;
}

/* Whether a dying seized thread is reported gone now (its tracer must reap it). */
static bool reaped_dead_thread(pid_t tid)
{
	int status;
	pid_t got;

	while ((got = waitpid(tid, &status, __WALL | WNOHANG)) == tid)
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return true;
	return got < 0; /* not ours any more (ECHILD): gone too */
}

int compel_kill_process(pid_t pid, const pid_t *tids, unsigned int nr)
{
	const struct timespec tick = { .tv_nsec = 1000000 };
	bool *gone = calloc(nr + 1, sizeof(*gone));
	unsigned int left = nr + 1, i;

	if (!gone)
		return -ENOMEM;
	if (kill(pid, SIGKILL)) {
		int err = errno;

		pr_err("cannot kill %d: %s\n", pid, strerror(err));
		free(gone);
		return -err;
	}
	/*
	 * A traced thread stays a zombie until its tracer waits for it, and the leader is
	 * not reported dead while its group has threads. Nor does the last thread of a pid
	 * namespace's init finish exiting while any pid of the namespace is held, a traced
	 * zombie's too: waiting for one thread at a time could wait on that one forever.
	 * So each thread is reaped as it dies, the leader (slot nr) too.
	 */
	for (i = 0; i < nr; i++)
		if (tids[i] == pid) {
			gone[i] = true;
			left--;
		}
	while (left) {
		unsigned int before = left;

		for (i = 0; i <= nr; i++)
			if (!gone[i] && reaped_dead_thread(i < nr ? tids[i] : pid)) {
				gone[i] = true;
				left--;
			}
		if (left == before)
			nanosleep(&tick, NULL);
	}
	free(gone);
	return 0;
}

int compel_kill(pid_t pid)
{
	return compel_kill_process(pid, NULL, 0);
}

int compel_get_regs(pid_t pid, struct user_regs_struct *regs)
{
	struct iovec iov = { .iov_base = regs, .iov_len = sizeof(*regs) };

	if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_PRSTATUS, &iov)) {
		int err = errno;

		pr_err("cannot read registers of %d: %s\n", pid, strerror(err));
		return -err;
	}
	return 0;
}

int compel_set_regs(pid_t pid, const struct user_regs_struct *regs)
{
	struct iovec iov = { .iov_base = (void *)regs, .iov_len = sizeof(*regs) };

	if (ptrace(PTRACE_SETREGSET, pid, (void *)NT_PRSTATUS, &iov)) {
		int err = errno;

		pr_err("cannot set registers of %d: %s\n", pid, strerror(err));
		return -err;
	}
	return 0;
}

/*
 * The XSAVE area size depends on the CPU features the kernel enabled (AMX makes it
 * about 11 KiB); ask with a buffer larger than any current layout and keep what came back.
 */
#define XSTATE_BUF_MAX (64u << 10)

int compel_get_xstate(pid_t pid, void **buf, size_t *len)
{
	struct iovec iov;
	void *xstate;

	xstate = malloc(XSTATE_BUF_MAX);
	if (!xstate) {
		pr_err("no memory for the xstate of %d\n", pid);
		return -ENOMEM;
	}
	iov.iov_base = xstate;
	iov.iov_len = XSTATE_BUF_MAX;
	if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov)) {
		int err = errno;

		pr_err("cannot read the xstate of %d: %s\n", pid, strerror(err));
		free(xstate);
		return -err;
	}
	*buf = xstate;
	*len = iov.iov_len;
	return 0;
}

int compel_get_tls(pid_t pid, unsigned int first, unsigned int nr, struct user_desc *descs)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		memset(&descs[i], 0, sizeof(descs[i]));
		if (ptrace(PTRACE_GET_THREAD_AREA, pid, (void *)(long)(first + i), &descs[i])) {
			int err = errno;

			pr_err("cannot read GDT TLS slot %u of %d: %s\n", first + i, pid, strerror(err));
			return -err;
		}
	}
	return 0;
}

int compel_get_sigmask(pid_t pid, uint64_t *mask)
{
	if (ptrace(PTRACE_GETSIGMASK, pid, (void *)sizeof(*mask), mask)) {
		int err = errno;

		pr_err("cannot read the blocked signals of %d: %s\n", pid, strerror(err));
		return -err;
	}
	return 0;
}

int compel_set_sigmask(pid_t pid, uint64_t mask)
{
	if (ptrace(PTRACE_SETSIGMASK, pid, (void *)sizeof(mask), &mask)) {
		int err = errno;

		pr_err("cannot set the blocked signals of %d: %s\n", pid, strerror(err));
		return -err;
	}
	return 0;
}

/* Peek this many queued signals per call; the queue may be long (RT signals). */
#define PEEK_BATCH 32

int compel_get_pending(pid_t pid, bool shared, siginfo_t **infos, unsigned int *nr)
{
	struct __ptrace_peeksiginfo_args args = {
		.flags = shared ? PTRACE_PEEKSIGINFO_SHARED : 0,
		.nr = PEEK_BATCH,
	};
	siginfo_t *all = NULL;
	unsigned int count = 0;

	for (;;) {
		siginfo_t *grown = realloc(all, (count + PEEK_BATCH) * sizeof(*all));
		long got;

		if (!grown) {
			pr_err("no memory for the pending signals of %d\n", pid);
			free(all);
			return -ENOMEM;
		}
		all = grown;
		args.off = count;
		got = ptrace(PTRACE_PEEKSIGINFO, pid, &args, all + count);
		if (got < 0) {
			int err = errno;

			pr_err("cannot peek %s pending signals of %d: %s\n",
			       shared ? "shared" : "thread", pid, strerror(err));
			free(all);
			return -err;
		}
		if (got == 0)
			break;
		count += got;
	}
	if (!count) {
		free(all);
		all = NULL;
	}
	*infos = all;
	*nr = count;
	return 0;
}

int compel_get_rseq(pid_t pid, struct compel_rseq *rseq)
{
	struct __ptrace_rseq_configuration conf;

	memset(&conf, 0, sizeof(conf));
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, pid, (void *)sizeof(conf), &conf) < 0) {
		int err = errno;

		pr_err("cannot read the rseq registration of %d: %s\n", pid, strerror(err));
		return -err;
	}
	rseq->abi_pointer = conf.rseq_abi_pointer;
	rseq->abi_size = conf.rseq_abi_size;
	rseq->signature = conf.signature;
	rseq->flags = conf.flags;
	return 0;
}

void compel_fixup_syscall_restart(struct user_regs_struct *regs)
{
	/* orig_ax < 0: the task was not stopped inside a syscall. */
	if ((long)regs->orig_rax < 0)
		return;

	switch ((long)regs->rax) {
	case -ERESTARTSYS:
	case -ERESTARTNOINTR:
	case -ERESTARTNOHAND:
		regs->rax = regs->orig_rax;
		regs->rip -= SYSCALL_INSN_LEN;
		break;
	case -ERESTART_RESTARTBLOCK:
		/*
		 * restart_syscall continues the interrupted call from the task's
		 * restart_block; in a restored task that block is empty and the call
		 * returns EINTR, which callers of nanosleep & co. must handle anyway.
		 */
		regs->rax = __NR_restart_syscall;
		regs->rip -= SYSCALL_INSN_LEN;
		break;
	}
}
