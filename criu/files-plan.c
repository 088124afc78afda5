/*
 * The fd engine's sharing planner (restore, main process, before forking): which task
 * opens each description that several tasks hold, at which fd it is kept until each user
 * dups it, and the order dependencies between descriptions allow.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_options.h"
#include "files-plan.h"
#include "log.h"
#include "pstree.h"
#include "servicefd.h"

/* Indexed like file_descs. */
struct file_sharing *file_sharing;

/* fd numbers no planned fd uses: above every restored one, below the inherited and given. */
static int park_lo, park_hi;

static unsigned int item_depth(const struct pstree_item *item)
{
	unsigned int depth = 0;

	for (; item->parent; item = item->parent)
		depth++;
	return depth;
}

/*
 * Whether user, in ancestor's subtree, comes from a child ancestor forks before it opens
 * anything for its subtree: one born before its parent's setsid() (cr-restore.c).
 */
static bool forked_before_opening(const struct pstree_item *ancestor,
				  const struct pstree_item *user)
{
	while (user != ancestor && user->parent != ancestor)
		user = user->parent;
	return user != ancestor && pstree_born_before_setsid(user);
}

/* In one tree two tasks always meet, at the root at the latest; there both inherit. */
static const struct pstree_item *common_ancestor(const struct pstree_item *a,
						 const struct pstree_item *b)
{
	const struct pstree_item *user_a = a, *user_b = b;
	unsigned int depth_a = item_depth(a), depth_b = item_depth(b);

	for (; depth_a > depth_b; depth_a--)
		a = a->parent;
	for (; depth_b > depth_a; depth_b--)
		b = b->parent;
	while (a != b) {
		a = a->parent;
		b = b->parent;
	}
	while (forked_before_opening(a, user_a) || forked_before_opening(a, user_b))
		a = a->parent;
	return a;
}

static void note_file_user(struct file_sharing *fs, const struct pstree_item *item)
{
	if (fs->nr_users && fs->last_user == item->pid)
		return; /* another fd of the same task */
	if (!fs->nr_users)
		fs->first_user = item->pid;
	fs->opener = fs->nr_users ? common_ancestor(fs->opener, item) : item;
	fs->last_user = item->pid;
	fs->nr_users++;
}

/*
 * A files table shared (CLONE_FILES without threads) is restored shared between a parent
 * and its child only (cr-restore.c clones the child with CLONE_FILES); other images that
 * name one table for several tasks are refused.
 */
static int check_files_id_unique(const struct pstree_item *item)
{
	struct pstree_item *other;

	if (pstree_shares_parent_files(item))
		return 0;
	for (other = root_item; other != item; other = pstree_next(other)) {
		if (other->ids.files_id == item->ids.files_id) {
			pr_err("tasks %d and %d share one fd table (files id %u), which is not "
			       "supported\n",
			       other->pid, item->pid, item->ids.files_id);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* fdtype_ops.check_finish of each file item holds first, before anything is forked. */
static int check_task_finish(const struct pstree_item *item, const struct task_fds *fds)
{
	for (size_t i = 0; i < fds->nr; i++) {
		const struct file_desc *d = find_file_desc(fds->fdis[i]->id);
		int ret;

		if (!d->ops->check_finish || file_sharing[desc_index(d)].first_user != item->pid)
			continue;
		ret = d->ops->check_finish(d, fds);
		if (ret)
			return ret;
	}
	return 0;
}

/* Count item as a user of each file its fds name; raise *max_fd to its highest fd. */
static int note_task_files(const struct pstree_item *item, int *max_fd)
{
	struct task_fds fds = {.pid = item->pid};
	int ret;

	/* A zombie has no fds and no ids (and no ids image to read them from at restore). */
	if (item->zombie || !item->ids.files_id)
		return 0;
	ret = check_files_id_unique(item);
	/* A table shared with the parent is the parent's to restore: one user of each file. */
	if (ret || pstree_shares_parent_files(item))
		return ret;
	ret = read_fdinfos(item->ids.files_id, &fds.fdis, &fds.nr);
	if (ret)
		return ret;
	for (size_t i = 0; i < fds.nr; i++)
		note_file_user(&file_sharing[desc_index(find_file_desc(fds.fdis[i]->id))], item);
	if (fds.nr && (int)fds.fdis[fds.nr - 1]->fd > *max_fd)
		*max_fd = fds.fdis[fds.nr - 1]->fd;
	ret = check_task_finish(item, &fds);
	free_fdinfos(fds.fdis, fds.nr);
	return ret;
}

/* The kernel object of entry idx (see fdtype_ops.object_key), or 0 for none. */
static uint64_t object_key_of(size_t idx, uint64_t (**key_fn)(const struct file_desc *))
{
	const struct fdtype_ops *ops = file_descs[idx].ops;

	*key_fn = ops->object_key;
	return ops->object_key ? ops->object_key(&file_descs[idx]) : 0;
}

/* Restore opens it: a task holds it, or another file needs it. */
bool desc_in_use(size_t idx)
{
	return file_sharing[idx].nr_users || file_sharing[idx].needed;
}

static bool same_object(size_t i, uint64_t key, uint64_t (*key_fn)(const struct file_desc *))
{
	uint64_t (*fn)(const struct file_desc *);

	return desc_in_use(i) && object_key_of(i, &fn) == key && fn == key_fn;
}

/*
 * Entries on one object (the two ends of a pipe, two openings of a FIFO or of a deleted
 * file) restore its state once: if several tasks use any of them, all of them are
 * opened by the common ancestor of all their users.
 */
static void join_object_users(size_t first)
{
	uint64_t (*key_fn)(const struct file_desc *);
	uint64_t key = object_key_of(first, &key_fn);
	const struct pstree_item *opener = file_sharing[first].opener;
	bool inherit = file_sharing[first].inherit;

	for (size_t i = first + 1; i < nr_file_descs; i++) {
		struct file_sharing *fs = &file_sharing[i];

		if (!same_object(i, key, key_fn))
			continue;
		if (fs->inherit || fs->opener != opener)
			inherit = true;
		opener = common_ancestor(opener, fs->opener);
	}
	for (size_t i = first; i < nr_file_descs; i++) {
		if (i > first && !same_object(i, key, key_fn))
			continue;
		file_sharing[i].opener = opener;
		file_sharing[i].inherit = inherit;
	}
}

static bool object_joined_before(size_t idx)
{
	uint64_t (*key_fn)(const struct file_desc *);
	uint64_t key = object_key_of(idx, &key_fn);

	for (size_t i = 0; i < idx; i++)
		if (same_object(i, key, key_fn))
			return true;
	return false;
}

/*
 * Numbers from just below the service fds down; all must stay above every restored fd.
 * *next_fd: the next number free below them.
 */
static int assign_inherited_fds(int max_restored_fd, int *next_fd_out)
{
	int lowest_sfd, highest_sfd, next_fd;
	unsigned int nr_inherited = 0;

	service_fd_range(&lowest_sfd, &highest_sfd);
	next_fd = lowest_sfd - 1;
	for (size_t i = 0; i < nr_file_descs; i++) {
		struct file_sharing *fs = &file_sharing[i];

		if (!fs->inherit)
			continue;
		/* Still one description: each task takes the one criu made (parked). */
		if (file_descs[i].ops->parked) {
			fs->inherit = false;
			continue;
		}
		if (!file_descs[i].ops->inheritable) {
			pr_warn("file %u (%s) is used by %u tasks: restored as one copy per task, "
				"not as one shared description\n",
				file_descs[i].id, file_descs[i].ops->name, fs->nr_users);
			fs->inherit = false;
			continue;
		}
		if (next_fd <= max_restored_fd) {
			pr_err("the descriptions shared between tasks need fd numbers between the "
			       "highest restored fd %d and the service fds at %d: restore with a "
			       "higher soft RLIMIT_NOFILE\n",
			       max_restored_fd, lowest_sfd);
			return -EMFILE;
		}
		fs->inherited_fd = next_fd--;
		nr_inherited++;
		pr_debug("file %u: opened by task %d, inherited at fd %d\n", file_descs[i].id,
			 fs->opener->pid, fs->inherited_fd);
	}
	pr_info("%u descriptions shared between tasks, inherited at fds %d..%d\n", nr_inherited,
		next_fd + 1, lowest_sfd - 1);
	*next_fd_out = next_fd;
	return 0;
}

/* Whether another entry in use is on the same object as entry idx. */
static bool shares_object(size_t idx)
{
	uint64_t (*key_fn)(const struct file_desc *);
	uint64_t key = object_key_of(idx, &key_fn);

	for (size_t i = 0; key && i < nr_file_descs; i++)
		if (i != idx && same_object(i, key, key_fn))
			return true;
	return false;
}

/*
 * Below the inherited ones, a number for each entry whose description may be made by the
 * open() of another entry of its object and kept for it (fdtype_ops.opens_object).
 */
static int assign_kept_fds(int max_restored_fd, int *next_fd)
{
	for (size_t i = 0; i < nr_file_descs; i++) {
		if (!file_descs[i].ops->opens_object || !desc_in_use(i) || !shares_object(i))
			continue;
		if (*next_fd <= max_restored_fd) {
			pr_err("file %u: no fd number free above the restored ones to keep it "
			       "at while its object is made: restore with a higher soft "
			       "RLIMIT_NOFILE\n",
			       file_descs[i].id);
			return -EMFILE;
		}
		file_sharing[i].kept_fd = (*next_fd)--;
	}
	return 0;
}

/* The description --inherit-fd ifd names, as an index into file_descs; -1 if none. */
static ssize_t find_given_desc(const struct inherit_fd *ifd)
{
	const char *key = ifd->key + (ifd->key[0] == '/');
	char name[PATH_MAX];

	for (size_t i = 0; i < nr_file_descs; i++) {
		if (!file_descs[i].ops->inherit_key || !file_sharing[i].nr_users)
			continue;
		file_descs[i].ops->inherit_key(&file_descs[i], name, sizeof(name));
		/* Paths with or without their leading '/', as upstream's keys are written. */
		if (!strcmp(name + (name[0] == '/'), key))
			return i;
	}
	return -1;
}

/*
 * --inherit-fd: each descriptor criu was given moves to a number below the inherited
 * range, out of the way of every restored fd (forked tasks inherit it there), and the
 * description its key names takes it instead of being opened.
 */
static int place_given_fds(int next_fd, int max_restored_fd)
{
	for (unsigned int j = 0; j < opts.nr_inherit_fds; j++) {
		struct inherit_fd *ifd = &opts.inherit_fds[j];
		ssize_t i = find_given_desc(ifd);

		if (i < 0) {
			pr_warn("--inherit-fd fd[%d]:%s names no file of the images\n", ifd->fd,
				ifd->key);
			continue;
		}
		if (next_fd <= max_restored_fd) {
			pr_err("--inherit-fd fd[%d]: no fd number free above the restored ones\n",
			       ifd->fd);
			return -EMFILE;
		}
		if (dup3(ifd->fd, next_fd, O_CLOEXEC) < 0) {
			pr_perror("--inherit-fd fd[%d]: cannot move it to %d", ifd->fd, next_fd);
			return -errno;
		}
		file_sharing[i].given_fd = next_fd--;
		pr_info("file %u (%s) is --inherit-fd fd[%d], kept at fd %d\n", file_descs[i].id,
			ifd->key, ifd->fd, file_sharing[i].given_fd);
	}
	return 0;
}

/* The ids entry idx depends on (fdtype_ops.deps), malloc'ed into *ids; 0 or -errno. */
int desc_deps(size_t idx, uint32_t **ids, size_t *nr)
{
	const struct file_desc *d = &file_descs[idx];
	size_t want;

	*ids = NULL;
	*nr = 0;
	if (!d->ops->deps)
		return 0;
	want = d->ops->deps(d, NULL, 0);
	if (!want)
		return 0;
	*ids = malloc(want * sizeof(**ids));
	if (!*ids) {
		pr_err("out of memory listing the %zu files file %u needs\n", want, d->id);
		return -ENOMEM;
	}
	*nr = d->ops->deps(d, *ids, want);
	return 0;
}

/* The index of dependency id of entry idx; -1 after an error line naming both. */
static ssize_t dep_index(size_t idx, uint32_t id)
{
	const struct file_desc *dep = find_file_desc(id);
	const struct file_desc *d = &file_descs[idx];

	if (!dep) {
		pr_err("file %u (%s) needs file %u, which files.img does not have\n", d->id,
		       d->ops->name, id);
		return -1;
	}
	if (!dep->ops->inheritable) {
		pr_err("file %u (%s) needs file %u (%s), which cannot be opened for another "
		       "task\n",
		       d->id, d->ops->name, dep->id, dep->ops->name);
		return -1;
	}
	/* finish() runs in a task holding the file: one in flight only would miss it. */
	if (dep->ops->finish && !dep->ops->finish_in_flight &&
	    !file_sharing[desc_index(dep)].nr_users) {
		pr_err("file %u (%s) needs file %u (%s), which no task holds, and only a task "
		       "holding it restores all of its state\n",
		       d->id, d->ops->name, dep->id, dep->ops->name);
		return -1;
	}
	return desc_index(dep);
}

/*
 * Depth first from entry idx (state: 0 not seen, 1 on the path, 2 done): a dependency met
 * again while on the path closes a cycle, which no opening order can satisfy.
 */
static int check_deps_from(size_t idx, unsigned char *state)
{
	uint32_t *ids;
	size_t nr;
	int ret = desc_deps(idx, &ids, &nr);

	state[idx] = 1;
	for (size_t k = 0; k < nr && !ret; k++) {
		ssize_t j = dep_index(idx, ids[k]);

		if (j < 0) {
			ret = -EINVAL;
		} else if (state[j] == 1) {
			pr_err("files %u (%s) and %u (%s) wait for each other\n",
			       file_descs[idx].id, file_descs[idx].ops->name, file_descs[j].id,
			       file_descs[j].ops->name);
			ret = -ELOOP;
		} else if (state[j] == 0) {
			ret = check_deps_from(j, state);
		}
	}
	free(ids);
	state[idx] = 2;
	return ret;
}

static int check_deps(void)
{
	unsigned char *state = calloc(nr_file_descs ? nr_file_descs : 1, 1);
	int ret = 0;

	if (!state) {
		pr_err("out of memory checking the files' dependencies\n");
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_file_descs && !ret; i++)
		if (!state[i])
			ret = check_deps_from(i, state);
	free(state);
	return ret;
}

/*
 * Dependency dep of an opened entry is opened, and kept for the subtree, by the opener of
 * the entry or an ancestor of it; whether that changed anything.
 */
static bool place_dep(size_t idx, size_t dep)
{
	struct file_sharing *fs = &file_sharing[dep];
	const struct pstree_item *opener = file_sharing[idx].opener;
	bool changed;

	if (desc_in_use(dep))
		opener = common_ancestor(fs->opener, opener);
	changed = !desc_in_use(dep) || !fs->inherit || fs->opener != opener;
	fs->opener = opener;
	fs->needed = fs->inherit = true;
	return changed;
}

/*
 * A task that needs an entry without holding it (fdtype_ops.needed_by) gets it from its
 * opener, which moves up to an ancestor of the task when others use it too. Openers only
 * move up from here on (plan_openers()), so the task keeps it.
 */
static void place_task_needs(void)
{
	for (size_t i = 0; i < nr_file_descs; i++) {
		struct file_sharing *fs = &file_sharing[i];
		const struct pstree_item *task;

		if (!file_descs[i].ops->needed_by)
			continue;
		task = file_descs[i].ops->needed_by(&file_descs[i]);
		if (!task)
			continue;
		fs->opener = desc_in_use(i) ? common_ancestor(fs->opener, task) : task;
		fs->needed = fs->inherit = true;
		pr_debug("file %u: needed by task %d, opened by task %d\n", file_descs[i].id,
			 task->pid, fs->opener->pid);
	}
}

/* One pass of dependencies then objects; *changed: whether any opener moved. */
static int plan_pass(bool *changed)
{
	uint64_t (*key_fn)(const struct file_desc *);

	*changed = false;
	for (size_t i = 0; i < nr_file_descs; i++) {
		uint32_t *ids;
		size_t nr;
		int ret;

		if (!desc_in_use(i))
			continue;
		ret = desc_deps(i, &ids, &nr);
		if (ret)
			return ret;
		for (size_t k = 0; k < nr; k++)
			*changed |= place_dep(i, desc_index(find_file_desc(ids[k])));
		free(ids);
	}
	for (size_t i = 0; i < nr_file_descs; i++) {
		const struct pstree_item *opener = file_sharing[i].opener;
		bool inherit = file_sharing[i].inherit;

		if (desc_in_use(i) && object_key_of(i, &key_fn) && !object_joined_before(i))
			join_object_users(i);
		*changed |= opener != file_sharing[i].opener || inherit != file_sharing[i].inherit;
	}
	return 0;
}

/*
 * Openers only move up the tree and inherit only turns on, so the passes end; the last
 * one changed nothing, so every dependency sits at or above its dependent's opener and
 * objects keep one opener.
 */
static int plan_openers(void)
{
	bool changed = true;
	int ret = check_deps();

	while (!ret && changed)
		ret = plan_pass(&changed);
	return ret;
}

static void set_park_range(int max_restored_fd)
{
	int lowest_sfd, highest_sfd;

	service_fd_range(&lowest_sfd, &highest_sfd);
	park_lo = max_restored_fd + 1;
	park_hi = lowest_sfd - 1;
	for (size_t i = 0; i < nr_file_descs; i++) {
		if (file_sharing[i].inherited_fd >= 0 && file_sharing[i].inherited_fd <= park_hi)
			park_hi = file_sharing[i].inherited_fd - 1;
		if (file_sharing[i].given_fd >= 0 && file_sharing[i].given_fd <= park_hi)
			park_hi = file_sharing[i].given_fd - 1;
		if (file_sharing[i].kept_fd >= 0 && file_sharing[i].kept_fd <= park_hi)
			park_hi = file_sharing[i].kept_fd - 1;
	}
}

int files_park_fd(int fd)
{
	int parked = park_lo <= park_hi ? fcntl(fd, F_DUPFD_CLOEXEC, park_lo) : -1;

	close(fd);
	if (parked > park_hi) {
		close(parked);
		parked = -1;
	}
	if (parked < 0)
		pr_debug("no fd number free to keep an fd for later (%d..%d)\n", park_lo, park_hi);
	return parked;
}

/* restore_file_owners() reaches a file through an fd of the tree: one must hold it. */
static int check_owned_files(void)
{
	for (size_t i = 0; i < nr_file_descs; i++) {
		const struct file_desc *d = &file_descs[i];

		if (d->owner && desc_in_use(i) && !file_sharing[i].nr_users) {
			pr_err("file %u (%s) has an owner for its I/O signals, but no fd of the "
			       "tree holds it: not supported\n",
			       d->id, d->ops->name);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* A file with a finish() step that no task holds: finish() runs in its opener (task). */
bool finished_by_opener(size_t idx)
{
	return file_descs[idx].ops->finish && !file_sharing[idx].nr_users && desc_in_use(idx);
}

/* fdtype_ops.check_finish of each file finished_by_opener() against its opener's fds. */
static int check_opener_finish(void)
{
	int ret = 0;

	for (size_t i = 0; i < nr_file_descs && !ret; i++) {
		const struct pstree_item *opener = file_sharing[i].opener;
		struct task_fds fds = {0};

		if (!finished_by_opener(i) || !file_descs[i].ops->check_finish)
			continue;
		fds.pid = opener->pid;
		ret = read_fdinfos(opener->ids.files_id, &fds.fdis, &fds.nr);
		if (!ret)
			ret = file_descs[i].ops->check_finish(&file_descs[i], &fds);
		free_fdinfos(fds.fdis, fds.nr);
	}
	return ret;
}

int plan_shared_files(void)
{
	struct pstree_item *item;
	int max_restored_fd = -1, next_fd, ret;

	file_sharing = calloc(nr_file_descs ? nr_file_descs : 1, sizeof(*file_sharing));
	if (!file_sharing) {
		pr_err("out of memory planning %zu shared files\n", nr_file_descs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr_file_descs; i++) {
		file_sharing[i].inherited_fd = file_sharing[i].given_fd = -1;
		file_sharing[i].kept_fd = -1;
	}
	for (item = root_item; item; item = pstree_next(item)) {
		ret = note_task_files(item, &max_restored_fd);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < nr_file_descs; i++)
		file_sharing[i].inherit = file_sharing[i].nr_users > 1;
	place_task_needs();
	ret = plan_openers();
	if (!ret)
		ret = check_owned_files();
	if (!ret)
		ret = check_opener_finish();
	if (!ret)
		ret = assign_inherited_fds(max_restored_fd, &next_fd);
	if (!ret)
		ret = assign_kept_fds(max_restored_fd, &next_fd);
	if (!ret)
		ret = place_given_fds(next_fd, max_restored_fd);
	if (!ret)
		set_park_range(max_restored_fd);
	return ret;
}
