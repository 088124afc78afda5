/*
 * Nested mount namespaces: the root (init of its own pid and mount namespaces, pivoted
 * into a root of bind mounts) has a shared tmpfs /shared and a private tmpfs /priv; its
 * child unshares a mount namespace of its own, unmounts /priv, mounts a tmpfs /mine of its
 * own and a tmpfs at /shared/sub, which propagates to the root's /shared (one peer group
 * across the two namespaces). The child holds an fd the root opened on /shared/a (its mount
 * is the root namespace's) and one on /mine/m, and has its cwd in /mine. After restore:
 * both namespaces' mounts (mountinfo compared field by field, peer groups across them),
 * each fd on the mount of the namespace it was opened in, offsets and contents, the cwd,
 * and a mount the child makes under its /shared shows in the root's.
 * With $ZDTM_MNT_GRANDCHILD, a grandchild in a mount namespace below the child's shows the
 * child's /mine, which the root's does not: criu refuses to dump it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STAGE2	  "--in-root"
#define DATA_SIZE 5000
#define SEED	  31
#define CHILD_FD  40
#define ROOT_FD	  41

static const char *const both_tables[] = { "/proc/self/mountinfo", "/proc/1/mountinfo" };
static char before[16384];

static void must(int ret, const char *what)
{
	if (ret)
		test_fail_errno(what);
}

static void write_pattern(const char *path, uint64_t seed)
{
	char buf[DATA_SIZE];
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);

	pattern_fill(buf, sizeof(buf), seed);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf) || close(fd))
		test_fail_errno(path);
}

/* path opened at fd number at, at offset off. */
static void open_at_offset(const char *path, int flags, int at, off_t off)
{
	open_fd_at(path, flags, at);
	if (lseek(at, off, SEEK_SET) != off)
		test_fail_errno(path);
}

/* fd is at offset off of a file of pattern seed; the next 100 bytes read as they should. */
static void expect_fd(int fd, off_t off, uint64_t seed, const char *what)
{
	char all[DATA_SIZE], buf[100];

	if (lseek(fd, 0, SEEK_CUR) != off)
		test_fail("%s: offset %lld, not %lld", what, (long long)lseek(fd, 0, SEEK_CUR),
			  (long long)off);
	read_exact(fd, buf, sizeof(buf), what);
	pattern_fill(all, sizeof(all), seed);
	if (memcmp(buf, all + off, sizeof(buf)))
		test_fail("%s: the bytes at offset %lld differ", what, (long long)off);
}

/* The id mountinfo gives the mount at point. */
static int mount_id(const char *mountinfo, const char *point)
{
	static char buf[16384];
	char *save, mnt_point[256];
	int id;

	read_file(mountinfo, buf, sizeof(buf));
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "%d %*d %*s %*s %255s", &id, mnt_point) == 2 &&
		    !strcmp(mnt_point, point))
			return id;
	test_fail("%s: no mount at %s", mountinfo, point);
}

static int fd_mount_id(int fd)
{
	char val[32];

	fdinfo_field(fd, "mnt_id", val, sizeof(val));
	return atoi(val);
}

/* The fds the child holds are on the mounts of the namespaces they were opened in. */
static void expect_fd_mounts(void)
{
	int inherited = fd_mount_id(ROOT_FD), own = fd_mount_id(CHILD_FD);

	if (inherited != mount_id("/proc/1/mountinfo", "/shared"))
		test_fail("the fd the root opened is on mount %d, not on the root's /shared (%d)",
			  inherited, mount_id("/proc/1/mountinfo", "/shared"));
	if (inherited == mount_id("/proc/self/mountinfo", "/shared"))
		test_fail("the fd the root opened is on the child's /shared");
	if (own != mount_id("/proc/self/mountinfo", "/mine"))
		test_fail("the fd on /mine/m is on mount %d, not on /mine (%d)", own,
			  mount_id("/proc/self/mountinfo", "/mine"));
}

static void __attribute__((noreturn)) grandchild_main(void)
{
	if (unshare(CLONE_NEWNS))
		test_fail_errno("unshare in the grandchild");
	test_barrier_done();
	test_wait_sigterm();
	exit(0);
}

static void __attribute__((noreturn)) child_main(void)
{
	static char after[16384];
	pid_t grandchild = 0;
	char cwd[64];

	must(unshare(CLONE_NEWNS), "unshare");
	must(umount("/priv"), "umount /priv in the child");
	must(mount("mine", "/mine", "tmpfs", MS_NOSUID, "size=64k,mode=711"), "tmpfs /mine");
	write_pattern("/mine/m", SEED + 1);
	open_at_offset("/mine/m", O_RDONLY, CHILD_FD, 50);
	must(chdir("/mine"), "chdir /mine");
	must(mount("sub", "/shared/sub", "tmpfs", 0, "size=64k"), "tmpfs /shared/sub");
	write_pattern("/shared/sub/s", SEED + 2);
	expect_fd_mounts();
	test_mount_tables(both_tables, 2, before, sizeof(before));
	if (getenv("ZDTM_MNT_GRANDCHILD"))
		grandchild = test_fork(grandchild_main);
	test_barrier_done();
	test_wait_sigterm();
	if (grandchild)
		test_children_verdict(&grandchild, 1, "child");

	test_mount_tables(both_tables, 2, after, sizeof(after));
	if (strcmp(before, after))
		test_fail("child: mounts before the dump:\n%safter the restore:\n%s", before,
			  after);
	expect_fd_mounts();
	expect_fd(ROOT_FD, 100, SEED, "child: the root's fd on /shared/a");
	expect_fd(CHILD_FD, 50, SEED + 1, "child: its fd on /mine/m");
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/mine"))
		test_fail("child: cwd %s, not /mine", cwd);
	if (!access("/priv/p", F_OK))
		test_fail("child: /priv is mounted in its namespace");
	/* After the comparison: the peer group across the namespaces still propagates. */
	must(mount("late", "/shared/late", "tmpfs", 0, "size=64k"), "tmpfs /shared/late");
	write_pattern("/shared/late/x", SEED + 4);
	if (access("/proc/1/root/shared/late/x", F_OK))
		test_fail("child: its mount at /shared/late did not propagate to the root's");
	exit(0);
}

int main(int argc, char **argv)
{
	static char root_before[16384], root_after[16384];
	pid_t child;

	test_init(argc, argv);
	test_mnt_ns_start(argc, argv, "usr\0out\0bin\0proc\0shared\0priv\0mine\0", STAGE2);

	must(mount("shared", "/shared", "tmpfs", 0, "size=64k"), "tmpfs /shared");
	must(mount(NULL, "/shared", NULL, MS_SHARED, NULL), "make /shared shared");
	must(mkdir("/shared/sub", 0755) || mkdir("/shared/late", 0755), "mkdir in /shared");
	write_pattern("/shared/a", SEED);
	must(mount("priv", "/priv", "tmpfs", MS_NODEV, "size=64k"), "tmpfs /priv");
	write_pattern("/priv/p", SEED + 3);
	open_at_offset("/shared/a", O_RDWR, ROOT_FD, 100);
	child = test_fork_child(child_main);
	/* Only the child holds the fd the root opened, on the root namespace's mount. */
	close(ROOT_FD);
	open_at_offset("/priv/p", O_RDONLY, ROOT_FD, 7);
	test_mount_table("/proc/self/mountinfo", root_before, sizeof(root_before));
	test_ready();
	test_wait_sigterm();

	test_mount_table("/proc/self/mountinfo", root_after, sizeof(root_after));
	if (strcmp(root_before, root_after))
		test_fail("root: mounts before the dump:\n%safter the restore:\n%s", root_before,
			  root_after);
	expect_fd(ROOT_FD, 7, SEED + 3, "root: its fd on /priv/p");
	if (access("/shared/sub/s", F_OK))
		test_fail("root: the child's mount at /shared/sub is not in its namespace");
	test_children_verdict(&child, 1, "root");
	test_pass();
}
