/*
 * Cgroups: each task's and thread's cgroups (/proc/PID/task/TID/cgroup), grouped into
 * sets as CRIU numbers them (criu's own first), and the directories of every hierarchy
 * below the tree's cgroups with their properties (cgroup.img); restore makes them as
 * --manage-cgroups says and moves each task in before it runs. --freeze-cgroup is here too.
 *
 * Both sides reach a hierarchy through a mount of its own that criu makes and nobody sees
 * (fsopen()/fsmount(), detached), or through --cgroup-yard DIR where someone mounted them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "compel.h"
#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "pstree.h"
#include "task-image.h"

#include "cgroup.pb-c.h"

#define CG_VALUE_MAX (64 << 10) /* no property file this dumps holds more */

/* ----------------------------------------------------------- hierarchies ---- */

/* A hierarchy, named as /proc/PID/cgroup names it: "cpu,cpuacct", "name=systemd", "" (v2). */
struct cg_hier {
	char *name;
	int fd; /* its root directory; -1 until opened */
};

static struct cg_hier *hiers;
static size_t nr_hiers;

static bool is_v2(const char *name)
{
	return name[0] == '\0';
}

/* --cgroup-yard DIR: DIR/NAME, NAME as CRIU names the directories (unified for v2). */
static int open_yard_hier(const char *name)
{
	char path[PATH_MAX];
	int fd;

	if (is_v2(name))
		name = "unified";
	else if (!strncmp(name, "name=", 5))
		name += 5;
	/* A relative DIR is the work directory's, as CRIU (which works from there) reads it. */
	if (opts.cgroup_yard[0] != '/' && opts.work_dir)
		snprintf(path, sizeof(path), "%s/%s/%s", opts.work_dir, opts.cgroup_yard, name);
	else
		snprintf(path, sizeof(path), "%s/%s", opts.cgroup_yard, name);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		pr_perror("cgroup hierarchy %s: cannot open %s (--cgroup-yard)", name, path);
	return fd < 0 ? -errno : fd;
}

/*
 * A mount of the hierarchy of its own, detached: the kernel gives the existing hierarchy
 * back to a mount asking for exactly its controllers (or its name).
 */
static int mount_hier(const char *name)
{
	int fsfd, fd = -1;
	char *names, *tok, *save = NULL;

	fsfd = fsopen(is_v2(name) ? "cgroup2" : "cgroup", FSOPEN_CLOEXEC);
	names = strdup(name);
	if (fsfd < 0 || !names) {
		pr_perror("cgroup hierarchy \"%s\": cannot open a cgroup file system", name);
		goto out;
	}
	for (tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int ret = strncmp(tok, "name=", 5)
				  ? fsconfig(fsfd, FSCONFIG_SET_FLAG, tok, NULL, 0)
				  : fsconfig(fsfd, FSCONFIG_SET_STRING, "name", tok + 5, 0);

		if (ret) {
			pr_perror("cgroup hierarchy \"%s\": cannot ask for %s", name, tok);
			goto out;
		}
	}
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0)) {
		pr_perror("cgroup hierarchy \"%s\": cannot mount it", name);
		goto out;
	}
	fd = fsmount(fsfd, FSMOUNT_CLOEXEC, 0);
	if (fd < 0)
		pr_perror("cgroup hierarchy \"%s\": cannot mount it", name);
out:
	free(names);
	if (fsfd >= 0)
		close(fsfd);
	return fd < 0 ? -EIO : fd;
}

static struct cg_hier *find_hier(const char *name)
{
	for (size_t i = 0; i < nr_hiers; i++)
		if (!strcmp(hiers[i].name, name))
			return &hiers[i];
	return NULL;
}

static struct cg_hier *add_hier(const char *name)
{
	struct cg_hier *grown = realloc(hiers, (nr_hiers + 1) * sizeof(*hiers));
	char *copy = strdup(name);

	if (grown)
		hiers = grown;
	if (!grown || !copy) {
		free(copy);
		pr_err("no memory for cgroup hierarchy \"%s\"\n", name);
		return NULL;
	}
	hiers[nr_hiers] = (struct cg_hier){.name = copy, .fd = -1};
	return &hiers[nr_hiers++];
}

static int hier_fd(struct cg_hier *h)
{
	if (h->fd < 0) {
		h->fd = opts.cgroup_yard ? open_yard_hier(h->name) : mount_hier(h->name);
		if (h->fd < 0)
			return h->fd;
		pr_debug("cgroup hierarchy \"%s\" opened as fd %d\n", h->name, h->fd);
	}
	return h->fd;
}

static void free_hiers(void)
{
	for (size_t i = 0; i < nr_hiers; i++) {
		if (hiers[i].fd >= 0)
			close(hiers[i].fd);
		free(hiers[i].name);
	}
	free(hiers);
	hiers = NULL;
	nr_hiers = 0;
}

/* A cgroup's path ("/a/b", as /proc has it) relative to its hierarchy's root. */
static const char *rel_path(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

/* The whole of a small file of a cgroup into buf (NUL-terminated). 0 or -errno. */
static int read_cg_file(int dirfd, const char *name, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	if (n < 0)
		return -errno;
	buf[len] = '\0';
	return 0;
}

static int write_cg_file(int dirfd, const char *path, const char *value, size_t len)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, value, len) != (ssize_t)len)
		ret = -errno;
	close(fd);
	return ret;
}

/* --------------------------------------------------------------- members ---- */

/* One line of /proc/PID/cgroup: "ID:NAMES:PATH"; the entry owns its strings. */
static CgMemberEntry *new_member(const char *name, const char *path)
{
	CgMemberEntry *m = malloc(sizeof(*m));

	if (m) {
		cg_member_entry__init(m);
		m->name = strdup(name);
		m->path = strdup(path);
	}
	if (!m || !m->name || !m->path) {
		if (m) {
			free(m->name);
			free(m->path);
		}
		free(m);
		pr_err("no memory for cgroup %s:%s\n", name, path);
		return NULL;
	}
	return m;
}

static void free_members(CgMemberEntry **ms, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(ms[i]->name);
		free(ms[i]->path);
		free(ms[i]);
	}
	free(ms);
}

static int cmp_members(const void *a, const void *b)
{
	const CgMemberEntry *x = *(CgMemberEntry *const *)a, *y = *(CgMemberEntry *const *)b;

	return strcmp(x->name, y->name) ?: strcmp(x->path, y->path);
}

/* A cgroup file into members sorted by name, as CRIU keeps a set's. 0 or -errno. */
static int parse_cgroup_text(char *text, const char *what, CgMemberEntry ***out, size_t *nr)
{
	CgMemberEntry **ms = NULL;
	char *line, *save = NULL;
	size_t n = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *names = strchr(line, ':'), *path = names ? strchr(names + 1, ':') : NULL;
		CgMemberEntry **grown;

		if (!path || path[1] != '/') {
			pr_err("%s: cannot parse \"%s\"\n", what, line);
			free_members(ms, n);
			return -EINVAL;
		}
		*path++ = '\0';
		grown = realloc(ms, (n + 1) * sizeof(*ms));
		if (!grown) {
			pr_err("no memory for the cgroups of %s\n", what);
			free_members(ms, n);
			return -ENOMEM;
		}
		ms = grown;
		ms[n] = new_member(names + 1, path);
		if (!ms[n]) {
			free_members(ms, n);
			return -ENOMEM;
		}
		n++;
	}
	qsort(ms, n, sizeof(*ms), cmp_members);
	*out = ms;
	*nr = n;
	return 0;
}

static int parse_cgroup_file(const char *file, CgMemberEntry ***out, size_t *nr)
{
	char *text = malloc(CG_VALUE_MAX);
	int ret;

	if (!text) {
		pr_err("no memory to read %s\n", file);
		return -ENOMEM;
	}
	ret = read_cg_file(AT_FDCWD, file, text, CG_VALUE_MAX);
	if (ret)
		pr_err("cannot read %s: %s\n", file, strerror(-ret));
	else
		ret = parse_cgroup_text(text, file, out, nr);
	free(text);
	return ret;
}

/* --------------------------------------------------------------- freezer ---- */

/* How long the freezer may take to freeze every task: as long as seizing may (--timeout). */
static unsigned int freeze_seconds(void)
{
	if (opts.timeout < 0)
		return DEFAULT_DUMP_TIMEOUT;
	return opts.timeout ? (unsigned int)opts.timeout : UINT_MAX;
}

/* v1: freezer.state; v2: cgroup.freeze, and cgroup.events says when it is done. */
struct freezer {
	int fd; /* the cgroup's directory */
	bool v2;
};

static int freezer_set(const struct freezer *f, bool frozen)
{
	const char *file = f->v2 ? "cgroup.freeze" : "freezer.state";
	const char *value = f->v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
	int ret = write_cg_file(f->fd, file, value, strlen(value));

	if (ret)
		pr_err("--freeze-cgroup %s: cannot write %s to %s: %s\n", opts.freeze_cgroup, value,
		       file, strerror(-ret));
	return ret;
}

static int freezer_wait_frozen(const struct freezer *f)
{
	struct timespec pause = {0, 10 * 1000 * 1000};
	char buf[512];

	for (unsigned long i = 0; i / 100 < freeze_seconds(); i++) {
		int ret = read_cg_file(f->fd, f->v2 ? "cgroup.events" : "freezer.state", buf,
				       sizeof(buf));

		if (ret) {
			pr_err("--freeze-cgroup %s: cannot read its state: %s\n",
			       opts.freeze_cgroup, strerror(-ret));
			return ret;
		}
		if (f->v2 ? !!strstr(buf, "frozen 1") : !strcmp(buf, "FROZEN\n"))
			return 0;
		nanosleep(&pause, NULL);
	}
	pr_err("--freeze-cgroup %s: not frozen after %u s (a task that cannot stop?)\n",
	       opts.freeze_cgroup, freeze_seconds());
	return -ETIMEDOUT;
}

/* Every thread of the cgroup path and of those below it, attached while frozen. */
static int attach_frozen_dir(int fd, bool v2, const char *path)
{
	char *tids = malloc(CG_VALUE_MAX), *tok, *save = NULL;
	DIR *dir;
	struct dirent *de;
	int ret;

	if (!tids) {
		pr_err("no memory for the tasks of %s\n", path);
		close(fd);
		return -ENOMEM;
	}
	ret = read_cg_file(fd, v2 ? "cgroup.threads" : "tasks", tids, CG_VALUE_MAX);
	if (ret)
		pr_err("cannot read the tasks of frozen cgroup %s: %s\n", path, strerror(-ret));
	for (tok = strtok_r(tids, "\n", &save); tok && !ret; tok = strtok_r(NULL, "\n", &save))
		ret = compel_attach_frozen(atoi(tok));
	free(tids);
	dir = ret ? NULL : fdopendir(fd);
	if (!dir) {
		close(fd);
		return ret;
	}
	while (!ret && (de = readdir(dir))) {
		char child[PATH_MAX];
		int cfd;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
		cfd = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cfd < 0) {
			pr_perror("cannot open frozen cgroup %s", child);
			ret = -errno;
		} else {
			ret = attach_frozen_dir(cfd, v2, child);
		}
	}
	closedir(dir);
	return ret;
}

/* Whether --freeze-cgroup's cgroup was frozen before the dump froze it (runc's paused). */
static bool frozen_before;

/* Whether the freezer cgroup f is frozen now (its state said so), or -errno. */
static int freezer_is_frozen(const struct freezer *f)
{
	char buf[512];
	int ret = read_cg_file(f->fd, f->v2 ? "cgroup.events" : "freezer.state", buf, sizeof(buf));

	if (ret) {
		pr_err("--freeze-cgroup %s: cannot read its state: %s\n", opts.freeze_cgroup,
		       strerror(-ret));
		return ret;
	}
	return f->v2 ? !!strstr(buf, "frozen 1") : !strcmp(buf, "FROZEN\n");
}

int cg_freeze_tree(void)
{
	struct freezer f = {.fd = -1};
	int ret, fd;

	if (!opts.freeze_cgroup)
		return 0;
	f.fd = open(opts.freeze_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f.fd < 0) {
		pr_perror("--freeze-cgroup %s", opts.freeze_cgroup);
		return -errno;
	}
	f.v2 = faccessat(f.fd, "freezer.state", F_OK, 0);
	if (f.v2 && faccessat(f.fd, "cgroup.freeze", F_OK, 0)) {
		pr_err("--freeze-cgroup %s: neither a v1 freezer cgroup nor a v2 cgroup\n",
		       opts.freeze_cgroup);
		close(f.fd);
		return -EINVAL;
	}
	ret = freezer_is_frozen(&f);
	frozen_before = ret > 0;
	ret = ret < 0 ? ret : freezer_set(&f, true) ?: freezer_wait_frozen(&f);
	if (!ret) {
		pr_info("--freeze-cgroup %s frozen\n", opts.freeze_cgroup);
		fd = dup(f.fd);
		ret = fd < 0 ? -errno : attach_frozen_dir(fd, f.v2, opts.freeze_cgroup);
	}
	/* Attached, they stop as they thaw; on failure they are let go again. */
	ret = freezer_set(&f, false) ?: ret;
	close(f.fd);
	if (ret)
		compel_release_frozen();
	return ret;
}

int cg_freezer_restore(void)
{
	struct freezer f;
	int ret;

	if (!opts.freeze_cgroup || !frozen_before)
		return 0;
	frozen_before = false;
	f.fd = open(opts.freeze_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f.fd < 0) {
		pr_perror("--freeze-cgroup %s: cannot freeze it again", opts.freeze_cgroup);
		return -errno;
	}
	f.v2 = faccessat(f.fd, "freezer.state", F_OK, 0);
	ret = freezer_set(&f, true) ?: freezer_wait_frozen(&f);
	if (!ret)
		pr_info("--freeze-cgroup %s frozen again, as it was before the dump\n",
			opts.freeze_cgroup);
	close(f.fd);
	return ret;
}

/* ------------------------------------------------------------------ dump ---- */

/* A directory of a hierarchy below one of the tree's cgroups, as the dump found it. */
struct cg_dir {
	char *path; /* "/a/b", below the hierarchy's root */
	CgroupPerms perms;
	CgroupPropEntry **props;
	size_t nr_props;
	struct cg_dir **children;
	size_t nr_children;
	CgroupDirEntry entry; /* filled when written */
};

/* Per hierarchy (hiers[] order): its top directories. */
struct cg_dump_hier {
	struct cg_dir **heads;
	size_t nr_heads;
	char **cnames;
	size_t nr_cnames;
	CgControllerEntry entry;
};

static CgSetEntry **dump_sets;
static size_t nr_dump_sets;
static struct cg_dump_hier *dump_hiers; /* nr_hiers of them, once cg_dump_init() ran */
static bool dump_on;
/* The root's own cgroup namespace: what the root sees of its cgroups, per hierarchy. */
static CgMemberEntry **ns_view;
static size_t nr_ns_view;

/*
 * The properties CRIU dumps, per controller (its built-in list), and those of every
 * directory; for v2 (""), the files of the controllers it may have enabled and the
 * limits of cgroup v2 itself. A file the kernel does not have is left out.
 */
static const char *const cpu_props[] = {"cpu.shares",	    "cpu.cfs_period_us", "cpu.cfs_quota_us",
					"cpu.rt_period_us", "cpu.rt_runtime_us", NULL};
/* limit_in_bytes before memsw.limit_in_bytes: the kernel wants memsw >= the limit. */
static const char *const memory_props[] = {"memory.limit_in_bytes",
					   "memory.memsw.limit_in_bytes",
					   "memory.swappiness",
					   "memory.soft_limit_in_bytes",
					   "memory.move_charge_at_immigrate",
					   "memory.oom_control",
					   "memory.use_hierarchy",
					   "memory.kmem.limit_in_bytes",
					   "memory.kmem.tcp.limit_in_bytes",
					   NULL};
static const char *const cpuset_props[] = {"cpuset.cpus",
					   "cpuset.mems",
					   "cpuset.memory_migrate",
					   "cpuset.cpu_exclusive",
					   "cpuset.mem_exclusive",
					   "cpuset.mem_hardwall",
					   "cpuset.memory_spread_page",
					   "cpuset.memory_spread_slab",
					   "cpuset.sched_load_balance",
					   "cpuset.sched_relax_domain_level",
					   NULL};
static const char *const blkio_props[] = {"blkio.weight", NULL};
static const char *const net_cls_props[] = {"net_cls.classid", NULL};
static const char *const net_prio_props[] = {"net_prio.ifpriomap", NULL};
static const char *const pids_props[] = {"pids.max", NULL};
static const char *const devices_props[] = {"devices.list", NULL};
/* cgroup.subtree_control first: the children's controller files exist only after it. */
static const char *const v2_props[] = {"cgroup.subtree_control",
				       "cgroup.max.depth",
				       "cgroup.max.descendants",
				       "cpu.weight",
				       "cpu.max",
				       "cpuset.cpus",
				       "cpuset.mems",
				       "memory.min",
				       "memory.low",
				       "memory.high",
				       "memory.max",
				       "memory.swap.max",
				       "io.weight",
				       "pids.max",
				       NULL};
/* cgroup.procs and tasks: their permissions only (a container's delegation). */
static const char *const global_props[] = {"cgroup.clone_children", "notify_on_release",
					   "cgroup.procs", "tasks", NULL};

static const struct {
	const char *ctrl;
	const char *const *props;
} ctrl_props[] = {
	{"cpu", cpu_props},	{"memory", memory_props},   {"cpuset", cpuset_props},
	{"blkio", blkio_props}, {"net_cls", net_cls_props}, {"net_prio", net_prio_props},
	{"pids", pids_props},	{"devices", devices_props}, {"", v2_props},
};

static const char *const *props_of(const char *cname)
{
	for (size_t i = 0; i < sizeof(ctrl_props) / sizeof(ctrl_props[0]); i++)
		if (!strcmp(ctrl_props[i].ctrl, cname))
			return ctrl_props[i].props;
	return NULL;
}

static bool perms_only(const char *prop)
{
	return !strcmp(prop, "cgroup.procs") || !strcmp(prop, "tasks");
}

/*
 * A property's value as CRIU stores it: without the trailing newline, "-1" for the
 * largest number (unlimited), oom_control as its oom_kill_disable; v2's subtree_control
 * as the write that enables the same controllers ("+pids +memory").
 */
static char *prop_value(const char *name, char *buf)
{
	size_t len = strlen(buf);
	int disable;

	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (strtoll(buf, NULL, 10) == LLONG_MAX)
		return strdup("-1");
	if (!strcmp(name, "memory.oom_control")) {
		char *v = NULL;

		if (sscanf(buf, "oom_kill_disable %d", &disable) != 1)
			return NULL;
		return asprintf(&v, "%d", disable) < 0 ? NULL : v;
	}
	if (!strcmp(name, "cgroup.subtree_control")) {
		char *v = malloc(2 * len + 2), *tok, *save = NULL, *p;

		if (!v)
			return NULL;
		p = v;
		*p = '\0';
		for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
			p += sprintf(p, "%s+%s", p == v ? "" : " ", tok);
		return v;
	}
	return strdup(buf);
}

static int add_prop(struct cg_dir *d, int dirfd, const char *name, char *buf)
{
	CgroupPropEntry *p, **grown;
	struct stat st;
	int ret;

	if (fstatat(dirfd, name, &st, 0))
		return errno == ENOENT ? 0 : -errno;
	ret = perms_only(name) ? 0 : read_cg_file(dirfd, name, buf, CG_VALUE_MAX);
	if (ret) {
		pr_err("cgroup %s: cannot read %s: %s\n", d->path, name, strerror(-ret));
		return ret;
	}
	/* v2: nothing enabled below, nothing to write back. */
	if (!strcmp(name, "cgroup.subtree_control") && (buf[0] == '\n' || !buf[0]))
		return 0;
	p = calloc(1, sizeof(*p) + sizeof(CgroupPerms));
	grown = realloc(d->props, (d->nr_props + 1) * sizeof(*grown));
	if (grown)
		d->props = grown;
	if (p) {
		cgroup_prop_entry__init(p);
		p->perms = (CgroupPerms *)(p + 1);
		cgroup_perms__init(p->perms);
		p->name = strdup(name);
		p->value = perms_only(name) ? strdup("") : prop_value(name, buf);
	}
	if (!p || !grown || !p->name || !p->value) {
		pr_err("cgroup %s: cannot keep %s (\"%s\")\n", d->path, name, buf);
		if (p) {
			free(p->name);
			free(p->value);
		}
		free(p);
		return -ENOMEM;
	}
	p->perms->mode = st.st_mode;
	p->perms->uid = st.st_uid;
	p->perms->gid = st.st_gid;
	d->props[d->nr_props++] = p;
	pr_debug("cgroup %s: %s = \"%s\"\n", d->path, name, p->value);
	return 0;
}

static int add_props_list(struct cg_dir *d, int dirfd, const char *const *props, char *buf)
{
	int ret = 0;

	for (; props && *props && !ret; props++) {
		bool seen = false;

		for (size_t i = 0; i < d->nr_props; i++)
			seen |= !strcmp(d->props[i]->name, *props);
		if (!seen)
			ret = add_prop(d, dirfd, *props, buf);
	}
	return ret;
}

/* The hierarchy's root has nothing to restore: its files are the kernel's. */
static int add_dir_props(struct cg_dir *d, int dirfd, const struct cg_dump_hier *dh)
{
	char *buf;
	int ret = 0;

	if (!strcmp(d->path, "/"))
		return 0;
	buf = malloc(CG_VALUE_MAX);
	if (!buf) {
		pr_err("no memory for the properties of cgroup %s\n", d->path);
		return -ENOMEM;
	}
	for (size_t i = 0; i < dh->nr_cnames && !ret; i++)
		ret = add_props_list(d, dirfd, props_of(dh->cnames[i]), buf);
	if (!ret)
		ret = add_props_list(d, dirfd, global_props, buf);
	free(buf);
	return ret;
}

static void free_dir(struct cg_dir *d)
{
	for (size_t i = 0; i < d->nr_props; i++) {
		free(d->props[i]->name);
		free(d->props[i]->value);
		free(d->props[i]);
	}
	for (size_t i = 0; i < d->nr_children; i++)
		free_dir(d->children[i]);
	free(d->props);
	free(d->children);
	free(d->entry.children);
	free(d->path);
	free(d);
}

/* Whether path lies below (or is) dir, as paths: "/a" holds "/a/b", not "/ab". */
static bool path_within(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, len) && (path[len] == '\0' || path[len] == '/');
}

/* Where path goes among dirs: *exact when dumped already, else its deepest ancestor. */
static struct cg_dir *find_dir(struct cg_dir **dirs, size_t nr, const char *path, bool *exact)
{
	for (size_t i = 0; i < nr; i++) {
		struct cg_dir *below;

		if (!path_within(path, dirs[i]->path))
			continue;
		if (!strcmp(path, dirs[i]->path)) {
			*exact = true;
			return dirs[i];
		}
		below = find_dir(dirs[i]->children, dirs[i]->nr_children, path, exact);
		return below ?: dirs[i];
	}
	return NULL;
}

static int append_dir(struct cg_dir ***dirs, size_t *nr, struct cg_dir *d)
{
	struct cg_dir **grown = realloc(*dirs, (*nr + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("no memory for cgroup %s\n", d->path);
		return -ENOMEM;
	}
	grown[(*nr)++] = d;
	*dirs = grown;
	return 0;
}

static int walk_dir(struct cg_dump_hier *dh, int hfd, const char *path);

/* Each sub-directory of path, walked in turn. */
static int walk_children(struct cg_dump_hier *dh, int hfd, int dirfd, const char *path)
{
	DIR *dir = fdopendir(dirfd);
	struct dirent *de;
	int ret = 0;

	if (!dir) {
		pr_perror("cgroup %s: cannot list it", path);
		close(dirfd);
		return -errno;
	}
	while (!ret && (de = readdir(dir))) {
		char child[PATH_MAX];

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "",
			     de->d_name) >= (int)sizeof(child)) {
			pr_err("cgroup %s/%s: path too long\n", path, de->d_name);
			ret = -ENAMETOOLONG;
		} else {
			ret = walk_dir(dh, hfd, child);
		}
	}
	closedir(dir);
	return ret;
}

/* The directory path of the hierarchy and those below it, each with its properties. */
static int walk_dir(struct cg_dump_hier *dh, int hfd, const char *path)
{
	struct cg_dir *d, *parent;
	bool exact = false;
	struct stat st;
	int fd, ret;

	parent = find_dir(dh->heads, dh->nr_heads, path, &exact);
	if (exact)
		return 0; /* dumped with an earlier set, and all below it */
	fd = openat(hfd, rel_path(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		pr_perror("cgroup %s: cannot open it", path);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	d = calloc(1, sizeof(*d));
	if (!d || !(d->path = strdup(path))) {
		pr_err("no memory for cgroup %s\n", path);
		free(d);
		close(fd);
		return -ENOMEM;
	}
	cgroup_perms__init(&d->perms);
	d->perms.mode = st.st_mode;
	d->perms.uid = st.st_uid;
	d->perms.gid = st.st_gid;
	ret = add_dir_props(d, fd, dh);
	if (!ret)
		ret = parent ? append_dir(&parent->children, &parent->nr_children, d)
			     : append_dir(&dh->heads, &dh->nr_heads, d);
	if (ret) {
		free_dir(d);
		close(fd);
		return ret;
	}
	pr_info("cgroup %s of \"%s\" dumped\n", path, hiers[dh - dump_hiers].name);
	return walk_children(dh, hfd, fd, path);
}

/* --cgroup-root at dump: the hierarchy's directories are dumped from there; NULL: none. */
static const char *dump_root_of(const char *name)
{
	const char *root = NULL;

	for (unsigned int i = 0; i < opts.nr_cgroup_roots; i++)
		if (!opts.cgroup_roots[i].ctrl || !strcmp(opts.cgroup_roots[i].ctrl, name))
			root = opts.cgroup_roots[i].path;
	return root;
}

/*
 * Whether a task's cgroup is criu's own there: not the tree's to re-create (CRIU would dump
 * all of it, the whole hierarchy when criu lives in its root).
 */
static bool criu_cgroup(const CgMemberEntry *m)
{
	const CgSetEntry *criu = dump_sets[0];

	for (size_t i = 0; i < criu->n_ctls; i++)
		if (!strcmp(criu->ctls[i]->name, m->name))
			return !strcmp(criu->ctls[i]->path, m->path);
	return false;
}

/* A new set's cgroups, and every directory below them. */
static int collect_set_dirs(const CgSetEntry *set)
{
	int ret = 0;

	for (size_t i = 0; i < set->n_ctls && !ret; i++) {
		struct cg_hier *h = find_hier(set->ctls[i]->name);
		const char *root = dump_root_of(set->ctls[i]->name);
		int fd;

		if (!root && criu_cgroup(set->ctls[i]))
			continue;

		if (!h) {
			pr_err("cgroup hierarchy \"%s\" of set %u is not criu's\n",
			       set->ctls[i]->name, set->id);
			return -ENOENT;
		}
		fd = hier_fd(h);
		if (fd < 0)
			return fd;
		ret = walk_dir(&dump_hiers[h - hiers], fd, root ?: set->ctls[i]->path);
	}
	return ret;
}

static bool same_members(const CgSetEntry *set, CgMemberEntry **ms, size_t nr)
{
	if (set->n_ctls != nr)
		return false;
	for (size_t i = 0; i < nr; i++)
		if (cmp_members(&set->ctls[i], &ms[i]) ||
		    set->ctls[i]->cgns_prefix != ms[i]->cgns_prefix)
			return false;
	return true;
}

/* The set of these members (which it takes), added when new; dirs: collect its dirs. */
static int find_or_add_set(CgMemberEntry **ms, size_t nr, bool dirs, uint32_t *id)
{
	CgSetEntry *set, **grown;

	for (size_t i = 0; i < nr_dump_sets; i++) {
		if (same_members(dump_sets[i], ms, nr)) {
			free_members(ms, nr);
			*id = dump_sets[i]->id;
			return 0;
		}
	}
	set = malloc(sizeof(*set));
	grown = realloc(dump_sets, (nr_dump_sets + 1) * sizeof(*grown));
	if (grown)
		dump_sets = grown;
	if (!set || !grown) {
		pr_err("no memory for a cgroup set\n");
		free(set);
		free_members(ms, nr);
		return -ENOMEM;
	}
	cg_set_entry__init(set);
	set->id = nr_dump_sets + 1;
	set->ctls = ms;
	set->n_ctls = nr;
	dump_sets[nr_dump_sets++] = set;
	for (size_t i = 0; i < nr; i++)
		pr_info("cgroup set %u: \"%s\" %s (cgns prefix %u)\n", set->id, ms[i]->name,
			ms[i]->path, ms[i]->cgns_prefix);
	*id = set->id;
	return dirs ? collect_set_dirs(set) : 0;
}

static int split_cnames(struct cg_dump_hier *dh, const char *name)
{
	char *copy = strdup(name), *tok, *save = NULL;

	if (!copy)
		return -ENOMEM;
	if (is_v2(name)) {
		dh->cnames = malloc(sizeof(char *));
		if (!dh->cnames) {
			free(copy);
			return -ENOMEM;
		}
		dh->cnames[dh->nr_cnames++] = copy;
		return 0;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **grown = realloc(dh->cnames, (dh->nr_cnames + 1) * sizeof(*grown));

		if (!grown || !(grown[dh->nr_cnames] = strdup(tok))) {
			dh->cnames = grown ?: dh->cnames;
			free(copy);
			return -ENOMEM;
		}
		dh->cnames = grown;
		dh->nr_cnames++;
	}
	free(copy);
	return 0;
}

int cg_dump_init(void)
{
	CgMemberEntry **ms;
	uint32_t id;
	size_t nr;
	int ret;

	if (opts.manage_cgroups == CG_MODE_IGNORE) {
		pr_info("cgroups are not dumped (--manage-cgroups=ignore)\n");
		return 0;
	}
	ret = parse_cgroup_file("/proc/self/cgroup", &ms, &nr);
	if (ret)
		return ret;
	/* The hierarchies criu lives in, which are every one of the system's. */
	for (size_t i = 0; i < nr && !ret; i++)
		ret = add_hier(ms[i]->name) ? 0 : -ENOMEM;
	dump_hiers = calloc(nr_hiers, sizeof(*dump_hiers));
	if (!dump_hiers && nr_hiers)
		ret = -ENOMEM;
	for (size_t i = 0; i < nr_hiers && !ret; i++)
		if (split_cnames(&dump_hiers[i], hiers[i].name))
			ret = -ENOMEM;
	if (ret) {
		pr_err("no memory for the cgroup hierarchies\n");
		free_members(ms, nr);
		return ret;
	}
	dump_on = true;
	return find_or_add_set(ms, nr, false, &id);
}

/*
 * The root's own cgroup namespace: each path of the tree below the namespace's root
 * (ns_view: its path, and length as cgns_prefix; 0: the hierarchy's root) says so.
 */
static int set_ns_prefixes(CgMemberEntry **ms, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		for (size_t j = 0; j < nr_ns_view; j++) {
			const CgMemberEntry *top = ns_view[j];

			if (strcmp(top->name, ms[i]->name) || !top->cgns_prefix)
				continue;
			if (!path_within(ms[i]->path, top->path)) {
				pr_err("cgroup %s of \"%s\" is outside the cgroup namespace's root "
				       "%s\n",
				       ms[i]->path, ms[i]->name, top->path);
				return -EINVAL;
			}
			ms[i]->has_cgns_prefix = true;
			ms[i]->cgns_prefix = top->cgns_prefix;
		}
	}
	return 0;
}

int cg_dump_thread(pid_t pid, pid_t tid, uint32_t *set_id)
{
	CgMemberEntry **ms;
	char file[64];
	size_t nr;
	int ret;

	*set_id = 0;
	if (!dump_on)
		return 0;
	snprintf(file, sizeof(file), "/proc/%d/task/%d/cgroup", pid, tid);
	ret = parse_cgroup_file(file, &ms, &nr);
	if (!ret)
		ret = set_ns_prefixes(ms, nr);
	if (ret)
		return ret;
	return find_or_add_set(ms, nr, true, set_id);
}

/*
 * What the root sees as a path is the end of what criu sees (outside): the rest, before
 * it, is the namespace's root, which ns_view holds from now on.
 */
static int ns_roots_from_outside(pid_t root_pid)
{
	CgMemberEntry **outer;
	char file[64];
	size_t nr;
	int ret;

	snprintf(file, sizeof(file), "/proc/%d/cgroup", root_pid);
	ret = parse_cgroup_file(file, &outer, &nr);
	for (size_t j = 0; j < nr_ns_view && !ret; j++) {
		CgMemberEntry *in = ns_view[j];
		const char *tail = strcmp(in->path, "/") ? in->path : "";
		size_t ilen = strlen(tail), olen;
		char *top;

		for (size_t i = 0; i < nr && !ret; i++) {
			if (strcmp(outer[i]->name, in->name))
				continue;
			olen = strlen(outer[i]->path);
			if (ilen > olen || strcmp(outer[i]->path + olen - ilen, tail)) {
				pr_err("task %d: cgroup %s of \"%s\" does not end in %s, as its "
				       "cgroup "
				       "namespace shows it\n",
				       root_pid, outer[i]->path, in->name, in->path);
				ret = -EINVAL;
				break;
			}
			/* "/" (or "") above: the namespace's root is the hierarchy's. */
			top = strndup(outer[i]->path, olen - ilen);
			if (!top) {
				ret = -ENOMEM;
				break;
			}
			free(in->path);
			in->path = top;
			in->cgns_prefix = olen - ilen > 1 ? olen - ilen : 0;
			pr_info("cgroup namespace root of \"%s\": %s\n", in->name, top);
		}
	}
	free_members(outer, nr);
	return ret;
}

/* In a child joined to the root's cgroup namespace: /proc/ROOT/cgroup as the root sees it. */
static int read_ns_view(pid_t root_pid, int out)
{
	char path[64], *text = malloc(CG_VALUE_MAX);
	int fd, ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/cgroup", root_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!text || fd < 0 || setns(fd, CLONE_NEWCGROUP)) {
		pr_perror("cannot join the cgroup namespace of %d", root_pid);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", root_pid);
	ret = read_cg_file(AT_FDCWD, path, text, CG_VALUE_MAX);
	if (ret) {
		pr_err("cannot read %s: %s\n", path, strerror(-ret));
		return -1;
	}
	return write(out, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
}

int cg_dump_ns_root(pid_t root_pid)
{
	char *text = calloc(1, CG_VALUE_MAX);
	int fds[2], status, ret;
	size_t len = 0;
	ssize_t n;
	pid_t child;

	if (!text || pipe2(fds, O_CLOEXEC)) {
		pr_perror("cannot read the cgroup namespace of %d", root_pid);
		free(text);
		return -EIO;
	}
	child = fork();
	if (child == 0) {
		close(fds[0]);
		_exit(read_ns_view(root_pid, fds[1]) ? 1 : 0);
	}
	close(fds[1]);
	while (child > 0 && len < CG_VALUE_MAX - 1 &&
	       (n = read(fds[0], text + len, CG_VALUE_MAX - 1 - len)) > 0)
		len += n;
	close(fds[0]);
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		pr_err("cannot read the cgroups of %d as its cgroup namespace shows them\n",
		       root_pid);
		free(text);
		return -EIO;
	}
	ret = parse_cgroup_text(text, "the root's own view of its cgroups", &ns_view, &nr_ns_view);
	free(text);
	return ret ?: ns_roots_from_outside(root_pid);
}

static void fill_dir_entry(struct cg_dir *d, size_t parent_len)
{
	CgroupDirEntry *e = &d->entry;

	cgroup_dir_entry__init(e);
	/* Below the parent's path; a top one: below the hierarchy's root, no leading '/'. */
	e->dir_name = d->path + parent_len;
	while (*e->dir_name == '/')
		e->dir_name++;
	e->dir_perms = &d->perms;
	e->properties = d->props;
	e->n_properties = d->nr_props;
	e->children = calloc(d->nr_children, sizeof(*e->children));
	e->n_children = e->children ? d->nr_children : 0;
	for (size_t i = 0; i < e->n_children; i++) {
		fill_dir_entry(d->children[i], strcmp(d->path, "/") ? strlen(d->path) : 0);
		e->children[i] = &d->children[i]->entry;
	}
}

int cg_dump_write(void)
{
	CgroupEntry cg = CGROUP_ENTRY__INIT;
	CgControllerEntry **ctrls;
	struct cr_img *img;
	int ret = -ENOMEM;

	if (!dump_on || nr_dump_sets < 2) {
		pr_info("every task lives in criu's cgroups: no cgroup.img\n");
		return 0;
	}
	/* criu's own set (the first) stays out: inventory's root_cg_set names it. */
	cg.sets = dump_sets + 1;
	cg.n_sets = nr_dump_sets - 1;
	ctrls = calloc(nr_hiers, sizeof(*ctrls));
	if (!ctrls)
		goto out;
	for (size_t i = 0; i < nr_hiers; i++) {
		struct cg_dump_hier *dh = &dump_hiers[i];
		CgControllerEntry *e = &dh->entry;

		cg_controller_entry__init(e);
		e->cnames = dh->cnames;
		e->n_cnames = dh->nr_cnames;
		e->dirs = calloc(dh->nr_heads, sizeof(*e->dirs));
		if (!e->dirs && dh->nr_heads)
			goto out;
		e->n_dirs = dh->nr_heads;
		for (size_t j = 0; j < dh->nr_heads; j++) {
			fill_dir_entry(dh->heads[j], 0);
			e->dirs[j] = &dh->heads[j]->entry;
		}
		ctrls[i] = e;
	}
	cg.controllers = ctrls;
	cg.n_controllers = nr_hiers;
	img = open_image(CR_IMG_CGROUP, O_WRONLY, 0);
	ret = img ? pb_write_one(img, &cg) : -EIO;
	if (img)
		close_image(img);
out:
	if (ret == -ENOMEM)
		pr_err("no memory to write cgroup.img\n");
	for (size_t i = 0; ctrls && i < nr_hiers; i++)
		free(dump_hiers[i].entry.dirs);
	free(ctrls);
	return ret;
}

bool cg_dump_criu_set(uint32_t *set_id)
{
	*set_id = dump_on ? 1 : 0;
	return dump_on;
}

void cg_dump_fini(void)
{
	for (size_t i = 0; i < nr_dump_sets; i++) {
		free_members(dump_sets[i]->ctls, dump_sets[i]->n_ctls);
		free(dump_sets[i]);
	}
	free(dump_sets);
	dump_sets = NULL;
	nr_dump_sets = 0;
	for (size_t i = 0; dump_hiers && i < nr_hiers; i++) {
		for (size_t j = 0; j < dump_hiers[i].nr_heads; j++)
			free_dir(dump_hiers[i].heads[j]);
		for (size_t j = 0; j < dump_hiers[i].nr_cnames; j++)
			free(dump_hiers[i].cnames[j]);
		free(dump_hiers[i].heads);
		free(dump_hiers[i].cnames);
	}
	free(dump_hiers);
	dump_hiers = NULL;
	free_members(ns_view, nr_ns_view);
	ns_view = NULL;
	nr_ns_view = 0;
	free_hiers();
	dump_on = false;
}

/* --------------------------------------------------------------- restore ---- */

static CgroupEntry *rst_cg;
/* Per controller of rst_cg: its hierarchy's index in hiers[] (which may still grow). */
static size_t *rst_hiers;
static uint32_t rst_criu_set; /* inventory's root_cg_set; 0: none */
/* The directories this restore made, in the order made: removed again on failure. */
struct made_dir {
	struct cg_hier *h;
	char *path;
};
static struct made_dir *made_dirs;
static size_t nr_made_dirs;

static const char *mode_name(void)
{
	static const char *const names[] = {
		[CG_MODE_IGNORE] = "ignore", [CG_MODE_NONE] = "none", [CG_MODE_PROPS] = "props",
		[CG_MODE_SOFT] = "soft",     [CG_MODE_FULL] = "full", [CG_MODE_STRICT] = "strict",
	};

	return names[opts.manage_cgroups];
}

/* The controllers' names as /proc/PID/cgroup joins them. */
static char *join_cnames(const CgControllerEntry *c)
{
	size_t len = 1;
	char *name;

	for (size_t i = 0; i < c->n_cnames; i++)
		len += strlen(c->cnames[i]) + 1;
	name = calloc(1, len);
	for (size_t i = 0; name && i < c->n_cnames; i++)
		sprintf(name + strlen(name), "%s%s", i ? "," : "", c->cnames[i]);
	return name;
}

/* Whether the member's hierarchy ("cpu,cpuacct") is the controller's, in any order. */
static bool member_of(const CgControllerEntry *c, const char *name)
{
	size_t found = 0, len;
	const char *p = name;

	if (c->n_cnames == 1 && is_v2(c->cnames[0]))
		return is_v2(name);
	while (*p) {
		len = strcspn(p, ",");
		for (size_t i = 0; i < c->n_cnames; i++)
			if (strlen(c->cnames[i]) == len && !strncmp(c->cnames[i], p, len))
				found++;
		p += len + (p[len] == ',');
	}
	return found == c->n_cnames && c->n_cnames;
}

static struct cg_hier *member_hier(const CgMemberEntry *m)
{
	for (size_t i = 0; i < rst_cg->n_controllers; i++)
		if (member_of(rst_cg->controllers[i], m->name))
			return &hiers[rst_hiers[i]];
	return NULL;
}

static const CgSetEntry *find_rst_set(uint32_t id)
{
	for (size_t i = 0; rst_cg && i < rst_cg->n_sets; i++)
		if (rst_cg->sets[i]->id == id)
			return rst_cg->sets[i];
	return NULL;
}

static char *path_join(const char *a, const char *b)
{
	char *p = NULL;

	if (asprintf(&p, "%s%s%s", a, *a && *b ? "/" : "", b) < 0)
		return NULL;
	return p;
}

/*
 * --cgroup-root [CTRL:]PATH: the tree's top cgroups of that hierarchy become PATH, and
 * every set's path below one of them moves along (a namespace's root with it).
 */
static int rewrite_root(CgControllerEntry *c, const char *newroot)
{
	for (size_t d = 0; d < c->n_dirs; d++) {
		char *old = c->dirs[d]->dir_name, *dir = strdup(rel_path(newroot));
		size_t olen = strlen(old);

		if (!dir)
			return -ENOMEM;
		for (size_t s = 0; s < rst_cg->n_sets; s++) {
			for (size_t m = 0; m < rst_cg->sets[s]->n_ctls; m++) {
				CgMemberEntry *cm = rst_cg->sets[s]->ctls[m];
				const char *rest = cm->path + 1 + olen;
				char *moved = NULL;

				if (!member_of(c, cm->name) || !path_within(cm->path + 1, old))
					continue;
				if (cm->has_cgns_prefix && cm->cgns_prefix <= olen + 1) {
					rest = cm->path + cm->cgns_prefix;
					cm->cgns_prefix = strlen(newroot);
				}
				if (asprintf(&moved, "%s%s", newroot, rest) < 0) {
					free(dir);
					return -ENOMEM;
				}
				pr_info("cgroup %s of \"%s\" restored as %s\n", cm->path, cm->name,
					moved);
				free(cm->path);
				cm->path = moved;
			}
		}
		free(old);
		c->dirs[d]->dir_name = dir;
	}
	return 0;
}

static int rewrite_roots(void)
{
	for (size_t i = 0; i < rst_cg->n_controllers; i++) {
		CgControllerEntry *c = rst_cg->controllers[i];
		const char *newroot = NULL;

		for (unsigned int r = 0; r < opts.nr_cgroup_roots; r++)
			if (!opts.cgroup_roots[r].ctrl || member_of(c, opts.cgroup_roots[r].ctrl))
				newroot = opts.cgroup_roots[r].path;
		if (newroot && rewrite_root(c, newroot)) {
			pr_err("no memory for --cgroup-root %s\n", newroot);
			return -ENOMEM;
		}
	}
	return 0;
}

static int collect_rst_hiers(void)
{
	rst_hiers = calloc(rst_cg->n_controllers, sizeof(*rst_hiers));
	if (!rst_hiers && rst_cg->n_controllers)
		return -ENOMEM;
	for (size_t i = 0; i < rst_cg->n_controllers; i++) {
		char *name = join_cnames(rst_cg->controllers[i]);
		struct cg_hier *h;

		if (!name)
			return -ENOMEM;
		if (!rst_cg->controllers[i]->n_cnames) {
			pr_err("cgroup.img: a controller entry without controllers\n");
			free(name);
			return -EINVAL;
		}
		h = find_hier(name) ?: add_hier(name);
		free(name);
		if (!h)
			return -ENOMEM;
		rst_hiers[i] = h - hiers;
	}
	/* Every set's cgroups are in a hierarchy the image describes. */
	for (size_t s = 0; s < rst_cg->n_sets; s++) {
		for (size_t m = 0; m < rst_cg->sets[s]->n_ctls; m++) {
			const CgMemberEntry *cm = rst_cg->sets[s]->ctls[m];

			if (!member_hier(cm) || cm->path[0] != '/' ||
			    (cm->has_cgns_prefix && cm->cgns_prefix > strlen(cm->path))) {
				pr_err("cgroup.img: set %u names cgroup \"%s\":%s, which the image "
				       "does not describe\n",
				       rst_cg->sets[s]->id, cm->name, cm->path);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int cg_restore_collect(const InventoryEntry *inv)
{
	struct cr_img *img;
	int ret;

	rst_criu_set = inv->has_root_cg_set ? inv->root_cg_set : 0;
	if (opts.manage_cgroups == CG_MODE_IGNORE || !img_exists(CR_IMG_CGROUP, 0))
		return 0;
	img = open_image(CR_IMG_CGROUP, O_RDONLY, 0);
	if (!img)
		return -EIO;
	/* CRIU writes an image without a record when every task lives in its cgroups. */
	ret = pb_read_one(img, (void **)&rst_cg);
	close_image(img);
	if (ret <= 0)
		return ret;
	ret = rewrite_roots() ?: collect_rst_hiers();
	if (ret == -ENOMEM)
		pr_err("no memory for the cgroups of cgroup.img\n");
	return ret;
}

bool cg_restore_has_ns_root(void)
{
	for (size_t s = 0; rst_cg && s < rst_cg->n_sets; s++)
		for (size_t m = 0; m < rst_cg->sets[s]->n_ctls; m++)
			if (rst_cg->sets[s]->ctls[m]->has_cgns_prefix)
				return true;
	return false;
}

/* Permissions as dumped, where they differ (some files may not be chmod-ed at all). */
static int restore_perms(int hfd, const char *path, const CgroupPerms *perms)
{
	struct stat st;

	if (!perms)
		return 0;
	if (fstatat(hfd, path, &st, 0)) {
		pr_perror("cgroup file %s", path);
		return -errno;
	}
	if ((st.st_mode & 07777) != (perms->mode & 07777) &&
	    fchmodat(hfd, path, perms->mode & 07777, 0)) {
		pr_perror("cgroup file %s: cannot chmod it to %#o", path, perms->mode & 07777);
		return -errno;
	}
	if ((st.st_uid != perms->uid || st.st_gid != perms->gid) &&
	    fchownat(hfd, path, perms->uid, perms->gid, 0)) {
		pr_perror("cgroup file %s: cannot chown it to %u:%u", path, perms->uid, perms->gid);
		return -errno;
	}
	return 0;
}

/*
 * Write a property, one line at a time where the kernel takes one per write
 * (devices.allow, net_prio.ifpriomap). EOPNOTSUPP: a knob the kernel keeps for reading
 * only now (memory.kmem.limit_in_bytes), as CRIU skips it.
 */
static int write_prop(int hfd, const char *file, const char *value, bool per_line)
{
	const char *line = value;

	do {
		size_t len = per_line ? strcspn(line, "\n") : strlen(line);
		int ret = len ? write_cg_file(hfd, file, line, len) : 0;

		if (ret == -EOPNOTSUPP) {
			pr_warn("cgroup file %s does not take \"%.*s\" any more: skipped\n", file,
				(int)len, line);
		} else if (ret) {
			pr_err("cgroup file %s: cannot write \"%.*s\": %s\n", file, (int)len, line,
			       strerror(-ret));
			return ret;
		}
		line += len + (line[len] == '\n');
	} while (per_line && *line);
	return 0;
}

/* Upstream's images hold cgroup.subtree_control as read ("pids memory"): enable each. */
static int restore_subtree_control(int hfd, const char *path, const char *value)
{
	char file[PATH_MAX], word[64];
	int ret = 0;

	snprintf(file, sizeof(file), "%s/cgroup.subtree_control", rel_path(path));
	while (!ret && *value) {
		size_t len = strcspn(value, " ");

		if (len && len < sizeof(word) - 1) {
			snprintf(word, sizeof(word), "+%.*s", (int)len, value);
			ret = write_prop(hfd, file, word, false);
		}
		value += len + (value[len] == ' ');
	}
	return ret;
}

/* The property of the directory path: its permissions, then its value. */
static int restore_prop(int hfd, const char *path, const CgroupPropEntry *p)
{
	char file[PATH_MAX];
	int ret;

	if (strchr(p->name, '/') ||
	    snprintf(file, sizeof(file), "%s/%s", rel_path(path), p->name) >= (int)sizeof(file)) {
		pr_err("cgroup.img: bad property \"%s\" of cgroup %s\n", p->name, path);
		return -EINVAL;
	}
	/*
	 * The kernel's defaults, which CRIU does not write either; a v2 cgroup.type other than
	 * "threaded" (the one the kernel takes); and the freezer's state (upstream's images
	 * have it), which restore leaves thawed.
	 */
	if ((!strcmp(p->name, "memory.swappiness") && !strcmp(p->value, "60")) ||
	    (!strcmp(p->name, "memory.oom_control") && !strcmp(p->value, "0")) ||
	    (!strcmp(p->name, "cgroup.type") && strcmp(p->value, "threaded")) ||
	    !strcmp(p->name, "freezer.state") || !strcmp(p->name, "cgroup.freeze"))
		return 0;
	if (!strcmp(p->name, "cgroup.subtree_control") && p->value[0] && p->value[0] != '+')
		return restore_subtree_control(hfd, path, p->value);
	if (!strcmp(p->name, "devices.list")) {
		/* Only the whole list can be read: deny everything, allow it back line by line. */
		snprintf(file, sizeof(file), "%s/devices.deny", rel_path(path));
		ret = write_prop(hfd, file, "a", false);
		snprintf(file, sizeof(file), "%s/devices.allow", rel_path(path));
		return ret ?: write_prop(hfd, file, p->value, true);
	}
	ret = restore_perms(hfd, file, p->perms);
	if (ret || perms_only(p->name))
		return ret;
	pr_debug("cgroup %s: %s = \"%s\"\n", path, p->name, p->value);
	return write_prop(hfd, file, p->value, !strcmp(p->name, "net_prio.ifpriomap"));
}

static int note_made_dir(struct cg_hier *h, const char *path)
{
	struct made_dir *grown = realloc(made_dirs, (nr_made_dirs + 1) * sizeof(*grown));

	if (grown)
		made_dirs = grown;
	if (!grown || !(made_dirs[nr_made_dirs].path = strdup(path))) {
		pr_err("no memory for cgroup %s\n", path);
		return -ENOMEM;
	}
	made_dirs[nr_made_dirs++].h = h;
	return 0;
}

/* path and the directories above it that are missing (a top dir_name may be "a/b"). */
static int make_dirs(struct cg_hier *h, const char *path)
{
	char *p = strdup(path), *slash;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (slash = strchr(p, '/'); !ret; slash = strchr(slash + 1, '/')) {
		if (slash)
			*slash = '\0';
		if (!mkdirat(h->fd, p, 0755)) {
			pr_info("cgroup %s of \"%s\" created\n", p, h->name);
			ret = note_made_dir(h, p);
		} else if (errno != EEXIST) {
			pr_perror("cannot create cgroup %s of \"%s\"", p, h->name);
			ret = -errno;
		}
		if (!slash)
			break;
		*slash = '/';
	}
	free(p);
	return ret;
}

/*
 * One directory as the mode says, then those below it: a missing one is an error for
 * none and props, else it is made; one that exists is one for strict; properties are
 * set in a directory criu made, and in any for props and full.
 */
static int prepare_dir(struct cg_hier *h, const char *parent, const CgroupDirEntry *e)
{
	char *path = path_join(parent, e->dir_name);
	bool exists, set_props;
	int ret = 0;

	if (!path)
		return -ENOMEM;
	exists = !*path || !faccessat(h->fd, path, F_OK, 0);
	if (!exists &&
	    (opts.manage_cgroups == CG_MODE_NONE || opts.manage_cgroups == CG_MODE_PROPS)) {
		pr_err("cgroup /%s of \"%s\" does not exist (--manage-cgroups=%s does not create "
		       "it)\n",
		       path, h->name, mode_name());
		ret = -ENOENT;
	} else if (exists && *path && opts.manage_cgroups == CG_MODE_STRICT) {
		pr_err("cgroup /%s of \"%s\" exists already (--manage-cgroups=strict)\n", path,
		       h->name);
		ret = -EEXIST;
	} else if (!exists) {
		ret = make_dirs(h, path);
	}
	set_props = *path && (!exists || opts.manage_cgroups == CG_MODE_PROPS ||
			      opts.manage_cgroups == CG_MODE_FULL);
	if (!ret && *path && opts.manage_cgroups != CG_MODE_NONE)
		ret = restore_perms(h->fd, path, e->dir_perms);
	for (size_t i = 0; !ret && set_props && i < e->n_properties; i++)
		ret = restore_prop(h->fd, path, e->properties[i]);
	for (size_t i = 0; !ret && i < e->n_children; i++)
		ret = prepare_dir(h, path, e->children[i]);
	free(path);
	return ret;
}

int cg_restore_prepare(void)
{
	int ret = 0;

	if (!rst_cg)
		return 0;
	pr_info("restoring cgroups (--manage-cgroups=%s)\n", mode_name());
	for (size_t i = 0; i < rst_cg->n_controllers && !ret; i++) {
		CgControllerEntry *c = rst_cg->controllers[i];

		/* Each one opened now: the tasks forked from here on find it open (cgroup ns). */
		int fd = hier_fd(&hiers[rst_hiers[i]]);

		ret = fd < 0 ? fd : 0;
		for (size_t d = 0; !ret && d < c->n_dirs; d++)
			ret = prepare_dir(&hiers[rst_hiers[i]], "", c->dirs[d]);
	}
	return ret;
}

/* Write pid into file ("cgroup.procs", "tasks", "cgroup.threads") of the cgroup path. */
static int move_into(const CgMemberEntry *m, const char *path, const char *file, pid_t pid)
{
	struct cg_hier *h = member_hier(m);
	char where[PATH_MAX], num[16];
	int ret, fd = h ? hier_fd(h) : -ENOENT;

	if (fd < 0)
		return fd;
	snprintf(where, sizeof(where), "%s/%s", rel_path(path), file);
	snprintf(num, sizeof(num), "%d", pid);
	ret = write_cg_file(fd, where, num, strlen(num));
	if (ret)
		pr_err("cannot move %d into cgroup %s of \"%s\": %s\n", pid, path, m->name,
		       strerror(-ret));
	return ret;
}

/* The set a task lives in before it is moved: its parent's, or criu's for the root. */
static uint32_t inherited_set(const struct pstree_item *item)
{
	const struct pstree_item *p = item->parent;

	/* Zombies have no set: their parent's is the one forked from. */
	while (p && !p->image->cg_set)
		p = p->parent;
	return p ? p->image->cg_set : rst_criu_set;
}

static const CgSetEntry *task_set(uint32_t id, pid_t img_pid)
{
	const CgSetEntry *set = find_rst_set(id);

	if (!set)
		pr_err("core-%d.img: cgroup set %u is not in cgroup.img\n", img_pid, id);
	return set;
}

int cg_restore_task(const struct pstree_item *item, pid_t host)
{
	uint32_t id = item->image->cg_set;
	const CgSetEntry *set;
	int ret = 0;

	if (opts.manage_cgroups == CG_MODE_IGNORE || !id || id == inherited_set(item))
		return 0;
	set = task_set(id, item->pid);
	if (!set)
		return -ENOENT;
	for (size_t i = 0; i < set->n_ctls && !ret; i++)
		ret = move_into(set->ctls[i], set->ctls[i]->path, "cgroup.procs", host);
	if (!ret)
		pr_info("task %d moved into cgroup set %u\n", item->pid, id);
	return ret;
}

static const CgMemberEntry *member_named(const CgSetEntry *set, const char *name)
{
	for (size_t i = 0; i < set->n_ctls; i++)
		if (!strcmp(set->ctls[i]->name, name))
			return set->ctls[i];
	return NULL;
}

/* v1 moves a thread alone through tasks; v2, in a threaded subtree, cgroup.threads. */
static int move_thread(const CgSetEntry *own, const CgSetEntry *proc, pid_t tid)
{
	int ret = 0;

	for (size_t i = 0; i < own->n_ctls && !ret; i++) {
		const CgMemberEntry *m = own->ctls[i],
				    *pm = proc ? member_named(proc, m->name) : NULL;

		if (pm && !strcmp(pm->path, m->path))
			continue;
		ret = move_into(m, m->path, is_v2(m->name) ? "cgroup.threads" : "tasks", tid);
	}
	return ret;
}

int cg_restore_threads(const struct pstree_item *item, const pid_t *host_tids)
{
	const struct task_image *ti = item->image;
	uint32_t proc_id = ti->cg_set;
	int ret = 0;

	if (opts.manage_cgroups == CG_MODE_IGNORE || !rst_cg)
		return 0;
	for (unsigned int i = 1; i < item->nr_threads && !ret; i++) {
		uint32_t id = ti->threads[i].cg_set;
		const CgSetEntry *set;

		if (!id || id == proc_id)
			continue;
		set = task_set(id, item->threads[i]);
		ret = set ? move_thread(set, find_rst_set(proc_id), host_tids[i]) : -ENOENT;
		if (!ret)
			pr_info("thread %d moved into cgroup set %u\n", item->threads[i], id);
	}
	return ret;
}

int cg_restore_enter_ns(const struct pstree_item *root)
{
	const CgSetEntry *set = task_set(root->image->cg_set, root->pid);
	int ret = 0;

	if (!set)
		return -ENOENT;
	/* The namespace's root is the cgroup unshare() is called in: go there first. */
	for (size_t i = 0; i < set->n_ctls && !ret; i++) {
		const CgMemberEntry *m = set->ctls[i];
		char *top;

		if (!m->has_cgns_prefix)
			continue;
		top = strndup(m->path, m->cgns_prefix);
		ret = top ? move_into(m, top, "cgroup.procs", 0) : -ENOMEM;
		free(top);
	}
	if (!ret && unshare(CLONE_NEWCGROUP)) {
		pr_perror("cannot create the cgroup namespace of the root");
		ret = -errno;
	}
	/* The mounts criu made still show the whole hierarchies: full paths. */
	for (size_t i = 0; i < set->n_ctls && !ret; i++)
		ret = move_into(set->ctls[i], set->ctls[i]->path, "cgroup.procs", 0);
	return ret;
}

void cg_restore_fini(bool failed)
{
	while (nr_made_dirs--) {
		struct made_dir *d = &made_dirs[nr_made_dirs];

		if (failed && unlinkat(d->h->fd, d->path, AT_REMOVEDIR))
			pr_warn("cannot remove cgroup %s of \"%s\" made by this restore: %s\n",
				d->path, d->h->name, strerror(errno));
		free(d->path);
	}
	free(made_dirs);
	made_dirs = NULL;
	nr_made_dirs = 0;
	free(rst_hiers);
	rst_hiers = NULL;
	pb_free(NULL, rst_cg);
	rst_cg = NULL;
	free_hiers();
}
