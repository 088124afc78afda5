/*
 * Deduplication of pre-dump chains (--auto-dedup while dumping, criu dedup afterwards):
 * where a dump stores a page again, the copy its parent images hold (at whichever chain
 * level) is never read by a restore of that dump, so it is punched out of that level's
 * pages image (FALLOC_FL_PUNCH_HOLE, the file keeps its size and offsets).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dedup.h"
#include "log.h"

void page_dedup_init(struct page_dedup *d, const struct page_map *parent)
{
	memset(d, 0, sizeof(*d));
	d->parent = parent;
}

/* The pages image of a parent chain level, opened for punching holes. */
static int level_fd(struct page_dedup *d, uint32_t level)
{
	int dir_fd, fd;
	char name[64];

	if (d->fds[level] > 0)
		return d->fds[level];
	dir_fd = images_chain_dir(level);
	if (dir_fd < 0)
		return dir_fd;
	img_name(CR_IMG_PAGES, d->parent->level_pages_id[level], name, sizeof(name));
	fd = openat(dir_fd, name, O_WRONLY | O_CLOEXEC);
	close(dir_fd);
	if (fd < 0) {
		fd = -errno;
		pr_perror("dedup: cannot open %s of parent level %u", name, level);
		return fd;
	}
	d->fds[level] = fd;
	return fd;
}

static int punch_hole(struct page_dedup *d)
{
	int fd;

	if (!d->hole_len)
		return 0;
	fd = level_fd(d, d->hole_level);
	if (fd < 0)
		return fd;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, d->hole_off, d->hole_len)) {
		int err = errno;

		pr_perror("dedup: cannot punch %llu bytes at %llu of parent level %u",
			  (unsigned long long)d->hole_len, (unsigned long long)d->hole_off,
			  d->hole_level);
		return -err;
	}
	d->hole_len = 0;
	return 0;
}

int page_dedup_add(struct page_dedup *d, const struct page_run *run, uint64_t addr, uint64_t len)
{
	uint64_t off = run->file_off + (addr - run->vaddr);
	int ret;

	if (d->hole_len && d->hole_level == run->level && d->hole_off + d->hole_len == off) {
		d->hole_len += len;
		return 0;
	}
	ret = punch_hole(d);
	if (ret)
		return ret;
	d->hole_level = run->level;
	d->hole_off = off;
	d->hole_len = len;
	return 0;
}

int page_dedup_fini(struct page_dedup *d)
{
	int ret = punch_hole(d);

	for (unsigned int level = 0; level < IMG_CHAIN_MAX; level++)
		if (d->fds[level] > 0)
			close(d->fds[level]);
	memset(d->fds, 0, sizeof(d->fds));
	return ret;
}

/* The parent's copies of this map's own (level 0) runs. */
static int dedup_runs(const struct page_map *own, const struct page_map *parent)
{
	struct page_dedup d;
	unsigned int i, p = 0;
	int ret = 0;

	page_dedup_init(&d, parent);
	for (i = 0; i < own->nr_runs && !ret; i++) {
		const struct page_run *run = &own->runs[i];
		uint64_t end = run->vaddr + run->len;

		if (run->level)
			continue;
		/* Both sorted by address: the parent's cursor only moves forward. */
		while (p < parent->nr_runs && parent->runs[p].vaddr + parent->runs[p].len <= run->vaddr)
			p++;
		for (unsigned int q = p; q < parent->nr_runs && parent->runs[q].vaddr < end && !ret;
		     q++) {
			const struct page_run *prun = &parent->runs[q];
			uint64_t from = prun->vaddr > run->vaddr ? prun->vaddr : run->vaddr;
			uint64_t to = prun->vaddr + prun->len < end ? prun->vaddr + prun->len : end;

			ret = page_dedup_add(&d, prun, from, to - from);
		}
	}
	/* Closed either way; the first failure is the one reported. */
	return page_dedup_fini(&d) && !ret ? -EIO : ret;
}

static int dedup_pagemap(unsigned long pid)
{
	struct page_map own, parent;
	int ret;

	ret = page_map_read_chain(CR_IMG_PAGEMAP, pid, &own);
	if (ret)
		return ret;
	ret = page_map_read_parent(CR_IMG_PAGEMAP, pid, &parent);
	if (!ret) {
		ret = dedup_runs(&own, &parent);
		page_map_free(&parent);
	}
	page_map_free(&own);
	return ret;
}

/* A task's pagemap: "pagemap-PID.img" (not pagemap-shmem-*); its pid, or 0. */
static unsigned long task_pagemap_pid(const char *name)
{
	char *end;
	unsigned long pid;

	if (strncmp(name, "pagemap-", 8) || name[8] < '0' || name[8] > '9')
		return 0;
	pid = strtoul(name + 8, &end, 10);
	return strcmp(end, ".img") ? 0 : pid;
}

int cr_dedup(void)
{
	int parent_fd = images_chain_dir(1), fd, ret = 0;
	struct dirent *de;
	DIR *dir;

	if (parent_fd < 0)
		return parent_fd;
	close(parent_fd);
	/* images_dir_fd is O_PATH, which cannot be listed. */
	fd = openat(images_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		ret = -errno;
		pr_perror("dedup: cannot list the images directory");
		if (fd >= 0)
			close(fd);
		return ret;
	}
	while (!ret && (de = readdir(dir))) {
		unsigned long pid = task_pagemap_pid(de->d_name);

		if (pid)
			ret = dedup_pagemap(pid);
	}
	closedir(dir);
	return ret;
}
