/*
 * Shared anonymous memory on restore. The dump stored the pages of each shmem object
 * once, in pagemap-shmem-SHMID.img (runs by offset in the object); criu's main process
 * re-creates each object (MAP_SHARED|MAP_ANONYMOUS, so it is again a "/dev/zero
 * (deleted)" shmem object), fills it, and parks an fd to it in fdstore; each task maps
 * that fd, so VMAs of one object share their pages again, within a process and across
 * the tree.
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
#include "task-image.h"
#include "vma.h"

struct shmem_obj {
	uint64_t shmid;
	uint64_t size; /* bytes: the highest offset any VMA maps or any stored page has */
	bool has_file_size; /* held as a file too (shmem_note_file()): its size is file_size */
	uint64_t file_size;
	bool mapped; /* a VMA maps it (note_vma()) */
	uint32_t hugetlb; /* MAP_HUGETLB and its page size bits (anonymous hugetlb memory); or 0 */
	void *addr; /* criu's mapping, while it is filled */
	int store_id; /* fdstore id of an fd to it */
	struct page_map pages; /* pagemap-shmem-SHMID.img */
};

/* Set before the fork: every task inherits the table. */
static struct shmem_obj *shmem_objs;
static unsigned int nr_shmem_objs;

static bool vma_is_shmem(const struct vma_image *vma)
{
	return vma_image_mapped(vma) && (vma->status & VMA_ANON_SHARED) &&
	       !(vma->status & VMA_AREA_SYSVIPC);
}

static struct shmem_obj *find_obj(uint64_t shmid)
{
	unsigned int i;

	for (i = 0; i < nr_shmem_objs; i++)
		if (shmem_objs[i].shmid == shmid)
			return &shmem_objs[i];
	return NULL;
}

/* The object shmid, added to the table if new; its size covers at least end bytes. */
static struct shmem_obj *note_obj(uint64_t shmid, uint64_t end)
{
	struct shmem_obj *obj = find_obj(shmid), *grown;

	if (!obj) {
		grown = realloc(shmem_objs, (nr_shmem_objs + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("no memory for shared memory object %#llx\n", (unsigned long long)shmid);
			return NULL;
		}
		shmem_objs = grown;
		obj = &shmem_objs[nr_shmem_objs++];
		*obj = (struct shmem_obj){ .shmid = shmid, .addr = MAP_FAILED, .store_id = -1 };
	}
	if (end > obj->size)
		obj->size = end;
	return obj;
}

#define HUGETLB_FLAGS (MAP_HUGETLB | MAP_HUGE_MASK << MAP_HUGE_SHIFT)

/*
 * The object's pages are hugetlb ones (MAP_HUGETLB, of the size the flags say) where its
 * VMAs say so; they must all say the same.
 */
static int note_vma(const struct vma_image *vma)
{
	struct shmem_obj *obj = note_obj(vma->shmid, vma->pgoff + (vma->end - vma->start));
	uint32_t hugetlb = vma->flags & HUGETLB_FLAGS;

	if (!obj)
		return -ENOMEM;
	if (!obj->mapped)
		obj->hugetlb = hugetlb;
	obj->mapped = true;
	if (obj->hugetlb == hugetlb)
		return 0;
	pr_err("shared memory %#llx: VMA %#llx-%#llx maps it with flags %#x, another with %#x\n",
	       (unsigned long long)vma->shmid, (unsigned long long)vma->start,
	       (unsigned long long)vma->end, hugetlb, obj->hugetlb);
	return -EINVAL;
}

int shmem_note_file(uint64_t shmid, uint64_t size)
{
	uint64_t page = getpagesize();
	/* Mapped whole by criu to be filled: at least a page, and whole pages. */
	struct shmem_obj *obj = note_obj(shmid, size ? (size + page - 1) / page * page : page);

	if (!obj)
		return -ENOMEM;
	obj->has_file_size = true;
	obj->file_size = size;
	return 0;
}

/* Every object the tree maps, sized to cover every VMA of it. */
static int collect_objs(void)
{
	struct pstree_item *item;
	unsigned int v;
	int ret = 0;

	for (item = root_item; item && !ret; item = pstree_next(item)) {
		const struct task_image *ti = item->image;

		for (v = 0; v < ti->nr_vmas && !ret; v++)
			if (vma_is_shmem(&ti->vmas[v]))
				ret = note_vma(&ti->vmas[v]);
	}
	return ret;
}

/* The object's stored pages; an object also covers pages past its mapped part. */
static int read_obj_pages(struct shmem_obj *obj)
{
	const struct page_run *last;
	int ret;

	ret = page_map_read(CR_IMG_SHMEM_PAGEMAP, obj->shmid, &obj->pages);
	if (ret || !obj->pages.nr_runs)
		return ret;
	last = &obj->pages.runs[obj->pages.nr_runs - 1];
	if (last->vaddr + last->len > obj->size)
		obj->size = last->vaddr + last->len;
	return 0;
}

static int create_obj(struct shmem_obj *obj)
{
	/* A hugetlb object is whole huge pages, as the kernel rounds its mapping. */
	if (obj->hugetlb) {
		uint64_t huge = 1ULL << ((obj->hugetlb >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK);

		obj->size = (obj->size + huge - 1) / huge * huge;
	}
	obj->addr = mmap(NULL, obj->size, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | obj->hugetlb, -1, 0);
	if (obj->addr == MAP_FAILED) {
		int err = errno;

		pr_perror("cannot create shared memory %#llx of %llu bytes (flags %#x)",
			  (unsigned long long)obj->shmid, (unsigned long long)obj->size,
			  obj->hugetlb);
		return -err;
	}
	pr_debug("shared memory %#llx: %llu bytes\n", (unsigned long long)obj->shmid,
		 (unsigned long long)obj->size);
	return 0;
}

/* Each run straight into place; pages_fd is pages-ID.img of the object's pagemap. */
static int fill_obj(struct shmem_obj *obj, int pages_fd)
{
	unsigned int i;

	for (i = 0; i < obj->pages.nr_runs; i++) {
		const struct page_run *run = &obj->pages.runs[i];
		ssize_t n = pread(pages_fd, (char *)obj->addr + run->vaddr, run->len, run->file_off);

		if (n != (ssize_t)run->len) {
			pr_err("shared memory %#llx: short read of %llu bytes of pages at %#llx\n",
			       (unsigned long long)obj->shmid, (unsigned long long)run->len,
			       (unsigned long long)run->file_off);
			return n < 0 ? -errno : -EIO;
		}
	}
	return 0;
}

/* The object's stored pages, from the pages image its pagemap names, into obj->addr. */
static int fill_obj_from_image(struct shmem_obj *obj)
{
	struct cr_img *pages_img;
	int ret;

	if (!obj->pages.nr_runs)
		return 0;
	pages_img = open_image(CR_IMG_PAGES, O_RDONLY, obj->pages.pages_id);
	if (!pages_img)
		return -EIO;
	ret = fill_obj(obj, pages_img->fd);
	close_image(pages_img);
	return ret;
}

static int load_obj(struct shmem_obj *obj)
{
	int ret;

	ret = read_obj_pages(obj);
	if (!ret)
		ret = create_obj(obj);
	return ret ? ret : fill_obj_from_image(obj);
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
	/* Its size as a file, which the mapping made whole pages of. */
	if (obj->has_file_size && ftruncate(fd, obj->file_size)) {
		obj->store_id = -errno;
		pr_perror("shared memory %#llx: cannot set its size to %llu",
			  (unsigned long long)obj->shmid, (unsigned long long)obj->file_size);
	} else {
		obj->store_id = fdstore_add(fd);
	}
	close(fd);
	munmap(obj->addr, obj->size);
	obj->addr = MAP_FAILED;
	return obj->store_id < 0 ? obj->store_id : 0;
}

int shmem_restore_objects(uint64_t *nr_pages)
{
	unsigned int i;
	int ret;

	ret = collect_objs();
	for (i = 0; i < nr_shmem_objs && !ret; i++) {
		ret = load_obj(&shmem_objs[i]);
		if (!ret)
			ret = park_obj(&shmem_objs[i]);
		*nr_pages += shmem_objs[i].pages.total_bytes / getpagesize();
		page_map_free(&shmem_objs[i].pages);
	}
	if (!ret && nr_shmem_objs)
		pr_info("%u shared memory objects re-created\n", nr_shmem_objs);
	return ret;
}

/* pagemap-shmem-SHMID.img's runs, which must lie within obj->size bytes (what, in errors). */
static int read_runs_within(struct shmem_obj *obj, const char *what)
{
	uint64_t page = getpagesize();
	const struct page_run *last;
	int ret;

	ret = page_map_read(CR_IMG_SHMEM_PAGEMAP, obj->shmid, &obj->pages);
	if (ret || !obj->pages.nr_runs)
		return ret;
	/* A last page past size is whole in the image, and whole in the mapping. */
	last = &obj->pages.runs[obj->pages.nr_runs - 1];
	if (last->vaddr + last->len > (obj->size + page - 1) / page * page) {
		pr_err("pagemap-shmem-%llu.img: pages up to offset %#llx, past the %llu bytes of %s\n",
		       (unsigned long long)obj->shmid, (unsigned long long)(last->vaddr + last->len),
		       (unsigned long long)obj->size, what);
		return -EINVAL;
	}
	return 0;
}

int shmem_fill_fd(int fd, uint64_t shmid, uint64_t size, const char *what, uint64_t *nr_pages)
{
	struct shmem_obj obj = { .shmid = shmid, .size = size, .addr = MAP_FAILED };
	int ret;

	/* CRIU writes no pagemap for an empty memfd. */
	if (!size && !img_exists(CR_IMG_SHMEM_PAGEMAP, shmid))
		return 0;
	ret = read_runs_within(&obj, what);
	if (ret || !obj.pages.nr_runs)
		goto out;
	/* Through a mapping: hugetlbfs has no write(). */
	obj.addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (obj.addr == MAP_FAILED) {
		ret = -errno;
		pr_perror("%s: cannot map its %llu bytes to fill them", what, (unsigned long long)size);
		goto out;
	}
	ret = fill_obj_from_image(&obj);
	munmap(obj.addr, size);
out:
	*nr_pages = obj.pages.total_bytes / getpagesize();
	page_map_free(&obj.pages);
	return ret;
}

int shmem_fill_mem(void *addr, uint64_t shmid, uint64_t size, const char *what, uint64_t *nr_pages)
{
	struct shmem_obj obj = { .shmid = shmid, .size = size, .addr = addr };
	int ret = read_runs_within(&obj, what);

	if (!ret)
		ret = fill_obj_from_image(&obj);
	*nr_pages = obj.pages.total_bytes / getpagesize();
	page_map_free(&obj.pages);
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

	for (i = 0; i < nr_shmem_objs; i++) {
		if (shmem_objs[i].addr != MAP_FAILED)
			munmap(shmem_objs[i].addr, shmem_objs[i].size);
		page_map_free(&shmem_objs[i].pages);
	}
	free(shmem_objs);
	shmem_objs = NULL;
	nr_shmem_objs = 0;
}
