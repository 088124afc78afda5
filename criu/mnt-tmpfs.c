/*
 * What a mount holds, read through a detached clone of it (mounts stacked on it or covering
 * it left out): the files of a tmpfs as CRIU keeps them (tmpfs-dev-SDEV.tar.gz.img, made and
 * unpacked by tar), and the clone binfmt_misc's handlers are read through.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "criu-plugin.h" /* send_fds(), recv_fds(): after log.h */
#include "namespaces.h"
#include "ns-mnt.h"

/* Waits for criu's child, tar; 0 when it exited 0. */
static int wait_tar(pid_t child, const char *what)
{
	int status;

	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("%s: waitpid for tar", what);
			return -ECHILD;
		}
	}
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	pr_err("%s: tar failed (wait status %#x; its messages are in the log)\n", what, status);
	return -EIO;
}

/*
 * In a child: stdin, stdout from in and out, stderr to the log, keep open for tar (-1:
 * none); then tar with args.
 */
static void __attribute__((noreturn)) exec_tar(int in, int out, int keep, char *const args[])
{
	int log_fd = log_get_fd();

	if ((in >= 0 && dup2(in, 0) < 0) || dup2(out, 1) < 0 ||
	    (log_fd >= 0 && dup2(log_fd, 2) < 0) || (keep >= 0 && fcntl(keep, F_SETFD, 0)))
		_exit(126);
	/*
	 * In the tree's user namespace criu's ids are unmapped (getuid() reads the overflow
	 * id), and execve() would drop every capability of a process that is not the
	 * namespace's root: tar runs as it.
	 */
	if (getuid() && (setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		_exit(125);
	execvp("tar", args);
	_exit(127);
}

/*
 * The mount id of the caller's namespace as its mountinfo shows it, read through proc
 * (criu's /proc: the tree's does not show criu's children): its mount point, superblock
 * (root_dev's encoding) and root, allocated. 0, or -1 when it is not listed.
 */
static int own_mount(int proc, uint64_t id, char **point, uint32_t *dev, char **root)
{
	int fd = openat(proc, "self/mountinfo", O_RDONLY | O_CLOEXEC), ret = -1;
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	char *line = NULL, r[4096], p[4096];
	unsigned int maj, min;
	size_t size = 0;
	uint64_t mnt_id;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (ret && getline(&line, &size, f) > 0) {
		if (sscanf(line, "%" SCNu64 " %*u %u:%u %4095s %4095s", &mnt_id, &maj, &min, r,
			   p) != 5 ||
		    mnt_id != id)
			continue;
		*dev = maj << 20 | min;
		*root = mnt_unescaped_dup(r);
		*point = mnt_unescaped_dup(p);
		ret = *root && *point ? 0 : -1;
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * The mount the path to m's mount point reaches, or stops in where a directory on the way
 * is missing (a mount over one above it hides it): O_PATH on it, *point, *dev and *root as
 * own_mount() gives them. The fd, or -1.
 */
static int reached_mount(const struct mount *m, int proc, char **point, uint32_t *dev, char **root)
{
	char path[PATH_MAX], *slash;
	struct statx stx;
	int dir;

	snprintf(path, sizeof(path), "%s", m->e->mountpoint);
	while ((dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		slash = strrchr(path, '/');
		if ((errno != ENOENT && errno != ENOTDIR) || !slash || slash == path) {
			pr_perror("tmpfs %u: cannot reach %s in a copy", m->e->mnt_id, path);
			return -1;
		}
		*slash = '\0';
	}
	if (statx(dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) ||
	    own_mount(proc, stx.stx_mnt_id, point, dev, root)) {
		pr_err("tmpfs %u: the mount %s reaches in a copy is not listed\n", m->e->mnt_id,
		       path);
		close(dir);
		return -1;
	}
	return dir;
}

/*
 * In the child, in the tree's namespace: m, which other mounts cover (stacked at its mount
 * point or mounted over a directory above it), reached in a private copy of the namespace
 * (nothing done there reaches the tree's) where the mount reached at m's mount point is
 * unmounted until it is m's copy (its mount point, superblock and root: ids differ in a
 * copy). O_PATH on m's root, or -1 after one line.
 */
static int uncover(const struct mount *m, int proc)
{
	char *point = NULL, *root = NULL;
	uint32_t dev;
	int dir = -1;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		pr_perror("tmpfs %u: cannot make a private copy of its namespace", m->e->mnt_id);
		return -1;
	}
	for (size_t tries = 0; tries <= m->mns->nr; tries++) {
		bool found;

		dir = reached_mount(m, proc, &point, &dev, &root);
		if (dir < 0)
			break;
		found = !strcmp(point, m->e->mountpoint) && dev == m->e->root_dev &&
			!strcmp(root, m->e->root);
		/*
		 * What the path reaches instead is stacked at m's mount point or covers it from
		 * above (mounted over a directory on the way): neither holds m, which the path
		 * would then reach. Never the namespace's root.
		 */
		if (!found) {
			pr_debug("tmpfs %u: %s reaches the mount at %s (%u:%u, %s): unmounted in a "
				 "copy\n",
				 m->e->mnt_id, m->e->mountpoint, point, dev >> 20, dev & 0xfffff,
				 root);
			if (!strcmp(point, "/") || umount2(point, MNT_DETACH))
				break;
		}
		free(point);
		free(root);
		point = root = NULL;
		if (found)
			return dir;
		close(dir);
		dir = -1;
	}
	pr_err("tmpfs %u at %s: another mount covers it in a way a copy of the namespace does not "
	       "undo: its files cannot be read\n",
	       m->e->mnt_id, m->e->mountpoint);
	if (dir >= 0)
		close(dir);
	free(point);
	free(root);
	return -1;
}

/*
 * In a child joined to the tree's mount namespace (open_tree() clones only mounts of the
 * caller's): m alone, without the mounts on it that hide some of its files
 * (OPEN_TREE_CLONE), sent on sk. Mounts stacked on it at its mount point are unmounted
 * in a private copy of the namespace first.
 */
static int send_mount_clone(pid_t pid, const struct mount *m, int sk)
{
	int ns = -1, dir = -1, tree = -1, ret = -1;
	int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char ns_path[64];
	struct statx stx;

	/*
	 * In the tree's user namespace first, where it has one: a copy of the mount namespace
	 * made from another user namespace locks its mounts together (none could be unmounted).
	 */
	if (userns_join_tree(pid))
		goto out;
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", pid);
	ns = open(ns_path, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || setns(ns, CLONE_NEWNS)) {
		pr_perror("tmpfs %u: cannot join the mount namespace of %d", m->e->mnt_id, pid);
		goto out;
	}
	/* A mount over a directory above it may hide its mount point whole. */
	dir = open(m->e->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0 && statx(dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx)) {
		pr_perror("tmpfs %u: cannot look at %s", m->e->mnt_id, m->e->mountpoint);
		goto out;
	}
	if (dir < 0 || stx.stx_mnt_id != m->e->mnt_id) {
		if (dir >= 0)
			close(dir);
		dir = uncover(m, proc);
		if (dir < 0)
			goto out;
	}
	tree = syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
	/* An unbindable mount cannot be cloned: its files are read through it, as they show. */
	if (tree < 0 && !(m->e->flags & MS_UNBINDABLE)) {
		pr_perror("tmpfs %u at %s: cannot clone it (open_tree)", m->e->mnt_id,
			  m->e->mountpoint);
		goto out;
	}
	ret = send_fds(sk, NULL, 0, tree >= 0 ? &tree : &dir, 1, NULL, 0);
out:
	if (tree >= 0)
		close(tree);
	if (dir >= 0)
		close(dir);
	if (ns >= 0)
		close(ns);
	if (proc >= 0)
		close(proc);
	return ret;
}

/* A detached clone of m (send_mount_clone()): its fd, or -errno after one error line. */
int mnt_clone_mount(pid_t pid, const struct mount *m)
{
	int sk[2], status, tree = -1;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sk)) {
		pr_perror("tmpfs %u: socketpair", m->e->mnt_id);
		return -errno;
	}
	child = fork();
	if (child == 0)
		_exit(send_mount_clone(pid, m, sk[1]) ? 1 : 0);
	close(sk[1]);
	if (child < 0)
		pr_perror("tmpfs %u: cannot fork to clone it", m->e->mnt_id);
	/* The child said what failed; what it sent waits in the socket. */
	else if (waitpid(child, &status, 0) == child && !status)
		recv_fds(sk[0], &tree, 1, NULL, 0);
	close(sk[0]);
	return tree >= 0 ? tree : -EIO;
}

/* The files of a tmpfs, from a clone of it, with tar as CRIU runs it. */
int mnt_dump_tmpfs(pid_t pid, const struct mount *m)
{
	char dir[32];
	char *const args[] = {"tar",
			      "--create",
			      "--gzip",
			      "--no-unquote",
			      "--no-wildcards",
			      "--one-file-system",
			      "--check-links",
			      "--preserve-permissions",
			      "--sparse",
			      "--numeric-owner",
			      "--directory",
			      dir,
			      ".",
			      NULL};
	struct cr_img *img;
	int tree, ret;
	pid_t child;

	tree = mnt_clone_mount(pid, m);
	if (tree < 0)
		return tree;
	snprintf(dir, sizeof(dir), "/proc/self/fd/%d", tree);
	img = open_image(CR_IMG_TMPFS_DEV, O_WRONLY, m->e->root_dev);
	if (!img) {
		close(tree);
		return -EIO;
	}
	child = fork();
	/* tar stores the files' owners as the tree sees them, as CRIU's archives have them. */
	if (child == 0 && userns_join_tree(pid))
		_exit(124);
	if (child == 0)
		exec_tar(-1, img->fd, tree, args);
	close(tree);
	ret = child < 0 ? -errno : wait_tar(child, img->name);
	if (child < 0)
		pr_perror("tmpfs at %s: cannot fork tar", m->e->mountpoint);
	else if (!ret)
		pr_info("tmpfs %u at %s: its files into %s\n", m->e->mnt_id, m->e->mountpoint,
			img->name);
	close_image(img);
	return ret;
}

/*
 * The image's files into the new tmpfs, with tar, a child of the root task (in its pid
 * namespace: it is reaped before the root forks the tree). Its SIGCHLD, blocked here, is
 * taken back so that the restored task does not find it pending.
 */
int mnt_restore_tmpfs(const struct mount *m)
{
	char dir[32];
	char *args[] = {"tar",	       "--extract", "--gzip", "--no-unquote", "--no-wildcards",
			"--directory", dir,	    NULL};
	struct timespec no_wait = {0, 0};
	sigset_t pending, chld;
	struct cr_img *img;
	pid_t child;
	int null, ret, mnt;

	/* Through an fd: tar may run with other ids (exec_tar()), which --root's path may bar. */
	mnt = open(m->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (mnt < 0) {
		pr_perror("tmpfs at %s: cannot open %s", m->e->mountpoint, m->path);
		return -errno;
	}
	snprintf(dir, sizeof(dir), "/proc/self/fd/%d", mnt);
	img = open_image(CR_IMG_TMPFS_DEV, O_RDONLY, m->e->root_dev);
	if (!img) {
		close(mnt);
		return -EIO;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigpending(&pending);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	child = null < 0 ? -1 : fork();
	if (child == 0)
		exec_tar(img->fd, null, mnt, args);
	close(mnt);
	ret = child < 0 ? -errno : wait_tar(child, img->name);
	if (child < 0)
		pr_perror("tmpfs at %s: cannot start tar", m->e->mountpoint);
	if (child > 0 && !sigismember(&pending, SIGCHLD))
		sigtimedwait(&chld, NULL, &no_wait);
	if (null >= 0)
		close(null);
	close_image(img);
	return ret;
}
