/*
 * A task's current and root directories: read from /proc/PID/{cwd,root} on dump
 * (fs-PID.img), set again with fchdir/chroot on restore.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"

#include "fs.pb-c.h"

/* Both links resolve from criu's root, so restore reaches them from criu's root too. */
static int read_dir_link(pid_t pid, const char *which, char *path)
{
	char link[64];
	struct stat st, now;
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/%d/%s", pid, which);
	len = readlink(link, path, PATH_MAX - 1);
	if (len < 0 || stat(link, &st)) {
		pr_perror("task %d: cannot read its %s (%s)", pid, which, link);
		return -errno;
	}
	path[len] = '\0';
	if (st.st_nlink == 0) {
		pr_err("task %d: its %s %s was deleted: not supported\n", pid, which, path);
		return -ENOTSUP;
	}
	if (stat(path, &now) || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
		pr_err("task %d: its %s %s is not reachable from criu (another mount namespace?)\n",
		       pid, which, path);
		return -ENOENT;
	}
	return 0;
}

int dump_task_fs(pid_t pid)
{
	FsEntry fse = FS_ENTRY__INIT;
	char cwd[PATH_MAX], root[PATH_MAX];
	struct cr_img *img;
	int ret;

	ret = read_dir_link(pid, "cwd", cwd);
	if (!ret)
		ret = read_dir_link(pid, "root", root);
	if (ret)
		return ret;
	img = open_image(CR_IMG_FS, O_WRONLY, pid);
	if (!img)
		return -EIO;
	fse.cwd = cwd;
	fse.root = root;
	ret = pb_write_one(img, &fse);
	close_image(img);
	if (!ret)
		pr_info("task %d: cwd %s, root %s\n", pid, cwd, root);
	return ret;
}

static int open_dir(pid_t pid, const char *which, const char *path)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		pr_perror("task %d: cannot open its %s %s", pid, which, path);
	return fd < 0 ? -errno : fd;
}

/*
 * Both directories are opened before chroot: after it, the cwd path (seen from criu's
 * root) would resolve inside the new root.
 */
static int set_cwd_root(pid_t pid, const FsEntry *fse)
{
	int cwd_fd, root_fd = -1, ret = 0;

	cwd_fd = open_dir(pid, "cwd", fse->cwd);
	if (cwd_fd < 0)
		return cwd_fd;
	if (strcmp(fse->root, "/")) {
		root_fd = open_dir(pid, "root", fse->root);
		if (root_fd < 0)
			ret = root_fd;
		else if (fchdir(root_fd) || chroot(".")) {
			ret = -errno;
			pr_perror("task %d: cannot chroot to %s", pid, fse->root);
		}
	}
	if (!ret && fchdir(cwd_fd)) {
		ret = -errno;
		pr_perror("task %d: cannot chdir to %s", pid, fse->cwd);
	}
	if (root_fd >= 0)
		close(root_fd);
	close(cwd_fd);
	return ret;
}

int restore_task_fs(pid_t pid)
{
	struct cr_img *img = open_image(CR_IMG_FS, O_RDONLY, pid);
	FsEntry *fse;
	int ret;

	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&fse);
	close_image(img);
	if (ret)
		return ret;
	ret = set_cwd_root(pid, fse);
	if (!ret)
		pr_info("task %d: cwd %s, root %s restored\n", pid, fse->cwd, fse->root);
	fs_entry__free_unpacked(fse, NULL);
	return ret;
}
