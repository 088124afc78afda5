/*
 * A container's mount tree: the root is the init of its own pid and mount namespaces and
 * pivot_root()s into a root made of bind mounts (as zdtm's ns flavour does): the runner's
 * /usr read-only and its test directory (both external mounts), then proc, sysfs, a tmpfs
 * /dev with a null node, devpts and mqueue in it, a tmpfs with files of known contents, a bind of one of its sub-directories, a
 * shared tmpfs with a slave bind, a private and an unbindable tmpfs, a read-only bind. After
 * restore: /proc/self/mountinfo the same (points, roots, types, options, propagation between
 * the mounts), the tmpfs contents, an fd on a tmpfs file at its offset, the cwd, a socket
 * bound in the tmpfs, a file removed from it while open, one a mount hides, a tmpfs
 * another one mounted at the same point hides whole, a bind of a directory removed since,
 * and a file whose name was removed while another name remains (--link-remap: the
 * link_remap file dump makes beside it is gone again once the tree runs). And shapes
 * whose restore cannot go by the paths the tree shows: a bind of a directory a mount hides
 * (made after it, so listed after it), a file removed while open on the read-only bind
 * (its filesystem writable), a tmpfs a mount over a directory above it hides whole, a
 * removed file held open through two mounts of its tmpfs (each fd on its own mount again),
 * and with $ZDTM_MNT_HIDDEN_SOCK (upstream criu cannot bind it back) a socket bound by a
 * relative name in a directory a mount hides since.
 * With $ZDTM_MNT_RAMFS, a ramfs too, which criu refuses to dump but with --enable-fs ramfs
 * ($ZDTM_MNT_RAMFS_NEW: after restore, mounted without the file it had); with $ZDTM_MNT_SKIP, a tmpfs at
 * /skipped with another below it, mounted after the table is taken (dumped with
 * --skip-mnt /skipped: after restore, /skipped is an empty directory); with
 * $ZDTM_MNT_SHARED_ROOT, the root mount is shared, with a peer. With $ZDTM_MNT_EXT_MASTER,
 * an external mount /ext that is a slave of a shared tmpfs of the runner's namespace
 * (OUT/extsrc, which the runner unmounts after): after restore, of the same peer group.
 * With $ZDTM_MNT_EXT_PEER too, /ext stays a peer of the runner's tmpfs: after restore in
 * its peer group again, and the tmpfs the runner mounts at OUT/extsrc/late after the
 * restore (with a file "x" holding "late") shows at /ext/late.
 * With $ZDTM_MNT_OVERLAY_ROOT, the root is an overlay (as a container runtime makes it)
 * of a lower directory holding a file and an upper one the tree writes to, which the
 * runner mounts again for the restore.
 * With $ZDTM_MNT_BINFMT (with $ZDTM_MNT_USERNS: the instance is then the namespace's own),
 * binfmt_misc at /dev/binfmt with a magic handler (offset, mask, disabled) and an extension
 * one: after restore each handler's file reads as before, byte for byte.
 * With $ZDTM_MNT_USERNS, the root has user and IPC namespaces of its own too (as upstream
 * zdtm's uns flavour runs): every tmpfs is then its user namespace's, which refuses to
 * make anything for criu's ids (restore makes the removed files, the bind's removed
 * source and the socket's file again as ids it maps). No sysfs and no /dev/null node
 * there (the namespace may make neither), and /proc is mounted before the pivot (a proc
 * mount needs one fully visible in the namespace).
 * With $ZDTM_MNT_OVERMOUNTED_FD, an fd on a file of the tmpfs's directory /tmp/self, which
 * a bind of itself then covers: at its path the same file, on another mount; criu refuses
 * to dump it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STAGE2	   "--in-root"
#define DATA_SIZE  (3 * 4096 + 100)
#define DATA_SEED  77
#define FD_OFFSET  5000

static void must(int ret, const char *what)
{
	if (ret)
		test_fail_errno(what);
}

static void write_pattern(const char *path, uint64_t seed, size_t len)
{
	char buf[DATA_SIZE];
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);

	pattern_fill(buf, len, seed);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd))
		test_fail_errno(path);
}

static void expect_file(const char *path, uint64_t seed, size_t len, mode_t mode)
{
	char buf[DATA_SIZE + 1];
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		test_fail("%s: %s", path, strerror(errno));
	if ((size_t)st.st_size != len || (st.st_mode & 07777) != mode)
		test_fail("%s: size %lld, mode %o", path, (long long)st.st_size, st.st_mode & 07777);
	read_exact(fd, buf, len, path);
	pattern_expect(buf, len, seed, path);
	close(fd);
}

/*
 * Stage 1, in the launched root, still in the runner's tree: a root of bind mounts, the
 * pivot into it, then the program again from there.
 */
static void build_root(const char *out_dir, char **argv)
{
	test_mnt_new_root(out_dir, "usr\0out\0bin\0dev\0proc\0sys\0tmp\0mnt\0shared\0slave\0"
				   "private\0unbind\0ro\0ramfs\0skipped\0peer\0bindsrc\0ext\0stack\0gone\0"
				   "hidbind\0above\0",
			  argv, STAGE2);
}

/*
 * In the runner's namespace, for $ZDTM_MNT_BINFMT without a user namespace: the host's
 * binfmt_misc mounted at {out}/binfmt-host, as a host keeps it mounted; the instance (and its
 * handlers) would go with the tree's mount, its last, when the dump kills the tree.
 */
static void binfmt_host_mount(const char *out_dir)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/binfmt-host", out_dir);
	if (mkdir(path, 0755) && errno != EEXIST)
		test_fail_errno("mkdir binfmt-host");
	must(mount("binfmt", path, "binfmt_misc", 0, NULL), "binfmt_misc binfmt-host");
}

/*
 * In the runner's namespace: OUT/extsrc, a shared tmpfs, and a clone of it (a peer, not
 * close-on-exec) for the tree, whose fd $ZDTM_EXT_TREE_FD names.
 */
static void ext_master_source(const char *out_dir)
{
	char path[4200], fd_text[16];
	int tree;

	snprintf(path, sizeof(path), "%s/extsrc", out_dir);
	if (mkdir(path, 0755) && errno != EEXIST)
		test_fail_errno("mkdir extsrc");
	must(mount("extsrc", path, "tmpfs", 0, "size=64k"), "tmpfs extsrc");
	must(mount(NULL, path, NULL, MS_SHARED, NULL), "make extsrc shared");
	tree = syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE);
	if (tree < 0)
		test_fail_errno("open_tree extsrc");
	snprintf(path, sizeof(path), "%s/extsrc/late", out_dir);
	must(mkdir(path, 0755), "mkdir extsrc/late");
	snprintf(fd_text, sizeof(fd_text), "%d", tree);
	setenv("ZDTM_EXT_TREE_FD", fd_text, 1);
}

/* The clone at /ext, made a slave of the runner's tmpfs ($ZDTM_MNT_EXT_PEER: left a peer). */
static void mount_ext_master(void)
{
	int tree = atoi(getenv("ZDTM_EXT_TREE_FD"));

	must(syscall(SYS_move_mount, tree, "", AT_FDCWD, "/ext", MOVE_MOUNT_F_EMPTY_PATH),
	     "move_mount /ext");
	if (!getenv("ZDTM_MNT_EXT_PEER"))
		must(mount(NULL, "/ext", NULL, MS_SLAVE, NULL), "make /ext a slave");
	close(tree);
}

/*
 * The peer group /ext receives from, or with $ZDTM_MNT_EXT_PEER the one it is in (ids are
 * the kernel's, the same in every namespace).
 */
static int ext_group_id(void)
{
	const char *kind = getenv("ZDTM_MNT_EXT_PEER") ? " shared:%d" : " master:%d";
	static char buf[16384];
	char *save;
	int id;

	read_file("/proc/self/mountinfo", buf, sizeof(buf));
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *tag = strstr(line, kind[1] == 's' ? " shared:" : " master:");

		if (strstr(line, " /ext ") && tag && sscanf(tag, kind, &id) == 1)
			return id;
	}
	test_fail("/ext is neither the slave nor the peer it should be");
}

/*
 * The runner's mount at OUT/extsrc/late, made after the restore, propagated to /ext/late;
 * the tree's mount table is then compared without it.
 */
static void expect_late_mount(void)
{
	int fd = open("/ext/late/x", O_RDONLY);
	char buf[16];
	ssize_t len;

	if (fd < 0)
		test_fail("the runner's mount at extsrc/late does not show at /ext/late: %s",
			  strerror(errno));
	len = read(fd, buf, sizeof(buf) - 1);
	buf[len > 0 ? len : 0] = '\0';
	if (strcmp(buf, "late\n"))
		test_fail("/ext/late/x holds \"%s\", not \"late\"", buf);
	close(fd);
	must(umount("/ext/late"), "umount /ext/late");
}

/*
 * In the runner's namespace, for $ZDTM_MNT_USERNS: the directory the root mount is bound
 * from and the output file, made usable by the namespace's root (whose ids criu's
 * namespace sees as TEST_USERNS_HOST_ID).
 */
static void userns_prepare(const char *out_dir)
{
	char output[4200];

	snprintf(output, sizeof(output), "%s/output", out_dir);
	if (mkdir("root", 0755) || chown("root", TEST_USERNS_HOST_ID, TEST_USERNS_HOST_ID) ||
	    chmod(output, 0666))
		test_fail_errno("prepare root and output for the user namespace");
}

static int hidden_sock;

/* Bound as "hidden/inner/sock" from /tmp, before a mount hides /tmp/hidden. */
static int bind_hidden_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = "hidden/inner/sock" };
	int sk = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (sk < 0 || chdir("/tmp") || bind(sk, (struct sockaddr *)&addr, sizeof(addr)) ||
	    chdir("/"))
		test_fail_errno("bind hidden/inner/sock in /tmp");
	return sk;
}

/* Its name as bound, and (once /tmp/hidden is unmounted) its file where it was bound. */
static void expect_hidden_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = "/tmp/hidden/inner/sock" },
			   name;
	socklen_t len = sizeof(name);
	int client = socket(AF_UNIX, SOCK_DGRAM, 0);
	char byte = 0;

	if (getsockname(hidden_sock, (struct sockaddr *)&name, &len) ||
	    strcmp(name.sun_path, "hidden/inner/sock"))
		test_fail("the hidden socket's name is not hidden/inner/sock");
	if (client < 0 ||
	    sendto(client, "H", 1, 0, (struct sockaddr *)&addr, sizeof(addr)) != 1 ||
	    recv(hidden_sock, &byte, 1, MSG_DONTWAIT) != 1 || byte != 'H')
		test_fail("no datagram through /tmp/hidden/inner/sock: %s", strerror(errno));
	close(client);
}

/* Stage 2, in the new root: the mounts the dump must give back. */
static void build_mounts(void)
{
	bool userns = getenv("ZDTM_MNT_USERNS");
	int fd, hidden_inner;

	/*
	 * The root shared, with a peer (a bind of one of its directories): every mount made
	 * under it after this is shared too, each in a peer group of its own.
	 */
	if (getenv("ZDTM_MNT_SHARED_ROOT")) {
		must(mount(NULL, "/", NULL, MS_SHARED, NULL), "make / shared");
		test_bind_mount("/bindsrc", "/peer", 0);
	}

	if (!userns)
		must(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
		     "proc");
	must(mount("devs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=64k"), "tmpfs /dev");
	must(userns ? 0 : mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3)), "mknod /dev/null");
	must(mkdir("/dev/pts", 0755) || mkdir("/dev/mqueue", 0755), "mkdir in /dev");
	must(mount("pts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=620,ptmxmode=666"),
	     "devpts");
	must(mount("mqueue", "/dev/mqueue", "mqueue", MS_NODEV, NULL), "mqueue");
	if (!userns)
		must(mount("sysfs", "/sys", "sysfs", MS_RDONLY | MS_NOSUID, NULL), "sysfs");
	fd = open(userns ? "/out/output" : "/dev/null", O_RDONLY);
	if (fd < 0 || dup2(fd, 0) < 0 || close(fd))
		test_fail_errno("stdin from /dev/null");
	fd = open("/out/output", O_WRONLY | O_APPEND);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || close(fd))
		test_fail_errno("stdout to /out/output");

	must(mount("data", "/tmp", "tmpfs", MS_NODEV | MS_NOATIME, "size=1m,mode=1777"), "tmpfs");
	must(mkdir("/tmp/sub", 0750) || mkdir("/tmp/sub/deeper", 0700), "mkdir in the tmpfs");
	write_pattern("/tmp/data", DATA_SEED, DATA_SIZE);
	write_pattern("/tmp/sub/small", DATA_SEED + 1, 100);
	must(symlink("sub/small", "/tmp/link"), "symlink in the tmpfs");
	test_bind_mount("/tmp/sub", "/mnt", 0);
	/* A file of the tmpfs that a mount over its directory hides. */
	must(mkdir("/tmp/hidden", 0755), "mkdir /tmp/hidden");
	write_pattern("/tmp/hidden/under", DATA_SEED + 3, 300);
	/* Its directory inner, bound at /hidbind once the mount hides it (from a clone). */
	must(mkdir("/tmp/hidden/inner", 0755), "mkdir /tmp/hidden/inner");
	write_pattern("/tmp/hidden/inner/file", DATA_SEED + 7, 500);
	hidden_inner = syscall(SYS_open_tree, AT_FDCWD, "/tmp/hidden/inner", OPEN_TREE_CLONE);
	if (hidden_inner < 0)
		test_fail_errno("open_tree /tmp/hidden/inner");
	hidden_sock = getenv("ZDTM_MNT_HIDDEN_SOCK") ? bind_hidden_socket() : -1;
	must(mount("over", "/tmp/hidden", "tmpfs", 0, "size=64k"), "tmpfs over /tmp/hidden");
	must(syscall(SYS_move_mount, hidden_inner, "", AT_FDCWD, "/hidbind",
		     MOVE_MOUNT_F_EMPTY_PATH),
	     "move_mount /hidbind");
	close(hidden_inner);
	test_bind_mount("/tmp/sub/deeper", "/ro", MS_RDONLY | MS_NOEXEC);
	/* A tmpfs at /above/low that a tmpfs mounted at /above hides whole. */
	must(mkdir("/above/low", 0755), "mkdir /above/low");
	must(mount("low", "/above/low", "tmpfs", 0, "size=64k"), "tmpfs /above/low");
	write_pattern("/above/low/file", DATA_SEED + 8, 600);
	must(mount("cover", "/above", "tmpfs", 0, "size=64k"), "tmpfs over /above");

	/* A bind of a directory removed since: mountinfo shows its root "//deleted". */
	must(mkdir("/tmp/removed", 0750), "mkdir /tmp/removed");
	test_bind_mount("/tmp/removed", "/gone", 0);
	must(rmdir("/tmp/removed"), "rmdir /tmp/removed");
	/* A tmpfs with a file that another tmpfs mounted at the same point hides whole. */
	must(mount("under", "/stack", "tmpfs", 0, "size=64k"), "tmpfs /stack");
	write_pattern("/stack/under", DATA_SEED + 4, 400);
	must(mount("over", "/stack", "tmpfs", 0, "size=64k"), "tmpfs over /stack");
	must(mount("shared", "/shared", "tmpfs", 0, "size=64k"), "tmpfs /shared");
	must(mount(NULL, "/shared", NULL, MS_SHARED, NULL), "make /shared shared");
	test_bind_mount("/shared", "/slave", 0);
	must(mount(NULL, "/slave", NULL, MS_SLAVE, NULL), "make /slave a slave");
	/* An empty source, as mountinfo shows it: nothing between two blanks. */
	must(mount("", "/private", "tmpfs", MS_NOEXEC, "size=64k,mode=700"), "private");
	must(mount("unbind", "/unbind", "tmpfs", 0, "size=64k"), "tmpfs /unbind");
	must(mount(NULL, "/unbind", NULL, MS_UNBINDABLE, NULL), "make /unbind unbindable");
	/* A filesystem criu does not restore: its dump must fail, naming it. */
	if (getenv("ZDTM_MNT_RAMFS")) {
		must(mount("ramfs", "/ramfs", "ramfs", MS_NODEV, "mode=711"), "ramfs");
		write_pattern("/ramfs/file", DATA_SEED + 9, 100);
	}
	/* An fd restore could not reopen on its mount: its dump must fail, naming it. */
	if (getenv("ZDTM_MNT_OVERMOUNTED_FD")) {
		must(mkdir("/tmp/self", 0755), "mkdir /tmp/self");
		write_pattern("/tmp/self/file", DATA_SEED + 5, 100);
		if (open("/tmp/self/file", O_RDONLY) < 0)
			test_fail_errno("open /tmp/self/file");
		test_bind_mount("/tmp/self", "/tmp/self", 0);
	}
}

/* A datagram socket bound in the tmpfs: its name is a path of the restored tree. */
static int bind_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = "/tmp/sock" };
	int sk = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (sk < 0 || bind(sk, (struct sockaddr *)&addr, sizeof(addr)))
		test_fail_errno("bind /tmp/sock");
	return sk;
}

static void expect_socket(int sk)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = "/tmp/sock" }, name;
	socklen_t len = sizeof(name);
	int client = socket(AF_UNIX, SOCK_DGRAM, 0);
	char byte = 0;

	if (getsockname(sk, (struct sockaddr *)&name, &len) || strcmp(name.sun_path, "/tmp/sock"))
		test_fail("the socket's name is not /tmp/sock");
	if (client < 0 ||
	    sendto(client, "S", 1, 0, (struct sockaddr *)&addr, sizeof(addr)) != 1 ||
	    recv(sk, &byte, 1, MSG_DONTWAIT) != 1 || byte != 'S')
		test_fail("no datagram through /tmp/sock: %s", strerror(errno));
	close(client);
}

/* Linked again at dump as /tmp/sub/link_remap.N, which restore removes once the tree runs. */
static void expect_linked(int fd)
{
	char buf[150];
	struct stat st, other;
	DIR *dir;
	struct dirent *de;

	if (fstat(fd, &st) || stat("/tmp/sub/other", &other) || st.st_ino != other.st_ino ||
	    st.st_nlink != 1 || !access("/tmp/sub/named", F_OK))
		test_fail("the file open under its removed name is not the one /tmp/sub/other "
			  "names, alone (%lu links)",
			  (unsigned long)st.st_nlink);
	read_exact(fd, buf, sizeof(buf), "the file open under its removed name");
	pattern_expect(buf, sizeof(buf), DATA_SEED + 4, "the file open under its removed name");
	dir = opendir("/tmp/sub");
	if (!dir)
		test_fail_errno("opendir /tmp/sub");
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, "link_remap", 10))
			test_fail("/tmp/sub/%s is left after restore", de->d_name);
	closedir(dir);
}

static void expect_ghost(int fd)
{
	char buf[200];
	struct stat st;

	if (fstat(fd, &st) || st.st_nlink || !access("/tmp/sub/ghost", F_OK))
		test_fail("the removed file is back at its path or linked (%lu links)",
			  (unsigned long)st.st_nlink);
	read_exact(fd, buf, sizeof(buf), "the removed file");
	pattern_expect(buf, sizeof(buf), DATA_SEED + 2, "the removed file");
}

/*
 * A file removed while open through the read-only bind /ro: back removed, with its
 * contents, on the /ro mount itself (not on another mount of the tmpfs).
 */
static int open_ro_ghost(void)
{
	int fd;

	write_pattern("/tmp/sub/deeper/roghost", DATA_SEED + 9, 250);
	fd = open("/ro/roghost", O_RDONLY);
	if (fd < 0 || unlink("/tmp/sub/deeper/roghost"))
		test_fail_errno("/ro/roghost");
	return fd;
}

static void expect_ro_ghost(int fd)
{
	struct statx file, ro;
	char buf[250];

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID | STATX_NLINK, &file) ||
	    statx(AT_FDCWD, "/ro", 0, STATX_MNT_ID, &ro))
		test_fail_errno("statx the file removed on /ro");
	if (file.stx_nlink || !access("/tmp/sub/deeper/roghost", F_OK))
		test_fail("the file removed on /ro is back at its path or linked");
	if (file.stx_mnt_id != ro.stx_mnt_id)
		test_fail("the file removed on /ro is on mount %llu, not /ro's %llu",
			  (unsigned long long)file.stx_mnt_id, (unsigned long long)ro.stx_mnt_id);
	if (pwrite(fd, "X", 1, 0) != -1 || errno != EBADF)
		test_fail("the file removed on /ro is open for writing");
	read_exact(fd, buf, sizeof(buf), "the file removed on /ro");
	pattern_expect(buf, sizeof(buf), DATA_SEED + 9, "the file removed on /ro");
}

/* A removed file held through /tmp and through /mnt (a bind of /tmp/sub). */
static void open_two_mount_ghost(int fds[2])
{
	write_pattern("/tmp/sub/twice", DATA_SEED + 10, 180);
	fds[0] = open("/tmp/sub/twice", O_RDONLY);
	fds[1] = open("/mnt/twice", O_RDONLY);
	if (fds[0] < 0 || fds[1] < 0 || unlink("/tmp/sub/twice"))
		test_fail_errno("/tmp/sub/twice");
}

static void expect_two_mount_ghost(const int fds[2])
{
	static const char *const via[2] = { "/tmp", "/mnt" };
	struct statx file[2], mnt;
	char buf[180];

	for (int i = 0; i < 2; i++) {
		if (statx(fds[i], "", AT_EMPTY_PATH, STATX_MNT_ID | STATX_INO | STATX_NLINK,
			  &file[i]) ||
		    statx(AT_FDCWD, via[i], 0, STATX_MNT_ID, &mnt))
			test_fail_errno("statx the removed file held twice");
		if (file[i].stx_mnt_id != mnt.stx_mnt_id || file[i].stx_nlink)
			test_fail("the removed file held through %s: on mount %llu, not %s's %llu "
				  "(%u links)",
				  via[i], (unsigned long long)file[i].stx_mnt_id, via[i],
				  (unsigned long long)mnt.stx_mnt_id, file[i].stx_nlink);
		read_exact(fds[i], buf, sizeof(buf), via[i]);
		pattern_expect(buf, sizeof(buf), DATA_SEED + 10, "the removed file held twice");
	}
	if (file[0].stx_ino != file[1].stx_ino)
		test_fail("the removed file held twice is two files");
}

/* The 100 bytes at FD_OFFSET of the pattern /tmp/data holds. */
static bool at_offset_matches(const char *got)
{
	static char all[DATA_SIZE];

	pattern_fill(all, DATA_SIZE, DATA_SEED);
	return !memcmp(got, all + FD_OFFSET, 100);
}

/* A mount under the shared tmpfs shows in its slave; one under the slave stays there. */
static void expect_slave_follows(void)
{
	struct stat shared, slave;

	must(mkdir("/shared/a", 0755) || mkdir("/shared/b", 0755), "mkdir in /shared");
	must(mount("late", "/shared/a", "tmpfs", 0, "size=64k"), "mount under /shared");
	must(mount("late", "/slave/b", "tmpfs", 0, "size=64k"), "mount under /slave");
	if (stat("/slave/a", &slave) || stat("/shared/a", &shared) || slave.st_dev != shared.st_dev)
		test_fail("a mount under /shared did not propagate to /slave");
	if (stat("/slave/b", &slave) || stat("/shared/b", &shared) || slave.st_dev == shared.st_dev)
		test_fail("a mount under /slave propagated to /shared");
}

/*
 * The handlers of $ZDTM_MNT_BINFMT: a magic one (offset 3, masked), an extension one. Without
 * a user namespace of the tree's they are the host's: named after /out's inode (two runs of
 * the suite do not share it) and removed at the end (zdtm.py removes them if it fails).
 */
#define BINFMT_MAGIC ":zdtm_magic_%lx:M:3:\\x7f\\x01ZD:\\xff\\x0f\\xff\\xdf:/bin/test:OC"
#define BINFMT_EXT   ":zdtm_ext_%lx:E::zdtmx::/bin/interp:P"
static char binfmt_files[2][64];
static char binfmt_before[2][512];

static void read_whole(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t len = fd < 0 ? -1 : read(fd, buf, size - 1);

	if (len < 0)
		test_fail_errno(path);
	buf[len] = '\0';
	close(fd);
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd))
		test_fail_errno(path);
}

/* binfmt_misc in the namespace: two handlers registered, the magic one disabled. */
static void binfmt_register(void)
{
	char line[256];
	struct stat out;

	must(stat("/out", &out), "stat /out");
	must(mkdir("/dev/binfmt", 0755), "mkdir /dev/binfmt");
	must(mount("binfmt", "/dev/binfmt", "binfmt_misc", MS_NOSUID, NULL), "binfmt_misc");
	snprintf(binfmt_files[0], sizeof(binfmt_files[0]), "/dev/binfmt/zdtm_magic_%lx",
		 (unsigned long)out.st_ino);
	snprintf(binfmt_files[1], sizeof(binfmt_files[1]), "/dev/binfmt/zdtm_ext_%lx",
		 (unsigned long)out.st_ino);
	snprintf(line, sizeof(line), BINFMT_MAGIC, (unsigned long)out.st_ino);
	write_text("/dev/binfmt/register", line);
	snprintf(line, sizeof(line), BINFMT_EXT, (unsigned long)out.st_ino);
	write_text("/dev/binfmt/register", line);
	write_text(binfmt_files[0], "0");
	for (int i = 0; i < 2; i++)
		read_whole(binfmt_files[i], binfmt_before[i], sizeof(binfmt_before[i]));
	if (!strstr(binfmt_before[0], "disabled") || !strstr(binfmt_before[0], "offset 3") ||
	    !strstr(binfmt_before[0], "mask ff0fffdf") || !strstr(binfmt_before[1], "extension .zdtmx"))
		test_fail("binfmt_misc handlers read back unlike registered:\n%s%s", binfmt_before[0],
			  binfmt_before[1]);
}

/*
 * Each handler's file reads as before the dump; in the namespace's own instance nothing else
 * is registered. The handlers are removed then.
 */
static void expect_binfmt(void)
{
	char now[512];
	int nr = 0;
	struct dirent *de;
	DIR *dir;

	for (int i = 0; i < 2; i++) {
		read_whole(binfmt_files[i], now, sizeof(now));
		if (strcmp(now, binfmt_before[i]))
			test_fail("%s after restore:\n%sbefore:\n%s", binfmt_files[i], now,
				  binfmt_before[i]);
	}
	dir = opendir("/dev/binfmt");
	while (dir && (de = readdir(dir)))
		nr += de->d_name[0] != '.';
	if (!dir || (getenv("ZDTM_MNT_USERNS") && nr != 4))
		test_fail("/dev/binfmt holds %d files, not register, status and 2 handlers", nr);
	closedir(dir);
	for (int i = 0; i < 2; i++)
		write_text(binfmt_files[i], "-1");
}

int main(int argc, char **argv)
{
	static char before[16384], after[16384];
	char out_dir[4096], cwd[64], buf[DATA_SIZE];
	int fd, sk, ghost, linked, ro_ghost, twice[2], ext_group;

	test_init(argc, argv);
	if (argc < 3 || strcmp(argv[2], STAGE2)) {
		snprintf(out_dir, sizeof(out_dir), "%s", argv[1]);
		*strrchr(out_dir, '/') = '\0';
		if (getenv("ZDTM_MNT_EXT_MASTER"))
			ext_master_source(out_dir);
		if (getenv("ZDTM_MNT_USERNS"))
			userns_prepare(out_dir);
		else if (getenv("ZDTM_MNT_BINFMT"))
			binfmt_host_mount(out_dir);
		test_launch_root(CLONE_NEWPID | CLONE_NEWNS |
				 (getenv("ZDTM_MNT_USERNS") ? CLONE_NEWUSER | CLONE_NEWIPC : 0));
		/* The namespace's root: with the runner's ids, exec would drop every capability. */
		if (getenv("ZDTM_MNT_USERNS") && (setresgid(0, 0, 0) || setresuid(0, 0, 0)))
			test_fail_errno("become the user namespace's root");
		build_root(out_dir, argv);
	}
	/* As a container's init: the session's leader (upstream criu dumps no other). */
	if (getsid(0) != 1 && setsid() != 1)
		test_fail_errno("setsid");
	build_mounts();
	if (getenv("ZDTM_MNT_EXT_MASTER"))
		mount_ext_master();
	if (getenv("ZDTM_MNT_BINFMT"))
		binfmt_register();
	fd = open("/tmp/data", O_RDWR);
	if (fd < 0 || lseek(fd, FD_OFFSET, SEEK_SET) != FD_OFFSET)
		test_fail_errno("open /tmp/data");
	must(chdir("/mnt"), "chdir /mnt");
	sk = bind_socket();
	/* A file removed while open: the dump keeps its contents, restore its path. */
	write_pattern("/tmp/sub/ghost", DATA_SEED + 2, 200);
	ghost = open("/tmp/sub/ghost", O_RDONLY);
	if (ghost < 0 || unlink("/tmp/sub/ghost"))
		test_fail_errno("/tmp/sub/ghost");
	write_pattern("/tmp/sub/named", DATA_SEED + 4, 150);
	linked = open("/tmp/sub/named", O_RDONLY);
	if (linked < 0 || link("/tmp/sub/named", "/tmp/sub/other") || unlink("/tmp/sub/named"))
		test_fail_errno("/tmp/sub/named");
	ro_ghost = open_ro_ghost();
	open_two_mount_ghost(twice);
	if (getenv("ZDTM_MNT_OVERLAY_ROOT"))
		write_pattern("/to_upper", DATA_SEED + 6, 700);
	test_mount_table("/proc/self/mountinfo", before, sizeof(before));
	/* After the table: dump leaves these out (--skip-mnt /skipped), restore makes none. */
	if (getenv("ZDTM_MNT_SKIP")) {
		must(mount("skipped", "/skipped", "tmpfs", 0, "size=64k"), "tmpfs /skipped");
		must(mkdir("/skipped/inner", 0755), "mkdir /skipped/inner");
		must(mount("inner", "/skipped/inner", "tmpfs", 0, "size=64k"), "tmpfs inner");
		write_pattern("/skipped/inner/file", DATA_SEED + 10, 100);
	}
	ext_group = getenv("ZDTM_MNT_EXT_MASTER") ? ext_group_id() : 0;
	test_ready();
	test_wait_sigterm();

	if (ext_group && ext_group_id() != ext_group)
		test_fail("/ext's peer group (or its master's) is %d, not %d", ext_group_id(),
			  ext_group);
	if (getenv("ZDTM_MNT_EXT_PEER"))
		expect_late_mount();

	test_mount_table("/proc/self/mountinfo", after, sizeof(after));
	if (strcmp(before, after))
		test_fail("mounts before the dump:\n%safter the restore:\n%s", before, after);
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/mnt"))
		test_fail("cwd %s, not /mnt", cwd);
	expect_file("/tmp/data", DATA_SEED, DATA_SIZE, 0640);
	expect_file("/mnt/small", DATA_SEED + 1, 100, 0640);
	expect_file("/tmp/sub/small", DATA_SEED + 1, 100, 0640);
	if (readlink("/tmp/link", cwd, sizeof(cwd)) != 9 || memcmp(cwd, "sub/small", 9))
		test_fail("/tmp/link does not point to sub/small");
	/* The fd reads on at its offset, and writes go to the restored tmpfs. */
	if (lseek(fd, 0, SEEK_CUR) != FD_OFFSET)
		test_fail("fd offset %lld, not %d", (long long)lseek(fd, 0, SEEK_CUR), FD_OFFSET);
	read_exact(fd, buf, 100, "/tmp/data at its offset");
	if (!at_offset_matches(buf))
		test_fail("/tmp/data read at the offset differs");
	if (pwrite(fd, "X", 1, 0) != 1 || pread(open("/tmp/data", O_RDONLY), buf, 1, 0) != 1 ||
	    buf[0] != 'X')
		test_fail("a write through the fd is not seen in /tmp/data");
	if (getenv("ZDTM_MNT_BINFMT"))
		expect_binfmt();
	/* --enable-fs ramfs: mounted anew (the table says so), its files not saved. */
	if (getenv("ZDTM_MNT_RAMFS_NEW") && access("/ramfs/file", F_OK) == 0)
		test_fail("/ramfs/file is back: its ramfs was not mounted anew");
	/* --skip-mnt /skipped: the directory of the root, empty. */
	if (getenv("ZDTM_MNT_SKIP") && rmdir("/skipped"))
		test_fail("/skipped is not an empty directory of the root: %s", strerror(errno));
	expect_slave_follows();
	expect_socket(sk);
	expect_ghost(ghost);
	expect_linked(linked);
	expect_ro_ghost(ro_ghost);
	expect_two_mount_ghost(twice);
	expect_file("/hidbind/file", DATA_SEED + 7, 500, 0640);
	if (getenv("ZDTM_MNT_OVERLAY_ROOT")) {
		expect_file("/from_lower", OVERLAY_LOWER_SEED, OVERLAY_LOWER_LEN, 0640);
		expect_file("/to_upper", DATA_SEED + 6, 700, 0640);
	}
	must(umount("/tmp/hidden"), "umount /tmp/hidden");
	expect_file("/tmp/hidden/under", DATA_SEED + 3, 300, 0640);
	if (hidden_sock >= 0)
		expect_hidden_socket();
	must(umount("/stack"), "umount the top /stack");
	expect_file("/stack/under", DATA_SEED + 4, 400, 0640);
	must(umount("/above"), "umount /above");
	expect_file("/above/low/file", DATA_SEED + 8, 600, 0640);
	test_pass();
}
