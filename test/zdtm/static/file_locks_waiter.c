/*
 * Tasks blocked waiting for a lock: one child in fcntl(F_SETLKW), another in
 * flock(LOCK_EX), each on a lock the parent holds. Seizing them ends the wait (the
 * syscall restarts when they run again), so after restore they must wait again, not
 * get the lock, until the parent releases it: then each gets it and says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define POSIX_FD 40
#define FLOCK_FD 41
#define POSIX_PATH "waiter-posix.data"
#define FLOCK_PATH "waiter-flock.data"
#define WAIT_SECONDS 10

static int report[2];

static int open_rw(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT, 0600);

	if (fd < 0)
		test_fail_errno("open");
	return fd;
}


static void __attribute__((noreturn)) posix_waiter(void)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd = open_rw(POSIX_PATH);

	if (fcntl(fd, F_SETLKW, &fl))
		test_fail_errno("posix waiter: F_SETLKW");
	if (write(report[1], "P", 1) != 1)
		test_fail_errno("posix waiter: report");
	exit(0);
}

static void __attribute__((noreturn)) flock_waiter(void)
{
	int fd = open_rw(FLOCK_PATH);

	if (flock(fd, LOCK_EX))
		test_fail_errno("flock waiter: flock");
	if (write(report[1], "F", 1) != 1)
		test_fail_errno("flock waiter: report");
	exit(0);
}


/* Whether /proc/locks has pid waiting ("->") for a lock of class cls. */
static bool is_waiting(pid_t pid, const char *cls)
{
	static char text[1 << 16];
	char key[32], *line;

	snprintf(key, sizeof(key), " %d ", pid);
	read_file("/proc/locks", text, sizeof(text));
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "->") && strstr(line, cls) && strstr(line, key))
			return true;
	return false;
}

static void wait_until_waiting(pid_t pid, const char *cls)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };

	for (int i = 0; i < WAIT_SECONDS * 100; i++) {
		if (is_waiting(pid, cls))
			return;
		nanosleep(&pause, NULL);
	}
	test_fail("task %d does not wait for a %s lock", pid, cls);
}

static void release_and_expect(int fd, bool posix, char want)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
	char got;

	if (posix ? fcntl(fd, F_SETLK, &fl) : flock(fd, LOCK_UN))
		test_fail_errno("unlock");
	read_exact(report[0], &got, 1, "a waiter's report");
	if (got != want)
		test_fail("waiter '%c' got its lock, expected '%c'", got, want);
}

static void expect_exit_0(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("waiter %d did not exit 0 (wait status %#x)", pid, status);
}

int main(int argc, char **argv)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	pid_t posix_pid, flock_pid;
	char byte;

	test_init(argc, argv);
	open_fd_at(POSIX_PATH, O_RDWR | O_CREAT, POSIX_FD);
	open_fd_at(FLOCK_PATH, O_RDWR | O_CREAT, FLOCK_FD);
	if (fcntl(POSIX_FD, F_SETLK, &fl) || flock(FLOCK_FD, LOCK_EX | LOCK_NB))
		test_fail_errno("lock");
	if (pipe(report))
		test_fail_errno("pipe");
	posix_pid = test_fork(posix_waiter);
	flock_pid = test_fork(flock_waiter);
	wait_until_waiting(posix_pid, "POSIX");
	wait_until_waiting(flock_pid, "FLOCK");
	test_ready();
	test_wait_sigterm();

	wait_until_waiting(posix_pid, "POSIX");
	wait_until_waiting(flock_pid, "FLOCK");
	if (fcntl(report[0], F_SETFL, O_NONBLOCK) || read(report[0], &byte, 1) != -1)
		test_fail("a waiter got its lock while the parent held it");
	if (fcntl(report[0], F_SETFL, 0))
		test_fail_errno("F_SETFL");
	release_and_expect(POSIX_FD, true, 'P');
	release_and_expect(FLOCK_FD, false, 'F');
	expect_exit_0(posix_pid);
	expect_exit_0(flock_pid);
	test_pass();
}
