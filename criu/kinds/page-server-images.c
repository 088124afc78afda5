/*
 * criu page-server --lazy-pages: the lazy source of an images directory. A remote
 * criu lazy-pages --page-server asks for a task's pages (PS_IOV_GET, page-server.c) and
 * gets them from the task's pagemap and pages images here, up the pre-dump chain.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "page-server.h"
#include "task-image.h"

#define PAGE_SIZE 4096UL

/* One task's pagemap, read at its first request, and its pages images by chain level. */
struct ps_image_task {
	uint64_t pid;
	struct page_map map;
	int fds[IMG_CHAIN_MAX]; /* -1 until a run of that level is read */
};

struct ps_images {
	struct ps_image_task *tasks;
	unsigned int nr_tasks;
};

static struct ps_image_task *images_task(struct ps_images *im, uint64_t pid)
{
	struct ps_image_task *tasks, *t;
	unsigned int i;

	for (i = 0; i < im->nr_tasks; i++)
		if (im->tasks[i].pid == pid)
			return &im->tasks[i];
	tasks = realloc(im->tasks, (im->nr_tasks + 1) * sizeof(*tasks));
	if (!tasks) {
		pr_err("lazy source: no memory for the pagemap of task %llu\n",
		       (unsigned long long)pid);
		return NULL;
	}
	im->tasks = tasks;
	t = &tasks[im->nr_tasks];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	for (i = 0; i < IMG_CHAIN_MAX; i++)
		t->fds[i] = -1;
	/* Logged there: no such task in these images, or a damaged pagemap. */
	if (pid > INT32_MAX || page_map_read_chain(CR_IMG_PAGEMAP, pid, &t->map))
		return NULL;
	im->nr_tasks++;
	return t;
}

/* The stored run holding vaddr, or NULL. */
static const struct page_run *images_run(const struct page_map *map, uint64_t vaddr)
{
	unsigned int lo = page_run_after(map->runs, map->nr_runs, vaddr);

	if (lo == map->nr_runs || map->runs[lo].vaddr > vaddr || map->runs[lo].remote)
		return NULL;
	return &map->runs[lo];
}

static int images_level_fd(struct ps_image_task *t, unsigned int level)
{
	int dir_fd;
	struct cr_img *img;

	if (t->fds[level] >= 0)
		return t->fds[level];
	dir_fd = images_chain_dir(level);
	if (dir_fd < 0)
		return dir_fd;
	img = open_image_at(dir_fd, CR_IMG_PAGES, O_RDONLY, t->map.level_pages_id[level]);
	close(dir_fd);
	if (!img)
		return -EIO;
	t->fds[level] = fcntl(img->fd, F_DUPFD_CLOEXEC, 0);
	close_image(img);
	if (t->fds[level] < 0)
		pr_perror("lazy source: cannot keep a pages image of task %llu open",
			  (unsigned long long)t->pid);
	return t->fds[level] < 0 ? -EMFILE : t->fds[level];
}

static int images_get(void *arg, uint64_t pid, uint64_t vaddr, uint64_t *nr_pages, void *buf)
{
	struct ps_image_task *t = images_task(arg, pid);
	const struct page_run *r = t && !(vaddr % PAGE_SIZE) ? images_run(&t->map, vaddr) : NULL;
	uint64_t len;
	ssize_t got;
	int fd;

	if (!r) {
		pr_err("lazy source: no stored pages at %#llx of task %llu in these images\n",
		       (unsigned long long)vaddr, (unsigned long long)pid);
		return -ENOENT;
	}
	if (*nr_pages > (r->vaddr + r->len - vaddr) / PAGE_SIZE)
		*nr_pages = (r->vaddr + r->len - vaddr) / PAGE_SIZE;
	len = *nr_pages * PAGE_SIZE;
	fd = images_level_fd(t, r->level);
	if (fd < 0)
		return fd;
	got = pread(fd, buf, len, r->file_off + (vaddr - r->vaddr));
	if (got != (ssize_t)len) {
		pr_err("lazy source: cannot read %llu bytes of pages of task %llu: %s\n",
		       (unsigned long long)len, (unsigned long long)pid,
		       got < 0 ? strerror(errno) : "short read");
		return got < 0 ? -errno : -EIO;
	}
	return 0;
}

int page_server_serve_images(int listen_sk)
{
	struct ps_images im = { 0 };
	int ret = page_server_serve_lazy(listen_sk, images_get, &im);

	for (unsigned int i = 0; i < im.nr_tasks; i++) {
		page_map_free(&im.tasks[i].map);
		for (unsigned int level = 0; level < IMG_CHAIN_MAX; level++)
			if (im.tasks[i].fds[level] >= 0)
				close(im.tasks[i].fds[level]);
	}
	free(im.tasks);
	return ret;
}
