/*
 * Test plugin "test_trace": records every hook it sees, with the pid of the process that
 * runs it, one line each in $CRIU_TEST_TRACE, and takes nothing (-ENOTSUP), so the next
 * plugin in load order still gets every object.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "criu-plugin.h"

/* One write() per line with O_APPEND: lines from criu and the tasks never interleave. */
static void trace(const char *fmt, ...)
{
	const char *path = getenv("CRIU_TEST_TRACE");
	char line[256];
	va_list args;
	int len, fd;

	if (!path)
		return;
	len = snprintf(line, sizeof(line), "pid=%d ", getpid());
	va_start(args, fmt);
	len += vsnprintf(line + len, sizeof(line) - len, fmt, args);
	va_end(args);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, len) != len)
		fprintf(stderr, "test_trace: short write to %s\n", path);
	close(fd);
}

static int trace_init(int stage)
{
	trace("INIT stage=%d\n", stage);
	return 0;
}

static void trace_exit(int stage, int ret)
{
	trace("EXIT stage=%d ret=%d\n", stage, ret);
}

CR_PLUGIN_REGISTER("test_trace", trace_init, trace_exit)

static int trace_pause_devices(int pid)
{
	trace("PAUSE_DEVICES arg=%d\n", pid);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__PAUSE_DEVICES, trace_pause_devices)

static int trace_checkpoint_devices(int pid)
{
	trace("CHECKPOINT_DEVICES arg=%d\n", pid);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, trace_checkpoint_devices)

static int trace_dump_ext_file(int fd, int id)
{
	trace("DUMP_EXT_FILE arg=%d fd=%d\n", id, fd);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, trace_dump_ext_file)

static int trace_handle_device_vma(int fd, const struct stat *st)
{
	trace("HANDLE_DEVICE_VMA arg=%lu fd=%d\n", (unsigned long)st->st_ino, fd);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, trace_handle_device_vma)

static int trace_dump_devices_late(int id)
{
	trace("DUMP_DEVICES_LATE arg=%d\n", id);
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, trace_dump_devices_late)

static int trace_restore_init(void)
{
	trace("RESTORE_INIT\n");
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_INIT, trace_restore_init)

static int trace_post_forking(void)
{
	trace("POST_FORKING\n");
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, trace_post_forking)

static int trace_restore_ext_file(int id, bool *retry_needed)
{
	trace("RESTORE_EXT_FILE arg=%d retry_ptr=%d\n", id, retry_needed != NULL);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, trace_restore_ext_file)

static int trace_update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
				uint64_t *new_pgoff, int *plugin_fd)
{
	(void)new_pgoff;
	(void)plugin_fd;
	trace("UPDATE_VMA_MAP arg=%#llx path=%s pgoff=%llu\n", (unsigned long long)addr, path,
	      (unsigned long long)old_pgoff);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, trace_update_vma_map)

static int trace_resume_devices_late(int pid)
{
	trace("RESUME_DEVICES_LATE arg=%d\n", pid);
	return -ENOTSUP;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, trace_resume_devices_late)
