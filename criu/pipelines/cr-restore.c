/*
 * The restore pipeline, main-process side: read the tree, fork every
 * task with its original pid, wait until each has rebuilt itself and parked in the
 * restorer, then release them all together. A failure anywhere kills what we created.
 * Sessions, groups and orphans are in restore-sessions.c; the parked tree, its release
 * and the kill in restore-release.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cgroup.h"
#include "compel.h"
#include "cr_options.h"
#include "sk-inet.h"
#include "crtools.h"
#include "daemon.h"
#include "fdstore.h"
#include "file-lock.h"
#include "files.h"
#include "image.h"
#include "kerndat.h"
#include "log.h"
#include "lsm.h"
#include "cpuinfo.h"
#include "loginuid.h"
#include "mem-cow.h"
#include "memfd.h"
#include "namespaces.h"
#include "net-lock.h"
#include "netlock-nft.h"
#include "plugin.h"
#include "pstree.h"
#include "restorer-setup.h"
#include "restore-tasks.h"
#include "servicefd.h"
#include "seccomp.h"
#include "shmem.h"
#include "sysv-shm.h"
#include "stats.h"
#include "task-image.h"
#include "tty.h"
#include "uffd.h"

#include "inventory.pb-c.h"

/* Every process of the tree in pstree order (parents first): rst_tasks[0] is the root. */
struct rst_task *rst_tasks;
unsigned int nr_rst_tasks;

static double now_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Kept until the end: the plugins it names are checked once they are loaded. */
static InventoryEntry *inventory;

/* What this criu restores: images of version 2 with fdinfo images named by files_id. */
static int check_inventory(const InventoryEntry *inv)
{
	if (inv->img_version != CRIU_IMAGES_VERSION) {
		pr_err("inventory.img: images of version %u, this criu restores version %u\n",
		       inv->img_version, CRIU_IMAGES_VERSION);
		return -1;
	}
	if (!inv->has_fdinfo_per_id || !inv->fdinfo_per_id) {
		pr_err("inventory.img: fdinfo images named by pid (fdinfo_per_id false), which are not supported\n");
		return -1;
	}
	return 0;
}

static int read_inventory(void)
{
	struct cr_img *img = open_image(CR_IMG_INVENTORY, O_RDONLY, 0);
	int ret;

	if (!img)
		return -1;
	ret = pb_read_one_required(img, (void **)&inventory);
	close_image(img);
	if (ret || check_inventory(inventory) ||
	    lsm_restore_prepare(inventory->has_lsmtype ? inventory->lsmtype : LSMTYPE__NO_LSM))
		return -1;
	/* --cpu-cap (any but none): this CPU must run what the dumped one ran, as CRIU checks. */
	if ((opts.cpu_cap & CPU_CAP_IMAGE) && cpuinfo_check(opts.cpu_cap))
		return -1;
	/* Dumped with --tcp-close: the established connections have no streams to restore. */
	if (inventory->has_tcp_close && inventory->tcp_close)
		tcp_restore_as_dumped_closed();
	/* The lock the dump took is the one restore removes, whatever the command line says. */
	if (inventory->has_network_lock_method)
		netlock_use_dump_method(inventory->network_lock_method == NETWORK_LOCK_NFTABLES);
	return 0;
}

/*
 * fdstore before the plugins: a plugin's init may park fds there, and
 * both before forking, so the tasks inherit the store and the loaded plugins.
 */
static int prepare_plugins(void)
{
	if (fdstore_init() || cr_plugin_init(CR_PLUGIN_STAGE__RESTORE))
		return -1;
	if (cr_plugins_check_inventory(inventory->plugins_entry)) {
		cr_plugin_fini(CR_PLUGIN_STAGE__RESTORE, -ENOENT);
		return -1;
	}
	return 0;
}

/*
 * clone3(set_tid) needs the pids free; say so plainly instead of failing with EEXIST later.
 * In a pid namespace of the tree's own, every pid is free.
 */
static int check_pids_free(void)
{
	struct pstree_item *item;
	char path[32];

	for (item = root_item; item && !pidns_own(); item = pstree_next(item)) {
		snprintf(path, sizeof(path), "/proc/%d", item->pid);
		if (access(path, F_OK) == 0) {
			pr_err("pid %d is already in use: cannot restore its task with that pid\n",
			       item->pid);
			log_set_errno(EEXIST);
			return -1;
		}
		if (rst_check_helper_pid_free(item->sid, "session") ||
		    rst_check_helper_pid_free(item->pgid, "process group"))
			return -1;
	}
	return 0;
}

struct rst_task *rst_task_of(const struct pstree_item *item)
{
	unsigned int i;

	for (i = 0; i < nr_rst_tasks; i++)
		if (rst_tasks[i].item == item)
			return &rst_tasks[i];
	return NULL;
}

/* Tasks before item in pstree order that share its fd table: its service fd slot. */
static unsigned int table_slot(const struct pstree_item *item)
{
	struct pstree_item *other;
	unsigned int slot = 0;

	for (other = root_item; other != item; other = pstree_next(other))
		slot += item->ids.files_id && other->ids.files_id == item->ids.files_id;
	return slot;
}

/*
 * A child sharing its parent's fd table is cloned with CLONE_FILES by the parent itself,
 * not with ns_last_pid. One service fd slot per task of the largest shared table, before
 * files_collect() plans fd numbers below them.
 */
static int prepare_shared_tables(void)
{
	struct pstree_item *item;
	unsigned int nr_slots = 1;

	for (item = root_item; item; item = pstree_next(item)) {
		if (!pstree_shares_parent_files(item))
			continue;
		if (!kerndat_has_clone3_set_tid()) {
			pr_err("task %d shares the fd table of its parent: restoring that needs "
			       "clone3() with set_tid\n",
			       item->pid);
			return -1;
		}
		if (table_slot(item) + 1 > nr_slots)
			nr_slots = table_slot(item) + 1;
	}
	service_fd_reserve_slots(nr_slots);
	return 0;
}

/* Once the task images are read: nor through a helper (pstree_session_adopter() needs them). */
static int check_shared_tables_forkers(void)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item)) {
		if (!pstree_shares_parent_files(item))
			continue;
		if (pstree_session_adopter(item) ||
		    (item->sid != item->parent->sid && pstree_leader_is_dead(item->sid))) {
			pr_err("task %d shares the fd table of its parent %d but a helper forks "
			       "it (its session): not supported\n",
			       item->pid, item->parent->pid);
			return -1;
		}
	}
	return 0;
}

/* ---- in the forked task ---- */

static void report_failure(int sync_fd, int err)
{
	struct rst_report report = { RST_REPORT_MAGIC, err < 0 ? err : -EINVAL, 0, 0,
				     log_error_was_shown(), 0 };

	if (write(sync_fd, &report, sizeof(report)) < 0) {
		/* criu sees the EOF when we exit */
	}
}

/*
 * The task's own part up to the restorer: files, cwd/root, then the jump.
 * Order matters: fds first (service fds were moved out of the way), because the
 * restorer setup opens the page image and mapped files at numbers the task lacks.
 */
/*
 * In the task: the registrations are its address space's, which the restorer rebuilds in
 * place (the same mm), so they survive it.
 */
static int restore_membarrier(const struct task_image *ti)
{
	for (unsigned int bit = 0; bit < 32; bit++) {
		unsigned int cmd = 1u << bit;

		if (!(ti->membarrier_registrations & cmd))
			continue;
		if (syscall(SYS_membarrier, cmd, 0, 0)) {
			pr_perror("task %d: cannot register for membarrier command %#x", ti->item->pid,
				  cmd);
			return -1;
		}
	}
	return 0;
}

/*
 * criu's descriptors the task keeps up to the end of its restorer, at its service fds. A
 * task sharing its parent's fd table installs copies in a slot of its own before it
 * reports its stage (task_stages()): what it does not move there, the parent's
 * prepare_fds() closes after GROUPS.
 */
static int install_task_service_fds(struct rst_task *task, int sock)
{
	bool shared = pstree_shares_parent_files(task->item);
	int log_fd = log_get_fd(), ret;

	if (get_service_fd(SYNC_SFD) >= 0)
		return 0;
	if (shared) {
		ret = service_fd_enter_slot(table_slot(task->item));
		if (ret)
			return ret;
	}
	ret = install_service_fd(SYNC_SFD, sock);
	if (ret < 0)
		return ret;
	/* Without -o the log is criu's stderr: keep a copy, the task's fd 2 will differ. */
	if (log_fd < 0 || shared)
		log_fd = dup(log_fd >= 0 ? log_fd : STDERR_FILENO);
	ret = install_service_fd(LOG_SFD, log_fd);
	if (ret < 0)
		return ret;
	log_set_task_fd(ret);
	images_dir_fd = install_service_fd(IMG_SFD, shared ? dup(images_dir_fd) : images_dir_fd);
	return images_dir_fd < 0 ? images_dir_fd : 0;
}

static int recv_cmd(int sock, char expected);

/*
 * Tasks start with every signal blocked through sigprocmask(), which in glibc leaves its
 * own SIGCANCEL and SIGSETXID (32, 33) open. The blob must hold those too: a POSIX timer
 * it re-arms may fire at a thread (glibc's SIGEV_THREAD helper waits for 32) before the
 * thread's own mask is back with its rt_sigreturn.
 */
static int block_all_signals(const struct pstree_item *item)
{
	uint64_t all = ~0ull;

	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof(all))) {
		pr_perror("task %d: cannot block every signal", item->pid);
		return -errno;
	}
	return 0;
}

/* A table shared with the parent is the parent's to restore: wait until it did. */
static int restore_task_fds(struct rst_task *task, int sync_fd)
{
	if (!pstree_shares_parent_files(task->item))
		return prepare_fds(task->item->pid);
	return recv_cmd(sync_fd, TASK_CMD_FILES);
}

static int restore_task_body(struct rst_task *task, int sync_fd)
{
	struct pstree_item *item = task->item;
	struct rst_task_ctx ctx = { .pid = item->pid, .image = item->image, .loglevel = log_get_level(),
				    .lazy_pages = opts.lazy_pages };
	int ret;

	pr_info("restoring task %d\n", item->pid);
	ret = install_task_service_fds(task, sync_fd);
	if (ret)
		return ret;
	ctx.sync_fd = get_service_fd(SYNC_SFD);
	ctx.log_fd = get_service_fd(LOG_SFD);

	/* restorer_jump() restores cwd and root once it has opened the mapped files. */
	if (restore_task_fds(task, ctx.sync_fd) || restore_membarrier(item->image))
		return -1;
	/* The blob re-takes the locks: who took one since the dump is said here. */
	if (file_locks_check_task(item->pid) || block_all_signals(item))
		return -1;

	ret = restorer_jump(&ctx);
	pr_err("task %d: cannot enter the restorer: %s\n", item->pid, strerror(-ret));
	return ret;
}

/*
 * A zombie is re-created by dying the way it died: criu, its tracer, lets it go, and its
 * parent (not reaping during restore) finds it dead with the dumped wait status.
 */
static void __attribute__((noreturn)) exit_as_zombie(int wait_status)
{
	int sig = wait_status & 0x7f;

	if (sig) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		struct rlimit no_core = { 0, 0 };
		sigset_t set;

		/* The original core file, if any, was written when it died. */
		setrlimit(RLIMIT_CORE, &no_core);
		sigaction(sig, &dfl, NULL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		kill(getpid(), sig);
	}
	_exit((wait_status >> 8) & 0xff);
}

static pid_t fork_with_ns_last_pid(pid_t pid);

/*
 * Each child with its original pid; it waits for criu to trace it before doing anything.
 * A session leader forks twice: the children born before its setsid() (early), then the
 * others.
 */
static int fork_children(struct pstree_item *item, bool early)
{
	struct pstree_item *child;
	pid_t pid;

	for (child = item->first_child; child; child = child->next_sibling) {
		if (pstree_born_before_setsid(child) != early || pstree_session_adopter(child))
			continue;
		if (rst_in_dead_session(child)) {
			if (rst_first_child_in_session(child) &&
			    rst_fork_session_helper(item, child->sid))
				return -1;
			continue;
		}
		/* Born in its mount and net namespaces (nested ones): the parent is in them too. */
		if (mntns_enter(child->ids.mnt_ns_id) || netns_enter(child->ids.net_ns_id))
			return -1;
		/* prepare_shared_tables() made sure clone3() is there for CLONE_FILES. */
		if (kerndat_has_clone3_set_tid())
			pid = pidns_clone_child(item, child->pid,
						pstree_shares_parent_files(child) ? CLONE_FILES : 0);
		else
			pid = fork_with_ns_last_pid(child->pid);
		if (pid < 0) {
			pr_perror("task %d: cannot create child %d", item->pid, child->pid);
			return -1;
		}
		if (pid == 0)
			rst_task_main(rst_task_of(child));
		pr_debug("forked child %d\n", pid);
		if (mntns_enter(item->ids.mnt_ns_id) || netns_enter(item->ids.net_ns_id))
			return -1;
	}
	return 0;
}

/* Whether item is forked by a task using fd table files_id, or below one. */
static bool forked_under_table(const struct pstree_item *item, uint32_t files_id)
{
	for (; item; item = pstree_session_adopter(item) ?: item->parent)
		if (item->ids.files_id == files_id)
			return true;
	return false;
}

/*
 * Children hold copies of every socket: each keeps only its own once its children exist.
 * A table shared with other tasks is cleaned once, by its first task: the sockets of those
 * forked below it stay (they may not be forked yet) until its prepare_fds() closes what
 * is not its own. A second close by another task could hit a number reused meanwhile.
 */
static void close_other_task_socks(struct rst_task *self)
{
	uint32_t files_id = self->item->ids.files_id;
	bool shared = false;
	unsigned int i;

	if (pstree_shares_parent_files(self->item))
		return;
	for (i = 0; i < nr_rst_tasks; i++)
		shared |= &rst_tasks[i] != self && files_id &&
			  rst_tasks[i].item->ids.files_id == files_id;
	for (i = 0; i < nr_rst_tasks; i++) {
		if (&rst_tasks[i] == self || rst_tasks[i].task_sock < 0)
			continue;
		if (shared && forked_under_table(rst_tasks[i].item, files_id))
			continue;
		close(rst_tasks[i].task_sock);
		rst_tasks[i].task_sock = -1;
	}
}

static int recv_cmd(int sock, char expected)
{
	char cmd;
	ssize_t n;

	do
		n = read(sock, &cmd, 1);
	while (n < 0 && errno == EINTR);
	/* EOF: criu gave up on the restore and said why; nothing more to say here. */
	return n == 1 && cmd == expected ? 0 : -EPIPE;
}

/*
 * Traced from GO on: session and group it leads, children, stage report, GROUPS, the
 * group it joins; then a zombie dies, a live task rebuilds itself.
 */
static int task_stages(struct rst_task *task, int sock)
{
	struct pstree_item *item = task->item;
	char stage;

	if (recv_cmd(sock, TASK_CMD_GO))
		return -1;
	/*
	 * The root, born into its namespaces (fork_root_task()), fills them before anything
	 * else: the SysV objects must exist before any task restores its memory.
	 */
	if (task == &rst_tasks[0] && ns_restore_in_root())
		return -1;
	/* Before any child exists: the children inherit the memory they share with it. */
	if (mem_cow_premap(item->image))
		return -1;
	/*
	 * Shared descriptions before the children: they inherit them (files.c), and the
	 * controlling terminal a session leader takes back through one of them (tty.c). Those
	 * need the task's session: the children born before its setsid() come first (files.c
	 * has their ancestors above open what they share).
	 */
	if (fork_children(item, true) || rst_restore_own_leadership(item) ||
	    rst_fork_adopted_orphans(item) || rst_become_reaper(item) ||
	    prepare_inherited_files(item) || tty_restore_ctty(item) || fork_children(item, false) ||
	    pidns_restore_for_children(item))
		return -1;
	close_other_task_socks(task);
	/* Before the stage: after GROUPS the table's restorer may close its socket. */
	if (pstree_shares_parent_files(item)) {
		if (install_task_service_fds(task, sock))
			return -1;
		sock = get_service_fd(SYNC_SFD);
	}
	if (task->zombie)
		stage = TASK_STAGE_ZOMBIE;
	else if (task->stopped)
		stage = TASK_STAGE_STOPPED;
	else
		stage = TASK_STAGE_ALIVE;
	if (write(sock, &stage, 1) != 1) {
		pr_perror("task %d: cannot report its children", item->pid);
		return -1;
	}
	/*
	 * Every group exists now: a leader's terminal gets its foreground group back. criu
	 * made the files that name tasks before GROUPS (files_tree_forked()): prepare_fds()
	 * takes them.
	 */
	if (recv_cmd(sock, TASK_CMD_GROUPS) || rst_join_session_and_group(item) ||
	    tty_restore_foreground(item))
		return -1;
	if (task->zombie)
		exit_as_zombie(item->image->exit_code);
	return 0;
}

void __attribute__((noreturn)) rst_task_main(struct rst_task *task)
{
	static char prefix[32];
	int sock = task->task_sock;
	unsigned int i;
	int ret = -1;

	snprintf(prefix, sizeof(prefix), "%d: ", task->item->pid);
	log_set_prefix(prefix);
	if (opts.log_pid && log_to_pid_file(task->item->pid)) {
		report_failure(sock, -EIO);
		_exit(1);
	}
	/* criu's ends: only the root inherits them, its children see them closed. */
	for (i = 0; i < nr_rst_tasks; i++) {
		if (rst_tasks[i].sync_fd >= 0)
			close(rst_tasks[i].sync_fd);
		rst_tasks[i].sync_fd = -1;
	}
	if (!task_stages(task, sock))
		ret = restore_task_body(task, sock);

	/* Only failures come back here; the sync fd may have moved, so report on both. */
	report_failure(get_service_fd(SYNC_SFD) >= 0 ? get_service_fd(SYNC_SFD) : sock, ret);
	_exit(1);
}

/* ---- in criu ---- */

/* Fallback for kernels without clone3(set_tid): ask for pid-1 as the last one given out. */
static pid_t fork_with_ns_last_pid(pid_t pid)
{
	char buf[16];
	int fd, len;
	pid_t child;

	/* In a task, whose namespace may have no /proc: proc_open() knows. */
	fd = proc_open("sys/kernel/ns_last_pid", O_WRONLY);
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
	char go = TASK_CMD_GO;

	if (ptrace(PTRACE_SEIZE, task->pid, 0, PTRACE_O_EXITKILL | compel_seize_options())) {
		pr_perror("cannot trace task %d", task->pid);
		return -1;
	}
	/* Into its cgroups before it runs: what it forks and allocates is charged there. */
	if (cg_restore_task(task->item, task->pid))
		return -1;
	if (write(task->sync_fd, &go, 1) != 1) {
		pr_perror("cannot start task %d", task->pid);
		return -1;
	}
	return 0;
}

/* One socket per task, all made before the root is forked: every task inherits its own. */
static int create_task_sockets(void)
{
	unsigned int i;
	int socks[2];

	for (i = 0; i < nr_rst_tasks; i++) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks)) {
			pr_perror("socketpair for task %d", rst_tasks[i].item->pid);
			return -1;
		}
		rst_tasks[i].sync_fd = socks[0];
		rst_tasks[i].task_sock = socks[1];
	}
	return 0;
}

static int prepare_rst_tasks(void)
{
	struct pstree_item *item;
	unsigned int i = 0;

	for (item = root_item; item; item = pstree_next(item))
		nr_rst_tasks++;
	rst_tasks = calloc(nr_rst_tasks, sizeof(*rst_tasks));
	if (!rst_tasks) {
		pr_err("no memory for %u tasks\n", nr_rst_tasks);
		return -1;
	}
	for (item = root_item; item; item = pstree_next(item), i++)
		rst_tasks[i] = (struct rst_task){
			.item = item, .sync_fd = -1, .task_sock = -1,
			.zombie = task_image_zombie(item->image),
			.stopped = item->image->state == TASK_STOPPED,
		};
	return create_task_sockets();
}

/* Whether the task is forked by its parent itself (fork_children()), not by another task. */
static bool forked_by_parent(const struct pstree_item *item)
{
	return !pstree_session_adopter(item) && !rst_in_dead_session(item);
}

/*
 * The root, born into the namespaces of its own it had (clone flags, and what criu
 * entered around the fork: ns_enter_before_root()); it fills them itself before it forks
 * (task_stages()). The init of its own pid namespace is pid 1 there (set_tid says so).
 */
static pid_t clone_root(const struct pstree_item *item)
{
	unsigned long flags = ns_root_clone_flags();
	pid_t pid;

	/* --restore-sibling: the root becomes a child of criu's parent, as with CRIU. */
	if (opts.restore_sibling)
		flags |= CLONE_PARENT;
	if (ns_enter_before_root()) {
		pid = -1;
	} else {
		if (kerndat_has_clone3_set_tid() || (flags & ~CLONE_PARENT))
			pid = clone_with_pid(item->pid, flags);
		else
			pid = fork_with_ns_last_pid(item->pid);
		if (pid < 0)
			pr_perror("cannot create task with pid %d (clone flags %#lx)", item->pid,
				  flags);
	}
	/* criu itself back where it was, for what it forks later; the root stays. */
	if (pid != 0 && ns_leave_after_root() && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, __WALL);
		pid = -1;
	}
	return pid;
}

static int fork_root_task(void)
{
	struct rst_task *root = &rst_tasks[0];
	unsigned int i;
	pid_t pid;

	pid = clone_root(root->item);
	if (pid < 0)
		return -1;
	if (pid == 0)
		rst_task_main(root);
	for (i = 0; i < nr_rst_tasks; i++) {
		close(rst_tasks[i].task_sock);
		rst_tasks[i].task_sock = -1;
	}
	root->pid = pid;
	pr_info("forked task %d\n", pid);
	/* Before GO (seize_task()): the root runs nothing until its namespaces are filled. */
	if (ns_root_born(pid)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, __WALL);
		root->pid = 0;
		return -1;
	}
	return pidns_note_root(root->item->pid, pid) ?: seize_task(root);
}

/* A task that reported a failure (or died) instead of the next stage. */
static void log_task_failure(struct rst_task *task, const struct rst_report *report,
			     const char *stage)
{
	if (!report)
		pr_err("task %d died %s (see the log above)\n", task->pid, stage);
	else if (report->error_shown)
		pr_info("task %d failed %s\n", task->pid, stage);
	else
		pr_err("task %d failed %s: %s (see the log)\n", task->pid, stage,
		       strerror(-report->status));
}

/* The task's stage byte: its children exist, and whether it is alive or a zombie. */
static int wait_task_forked(struct rst_task *task)
{
	union {
		char stage;
		struct rst_report report;
	} msg;
	ssize_t n;

	if (task->forked)
		return 0;
	do
		n = read(task->sync_fd, &msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	if (n == 1 && (msg.stage == TASK_STAGE_ALIVE || msg.stage == TASK_STAGE_STOPPED ||
		       msg.stage == TASK_STAGE_ZOMBIE)) {
		task->forked = true;
		return 0;
	}
	log_task_failure(task, n == sizeof(msg.report) && msg.report.magic == RST_REPORT_MAGIC ?
				       &msg.report : NULL, "before forking its children");
	return -1;
}

/* The task that forks it: its parent, or for an orphan of the init its session leader. */
static struct rst_task *forker_of(const struct rst_task *task)
{
	struct pstree_item *leader = pstree_session_adopter(task->item);

	return rst_task_of(leader ? leader : task->item->parent);
}

/*
 * Forkers first: a task is traced and let go once its forker has forked it; a sibling
 * forks its own children meanwhile. Ends when every task has reported its stage.
 */

static int seize_tree_tasks(void)
{
	unsigned int i, nr_seized = 1, nr_before;

	/* In rounds: an orphan's leader may come after it in pstree order. */
	while (nr_seized < nr_rst_tasks) {
		nr_before = nr_seized;
		for (i = 1; i < nr_rst_tasks; i++) {
			struct rst_task *task = &rst_tasks[i];

			if (task->pid || !forker_of(task)->pid)
				continue;
			if (wait_task_forked(forker_of(task)) ||
			    pidns_find_child(rst_task_of(task->item->parent)->pid, task->item->pid,
					     &task->pid) ||
			    seize_task(task))
				return -1;
			nr_seized++;
		}
		if (nr_seized == nr_before) {
			pr_err("%u tasks have no task to fork them\n", nr_rst_tasks - nr_seized);
			return -1;
		}
	}
	for (i = 0; i < nr_rst_tasks; i++)
		if (wait_task_forked(&rst_tasks[i]))
			return -1;
	return 0;
}

/*
 * Every leader made its session or group before it reported its stage: members may join
 * now, whatever their place in the tree.
 */
static int release_groups(void)
{
	char cmd = TASK_CMD_GROUPS;
	unsigned int i;

	for (i = 0; i < nr_rst_tasks; i++) {
		if (write(rst_tasks[i].sync_fd, &cmd, 1) != 1) {
			pr_perror("cannot let task %d set its group", rst_tasks[i].pid);
			return -1;
		}
	}
	return 0;
}

static void free_rst_tasks(void)
{
	unsigned int i;

	for (i = 0; i < nr_rst_tasks; i++) {
		if (rst_tasks[i].sync_fd >= 0)
			close(rst_tasks[i].sync_fd);
		if (rst_tasks[i].task_sock >= 0)
			close(rst_tasks[i].task_sock);
		free(rst_tasks[i].tids);
	}
	free(rst_tasks);
	rst_tasks = NULL;
	nr_rst_tasks = 0;
}

/*
 * Written to a temporary name and renamed into place: whoever waits for the pidfile to
 * appear (scripts, test drivers) never reads it empty or half written.
 */
static int write_pidfile(pid_t pid)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (!opts.pidfile)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", opts.pidfile) >= (int)sizeof(tmp)) {
		pr_err("pidfile name too long: %s\n", opts.pidfile);
		return -1;
	}
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d", pid) < 0 || fclose(f) || rename(tmp, opts.pidfile)) {
		pr_perror("cannot write pidfile %s", opts.pidfile);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Every task's images decoded before anything is forked: a bad image fails here. */
static int collect_images(void)
{
	/* Shared fd tables reserve their service fds before files_collect() plans fd numbers. */
	if (read_inventory() || pstree_read() || prepare_shared_tables() ||
	    cg_restore_collect(inventory))
		return -1;
	/* Files first: a task's VMAs may map memfds, which files.img describes. */
	if (ns_restore_collect(inventory->root_ids) || files_collect() || seccomp_collect() ||
	    task_images_collect())
		return -1;
	/* After files_collect(): each lock's fd must name a file of its task. */
	if (file_locks_collect() || sysv_shm_check_tree())
		return -1;
	return check_pids_free() || check_shared_tables_forkers() || prepare_plugins() ? -1 : 0;
}

/* Pages the restored tree got back: each task's, and those of its shared objects. */
static uint64_t count_restored_pages(uint64_t shmem_pages)
{
	struct pstree_item *item;
	uint64_t nr = shmem_pages;

	for (item = root_item; item; item = pstree_next(item))
		nr += item->image->pages.total_bytes / getpagesize();
	return nr;
}

/*
 * stats-restore in the images dir, as CRIU writes it; a failure to write it does not
 * undo a restore that succeeded.
 */
static void write_stats(double t_start, double t_forked, double t_ready, uint64_t shmem_pages)
{
	struct restore_stats_info info = {
		.forking_us = (t_forked - t_start) * 1e6,
		.restore_us = (t_ready - t_forked) * 1e6,
		.pages_restored = count_restored_pages(shmem_pages),
	};

	if (write_restore_stats(&info)) {
		pr_warn("stats-restore was not written\n");
		return;
	}
	if (opts.display_stats)
		display_restore_stats();
}

/* The root of the last restore's tree, as criu sees it (0: none forked). */
static pid_t restored_root;

pid_t cr_restore_root_pid(void)
{
	return restored_root;
}

/*
 * What collect_images() read, freed: on its own failure, or after the tree ran or was
 * killed. failed: a cgroup this restore made goes (it is empty again after the kill).
 */
static void free_collected_images(bool failed)
{
	task_images_free();
	files_collect_fini();
	file_locks_collect_fini();
	seccomp_collect_fini();
	ns_fini();
	cg_restore_fini(failed);
	pb_free(NULL, inventory);
	inventory = NULL;
}

int cr_restore_tasks(void)
{
	double t_start = now_secs(), t_forked = 0, t_ready = 0;
	uint64_t shmem_pages = 0;
	pid_t root_pid = 0; /* as criu sees it, once forked */
	bool lazy_daemon_up = false; /* --lazy-pages: the daemon answered, it waits for our end */
	sigset_t all, old;
	int ret = -1;

	/* Before the images are read: a script may still prepare them. */
	if (run_action_scripts(ACT_PRE_RESTORE, 0))
		return -1;
	if (collect_images()) {
		free_collected_images(true);
		return -1;
	}

	/* Tasks start with every signal blocked; the restorer's sigreturn sets their own mask. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	/* Before any task is forked: each one with lazy pages connects to the daemon. */
	if (opts.lazy_pages && lazy_pages_probe())
		goto out;
	lazy_daemon_up = opts.lazy_pages;
	/* Tasks orphaned by a failure come to criu, which reaps them (rst_kill_created_tasks()). */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		pr_perror("cannot become a subreaper");
		goto out;
	}

	/*
	 * Before forking, so that every task inherits its socket (USERNS_SFD), and before the
	 * tasks' sockets exist, which the service must not hold open; stopped at out:, before
	 * rst_kill_created_tasks() waits for every child of criu.
	 */
	if (userns_owner_service_start())
		goto out;
	/*
	 * Before forking: the tasks inherit the shared memory objects and their sockets. memfds
	 * first: they name the shared anonymous memory held as files.
	 */
	if (prepare_rst_tasks() || memfd_restore_objects(&shmem_pages) ||
	    shmem_restore_objects(&shmem_pages))
		goto out;
	/* The tree's cgroups exist before a task is moved into them (seize_task()). */
	if (cg_restore_prepare())
		goto out;
	/* The root inherits criu's loginuid, unset where a task's is to be set. */
	if (loginuid_restore_prepare())
		goto out;
	/* Last before the fork: the arena is a hole among criu's mappings as the root inherits them. */
	if (mem_cow_plan(forked_by_parent) || rst_reserve_cow_arena())
		goto out;
	if (fork_root_task())
		goto out;
	root_pid = restored_root = rst_tasks[0].pid;
	/*
	 * CRIU's setup-namespaces and post-setup-namespaces, run for every tree as CRIU runs
	 * them: the scripts' turn to fill the net namespace (--empty-ns).
	 */
	if (run_action_scripts(ACT_SETUP_NS, root_pid) ||
	    run_action_scripts(ACT_POST_SETUP_NS, root_pid))
		goto out;
	if (seize_tree_tasks())
		goto out;
	t_forked = now_secs();
	/*
	 * Every task exists and waits for GROUPS before it opens its fds (prepare_fds()): the
	 * files that name tasks (pidfds) can be made now, and only now.
	 */
	if (files_tree_forked() || release_groups())
		goto out;
	/* Before waiting: plugins start work here that overlaps the tasks' own restore. */
	if (run_plugins(POST_FORKING))
		goto out;

	if (rst_wait_tree_ready() || ns_restore_late(rst_tasks[0].pid) || mntns_bind_ptys())
		goto out;
	/* Once every mapping is made: a seal may refuse to let one be made (memfd.h). */
	if (memfd_apply_seals())
		goto out;
	/* Once every thread exists: one may be a file's owner (files.h). */
	if (restore_file_owners())
		goto out;
	/* Every fd is open: what openings made for criu goes on (CRIU's orphan-pts-master). */
	if (files_tree_ready())
		goto out;
	/*
	 * Once every connection's peer is back, before the tasks run: the tree's net namespace
	 * unlocked, then its connections out of repair mode (their window probes get through).
	 */
	if (tcp_restore_fins() || netlock_restore_unlock(root_pid))
		goto out;
	if (ns_root_own(NS_NET) && run_action_scripts(ACT_NET_UNLOCK, root_pid))
		goto out;
	if (tcp_restore_unlock())
		goto out;
	t_ready = now_secs();
	if (run_action_scripts(ACT_POST_RESTORE, root_pid))
		goto out;

	/* The tasks are parked in the restorer and run none of their own code before this. */
	if (rst_resume_tree_devices() || run_action_scripts(ACT_PRE_RESUME, root_pid))
		goto out;
	if (rst_release_tree())
		goto out;
	if (write_pidfile(root_pid))
		goto out;
	ret = 0;
	reg_remove_links();
	/* The tree runs: a failure from here on is reported, but undoes nothing. */
	if (run_action_scripts(ACT_POST_RESUME, root_pid))
		ret = 1;
	else
		report_status_ready();

	write_stats(t_start, t_forked, t_ready, shmem_pages);
	if (opts.display_stats)
		printf("Restore stats: fork %.3f s, restore %.3f s, total %.3f s\n", t_forked - t_start,
		       t_ready - t_forked, now_secs() - t_start);
	pr_info("Restore finished successfully. Tasks resumed.\n");
out:
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* Every task is done with it (or dead); rst_kill_created_tasks() must not wait for it. */
	userns_owner_service_stop();
	if (ret < 0)
		rst_kill_created_tasks();
	/* Every task sent its uffd before its report, or is dead: the daemon may finish. */
	if (lazy_daemon_up)
		lazy_pages_done(ret >= 0);
	/* Orphans of the restored tree from now on are none of criu's business. */
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	free_rst_tasks();
	shmem_fini();
	mem_cow_fini();
	/* The tree was forked from criu's copies before this: each task has its own. */
	free_collected_images(ret < 0);
	/* After the kill: a plugin's exit may wait for work the tasks were feeding. */
	cr_plugin_fini(CR_PLUGIN_STAGE__RESTORE, ret < 0 ? ret : 0);
	if (ret)
		return -1;
	if (!opts.restore_detach && !opts.restore_sibling)
		return rst_wait_root_task(root_pid);
	return 0;
}
