/*
 * --force-irmap: a path for an inode found by scanning directories (an inode reverse map),
 * for the watched inodes of inotify and fanotify, whose images then name each by a path
 * as well as by its handle.
 */
#ifndef CR_IRMAP_H
#define CR_IRMAP_H

#include <sys/types.h>

/*
 * A path to the inode dev/ino (not a symlink followed) under the --irmap-scan-path
 * directories, then a few system directories where watched files usually live: *path,
 * malloc'ed. -ENOENT when none leads there (logged at debug level only), else -errno.
 */
int irmap_find_path(dev_t dev, ino_t ino, char **path);

#endif
