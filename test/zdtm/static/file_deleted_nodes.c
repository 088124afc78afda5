/*
 * Deleted inodes that are not regular files come back deleted, of their kind, with their
 * mode: a FIFO (with its queued bytes, and an end that only writes), a directory held
 * open and one that is the cwd, a memory device node (/dev/null's numbers), and a
 * symlink held by an O_PATH fd with its target; a symlink that still exists too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "zdtmtst.h"

#define QUEUED "bytes queued in a FIFO nobody can open any more"
#define TARGET "a/target/that/need/not/exist"

static char base[4096];

static void path_of(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", base, name);
}

/* /proc/self/fd/FD (or cwd) names "PATH (deleted)" and the inode has no links. */
static void expect_deleted(const char *link_name, int fd, const char *name, mode_t kind)
{
	char link[4200], want[4200], proc[64];
	struct stat st;
	ssize_t len;

	snprintf(proc, sizeof(proc), "/proc/self/%s", link_name);
	len = readlink(proc, link, sizeof(link) - 1);
	if (len < 0)
		test_fail("readlink %s: %s", proc, strerror(errno));
	link[len] = '\0';
	snprintf(want, sizeof(want), "%s/%s (deleted)", base, name);
	if (strcmp(link, want))
		test_fail("%s is '%s', expected '%s'", proc, link, want);
	if (fstat(fd, &st))
		test_fail("fstat of %s: %s", name, strerror(errno));
	if ((st.st_mode & S_IFMT) != kind || (st.st_mode & 07777) != 0640 || st.st_nlink)
		test_fail("%s: mode %#o, %lu links", name, st.st_mode, (unsigned long)st.st_nlink);
}

/* An O_PATH fd on a symlink named name: a symlink still, pointing at TARGET. */
static void expect_symlink(int fd, const char *name, bool deleted)
{
	char link[4200], want[4200], proc[64], target[256];
	struct stat st;
	ssize_t len;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	len = readlink(proc, link, sizeof(link) - 1);
	link[len < 0 ? 0 : len] = '\0';
	snprintf(want, sizeof(want), "%s/%s%s", base, name, deleted ? " (deleted)" : "");
	if (strcmp(link, want))
		test_fail("%s is '%s', expected '%s'", proc, link, want);
	len = readlinkat(fd, "", target, sizeof(target) - 1);
	target[len < 0 ? 0 : len] = '\0';
	if (fstat(fd, &st) || !S_ISLNK(st.st_mode) || strcmp(target, TARGET) ||
	    (st.st_nlink != 0) != !deleted)
		test_fail("%s: mode %#o, %lu links, target '%s'", name, st.st_mode,
			  (unsigned long)st.st_nlink, target);
}

static int symlink_fd(const char *name)
{
	char path[4200];
	int fd;

	path_of(path, sizeof(path), name);
	if (symlink(TARGET, path))
		test_fail_errno("symlink");
	fd = open(path, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		test_fail_errno("open the symlink");
	return fd;
}

int main(int argc, char **argv)
{
	char path[4200], buf[sizeof(QUEUED)];
	int fifo_rw, fifo_w, dir_fd, dev_fd, cwd_fd, link_fd, live_link_fd;

	test_init(argc, argv);
	if (!getcwd(base, sizeof(base)))
		test_fail_errno("getcwd");
	path_of(path, sizeof(path), "deleted.fifo");
	if (mkfifo(path, 0640) || chmod(path, 0640))
		test_fail_errno("mkfifo");
	fifo_rw = open(path, O_RDWR);
	fifo_w = open(path, O_WRONLY | O_NONBLOCK);
	if (fifo_rw < 0 || fifo_w < 0 || write(fifo_w, QUEUED, sizeof(QUEUED)) != sizeof(QUEUED))
		test_fail_errno("the FIFO");
	unlink(path);
	path_of(path, sizeof(path), "deleted.dev");
	if (mknod(path, S_IFCHR | 0640, makedev(1, 3)) || chmod(path, 0640))
		test_fail_errno("mknod");
	dev_fd = open(path, O_RDWR);
	if (dev_fd < 0 || unlink(path))
		test_fail_errno("the device node");
	link_fd = symlink_fd("deleted.link");
	live_link_fd = symlink_fd("live.link");
	path_of(path, sizeof(path), "deleted.link");
	if (unlink(path))
		test_fail_errno("unlink the symlink");
	path_of(path, sizeof(path), "deleted.dir");
	if (mkdir(path, 0640) || chmod(path, 0640))
		test_fail_errno("mkdir");
	dir_fd = open(path, O_RDONLY | O_DIRECTORY);
	if (dir_fd < 0)
		test_fail_errno("open the directory");
	path_of(path, sizeof(path), "deleted.cwd");
	if (mkdir(path, 0640) || chmod(path, 0640) || chdir(path))
		test_fail_errno("the cwd");
	path_of(path, sizeof(path), "deleted.dir");
	if (rmdir(path))
		test_fail_errno("rmdir");
	path_of(path, sizeof(path), "deleted.cwd");
	if (rmdir(path))
		test_fail_errno("rmdir the cwd");
	test_ready();
	test_wait_sigterm();

	expect_deleted("cwd", (cwd_fd = open(".", O_RDONLY | O_DIRECTORY)), "deleted.cwd", S_IFDIR);
	close(cwd_fd);
	snprintf(path, sizeof(path), "fd/%d", fifo_rw);
	expect_deleted(path, fifo_rw, "deleted.fifo", S_IFIFO);
	snprintf(path, sizeof(path), "fd/%d", dir_fd);
	expect_deleted(path, dir_fd, "deleted.dir", S_IFDIR);
	snprintf(path, sizeof(path), "fd/%d", dev_fd);
	expect_deleted(path, dev_fd, "deleted.dev", S_IFCHR);
	expect_symlink(link_fd, "deleted.link", true);
	expect_symlink(live_link_fd, "live.link", false);
	if ((fcntl(fifo_w, F_GETFL) & O_ACCMODE) != O_WRONLY)
		test_fail("the FIFO's write end is not write-only");
	read_exact(fifo_rw, buf, sizeof(buf), "the FIFO's queue");
	if (memcmp(buf, QUEUED, sizeof(QUEUED)))
		test_fail("the FIFO's queue is '%.*s'", (int)sizeof(buf), buf);
	if (write(fifo_w, "x", 1) != 1 || read(fifo_rw, buf, 1) != 1 || buf[0] != 'x')
		test_fail("the FIFO's two ends are not one FIFO");
	if (read(dev_fd, buf, 1) != 0 || write(dev_fd, "x", 1) != 1)
		test_fail("the device node does not act as /dev/null");
	test_pass();
}
