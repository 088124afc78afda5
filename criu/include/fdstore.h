/*
 * fdstore: descriptors held by criu's main process during restore and reachable, by id,
 * from every restored task. fdstore_add/fdstore_get are also part of the plugin API.
 */
#ifndef CR_FDSTORE_H
#define CR_FDSTORE_H

/*
 * Main process, restore, before cr_plugin_init(RESTORE) (plugins may park fds during
 * init) and before forking (tasks inherit the store). Its socket is the FDSTORE_SFD
 * service fd, so a task's prepare_fds() keeps it. 0 or -errno.
 */
int fdstore_init(void);

/*
 * Park fd; the store holds its own reference. Returns the id (>= 0, in order of
 * addition) or -errno. Callable from criu and from the tasks; -ENXIO before
 * fdstore_init().
 */
int fdstore_add(int fd);

/* A new descriptor for the file parked as id (the caller owns it), or -errno. */
int fdstore_get(int id);

#endif
