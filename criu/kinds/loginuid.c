/*
 * The audit loginuid of each task (task_core_entry.loginuid, as criu reads
 * /proc/PID/loginuid: in criu's user namespace). The kernel lets only the task itself
 * write its /proc/self/loginuid, the value read in the user namespace of whoever opened
 * the file, and changing one that is set takes CAP_AUDIT_CONTROL in the initial user
 * namespace, which tasks of a user namespace of their own never have; setting an unset one
 * takes nothing. So criu unsets its own before it forks the root, every task inherits that,
 * and each sets its own once its children are forked (they inherit it otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "loginuid.h"
#include "namespaces.h"
#include "pstree.h"
#include "servicefd.h"

/* What /proc/PID/loginuid says of a task whose loginuid was never set (AUDIT_UID_UNSET). */
#define LOGINUID_UNSET 4294967295u

/* Set by criu before the root is forked, inherited by every task: each writes its own. */
static bool loginuid_restoring;

static int write_own_loginuid(uint32_t value)
{
	char text[16];
	int fd = proc_open("self/loginuid", O_WRONLY), len, ret = 0;

	if (fd < 0)
		return -errno;
	len = snprintf(text, sizeof(text), "%u", value);
	if (write(fd, text, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* 0, or -errno (-ENOENT: a kernel without audit has no loginuid). */
static int read_own_loginuid(uint32_t *value)
{
	char text[16];
	int fd = proc_open("self/loginuid", O_RDONLY);
	ssize_t len;

	if (fd < 0)
		return -errno;
	len = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (len <= 0)
		return len < 0 ? -errno : -EINVAL;
	text[len] = '\0';
	*value = strtoul(text, NULL, 10);
	return 0;
}

bool kerndat_has_loginuid(void)
{
	uint32_t value;

	return !read_own_loginuid(&value) && !write_own_loginuid(value);
}

int loginuid_restore_prepare(void)
{
	struct pstree_item *item;
	uint32_t own;
	int ret = read_own_loginuid(&own);

	if (ret == -ENOENT) {
		pr_info("this kernel has no loginuid (no audit): none is restored\n");
		return 0;
	}
	if (ret) {
		pr_err("cannot read criu's loginuid: %s\n", strerror(-ret));
		return ret;
	}
	for (item = root_item; item && !loginuid_restoring; item = pstree_next(item))
		loginuid_restoring =
			item->image && item->image->has_loginuid && item->image->loginuid != own;
	if (!loginuid_restoring || own == LOGINUID_UNSET)
		return 0;
	ret = write_own_loginuid(LOGINUID_UNSET);
	if (ret)
		pr_err("cannot unset criu's loginuid %u for the tasks to set theirs "
		       "(CAP_AUDIT_CONTROL, audit's loginuid_immutable): %s\n",
		       own, strerror(-ret));
	return ret;
}

int loginuid_restore(const struct task_image *ti)
{
	uint32_t value;
	int ret;

	if (!loginuid_restoring || !ti->has_loginuid || ti->loginuid == LOGINUID_UNSET)
		return 0;
	/* The file reads and writes ids in the task's user namespace. */
	ret = userns_tree_uid_of_host(ti->loginuid, &value, "loginuid");
	if (!ret)
		ret = write_own_loginuid(value);
	if (ret)
		pr_err("cannot restore loginuid %u: %s\n", ti->loginuid, strerror(-ret));
	return ret;
}
