/*
 * memfds held as fds come back as the same objects: names, sizes, sparse contents, seals,
 * modes and flags. "mfd-alpha" has two descriptions (fd 50, shared with the child, and fd
 * 51, a reopening through /proc with fd 52 a dup of it) and stays growable by writes only
 * up to its sealed size; "mfd-beta" is fully sealed; "mfd-gamma" was created without
 * MFD_ALLOW_SEALING (so it has F_SEAL_SEAL), is empty, 0640 and O_APPEND.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define ALPHA_FD    50 /* O_RDWR, cloexec, offset ALPHA_POS; the child's too */
#define ALPHA_RO    51 /* O_RDONLY, its own description, offset RO_POS */
#define ALPHA_DUP   52 /* a dup of ALPHA_RO */
#define BETA_FD	    53
#define GAMMA_FD    54
#define PAGE	    4096
#define ALPHA_SIZE  (16 * PAGE) /* pages 0-2 seed 41, page 10 seed 42, the rest holes */
#define ALPHA_POS   1234
#define RO_POS	    777
#define CHILD_LEN   300	 /* the child writes this at ALPHA_FD after restore, seed 43 */
#define BETA_SIZE   5000 /* seed 44 */
#define ALPHA_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)
#define BETA_SEALS  (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

static void place(int fd, int at, bool cloexec)
{
	if (dup3(fd, at, cloexec ? O_CLOEXEC : 0) != at)
		test_fail_errno("dup3");
	close(fd);
}

static int new_memfd(const char *name, unsigned int flags)
{
	int fd = memfd_create(name, flags);

	if (fd < 0)
		test_fail_errno("memfd_create");
	return fd;
}

static void expect_offset(int fd, off_t want, const char *what)
{
	off_t pos = lseek(fd, 0, SEEK_CUR);

	if (pos != want)
		test_fail("%s: offset %lld, expected %lld", what, (long long)pos, (long long)want);
}

static void expect_object(int fd, const char *name, off_t size, unsigned int seals, mode_t mode)
{
	char link[256], want[256];
	struct stat st;
	int got;

	fd_link(fd, link, sizeof(link));
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	if (strcmp(link, want))
		test_fail("fd %d links to %s, expected %s", fd, link, want);
	if (fstat(fd, &st))
		test_fail_errno("fstat");
	if (st.st_size != size || (st.st_mode & 07777) != mode)
		test_fail("%s: size %lld mode %#o, expected %lld %#o", name, (long long)st.st_size,
			  st.st_mode & 07777, (long long)size, mode);
	got = fcntl(fd, F_GET_SEALS);
	if (got != (int)seals)
		test_fail("%s: seals %#x, expected %#x", name, got, seals);
}

/* F_GETFL and F_GETFD of the fds checked, as they were before the dump. */
static const int checked_fds[] = {ALPHA_FD, ALPHA_RO, GAMMA_FD};
static int dumped_fl[3], dumped_fd_flags[3];

static void record_flags(void)
{
	for (int i = 0; i < 3; i++) {
		dumped_fl[i] = fcntl(checked_fds[i], F_GETFL);
		dumped_fd_flags[i] = fcntl(checked_fds[i], F_GETFD);
	}
	if (!(dumped_fd_flags[0] & FD_CLOEXEC) || (dumped_fl[1] & O_ACCMODE) != O_RDONLY ||
	    !(dumped_fl[2] & O_APPEND))
		test_fail("setup: the flags of fds 50, 51, 54 are not what the test set");
}

static void expect_flags(void)
{
	for (int i = 0; i < 3; i++) {
		int fl = fcntl(checked_fds[i], F_GETFL), fd_flags = fcntl(checked_fds[i], F_GETFD);

		if (fl != dumped_fl[i] || fd_flags != dumped_fd_flags[i])
			test_fail("fd %d: F_GETFL %#o F_GETFD %d, %#o %d before the dump",
				  checked_fds[i], fl, fd_flags, dumped_fl[i], dumped_fd_flags[i]);
	}
}

/* Pages 0-2 as dumped but for the child's bytes at ALPHA_POS, page 10, holes elsewhere. */
static void expect_alpha_contents(void)
{
	static unsigned char buf[ALPHA_SIZE], want[ALPHA_SIZE];

	if (pread(ALPHA_RO, buf, ALPHA_SIZE, 0) != ALPHA_SIZE)
		test_fail_errno("pread mfd-alpha");
	pattern_fill(want, 3 * PAGE, 41);
	pattern_fill(want + ALPHA_POS, CHILD_LEN, 43);
	pattern_fill(want + 10 * PAGE, PAGE, 42);
	for (size_t off = 0; off < ALPHA_SIZE; off++)
		if (buf[off] != want[off])
			test_fail("mfd-alpha: byte %zu is %#x, expected %#x", off, buf[off],
				  want[off]);
}

static void expect_beta_sealed(void)
{
	static unsigned char buf[BETA_SIZE];

	if (pread(BETA_FD, buf, BETA_SIZE, 0) != BETA_SIZE)
		test_fail_errno("pread mfd-beta");
	pattern_expect(buf, BETA_SIZE, 44, "mfd-beta");
	if (pwrite(BETA_FD, buf, 1, 0) != -1 || ftruncate(BETA_FD, 0) != -1 ||
	    fcntl(BETA_FD, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != -1)
		test_fail("mfd-beta: a write, shrink or new seal got through its seals");
}

static void __attribute__((noreturn)) child_main(void)
{
	static unsigned char buf[CHILD_LEN];

	test_barrier_done();
	test_wait_sigterm();

	expect_offset(ALPHA_FD, ALPHA_POS, "child: mfd-alpha fd 50");
	pattern_fill(buf, CHILD_LEN, 43);
	if (write(ALPHA_FD, buf, CHILD_LEN) != CHILD_LEN)
		test_fail_errno("child: write mfd-alpha");
	exit(0);
}

static void setup_alpha(void)
{
	static unsigned char buf[3 * PAGE];
	char path[64];

	place(new_memfd("mfd-alpha", MFD_ALLOW_SEALING | MFD_CLOEXEC), ALPHA_FD, true);
	if (ftruncate(ALPHA_FD, ALPHA_SIZE))
		test_fail_errno("ftruncate");
	pattern_fill(buf, sizeof(buf), 41);
	if (pwrite(ALPHA_FD, buf, sizeof(buf), 0) != sizeof(buf))
		test_fail_errno("pwrite");
	pattern_fill(buf, PAGE, 42);
	if (pwrite(ALPHA_FD, buf, PAGE, 10 * PAGE) != PAGE)
		test_fail_errno("pwrite");
	if (fcntl(ALPHA_FD, F_ADD_SEALS, ALPHA_SEALS) || lseek(ALPHA_FD, ALPHA_POS, SEEK_SET) < 0)
		test_fail_errno("seal or seek mfd-alpha");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ALPHA_FD);
	place(open(path, O_RDONLY), ALPHA_RO, false);
	if (dup2(ALPHA_RO, ALPHA_DUP) != ALPHA_DUP || lseek(ALPHA_RO, RO_POS, SEEK_SET) < 0)
		test_fail_errno("dup2 or seek");
}

static void setup_beta_gamma(void)
{
	static unsigned char buf[BETA_SIZE];

	place(new_memfd("mfd-beta", MFD_ALLOW_SEALING), BETA_FD, false);
	pattern_fill(buf, BETA_SIZE, 44);
	if (write(BETA_FD, buf, BETA_SIZE) != BETA_SIZE || fcntl(BETA_FD, F_ADD_SEALS, BETA_SEALS))
		test_fail_errno("fill or seal mfd-beta");
	place(new_memfd("mfd-gamma", 0), GAMMA_FD, false);
	if (fchmod(GAMMA_FD, 0640) || fcntl(GAMMA_FD, F_SETFL, O_APPEND))
		test_fail_errno("fchmod or F_SETFL mfd-gamma");
}

int main(int argc, char **argv)
{
	struct stat a, b;
	pid_t child;

	test_init(argc, argv);
	setup_alpha();
	setup_beta_gamma();
	record_flags();
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	expect_object(ALPHA_FD, "mfd-alpha", ALPHA_SIZE, ALPHA_SEALS, 0777);
	expect_object(BETA_FD, "mfd-beta", BETA_SIZE, BETA_SEALS, 0777);
	expect_object(GAMMA_FD, "mfd-gamma", 0, F_SEAL_SEAL, 0640);
	expect_flags();
	if (fstat(ALPHA_FD, &a) || fstat(ALPHA_RO, &b) || a.st_ino != b.st_ino)
		test_fail("fds 50 and 51 are not on one memfd any more");
	expect_offset(ALPHA_RO, RO_POS, "fd 51");
	test_children_verdict(&child, 1, "parent");
	expect_offset(ALPHA_FD, ALPHA_POS + CHILD_LEN, "fd 50 after the child wrote through it");
	if (lseek(ALPHA_DUP, 5, SEEK_CUR) != RO_POS + 5)
		test_fail("fd 52 is no dup of fd 51");
	expect_offset(ALPHA_RO, RO_POS + 5, "fd 51 after its dup moved");
	expect_alpha_contents();
	if (pwrite(ALPHA_FD, "x", 1, ALPHA_SIZE) != -1)
		test_fail("mfd-alpha grew past its F_SEAL_GROW size");
	expect_beta_sealed();
	test_pass();
}
