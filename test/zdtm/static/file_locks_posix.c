/*
 * POSIX record locks (fcntl F_SETLK) come back held by the restored process, with their
 * types and ranges: read and write, a range to the end of the file, on files open
 * read-write, read-only and write-only, one of them through two fds. Another process
 * asks F_GETLK about every lock and every gap between them.
 * ZDTM_LOCKS_MAPPED=1: the locked file is also mapped (restore opens and closes it to map
 * it, and a close() drops the process's POSIX locks on the file).
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RW_FD 40 /* three locks */
#define DUP_FD 41 /* a dup of RW_FD */
#define RO_FD 42 /* a read lock */
#define WO_FD 43 /* a write lock */
#define FILE_SIZE (64 << 10)

#define RW_PATH "file-locks-rw.data"
#define RO_PATH "file-locks-ro.data"
#define WO_PATH "file-locks-wo.data"

struct lock {
	const char *path;
	int fd;
	short type;
	off_t start, len;
};

static const struct lock locks[] = {
	{ RW_PATH, RW_FD, F_WRLCK, 100, 100 },
	{ RW_PATH, RW_FD, F_RDLCK, 1000, 100 },
	{ RW_PATH, DUP_FD, F_WRLCK, 5000, 0 }, /* to the end of the file */
	{ RO_PATH, RO_FD, F_RDLCK, 0, 10 },
	{ WO_PATH, WO_FD, F_WRLCK, 10, 20 },
};

#define NR_LOCKS (sizeof(locks) / sizeof(locks[0]))

/* The ranges of RW_PATH no lock covers. */
static const off_t gaps[][2] = { { 0, 100 }, { 200, 800 }, { 1100, 3900 } };


static void take_locks(void)
{
	for (size_t i = 0; i < NR_LOCKS; i++) {
		struct flock fl = { .l_type = locks[i].type, .l_whence = SEEK_SET,
				    .l_start = locks[i].start, .l_len = locks[i].len };

		if (fcntl(locks[i].fd, F_SETLK, &fl))
			test_fail_errno("F_SETLK");
	}
}

/* In a child: every lock is the holder's, as taken, and the gaps are free. */
static void check_locks(void *arg)
{
	pid_t holder = *(pid_t *)arg;
	struct flock none = { .l_type = F_UNLCK };

	for (size_t i = 0; i < NR_LOCKS; i++) {
		struct flock want = { .l_type = locks[i].type, .l_start = locks[i].start,
				      .l_len = locks[i].len, .l_pid = holder };

		expect_lock(locks[i].path, false, locks[i].start, 1, &want, "a lock's first byte");
		if (locks[i].len)
			expect_lock(locks[i].path, false, locks[i].start + locks[i].len - 1, 1,
				    &want, "a lock's last byte");
		else
			expect_lock(locks[i].path, false, FILE_SIZE * 4, 1, &want,
				    "a lock to the end of the file, far past it");
	}
	for (size_t i = 0; i < sizeof(gaps) / sizeof(gaps[0]); i++)
		expect_lock(RW_PATH, false, gaps[i][0], gaps[i][1], &none, "a gap between locks");
}

int main(int argc, char **argv)
{
	static char data[FILE_SIZE];
	bool mapped = getenv("ZDTM_LOCKS_MAPPED") != NULL;
	char *map = NULL;
	pid_t self;

	test_init(argc, argv);
	pattern_fill(data, FILE_SIZE, 41);
	write_file(RW_PATH, data, FILE_SIZE);
	write_file(RO_PATH, data, FILE_SIZE);
	write_file(WO_PATH, data, FILE_SIZE);
	open_fd_at(RW_PATH, O_RDWR, RW_FD);
	if (dup2(RW_FD, DUP_FD) != DUP_FD)
		test_fail_errno("dup2");
	open_fd_at(RO_PATH, O_RDONLY, RO_FD);
	open_fd_at(WO_PATH, O_WRONLY, WO_FD);
	take_locks();
	if (mapped) {
		map = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, RW_FD, 0);
		if (map == MAP_FAILED)
			test_fail_errno("mmap");
	}
	test_ready();
	test_wait_sigterm();

	self = getpid();
	test_in_child(check_locks, &self, "the lock checker");
	if (proc_locks_count(RW_FD, "POSIX") != 3 || proc_locks_count(RO_FD, "POSIX") != 1 ||
	    proc_locks_count(WO_FD, "POSIX") != 1)
		test_fail("/proc/locks shows %d, %d, %d POSIX locks on the files, expected 3, 1, 1",
			  proc_locks_count(RW_FD, "POSIX"), proc_locks_count(RO_FD, "POSIX"),
			  proc_locks_count(WO_FD, "POSIX"));
	if (map)
		pattern_expect(map, FILE_SIZE, 41, "the mapped locked file");
	test_pass();
}
