/*
 * The dump pipeline: seize the process tree, collect each task's state,
 * memory and files, write the images (inventory.img last), then kill the tree or let it
 * run. Any failure on the way leaves every task running as it was. Seizing and releasing
 * the tree are in dump-seize.c, a task's state in dump-task.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cgroup.h"
#include "cpuinfo.h"
#include "compel.h"
#include "cr_options.h"
#include "crtools.h"
#include "daemon.h"
#include "dump-mem.h"
#include "dump-task.h"
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
#include "stats.h"
#include "netlock-nft.h"
#include "sk-inet.h"
#include "core.pb-c.h"
#include "inventory.pb-c.h"

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
	ret = dump_find_syscall_ip(task, &ip);
	if (!ret)
		ret = compel_infect(task->item->pid, ip, &ctl);
	if (ret)
		return ret;
	ret = mem_track_disarm(ctl, task->item->pid);
	cure_ret = compel_cure(ctl);
	return ret ? ret : cure_ret;
}

/*
 * A live process: its state and VMAs, files, then its parasite for its sigactions, its
 * ids and core images, then its memory, whose pages may still be dumped while the next
 * task is (dump-mem.h). The VMAs before the files: CRIU runs HANDLE_DEVICE_VMA before
 * DUMP_EXT_FILE, and plugins rely on it. The files before the parasite: its fds must not
 * be seen in the fd table.
 */
static int dump_one_task(struct dump_task *task, struct dump_mem_pool *mem)
{
	struct compel_ctl *parasite = NULL;
	int ret = dump_collect_task_state(task);

	if (!ret)
		ret = mem_dump_task_collect(task->item->pid, task->vmas, task->nr_vmas, &task->mem);
	if (!ret)
		ret = dump_files(task);
	if (!ret) {
		parasite = dump_start_parasite(task);
		ret = dump_collect_sigactions(task, parasite);
	}
	if (!ret)
		ret = pstree_write_ids(task->item);
	if (!ret)
		ret = write_task_cores(task);
	if (!ret)
		return dump_mem_task(mem, task, parasite);
	if (parasite)
		compel_cure(parasite); /* logs its own failure; the dump fails anyway */
	mem_dump_task_end(task->mem, NULL);
	task->mem = NULL;
	return ret;
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
	struct dump_mem_pool *mem = NULL;
	unsigned int i;
	int ret = 0, mem_ret;

	/* Before any task's files: fdinfo images are named by files_id. */
	ret = pstree_assign_ids();
	if (!ret)
		ret = dump_mem_pool_init(&mem, &stats->mem, &stats->memdump_us);
	for (i = 0; i < nr_dump_tasks && !ret; i++) {
		struct dump_task *task = dump_tasks[i];

		ret = task->item->zombie ? dump_zombie(task) : dump_one_task(task, mem);
	}
	/* Every parasite stopped, even after a failure: the tree is resumed next. */
	mem_ret = dump_mem_pool_finish(mem);
	return ret ?: mem_ret;
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

static void free_tree(void)
{
	unsigned int i;

	for (i = 0; i < nr_dump_tasks; i++)
		dump_task_free(dump_tasks[i]);
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

/*
 * A pre-dump of one task: tracker armed, then its private anonymous pages, through its
 * parasite. Not with process_vm_readv(): its read-only pin gives the task its own copy of
 * every page it still shares copy-on-write (the kernel unshares pinned anonymous pages),
 * and the tree, which runs on, would keep those copies.
 */
static int pre_dump_one_task(struct dump_task *task, struct dump_stats *stats)
{
	pid_t pid = task->item->pid;
	struct compel_ctl *ctl;
	bool parasite = false;
	unsigned long ip;
	int ret, cure_ret;

	pr_info("pre-dumping the memory of task %d\n", pid);
	ret = parse_pid_smaps(pid, &task->vmas, &task->nr_vmas);
	if (!ret)
		ret = dump_find_syscall_ip(task, &ip);
	if (!ret)
		ret = compel_infect(pid, ip, &ctl);
	if (ret)
		return ret;
	ret = mem_track_arm(ctl, pid, task->vmas, task->nr_vmas);
	if (!ret) {
		parasite = !compel_parasite_start(ctl);
		if (!parasite)
			pr_warn("task %d: no parasite, its pages are read from outside\n", pid);
		ret = predump_task_mm(pid, task->vmas, task->nr_vmas, &stats->mem,
				      parasite ? ctl : NULL);
	}
	cure_ret = compel_cure(ctl);
	return ret ? ret : cure_ret;
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
	ret = dump_seize_tree(pid);
	stats.freezing_us = usec_since(&stats.freeze_start);
	/* The pids the images use come with the namespaces (not what a restore needs of them). */
	if (!ret)
		ret = ns_pre_dump_collect();
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
	dump_release_tree(false);
	if (cg_freezer_restore() && !ret)
		ret = -1;
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
	/* --cpu-cap (any but none): the CPU restore compares its own with, as CRIU writes it. */
	if (!ret && (opts.cpu_cap & CPU_CAP_IMAGE))
		ret = cpuinfo_dump();
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
		ret = dump_seize_tree(pid);
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
	dump_release_tree(ret == 0);
	if (cg_freezer_restore() && !ret)
		ret = -1;
	if (!ret)
		ret = write_stats(&stats);
	mem_dump_fini(&stats.mem);
	free_tree();
	return ret ? -1 : 0;
}
