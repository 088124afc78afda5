/*
 * LSM labels (lsm.h). Where the kernel runs an LSM that labels tasks (SELinux, AppArmor:
 * /proc/PID/attr/current), dump records each task's label in its creds as CRIU does.
 * Restore decides each task's labels here (the dumped ones, or --lsm-profile's); the
 * restorer writes them to the task's own attr files before it runs (pie/restorer.c). A
 * label of an LSM this kernel does not run is refused with one line, before anything is
 * created, rather than bringing a task back confined differently than it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_options.h"
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

static const char *kind_name(Lsmtype kind)
{
	return kind == LSMTYPE__SELINUX	   ? "SELinux"
	       : kind == LSMTYPE__APPARMOR ? "AppArmor"
					   : "none";
}

/* The LSM the images' labels are of (inventory.img), set by lsm_restore_prepare(). */
static Lsmtype image_kind;

int lsm_restore_prepare(Lsmtype dumped_kind)
{
	Lsmtype host, wanted;
	int ret = lsm_host_kind(&host);

	if (ret)
		return ret;
	image_kind = dumped_kind;
	if (opts.lsm_profile_kind != LSM_OPT_APPARMOR && opts.lsm_profile_kind != LSM_OPT_SELINUX)
		return 0;
	wanted = opts.lsm_profile_kind == LSM_OPT_APPARMOR ? LSMTYPE__APPARMOR : LSMTYPE__SELINUX;
	if (host == wanted)
		return 0;
	pr_err("--lsm-profile %s:%s: this kernel does not run %s (tasks are labelled by %s)\n",
	       wanted == LSMTYPE__APPARMOR ? "apparmor" : "selinux", opts.lsm_profile,
	       kind_name(wanted), host == LSMTYPE__NO_LSM ? "no LSM" : kind_name(host));
	return -ENOTSUP;
}

/*
 * What restore writes to attr/current: AppArmor's label reads "NAME (MODE)" and is set
 * with "changeprofile NAME"; SELinux's context is written as it reads.
 */
static int render_current(Lsmtype kind, const char *label, char *out, size_t size)
{
	const char *mode = strrchr(label, ' ');
	int n;

	if (kind == LSMTYPE__APPARMOR) {
		size_t len = mode && mode[1] == '(' && mode[strlen(mode) - 1] == ')'
				     ? (size_t)(mode - label)
				     : strlen(label);

		n = snprintf(out, size, "changeprofile %.*s", (int)len, label);
	} else {
		n = snprintf(out, size, "%s", label);
	}
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * The labels a task gets (rc->lsm_*): --lsm-profile's, else the dumped ones where they
 * are not the label a task forked by criu inherits. A dumped label needs this kernel to
 * run the LSM the images were dumped under.
 */
int lsm_restore_labels(const CredsEntry *ce, const char *img, struct rst_creds *rc)
{
	const char *current = ce->lsm_profile, *sock = ce->lsm_sockcreate;
	char own[LABEL_MAX];
	Lsmtype host, kind;
	int ret;

	rc->lsm_current[0] = rc->lsm_sockcreate[0] = '\0';
	if (opts.lsm_profile_kind == LSM_OPT_NONE)
		return 0;
	ret = lsm_host_kind(&host);
	if (ret)
		return ret;
	if (opts.lsm_profile_kind != LSM_OPT_IMAGE) {
		current = opts.lsm_profile;
	} else if ((current && current[0]) || (sock && sock[0])) {
		if (host == LSMTYPE__NO_LSM || image_kind != host) {
			pr_err("%s: the task ran with LSM label \"%s\" (%s), this kernel runs %s "
			       "(--lsm-profile sets another label, none: none)\n",
			       img, current && current[0] ? current : sock, kind_name(image_kind),
			       host == LSMTYPE__NO_LSM ? "no LSM that labels tasks"
						       : kind_name(host));
			return -ENOTSUP;
		}
		ret = own_label("current", own, sizeof(own));
		if (ret)
			return ret;
		if (current && !strcmp(current, own))
			current = NULL;
	}
	kind = host;
	if (current && current[0] &&
	    render_current(kind, current, rc->lsm_current, sizeof(rc->lsm_current))) {
		pr_err("%s: the LSM label \"%.64s...\" is too long\n", img, current);
		return -ENAMETOOLONG;
	}
	/* SELinux alone has a sockcreate label; it is set as dumped. */
	if (kind == LSMTYPE__SELINUX && sock && sock[0]) {
		if (strlen(sock) >= sizeof(rc->lsm_sockcreate)) {
			pr_err("%s: the LSM sockcreate label is too long\n", img);
			return -ENAMETOOLONG;
		}
		strcpy(rc->lsm_sockcreate, sock);
	}
	rc->lsm_before_threads = kind == LSMTYPE__SELINUX;
	if (rc->lsm_current[0])
		pr_info("%s: the task's LSM label is set to \"%s\"\n", img, rc->lsm_current);
	return 0;
}
