/*
 * criu's side of the plugin framework: loading plugins, running their hooks, and
 * recording in the inventory which plugins a dump needs. The plugin-facing API is in
 * criu-plugin.h.
 */
#ifndef CR_PLUGIN_H
#define CR_PLUGIN_H

#include <stdbool.h>

#include "log.h" /* before criu-plugin.h: it defines the log levels for criu */
#include "criu-plugin.h"
#include "inventory.pb-c.h"

#ifndef CR_PLUGIN_DEFAULT_DIR
#error "CR_PLUGIN_DEFAULT_DIR (the installed plugin directory) comes from the Makefile"
#endif

/*
 * Where the pipelines call in (Documentation/design.md §3, §4, §9):
 *
 * dump (all in criu):
 *   cr_plugin_init(CR_PLUGIN_STAGE__DUMP)        after option parsing; failure: exit != 0
 *   run_plugins(PAUSE_DEVICES, pid)              per task, right after seizing the tree
 *   run_plugins(CHECKPOINT_DEVICES, pid)         per task, after all PAUSE_DEVICES
 *   run_plugins(DUMP_EXT_FILE, fd, id)           for an fd no fdtype_ops owns; -ENOTSUP:
 *                                                nobody took it, refuse the fd
 *   run_plugins(HANDLE_DEVICE_VMA, fd, &st)      shared VMA not backed by a regular file;
 *                                                0: mark it VMA_EXT_PLUGIN, dump no pages
 *   run_plugins(DUMP_DEVICES_LATE, root_pid)     after the last task is dumped
 *   cr_plugins_to_inventory(&plugins_entry)      before writing inventory.img
 *   cr_plugin_fini(CR_PLUGIN_STAGE__DUMP, ret)   at the end, ret != 0 on failure (plugins
 *                                                resume their devices), before the tree
 *                                                is resumed or killed
 * restore:
 *   criu: read inventory + pstree (root_item is set)
 *   criu: fdstore_init()                         before plugins: init may park fds
 *   criu: cr_plugin_init(CR_PLUGIN_STAGE__RESTORE)   also runs RESTORE_INIT at its end
 *   criu: cr_plugins_check_inventory(plugins)    refuse if a needed plugin is missing
 *   criu: fork the tree
 *   criu: run_plugins(POST_FORKING)              right after forking, before waiting
 *   task: run_plugins(RESTORE_EXT_FILE, id, &retry)   fd the core cannot open; >= 0 is
 *                                                the fd; retry set: refused (files-ext.c
 *                                                opens fds in one pass)
 *   task: run_plugins(UPDATE_VMA_MAP, path, addr, old_pgoff, &new_pgoff, &plugin_fd)
 *                                                for each VMA_EXT_PLUGIN VMA; 1: map plugin_fd
 *   criu: run_plugins(RESUME_DEVICES_LATE, pid)  per task once it is parked, before any
 *                                                task is released
 *   criu: cr_plugin_fini(CR_PLUGIN_STAGE__RESTORE, ret)  at the end, also on failure
 *                                                (after killing the tasks)
 *
 * run_plugins() logs a failing hook with the plugin's name; callers only propagate.
 * Per-object hooks return -ENOTSUP when no plugin took the object; global hooks
 * (POST_FORKING, RESTORE_INIT, DUMP_DEVICES_LATE) return 0 unless a plugin failed.
 * Restored tasks inherit the loaded plugins by fork and must never call
 * cr_plugin_fini() (exit() belongs to criu's process).
 */

/*
 * Load every *.so from opts.libdir (-L), else $CRIU_LIBS_DIR, else CR_PLUGIN_DEFAULT_DIR,
 * in file-name order, and run their init(stage); for RESTORE then RESTORE_INIT.
 * 0 or -errno. On failure the error names the plugin, plugins already initialised get
 * exit(stage, error), and nothing stays loaded.
 */
int cr_plugin_init(int stage);

/* exit(stage, ret) of every loaded plugin, in reverse load order, then unload them. */
void cr_plugin_fini(int stage, int ret);

/*
 * Inventory: record the names of the plugins that took an object during this dump (a
 * per-object dump hook returned >= 0), and at restore refuse (-ENOENT, logged) when one
 * of the recorded plugins is not loaded. The names stay owned by the framework, valid
 * until cr_plugin_fini().
 */
int cr_plugins_to_inventory(PluginsEntry *plugins);
int cr_plugins_check_inventory(const PluginsEntry *plugins);

/* Whether a loaded plugin implements hook (CR_PLUGIN_HOOK__...). */
bool cr_plugin_has_hook(int hook);

/* ---- run_plugins() machinery; call run_plugins(), not these ---- */
struct cr_plugin;

/* The next loaded plugin after prev (NULL: the first) that implements hook, or NULL. */
struct cr_plugin *cr_plugin_next(int hook, struct cr_plugin *prev);
void *cr_plugin_hook_fn(const struct cr_plugin *plugin, int hook);
/*
 * Account one hook call's result into *result (logging a failure with the plugin's
 * name); false when the walk must stop.
 */
bool cr_plugin_hook_done(struct cr_plugin *plugin, int hook, int ret, int *result);
int cr_plugin_hook_initial_result(int hook);

/* run_plugins(POST_FORKING), run_plugins(DUMP_EXT_FILE, fd, id), ... -> int */
#define run_plugins(__hook, ...)                                                                         \
	({                                                                                               \
		struct cr_plugin *__plugin = NULL;                                                       \
		int __result = cr_plugin_hook_initial_result(CR_PLUGIN_HOOK__##__hook);                  \
                                                                                                         \
		while ((__plugin = cr_plugin_next(CR_PLUGIN_HOOK__##__hook, __plugin))) {                \
			CR_PLUGIN_HOOK__##__hook##_t *__fn =                                             \
				(CR_PLUGIN_HOOK__##__hook##_t *)cr_plugin_hook_fn(__plugin,              \
										  CR_PLUGIN_HOOK__##__hook); \
			if (!cr_plugin_hook_done(__plugin, CR_PLUGIN_HOOK__##__hook, __fn(__VA_ARGS__),  \
						 &__result))                                             \
				break;                                                                   \
		}                                                                                        \
		__result;                                                                                \
	})

#endif
