/*
 * The process tree: items linked parent/children, the walk over them, collecting a
 * live process's ids, and pstree.img (one entry per process, parents before children).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "proc_parse.h"
#include "pstree.h"
#include "pstree.pb-c.h"
#include "task-image.h"

/* Object ids: 1 is the root_ids' own, tasks count from here. */
#define FIRST_TASK_OBJ_ID 2

struct pstree_item *root_item;

struct pstree_item *pstree_add_item(struct pstree_item *parent, pid_t pid)
{
	struct pstree_item *item = calloc(1, sizeof(*item));

	if (!item) {
		pr_err("no memory for process %d\n", pid);
		return NULL;
	}
	item->pid = pid;
	item->parent = parent;
	if (!parent) {
		root_item = item;
		return item;
	}
	if (parent->last_child)
		parent->last_child->next_sibling = item;
	else
		parent->first_child = item;
	parent->last_child = item;
	return item;
}

bool has_children(struct pstree_item *item)
{
	return item->first_child != NULL;
}

struct pstree_item *pstree_next(struct pstree_item *item)
{
	if (item->first_child)
		return item->first_child;
	/* No children: the next sibling of the nearest ancestor (or self) that has one. */
	for (; item; item = item->parent)
		if (item->next_sibling)
			return item->next_sibling;
	return NULL;
}

static void free_subtree(struct pstree_item *item)
{
	struct pstree_item *child = item->first_child;

	while (child) {
		struct pstree_item *next = child->next_sibling;

		free_subtree(child);
		child = next;
	}
	free(item->threads);
	free(item);
}

void pstree_free(void)
{
	if (root_item)
		free_subtree(root_item);
	root_item = NULL;
}

static int collect_threads(struct pstree_item *item)
{
	char path[64];
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", item->pid);
	dir = opendir(path);
	if (!dir) {
		int err = errno;

		pr_err("cannot list the threads of %d: %s\n", item->pid, strerror(err));
		return -err;
	}
	free(item->threads);
	item->threads = NULL;
	item->nr_threads = 0;
	while ((de = readdir(dir))) {
		pid_t tid = atoi(de->d_name);
		pid_t *grown;

		if (tid <= 0)
			continue;
		grown = realloc(item->threads, (item->nr_threads + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("no memory for the threads of %d\n", item->pid);
			closedir(dir);
			return -ENOMEM;
		}
		item->threads = grown;
		/* The main thread goes first whatever order readdir gives. */
		if (tid == item->pid && item->nr_threads) {
			item->threads[item->nr_threads] = item->threads[0];
			item->threads[0] = tid;
		} else {
			item->threads[item->nr_threads] = tid;
		}
		item->nr_threads++;
	}
	closedir(dir);
	return 0;
}

int pstree_collect_ids(struct pstree_item *item)
{
	struct proc_pid_stat st;
	int ret;

	ret = parse_pid_stat(item->pid, &st);
	if (ret)
		return ret;
	item->ppid = st.ppid;
	item->pgid = st.pgid;
	item->sid = st.sid;
	return collect_threads(item);
}

int pstree_read_children(pid_t pid, pid_t tid, pid_t **children, unsigned int *nr)
{
	char path[64], buf[4096];
	unsigned int pos = 0;
	ssize_t len;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		pr_err("cannot open %s: %s\n", path, strerror(err));
		return -err;
	}
	/* The kernel fills the file in one go; a tree too wide for buf is refused plainly. */
	len = read(fd, buf, sizeof(buf) - 1);
	err = errno;
	close(fd);
	if (len < 0 || len == sizeof(buf) - 1) {
		pr_err("cannot read %s: %s\n", path, len < 0 ? strerror(err) : "too many children");
		return len < 0 ? -err : -E2BIG;
	}
	buf[len] = '\0';
	while (pos < len) {
		char *end;
		long child = strtol(buf + pos, &end, 10);
		pid_t *grown;

		if (end == buf + pos)
			break;
		pos = end - buf;
		grown = realloc(*children, (*nr + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("no memory for the children of %d\n", pid);
			return -ENOMEM;
		}
		*children = grown;
		(*children)[(*nr)++] = child;
	}
	return 0;
}

static int write_one_item(struct cr_img *img, struct pstree_item *item)
{
	PstreeEntry entry = PSTREE_ENTRY__INIT;
	uint32_t *tids;
	unsigned int i;
	int ret;

	tids = calloc(item->nr_threads, sizeof(*tids));
	if (item->nr_threads && !tids) {
		pr_err("no memory for the pstree entry of %d\n", item->pid);
		return -ENOMEM;
	}
	/* Pids as the root's pid namespace numbers them; 0 for one outside it. */
	for (i = 0; i < item->nr_threads; i++)
		tids[i] = pidns_img_pid(item->threads[i]);
	entry.pid = pidns_img_pid(item->pid);
	/* The root's parent is outside the tree: CRIU's images say 0. */
	entry.ppid = item->parent ? pidns_img_pid(item->ppid) : 0;
	entry.pgid = pidns_img_pid(item->pgid);
	entry.sid = pidns_img_pid(item->sid);
	entry.n_threads = item->nr_threads;
	entry.threads = tids;
	ret = pb_write_one(img, &entry);
	free(tids);
	return ret;
}

int pstree_write(void)
{
	struct pstree_item *item;
	struct cr_img *img;
	int ret = 0;

	img = open_image(CR_IMG_PSTREE, O_WRONLY, 0);
	if (!img)
		return -EIO;
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = write_one_item(img, item);
	close_image(img);
	ret = ret ?: pidns_write_nested();
	return ret;
}

struct pstree_item *pstree_find(pid_t pid)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item))
		if (item->pid == pid)
			return item;
	return NULL;
}

/* The root's session or group led from outside the tree: the shell's, given criu's. */
static bool is_outer_id(pid_t id)
{
	return !pstree_find(id) && (id == root_item->sid || id == root_item->pgid);
}

bool pstree_leader_is_dead(pid_t id)
{
	return !pstree_find(id) && !is_outer_id(id);
}

bool pstree_reaps_orphans(const struct pstree_item *item)
{
	if ((item == root_item && pidns_own()) || pidns_nested_init(item))
		return true;
	return item->image && item->image->has_child_subreaper && item->image->child_subreaper;
}

struct pstree_item *pstree_session_adopter(const struct pstree_item *item)
{
	struct pstree_item *leader, *up;

	if (!item->parent || !pstree_reaps_orphans(item->parent) || item->sid == item->pid ||
	    item->sid == item->parent->sid)
		return NULL;
	leader = pstree_find(item->sid);
	if (!leader || leader == item->parent)
		return NULL;
	/*
	 * The helper's orphan goes to the nearest reaper above the leader (which becomes one
	 * only after forking it): that must be the parent.
	 */
	for (up = leader->parent; up && up != item->parent; up = up->parent)
		if (pstree_reaps_orphans(up))
			return NULL;
	return up ? leader : NULL;
}

/*
 * The session item must be born in, 0 for any: its own, or for a session leader the one
 * its children outside its session need it to fork them from (before its setsid()).
 */
static pid_t birth_sid(const struct pstree_item *item)
{
	const struct pstree_item *child;

	if (item->sid != item->pid)
		return item->sid;
	for (child = item->first_child; child; child = child->next_sibling) {
		pid_t sid = pstree_session_adopter(child) ? 0 : birth_sid(child);

		if (sid && sid != item->sid && !pstree_leader_is_dead(sid))
			return sid;
	}
	return 0;
}

bool pstree_born_before_setsid(const struct pstree_item *child)
{
	const struct pstree_item *parent = child->parent;
	pid_t sid;

	if (parent == root_item || parent->sid != parent->pid || pstree_session_adopter(child))
		return false;
	sid = birth_sid(child);
	return sid && sid != parent->sid && !pstree_leader_is_dead(sid);
}

static pid_t max_pid(pid_t a, pid_t b)
{
	return a > b ? a : b;
}

pid_t pstree_helper_pid(const struct pstree_item *orphan)
{
	struct pstree_item *item;
	pid_t max = pidns_max_pid(), index = 0, nr = 0;

	for (item = root_item; item; item = pstree_next(item), nr++) {
		for (unsigned int i = 0; i < item->nr_threads; i++)
			max = max_pid(max, item->threads[i]);
		max = max_pid(max, max_pid(item->sid, item->pgid));
		if (item == orphan)
			index = nr;
	}
	return max + 1 + index;
}

struct pstree_item *pstree_find_thread(pid_t tid)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item))
		for (unsigned int i = 0; i < item->nr_threads; i++)
			if (item->threads[i] == tid)
				return item;
	return NULL;
}

bool pstree_group_kept(pid_t pgid)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item))
		if (item->pgid == pgid)
			return !is_outer_id(pgid);
	return false;
}

/*
 * Restore can only hand the root criu's session and group: anything else led from
 * outside the tree comes back different, which only --shell-job accepts (as CRIU does).
 */
static int check_root_id(pid_t id, pid_t criu_id, const char *kind, bool shell_job)
{
	/* The init of a pid namespace sees 0 for one led from outside it, whatever it is. */
	if (pstree_find(id) || id == criu_id || shell_job || pidns_own())
		return 0;
	pr_err("process %d: its %s %d is led from outside the dumped tree and is not criu's: "
	       "restore would give it criu's; use --shell-job to accept that\n",
	       root_item->pid, kind, id);
	return -EINVAL;
}

/* A leader alive outside the tree holds its pid: restore could not re-create it. */
static int check_member_id(const struct pstree_item *item, pid_t id, const char *kind)
{
	char path[32];

	if (!pstree_leader_is_dead(id))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d", id);
	if (access(path, F_OK) == 0) {
		pr_err("process %d: its %s %d is led by process %d, which is outside the dumped "
		       "tree: dump from an ancestor of both\n", item->pid, kind, id, id);
		return -EINVAL;
	}
	/* Its pid in the tree's namespace comes from the members' status (ns-pid.c). */
	if (pidns_own() && !pidns_img_pid(id)) {
		pr_err("process %d: the leader of its %s %d exited and had no pid in the tree's "
		       "pid namespace: restore cannot re-create it\n",
		       item->pid, kind, id);
		return -ENOTSUP;
	}
	pr_info("process %d: the leader of its %s %d exited: restore re-creates it with a "
		"helper\n", item->pid, kind, id);
	return 0;
}

/*
 * One helper re-creates a dead session: forked by one parent, it clones the session's
 * top members (those whose parent is not in it) as that parent's children. The gone
 * leader's group comes with the helper only: once the helper exited, its pid stays taken
 * by the session, so a member deeper down could not re-create that group.
 */
static int check_dead_session(pid_t sid)
{
	struct pstree_item *item, *parent = NULL;
	bool group_used = false, group_on_top = false;

	/* The root is never in it: its session is in the tree or the outer one. */
	for (item = pstree_next(root_item); item; item = pstree_next(item)) {
		if (item->sid != sid)
			continue;
		group_used |= item->pgid == sid;
		if (item->parent->sid == sid)
			continue;
		if (parent && item->parent != parent) {
			pr_err("session %d, whose leader exited, has members under processes %d "
			       "and %d: restoring that is not supported\n", sid, parent->pid,
			       item->parent->pid);
			return -EINVAL;
		}
		parent = item->parent;
		group_on_top |= item->pgid == sid;
	}
	if (group_used && !group_on_top) {
		pr_err("session %d, whose leader exited: its process group %d has members "
		       "only below members of other groups: restoring that is not supported\n",
		       sid, sid);
		return -EINVAL;
	}
	return 0;
}

int pstree_check_leaders(bool shell_job)
{
	struct pstree_item *item;
	int ret;

	ret = check_root_id(root_item->sid, getsid(0), "session", shell_job);
	if (!ret)
		ret = check_root_id(root_item->pgid, getpgid(0), "process group", shell_job);
	for (item = pstree_next(root_item); item && !ret; item = pstree_next(item)) {
		ret = check_member_id(item, item->sid, "session");
		if (!ret)
			ret = check_member_id(item, item->pgid, "process group");
		if (!ret && pstree_leader_is_dead(item->sid))
			ret = check_dead_session(item->sid);
	}
	return ret;
}

/* 0: same object, 1: not, -errno: kcmp failed (logged). */
static int kcmp_differ(const struct pstree_item *a, const struct pstree_item *b, int type)
{
	long ret = syscall(SYS_kcmp, a->pid, b->pid, type, 0, 0);

	if (ret < 0) {
		pr_perror("kcmp of tasks %d and %d", a->pid, b->pid);
		return -errno;
	}
	return ret != 0;
}

/*
 * Processes created with CLONE_VM, CLONE_FS or CLONE_SIGHAND (and not as threads) share
 * that object; restore gives each process its own, which would change what one sees of
 * the other's changes: such a tree is refused. An fd table is restored shared between a
 * parent and its child (cloned with CLONE_FILES again), as CRIU does; any other sharing
 * of one is refused.
 */
static int check_not_shared(const struct pstree_item *item, const struct pstree_item *other)
{
	static const struct {
		int type;
		const char *what;
	} kinds[] = {
		{ KCMP_VM, "address space (CLONE_VM)" },
		{ KCMP_FILES, "fd table (CLONE_FILES) but are not parent and child" },
		{ KCMP_FS, "root, cwd and umask (CLONE_FS)" },
		{ KCMP_SIGHAND, "signal handlers (CLONE_SIGHAND)" },
	};

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		int ret;

		if (kinds[k].type == KCMP_FILES && item->ids.files_id)
			continue; /* its parent's table, which other may share too */
		ret = kcmp_differ(item, other, kinds[k].type);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			pr_err("tasks %d and %d share one %s, which is not supported\n", other->pid,
			       item->pid, kinds[k].what);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* The fd table of item's parent, if item shares it; 0 for its own. */
static int parent_files_id(const struct pstree_item *item, uint32_t *files_id)
{
	int ret;

	*files_id = 0;
	if (!item->parent || item->parent->zombie)
		return 0;
	ret = kcmp_differ(item, item->parent, KCMP_FILES);
	if (ret == 0)
		*files_id = item->parent->ids.files_id;
	return ret < 0 ? ret : 0;
}

int pstree_assign_ids(void)
{
	uint32_t next = FIRST_TASK_OBJ_ID;
	struct pstree_item *item, *other;
	int ret;

	/* The namespace ids are ns_dump_collect()'s; zombies have no object ids. */
	for (item = root_item; item; item = pstree_next(item)) {
		item->ids.vm_id = item->ids.files_id = item->ids.fs_id = item->ids.sighand_id = 0;
		if (item->zombie)
			continue;
		ret = parent_files_id(item, &item->ids.files_id);
		for (other = root_item; other != item && !ret; other = pstree_next(other))
			ret = other->zombie ? 0 : check_not_shared(item, other);
		if (ret)
			return ret;
		if (!item->ids.files_id)
			item->ids.files_id = next;
		item->ids.vm_id = item->ids.fs_id = item->ids.sighand_id = next++;
	}
	return 0;
}

bool pstree_shares_parent_files(const struct pstree_item *item)
{
	return item->parent && item->ids.files_id &&
	       item->ids.files_id == item->parent->ids.files_id;
}

static void ids_to_entry(const struct task_ids *ids, TaskKobjIdsEntry *e)
{
	task_kobj_ids_entry__init(e);
	e->vm_id = ids->vm_id;
	e->files_id = ids->files_id;
	e->fs_id = ids->fs_id;
	e->sighand_id = ids->sighand_id;
	e->has_pid_ns_id = e->has_net_ns_id = e->has_ipc_ns_id = e->has_uts_ns_id = true;
	e->has_mnt_ns_id = e->has_user_ns_id = e->has_cgroup_ns_id = e->has_time_ns_id = true;
	e->pid_ns_id = ids->pid_ns_id;
	e->net_ns_id = ids->net_ns_id;
	e->ipc_ns_id = ids->ipc_ns_id;
	e->uts_ns_id = ids->uts_ns_id;
	e->mnt_ns_id = ids->mnt_ns_id;
	e->user_ns_id = ids->user_ns_id;
	e->cgroup_ns_id = ids->cgroup_ns_id;
	e->time_ns_id = ids->time_ns_id;
}

static void ids_from_entry(const TaskKobjIdsEntry *e, struct task_ids *ids)
{
	ids->vm_id = e->vm_id;
	ids->files_id = e->files_id;
	ids->fs_id = e->fs_id;
	ids->sighand_id = e->sighand_id;
	ids->pid_ns_id = e->has_pid_ns_id ? e->pid_ns_id : 0;
	ids->net_ns_id = e->has_net_ns_id ? e->net_ns_id : 0;
	ids->ipc_ns_id = e->has_ipc_ns_id ? e->ipc_ns_id : 0;
	ids->uts_ns_id = e->has_uts_ns_id ? e->uts_ns_id : 0;
	ids->mnt_ns_id = e->has_mnt_ns_id ? e->mnt_ns_id : 0;
	ids->user_ns_id = e->has_user_ns_id ? e->user_ns_id : 0;
	ids->cgroup_ns_id = e->has_cgroup_ns_id ? e->cgroup_ns_id : 0;
	ids->time_ns_id = e->has_time_ns_id ? e->time_ns_id : 0;
}

void pstree_fill_root_ids(TaskKobjIdsEntry *e)
{
	struct task_ids ids = { .vm_id = 1, .files_id = 1, .fs_id = 1, .sighand_id = 1 };

	ns_criu_ids(&ids);
	ids_to_entry(&ids, e);
}

int pstree_write_ids(const struct pstree_item *item)
{
	TaskKobjIdsEntry e;
	struct cr_img *img;
	int ret;

	ids_to_entry(&item->ids, &e);
	img = open_image(CR_IMG_IDS, O_WRONLY, pidns_img_pid(item->pid));
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &e);
	close_image(img);
	return ret;
}

/* ids-PID.img, where there is one: a zombie has none, a live task's core says if it needs one. */
static int read_item_ids(struct pstree_item *item)
{
	TaskKobjIdsEntry *e;
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_IDS, item->pid))
		return 0;
	img = open_image(CR_IMG_IDS, O_RDONLY, item->pid);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&e);
	if (!ret) {
		ids_from_entry(e, &item->ids);
		if (!e->files_id) {
			pr_err("%s: files_id 0 is not a valid id\n", img->name);
			ret = -EINVAL;
		}
		pb_free(img, e);
	}
	close_image(img);
	return ret;
}

static int add_item_from_entry(const PstreeEntry *entry)
{
	struct pstree_item *parent = NULL, *item;
	size_t i;

	if (entry->pid == 0 || pstree_find(entry->pid)) {
		pr_err("pstree.img: bad or repeated pid %u\n", entry->pid);
		return -EINVAL;
	}
	/* Parents come before children: any entry but the first names a known parent. */
	if (root_item) {
		parent = pstree_find(entry->ppid);
		if (!parent) {
			pr_err("pstree.img: parent %u of %u is not in the tree before it\n",
			       entry->ppid, entry->pid);
			return -EINVAL;
		}
	}
	item = pstree_add_item(parent, entry->pid);
	if (!item)
		return -ENOMEM;
	item->ppid = entry->ppid;
	item->pgid = entry->pgid;
	item->sid = entry->sid;
	item->threads = calloc(entry->n_threads ? entry->n_threads : 1, sizeof(pid_t));
	if (!item->threads) {
		pr_err("no memory for the threads of %u\n", entry->pid);
		return -ENOMEM;
	}
	/* An image without thread list means a single-threaded process. */
	item->threads[0] = entry->pid;
	item->nr_threads = entry->n_threads ? entry->n_threads : 1;
	for (i = 0; i < entry->n_threads; i++)
		item->threads[i] = entry->threads[i];
	return 0;
}

int pstree_read(void)
{
	struct pstree_item *item;
	struct cr_img *img;
	void *msg;
	int ret;

	img = open_image(CR_IMG_PSTREE, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, &msg)) > 0) {
		ret = add_item_from_entry(msg);
		pb_free(img, msg);
		if (ret)
			break;
	}
	close_image(img);
	if (!ret && !root_item) {
		pr_err("pstree.img holds no process\n");
		ret = -EINVAL;
	}
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = read_item_ids(item);
	if (ret)
		pstree_free();
	return ret;
}
