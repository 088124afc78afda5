/*
 * Test plugin "test_fail": fails (-EIO) at the hook named in $CRIU_TEST_FAIL (or at
 * init with INIT), and stays out of the way (-ENOTSUP / 0) everywhere else. Used to
 * prove each stage's failure cleans up.
 */
#include <stdlib.h>
#include <string.h>

#include "criu-plugin.h"

static bool fail_here(const char *hook)
{
	const char *which = getenv("CRIU_TEST_FAIL");

	return which && !strcmp(which, hook);
}

#define FAIL_OR(hook, otherwise) (fail_here(hook) ? -EIO : (otherwise))

static int fail_init(int stage)
{
	(void)stage;
	return FAIL_OR("INIT", 0);
}

CR_PLUGIN_REGISTER("test_fail", fail_init, cr_plugin_dummy_exit)

static int fail_pause_devices(int pid)
{
	(void)pid;
	return FAIL_OR("PAUSE_DEVICES", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__PAUSE_DEVICES, fail_pause_devices)

static int fail_checkpoint_devices(int pid)
{
	(void)pid;
	return FAIL_OR("CHECKPOINT_DEVICES", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, fail_checkpoint_devices)

static int fail_dump_ext_file(int fd, int id)
{
	(void)fd;
	(void)id;
	return FAIL_OR("DUMP_EXT_FILE", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, fail_dump_ext_file)

static int fail_handle_device_vma(int fd, const struct stat *st)
{
	(void)fd;
	(void)st;
	return FAIL_OR("HANDLE_DEVICE_VMA", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, fail_handle_device_vma)

static int fail_dump_devices_late(int id)
{
	(void)id;
	return FAIL_OR("DUMP_DEVICES_LATE", 0);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, fail_dump_devices_late)

static int fail_restore_init(void)
{
	return FAIL_OR("RESTORE_INIT", 0);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_INIT, fail_restore_init)

static int fail_post_forking(void)
{
	return FAIL_OR("POST_FORKING", 0);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, fail_post_forking)

static int fail_restore_ext_file(int id, bool *retry_needed)
{
	(void)id;
	(void)retry_needed;
	return FAIL_OR("RESTORE_EXT_FILE", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, fail_restore_ext_file)

static int fail_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
			       uint64_t *new_pgoff, int *plugin_fd)
{
	(void)path;
	(void)addr;
	(void)old_pgoff;
	(void)new_pgoff;
	(void)plugin_fd;
	return FAIL_OR("UPDATE_VMA_MAP", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, fail_update_vma_map)

static int fail_resume_devices_late(int pid)
{
	(void)pid;
	return FAIL_OR("RESUME_DEVICES_LATE", -ENOTSUP);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, fail_resume_devices_late)
