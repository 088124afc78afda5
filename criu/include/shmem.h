/*
 * Shared anonymous memory on restore: one object per dumped shmid, re-created by criu's
 * main process and mapped by every task of the tree that had it mapped.
 */
#ifndef CR_SHMEM_H
#define CR_SHMEM_H

#include <stdint.h>

/*
 * Main process, before shmem_restore_objects(): shmem object shmid is also held as a
 * file (an fd on it, a private mapping of it) of size bytes, so it is created even if no
 * VMA maps it shared, and given that size. 0 or -errno.
 */
int shmem_note_file(uint64_t shmid, uint64_t size);

/*
 * Main process, after task_images_collect() and fdstore_init(), before forking the root:
 * create each object the tree's VMAs name (and shmem_note_file() noted), fill it from
 * pagemap-shmem-SHMID.img, park an fd to it in fdstore. *nr_pages is increased by the
 * pages read. 0 or -errno.
 */
int shmem_restore_objects(uint64_t *nr_pages);

/*
 * The pages of pagemap-shmem-SHMID.img into fd, a shared memory object of size bytes
 * (a memfd restore re-created; pages past size are refused), naming it what in errors;
 * *nr_pages counts the pages read. 0 or -errno.
 */
int shmem_fill_fd(int fd, uint64_t shmid, uint64_t size, const char *what, uint64_t *nr_pages);

/*
 * The same into size bytes of memory at addr that the caller has mapped (a SysV segment it
 * attached). 0 or -errno.
 */
int shmem_fill_mem(void *addr, uint64_t shmid, uint64_t size, const char *what, uint64_t *nr_pages);

/* In a task: a new fd of the object shmid (mmap it MAP_SHARED at the VMA's pgoff), or -errno. */
int shmem_open(uint64_t shmid);

/* Main process: forget the objects (the fdstore holds them until it goes). */
void shmem_fini(void);

#endif
