/*
 * A task's current and root directories and its umask: on dump REG entries of the
 * directories (from /proc/PID/{cwd,root}) and fs-PID.img naming them by file id; on
 * restore fchdir/chroot to them and umask().
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "proc_parse.h"

#include "fs.pb-c.h"

static int read_umask(pid_t pid, uint32_t *umask_out)
{
	struct proc_pid_status st;
	int ret = parse_pid_status(pid, &st);

	if (ret)
		return ret;
	*umask_out = st.umask;
	free_pid_status(&st);
	return 0;
}

/* Both links resolve from criu's root, so restore reaches them from criu's root too. */
static int dump_task_dir(pid_t pid, const char *which, uint32_t *file_id)
{
	char src[64], what[64];

	snprintf(src, sizeof(src), "/proc/%d/%s", pid, which);
	snprintf(what, sizeof(what), "%s of task %d", which, pid);
	return dump_dir_file(src, what, file_id);
}

int dump_task_fs(pid_t pid)
{
	FsEntry fse = FS_ENTRY__INIT;
	struct cr_img *img;
	int ret;

	ret = dump_task_dir(pid, "cwd", &fse.cwd_id);
	if (!ret)
		ret = dump_task_dir(pid, "root", &fse.root_id);
	if (!ret)
		ret = read_umask(pid, &fse.umask);
	if (ret)
		return ret;
	fse.has_umask = true;
	img = open_image(CR_IMG_FS, O_WRONLY, pidns_img_pid(pid));
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &fse);
	close_image(img);
	if (!ret)
		pr_info("task %d: cwd file %u, root file %u, umask %#o\n", pid, fse.cwd_id,
			fse.root_id, fse.umask);
	return ret;
}

/*
 * The directory a file id of fs-PID.img names: a REG entry of a directory. A deleted cwd
 * is made again (and removed again) as a deleted file is; a root has to exist.
 */
static const struct reg_file *find_dir(pid_t pid, const char *which, uint32_t file_id)
{
	const struct reg_file *rf;
	char user[64];

	snprintf(user, sizeof(user), "fs-%d.img: %s", pid, which);
	rf = find_reg_file(file_id, user);
	if (!rf)
		return NULL;
	if ((rf->has_mode && !S_ISDIR(rf->mode)) || (rf->ghost && !strcmp(which, "root"))) {
		pr_err("%s: file %u (%s) is not a directory%s\n", user, file_id, rf->path,
		       rf->ghost ? " that exists" : "");
		return NULL;
	}
	return rf;
}

/* open_reg_file() says why it fails. */
static int open_dir(const struct reg_file *dir)
{
	return open_reg_file(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/*
 * Both directories are opened before chroot: after it, the cwd path (seen from criu's
 * root) would resolve inside the new root. Without a new root the cwd is entered by
 * path (it may be a dead process's /proc directory, entered only while it lives).
 */
static int set_cwd_root(pid_t pid, const struct reg_file *cwd, const struct reg_file *root)
{
	int cwd_fd, root_fd = -1, ret = 0;

	if (!strcmp(root->path, "/"))
		return chdir_reg_dir(cwd);
	cwd_fd = open_dir(cwd);
	if (cwd_fd < 0)
		return cwd_fd;
	if (strcmp(root->path, "/")) {
		root_fd = open_dir(root);
		if (root_fd < 0)
			ret = root_fd;
		else if (fchdir(root_fd) || chroot(".")) {
			ret = -errno;
			pr_perror("task %d: cannot chroot to %s", pid, root->path);
		}
	}
	if (!ret && fchdir(cwd_fd)) {
		ret = -errno;
		pr_perror("task %d: cannot chdir to %s", pid, cwd->path);
	}
	if (root_fd >= 0)
		close(root_fd);
	close(cwd_fd);
	return ret;
}

static int apply_fs_entry(pid_t pid, const FsEntry *fse)
{
	const struct reg_file *cwd = find_dir(pid, "cwd", fse->cwd_id);
	const struct reg_file *root = cwd ? find_dir(pid, "root", fse->root_id) : NULL;
	int ret;

	if (!root)
		return -EINVAL;
	ret = set_cwd_root(pid, cwd, root);
	if (ret)
		return ret;
	if (fse->has_umask)
		umask(fse->umask & 0777);
	pr_info("task %d: cwd %s, root %s restored\n", pid, cwd->path, root->path);
	return 0;
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
	ret = apply_fs_entry(pid, fse);
	fs_entry__free_unpacked(fse, NULL);
	return ret;
}
