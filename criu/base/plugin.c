/*
 * The plugin framework: find and dlopen the plugins, init/exit them per stage, walk
 * their hooks for run_plugins(), and keep track of which plugins a dump depends on.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "plugin.h"

/* One loaded plugin. */
struct cr_plugin {
	cr_plugin_desc_t *desc;
	void *dlhandle;
	char *path;
	/* Hook slots both sides know: a plugin built for another CRIU may have more or fewer. */
	unsigned int nr_hooks;
	bool initialised;
	/* A per-object dump hook of this plugin took an object: restore needs the plugin. */
	bool took_part;
};

static struct cr_plugin *plugins;
static int nr_plugins;
static char *plugins_dir; /* where they were looked for, for error messages */
static char **inventory_names; /* cr_plugins_to_inventory() */

static const char *const hook_names[CR_PLUGIN_HOOK__MAX] = {
	[CR_PLUGIN_HOOK__DUMP_UNIX_SK] = "DUMP_UNIX_SK",
	[CR_PLUGIN_HOOK__RESTORE_UNIX_SK] = "RESTORE_UNIX_SK",
	[CR_PLUGIN_HOOK__DUMP_EXT_FILE] = "DUMP_EXT_FILE",
	[CR_PLUGIN_HOOK__RESTORE_EXT_FILE] = "RESTORE_EXT_FILE",
	[CR_PLUGIN_HOOK__DUMP_EXT_MOUNT] = "DUMP_EXT_MOUNT",
	[CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT] = "RESTORE_EXT_MOUNT",
	[CR_PLUGIN_HOOK__DUMP_EXT_LINK] = "DUMP_EXT_LINK",
	[CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA] = "HANDLE_DEVICE_VMA",
	[CR_PLUGIN_HOOK__UPDATE_VMA_MAP] = "UPDATE_VMA_MAP",
	[CR_PLUGIN_HOOK__RESUME_DEVICES_LATE] = "RESUME_DEVICES_LATE",
	[CR_PLUGIN_HOOK__PAUSE_DEVICES] = "PAUSE_DEVICES",
	[CR_PLUGIN_HOOK__CHECKPOINT_DEVICES] = "CHECKPOINT_DEVICES",
	[CR_PLUGIN_HOOK__POST_FORKING] = "POST_FORKING",
	[CR_PLUGIN_HOOK__RESTORE_INIT] = "RESTORE_INIT",
	[CR_PLUGIN_HOOK__DUMP_DEVICES_LATE] = "DUMP_DEVICES_LATE",
};

static const char *const stage_names[CR_PLUGIN_STAGE_MAX] = {
	[CR_PLUGIN_STAGE__DUMP] = "dump",
	[CR_PLUGIN_STAGE__PRE_DUMP] = "pre-dump",
	[CR_PLUGIN_STAGE__RESTORE] = "restore",
};

/* Notifications every plugin gets, as opposed to objects exactly one plugin takes. */
static bool hook_is_global(int hook)
{
	return hook == CR_PLUGIN_HOOK__POST_FORKING || hook == CR_PLUGIN_HOOK__RESTORE_INIT ||
	       hook == CR_PLUGIN_HOOK__DUMP_DEVICES_LATE;
}

/* Hooks whose taker leaves entries in the images that only it can restore. */
static bool hook_dumps_object(int hook)
{
	return hook == CR_PLUGIN_HOOK__DUMP_UNIX_SK || hook == CR_PLUGIN_HOOK__DUMP_EXT_FILE ||
	       hook == CR_PLUGIN_HOOK__DUMP_EXT_MOUNT || hook == CR_PLUGIN_HOOK__DUMP_EXT_LINK ||
	       hook == CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA;
}

int criu_get_image_dir(void)
{
	return images_dir_fd;
}

/* ---- hooks ---- */

struct cr_plugin *cr_plugin_next(int hook, struct cr_plugin *prev)
{
	int i = prev ? prev - plugins + 1 : 0;

	for (; i < nr_plugins; i++) {
		if ((unsigned int)hook < plugins[i].nr_hooks && plugins[i].desc->hooks[hook])
			return &plugins[i];
	}
	return NULL;
}

bool cr_plugin_has_hook(int hook)
{
	return cr_plugin_next(hook, NULL) != NULL;
}

void *cr_plugin_hook_fn(const struct cr_plugin *plugin, int hook)
{
	return plugin->desc->hooks[hook];
}

int cr_plugin_hook_initial_result(int hook)
{
	return hook_is_global(hook) ? 0 : -ENOTSUP;
}

bool cr_plugin_hook_done(struct cr_plugin *plugin, int hook, int ret, int *result)
{
	pr_debug("plugin %s: %s -> %d\n", plugin->desc->name, hook_names[hook], ret);

	if (ret == -ENOTSUP)
		return true;
	if (ret < 0) {
		pr_err("plugin %s: %s failed: %d (%s)\n", plugin->desc->name, hook_names[hook], ret,
		       strerror(-ret));
		*result = ret;
		return false;
	}
	if (hook_is_global(hook))
		return true;
	if (hook_dumps_object(hook))
		plugin->took_part = true;
	*result = ret;
	return false;
}

/* ---- loading ---- */

/* -L, else $CRIU_LIBS_DIR, else the installed directory; only the last may be missing. */
static const char *choose_plugins_dir(bool *must_exist)
{
	const char *env = getenv("CRIU_LIBS_DIR");

	*must_exist = true;
	if (opts.libdir)
		return opts.libdir;
	if (env && env[0])
		return env;
	*must_exist = false;
	return CR_PLUGIN_DEFAULT_DIR;
}

static int is_plugin_file(const struct dirent *de)
{
	size_t len = strlen(de->d_name);

	return de->d_type != DT_DIR && len > 3 && !strcmp(de->d_name + len - 3, ".so");
}

static struct cr_plugin *find_plugin(const char *name)
{
	int i;

	for (i = 0; i < nr_plugins; i++) {
		if (!strcmp(plugins[i].desc->name, name))
			return &plugins[i];
	}
	return NULL;
}

/* A plugin built against a newer CRIU may implement hooks we never call: say so. */
static void warn_unknown_hooks(const struct cr_plugin *plugin)
{
	/* Bounded: old or broken descriptors may carry any number here. */
	unsigned int max = plugin->desc->max_hooks < 64 ? plugin->desc->max_hooks : 64;
	/* Its table is max_hooks long, longer than our type says: index it as it was built. */
	void *const *slots = (void *const *)((const char *)plugin->desc + offsetof(cr_plugin_desc_t, hooks));
	unsigned int hook;

	for (hook = CR_PLUGIN_HOOK__MAX; hook < max; hook++) {
		if (slots[hook])
			pr_warn("plugin %s implements hook %u, which this criu never calls\n",
				plugin->desc->name, hook);
	}
}

static int check_plugin_desc(const char *path, const cr_plugin_desc_t *desc)
{
	if (!desc->name || !desc->name[0]) {
		pr_err("plugin %s: CR_PLUGIN_DESC has no name\n", path);
		return -EINVAL;
	}
	if ((desc->version >> 16) != CRIU_PLUGIN_VERSION_MAJOR) {
		pr_err("plugin %s (%s): plugin API version %#x, this criu speaks %#x\n", desc->name, path,
		       desc->version, CRIU_PLUGIN_VERSION);
		return -EINVAL;
	}
	if (find_plugin(desc->name)) {
		pr_err("plugin %s: name %s is already taken by %s\n", path, desc->name,
		       find_plugin(desc->name)->path);
		return -EEXIST;
	}
	return 0;
}

static int load_plugin(const char *dir, const char *file)
{
	struct cr_plugin *grown, *plugin;
	cr_plugin_desc_t *desc;
	void *handle;
	char *path;
	int ret;

	if (asprintf(&path, "%s/%s", dir, file) < 0) {
		pr_err("plugin %s/%s: out of memory\n", dir, file);
		return -ENOMEM;
	}
	/* RTLD_NOW: an unresolved symbol is reported here, naming the plugin, not mid-restore. */
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		pr_err("plugin %s: cannot load it: %s\n", path, dlerror());
		ret = -ENOEXEC;
		goto err_free;
	}
	desc = dlsym(handle, "CR_PLUGIN_DESC");
	if (!desc) {
		pr_err("plugin %s: no CR_PLUGIN_DESC, not a CRIU plugin (register it with CR_PLUGIN_REGISTER)\n",
		       path);
		ret = -ENOEXEC;
		goto err_close;
	}
	ret = check_plugin_desc(path, desc);
	if (ret)
		goto err_close;

	grown = realloc(plugins, (nr_plugins + 1) * sizeof(*plugins));
	if (!grown) {
		pr_err("plugin %s: out of memory\n", path);
		ret = -ENOMEM;
		goto err_close;
	}
	plugins = grown;
	plugin = &plugins[nr_plugins++];
	*plugin = (struct cr_plugin){
		.desc = desc,
		.dlhandle = handle,
		.path = path,
		.nr_hooks = desc->max_hooks < CR_PLUGIN_HOOK__MAX ? desc->max_hooks : CR_PLUGIN_HOOK__MAX,
	};
	warn_unknown_hooks(plugin);
	pr_info("plugin %s loaded from %s\n", desc->name, path);
	return 0;

err_close:
	dlclose(handle);
err_free:
	free(path);
	return ret;
}

static int load_plugins(void)
{
	struct dirent **entries;
	bool must_exist;
	const char *dir = choose_plugins_dir(&must_exist);
	int nr_entries, i, ret = 0;

	plugins_dir = strdup(dir);
	if (!plugins_dir) {
		pr_err("plugins: out of memory\n");
		return -ENOMEM;
	}
	/* alphasort: the load order, hence the hook order, is the file names' order. */
	nr_entries = scandir(dir, &entries, is_plugin_file, alphasort);
	if (nr_entries < 0) {
		ret = -errno;
		if (ret == -ENOENT && !must_exist) {
			pr_debug("plugins: no directory %s, none loaded\n", dir);
			return 0;
		}
		pr_err("plugins: cannot read the plugin directory %s: %s\n", dir, strerror(-ret));
		return ret;
	}
	for (i = 0; i < nr_entries; i++) {
		if (!ret)
			ret = load_plugin(dir, entries[i]->d_name);
		free(entries[i]);
	}
	free(entries);
	return ret;
}

static void unload_plugins(void)
{
	int i;

	for (i = nr_plugins - 1; i >= 0; i--) {
		dlclose(plugins[i].dlhandle);
		free(plugins[i].path);
	}
	free(plugins);
	plugins = NULL;
	nr_plugins = 0;
	free(plugins_dir);
	plugins_dir = NULL;
	free(inventory_names);
	inventory_names = NULL;
}

/* exit() every initialised plugin, last initialised first, so later ones can rely on earlier. */
static void exit_plugins(int stage, int ret)
{
	int i;

	for (i = nr_plugins - 1; i >= 0; i--) {
		if (!plugins[i].initialised)
			continue;
		plugins[i].initialised = false;
		if (plugins[i].desc->exit) {
			pr_debug("plugin %s: exit(%s, %d)\n", plugins[i].desc->name, stage_names[stage], ret);
			plugins[i].desc->exit(stage, ret);
		}
	}
}

static int init_plugins(int stage)
{
	int i, ret;

	for (i = 0; i < nr_plugins; i++) {
		cr_plugin_desc_t *desc = plugins[i].desc;

		if (desc->init) {
			ret = desc->init(stage);
			if (ret) {
				pr_err("plugin %s: init for %s failed: %d\n", desc->name, stage_names[stage],
				       ret);
				return ret < 0 ? ret : -EINVAL;
			}
		}
		plugins[i].initialised = true;
	}
	return 0;
}

int cr_plugin_init(int stage)
{
	int ret;

	if (stage < 0 || stage >= CR_PLUGIN_STAGE_MAX) {
		pr_err("plugins: unknown stage %d\n", stage);
		return -EINVAL;
	}
	ret = load_plugins();
	if (!ret)
		ret = init_plugins(stage);
	/* After every init: a plugin's RESTORE_INIT may rely on the others being ready. */
	if (!ret && stage == CR_PLUGIN_STAGE__RESTORE)
		ret = run_plugins(RESTORE_INIT);
	if (ret) {
		exit_plugins(stage, ret);
		unload_plugins();
		return ret;
	}
	pr_info("plugins: %d loaded from %s for %s\n", nr_plugins, plugins_dir, stage_names[stage]);
	return 0;
}

void cr_plugin_fini(int stage, int ret)
{
	if (stage < 0 || stage >= CR_PLUGIN_STAGE_MAX) {
		pr_err("plugins: unknown stage %d\n", stage);
		return;
	}
	exit_plugins(stage, ret);
	unload_plugins();
}

/* ---- inventory ---- */

int cr_plugins_to_inventory(PluginsEntry *entry)
{
	size_t nr_names = 0;
	int i;

	free(inventory_names);
	inventory_names = calloc(nr_plugins ? nr_plugins : 1, sizeof(*inventory_names));
	if (!inventory_names) {
		pr_err("plugins: out of memory recording them in the inventory\n");
		return -ENOMEM;
	}
	for (i = 0; i < nr_plugins; i++) {
		if (!plugins[i].took_part)
			continue;
		/* protobuf-c's string arrays are not const; it only reads them when packing. */
		inventory_names[nr_names++] = (char *)plugins[i].desc->name;
		pr_info("plugins: the dump needs plugin %s\n", plugins[i].desc->name);
	}
	entry->n_plugins = nr_names;
	entry->plugins = inventory_names;
	return 0;
}

int cr_plugins_check_inventory(const PluginsEntry *entry)
{
	size_t i;

	for (i = 0; entry && i < entry->n_plugins; i++) {
		if (!find_plugin(entry->plugins[i])) {
			pr_err("the images need plugin %s, which is not among the plugins loaded from %s\n",
			       entry->plugins[i], plugins_dir ? plugins_dir : "(none)");
			return -ENOENT;
		}
	}
	return 0;
}
