/*
 * Service fds: criu's own descriptors inside a restored task (log, images dir, sync
 * socket, ...), parked at fixed high numbers just below RLIMIT_NOFILE so that the
 * task's own fd numbers never collide with them.
 */
#ifndef CR_SERVICEFD_H
#define CR_SERVICEFD_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Each kind gets one number: base - kind. Add new kinds before SERVICE_FD_MAX. */
enum sfd_type {
	LOG_SFD,      /* the log file */
	IMG_SFD,      /* the images directory */
	SYNC_SFD,     /* the task's report/release socket to the main process */
	FDSTORE_SFD,  /* the socket that reaches the main process's fdstore */
	USERNS_SFD,   /* the socket that reaches the owner service of a user namespace */
	PROC_SFD,     /* the proc the tasks read (proc_open()), where /proc may be missing */
	LAZY_DIR_SFD, /* restore --lazy-pages: a work directory other than the images one */
	/* The tree's mount namespaces (ns-mnt.c), MNTNS_SFD_NR numbers from here on. */
	MNTNS_SFD,
	/* The tree's net namespaces, where it has nested ones (ns-net.c): NETNS_SFD_NR. */
	NETNS_SFD = MNTNS_SFD + 8,
	SERVICE_FD_MAX = NETNS_SFD + 8,
};
#define MNTNS_SFD_NR (NETNS_SFD - MNTNS_SFD)
#define NETNS_SFD_NR (SERVICE_FD_MAX - NETNS_SFD)

/*
 * Move fd to the number reserved for type (close-on-exec) and close fd. Returns the new
 * number or -errno (logged). A negative fd is an error (-EBADF), so a failed dup() can
 * be passed straight in.
 */
int install_service_fd(enum sfd_type type, int fd);
/* The number of an installed service fd, or -EBADF when that kind is not installed. */
int get_service_fd(enum sfd_type type);
/* Close an installed service fd (no-op when it is not installed). */
void close_service_fd(enum sfd_type type);
/* Whether fd lies in the range reserved for service fds (installed or not). */
bool is_service_fd(int fd);
/*
 * The reserved range [*lowest, *highest]: restored fds must stay below it, and the
 * restorer closes it at the very end so nothing of criu's leaks into the task.
 */
void service_fd_range(int *lowest, int *highest);
/*
 * Restore: tasks sharing one fd table (CLONE_FILES) need one set of service fds each:
 * criu reserves nr sets (slots) before planning any fd number, a task other than the
 * table's first enters its own slot (its installed service fds copied there). 0 or -errno.
 */
void service_fd_reserve_slots(unsigned int nr);
int service_fd_enter_slot(unsigned int slot);

/*
 * Files of proc, path relative to its root ("self/maps", "42/fd"): through PROC_SFD where
 * restore installed it (the tree has a mount namespace of its own, whose tasks may find no
 * proc at /proc once they are in it), else through /proc. As open(), fopen() and opendir()
 * do (close-on-exec): errno is left set on failure, nothing is logged.
 */
int proc_open(const char *path, int flags);
FILE *proc_fopen(const char *path, const char *mode);
DIR *proc_opendir(const char *path);
/*
 * For calls that take a path and no directory fd (inotify_add_watch(), fanotify_mark() of a
 * magic link): fn(name, arg), name a path to proc's file path. Through PROC_SFD it is
 * relative, and the cwd is PROC_SFD for the while (a task's cwd is restored last). fn's
 * return value, errno as fn left it; -1 after one line where the cwd cannot be changed.
 */
int proc_path_call(const char *path, int (*fn)(const char *path, void *arg), void *arg);

#endif
