/*
 * Inodes restore makes again, in a tree with a user namespace of its own (ids 0-65535
 * inside mapped to 100000 on outside), each owned by a non-root id of the tree's (1000:1000
 * inside, 101000 outside): a deleted file held open, a memfd, a bound Unix socket's file
 * and a pty's slave. After restore: owner (as the tree sees it), mode, contents and
 * offset. And a child that runs as uid 1000 owns the I/O signals of a pipe (F_SETOWN,
 * O_ASYNC): the kernel checks the setter's ids against the child's before each SIGIO, so
 * it still comes only if restore set the owner with the ids the namespace maps 1000 to.
 * The pty holds input its slave has not read: queueing it again takes TIOCSTI, which the
 * tree's tasks may not do (CAP_SYS_ADMIN in criu's namespace).
 * And a read lease the root holds on a file it owns: the kernel lets only the file's owner
 * (by fsuid) or CAP_LEASE in the initial namespace take it, so restore must take it back
 * as the root's ids, not criu's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define OWNER	    1000
/* In the runner's scratch directory; owned by the namespace's root. */
#define OWNED_DIR   "userns-files"
#define GHOST_PATH  OWNED_DIR "/ghost"
#define SOCK_PATH   OWNED_DIR "/sock"
#define LEASE_PATH  OWNED_DIR "/leased"
#define PTY_INPUT   "keys typed\tbefore the dump"
#define GHOST_SIZE  3000
#define GHOST_POS   1234
#define GHOST_SEED  0x6e7301
#define MEMFD_SIZE  5000
#define MEMFD_SEED  0x6e7302

struct owned {
	int ghost, memfd, sock, master, slave, leased;
	char slave_path[256];
};

/* Gives fd's inode to the tree's OWNER, with mode; fails the test naming what. */
static void give(int fd, mode_t mode, const char *what)
{
	if (fchown(fd, OWNER, OWNER) || fchmod(fd, mode))
		test_fail("%s: cannot give it to %u:%u mode %#o: %s", what, OWNER, OWNER, mode,
			  strerror(errno));
}

static int make_filled(int fd, size_t size, uint64_t seed, const char *what)
{
	char buf[MEMFD_SIZE];

	pattern_fill(buf, size, seed);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		test_fail("%s: cannot make it: %s", what, strerror(errno));
	return fd;
}

/* Raw, so the input is readable at once and nothing echoes to the master. */
static void queue_pty_input(struct owned *o)
{
	struct termios t;

	if (tcgetattr(o->slave, &t))
		test_fail_errno("pty slave: tcgetattr");
	cfmakeraw(&t);
	if (tcsetattr(o->slave, TCSANOW, &t) ||
	    write(o->master, PTY_INPUT, strlen(PTY_INPUT)) != (ssize_t)strlen(PTY_INPUT))
		test_fail_errno("pty: queue input for the slave");
}

static void expect_pty_input(const struct owned *o)
{
	struct pollfd pfd = { .fd = o->slave, .events = POLLIN };
	char buf[64] = "";
	ssize_t n;

	if (poll(&pfd, 1, 5000) != 1)
		test_fail("pty slave: the queued input is not readable");
	n = read(o->slave, buf, sizeof(buf) - 1);
	if (n != (ssize_t)strlen(PTY_INPUT) || memcmp(buf, PTY_INPUT, n))
		test_fail("pty slave: read %zd bytes \"%s\", expected \"%s\"", n, buf, PTY_INPUT);
}

static void make_owned(struct owned *o)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = SOCK_PATH };

	o->ghost = make_filled(open(GHOST_PATH, O_RDWR | O_CREAT | O_EXCL, 0600), GHOST_SIZE,
			       GHOST_SEED, "ghost");
	give(o->ghost, 0640, "ghost");
	if (lseek(o->ghost, GHOST_POS, SEEK_SET) != GHOST_POS || unlink(GHOST_PATH))
		test_fail_errno("ghost: seek and unlink");

	o->memfd = make_filled(memfd_create("ns-user-files", 0), MEMFD_SIZE, MEMFD_SEED, "memfd");
	give(o->memfd, 0604, "memfd");

	o->sock = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (o->sock < 0 || bind(o->sock, (struct sockaddr *)&addr, sizeof(addr)) ||
	    chown(SOCK_PATH, OWNER, OWNER) || chmod(SOCK_PATH, 0660))
		test_fail("socket file %s: %s", SOCK_PATH, strerror(errno));

	o->master = pty_open_master(0, o->slave_path, sizeof(o->slave_path));
	o->slave = open(o->slave_path, O_RDWR | O_NOCTTY);
	if (o->slave < 0)
		test_fail("pty slave %s: %s", o->slave_path, strerror(errno));
	give(o->slave, 0620, "pty slave");
	queue_pty_input(o);

	o->leased = open(LEASE_PATH, O_RDONLY | O_CREAT | O_EXCL, 0644);
	if (o->leased < 0 || fcntl(o->leased, F_SETLEASE, F_RDLCK))
		test_fail("leased file %s: %s", LEASE_PATH, strerror(errno));
}

static void expect_attrs(const struct stat *st, mode_t mode, const char *what)
{
	if (st->st_uid != OWNER || st->st_gid != OWNER || st->st_mode != mode)
		test_fail("%s: owner %u:%u mode %#o; expected %u:%u mode %#o", what, st->st_uid,
			  st->st_gid, st->st_mode, OWNER, OWNER, mode);
}

static void expect_fd(int fd, mode_t mode, const char *what)
{
	struct stat st;

	if (fstat(fd, &st))
		test_fail("%s: fstat: %s", what, strerror(errno));
	expect_attrs(&st, mode, what);
}

static void expect_contents(int fd, size_t size, uint64_t seed, const char *what)
{
	char buf[MEMFD_SIZE + 1];
	struct stat st;

	if (fstat(fd, &st) || st.st_size != (off_t)size)
		test_fail("%s: size %lld, expected %zu", what, (long long)st.st_size, size);
	if (pread(fd, buf, sizeof(buf), 0) != (ssize_t)size)
		test_fail("%s: cannot read its %zu bytes back: %s", what, size, strerror(errno));
	pattern_expect(buf, size, seed, what);
}

static void expect_owned(const struct owned *o)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX, .sun_path = SOCK_PATH };
	struct stat st;
	off_t pos;

	expect_fd(o->ghost, S_IFREG | 0640, "ghost");
	expect_contents(o->ghost, GHOST_SIZE, GHOST_SEED, "ghost");
	pos = lseek(o->ghost, 0, SEEK_CUR);
	if (pos != GHOST_POS)
		test_fail("ghost: offset %lld, expected %d", (long long)pos, GHOST_POS);

	expect_fd(o->memfd, S_IFREG | 0604, "memfd");
	expect_contents(o->memfd, MEMFD_SIZE, MEMFD_SEED, "memfd");

	if (lstat(SOCK_PATH, &st))
		test_fail("socket file %s: %s", SOCK_PATH, strerror(errno));
	expect_attrs(&st, S_IFSOCK | 0660, "socket file");
	expect_sock_name(o->sock, false, &addr,
			 offsetof(struct sockaddr_un, sun_path) + strlen(SOCK_PATH) + 1);

	expect_fd(o->slave, S_IFCHR | 0620, "pty slave");
	expect_pty_input(o);

	if (fcntl(o->leased, F_GETLEASE) != F_RDLCK)
		test_fail("leased file: lease %d, expected a read lease (%d)",
			  fcntl(o->leased, F_GETLEASE), F_RDLCK);
}

/*
 * The root's fds are its own and no other: none of criu's (the owner service's socket
 * among them) is left behind.
 */
static void expect_own_fds(const struct owned *o)
{
	const int own[] = { 0, 1, 2, o->ghost, o->memfd, o->sock, o->master, o->slave, o->leased };
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;

	if (!dir)
		test_fail_errno("opendir /proc/self/fd");
	while ((de = readdir(dir))) {
		int fd = atoi(de->d_name);
		size_t i;

		if (de->d_name[0] == '.' || fd == dirfd(dir))
			continue;
		for (i = 0; i < sizeof(own) / sizeof(own[0]) && own[i] != fd; i++)
			;
		if (i == sizeof(own) / sizeof(own[0]))
			test_fail("fd %d is open after restore, which the root did not open", fd);
	}
	closedir(dir);
}

static void child_main(void)
{
	struct timespec wait = { .tv_sec = 5 };
	int pipe_fds[2], sig;
	sigset_t sigio;

	sigemptyset(&sigio);
	sigaddset(&sigio, SIGIO);
	if (setgroups(0, NULL) || setresgid(OWNER, OWNER, OWNER) ||
	    setresuid(OWNER, OWNER, OWNER))
		test_fail_errno("child: take its ids");
	if (sigprocmask(SIG_BLOCK, &sigio, NULL) || pipe(pipe_fds) ||
	    fcntl(pipe_fds[0], F_SETFL, O_ASYNC | O_NONBLOCK) ||
	    fcntl(pipe_fds[0], F_SETOWN, getpid()))
		test_fail_errno("child: an O_ASYNC pipe");
	test_barrier_done();
	test_wait_sigterm();
	if (fcntl(pipe_fds[0], F_GETOWN) != getpid())
		test_fail("child: the pipe's owner is %d, expected itself (%d)",
			  fcntl(pipe_fds[0], F_GETOWN), getpid());
	if (write(pipe_fds[1], "y", 1) != 1)
		test_fail_errno("child: write to the pipe");
	sig = sigtimedwait(&sigio, NULL, &wait);
	if (sig != SIGIO)
		test_fail("child: no SIGIO for its pipe: %s", strerror(errno));
	exit(0);
}

/* The launcher, still root outside: a directory the namespace's root may write in. */
static void make_owned_dir(void)
{
	if (mkdir(OWNED_DIR, 0700) || chown(OWNED_DIR, TEST_USERNS_HOST_ID, TEST_USERNS_HOST_ID))
		test_fail("%s: %s", OWNED_DIR, strerror(errno));
}

int main(int argc, char **argv)
{
	struct owned owned;
	pid_t child;

	test_init(argc, argv);
	make_owned_dir();
	test_launch_root(CLONE_NEWUSER | CLONE_NEWPID);
	/* root inside: ids 0 (100000 outside) */
	if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
		test_fail_errno("become root in the namespace");
	make_owned(&owned);
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	expect_owned(&owned);
	expect_own_fds(&owned);
	test_children_verdict(&child, 1, "root");
	test_pass();
}
