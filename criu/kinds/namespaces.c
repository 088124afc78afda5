/*
 * The tree's namespaces: which ones its tasks live in and what restore could not give back
 * (dump), which ones the images name and which the root is to be given (restore), and the
 * calls into each kind (struct ns_kind) around them.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_options.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"

/* One file per kind (ns-*.c), given by kinds.c (ns_set_kinds()). */
static const struct ns_kind *const *ns_kinds;

void ns_set_kinds(const struct ns_kind *const kinds[NS_KINDS])
{
	ns_kinds = kinds;
}

/*
 * The ids of criu's own namespaces, as this criu has always numbered them; the tree's own
 * namespaces get ids from NS_FIRST_OWN_ID on.
 */
static const uint32_t criu_ns_ids[NS_KINDS] = {
	[NS_PID] = 1,  [NS_NET] = 2, [NS_IPC] = 3,  [NS_UTS] = 4,
	[NS_TIME] = 5, [NS_MNT] = 6, [NS_USER] = 7, [NS_CGROUP] = 8,
};
#define NS_FIRST_OWN_ID 9

static struct ns_id *ns_ids;
/* The root's namespaces of its own, by kind; NULL where it lives in criu's. */
static struct ns_id *root_own[NS_KINDS];

/* Where each kind's id is: in struct task_ids, and in task_kobj_ids_entry with its has_. */
#define NS_ID_FIELD(f)                                                                             \
	{ offsetof(struct task_ids, f), offsetof(TaskKobjIdsEntry, f),                             \
	  offsetof(TaskKobjIdsEntry, has_##f) }
static const struct {
	size_t ids, entry, entry_has;
} ns_id_fields[NS_KINDS] = {
	[NS_PID] = NS_ID_FIELD(pid_ns_id),	 [NS_NET] = NS_ID_FIELD(net_ns_id),
	[NS_IPC] = NS_ID_FIELD(ipc_ns_id),	 [NS_UTS] = NS_ID_FIELD(uts_ns_id),
	[NS_MNT] = NS_ID_FIELD(mnt_ns_id),	 [NS_USER] = NS_ID_FIELD(user_ns_id),
	[NS_CGROUP] = NS_ID_FIELD(cgroup_ns_id), [NS_TIME] = NS_ID_FIELD(time_ns_id),
};

static uint32_t *ids_field(struct task_ids *ids, enum ns_kind_nr k)
{
	return (uint32_t *)((char *)ids + ns_id_fields[k].ids);
}

static uint32_t task_ns_id(const struct task_ids *ids, enum ns_kind_nr k)
{
	return *(const uint32_t *)((const char *)ids + ns_id_fields[k].ids);
}

/* 0 where the entry has no id of that kind. */
static uint32_t entry_ns_id(const TaskKobjIdsEntry *e, enum ns_kind_nr k)
{
	const char *base = (const char *)e;

	if (!*(const protobuf_c_boolean *)(base + ns_id_fields[k].entry_has))
		return 0;
	return *(const uint32_t *)(base + ns_id_fields[k].entry);
}

static struct ns_id *add_ns(const struct ns_kind *kind, uint32_t id)
{
	struct ns_id *ns = calloc(1, sizeof(*ns));

	if (!ns) {
		pr_err("no memory for a %s namespace\n", kind->name);
		return NULL;
	}
	ns->kind = kind;
	ns->id = id;
	ns->next = ns_ids;
	ns_ids = ns;
	return ns;
}

void ns_criu_ids(struct task_ids *ids)
{
	for (int k = 0; k < NS_KINDS; k++)
		*ids_field(ids, k) = criu_ns_ids[k];
}

static void close_joined(void);

void ns_fini(void)
{
	while (ns_ids) {
		struct ns_id *next = ns_ids->next;

		if (ns_ids->kind->fini)
			ns_ids->kind->fini(ns_ids);
		free(ns_ids);
		ns_ids = next;
	}
	for (int k = 0; k < NS_KINDS; k++)
		root_own[k] = NULL;
	close_joined();
}

const struct ns_id *ns_root_own(enum ns_kind_nr k)
{
	return root_own[k];
}

static bool nested_ns(const struct ns_id *ns);

const struct ns_id *ns_tree_next(enum ns_kind_nr k, const struct ns_id *prev)
{
	const struct ns_id *ns = ns_ids;

	if (!prev)
		return root_own[k];
	/* After the root's, the first nested one of the list; else the one after prev. */
	if (prev != root_own[k]) {
		while (ns && ns != prev)
			ns = ns->next;
		ns = ns ? ns->next : NULL;
	}
	for (; ns; ns = ns->next)
		if (ns->kind == ns_kinds[k] && nested_ns(ns))
			return ns;
	return NULL;
}

/*
 * --join-ns: the existing namespace of kind k the tree is restored into (its path), or
 * NULL. A joined namespace stands for the tree's own of the kind, which the dump must have
 * had; its state is the joined one's, the images' is not put in (no names set, no SysV
 * objects made, no clock offsets). Net joins through its own kind (ns-net.c: its lock and
 * links must know); the others here: criu enters the namespace around the fork of the
 * root (a time namespace too: setns() makes it criu's and its children's at once), as
 * CRIU's root setns()es into it.
 */
static const char *join_path(int k)
{
	switch (k) {
	case NS_NET:
		return opts.join_ns.net;
	case NS_UTS:
		return opts.join_ns.uts;
	case NS_IPC:
		return opts.join_ns.ipc;
	case NS_TIME:
		return opts.join_ns.time;
	}
	return NULL;
}

/* The namespaces --join-ns names, opened when collected; criu's own, while it is in them. */
static int join_fd[NS_KINDS] = {-1, -1, -1, -1, -1, -1, -1, -1};
static int join_own_fd[NS_KINDS] = {-1, -1, -1, -1, -1, -1, -1, -1};

static bool joined_here(int k)
{
	return k != NS_NET && join_path(k);
}

#ifndef NS_GET_NSTYPE
#define NS_GET_NSTYPE _IO(0xb7, 0x3)
#endif

/* Restore, before anything is made: what --join-ns names must be a namespace of its kind. */
static int open_joined(int k)
{
	const char *path = join_path(k);
	int fd, type;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("--join-ns %s:%s: cannot join it", ns_kinds[k]->name, path);
		return -errno ?: -EINVAL;
	}
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type < 0 || (unsigned long)type != ns_kinds[k]->clone_flag) {
		pr_err("--join-ns %s:%s: cannot join it: not a %s namespace\n", ns_kinds[k]->name,
		       path, ns_kinds[k]->name);
		close(fd);
		return -EINVAL;
	}
	if (joined_here(k))
		join_fd[k] = fd;
	else
		close(fd);
	return 0;
}

static void close_joined(void)
{
	for (int k = 0; k < NS_KINDS; k++) {
		if (join_fd[k] >= 0)
			close(join_fd[k]);
		if (join_own_fd[k] >= 0)
			close(join_own_fd[k]);
		join_fd[k] = join_own_fd[k] = -1;
	}
}

/* Main process, right before the fork of the root: into the joined namespace of kind k. */
static int enter_joined(int k)
{
	const struct ns_kind *kind = ns_kinds[k];
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind->name);
	join_own_fd[k] = open(path, O_RDONLY | O_CLOEXEC);
	if (join_own_fd[k] < 0) {
		pr_perror("cannot open criu's own %s namespace", kind->name);
		return -errno;
	}
	if (setns(join_fd[k], kind->clone_flag)) {
		pr_perror("--join-ns %s:%s: cannot join it", kind->name, join_path(k));
		close(join_own_fd[k]);
		join_own_fd[k] = -1;
		return -errno;
	}
	pr_info("%s namespace %u: the root is born into %s\n", kind->name, root_own[k]->id,
		join_path(k));
	return 0;
}

static int leave_joined(int k)
{
	int ret = 0;

	if (join_own_fd[k] < 0)
		return 0;
	if (setns(join_own_fd[k], ns_kinds[k]->clone_flag)) {
		pr_perror("cannot go back to criu's own %s namespace", ns_kinds[k]->name);
		ret = -errno;
	}
	close(join_own_fd[k]);
	join_own_fd[k] = -1;
	return ret;
}

/* Restore: whether criu enters the root's namespace of kind k around its fork. */
static bool root_entered(int k)
{
	const struct ns_kind *kind = root_own[k]->kind;

	if (joined_here(k))
		return true;
	return kind->enter && !(kind->cloned && kind->cloned(root_own[k]));
}

unsigned long ns_root_clone_flags(void)
{
	unsigned long flags = 0;

	/* A kind entered around the fork (time) or made by the root cannot be asked of clone(). */
	for (int k = 0; k < NS_KINDS; k++)
		if (root_own[k] && !root_entered(k) && !root_own[k]->kind->unshared_in_root)
			flags |= root_own[k]->kind->clone_flag;
	return flags;
}

/* ------------------------------------------------------------------ dump ---- */

/* The inode of /proc/WHO/ns/NAME; 0 where the kernel has no such namespace. */
static int ns_inode(const char *who, const char *name, uint64_t *kid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%s/ns/%s", who, name);
	if (stat(path, &st)) {
		int err = errno;

		*kid = 0;
		if (err == ENOENT)
			return 0;
		pr_perror("cannot stat %s", path);
		return -err;
	}
	*kid = st.st_ino;
	return 0;
}

static int task_ns_inode(pid_t pid, const char *name, uint64_t *kid)
{
	char who[16];

	snprintf(who, sizeof(who), "%d", pid);
	return ns_inode(who, name, kid);
}

static struct ns_id *find_dump_ns(const struct ns_kind *kind, uint64_t kid)
{
	for (struct ns_id *ns = ns_ids; ns; ns = ns->next)
		if (ns->kind == kind && ns->kid == kid)
			return ns;
	return NULL;
}

/* The ids of one live task's namespaces, each namespace added as it is first seen. */
static int collect_task_ns(struct pstree_item *item, const uint64_t *criu_kids, uint32_t *next_id)
{
	for (int k = 0; k < NS_KINDS; k++) {
		const struct ns_kind *kind = ns_kinds[k];
		struct ns_id *ns;
		uint64_t kid;
		int ret;

		ret = task_ns_inode(item->pid, kind->name, &kid);
		if (ret)
			return ret;
		ns = find_dump_ns(kind, kid);
		if (!ns) {
			bool criu = kid == criu_kids[k];

			ns = add_ns(kind, criu ? criu_ns_ids[k] : (*next_id)++);
			if (!ns)
				return -ENOMEM;
			ns->criu = criu;
			ns->kid = kid;
			ns->pid = item->pid;
			pr_info("%s namespace %u (inode %llu%s) of task %d\n", kind->name, ns->id,
				(unsigned long long)kid, criu ? ", criu's" : "", item->pid);
		}
		*ids_field(&item->ids, k) = ns->id;
	}
	return 0;
}

static struct ns_id *find_ns_by_id(const struct ns_kind *kind, uint32_t id);

/*
 * A task in a namespace of a nested kind other than its root's: restore makes it below
 * the root's, which must then be one of its own; criu's own cannot be made again.
 */
static int check_nested(const struct pstree_item *item, enum ns_kind_nr k)
{
	const struct ns_kind *kind = ns_kinds[k];
	const struct ns_id *root_ns = find_ns_by_id(kind, task_ns_id(&root_item->ids, k));
	const struct ns_id *ns = find_ns_by_id(kind, task_ns_id(&item->ids, k));

	if (!root_ns->criu && !ns->criu)
		return 0;
	pr_err("task %d is in %s namespace %u and the tree's root %d in %u: nested %s "
	       "namespaces need the root in one of its own, and no task in criu's\n",
	       item->pid, kind->name, ns->id, root_item->pid, root_ns->id, kind->name);
	return -ENOTSUP;
}

/* Only the root may have namespaces of its own: restore creates them for it alone. */
static int check_not_nested(const struct pstree_item *item)
{
	for (int k = 0; k < NS_KINDS; k++) {
		uint32_t id = task_ns_id(&item->ids, k);
		uint32_t root_id = task_ns_id(&root_item->ids, k);

		if (id == root_id)
			continue;
		if (ns_kinds[k]->nested) {
			int ret = check_nested(item, k);

			if (ret)
				return ret;
			continue;
		}
		pr_err("task %d is in another %s namespace than the tree's root %d: nested %s "
		       "namespaces are not supported\n",
		       item->pid, ns_kinds[k]->name, root_item->pid, ns_kinds[k]->name);
		return -ENOTSUP;
	}
	return 0;
}

/*
 * A task that unshared a pid or time namespace without being born into it: its children
 * would be, and restore has no way to give that back.
 */
static int check_for_children(const struct pstree_item *item)
{
	static const enum ns_kind_nr kinds[] = { NS_PID, NS_TIME };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *name = ns_kinds[kinds[i]]->name;
		char for_children[32];
		uint64_t own, next;
		int ret;

		snprintf(for_children, sizeof(for_children), "%s_for_children", name);
		ret = task_ns_inode(item->pid, name, &own);
		if (!ret)
			ret = task_ns_inode(item->pid, for_children, &next);
		if (ret)
			return ret;
		/* The kernel hides a pid namespace that has no init yet: it is no less there. */
		if (own == next || !own)
			continue;
		/* One whose init it forked is nested (ns-pid.c), and restore sets it back. */
		if (kinds[i] == NS_PID && pidns_for_children_init(item, next))
			continue;
		pr_err("task %d has unshared a %s namespace that its children would be born into "
		       "(/proc/%d/ns/%s): not supported\n",
		       item->pid, name, item->pid, for_children);
		return -ENOTSUP;
	}
	return 0;
}

static struct ns_id *find_ns_by_id(const struct ns_kind *kind, uint32_t id)
{
	for (struct ns_id *ns = ns_ids; ns; ns = ns->next)
		if (ns->kind == kind && ns->id == id)
			return ns;
	return NULL;
}

/* ns_pre_dump_collect(): only the kinds whose dump_check() a pre-dump needs are checked. */
static bool collecting_for_pre_dump;

static int run_dump_check(struct ns_id *ns)
{
	if (!ns->kind->dump_check || (collecting_for_pre_dump && !ns->kind->pre_dump_check))
		return 0;
	return ns->kind->dump_check(ns);
}

/* The root's namespaces that are not criu's: each is checked by its kind and dumped. */
static int check_root_own(void)
{
	for (int k = 0; k < NS_KINDS; k++) {
		struct ns_id *ns = find_ns_by_id(ns_kinds[k], task_ns_id(&root_item->ids, k));
		int ret;

		if (!ns || ns->criu)
			continue;
		root_own[k] = ns;
		ret = run_dump_check(ns);
		if (ret)
			return ret;
		pr_info("the tree's root lives in %s namespace %u of its own: it is dumped\n",
			ns->kind->name, ns->id);
	}
	return 0;
}

/* A namespace of a nested kind that is neither criu's nor the root's (check_nested()). */
static bool nested_ns(const struct ns_id *ns)
{
	for (int k = 0; k < NS_KINDS; k++)
		if (ns->kind == ns_kinds[k])
			return ns->kind->nested && !ns->criu && ns != root_own[k];
	return false;
}

/* After the root's: the nested namespaces' dump_check(). */
static int check_nested_own(void)
{
	for (struct ns_id *ns = ns_ids; ns; ns = ns->next) {
		int ret = nested_ns(ns) ? run_dump_check(ns) : 0;

		if (ret)
			return ret;
		if (nested_ns(ns))
			pr_info("task %d lives in nested %s namespace %u: it is dumped\n", ns->pid,
				ns->kind->name, ns->id);
	}
	return 0;
}

int ns_dump_collect(void)
{
	uint64_t criu_kids[NS_KINDS];
	uint32_t next_id = NS_FIRST_OWN_ID;
	struct pstree_item *item;
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++)
		ret = ns_inode("self", ns_kinds[k]->name, &criu_kids[k]);
	for (item = root_item; item && !ret; item = pstree_next(item))
		if (!item->zombie)
			ret = collect_task_ns(item, criu_kids, &next_id);
	for (item = root_item; item && !ret; item = pstree_next(item))
		if (!item->zombie)
			ret = check_not_nested(item);
	for (item = root_item; item && !ret; item = pstree_next(item))
		if (!item->zombie)
			ret = check_for_children(item);
	ret = ret ?: check_root_own();
	return ret ?: check_nested_own();
}

int ns_pre_dump_collect(void)
{
	int ret;

	collecting_for_pre_dump = true;
	ret = ns_dump_collect();
	collecting_for_pre_dump = false;
	return ret;
}

static int open_ns(const struct ns_id *ns)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", ns->pid, ns->kind->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		pr_perror("%s namespace %u: cannot open %s", ns->kind->name, ns->id, path);
	return fd;
}

static int join_ns(const struct ns_id *ns, int fd)
{
	int ret = setns(fd, ns->kind->clone_flag);

	if (ret)
		pr_perror("%s namespace %u: cannot join it", ns->kind->name, ns->id);
	close(fd);
	return ret;
}

/*
 * In the child: join the namespace through a task of the tree in it, then dump it. The
 * tree's own user namespace first: what the kernel shows of ids (SysV owners) is then shown
 * as the tree sees it, as the images keep it. Both opened before either is joined: once in
 * the tree's user namespace, criu may no longer open what its tasks hold.
 */
static int join_and_dump(const struct ns_id *ns)
{
	const struct ns_id *user = root_own[NS_USER] != ns ? root_own[NS_USER] : NULL;
	int user_fd = user ? open_ns(user) : -1, fd = open_ns(ns);
	int ret;

	if (fd < 0 || (user && user_fd < 0) || (user && join_ns(user, user_fd)) ||
	    join_ns(ns, fd))
		return -1;
	ret = ns->kind->dump(ns);
	if (!ret)
		pr_info("%s namespace %u dumped\n", ns->kind->name, ns->id);
	return ret;
}

/*
 * A child joins the namespace, criu stays where it is (setns() into some kinds cannot be
 * undone, and a multi-threaded process cannot join others). The child says what failed.
 */
static int dump_one_ns(const struct ns_id *ns)
{
	pid_t child;
	int status;

	child = fork();
	if (child < 0) {
		pr_perror("%s namespace %u: cannot fork to dump it", ns->kind->name, ns->id);
		return -errno;
	}
	if (child == 0)
		_exit(join_and_dump(ns) ? 1 : 0);
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("%s namespace %u: waitpid", ns->kind->name, ns->id);
			return -ECHILD;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (!WIFEXITED(status))
		pr_err("%s namespace %u: its dumper was killed by signal %d\n", ns->kind->name,
		       ns->id, WTERMSIG(status));
	return -EIO;
}

int ns_dump_images(void)
{
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++) {
		const struct ns_kind *kind = root_own[k] ? root_own[k]->kind : NULL;

		if (kind && kind->dump)
			ret = kind->dump_from_criu ? kind->dump(root_own[k]) : dump_one_ns(root_own[k]);
	}
	for (struct ns_id *ns = ns_ids; ns && !ret; ns = ns->next)
		if (nested_ns(ns) && ns->kind->dump)
			ret = ns->kind->dump_from_criu ? ns->kind->dump(ns) : dump_one_ns(ns);
	return ret;
}

int ns_dump_file_id(const char *name, uint64_t kid, uint32_t *id, uint32_t *cflag)
{
	for (int k = 0; k < NS_KINDS; k++) {
		const struct ns_id *ns;

		if (strcmp(ns_kinds[k]->name, name))
			continue;
		ns = find_dump_ns(ns_kinds[k], kid);
		if (!ns)
			return -ENOENT;
		/* Restore opens the opening task's own (ns_restore_file_name()): the root's. */
		if (nested_ns(ns)) {
			pr_err("a file of %s namespace %u, a nested one, is not supported\n", name,
			       ns->id);
			return -ENOTSUP;
		}
		*id = ns->id;
		*cflag = ns_kinds[k]->clone_flag;
		return 0;
	}
	return -ENOENT;
}

/* --------------------------------------------------------------- restore ---- */

const char *ns_restore_file_name(uint32_t ns_id, uint32_t cflag, uint32_t file)
{
	for (int k = 0; k < NS_KINDS; k++) {
		uint32_t tree_id = task_ns_id(&root_item->ids, k);

		if (ns_kinds[k]->clone_flag != cflag)
			continue;
		/* Every task lives in the root's namespaces (nested ones are refused). */
		if (ns_id == tree_id)
			return ns_kinds[k]->name;
		pr_err("files.img: namespace file %u names %s namespace %u, not the one the tree "
		       "lives in (%u)\n",
		       file, ns_kinds[k]->name, ns_id, tree_id);
		return NULL;
	}
	pr_err("files.img: namespace file %u names a namespace of unknown kind (clone flag %#x)\n",
	       file, cflag);
	return NULL;
}

/* A namespace of the root's that is not the dumping criu's: it is to be created. */
static int collect_root_own(enum ns_kind_nr k, uint32_t id)
{
	const struct ns_kind *kind = ns_kinds[k];
	struct ns_id *ns;

	ns = add_ns(kind, id);
	if (!ns)
		return -ENOMEM;
	root_own[k] = ns;
	if (joined_here(k)) {
		pr_info("the root joins %s for its %s namespace %u: its images are not read\n",
			join_path(k), kind->name, id);
		return 0;
	}
	pr_info("the root gets %s namespace %u of its own\n", kind->name, id);
	return kind->collect ? kind->collect(ns) : 0;
}

/*
 * A task in a namespace of a nested kind other than the root's: made below the root's
 * own (which it must have), collected once.
 */
static int collect_nested(const struct pstree_item *item, enum ns_kind_nr k, uint32_t id,
			  const TaskKobjIdsEntry *criu_ids)
{
	const struct ns_kind *kind = ns_kinds[k];
	struct ns_id *ns;

	if (find_ns_by_id(kind, id))
		return 0;
	if (!root_own[k] || id == entry_ns_id(criu_ids, k)) {
		pr_err("ids-%d.img: the task is in %s namespace %u, the root in %u: nested %s "
		       "namespaces need the root in one of its own, and no task in criu's\n",
		       item->pid, kind->name, id, task_ns_id(&root_item->ids, k), kind->name);
		return -ENOTSUP;
	}
	ns = add_ns(kind, id);
	if (!ns)
		return -ENOMEM;
	pr_info("task %d gets nested %s namespace %u\n", item->pid, kind->name, id);
	return kind->collect ? kind->collect(ns) : 0;
}

/* Namespace ids 0 (a task without ids-PID.img, an image without the field) say nothing. */
static int check_restored_nested(const struct pstree_item *item,
				 const TaskKobjIdsEntry *criu_ids)
{
	for (int k = 0; k < NS_KINDS; k++) {
		uint32_t id = task_ns_id(&item->ids, k);
		uint32_t root_id = task_ns_id(&root_item->ids, k);

		if (!id || !root_id || id == root_id)
			continue;
		if (ns_kinds[k]->nested) {
			int ret = collect_nested(item, k, id, criu_ids);

			if (ret)
				return ret;
			continue;
		}
		pr_err("ids-%d.img: the task is in another %s namespace (id %u) than the root "
		       "(%u): nested %s namespaces are not supported\n",
		       item->pid, ns_kinds[k]->name, id, root_id, ns_kinds[k]->name);
		return -ENOTSUP;
	}
	return 0;
}

int ns_restore_collect(const TaskKobjIdsEntry *criu_ids)
{
	struct pstree_item *item;
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++)
		if (join_path(k))
			ret = open_joined(k);
	for (int k = 0; k < NS_KINDS && !ret && criu_ids; k++) {
		uint32_t id = task_ns_id(&root_item->ids, k), criu_id = entry_ns_id(criu_ids, k);

		if (id && criu_id && id != criu_id)
			ret = collect_root_own(k, id);
	}
	for (item = pstree_next(root_item); item && !ret; item = pstree_next(item))
		ret = check_restored_nested(item, criu_ids);
	/* The joined namespace stands for the tree's own: there must be one. */
	for (int k = 0; k < NS_KINDS && !ret; k++) {
		if (join_path(k) && !root_own[k]) {
			pr_err("--join-ns %s:%s: the dump's tree has no %s namespace of its own\n",
			       ns_kinds[k]->name, join_path(k), ns_kinds[k]->name);
			ret = -EINVAL;
		}
	}
	/* --root is where a mount namespace is built: without one it would go unheeded. */
	if (!ret && opts.root && strcmp(opts.root, "/") && !root_own[NS_MNT]) {
		pr_err("--root %s: the dump's root task has no mount namespace of its own to "
		       "restore there\n",
		       opts.root);
		ret = -EINVAL;
	}
	if (ret)
		ns_fini();
	return ret;
}

int ns_enter_before_root(void)
{
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++)
		if (root_own[k] && root_entered(k))
			ret = joined_here(k) ? enter_joined(k) : ns_kinds[k]->enter(root_own[k]);
	return ret;
}

static int root_born(int k, pid_t root_host)
{
	const struct ns_id *ns = root_own[k];

	return ns && !joined_here(k) && ns->kind->born ? ns->kind->born(ns, root_host) : 0;
}

int ns_root_born(pid_t root_host)
{
	/*
	 * The user namespace's maps first: the others fill namespaces it owns, whose objects
	 * take their owner from its maps (a net namespace's sysctl files: its root's).
	 */
	int ret = root_born(NS_USER, root_host);

	for (int k = 0; k < NS_KINDS && !ret; k++)
		if (k != NS_USER)
			ret = root_born(k, root_host);
	return ret;
}

int ns_leave_after_root(void)
{
	int ret = 0;

	for (int k = 0; k < NS_KINDS; k++) {
		int err;

		if (!root_own[k] || !root_entered(k))
			continue;
		err = joined_here(k) ? leave_joined(k) : ns_kinds[k]->leave(root_own[k]);
		ret = ret ?: err;
	}
	return ret;
}

int ns_run_in_root(pid_t root_host, const struct ns_id *ns, int (*fn)(const struct ns_id *ns))
{
	char path[64];
	int own, theirs, ret;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", ns->kind->name);
	own = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", root_host, ns->kind->name);
	theirs = open(path, O_RDONLY | O_CLOEXEC);
	if (own < 0 || theirs < 0 || setns(theirs, ns->kind->clone_flag)) {
		pr_perror("cannot enter the %s namespace of the root %d", ns->kind->name, root_host);
		ret = -errno;
	} else {
		ret = fn(ns);
		if (setns(own, ns->kind->clone_flag)) {
			pr_perror("cannot go back to criu's own %s namespace", ns->kind->name);
			ret = ret ?: -errno;
		}
	}
	if (own >= 0)
		close(own);
	if (theirs >= 0)
		close(theirs);
	return ret;
}

int ns_restore_late(pid_t root_host)
{
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++)
		if (root_own[k] && !joined_here(k) && root_own[k]->kind->restore_late)
			ret = ns_run_in_root(root_host, root_own[k],
					     root_own[k]->kind->restore_late);
	return ret;
}

int ns_restore_in_root(void)
{
	int ret = 0;

	for (int k = 0; k < NS_KINDS && !ret; k++)
		if (root_own[k] && !joined_here(k) && root_own[k]->kind->restore)
			ret = root_own[k]->kind->restore(root_own[k]);
	return ret;
}
