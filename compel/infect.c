/*
 * compel: remote syscalls in a seized, stopped task. A syscall instruction is written
 * over code of the task, registers are set for each call, the task runs exactly that
 * syscall (PTRACE_SYSCALL stops at entry and exit), and everything is put back at cure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "compel.h"
#include "infect-priv.h"

#define LOG_PREFIX "compel: "
#include "log.h"

/* "syscall" on x86_64. */
static const unsigned char syscall_insn[] = { 0x0f, 0x05 };

/*
 * A task that was group-stopped (SIGSTOP & co.) when seized reports its group-stop once
 * more when first resumed; resuming it again runs it. More than this many such stops
 * in a row means something keeps stopping it.
 */
#define MAX_GROUP_STOP_RETRAPS 4

static int resume_to_syscall(struct compel_ctl *ctl, const char *which)
{
	if (ptrace(PTRACE_SYSCALL, ctl->pid, NULL, NULL)) {
		int err = errno;

		pr_err("cannot resume %d to its syscall %s: %s\n", ctl->pid, which, strerror(err));
		return -err;
	}
	return 0;
}

/* Wait for the syscall-entry or syscall-exit stop a PTRACE_SYSCALL leads to. */
static int run_to_syscall_stop(struct compel_ctl *ctl, const char *which)
{
	int status, retraps = 0, ret;

	for (;;) {
		ret = resume_to_syscall(ctl, which);
		if (ret)
			return ret;
		if (waitpid(ctl->pid, &status, __WALL) != ctl->pid) {
			int err = errno;

			pr_err("waiting for the syscall %s of %d: %s\n", which, ctl->pid,
			       strerror(err));
			return -err;
		}
		if (!WIFSTOPPED(status)) {
			pr_err("task %d died during a remote syscall (status %#x)\n", ctl->pid,
			       status);
			return -ESRCH;
		}
		if (WSTOPSIG(status) == (SIGTRAP | 0x80))
			return 0;
		if (status >> 16 != PTRACE_EVENT_STOP || ++retraps > MAX_GROUP_STOP_RETRAPS)
			break;
		pr_debug("task %d: group-stop (signal %d) before syscall %s, resuming\n",
			 ctl->pid, WSTOPSIG(status), which);
	}
	/* All signals but SIGKILL/SIGSTOP are blocked, so anything else is a real surprise. */
	pr_err("task %d: unexpected stop (signal %d) at syscall %s\n", ctl->pid, WSTOPSIG(status),
	       which);
	return -EINVAL;
}

int compel_syscall(struct compel_ctl *ctl, long *result, long nr, unsigned long a1,
		   unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5,
		   unsigned long a6)
{
	struct user_regs_struct regs = ctl->orig_regs;
	int ret;

	regs.rip = ctl->syscall_ip;
	regs.rax = nr;
	/*
	 * orig_ax = -1: the task may sit in an interrupted syscall; without this the
	 * kernel would apply that syscall's restart logic to our registers on resume.
	 */
	regs.orig_rax = -1UL;
	regs.rdi = a1;
	regs.rsi = a2;
	regs.rdx = a3;
	regs.r10 = a4;
	regs.r8 = a5;
	regs.r9 = a6;
	ret = compel_set_regs(ctl->pid, &regs);
	if (ret)
		return ret;
	ret = run_to_syscall_stop(ctl, "entry");
	if (ret)
		return ret;
	ret = run_to_syscall_stop(ctl, "exit");
	if (ret)
		return ret;
	ret = compel_get_regs(ctl->pid, &regs);
	if (ret)
		return ret;
	*result = regs.rax;
	pr_debug("task %d: remote syscall %ld = %ld\n", ctl->pid, nr, *result);
	return 0;
}

static int write_syscall_insn(struct compel_ctl *ctl)
{
	long code;

	errno = 0;
	ctl->orig_code = ptrace(PTRACE_PEEKDATA, ctl->pid, (void *)ctl->syscall_ip, NULL);
	if (errno) {
		int err = errno;

		pr_err("cannot read code of %d at %#lx: %s\n", ctl->pid, ctl->syscall_ip,
		       strerror(err));
		return -err;
	}
	code = ctl->orig_code;
	memcpy(&code, syscall_insn, sizeof(syscall_insn));
	if (ptrace(PTRACE_POKEDATA, ctl->pid, (void *)ctl->syscall_ip, (void *)code)) {
		int err = errno;

		pr_err("cannot write code of %d at %#lx: %s\n", ctl->pid, ctl->syscall_ip,
		       strerror(err));
		return -err;
	}
	ctl->code_written = true;
	return 0;
}

static int map_scratch_page(struct compel_ctl *ctl)
{
	long addr;
	int ret;

	ret = compel_syscall(ctl, &addr, __NR_mmap, 0, COMPEL_SCRATCH_SIZE,
			     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1UL, 0);
	if (ret)
		return ret;
	if (addr < 0 && addr > -4096) {
		pr_err("task %d: cannot map a scratch page: %s\n", ctl->pid, strerror(-addr));
		return (int)addr;
	}
	ctl->scratch = addr;
	return 0;
}

int compel_infect(pid_t pid, unsigned long syscall_ip, struct compel_ctl **ctlp)
{
	struct compel_ctl *ctl;
	int ret;

	ctl = calloc(1, sizeof(*ctl));
	if (!ctl) {
		pr_err("no memory to infect %d\n", pid);
		return -ENOMEM;
	}
	ctl->pid = pid;
	ctl->syscall_ip = syscall_ip;

	ret = compel_get_regs(pid, &ctl->orig_regs);
	if (ret)
		goto fail;
	ctl->regs_saved = true;
	/*
	 * The task resumes from a syscall-exit stop, where the kernel no longer applies
	 * restart logic: the fixed-up registers are what it would have resumed with.
	 */
	compel_fixup_syscall_restart(&ctl->orig_regs);
	ret = compel_get_sigmask(pid, &ctl->orig_sigmask);
	if (ret)
		goto fail;
	/*
	 * Block everything while our syscalls run: a pending signal must stay queued for
	 * the dump, not be delivered into the middle of an injection.
	 */
	ret = compel_set_sigmask(pid, ~0ULL);
	if (ret)
		goto fail;
	ctl->sigmask_changed = true;
	ret = write_syscall_insn(ctl);
	if (ret)
		goto fail;
	ret = map_scratch_page(ctl);
	if (ret)
		goto fail;
	pr_debug("task %d infected: syscall at %#lx, scratch page at %#lx\n", pid, syscall_ip,
		 ctl->scratch);
	*ctlp = ctl;
	return 0;
fail:
	compel_cure(ctl);
	return ret;
}

unsigned long compel_scratch_addr(struct compel_ctl *ctl)
{
	return ctl->scratch;
}

int compel_scratch_read(struct compel_ctl *ctl, size_t off, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(ctl->scratch + off), .iov_len = len };
	ssize_t done;

	if (off + len > COMPEL_SCRATCH_SIZE) {
		pr_err("task %d: %zu bytes at %zu overflow the scratch page\n", ctl->pid, len, off);
		return -EINVAL;
	}
	done = process_vm_readv(ctl->pid, &local, 1, &remote, 1, 0);
	if (done != (ssize_t)len) {
		int err = done < 0 ? errno : EIO;

		pr_err("task %d: cannot read its scratch page: %s\n", ctl->pid, strerror(err));
		return -err;
	}
	return 0;
}

/* Remember the first error of a sequence of undo steps that must all run. */
static void keep_first_error(int *first, int ret)
{
	if (ret && !*first)
		*first = ret;
}

static int unmap_scratch_page(struct compel_ctl *ctl)
{
	long res;
	int ret;

	ret = compel_syscall(ctl, &res, __NR_munmap, ctl->scratch, COMPEL_SCRATCH_SIZE, 0, 0, 0,
			     0);
	if (ret)
		return ret;
	if (res) {
		pr_err("task %d: cannot unmap the scratch page: %s\n", ctl->pid, strerror(-res));
		return (int)res;
	}
	return 0;
}

int compel_restore_code(struct compel_ctl *ctl)
{
	if (ptrace(PTRACE_POKEDATA, ctl->pid, (void *)ctl->syscall_ip, (void *)ctl->orig_code)) {
		int err = errno;

		pr_err("cannot restore code of %d at %#lx: %s\n", ctl->pid, ctl->syscall_ip,
		       strerror(err));
		return -err;
	}
	return 0;
}

int compel_cure(struct compel_ctl *ctl)
{
	int first_err = 0;

	if (ctl->parasite)
		keep_first_error(&first_err, compel_parasite_cure(ctl));
	if (ctl->scratch)
		keep_first_error(&first_err, unmap_scratch_page(ctl));
	if (ctl->parasite_area)
		keep_first_error(&first_err, compel_parasite_unmap(ctl));
	if (ctl->code_written)
		keep_first_error(&first_err, compel_restore_code(ctl));
	if (ctl->sigmask_changed)
		keep_first_error(&first_err, compel_set_sigmask(ctl->pid, ctl->orig_sigmask));
	if (ctl->regs_saved)
		keep_first_error(&first_err, compel_set_regs(ctl->pid, &ctl->orig_regs));
	free(ctl);
	return first_err;
}
