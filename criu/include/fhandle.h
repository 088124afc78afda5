/* Opening an inode by its file handle (fhandle.c). */
#ifndef CR_FHANDLE_H
#define CR_FHANDLE_H

/*
 * The inode a handle names on the filesystem of the mount mnt_fd (O_PATH) is on, opened
 * O_PATH: the fd, or -errno and *why. Takes CAP_DAC_READ_SEARCH in criu's user namespace.
 */
struct file_handle;
int open_handle_in_mount(int mnt_fd, struct file_handle *fh, const char **why);

#endif
