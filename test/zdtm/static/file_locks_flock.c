/*
 * flock() locks come back on the open descriptions that held them: an exclusive one;
 * two shared ones on two descriptions of one file; an exclusive one on a description
 * the parent shares with its child, which comes back once and is released for both by
 * the child's LOCK_UN. Another process checks what it can still lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "zdtmtst.h"

#define EX_FD 40      /* LOCK_EX */
#define SH_FD 41      /* LOCK_SH */
#define SH2_FD 42     /* LOCK_SH, another description of the same file */
#define SHARED_FD 43  /* LOCK_EX, inherited by the child */

#define EX_PATH "flock-ex.data"
#define SH_PATH "flock-sh.data"
#define SHARED_PATH "flock-shared.data"


static void lock_fd(int fd, int op)
{
	if (flock(fd, op | LOCK_NB))
		test_fail_errno("flock");
}

static void expect_free(const char *path, int op, bool want, const char *what)
{
	if (flock_free(path, op) != want)
		test_fail("%s: flock(%s) on %s %s", what, op == LOCK_EX ? "LOCK_EX" : "LOCK_SH",
			  path, want ? "is refused" : "succeeds");
}

static void check_held(void *arg)
{
	(void)arg;
	expect_free(EX_PATH, LOCK_SH, false, "the exclusive lock");
	expect_free(SH_PATH, LOCK_SH, true, "the shared locks");
	expect_free(SH_PATH, LOCK_EX, false, "the shared locks");
	expect_free(SHARED_PATH, LOCK_SH, false, "the shared description's lock");
}

static void check_released(void *arg)
{
	(void)arg;
	expect_free(SHARED_PATH, LOCK_EX, true, "the lock the child released");
	expect_free(EX_PATH, LOCK_EX, false, "the exclusive lock");
}

/* The flock() line of fdinfo: the lock is on fd's own description. */
static void expect_fdinfo_lock(int fd, const char *type)
{
	static char text[4096];
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	read_file(path, text, sizeof(text));
	if (!strstr(text, "FLOCK") || !strstr(text, type))
		test_fail("fdinfo of fd %d shows no FLOCK %s lock:\n%s", fd, type, text);
}

static void __attribute__((noreturn)) child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	expect_fdinfo_lock(SHARED_FD, "WRITE");
	if (flock(SHARED_FD, LOCK_UN))
		test_fail_errno("child: LOCK_UN");
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	open_fd_at(EX_PATH, O_RDWR | O_CREAT, EX_FD);
	open_fd_at(SH_PATH, O_RDWR | O_CREAT, SH_FD);
	open_fd_at(SH_PATH, O_RDWR | O_CREAT, SH2_FD);
	open_fd_at(SHARED_PATH, O_RDWR | O_CREAT, SHARED_FD);
	lock_fd(EX_FD, LOCK_EX);
	lock_fd(SH_FD, LOCK_SH);
	lock_fd(SH2_FD, LOCK_SH);
	lock_fd(SHARED_FD, LOCK_EX);
	test_barrier_init();
	child = test_fork(child_main);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	expect_fdinfo_lock(EX_FD, "WRITE");
	expect_fdinfo_lock(SH_FD, "READ");
	expect_fdinfo_lock(SH2_FD, "READ");
	if (proc_locks_count(EX_FD, "FLOCK") != 1 || proc_locks_count(SH_FD, "FLOCK") != 2 ||
	    proc_locks_count(SHARED_FD, "FLOCK") != 1)
		test_fail("/proc/locks shows %d, %d, %d flock() locks, expected 1, 2, 1",
			  proc_locks_count(EX_FD, "FLOCK"), proc_locks_count(SH_FD, "FLOCK"),
			  proc_locks_count(SHARED_FD, "FLOCK"));
	test_in_child(check_held, NULL, "the lock checker");
	test_children_verdict(&child, 1, "parent");
	test_in_child(check_released, NULL, "the lock checker after the child's LOCK_UN");
	test_pass();
}
