/*
 * The process tree: items linked parent/children, the walk over them, collecting a
 * live process's ids, and pstree.img (one entry per process, parents before children).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "proc_parse.h"
#include "pstree.h"
#include "pstree.pb-c.h"

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
	for (i = 0; i < item->nr_threads; i++)
		tids[i] = item->threads[i];
	entry.pid = item->pid;
	entry.ppid = item->ppid;
	entry.pgid = item->pgid;
	entry.sid = item->sid;
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
	if (ret)
		pstree_free();
	return ret;
}
