/*
 * OFD locks (F_OFD_SETLK) come back on the open descriptions that held them: a write
 * and a read range (to the end of the file) on one description, a write range on
 * another description of the same file, and a whole-file lock on a description shared
 * with the child, which comes back once and is released for both by the child.
 * F_OFD_GETLK through each description sees the other's locks and never its own.
 */
#include <stdlib.h>
#include <unistd.h>

#include "zdtmtst.h"

#define A_FD 40      /* WRITE [0, 100), READ [200, EOF) */
#define B_FD 41      /* another description: WRITE [100, 150) */
#define SHARED_FD 42 /* WRITE, whole file; inherited by the child */

#define AB_PATH "ofd-ab.data"
#define SHARED_PATH "ofd-shared.data"


static void ofd_lock(int fd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };

	if (fcntl(fd, F_OFD_SETLK, &fl))
		test_fail_errno("F_OFD_SETLK");
}

/* What F_OFD_GETLK through fd says of a write lock on [start, start + 1). */
static void expect_via(int fd, off_t start, short type, off_t lstart, off_t llen, const char *what)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = 1 };

	if (fcntl(fd, F_OFD_GETLK, &fl))
		test_fail_errno("F_OFD_GETLK");
	if (fl.l_type != type || (type != F_UNLCK && (fl.l_start != lstart || fl.l_len != llen)))
		test_fail("%s: byte %lld: type %d at %lld+%lld, expected type %d at %lld+%lld",
			  what, (long long)start, fl.l_type, (long long)fl.l_start,
			  (long long)fl.l_len, type, (long long)lstart, (long long)llen);
}

static void check_held(void *arg)
{
	struct flock w0 = { .l_type = F_WRLCK, .l_start = 0, .l_len = 100, .l_pid = -1 };
	struct flock w100 = { .l_type = F_WRLCK, .l_start = 100, .l_len = 50, .l_pid = -1 };
	struct flock r200 = { .l_type = F_RDLCK, .l_start = 200, .l_len = 0, .l_pid = -1 };
	struct flock all = { .l_type = F_WRLCK, .l_start = 0, .l_len = 0, .l_pid = -1 };
	struct flock none = { .l_type = F_UNLCK };

	(void)arg;
	expect_lock(AB_PATH, true, 99, 1, &w0, "A's write lock");
	expect_lock(AB_PATH, true, 100, 1, &w100, "B's write lock");
	expect_lock(AB_PATH, true, 150, 50, &none, "the gap");
	expect_lock(AB_PATH, true, 1 << 20, 1, &r200, "A's read lock to the end of the file");
	/* POSIX requests conflict with OFD locks too. */
	expect_lock(AB_PATH, false, 120, 1, &w100, "B's write lock, asked with F_GETLK");
	expect_lock(SHARED_PATH, true, 12345, 1, &all, "the shared description's lock");
}

static void check_released(void *arg)
{
	struct flock none = { .l_type = F_UNLCK };

	(void)arg;
	expect_lock(SHARED_PATH, true, 0, 0, &none, "the lock the child released");
}

static void __attribute__((noreturn)) child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	ofd_lock(SHARED_FD, F_UNLCK, 0, 0);
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	open_fd_at(AB_PATH, O_RDWR | O_CREAT, A_FD);
	open_fd_at(AB_PATH, O_RDWR | O_CREAT, B_FD);
	open_fd_at(SHARED_PATH, O_RDWR | O_CREAT, SHARED_FD);
	ofd_lock(A_FD, F_WRLCK, 0, 100);
	ofd_lock(A_FD, F_RDLCK, 200, 0);
	ofd_lock(B_FD, F_WRLCK, 100, 50);
	ofd_lock(SHARED_FD, F_WRLCK, 0, 0);
	test_barrier_init();
	child = test_fork(child_main);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	/* Each description's locks conflict with the other's, never with its own. */
	expect_via(A_FD, 120, F_WRLCK, 100, 50, "through A");
	expect_via(A_FD, 50, F_UNLCK, 0, 0, "through A");
	expect_via(B_FD, 50, F_WRLCK, 0, 100, "through B");
	expect_via(B_FD, 120, F_UNLCK, 0, 0, "through B");
	if (proc_locks_count(A_FD, "OFDLCK") != 3 || proc_locks_count(SHARED_FD, "OFDLCK") != 1)
		test_fail("/proc/locks shows %d, %d OFD locks on the files, expected 3, 1",
			  proc_locks_count(A_FD, "OFDLCK"), proc_locks_count(SHARED_FD, "OFDLCK"));
	test_in_child(check_held, NULL, "the lock checker");
	test_children_verdict(&child, 1, "parent");
	test_in_child(check_released, NULL, "the lock checker after the child's unlock");
	test_pass();
}
