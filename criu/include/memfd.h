/*
 * memfds (files-memfd.c): one memfd_inode_entry per memfd object in memfd.img, its
 * contents in pagemap-shmem-SHMID.img (SHMID: the object's inode number), and one
 * file_entry.memfd per open description of it in files.img. VMAs that map a memfd name
 * a file entry of it (VMA_AREA_MEMFD, shmid: the file id), so mappings and fds share one
 * object. The fd kind itself is memfd_fdtype_ops (files.h).
 */
#ifndef CR_MEMFD_H
#define CR_MEMFD_H

#include <stdint.h>
#include <sys/types.h>

struct mem_dump_ctx;

/* ---- dump ---- */

/*
 * A VMA of task pid mapping a memfd, reached through its /proc/PID/map_files link
 * map_path: the file entry VMAs of that object name (written once per object, at the
 * first VMA), in *file_id. 0 or -errno.
 */
int memfd_dump_mapped(pid_t pid, const char *map_path, uint32_t *file_id);

/*
 * Once every task's VMAs and fds are dumped: each memfd object they named, once, into
 * memfd.img and pagemap-shmem-SHMID.img. 0 or -errno.
 */
int memfd_dump_objects(struct mem_dump_ctx *ctx);

/* After the dump, whether it succeeded or not: closes criu's copies of the objects. */
void memfd_dump_fini(void);

/* ---- restore ---- */

/*
 * After files_collect(): what the VMA_AREA_MEMFD VMA mapping file file_id maps. 1: the
 * memfd CRIU dumps shared anonymous memory as ("/dev/zero"), shmem object *shmid, which a
 * shared VMA maps as shared anonymous memory; 0: a memfd. Other VMAs map the file
 * (memfd_open_mapped()). -errno after one error line naming img.
 */
int memfd_vma_shmem(uint32_t file_id, uint64_t *shmid, const char *img);

/*
 * Main process, after files_collect() and fdstore_init(), before shmem_restore_objects()
 * and forking the root: each memfd object of memfd.img created with its name, size,
 * contents, owner and mode, and parked in fdstore; its seals wait for memfd_apply_seals().
 * A "/dev/zero" one is noted for shmem_restore_objects() to create (shmem_note_file()).
 * *nr_pages is increased by the pages read. 0 or -errno.
 */
int memfd_restore_objects(uint64_t *nr_pages);

/* In a task: a new fd on the memfd of file file_id, opened with fdflags; the fd or -errno. */
int memfd_open_mapped(uint32_t file_id, uint32_t fdflags);

/*
 * Main process, once every task has mapped its memory and before any runs: the seals of
 * each memfd, last, since F_SEAL_FUTURE_WRITE refuses the writable shared mappings a task
 * had made before it was added. 0 or -errno.
 */
int memfd_apply_seals(void);

#endif
