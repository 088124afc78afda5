/*
 * File locks (--file-locks): the POSIX record locks, flock() locks and OFD locks the
 * dumped tree holds on its open files, in filelocks.img (file_lock_entry, CRIU's format).
 */
#ifndef CR_FILE_LOCK_H
#define CR_FILE_LOCK_H

#include <stdint.h>
#include <sys/types.h>

/* file_lock_entry.flag: the lock's kind, as CRIU numbers it. */
#define FILE_LOCK_POSIX 1u /* fcntl(F_SETLK): owned by the process */
#define FILE_LOCK_FLOCK 2u /* flock(): owned by the open description */
#define FILE_LOCK_OFD 4u   /* fcntl(F_OFD_SETLK): owned by the open description */
#define FILE_LOCK_LEASE 8u /* fcntl(F_SETLEASE): owned by the open description */
/*
 * file_lock_entry.type of a lease being broken: the type it breaks to (F_RDLCK, F_UNLCK)
 * with this bit; the type it had is the one the fd's access mode allows (F_RDLCK for a
 * read-only fd, F_WRLCK otherwise), as CRIU restores it.
 */
#define FILE_LOCK_LEASE_BREAKING 4u

/*
 * Dump, the whole tree seized, before any task's files are dumped: every lock the tree
 * holds, found in /proc/locks and named by the fdinfo "lock:" lines of the fd (of the
 * first task in tree order) whose description holds it -> filelocks.img (only when
 * there are some). Refuses, with one line, a lock without --file-locks, a lock of a kind
 * it cannot re-take, a POSIX lock of the tree no fd shows. 0 or -errno.
 */
int dump_file_locks(void);

/*
 * Restore, main process, after files_collect() and before forking: filelocks.img
 * decoded and checked (kinds, types, ranges, live tasks, each lock's fd one its task has,
 * open for the access a POSIX or OFD lock needs: reading for F_RDLCK, writing for
 * F_WRLCK) into a table the tasks inherit. 0 or -errno after one line naming the entry.
 */
int file_locks_collect(void);
/* Frees the table; a no-op when file_locks_collect() never ran. */
void file_locks_collect_fini(void);

/*
 * In the restored task, once its fds are in place and before the blob takes its locks:
 * a POSIX or OFD lock someone else took since the dump is named, with its holder (in the
 * log: the task's errors go there). 0 or -errno.
 */
int file_locks_check_task(pid_t pid);

/*
 * The locks task pid re-takes, in the blob's layout (struct rst_file_lock): *locks
 * points into the collected table (NULL when none).
 */
struct rst_file_lock;
void file_locks_of_task(pid_t pid, const struct rst_file_lock **locks, unsigned int *nr);

#endif
