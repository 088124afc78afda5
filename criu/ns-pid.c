/*
 * Pid namespaces: a tree whose root is the init of a pid namespace of its own. Restore
 * clones the root with CLONE_NEWPID (it is pid 1 there, as dumped) and the rest of the tree
 * keeps its pids inside (clone3() set_tid). Images name every task by its pid in that
 * namespace, criu by its pid in criu's: this file keeps the pairs, from "NSpid:" in
 * /proc/PID/task/TID/status, on both sides.
 *
 * Pid namespaces nested below the root's: a task there has a pid at every level down to its
 * own, which pidns-nested.img (ours) keeps with the init of its namespace. Restore clones each
 * task with all of them (set_tid, innermost first), a nested init with CLONE_NEWPID; a task
 * born into a namespace its forker is not in (the forker unshared, forked the init, then
 * more children) is cloned after a setns() of the forker into the init's namespace, where
 * the forker's pid_for_children goes back at the end if it was left there. Helpers of
 * sessions and groups whose leader exited get that leader's pids at every level.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/sched.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "proc_parse.h"
#include "pstree.h"
#include "restorer-args.h"

#include "ext.pb-c.h"
#include "pidns.pb-c.h"

/* A task (or thread) of the tree: as criu sees it, as the images name it. */
struct pid_pair {
	pid_t host, img;
};

static struct pid_pair *pairs;
static size_t nr_pairs;
static bool own_ns;
/* How many "NSpid:" levels down criu sees the root's pid namespace. */
static unsigned int tree_depth;

/* A thread, or an exited leader, in a pid namespace below the root's (pidns-nested.img). */
struct nested_pid {
	pid_t img; /* as pstree.img names it */
	pid_t ns_init; /* the init of its namespace, as pstree.img names it */
	unsigned int depth; /* levels below the root's namespace: 1 for a child namespace */
	pid_t ns_pids[RST_PID_LEVELS - 1]; /* outermost first */
};

static struct nested_pid *nested;
static size_t nr_nested;

/*
 * A task whose pid_for_children is the namespace of a nested init it forked (it unshared):
 * dump keeps them as criu sees them, restore as pstree.img names them.
 */
struct for_children {
	pid_t task, init;
	ino_t ino; /* dump: the namespace's inode, until its init is known */
};

static struct for_children *for_children;
static size_t nr_for_children;

static int add_for_children(pid_t task, pid_t init, ino_t ino)
{
	struct for_children *grown =
		realloc(for_children, (nr_for_children + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("no memory for the pid_for_children of %d\n", task);
		return -ENOMEM;
	}
	for_children = grown;
	for_children[nr_for_children++] = (struct for_children){ task, init, ino };
	return 0;
}

static pid_t for_children_init(pid_t task)
{
	for (size_t i = 0; i < nr_for_children; i++)
		if (for_children[i].task == task)
			return for_children[i].init;
	return 0;
}

static const struct nested_pid *find_nested(pid_t img)
{
	for (size_t i = 0; i < nr_nested; i++)
		if (nested[i].img == img)
			return &nested[i];
	return NULL;
}

static int add_nested(const struct nested_pid *np)
{
	struct nested_pid *grown = realloc(nested, (nr_nested + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("no memory for the nested pids of %d\n", np->img);
		return -ENOMEM;
	}
	nested = grown;
	nested[nr_nested++] = *np;
	return 0;
}

bool pidns_own(void)
{
	return own_ns;
}

static int add_pair(pid_t host, pid_t img)
{
	struct pid_pair *grown = realloc(pairs, (nr_pairs + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("no memory for the pid of task %d\n", host);
		return -ENOMEM;
	}
	pairs = grown;
	pairs[nr_pairs++] = (struct pid_pair){ host, img };
	pr_debug("pid %d is %d in the tree's pid namespace\n", host, img);
	return 0;
}

/* The other pid of the pair that has id as criu's (id_is_host) or the images'; 0: none. */
static pid_t other_pid(pid_t id, bool id_is_host)
{
	for (size_t i = 0; i < nr_pairs; i++)
		if ((id_is_host ? pairs[i].host : pairs[i].img) == id)
			return id_is_host ? pairs[i].img : pairs[i].host;
	return 0;
}

/* The thread's pid in the root's pid namespace, as the images name it. */
static int tree_level_pid(pid_t pid, pid_t tid, pid_t *img)
{
	pid_t ids[PROC_MAX_PID_LEVELS];
	unsigned int nr;
	int ret = parse_pid_nspid(pid, tid, ids, PROC_MAX_PID_LEVELS, &nr);

	if (ret)
		return ret;
	if (nr < tree_depth) {
		pr_err("task %d: thread %d is outside the tree's pid namespace\n", pid, tid);
		return -EINVAL;
	}
	*img = ids[tree_depth - 1];
	return 0;
}

/* ------------------------------------------------------------------ dump ---- */

pid_t pidns_img_pid(pid_t host)
{
	return own_ns ? other_pid(host, true) : host;
}

/* The pid namespace of task pid (a zombie's too) by its inode. */
static int pid_ns_inode(pid_t pid, ino_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	if (stat(path, &st)) {
		pr_perror("cannot stat %s", path);
		return -errno;
	}
	*ino = st.st_ino;
	return 0;
}

bool pidns_for_children_init(const struct pstree_item *item, uint64_t ns_inode)
{
	for (struct pstree_item *child = item->first_child; child; child = child->next_sibling) {
		ino_t ino;

		if (child->zombie || pid_ns_inode(child->pid, &ino) || ino != ns_inode)
			continue;
		/* Its init, pid 1 there, is found with the nested pids (find_nested_inits()). */
		return !add_for_children(item->pid, 0, ino);
	}
	return false;
}

/*
 * Every thread of the tree, zombies' too: its pid in the root's namespace, and in a nested
 * one its pids below (ns_init is filled in by find_nested_inits()).
 */
static int collect_item_pids(const struct pstree_item *item)
{
	for (unsigned int i = 0; i < item->nr_threads; i++) {
		struct nested_pid np = { 0 };
		pid_t ids[PROC_MAX_PID_LEVELS];
		unsigned int nr;
		int ret;

		ret = parse_pid_nspid(item->pid, item->threads[i], ids, PROC_MAX_PID_LEVELS, &nr);
		if (!ret && nr < tree_depth) {
			pr_err("task %d: thread %d is outside the tree's pid namespace\n",
			       item->pid, item->threads[i]);
			ret = -EINVAL;
		}
		if (!ret && nr - tree_depth >= RST_PID_LEVELS) {
			pr_err("task %d is %u pid namespaces below the tree's root: more than %d "
			       "are not supported\n",
			       item->threads[i], nr - tree_depth, RST_PID_LEVELS - 1);
			ret = -ENOTSUP;
		}
		if (!ret)
			ret = add_pair(item->threads[i], ids[tree_depth - 1]);
		if (ret)
			return ret;
		if (nr == tree_depth)
			continue;
		np.img = ids[tree_depth - 1];
		np.depth = nr - tree_depth;
		memcpy(np.ns_pids, &ids[tree_depth], np.depth * sizeof(pid_t));
		ret = add_nested(&np);
		if (ret)
			return ret;
	}
	return 0;
}

/* The tree's task whose img pid is img, or NULL. */
static const struct pstree_item *item_of_img(pid_t img)
{
	return pstree_find(other_pid(img, false));
}

/*
 * The init of each nested namespace must be in the tree (pid 1 there, the last of its
 * pids): each task's namespace is named by it, found by the namespaces' inodes.
 */
static int find_nested_inits(void)
{
	for (size_t i = 0; i < nr_nested; i++) {
		const struct pstree_item *item =
			pstree_find_thread(other_pid(nested[i].img, false));
		ino_t ino, init_ino;
		int ret = pid_ns_inode(item->pid, &ino);

		for (size_t j = 0; j < nr_nested && !ret && !nested[i].ns_init; j++) {
			const struct nested_pid *init = &nested[j];

			if (init->depth != nested[i].depth || init->ns_pids[init->depth - 1] != 1)
				continue;
			ret = pid_ns_inode(item_of_img(init->img)->pid, &init_ino);
			if (!ret && init_ino == ino)
				nested[i].ns_init = init->img;
		}
		if (ret)
			return ret;
		if (!nested[i].ns_init) {
			pr_err("task %d is in pid namespace %lu, whose init is not in the dumped "
			       "tree\n",
			       item->pid, (unsigned long)ino);
			return -ENOTSUP;
		}
		for (size_t j = 0; j < nr_for_children; j++)
			if (for_children[j].ino == ino)
				for_children[j].init = nested[i].ns_init;
	}
	return 0;
}

/*
 * A session or group whose leader exited has no task to name it: the members' "NSsid:" and
 * "NSpgid:" say which pid it had in the tree's namespace (0 where it was not seen there), so
 * that restore can re-create it with a helper of that pid. After every task's own pair.
 * A leader that was in the member's nested namespace gets its pids there too (the levels
 * where the member sees it); one in a namespace between the root's and the member's is
 * refused.
 */
static int collect_leader_pid(const struct pstree_item *item, const char *key, pid_t host)
{
	const struct nested_pid *member;
	struct nested_pid leader = { 0 };
	pid_t ids[PROC_MAX_PID_LEVELS];
	unsigned int depth;
	int ret;

	if (other_pid(host, true))
		return 0;
	ret = parse_pid_ns_ids(item->pid, item->pid, key, ids, PROC_MAX_PID_LEVELS, &depth);
	if (ret)
		return ret;
	if (depth < tree_depth || !ids[tree_depth - 1])
		return 0;
	ret = add_pair(host, ids[tree_depth - 1]);
	if (ret || depth == tree_depth || !ids[tree_depth])
		return ret;
	member = find_nested(pidns_img_pid(item->pid));
	leader.depth = depth - tree_depth;
	if (!member || ids[depth - 1] == 0) {
		pr_err("task %d, in a nested pid namespace: the leader of its %s %d exited in "
		       "another one above it: restoring that is not supported\n",
		       item->pid, key + 2, ids[tree_depth - 1]);
		return -ENOTSUP;
	}
	leader.img = ids[tree_depth - 1];
	leader.ns_init = member->ns_init;
	memcpy(leader.ns_pids, &ids[tree_depth], leader.depth * sizeof(pid_t));
	return add_nested(&leader);
}

/*
 * The root's own pid namespace: restore makes the root its init, so the root must be it
 * (as CRIU requires); then the pid of every task in it, and below it. Called for each
 * nested pid namespace as well, which the root's call covered.
 */
static int pid_dump_check(struct ns_id *ns)
{
	struct pstree_item *item;
	pid_t ids[PROC_MAX_PID_LEVELS];
	int ret;

	if (ns != ns_root_own(NS_PID))
		return 0;
	ret = parse_pid_nspid(root_item->pid, root_item->pid, ids, PROC_MAX_PID_LEVELS,
			      &tree_depth);
	if (ret)
		return ret;
	if (ids[tree_depth - 1] != 1) {
		pr_err("the tree's root %d is pid %d in pid namespace %u, not its init: dump the "
		       "namespace from its init\n",
		       root_item->pid, ids[tree_depth - 1], ns->id);
		return -ENOTSUP;
	}
	own_ns = true;
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = collect_item_pids(item);
	ret = ret ?: find_nested_inits();
	for (item = root_item; item && !ret; item = pstree_next(item)) {
		ret = collect_leader_pid(item, "NSsid", item->sid);
		if (!ret)
			ret = collect_leader_pid(item, "NSpgid", item->pgid);
	}
	return ret;
}

int pidns_write_nested(void)
{
	struct cr_img *img;
	int ret = 0;

	if (!nr_nested)
		return 0;
	img = open_image(CR_IMG_PIDNS_NESTED, O_WRONLY, 0);
	if (!img)
		return -EIO;
	for (size_t i = 0; i < nr_nested && !ret; i++) {
		CrNestedPidEntry e = CR_NESTED_PID_ENTRY__INIT;
		uint32_t ns_pids[RST_PID_LEVELS];

		for (unsigned int l = 0; l < nested[i].depth; l++)
			ns_pids[l] = nested[i].ns_pids[l];
		e.pid = nested[i].img;
		e.ns_init = nested[i].ns_init;
		e.n_ns_pids = nested[i].depth;
		e.ns_pids = ns_pids;
		e.pid_for_children = for_children_init(other_pid(e.pid, false));
		e.has_pid_for_children = e.pid_for_children != 0;
		ret = pb_write_one(img, &e);
	}
	/* Tasks of the root's namespace have no entry of their own: one for this alone. */
	for (size_t i = 0; i < nr_for_children && !ret; i++) {
		CrNestedPidEntry e = CR_NESTED_PID_ENTRY__INIT;

		e.pid = pidns_img_pid(for_children[i].task);
		if (find_nested(e.pid))
			continue;
		e.has_pid_for_children = true;
		e.pid_for_children = for_children[i].init;
		ret = pb_write_one(img, &e);
	}
	close_image(img);
	return ret;
}

/* --------------------------------------------------------------- restore ---- */

pid_t pidns_host_pid(pid_t img_pid)
{
	return own_ns ? other_pid(img_pid, false) : img_pid;
}

int pidns_note_root(pid_t img_pid, pid_t host)
{
	return own_ns ? add_pair(host, img_pid) : 0;
}

int pidns_find_child(pid_t parent_host, pid_t img_pid, pid_t *host)
{
	pid_t *children = NULL;
	unsigned int nr = 0;
	int ret;

	*host = img_pid;
	if (!own_ns)
		return 0;
	/* Forked by its parent's only thread, or by a helper of its (CLONE_PARENT). */
	ret = pstree_read_children(parent_host, parent_host, &children, &nr);
	for (unsigned int i = 0; i < nr && !ret; i++) {
		pid_t img;

		ret = tree_level_pid(children[i], children[i], &img);
		if (!ret && img == img_pid) {
			*host = children[i];
			free(children);
			return add_pair(*host, img_pid);
		}
	}
	free(children);
	if (!ret)
		pr_err("task %d (pid %d in the restored pid namespace) is not among the children "
		       "of %d\n",
		       img_pid, img_pid, parent_host);
	return ret ? ret : -ESRCH;
}

int pidns_find_threads(pid_t host, const pid_t *img_tids, unsigned int nr, pid_t *host_tids)
{
	unsigned int found = 0;
	struct dirent *de;
	char path[64];
	DIR *dir;
	int ret = 0;

	if (!own_ns) {
		memcpy(host_tids, img_tids, nr * sizeof(*host_tids));
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", host);
	dir = opendir(path);
	if (!dir) {
		pr_perror("cannot list the threads of %d", host);
		return -errno;
	}
	while (!ret && (de = readdir(dir))) {
		pid_t tid = atoi(de->d_name), img;

		if (tid <= 0)
			continue;
		ret = tree_level_pid(host, tid, &img);
		for (unsigned int i = 0; i < nr && !ret; i++) {
			if (img_tids[i] != img)
				continue;
			host_tids[i] = tid;
			found++;
			ret = add_pair(tid, img);
		}
	}
	closedir(dir);
	if (!ret && found != nr) {
		pr_err("task %d: %u of its %u threads were not found\n", host, nr - found, nr);
		ret = -ESRCH;
	}
	return ret;
}

unsigned int pidns_set_tid(pid_t img_pid, int32_t *set_tid, unsigned int max)
{
	const struct nested_pid *np = find_nested(img_pid);
	unsigned int nr = 0;

	for (unsigned int l = np ? np->depth : 0; l > 0 && nr < max - 1; l--)
		set_tid[nr++] = np->ns_pids[l - 1];
	set_tid[nr++] = img_pid;
	return nr;
}

pid_t pidns_own_pid(pid_t img_pid)
{
	const struct nested_pid *np = find_nested(img_pid);

	return np ? np->ns_pids[np->depth - 1] : img_pid;
}

pid_t pidns_seen_by(const struct pstree_item *item, pid_t id)
{
	const struct nested_pid *self = find_nested(item->pid), *other = find_nested(id);

	if (!self)
		return id;
	/* A leader in its namespace is at least as deep; one above it is not seen (0). */
	return other && other->depth >= self->depth ? other->ns_pids[self->depth - 1] : 0;
}

bool pidns_nested_init(const struct pstree_item *item)
{
	const struct nested_pid *np = find_nested(item->pid);

	return np && np->ns_init == item->pid;
}

pid_t pidns_max_pid(void)
{
	pid_t max = 0;

	for (size_t i = 0; i < nr_nested; i++)
		for (unsigned int l = 0; l < nested[i].depth; l++)
			max = nested[i].ns_pids[l] > max ? nested[i].ns_pids[l] : max;
	return max;
}

static pid_t clone3_set_tid(const int32_t *set_tid, unsigned int nr, unsigned long flags)
{
	/* clone3 refuses an exit signal with CLONE_PARENT (see clone_with_pid()). */
	struct clone_args args = { .flags = flags,
				   .exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD,
				   .set_tid = (unsigned long)set_tid, .set_tid_size = nr };

	return syscall(SYS_clone3, &args, sizeof(args));
}

/*
 * The forker's pid_for_children into the namespace of init (as pstree.img names it), which
 * it sees as a descendant of its own; setns() to *own_fd (a pidfd of the forker) gets its
 * own back.
 */
static int enter_ns_of(const struct pstree_item *forker, pid_t init, int *own_fd)
{
	pid_t seen = pidns_seen_by(forker, init);
	int init_fd;

	init_fd = syscall(SYS_pidfd_open, seen, 0);
	*own_fd = syscall(SYS_pidfd_open, getpid(), 0);
	if (init_fd < 0 || *own_fd < 0 || setns(init_fd, CLONE_NEWPID)) {
		pr_perror("task %d: cannot enter the pid namespace of task %d", forker->pid, init);
		if (init_fd >= 0)
			close(init_fd);
		if (*own_fd >= 0)
			close(*own_fd);
		return -1;
	}
	close(init_fd);
	return 0;
}

int pidns_restore_for_children(const struct pstree_item *item)
{
	pid_t init = for_children_init(item->pid);
	int own_fd;

	if (!init)
		return 0;
	if (enter_ns_of(item, init, &own_fd))
		return -1;
	close(own_fd);
	pr_info("task %d: its children are born into the pid namespace of %d\n", item->pid, init);
	return 0;
}

pid_t pidns_clone_helper(const struct pstree_item *forker, pid_t pid)
{
	const struct nested_pid *fp = find_nested(forker->pid);
	int32_t set_tid[RST_PID_LEVELS];
	unsigned int nr = fp ? fp->depth + 1 : 1;

	for (unsigned int l = 0; l < nr; l++)
		set_tid[l] = pid;
	return clone3_set_tid(set_tid, nr, 0);
}

pid_t pidns_clone_child(const struct pstree_item *forker, pid_t img_pid, unsigned long flags)
{
	const struct nested_pid *np = find_nested(img_pid), *fp = find_nested(forker->pid);
	int32_t set_tid[RST_PID_LEVELS];
	unsigned int nr = pidns_set_tid(img_pid, set_tid, RST_PID_LEVELS);
	int own_fd = -1, err;
	pid_t pid;

	if (np && np->ns_init == img_pid)
		flags |= CLONE_NEWPID;
	else if (np && (!fp || fp->ns_init != np->ns_init) &&
		 enter_ns_of(forker, np->ns_init, &own_fd))
		return -1;
	pid = clone3_set_tid(set_tid, nr, flags);
	if (own_fd < 0)
		return pid;
	/* Both sides: the child was born where it belongs, the forker goes back to its own. */
	err = errno;
	if (pid > 0 && setns(own_fd, CLONE_NEWPID)) {
		err = errno;
		pr_err("task %d: cannot return to its own pid namespace: %s\n", forker->pid,
		       strerror(err));
		kill(pid, SIGKILL);
		pid = -1;
	}
	close(own_fd);
	errno = err;
	return pid;
}

/*
 * Upstream criu writes pidns-ID.img only for a namespace given with --external pid[]: the
 * tree then lives in a namespace restore would have to join, not create.
 */
static int check_not_external(const struct ns_id *ns)
{
	PidnsEntry *e;
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_PIDNS, ns->id))
		return 0;
	img = open_image(CR_IMG_PIDNS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_read_one(img, (void **)&e);
	if (ret > 0) {
		ret = 0;
		if (e->ext_key) {
			pr_err("%s: the tree's pid namespace is an external one (%s): joining it "
			       "is not supported\n",
			       img->name, e->ext_key);
			ret = -ENOTSUP;
		}
		pb_free(img, e);
	}
	close_image(img);
	return ret;
}

/* A session or group of the tree whose leader exited (a helper re-creates it). */
static bool is_dead_leader(pid_t id)
{
	for (struct pstree_item *item = root_item; item; item = pstree_next(item))
		if ((item->sid == id || item->pgid == id) && pstree_leader_is_dead(id))
			return true;
	return false;
}

/*
 * One entry of pidns-nested.img: a thread of the tree or the exited leader of a session or
 * group, not yet listed, not too deep.
 */
static int nested_from_entry(const CrNestedPidEntry *e)
{
	struct nested_pid np = { .img = e->pid, .ns_init = e->ns_init, .depth = e->n_ns_pids };
	int ret;

	if (e->has_pid_for_children) {
		ret = add_for_children(e->pid, e->pid_for_children, 0);
		if (ret || !np.depth)
			return ret;
	}
	if (!(pstree_find_thread(e->pid) || is_dead_leader(e->pid)) || find_nested(e->pid) ||
	    !np.depth || np.depth >= RST_PID_LEVELS) {
		pr_err("pidns-nested.img: %u is neither a thread of pstree.img nor an exited "
		       "leader, is listed twice, or is %zu levels deep\n",
		       e->pid, e->n_ns_pids);
		return -EINVAL;
	}
	for (unsigned int l = 0; l < np.depth; l++)
		np.ns_pids[l] = e->ns_pids[l];
	return add_nested(&np);
}

/*
 * Each task's threads as deep as it, in its init's namespace; an init (pid 1 there) one
 * level below its forker; any other task at least as deep as its forker.
 */
static int check_nested_task(const struct pstree_item *item)
{
	static const struct nested_pid none;
	const struct nested_pid *np = find_nested(item->pid), *init, *parent;
	unsigned int parent_depth;

	if (!np)
		np = &none;
	for (unsigned int i = 1; i < item->nr_threads; i++) {
		const struct nested_pid *th = find_nested(item->threads[i]);

		if ((th ? th->depth : 0) != np->depth || (th && th->ns_init != np->ns_init)) {
			pr_err("pidns-nested.img: thread %d is not in the pid namespace of its "
			       "task %d\n",
			       item->threads[i], item->pid);
			return -EINVAL;
		}
	}
	if (!np->depth)
		return 0;
	init = find_nested(np->ns_init);
	parent = item->parent ? find_nested(item->parent->pid) : NULL;
	parent_depth = parent ? parent->depth : 0;
	if (!init || init->ns_init != np->ns_init || init->depth != np->depth ||
	    init->ns_pids[init->depth - 1] != 1 || (init == np && parent_depth + 1 != np->depth) ||
	    parent_depth > np->depth || !item->parent) {
		pr_err("pidns-nested.img: task %d: its pid namespace's init %d is not one, or "
		       "not below its parent's\n",
		       item->pid, np->ns_init);
		return -EINVAL;
	}
	return 0;
}

/* An exited leader: in the namespace of an init of the images, as deep as it. */
static int check_dead_leader(const struct nested_pid *np)
{
	const struct nested_pid *init = find_nested(np->ns_init);

	if (pstree_find_thread(np->img))
		return 0;
	if (!init || init->ns_init != init->img || init->depth != np->depth) {
		pr_err("pidns-nested.img: exited leader %d: %d is not the init of its pid "
		       "namespace\n",
		       np->img, np->ns_init);
		return -EINVAL;
	}
	return 0;
}

/* A task whose children are born into the namespace of a nested init it forked. */
static int check_for_children(const struct for_children *fc)
{
	const struct pstree_item *task = pstree_find(fc->task), *init = pstree_find(fc->init);

	if (!task || !init || init->parent != task || !pidns_nested_init(init)) {
		pr_err("pidns-nested.img: task %d: pid_for_children %d is not a nested init it "
		       "forked\n",
		       fc->task, fc->init);
		return -EINVAL;
	}
	return 0;
}

static int read_nested(void)
{
	struct pstree_item *item;
	struct cr_img *img;
	void *msg;
	int ret;

	if (!img_exists(CR_IMG_PIDNS_NESTED, 0))
		return 0;
	img = open_image(CR_IMG_PIDNS_NESTED, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, &msg)) > 0) {
		ret = nested_from_entry(msg);
		pb_free(img, msg);
		if (ret)
			break;
	}
	close_image(img);
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = check_nested_task(item);
	for (size_t i = 0; i < nr_for_children && !ret; i++)
		ret = check_for_children(&for_children[i]);
	for (size_t i = 0; i < nr_nested && !ret; i++)
		ret = check_dead_leader(&nested[i]);
	return ret;
}

/* criu's own depth: the tree's namespace is one below it. */
static int read_tree_depth(void)
{
	pid_t ids[PROC_MAX_PID_LEVELS];
	int ret = parse_pid_nspid(getpid(), getpid(), ids, PROC_MAX_PID_LEVELS, &tree_depth);

	tree_depth++;
	return ret;
}

/* The root's own namespace; a nested one was read with it. */
static int pid_collect(struct ns_id *ns)
{
	int ret;

	if (ns != ns_root_own(NS_PID))
		return 0;
	ret = check_not_external(ns) ?: read_tree_depth() ?: read_nested();
	if (ret)
		return ret;
	if (root_item->pid != 1) {
		pr_err("pstree.img: the root of pid namespace %u has pid %d, where restore makes "
		       "it the namespace's init (1)\n",
		       ns->id, root_item->pid);
		return -EINVAL;
	}
	own_ns = true;
	return 0;
}

static void pid_fini(struct ns_id *ns)
{
	(void)ns;
	free(pairs);
	pairs = NULL;
	nr_pairs = 0;
	free(nested);
	nested = NULL;
	nr_nested = 0;
	free(for_children);
	for_children = NULL;
	nr_for_children = 0;
	own_ns = false;
}

/*
 * No image of its own: the pids are in pstree.img (and pidns-nested.img), the namespace
 * comes with CLONE_NEWPID (a nested one with its init's).
 */
const struct ns_kind pid_ns_kind = {
	.name = "pid",
	.clone_flag = CLONE_NEWPID,
	.nested = true,
	.pre_dump_check = true,
	.dump_check = pid_dump_check,
	.collect = pid_collect,
	.fini = pid_fini,
};

pid_t clone_with_pid(pid_t pid, unsigned long flags)
{
	/*
	 * clone3 refuses an exit signal with CLONE_PARENT: the sibling then signals criu's
	 * parent the way criu itself would (its exit_signal, SIGCHLD for a normal process).
	 */
	struct clone_args args = { .flags = flags, .exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD };

	args.set_tid = (unsigned long)&pid;
	args.set_tid_size = 1;
	return syscall(SYS_clone3, &args, sizeof(args));
}

/*
 * The pid a helper of the task (tree pid self) takes in the tree's own pid namespace:
 * above every pid, tid, group and session of the tree, one per task, so that it never
 * holds a pid another task is about to be given (clone3 with set_tid) while the tree is
 * forked. 0 (any pid) outside one.
 */
pid_t pidns_helper_pid(pid_t self)
{
	pid_t top = 0;

	if (!pidns_own())
		return 0;
	for (struct pstree_item *item = root_item; item; item = pstree_next(item)) {
		top = item->pgid > top ? item->pgid : top;
		top = item->sid > top ? item->sid : top;
		for (unsigned int t = 0; t < item->nr_threads; t++)
			top = item->threads[t] > top ? item->threads[t] : top;
	}
	return top + self;
}
