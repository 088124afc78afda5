/*
 * The restore pipeline (DESIGN.md §4), main-process side: read the tree, fork every
 * task with its original pid, wait until each has rebuilt itself and parked in the
 * restorer, then release them all together. A failure anywhere kills what we created.
 */
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compel.h"
#include "cr_options.h"
#include "crtools.h"
#include "fdstore.h"
#include "files.h"
#include "image.h"
#include "kerndat.h"
#include "log.h"
#include "plugin.h"
#include "pstree.h"
#include "restorer-setup.h"
#include "servicefd.h"
#include "vma.h"

#include "core.pb-c.h"
#include "inventory.pb-c.h"
#include "mm.pb-c.h"

/* A task being restored, as the main process tracks it. */
struct rst_task {
	struct pstree_item *item;
	pid_t pid; /* 0 until forked */
	int sync_fd; /* our end of the task's report socket */
	bool ready;
	MmEntry *mm; /* its address space, for the release */
	uint64_t region_start, region_len; /* where its restorer runs */
};

static struct rst_task root_task = { .sync_fd = -1 };

static double now_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Kept until the end: the plugins it names are checked once they are loaded. */
static InventoryEntry *inventory;

static int read_inventory(void)
{
	struct cr_img *img = open_image(CR_IMG_INVENTORY, O_RDONLY, 0);
	int ret;

	if (!img)
		return -1;
	ret = pb_read_one_required(img, (void **)&inventory);
	if (!ret && inventory->img_version != IMG_FORMAT_VERSION) {
		pr_err("inventory: images have version %u, this criu restores version %u\n",
		       inventory->img_version, IMG_FORMAT_VERSION);
		ret = -1;
	}
	close_image(img);
	return ret ? -1 : 0;
}

/*
 * fdstore before the plugins: a plugin's init may park fds there (DESIGN.md §4), and
 * both before forking, so the tasks inherit the store and the loaded plugins.
 */
static int prepare_plugins(void)
{
	if (fdstore_init() || cr_plugin_init(CR_PLUGIN_STAGE__RESTORE))
		return -1;
	if (cr_plugins_check_inventory(inventory)) {
		cr_plugin_fini(CR_PLUGIN_STAGE__RESTORE, -ENOENT);
		return -1;
	}
	return 0;
}

/* The join point for devices restored in the background: errors surface here. */
static int resume_devices(struct rst_task *task)
{
	int ret = run_plugins(RESUME_DEVICES_LATE, task->pid);

	return ret >= 0 || ret == -ENOTSUP ? 0 : -1;
}

/* clone3(set_tid) needs the pid free; say so plainly instead of failing with EEXIST later. */
static int check_pid_free(pid_t pid)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (access(path, F_OK) == 0) {
		pr_err("pid %d is already in use: cannot restore the task with its original pid\n", pid);
		return -1;
	}
	return 0;
}

/* ---- in the forked task ---- */

static int restore_sid_pgid(struct pstree_item *item)
{
	if (item->sid == item->pid) {
		if (setsid() < 0) {
			pr_perror("task %d: setsid", item->pid);
			return -1;
		}
	} else if (item->pgid == item->pid) {
		if (setpgid(0, 0) < 0) {
			pr_perror("task %d: setpgid", item->pid);
			return -1;
		}
	} else if (getsid(0) != item->sid || getpgid(0) != item->pgid) {
		/* A session or group led from outside the dumped tree: we join criu's. */
		pr_info("task %d: sid %d pgid %d were led from outside the tree; inheriting criu's\n",
			item->pid, item->sid, item->pgid);
	}
	return 0;
}

static int read_task_mm(pid_t pid, MmEntry **mm)
{
	struct cr_img *img = open_image(CR_IMG_MM, O_RDONLY, pid);
	int ret;

	if (!img)
		return -1;
	ret = pb_read_one_required(img, (void **)mm);
	close_image(img);
	return ret ? -1 : 0;
}

static int read_task_core(pid_t pid, CoreEntry **core)
{
	struct cr_img *img;
	int ret;

	img = open_image(CR_IMG_CORE, O_RDONLY, pid);
	if (!img)
		return -1;
	ret = pb_read_one_required(img, (void **)core);
	close_image(img);
	if (ret)
		return -1;
	if ((*core)->mtype != MARCH__X86_64) {
		pr_err("core-%d.img: not an x86_64 task\n", pid);
		return -1;
	}
	return 0;
}

static void report_failure(int sync_fd, int err)
{
	struct rst_report report = { RST_REPORT_MAGIC, err < 0 ? err : -EINVAL, 0, 0,
				     log_error_was_shown(), 0 };

	if (write(sync_fd, &report, sizeof(report)) < 0) {
		/* criu sees the EOF when we exit */
	}
}

/*
 * The task's own part up to the restorer: session, files, cwd/root, then the jump.
 * Order matters: fds first (service fds were moved out of the way), because the
 * restorer setup opens the page image and mapped files at numbers the task lacks.
 */
static int restore_task_body(struct rst_task *task, int sync_fd)
{
	struct pstree_item *item = task->item;
	struct rst_task_ctx ctx = { .pid = item->pid, .mm = task->mm, .loglevel = log_get_level() };
	static char prefix[32];
	int ret;

	snprintf(prefix, sizeof(prefix), "%d: ", item->pid);
	log_set_prefix(prefix);
	pr_info("restoring task %d\n", item->pid);

	if (restore_sid_pgid(item))
		return -1;
	if (read_task_core(item->pid, &ctx.core))
		return -1;

	ctx.sync_fd = install_service_fd(SYNC_SFD, sync_fd);
	if (ctx.sync_fd < 0)
		return ctx.sync_fd;
	/* Without -o the log is criu's stderr: keep a copy, the task's fd 2 will differ. */
	ctx.log_fd = install_service_fd(LOG_SFD, log_get_fd() >= 0 ? log_get_fd() : dup(STDERR_FILENO));
	if (ctx.log_fd < 0)
		return ctx.log_fd;
	log_set_task_fd(ctx.log_fd);
	images_dir_fd = install_service_fd(IMG_SFD, images_dir_fd);
	if (images_dir_fd < 0)
		return images_dir_fd;

	/* restorer_jump() restores cwd and root once it has opened the mapped files. */
	if (prepare_fds(item->pid))
		return -1;

	ret = restorer_jump(&ctx);
	pr_err("task %d: cannot enter the restorer: %s\n", item->pid, strerror(-ret));
	return ret;
}

static int task_main(struct rst_task *task, int child_sock)
{
	char seized;
	int ret = -EPIPE;

	/* The restorer ends on a trap only a tracer may catch: start once criu traces us. */
	if (read(child_sock, &seized, 1) == 1)
		ret = restore_task_body(task, child_sock);

	/* Only failures come back here; the sync fd may have moved, so report on both. */
	report_failure(get_service_fd(SYNC_SFD) >= 0 ? get_service_fd(SYNC_SFD) : child_sock, ret);
	_exit(1);
}

/* ---- in criu ---- */

static pid_t clone_with_pid(pid_t pid)
{
	struct clone_args args = { .exit_signal = SIGCHLD };

	args.set_tid = (unsigned long)&pid;
	args.set_tid_size = 1;
	/* --restore-sibling: the root becomes a child of criu's parent, as with CRIU. */
	if (opts.restore_sibling)
		args.flags |= CLONE_PARENT;
	return syscall(SYS_clone3, &args, sizeof(args));
}

/* Fallback for kernels without clone3(set_tid): ask for pid-1 as the last one given out. */
static pid_t fork_with_ns_last_pid(pid_t pid)
{
	char buf[16];
	int fd, len;
	pid_t child;

	fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = snprintf(buf, sizeof(buf), "%d", pid - 1);
	if (write(fd, buf, len) != len) {
		close(fd);
		return -1;
	}
	close(fd);
	child = fork();
	if (child > 0 && child != pid) {
		pr_err("pid %d was taken by another process while restoring\n", pid);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		errno = EEXIST;
		return -1;
	}
	return child;
}

/*
 * Trace the task from its first instruction: it must not outlive criu half restored
 * (PTRACE_O_EXITKILL), and criu catches it after its last restorer step.
 */
static int seize_task(struct rst_task *task)
{
	char go = 1;

	if (ptrace(PTRACE_SEIZE, task->pid, 0, PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD)) {
		pr_perror("cannot trace task %d", task->pid);
		return -1;
	}
	if (write(task->sync_fd, &go, 1) != 1) {
		pr_perror("cannot start task %d", task->pid);
		return -1;
	}
	return 0;
}

static int fork_task(struct rst_task *task)
{
	int socks[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks)) {
		pr_perror("socketpair");
		return -1;
	}
	task->pid = 0;
	if (kerndat_has_clone3_set_tid())
		pid = clone_with_pid(task->item->pid);
	else
		pid = fork_with_ns_last_pid(task->item->pid);
	if (pid < 0) {
		pr_perror("cannot create task with pid %d", task->item->pid);
		close(socks[0]);
		close(socks[1]);
		return -1;
	}
	if (pid == 0) {
		close(socks[0]);
		task_main(task, socks[1]);
	}
	close(socks[1]);
	task->pid = pid;
	task->sync_fd = socks[0];
	pr_info("forked task %d\n", pid);
	return seize_task(task);
}

/* Waits for the task's next ptrace stop; 0 when it stopped with sig (a signal or a syscall stop). */
static int wait_task_stop(struct rst_task *task, int sig, const char *what)
{
	int status;

	while (waitpid(task->pid, &status, __WALL) < 0) {
		if (errno != EINTR) {
			pr_perror("task %d: waitpid", task->pid);
			return -1;
		}
	}
	if (WIFSTOPPED(status) && WSTOPSIG(status) == sig)
		return 0;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		pr_err("task %d died %s (%s %d)\n", task->pid, what,
		       WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		task->pid = 0;
	} else {
		pr_err("task %d: unexpected stop (signal %d) %s\n", task->pid, WSTOPSIG(status), what);
	}
	return -1;
}

/*
 * Waits for the task's report, then for the trap that parks it before its final
 * rt_sigreturn: from there on it runs no code of its own until release_task().
 */
static int wait_task_ready(struct rst_task *task)
{
	struct pollfd pfd = { task->sync_fd, POLLIN, 0 };
	int timeout_ms = opts.timeout ? (int)opts.timeout * 1000 : -1;
	struct rst_report report;
	ssize_t n;
	int ret;

	do
		ret = poll(&pfd, 1, timeout_ms);
	while (ret < 0 && errno == EINTR);
	if (ret == 0) {
		pr_err("task %d: not restored within %u s (--timeout)\n", task->pid, opts.timeout);
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
	if (wait_task_stop(task, SIGSTOP, "before its release"))
		return -1;
	task->ready = true;
	return 0;
}

/* An executable address of the restored program, where compel may place a syscall. */
static unsigned long find_exec_addr(const MmEntry *mm)
{
	for (size_t i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *vma = mm->vmas[i];

		if ((vma->status & VMA_AREA_REGULAR) && (vma->prot & PROT_EXEC))
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
	ret = compel_syscall(ctl, &result, __NR_munmap, task->region_start, task->region_len, 0, 0, 0, 0);
	if (!ret && result) {
		pr_err("task %d: cannot unmap the restorer region: %s\n", task->pid, strerror(-result));
		ret = result;
	}
	if (compel_cure(ctl) && !ret)
		ret = -EIO;
	return ret;
}

/* One syscall of the task, from its entry stop to its exit stop: which one it was. */
static int step_one_syscall(struct rst_task *task, long *nr)
{
	struct user_regs_struct regs;

	if (ptrace(PTRACE_SYSCALL, task->pid, 0, 0)) {
		pr_perror("task %d: PTRACE_SYSCALL", task->pid);
		return -1;
	}
	if (wait_task_stop(task, SIGTRAP | 0x80, "leaving the restorer"))
		return -1;
	if (compel_get_regs(task->pid, &regs))
		return -1;
	*nr = regs.orig_rax;
	if (ptrace(PTRACE_SYSCALL, task->pid, 0, 0)) {
		pr_perror("task %d: PTRACE_SYSCALL", task->pid);
		return -1;
	}
	return wait_task_stop(task, SIGTRAP | 0x80, "leaving the restorer");
}

/* The restorer's last steps are a few close()s and rt_sigreturn; stop after the latter. */
static int follow_to_sigreturn_exit(struct rst_task *task)
{
	long nr = -1;

	for (int i = 0; i < 4096; i++) {
		if (step_one_syscall(task, &nr))
			return -1;
		if (nr == __NR_rt_sigreturn)
			return 0;
	}
	pr_err("task %d: did not reach rt_sigreturn\n", task->pid);
	return -1;
}

/*
 * Lets the task leave the trap: it closes criu's fds and does rt_sigreturn into the
 * program. We stop it at the exit of that syscall (registers are the program's),
 * remove the restorer region, and detach.
 */
static int release_task(struct rst_task *task)
{
	unsigned long exec_addr = find_exec_addr(task->mm);

	if (!exec_addr) {
		pr_err("task %d has no executable mapping to finish the restore from\n", task->pid);
		return -1;
	}
	if (follow_to_sigreturn_exit(task))
		return -1;
	if (unmap_restorer(task, exec_addr) || compel_detach(task->pid))
		return -1;
	close(task->sync_fd);
	task->sync_fd = -1;
	return 0;
}

/* A failed restore leaves nothing behind: kill what we forked and reap it. */
static void kill_created_tasks(void)
{
	if (root_task.pid <= 0)
		return;
	/* A traced task is reaped by its tracer even with --restore-sibling. */
	compel_kill(root_task.pid);
	root_task.pid = 0;
}

static int write_pidfile(pid_t pid)
{
	FILE *f;

	if (!opts.pidfile)
		return 0;
	f = fopen(opts.pidfile, "w");
	if (!f || fprintf(f, "%d", pid) < 0 || fclose(f)) {
		pr_perror("cannot write pidfile %s", opts.pidfile);
		return -1;
	}
	return 0;
}

/* Without -d criu waits for the restored root and exits with its status, as CRIU does. */
static int wait_root_task(pid_t pid)
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

int cr_restore_tasks(void)
{
	double t_start = now_secs(), t_forked, t_ready;
	sigset_t all, old;
	int ret = -1;

	if (read_inventory() || pstree_read() || check_pid_free(root_item->pid) || files_collect() ||
	    prepare_plugins()) {
		pb_free(NULL, inventory);
		inventory = NULL;
		return -1;
	}

	/* Tasks start with every signal blocked; the restorer's sigreturn sets their own mask. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);

	root_task.item = root_item;
	if (read_task_mm(root_item->pid, &root_task.mm))
		goto out;
	if (fork_task(&root_task))
		goto out;
	t_forked = now_secs();
	/* Before waiting: plugins start work here that overlaps the tasks' own restore. */
	if (run_plugins(POST_FORKING))
		goto out;

	if (wait_task_ready(&root_task))
		goto out;
	t_ready = now_secs();

	/* The task is parked in the restorer and runs none of its own code before this. */
	if (resume_devices(&root_task))
		goto out;
	if (release_task(&root_task))
		goto out;
	if (write_pidfile(root_task.pid))
		goto out;
	ret = 0;

	if (opts.display_stats)
		printf("Restore stats: fork %.3f s, restore %.3f s, total %.3f s\n", t_forked - t_start,
		       t_ready - t_forked, now_secs() - t_start);
	pr_info("Restore finished successfully. Tasks resumed.\n");
out:
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (ret)
		kill_created_tasks();
	/* After the kill: a plugin's exit may wait for work the tasks were feeding. */
	cr_plugin_fini(CR_PLUGIN_STAGE__RESTORE, ret);
	pb_free(NULL, inventory);
	inventory = NULL;
	if (ret)
		return -1;
	if (!opts.restore_detach && !opts.restore_sibling)
		return wait_root_task(root_task.pid);
	return 0;
}
