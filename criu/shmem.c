/*
 * Shared anonymous memory on restore. Each task dumped the pages of every shmem object
 * it mapped; criu's main process re-creates each object once (MAP_SHARED|MAP_ANONYMOUS,
 * so it is again a "/dev/zero (deleted)" shmem object), fills it, and parks an fd to it
 * in fdstore; each task maps that fd, so VMAs of one object share their pages again,
 * within a process and across the tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fdstore.h"
#include "image.h"
#include "log.h"
#include "pstree.h"
#include "shmem.h"
#include "vma.h"

#include "mm.pb-c.h"
#include "pagemap.pb-c.h"

#define PAGE_SIZE 4096ull

struct shmem_obj {
	uint64_t shmid;
	uint64_t size; /* bytes: the highest offset any VMA maps */
	void *addr;    /* criu's mapping, while it is filled */
	int store_id;  /* fdstore id of an fd to it */
};

/* Set before the fork: every task inherits the table. */
static struct shmem_obj *shmem_objs;
static unsigned int nr_shmem_objs;

static bool vma_is_shmem(const VmaEntry *vma)
{
	return (vma->status & VMA_AREA_REGULAR) && (vma->status & VMA_ANON_SHARED) &&
	       vma->has_shmid;
}

static struct shmem_obj *find_obj(uint64_t shmid)
{
	unsigned int i;

	for (i = 0; i < nr_shmem_objs; i++)
		if (shmem_objs[i].shmid == shmid)
			return &shmem_objs[i];
	return NULL;
}

static int note_vma(const VmaEntry *vma)
{
	uint64_t end = vma->pgoff + (vma->end - vma->start);
	struct shmem_obj *obj = find_obj(vma->shmid), *grown;

	if (!obj) {
		grown = realloc(shmem_objs, (nr_shmem_objs + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("no memory for shared memory object %#llx\n",
			       (unsigned long long)vma->shmid);
			return -ENOMEM;
		}
		shmem_objs = grown;
		obj = &shmem_objs[nr_shmem_objs++];
		*obj = (struct shmem_obj){.shmid = vma->shmid, .addr = MAP_FAILED, .store_id = -1};
	}
	if (end > obj->size)
		obj->size = end;
	return 0;
}

/* A zombie left no mm image; any other task has one (a missing one fails its own restore). */
static int read_mm(pid_t pid, MmEntry **mm)
{
	struct cr_img *img;
	char name[64];
	int ret;

	*mm = NULL;
	snprintf(name, sizeof(name), cr_img_descs[CR_IMG_MM].fmt, (unsigned long)pid);
	if (faccessat(images_dir_fd, name, F_OK, 0))
		return 0;
	img = open_image(CR_IMG_MM, O_RDONLY, pid);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)mm);
	close_image(img);
	return ret;
}

/* Copy the part of one stored page run that lies in vma into its object. */
static int fill_from_run(const VmaEntry *vma, const PagemapEntry *pe, int pages_fd)
{
	uint64_t run_start = pe->vaddr, run_end = pe->vaddr + pe->nr_pages * PAGE_SIZE;
	uint64_t from = run_start > vma->start ? run_start : vma->start;
	uint64_t to = run_end < vma->end ? run_end : vma->end;
	struct shmem_obj *obj = find_obj(vma->shmid);
	char *dst;
	ssize_t n;

	if (from >= to)
		return 0;
	dst = (char *)obj->addr + vma->pgoff + (from - vma->start);
	n = pread(pages_fd, dst, to - from, pe->pages_off + (from - run_start));
	if (n != (ssize_t)(to - from)) {
		pr_err("shared memory %#llx: short read of %llu bytes of pages at %#llx\n",
		       (unsigned long long)vma->shmid, (unsigned long long)(to - from),
		       (unsigned long long)(pe->pages_off + (from - run_start)));
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

/*
 * One task's stored pages of its shared VMAs. Every task that maps an object stored the
 * same contents, so reading them again from another task only costs time.
 */
static int fill_from_task(pid_t pid, const MmEntry *mm)
{
	struct cr_img *map_img, *pages_img = NULL;
	PagemapHead *head;
	PagemapEntry *pe;
	size_t i;
	int ret;

	map_img = open_image(CR_IMG_PAGEMAP, O_RDONLY, pid);
	if (!map_img)
		return -EIO;
	ret = pb_read_one_required_as(map_img, &pagemap_head__descriptor, (void **)&head);
	if (!ret) {
		pages_img = open_image(CR_IMG_PAGES, O_RDONLY, head->pages_id);
		pb_free(map_img, head);
		if (!pages_img)
			ret = -EIO;
	}
	while (!ret && (ret = pb_read_one(map_img, (void **)&pe)) == 1) {
		ret = 0;
		for (i = 0; i < mm->n_vmas && !ret; i++)
			if (vma_is_shmem(mm->vmas[i]))
				ret = fill_from_run(mm->vmas[i], pe, pages_img->fd);
		pb_free(map_img, pe);
	}
	if (pages_img)
		close_image(pages_img);
	close_image(map_img);
	return ret;
}

/* The object's fd goes to fdstore; criu's own mapping goes once it is filled. */
static int park_obj(struct shmem_obj *obj)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)obj->addr,
		 (unsigned long)obj->addr + (unsigned long)obj->size);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		pr_perror("shared memory %#llx: cannot open %s", (unsigned long long)obj->shmid,
			  path);
		return -err;
	}
	obj->store_id = fdstore_add(fd);
	close(fd);
	munmap(obj->addr, obj->size);
	obj->addr = MAP_FAILED;
	return obj->store_id < 0 ? obj->store_id : 0;
}

static int create_objs(void)
{
	unsigned int i;

	for (i = 0; i < nr_shmem_objs; i++) {
		struct shmem_obj *obj = &shmem_objs[i];

		obj->addr = mmap(NULL, obj->size, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (obj->addr == MAP_FAILED) {
			int err = errno;

			pr_perror("cannot create shared memory %#llx of %llu bytes",
				  (unsigned long long)obj->shmid, (unsigned long long)obj->size);
			return -err;
		}
		pr_debug("shared memory %#llx: %llu bytes\n", (unsigned long long)obj->shmid,
			 (unsigned long long)obj->size);
	}
	return 0;
}

static void free_mms(MmEntry **mms, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		pb_free(NULL, mms[i]);
	free(mms);
}

int shmem_restore_objects(void)
{
	struct pstree_item *item;
	unsigned int nr = 0, i;
	MmEntry **mms;
	size_t v;
	int ret = 0;

	for (item = root_item; item; item = pstree_next(item))
		nr++;
	mms = calloc(nr, sizeof(*mms));
	if (!mms) {
		pr_err("no memory for %u mm images\n", nr);
		return -ENOMEM;
	}
	for (item = root_item, i = 0; item && !ret; item = pstree_next(item), i++) {
		ret = read_mm(item->pid, &mms[i]);
		for (v = 0; !ret && mms[i] && v < mms[i]->n_vmas; v++)
			if (vma_is_shmem(mms[i]->vmas[v]))
				ret = note_vma(mms[i]->vmas[v]);
	}
	if (!ret && nr_shmem_objs)
		ret = create_objs();
	for (item = root_item, i = 0; item && !ret && nr_shmem_objs; item = pstree_next(item), i++)
		if (mms[i])
			ret = fill_from_task(item->pid, mms[i]);
	for (i = 0; i < nr_shmem_objs && !ret; i++)
		ret = park_obj(&shmem_objs[i]);
	free_mms(mms, nr);
	if (!ret && nr_shmem_objs)
		pr_info("%u shared memory objects re-created\n", nr_shmem_objs);
	return ret;
}

int shmem_open(uint64_t shmid)
{
	struct shmem_obj *obj = find_obj(shmid);

	if (!obj || obj->store_id < 0) {
		pr_err("shared memory %#llx was not re-created\n", (unsigned long long)shmid);
		return -ENOENT;
	}
	return fdstore_get(obj->store_id); /* which logs its failure */
}

void shmem_fini(void)
{
	unsigned int i;

	for (i = 0; i < nr_shmem_objs; i++)
		if (shmem_objs[i].addr != MAP_FAILED)
			munmap(shmem_objs[i].addr, shmem_objs[i].size);
	free(shmem_objs);
	shmem_objs = NULL;
	nr_shmem_objs = 0;
}
