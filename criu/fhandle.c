/*
 * Opening an inode by its file handle through one of its filesystem's mounts, as fsnotify
 * watches and marks are restored (by criu, or by the owner service for a tree's mount).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "fhandle.h"

/*
 * open_by_handle_at() finds the filesystem through a mount fd but refuses an O_PATH one,
 * and opening the mount's directory for reading is itself an event (IN_OPEN,
 * IN_CLOSE_NOWRITE) that watches restored before, on that directory, would queue. Given
 * AT_FDCWD it takes the working directory's mount, and chdir is no event: the handle is
 * opened from inside the mount and the working directory put back at once. O_PATH: the
 * inode is not opened for I/O, so no event either. The fd, or -errno and *why.
 */
int open_handle_in_mount(int mnt_fd, struct file_handle *fh, const char **why)
{
	int cwd_fd, fd, err = 0;

	cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd_fd < 0) {
		*why = "cannot open criu's working directory";
		return -errno;
	}
	*why = "cannot enter its mount";
	if (fchdir(mnt_fd)) {
		err = errno;
		close(cwd_fd);
		return -err;
	}
	fd = open_by_handle_at(AT_FDCWD, fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		*why = "open_by_handle_at";
	}
	if (fchdir(cwd_fd)) {
		err = errno;
		*why = "cannot return to criu's working directory";
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	close(cwd_fd);
	return fd >= 0 ? fd : -err;
}
