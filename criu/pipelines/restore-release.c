/*
 * Restore, its end: each task parked in its restorer with its threads held, then all
 * released together (each thread followed out through rt_sigreturn, the restorer region
 * unmapped, all detached); without -d, the wait for the root; on a failure, the kill of
 * every task the restore created.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "compel.h"
#include "cr_options.h"
#include "log.h"
#include "namespaces.h"
#include "plugin.h"
#include "pstree.h"
#include "restore-tasks.h"
#include "restorer-args.h"
#include "task-image.h"
#include "task-sched.h"
#include "vma.h"

/* The join point for devices restored in the background: errors surface here. */
static int resume_devices(struct rst_task *task)
{
	int ret = run_plugins(RESUME_DEVICES_LATE, task->pid);

	return ret >= 0 || ret == -ENOTSUP ? 0 : -1;
}

/*
 * Waits for the next ptrace stop of thread tid of the task; 0 when it stopped with sig
 * (a signal or a syscall stop).
 */
static int wait_task_stop(struct rst_task *task, pid_t tid, int sig, const char *what)
{
	int status;

	while (waitpid(tid, &status, __WALL) < 0) {
		if (errno != EINTR) {
			pr_perror("task %d: waitpid %d", task->pid, tid);
			return -1;
		}
	}
	if (WIFSTOPPED(status) && WSTOPSIG(status) == sig)
		return 0;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		pr_err("task %d: thread %d died %s (%s %d)\n", task->pid, tid, what,
		       WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		if (tid == task->pid)
			task->pid = 0;
	} else {
		pr_err("task %d: thread %d: unexpected stop (signal %d) %s\n", task->pid, tid,
		       WSTOPSIG(status), what);
	}
	return -1;
}

/*
 * The other threads wait in the restorer until the main one is released. Trace each
 * and hold it in a ptrace stop now, so that none can leave the restorer unseen: criu
 * follows every one out in release_task().
 */
static int seize_task_threads(struct rst_task *task)
{
	struct pstree_item *item = task->item;
	unsigned int i;

	task->tids = calloc(item->nr_threads, sizeof(*task->tids));
	if (!task->tids) {
		pr_err("no memory for the threads of task %d\n", task->pid);
		return -1;
	}
	if (pidns_find_threads(task->pid, item->threads, item->nr_threads, task->tids))
		return -1;
	/* tids[0] is the main thread (pstree.img lists it first), traced since its fork. */
	for (i = 1; i < item->nr_threads; i++)
		if (compel_seize(task->tids[i]))
			return -1;
	if (item->nr_threads > 1)
		pr_info("task %d: %u threads traced\n", task->pid, item->nr_threads);
	/* A thread in cgroups of its own (v1 lets threads part): held, it runs nothing yet. */
	return cg_restore_threads(item, task->tids) ? -1 : 0;
}

/*
 * Waits for the task's report, then for the trap that parks it before its final
 * rt_sigreturn: from there on it runs no code of its own until release_task().
 */
/*
 * Once every thread exists and is held: they inherited the scheduling of the thread
 * that created them (see task-sched.c).
 */
static int restore_task_sched(struct rst_task *task)
{
	const struct task_image *ti = task->item->image;

	for (unsigned int i = 0; i < ti->nr_threads; i++)
		if (restore_thread_sched(task->tids[i], &ti->threads[i].sched))
			return -1;
	if (ti->has_oom_score_adj && restore_oom_score_adj(task->pid, ti->oom_score_adj))
		return -1;
	return 0;
}

static int wait_task_ready(struct rst_task *task)
{
	struct pollfd pfd = {task->sync_fd, POLLIN, 0};
	int timeout_ms = opts.timeout > 0 ? opts.timeout * 1000 : -1;
	struct rst_report report;
	ssize_t n;
	int ret;

	do
		ret = poll(&pfd, 1, timeout_ms);
	while (ret < 0 && errno == EINTR);
	if (ret == 0) {
		pr_err("task %d: not restored within %d s (--timeout)\n", task->pid, opts.timeout);
		return -1;
	}
	n = read(task->sync_fd, &report, sizeof(report));
	if (n != sizeof(report) || report.magic != RST_REPORT_MAGIC) {
		pr_err("task %d died while restoring (see the log above)\n", task->pid);
		return -1;
	}
	if (report.status) {
		/* One failure, one line: the task may have said it on our stderr already. */
		if (report.error_shown)
			pr_info("task %d failed to restore\n", task->pid);
		else
			pr_err("task %d failed to restore: %s (see the log)\n", task->pid,
			       strerror(-report.status));
		return -1;
	}
	task->region_start = report.region_start;
	task->region_len = report.region_len;
	if (wait_task_stop(task, task->pid, SIGSTOP, "before its release"))
		return -1;
	if (seize_task_threads(task) || restore_task_sched(task))
		return -1;
	task->ready = true;
	return 0;
}

/* An executable address of the restored program, where compel may place a syscall. */
static unsigned long find_exec_addr(const struct task_image *ti)
{
	for (unsigned int i = 0; i < ti->nr_vmas; i++) {
		const struct vma_image *vma = &ti->vmas[i];

		if (vma_image_mapped(vma) && (vma->prot & PROT_EXEC) &&
		    !(vma->status & VMA_ANON_SHARED))
			return vma->start;
	}
	return 0;
}

/* Unmaps the restorer region through a syscall injected into the restored program. */
static int unmap_restorer(struct rst_task *task, unsigned long exec_addr)
{
	struct compel_ctl *ctl;
	long result;
	int ret;

	ret = compel_infect(task->pid, exec_addr, &ctl);
	if (ret)
		return ret;
	ret = compel_syscall(ctl, &result, __NR_munmap, task->region_start, task->region_len, 0, 0,
			     0, 0);
	if (!ret && result) {
		pr_err("task %d: cannot unmap the restorer region: %s\n", task->pid,
		       strerror(-result));
		ret = result;
	}
	if (compel_cure(ctl) && !ret)
		ret = -EIO;
	return ret;
}

/* One syscall of a thread, from its entry stop to its exit stop: which one it was. */
static int step_one_syscall(struct rst_task *task, pid_t tid, long *nr)
{
	struct user_regs_struct regs;

	if (ptrace(PTRACE_SYSCALL, tid, 0, 0)) {
		pr_perror("task %d: thread %d: PTRACE_SYSCALL", task->pid, tid);
		return -1;
	}
	if (wait_task_stop(task, tid, SIGTRAP | 0x80, "leaving the restorer"))
		return -1;
	if (compel_get_regs(tid, &regs))
		return -1;
	*nr = regs.orig_rax;
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0)) {
		pr_perror("task %d: thread %d: PTRACE_SYSCALL", task->pid, tid);
		return -1;
	}
	return wait_task_stop(task, tid, SIGTRAP | 0x80, "leaving the restorer");
}

/*
 * The restorer's last steps are a futex (the release of the other threads, or their
 * wait for it), a few close()s and rt_sigreturn; stop the thread after the latter.
 */
static int follow_to_sigreturn_exit(struct rst_task *task, pid_t tid)
{
	long nr = -1;

	for (int i = 0; i < 4096; i++) {
		if (step_one_syscall(task, tid, &nr))
			return -1;
		if (nr == __NR_rt_sigreturn)
			return 0;
	}
	pr_err("task %d: thread %d did not reach rt_sigreturn\n", task->pid, tid);
	return -1;
}

/*
 * The main thread first: on its way out it sets the flag the others wait for (they
 * re-check it when we let them run, so no wake-up is lost while they are stopped).
 */
static int follow_threads_out(struct rst_task *task)
{
	struct pstree_item *item = task->item;
	unsigned int i;

	if (follow_to_sigreturn_exit(task, task->pid))
		return -1;
	for (i = 1; i < item->nr_threads; i++)
		if (follow_to_sigreturn_exit(task, task->tids[i]))
			return -1;
	return 0;
}

/* Every thread stands at the exit of its rt_sigreturn: let them all run. */
static int detach_threads(struct rst_task *task)
{
	struct pstree_item *item = task->item;
	unsigned int i;

	/*
	 * Stopped at dump time: stopped again. Queued while we still hold it, SIGSTOP is
	 * taken on its way back to user mode, before it runs an instruction of its own.
	 */
	if (task->stopped && kill(task->pid, task->item->image->stop_signo)) {
		pr_perror("task %d: cannot stop it again", task->pid);
		return -1;
	}
	/* --leave-stopped: the same way, whatever state it was dumped in. */
	if (opts.leave_stopped && !task->stopped && kill(task->pid, SIGSTOP)) {
		pr_perror("task %d: cannot leave it stopped", task->pid);
		return -1;
	}
	for (i = 1; i < item->nr_threads; i++)
		if (compel_detach(task->tids[i]))
			return -1;
	return compel_detach(task->pid);
}

/*
 * Lets the task leave the trap: it releases its threads, closes criu's fds and does
 * rt_sigreturn into the program; so does every thread. We stop each at the exit of that
 * syscall (registers are the program's), remove the restorer region once none is in it,
 * and detach them all: no thread runs program code before the others are out.
 */
static int release_task(struct rst_task *task)
{
	unsigned long exec_addr = find_exec_addr(task->item->image);

	if (!exec_addr) {
		pr_err("task %d has no executable mapping to finish the restore from\n", task->pid);
		return -1;
	}
	if (follow_threads_out(task))
		return -1;
	if (unmap_restorer(task, exec_addr) || detach_threads(task))
		return -1;
	close(task->sync_fd);
	task->sync_fd = -1;
	return 0;
}

/*
 * A zombie's death, seen by criu as its tracer first: a signal it kills itself with
 * stops it on the way and is passed on. Once criu has seen it, the kernel hands the
 * zombie over to its parent.
 */
static int wait_zombie_exit(struct rst_task *task)
{
	int status;

	for (;;) {
		if (waitpid(task->pid, &status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			pr_perror("zombie %d: waitpid", task->pid);
			return -1;
		}
		if (!WIFSTOPPED(status))
			break;
		if (ptrace(PTRACE_CONT, task->pid, 0, WSTOPSIG(status))) {
			pr_perror("zombie %d: cannot pass signal %d on", task->pid,
				  WSTOPSIG(status));
			return -1;
		}
	}
	pr_info("zombie %d re-created (wait status %#x)\n", task->pid, status);
	return 0;
}

/* Every task's report: live ones parked before their sigreturn, zombies dead. */
int rst_wait_tree_ready(void)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < nr_rst_tasks && !ret; i++) {
		struct rst_task *task = &rst_tasks[i];
		char files = TASK_CMD_FILES;

		/* Its parent, before it in pstree order, is parked: its fd table is restored. */
		if (pstree_shares_parent_files(task->item) &&
		    write(task->sync_fd, &files, 1) != 1) {
			pr_perror("cannot let task %d use its parent's fd table", task->pid);
			return -1;
		}
		ret = task->zombie ? wait_zombie_exit(task) : wait_task_ready(task);
	}
	return ret;
}

int rst_resume_tree_devices(void)
{
	unsigned int i;

	for (i = 0; i < nr_rst_tasks; i++)
		if (!rst_tasks[i].zombie && resume_devices(&rst_tasks[i]))
			return -1;
	return 0;
}

int rst_release_tree(void)
{
	unsigned int i;

	for (i = 0; i < nr_rst_tasks; i++)
		if (!rst_tasks[i].zombie && release_task(&rst_tasks[i]))
			return -1;
	return 0;
}

/*
 * A failed restore leaves nothing behind. criu traces every task it let go: SIGKILL
 * those. The others still wait for GO and exit once our sockets close. Orphans come to
 * criu, the subreaper, so waiting until no child or tracee is left reaps them all.
 */
void rst_kill_created_tasks(void)
{
	unsigned int i;
	int status;

	for (i = 0; i < nr_rst_tasks; i++)
		if (rst_tasks[i].pid > 0)
			kill(rst_tasks[i].pid, SIGKILL);
	for (i = 0; i < nr_rst_tasks; i++) {
		if (rst_tasks[i].sync_fd >= 0)
			close(rst_tasks[i].sync_fd);
		rst_tasks[i].sync_fd = -1;
		rst_tasks[i].pid = 0;
	}
	while (waitpid(-1, &status, __WALL) > 0 || errno == EINTR)
		;
}

/* Without -d criu waits for the restored root and exits with its status, as CRIU does. */
int rst_wait_root_task(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("waitpid %d", pid);
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
