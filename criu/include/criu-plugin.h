/*
 * The public plugin API, installed for plugin authors: hook numbers and signatures (as
 * CRIU numbers and types them), registration macros, and the few criu functions a plugin
 * may call. Documentation/plugins.md walks through it with an example.
 */
#ifndef __CRIU_PLUGIN_H__
#define __CRIU_PLUGIN_H__

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#define CRIU_PLUGIN_GEN_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define CRIU_PLUGIN_VERSION_MAJOR 0
#define CRIU_PLUGIN_VERSION_MINOR 2
#define CRIU_PLUGIN_VERSION_SUBLEVEL 0

#define CRIU_PLUGIN_VERSION_OLD CRIU_PLUGIN_GEN_VERSION(0, 1, 0)

#define CRIU_PLUGIN_VERSION \
	CRIU_PLUGIN_GEN_VERSION(CRIU_PLUGIN_VERSION_MAJOR, CRIU_PLUGIN_VERSION_MINOR, CRIU_PLUGIN_VERSION_SUBLEVEL)

/*
 * Hooks. The numbers are ABI: plugins built for CRIU index their hook table with them.
 *
 * Two kinds of hook:
 *  - per-object hooks (everything not listed below) are offered to each plugin that
 *    implements them, in load order (file names sorted), until one returns something
 *    other than -ENOTSUP. -ENOTSUP means "not mine"; if every plugin says so, criu handles
 *    (or refuses) the object itself. Any other negative value is an error that fails the
 *    dump or restore; criu logs it with the plugin's name.
 *  - global hooks (POST_FORKING, RESTORE_INIT, DUMP_DEVICES_LATE) go to every plugin that
 *    implements them. 0 and -ENOTSUP both mean "fine"; the first other negative value
 *    stops the walk and fails the operation.
 *
 * Processes: "criu" is the criu process the user started (dump: the only one; restore: the
 * parent of the restored tree). "the task" is a restored process before it runs its own
 * code again: it has its original pid, criu's code and the plugin still mapped, and it
 * restores its own fds; plugins' globals there are a fork-time copy of criu's.
 */
enum {
	/*
	 * DUMP_UNIX_SK(fd, id), criu, dump: a Unix socket whose peer is outside the dumped
	 * tree, once every task's fds are dumped. fd is criu's copy of the socket; id is its
	 * inode (unix_sk_entry.ino, as CRIU passes it). Return 0 after saving what
	 * RESTORE_UNIX_SK needs (in your own image, keyed by id); its queue must be empty.
	 */
	CR_PLUGIN_HOOK__DUMP_UNIX_SK = 0,
	/*
	 * RESTORE_UNIX_SK(id), the task, restore: re-create the socket dumped with inode id.
	 * Return the new fd (>= 0); criu installs it at the task's fd number and sets its
	 * options, shutdown and file flags as dumped.
	 */
	CR_PLUGIN_HOOK__RESTORE_UNIX_SK = 1,

	/*
	 * DUMP_EXT_FILE(fd, id), criu, dump, after PAUSE/CHECKPOINT_DEVICES: an fd the core
	 * cannot dump (an unknown character device, ...). fd is criu's copy of the task's file
	 * (same open file description); id names it in the images. Return 0 once the plugin
	 * has saved what RESTORE_EXT_FILE needs.
	 */
	CR_PLUGIN_HOOK__DUMP_EXT_FILE = 2,
	/*
	 * RESTORE_EXT_FILE(id, &retry_needed), the task, restore, while it opens its fds:
	 * re-create the file dumped as id and return its fd (>= 0); criu moves it to the
	 * task's fd number and sets its fd flags. CRIU lets a plugin set *retry_needed to
	 * be called again after the task's other fds; this criu opens fds in one pass and
	 * fails the restore, naming the file, when a plugin asks. Plugins written for older
	 * CRIU that take only (id) work unchanged.
	 */
	CR_PLUGIN_HOOK__RESTORE_EXT_FILE = 3,

	/* DUMP_EXT_MOUNT(mountpoint, id), criu, dump: an external mount. Return 0 if saved. */
	CR_PLUGIN_HOOK__DUMP_EXT_MOUNT = 4,
	/*
	 * RESTORE_EXT_MOUNT(id, mountpoint, old_root, &is_file), restore: mount id at
	 * mountpoint; set *is_file when it is a file bind mount. Return 0 when mounted.
	 */
	CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT = 5,

	/* DUMP_EXT_LINK(index, type, kind), criu, dump: a network link criu does not know. */
	CR_PLUGIN_HOOK__DUMP_EXT_LINK = 6,

	/*
	 * HANDLE_DEVICE_VMA(fd, &st), criu, dump: a shared mapping whose backing is not a
	 * regular on-disk file. fd is criu's open copy of the mapped object, st its fstat().
	 * Return 0 to take it: its pages are then not dumped, and at restore UPDATE_VMA_MAP
	 * is asked for the fd to map.
	 */
	CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA = 7,

	/*
	 * UPDATE_VMA_MAP(path, addr, old_pgoff, &new_pgoff, &plugin_fd), the task, restore,
	 * before its memory is rebuilt: a VMA taken by HANDLE_DEVICE_VMA at dump. path is what
	 * /proc/PID/map_files named the object then, addr the VMA's start. Both offsets are in
	 * bytes, as mmap() takes them (as CRIU passes them, whatever the names say). Return 1
	 * after setting *plugin_fd (an fd to map MAP_SHARED; criu closes it once mapped) and
	 * *new_pgoff (page aligned); 0 to have criu open path and map it at old_pgoff. If
	 * every plugin returns -ENOTSUP, the restore fails naming the VMA.
	 */
	CR_PLUGIN_HOOK__UPDATE_VMA_MAP = 8,

	/*
	 * RESUME_DEVICES_LATE(pid), criu, restore: once per task, after the task's memory is
	 * restored and before any restored task runs its own code. The last moment a plugin
	 * may touch the task (e.g. through /proc/pid/mem) while it is guaranteed not to run;
	 * background device work started earlier must be finished and its errors returned
	 * here. Return 0, or -ENOTSUP if pid is not yours.
	 */
	CR_PLUGIN_HOOK__RESUME_DEVICES_LATE = 9,

	/*
	 * PAUSE_DEVICES(pid), criu, dump: right after the tree is seized, once per task.
	 * Quiesce the device state the task owns. Return 0, or -ENOTSUP if pid is not yours.
	 * If the dump fails later, the plugin's exit(DUMP, ret != 0) must resume the device.
	 */
	CR_PLUGIN_HOOK__PAUSE_DEVICES = 10,

	/*
	 * CHECKPOINT_DEVICES(pid), criu, dump: after PAUSE_DEVICES for every task, before the
	 * task's fds and memory are dumped. Save the device state of pid.
	 */
	CR_PLUGIN_HOOK__CHECKPOINT_DEVICES = 11,

	/*
	 * POST_FORKING(void), criu, restore, global: right after the restored tree is forked
	 * and before criu waits for the tasks: the tasks are restoring concurrently. Start
	 * background work here (e.g. a thread serving requests from RESTORE_EXT_FILE through
	 * a socket parked in fdstore at init); RESUME_DEVICES_LATE is the join point.
	 */
	CR_PLUGIN_HOOK__POST_FORKING = 12,

	/*
	 * RESTORE_INIT(void), criu, restore, global: at the end of plugin initialisation,
	 * after every plugin's init(RESTORE) succeeded and before anything is forked.
	 */
	CR_PLUGIN_HOOK__RESTORE_INIT = 13,

	/*
	 * DUMP_DEVICES_LATE(id), criu, dump, global: after every task has been dumped and
	 * before the tree is resumed or killed. id is the root task's pid.
	 */
	CR_PLUGIN_HOOK__DUMP_DEVICES_LATE = 14,

	CR_PLUGIN_HOOK__MAX
};

#define DECLARE_PLUGIN_HOOK_ARGS(__hook, ...) typedef int(__hook##_t)(__VA_ARGS__)

DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__DUMP_UNIX_SK, int fd, int id);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__RESTORE_UNIX_SK, int id);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__DUMP_EXT_FILE, int fd, int id);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, int id, bool *retry_needed);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__DUMP_EXT_MOUNT, char *mountpoint, int id);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT, int id, char *mountpoint, char *old_root,
			 int *is_file);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__DUMP_EXT_LINK, int index, int type, char *kind);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, int fd, const struct stat *stat);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, const char *path, const uint64_t addr,
			 const uint64_t old_pgoff, uint64_t *new_pgoff, int *plugin_fd);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, int pid);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__PAUSE_DEVICES, int pid);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, int pid);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__POST_FORKING, void);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__RESTORE_INIT, void);
DECLARE_PLUGIN_HOOK_ARGS(CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, int id);

/*
 * Stages, passed to init() and exit(). init(stage) runs in criu after option parsing
 * (restore: after fdstore exists, so init may fdstore_add()); a non-zero return aborts
 * the command with an error naming the plugin (its exit() is then not called).
 * exit(stage, ret) runs in criu at the end, ret != 0 if the command failed: undo what
 * the plugin changed (resume paused devices, stop threads).
 */
enum {
	CR_PLUGIN_STAGE__DUMP,
	CR_PLUGIN_STAGE__PRE_DUMP,
	CR_PLUGIN_STAGE__RESTORE,

	CR_PLUGIN_STAGE_MAX
};

/*
 * What criu looks up (dlsym "CR_PLUGIN_DESC") in each plugin. name must be unique among
 * loaded plugins: the inventory records it, and restore requires a plugin of that name.
 * Plugins whose major version differs from criu's are refused.
 */
typedef struct {
	const char *name;
	int (*init)(int stage);
	void (*exit)(int stage, int ret);
	unsigned int version;
	unsigned int max_hooks;
	void *hooks[CR_PLUGIN_HOOK__MAX];
} cr_plugin_desc_t;

extern cr_plugin_desc_t CR_PLUGIN_DESC;

#define CR_PLUGIN_REGISTER(___name, ___init, ___exit) \
	cr_plugin_desc_t CR_PLUGIN_DESC = {           \
		.name = ___name,                      \
		.init = ___init,                      \
		.exit = ___exit,                      \
		.version = CRIU_PLUGIN_VERSION,       \
		.max_hooks = CR_PLUGIN_HOOK__MAX,     \
	};

static inline int cr_plugin_dummy_init(int stage __attribute__((unused)))
{
	return 0;
}

static inline void cr_plugin_dummy_exit(int stage __attribute__((unused)), int ret __attribute__((unused)))
{
}

#define CR_PLUGIN_REGISTER_DUMMY(___name) CR_PLUGIN_REGISTER(___name, cr_plugin_dummy_init, cr_plugin_dummy_exit)

/* Fills the hook's slot when the plugin is loaded (dlopen runs constructors). */
#define CR_PLUGIN_REGISTER_HOOK(__hook, __func)                                         \
	static void __attribute__((constructor)) cr_plugin_register_hook_##__func(void) \
	{                                                                               \
		CR_PLUGIN_DESC.hooks[__hook] = (void *)__func;                          \
	}

/* Hook function types under CRIU's older names, for plugins that use them. */
typedef int(cr_plugin_init_t)(void);
typedef void(cr_plugin_fini_t)(void);
typedef int(cr_plugin_dump_unix_sk_t)(int fd, int id);
typedef int(cr_plugin_restore_unix_sk_t)(int id);
typedef int(cr_plugin_dump_file_t)(int fd, int id);
typedef int(cr_plugin_restore_file_t)(int id);
typedef int(cr_plugin_dump_ext_mount_t)(char *mountpoint, int id);
typedef int(cr_plugin_restore_ext_mount_t)(int id, char *mountpoint, char *old_root, int *is_file);
typedef int(cr_plugin_dump_ext_link_t)(int index, int type, char *kind);
typedef int(cr_plugin_handle_device_vma_t)(int fd, const struct stat *stat);
typedef int(cr_plugin_update_vma_map_t)(const char *path, const uint64_t addr, const uint64_t old_pgoff,
					uint64_t *new_pgoff, int *plugin_fd);
typedef int(cr_plugin_resume_devices_late_t)(int pid);
typedef int(cr_plugin_post_forking_t)(void);

/*
 * ---- What a plugin may call in criu (resolved from the criu binary at load time) ----
 * Nothing else of criu's internals is part of the API.
 */

/*
 * The images directory as an O_PATH fd, valid in criu and in the tasks. Keep your own
 * images there: openat(criu_get_image_dir(), "myplugin-1.img", ...).
 */
extern int criu_get_image_dir(void);

/*
 * fdstore: fds held by criu's main process and reachable from every restored task by id.
 * It exists before init(RESTORE), so a plugin may park a socket in init and reach it in
 * RESTORE_EXT_FILE (in the task) with fdstore_get().
 * fdstore_add: the store keeps its own reference (you may close fd); returns the id
 * (>= 0) or -errno. fdstore_get: returns a new fd the caller owns, or -errno.
 * Restore only: during dump these return -ENXIO.
 */
extern int fdstore_add(int fd);
extern int fdstore_get(int id);

/*
 * Send/receive fds over a connected (or, with saddr, unconnected) Unix socket.
 * send_fds sends nr_fds fds in batches of at most CR_SCM_MAX_FD, one message per batch;
 * data, if not NULL, holds ch_size bytes per fd and each message carries its batch's
 * share. recv_fds expects the same batching. Both return 0 or -errno; partial stream
 * transfers are completed, and a message with fewer fds than expected is an error
 * (-EBADMSG). Larger protocols should frame and version their own messages.
 */
#define CR_SCM_MAX_FD 252
struct sockaddr_un;
extern int send_fds(int sock, struct sockaddr_un *saddr, int saddr_len, int *fds, int nr_fds, void *data,
		    unsigned int ch_size);
extern int recv_fds(int sock, int *fds, int nr_fds, void *data, unsigned int ch_size);

static inline int send_fd(int sock, struct sockaddr_un *saddr, int saddr_len, int fd)
{
	return send_fds(sock, saddr, saddr_len, &fd, 1, (void *)0, 0);
}

/* Returns the received fd, or -errno. */
static inline int recv_fd(int sock)
{
	int fd = -1, ret;

	ret = recv_fds(sock, &fd, 1, (void *)0, 0);
	return ret ? ret : fd;
}

/*
 * The process tree: root_item is the tree's root task (restore: set once the tree is
 * read, before init(RESTORE)); has_children() tells whether a task has children, e.g.
 * to pick a path that only works for a single process. The item itself is opaque.
 */
struct pstree_item;
extern struct pstree_item *root_item;
extern bool has_children(struct pstree_item *item);

/*
 * Logging into criu's log at CRIU's levels (-v0 .. -v4). Errors also go to stderr.
 * Define LOG_PREFIX ("myplugin: ") before including this header to tag your lines.
 * criu's own sources get the same levels and macros from its log.h, which must then be
 * included first.
 */
extern void print_on_level(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifndef CR_LOG_H
#define LOG_MSG 0 /* printed whatever the level */
#define LOG_ERROR 1
#define LOG_WARN 2
#define LOG_INFO 3
#define LOG_DEBUG 4

#ifndef LOG_PREFIX
#define LOG_PREFIX ""
#endif

#define pr_msg(fmt, ...) print_on_level(LOG_MSG, fmt, ##__VA_ARGS__)
#define pr_err(fmt, ...) \
	print_on_level(LOG_ERROR, "Error (%s:%d): " LOG_PREFIX fmt, __FILE__, __LINE__, ##__VA_ARGS__)
#define pr_warn(fmt, ...) print_on_level(LOG_WARN, "Warn: " LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) print_on_level(LOG_INFO, LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) print_on_level(LOG_DEBUG, LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_perror(fmt, ...) pr_err(fmt ": %s\n", ##__VA_ARGS__, strerror(errno))
#endif /* CR_LOG_H */

#endif /* __CRIU_PLUGIN_H__ */
