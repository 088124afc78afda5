/*
 * Dump, seizing the tree: each process and thread under ptrace as it is found, children of
 * the seized ones in passes until none is new, within --timeout; and letting go of them
 * at the end (killed after a dump, resumed or left stopped).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compel.h"
#include "cr_options.h"
#include "dump-task.h"
#include "log.h"
#include "proc_parse.h"
#include "pstree.h"

/* ------------------------------------------------------ the process tree ---- */

/* Every process of the tree, parents before their children. */
struct dump_task **dump_tasks;
unsigned int nr_dump_tasks;

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
		pr_err("process %d: a thread exited while the process was being seized\n",
		       item->pid);
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
int dump_seize_tree(pid_t pid)
{
	unsigned int seconds = opts.timeout < 0 ? DEFAULT_DUMP_TIMEOUT : opts.timeout;
	struct sigaction sa = {.sa_handler = seize_timer_fired}, old;
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

/* 7. Kill the tree (or let it run, -R, or leave it stopped, -s); resume it on failure. */
void dump_release_tree(bool dumped)
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
