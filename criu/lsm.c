/*
 * LSM labels (lsm.h). Where the kernel runs an LSM that labels tasks (SELinux, AppArmor:
 * /proc/PID/attr/current), dump records each task's label in its creds as CRIU does.
 * A restored task inherits criu's own label; this criu does not change labels, so a
 * restore goes ahead only where each recorded label is the one the task inherits, and is
 * refused with one line otherwise, rather than bringing a task back confined differently
 * than it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "lsm.h"

#define LABEL_MAX 4096

/*
 * A label file whole, without the newline AppArmor ends it with or the NUL SELinux
 * does. Returns its length, or -errno (EINVAL from attr/current: no LSM labels tasks).
 */
static ssize_t read_label(const char *path, char *buf, size_t size)
{
	ssize_t len;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, size - 1);
	if (len < 0)
		len = -errno;
	close(fd);
	if (len < 0)
		return len;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\0'))
		len--;
	buf[len] = '\0';
	return len;
}

static bool file_says_yes(const char *path)
{
	char buf[8];

	return read_label(path, buf, sizeof(buf)) > 0 && buf[0] == 'Y';
}

static Lsmtype probe_host_kind(int *err)
{
	char buf[LABEL_MAX];
	ssize_t len;

	len = read_label("/proc/self/attr/current", buf, sizeof(buf));
	*err = 0;
	if (len == -EINVAL || len == -ENOENT)
		return LSMTYPE__NO_LSM;
	if (access("/sys/fs/selinux/enforce", F_OK) == 0)
		return LSMTYPE__SELINUX;
	if (file_says_yes("/sys/module/apparmor/parameters/enabled"))
		return LSMTYPE__APPARMOR;
	*err = len < 0 ? (int)len : -ENOTSUP;
	return LSMTYPE__NO_LSM;
}

int lsm_host_kind(Lsmtype *kind)
{
	static Lsmtype cached;
	static int probed, probe_err;

	if (!probed) {
		cached = probe_host_kind(&probe_err);
		probed = 1;
		if (probe_err == -ENOTSUP)
			pr_err("tasks carry labels of an LSM that is neither SELinux nor AppArmor: "
			       "not supported\n");
		else if (probe_err)
			pr_err("cannot read criu's own LSM label: %s\n", strerror(-probe_err));
	}
	*kind = cached;
	return probe_err;
}

static int dump_label(pid_t pid, const char *name, char **label)
{
	char path[64], buf[LABEL_MAX];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/attr/%s", pid, name);
	len = read_label(path, buf, sizeof(buf));
	if (len < 0) {
		pr_err("task %d: cannot read its LSM label %s: %s\n", pid, path, strerror(-len));
		return len;
	}
	*label = len ? strdup(buf) : NULL;
	if (len && !*label)
		return -ENOMEM;
	return 0;
}

int lsm_dump_task(pid_t pid, CredsEntry *ce)
{
	Lsmtype kind;
	int ret;

	ret = lsm_host_kind(&kind);
	if (ret || kind == LSMTYPE__NO_LSM)
		return ret;
	ret = dump_label(pid, "current", &ce->lsm_profile);
	/* SELinux alone labels the sockets a task creates from attr/sockcreate. */
	if (!ret && kind == LSMTYPE__SELINUX)
		ret = dump_label(pid, "sockcreate", &ce->lsm_sockcreate);
	return ret;
}

void lsm_free_creds(CredsEntry *ce)
{
	free(ce->lsm_profile);
	free(ce->lsm_sockcreate);
	ce->lsm_profile = ce->lsm_sockcreate = NULL;
}

/* The label a task forked by criu starts with: criu's own ("" where none). */
static int own_label(const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/self/attr/%s", name);
	len = read_label(path, buf, size);
	if (len == -EINVAL || len == -ENOENT) {
		buf[0] = '\0';
		return 0;
	}
	if (len < 0)
		pr_err("cannot read criu's own LSM label %s: %s\n", path, strerror(-len));
	return len < 0 ? len : 0;
}

static int check_label(const char *recorded, const char *name, const char *img)
{
	char own[LABEL_MAX];
	int ret;

	if (!recorded || !recorded[0])
		return 0;
	ret = own_label(name, own, sizeof(own));
	if (ret || !strcmp(recorded, own))
		return ret;
	pr_err("%s: the task's LSM label (attr/%s) \"%s\" is not the one it would inherit "
	       "from criu (\"%s\"): setting LSM labels is not supported\n",
	       img, name, recorded, own[0] ? own : "no LSM on this kernel");
	return -ENOTSUP;
}

int lsm_check_restorable(const CredsEntry *ce, const char *img)
{
	return check_label(ce->lsm_profile, "current", img) ?:
	       check_label(ce->lsm_sockcreate, "sockcreate", img);
}
