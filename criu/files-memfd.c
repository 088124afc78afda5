/*
 * memfd objects (memfd.img) and the descriptions that name them (file_entry.memfd), on
 * restore. What is supported is what CRIU writes for shared anonymous memory on kernels
 * that show it as a memfd: an object named "/dev/zero", mapped by VMAs with
 * VMA_AREA_MEMFD, whose pages are in pagemap-shmem-SHMID.img. Those VMAs are restored as
 * the shared anonymous memory they are (shmem.c). A memfd held as an fd, or mapped under
 * any other name, is refused by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "vma.h"

#include "memfd.pb-c.h"

/* The name the kernel gives shared anonymous memory ("/dev/zero (deleted)" in maps). */
#define SHMEM_MEMFD_NAME "/dev/zero"

static MemfdInodeEntry **memfd_inodes;
static size_t nr_memfd_inodes;

static const MemfdInodeEntry *find_memfd_inode(uint64_t inode_id)
{
	for (size_t i = 0; i < nr_memfd_inodes; i++)
		if (memfd_inodes[i]->inode_id == inode_id)
			return memfd_inodes[i];
	return NULL;
}

/* Kept: the table holds the records. */
static int add_memfd_inode(void *msg, void *arg)
{
	MemfdInodeEntry *mie = msg, **grown;

	(void)arg;
	if (find_memfd_inode(mie->inode_id)) {
		pr_err("memfd.img: inode %llu appears twice\n", (unsigned long long)mie->inode_id);
		return -EINVAL;
	}
	grown = realloc(memfd_inodes, (nr_memfd_inodes + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("memfd.img: out of memory (%zu entries)\n", nr_memfd_inodes);
		return -ENOMEM;
	}
	memfd_inodes = grown;
	memfd_inodes[nr_memfd_inodes++] = mie;
	return 1;
}

/* memfd.img is there only when the dump had memfds. */
static int memfd_collect_images(void)
{
	return pb_collect_optional_image(CR_IMG_MEMFD_INODE, add_memfd_inode, NULL);
}

/* d->kind stays NULL: the entry's inode is in memfd_inodes, found again by its id. */
static int memfd_collect(struct file_desc *d)
{
	const MemfdFileEntry *mfe = d->fe->memfd;

	if (!mfe || mfe->id != d->id) {
		pr_err("files.img: memfd file %u has no memfd entry of its own\n", d->id);
		return -EINVAL;
	}
	if (!find_memfd_inode(mfe->inode_id)) {
		pr_err("files.img: memfd file %u names inode %u, which is not in memfd.img\n", d->id,
		       mfe->inode_id);
		return -EINVAL;
	}
	return collect_owner(d, mfe->fown);
}

static void memfd_collect_fini(void)
{
	for (size_t i = 0; i < nr_memfd_inodes; i++)
		memfd_inode_entry__free_unpacked(memfd_inodes[i], NULL);
	free(memfd_inodes);
	memfd_inodes = NULL;
	nr_memfd_inodes = 0;
}

int memfd_vma_to_shmem(uint32_t file_id, uint64_t *shmid, const char *img)
{
	const struct file_desc *d = find_file_desc(file_id);
	const MemfdInodeEntry *inode;

	if (!d || d->ops != &memfd_fdtype_ops) {
		pr_err("%s: a memfd VMA maps file %u, which is not a memfd in files.img\n", img,
		       file_id);
		return -EINVAL;
	}
	inode = find_memfd_inode(d->fe->memfd->inode_id);
	if (strcmp(inode->name, SHMEM_MEMFD_NAME)) {
		pr_err("%s: a VMA maps memfd \"%s\" (file %u): memfds are not supported, only shared "
		       "anonymous memory dumped as one\n",
		       img, inode->name, file_id);
		return -ENOTSUP;
	}
	*shmid = inode->shmid;
	return 0;
}

/*
 * Restore only: a memfd is found through its VMAs, never opened as an fd (open is NULL,
 * so an fdinfo entry naming one is refused), and the dump hands a task's memfd fds to
 * the plugins or refuses them (files-ext.c), so it owns nothing.
 */
const struct fdtype_ops memfd_fdtype_ops = {
	.type = FD_TYPES__MEMFD,
	.name = "memfd",
	.collect_images = memfd_collect_images,
	.collect = memfd_collect,
	.collect_fini = memfd_collect_fini,
};
