/*
 * Pid namespaces: a tree whose root is the init of a pid namespace of its own. Restore
 * clones the root with CLONE_NEWPID (it is pid 1 there, as dumped) and the rest of the tree
 * keeps its pids inside (clone3() set_tid sets the innermost one). Images name every task by
 * its pid in that namespace, criu by its pid in criu's: this file keeps the pairs, from
 * "NSpid:" in /proc/PID/task/TID/status, on both sides.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "proc_parse.h"
#include "pstree.h"

#include "pidns.pb-c.h"

/* A task (or thread) of the tree: as criu sees it, as the images name it. */
struct pid_pair {
	pid_t host, img;
};

static struct pid_pair *pairs;
static size_t nr_pairs;
static bool own_ns;

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

/* The thread's pid in its own pid namespace (the last of "NSpid:"), and how deep that is. */
static int own_level_pid(pid_t pid, pid_t tid, pid_t *img, unsigned int *depth)
{
	pid_t ids[PROC_MAX_PID_LEVELS];
	int ret = parse_pid_nspid(pid, tid, ids, PROC_MAX_PID_LEVELS, depth);

	if (!ret)
		*img = ids[*depth - 1];
	return ret;
}

/* ------------------------------------------------------------------ dump ---- */

pid_t pidns_img_pid(pid_t host)
{
	return own_ns ? other_pid(host, true) : host;
}

/*
 * Every thread of the tree, zombies' too, at the root's depth: a deeper one would be in a
 * nested pid namespace, which the ids of live tasks already refused.
 */
static int collect_item_pids(const struct pstree_item *item, unsigned int root_depth)
{
	for (unsigned int i = 0; i < item->nr_threads; i++) {
		unsigned int depth;
		pid_t img;
		int ret;

		ret = own_level_pid(item->pid, item->threads[i], &img, &depth);
		if (ret)
			return ret;
		if (depth != root_depth) {
			pr_err("task %d is in another pid namespace than the tree's root %d: "
			       "nested pid namespaces are not supported\n",
			       item->threads[i], root_item->pid);
			return -ENOTSUP;
		}
		ret = add_pair(item->threads[i], img);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A session or group whose leader exited has no task to name it: the members' "NSsid:" and
 * "NSpgid:" say which pid it had in the tree's namespace (0 where it was not seen there), so
 * that restore can re-create it with a helper of that pid. After every task's own pair.
 */
static int collect_leader_pid(const struct pstree_item *item, const char *key, pid_t host,
			      unsigned int root_depth)
{
	pid_t ids[PROC_MAX_PID_LEVELS];
	unsigned int depth;
	int ret;

	if (other_pid(host, true))
		return 0;
	ret = parse_pid_ns_ids(item->pid, item->pid, key, ids, PROC_MAX_PID_LEVELS, &depth);
	if (ret)
		return ret;
	if (depth != root_depth || !ids[depth - 1])
		return 0;
	return add_pair(host, ids[depth - 1]);
}

/*
 * The root's own pid namespace: restore makes the root its init, so the root must be it
 * (as CRIU requires); then the pid of every task in it.
 */
static int pid_dump_check(struct ns_id *ns)
{
	struct pstree_item *item;
	unsigned int depth;
	pid_t img;
	int ret;

	ret = own_level_pid(root_item->pid, root_item->pid, &img, &depth);
	if (ret)
		return ret;
	if (img != 1) {
		pr_err("the tree's root %d is pid %d in pid namespace %u, not its init: dump the "
		       "namespace from its init\n",
		       root_item->pid, img, ns->id);
		return -ENOTSUP;
	}
	own_ns = true;
	for (item = root_item; item && !ret; item = pstree_next(item))
		ret = collect_item_pids(item, depth);
	for (item = root_item; item && !ret; item = pstree_next(item)) {
		ret = collect_leader_pid(item, "NSsid", item->sid, depth);
		if (!ret)
			ret = collect_leader_pid(item, "NSpgid", item->pgid, depth);
	}
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
	unsigned int nr = 0, depth;
	int ret;

	*host = img_pid;
	if (!own_ns)
		return 0;
	/* Forked by its parent's only thread, or by a helper of its (CLONE_PARENT). */
	ret = pstree_read_children(parent_host, parent_host, &children, &nr);
	for (unsigned int i = 0; i < nr && !ret; i++) {
		pid_t img;

		ret = own_level_pid(children[i], children[i], &img, &depth);
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
	unsigned int found = 0, depth;
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
		ret = own_level_pid(host, tid, &img, &depth);
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

static int pid_collect(struct ns_id *ns)
{
	int ret = check_not_external(ns);

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
	own_ns = false;
}

/* No image of its own: the pids are in pstree.img, the namespace comes with CLONE_NEWPID. */
const struct ns_kind pid_ns_kind = {
	.name = "pid",
	.clone_flag = CLONE_NEWPID,
	.dump_check = pid_dump_check,
	.collect = pid_collect,
	.fini = pid_fini,
};
