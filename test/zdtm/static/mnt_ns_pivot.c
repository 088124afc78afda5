/*
 * A task in a mount namespace without /proc: the root (init of its own pid and mount
 * namespaces, pivoted into a root of bind mounts) has a child that unshares a mount
 * namespace, mounts a tmpfs, fills it (a file of known contents, a directory, a tmpfs
 * mounted on that directory with a file of its own) and pivot_root()s into it, letting the
 * old root go: nothing of the root's namespace is left there, /proc neither. It holds an fd
 * on each file at an offset, an inotify watch on the inner directory, and has its cwd
 * there. Restore reads nothing of
 * that namespace by /proc paths. After restore, the child checks its root (a tmpfs with
 * the files), cwd, both fds (offsets and bytes), that a file made in the watched
 * directory is reported by the watch, and its mount list: before the dump it
 * mounted proc, read mountinfo and unmounted it again; after the restore it does the same
 * and both lists must match.
 * The child also holds a datagram socket bound at /inner/sock and one connected to it
 * through that file (restore connects it by the file's proc link); after the restore a
 * datagram sent on the connected one arrives, byte for byte, from its address.
 * With $ZDTM_MNT_PIVOT_BASIC, no inotify watch and no sockets (upstream criu's restore of
 * a watch by its path fails in a namespace without /proc).
 * With $ZDTM_MNT_PIVOT_RO, the child's root superblock is made read-only before the dump:
 * it is read-only after the restore (a write open fails with EROFS).
 * With $ZDTM_MNT_PIVOT_ROOT_NO_PROC, the root unmounts its /proc too (it mounts it again
 * after the restore to check its own mount list): the tree's root task restores in a
 * namespace without /proc as well.
 * With $ZDTM_MNT_PIVOT_GHOST, the child also holds, at an offset, an fd on a file it removed
 * from a tmpfs at /ghostdir that it then bind-remounted read-only: restore re-creates the
 * file (a ghost) through a writable clone of that mount, with no /proc to name the clone
 * by; after the restore the fd has its offset, no link, and the whole contents.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STAGE2	     "--in-root"
#define DATA_SIZE    6000
#define SEED	     53
#define TOP_FD	     40
#define INNER_FD     41
#define WATCH_FD     42
#define SERVER_FD    43
#define CLIENT_FD    44
#define TOP_OFFSET   1234
#define INNER_OFFSET 77
#define GHOST_FD     45
#define GHOST_OFFSET 4321
#define TMPFS_MAGIC  0x01021994

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

/* fd is at offset off of a file of pattern seed; the next 200 bytes read as they should. */
static void expect_fd(int fd, off_t off, uint64_t seed, const char *what)
{
	char all[DATA_SIZE], buf[200];

	if (lseek(fd, 0, SEEK_CUR) != off)
		test_fail("%s: offset %lld, not %lld", what, (long long)lseek(fd, 0, SEEK_CUR),
			  (long long)off);
	read_exact(fd, buf, sizeof(buf), what);
	pattern_fill(all, sizeof(all), seed);
	if (memcmp(buf, all + off, sizeof(buf)))
		test_fail("%s: the bytes at offset %lld differ", what, (long long)off);
}

/* The whole file at path holds pattern seed. */
static void expect_file(const char *path, uint64_t seed)
{
	char buf[DATA_SIZE];
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		test_fail("%s: %s", path, strerror(errno));
	if (st.st_size != DATA_SIZE)
		test_fail("%s: size %lld, not %d", path, (long long)st.st_size, DATA_SIZE);
	read_exact(fd, buf, sizeof(buf), path);
	pattern_expect(buf, sizeof(buf), seed, path);
	close(fd);
}

/* An inotify fd at WATCH_FD watching /inner/dir for files made there: the watch's wd. */
static int add_watch(void)
{
	int fd = inotify_init1(IN_NONBLOCK), wd;

	if (fd < 0 || dup2(fd, WATCH_FD) != WATCH_FD || close(fd))
		test_fail_errno("inotify_init1");
	wd = inotify_add_watch(WATCH_FD, "/inner/dir", IN_CREATE);
	if (wd < 0)
		test_fail_errno("inotify_add_watch /inner/dir");
	return wd;
}

/* The watch on the cwd reports a file made there, by its name. */
static void expect_watch(int wd)
{
	char buf[sizeof(struct inotify_event) + 64];
	struct inotify_event *ev = (struct inotify_event *)buf;
	ssize_t len;
	int fd = open("made", O_WRONLY | O_CREAT | O_EXCL, 0600);

	if (fd < 0 || close(fd))
		test_fail_errno("child: make inner/dir/made");
	len = read(WATCH_FD, buf, sizeof(buf));
	if (len < (ssize_t)sizeof(*ev) || ev->wd != wd || !(ev->mask & IN_CREATE) ||
	    strcmp(ev->name, "made"))
		test_fail("child: the watch on /inner/dir reports %zd bytes, wd %d (not %d), "
			  "mask %#x, name \"%s\"",
			  len, len >= (ssize_t)sizeof(*ev) ? ev->wd : -1, wd,
			  len >= (ssize_t)sizeof(*ev) ? ev->mask : 0,
			  len > (ssize_t)sizeof(*ev) ? ev->name : "");
}

/* The mount list, read through a proc mounted for the while at /proc. */
static void mount_list(char *out, size_t size)
{
	must(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
	     "mount /proc");
	test_mount_table("/proc/self/mountinfo", out, size);
	must(umount("/proc"), "umount /proc");
}

/* In the child's namespace: the new root at /newroot, filled, then the pivot into it. */
static void pivot_into_tmpfs(void)
{
	must(unshare(CLONE_NEWNS), "unshare");
	must(mount("pivot", "/newroot", "tmpfs", MS_NOSUID, "size=256k,mode=755"),
	     "tmpfs /newroot");
	must(mkdir("/newroot/old", 0755) || mkdir("/newroot/proc", 0755) ||
		     mkdir("/newroot/inner", 0755),
	     "mkdir in /newroot");
	write_pattern("/newroot/top", SEED);
	must(mount("inner", "/newroot/inner", "tmpfs", MS_NODEV, "size=64k"), "tmpfs inner");
	if (getenv("ZDTM_MNT_PIVOT_GHOST"))
		must(mkdir("/newroot/ghostdir", 0755) ||
			     mount("ghost", "/newroot/ghostdir", "tmpfs", MS_NODEV, "size=64k"),
		     "tmpfs ghostdir");
	must(mkdir("/newroot/inner/dir", 0700), "mkdir inner/dir");
	write_pattern("/newroot/inner/dir/file", SEED + 1);
	must(chdir("/newroot"), "chdir /newroot");
	must(syscall(SYS_pivot_root, ".", "old"), "pivot_root");
	must(umount2("old", MNT_DETACH), "umount the old root");
	must(rmdir("old"), "rmdir old");
	must(chdir("/inner/dir"), "chdir /inner/dir");
}

/*
 * GHOST_FD on /ghostdir/ghost at GHOST_OFFSET, the file removed, its mount made read-only
 * (per mount: a superblock with a removed file still open cannot be remounted read-only).
 */
static void make_ghost_on_readonly_mount(void)
{
	write_pattern("/ghostdir/ghost", SEED + 2);
	open_fd_at("/ghostdir/ghost", O_RDONLY, GHOST_FD);
	if (lseek(GHOST_FD, GHOST_OFFSET, SEEK_SET) != GHOST_OFFSET)
		test_fail_errno("lseek the ghost's fd");
	must(unlink("/ghostdir/ghost"), "unlink /ghostdir/ghost");
	must(mount(NULL, "/ghostdir", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL),
	     "remount /ghostdir read-only");
}

/* GHOST_FD: its offset, then its file's link count and whole contents, byte for byte. */
static void expect_ghost(void)
{
	char buf[DATA_SIZE];
	struct stat st;

	expect_fd(GHOST_FD, GHOST_OFFSET, SEED + 2, "child: its fd on the removed file");
	if (fstat(GHOST_FD, &st) || st.st_nlink != 0 || st.st_size != DATA_SIZE)
		test_fail("child: the removed file has %lu links and %lld bytes, not 0 and %d",
			  (unsigned long)st.st_nlink, (long long)st.st_size, DATA_SIZE);
	if (pread(GHOST_FD, buf, sizeof(buf), 0) != sizeof(buf))
		test_fail_errno("child: pread the removed file");
	pattern_expect(buf, sizeof(buf), SEED + 2, "child: the removed file");
}

static const struct sockaddr_un sock_addr = { AF_UNIX, "/inner/sock" };

static void make_sockets(void)
{
	int srv = socket(AF_UNIX, SOCK_DGRAM, 0), cli = socket(AF_UNIX, SOCK_DGRAM, 0);

	must(srv < 0 || cli < 0, "socket");
	must(bind(srv, (const struct sockaddr *)&sock_addr, sizeof(sock_addr)), "bind /inner/sock");
	must(connect(cli, (const struct sockaddr *)&sock_addr, sizeof(sock_addr)),
	     "connect to /inner/sock");
	must(dup2(srv, SERVER_FD) < 0 || dup2(cli, CLIENT_FD) < 0, "dup2 the sockets");
	close(srv);
	close(cli);
}

static void expect_sockets(void)
{
	static const char msg[] = "through the socket's file";
	struct sockaddr_un peer;
	socklen_t len = sizeof(peer);
	char buf[64];
	ssize_t n;

	if (send(CLIENT_FD, msg, sizeof(msg), 0) != sizeof(msg))
		test_fail_errno("child: send on the connected socket");
	if (getpeername(CLIENT_FD, (struct sockaddr *)&peer, &len) ||
	    strcmp(peer.sun_path, sock_addr.sun_path))
		test_fail("child: the client's peer is not %s", sock_addr.sun_path);
	n = recv(SERVER_FD, buf, sizeof(buf), MSG_DONTWAIT);
	if (n != sizeof(msg) || memcmp(buf, msg, sizeof(msg)))
		test_fail("child: the bound socket read %zd bytes, not the datagram sent", n);
}

static void __attribute__((noreturn)) child_main(void)
{
	static char before[8192], after[8192];
	bool basic = getenv("ZDTM_MNT_PIVOT_BASIC");
	struct statfs sfs;
	char cwd[64];
	int fd, wd;

	pivot_into_tmpfs();
	/* Read-write but for a read-only root: remounting it fails while a writer holds a file. */
	open_fd_at("/top", getenv("ZDTM_MNT_PIVOT_RO") ? O_RDONLY : O_RDWR, TOP_FD);
	open_fd_at("file", O_RDONLY, INNER_FD);
	wd = basic ? -1 : add_watch();
	if (!basic)
		make_sockets();
	if (lseek(TOP_FD, TOP_OFFSET, SEEK_SET) != TOP_OFFSET ||
	    lseek(INNER_FD, INNER_OFFSET, SEEK_SET) != INNER_OFFSET)
		test_fail_errno("lseek");
	if (getenv("ZDTM_MNT_PIVOT_RO"))
		must(mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL), "remount / read-only");
	if (getenv("ZDTM_MNT_PIVOT_GHOST"))
		make_ghost_on_readonly_mount();
	mount_list(before, sizeof(before));
	if (!access("/proc/self", F_OK))
		test_fail("child: /proc is still there");
	test_barrier_done();
	test_wait_sigterm();

	if (!access("/proc/self", F_OK))
		test_fail("child: /proc is there after the restore");
	mount_list(after, sizeof(after));
	if (strcmp(before, after))
		test_fail("child: mounts before the dump:\n%safter the restore:\n%s", before,
			  after);
	if (statfs("/", &sfs) || sfs.f_type != TMPFS_MAGIC)
		test_fail("child: its root is no tmpfs");
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/inner/dir"))
		test_fail("child: cwd %s, not /inner/dir", cwd);
	expect_file("/top", SEED);
	expect_file("/inner/dir/file", SEED + 1);
	expect_fd(TOP_FD, TOP_OFFSET, SEED, "child: its fd on /top");
	expect_fd(INNER_FD, INNER_OFFSET, SEED + 1, "child: its fd on /inner/dir/file");
	if (getenv("ZDTM_MNT_PIVOT_GHOST"))
		expect_ghost();
	if (!basic) {
		expect_watch(wd);
		expect_sockets();
	}
	if (access("/usr", F_OK) == 0 || access("/newroot", F_OK) == 0)
		test_fail("child: the root's namespace shows through its root");
	fd = open("/top", O_WRONLY);
	if (getenv("ZDTM_MNT_PIVOT_RO") && (fd >= 0 || errno != EROFS))
		test_fail("child: /top opens for writing on a read-only root (fd %d, %s)", fd,
			  strerror(errno));
	if (!getenv("ZDTM_MNT_PIVOT_RO") && fd < 0)
		test_fail_errno("child: open /top for writing");
	exit(0);
}

int main(int argc, char **argv)
{
	static char before[16384], after[16384];
	bool no_proc = getenv("ZDTM_MNT_PIVOT_ROOT_NO_PROC");
	pid_t child;

	test_init(argc, argv);
	test_mnt_ns_start(argc, argv, "usr\0out\0bin\0proc\0newroot\0", STAGE2);

	child = test_fork_child(child_main);
	test_mount_table("/proc/self/mountinfo", before, sizeof(before));
	if (no_proc)
		must(umount("/proc"), "umount /proc in the root");
	test_ready();
	test_wait_sigterm();

	if (no_proc) {
		if (!access("/proc/self", F_OK))
			test_fail("root: /proc is there after the restore");
		must(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
		     "mount /proc again in the root");
	}
	test_mount_table("/proc/self/mountinfo", after, sizeof(after));
	if (strcmp(before, after))
		test_fail("root: mounts before the dump:\n%safter the restore:\n%s", before,
			  after);
	test_children_verdict(&child, 1, "root");
	test_pass();
}
