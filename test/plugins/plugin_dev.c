/*
 * Test program for the testdev plugin, run by test/zdtm.py like a zdtm test: holds
 * TESTDEV_PATH (read-only, non-blocking) at fd TESTDEV_FD and spins without system calls until the plugin's
 * RESUME_DEVICES_LATE sets its flag. If the flag was written before the task was
 * released, the loop ran at most one more iteration than when it was dumped.
 * Usage: plugin_dev PIDFILE. Writes "PID FLAG ITERS EXPECTED" (addresses) to
 * PIDFILE.addrs for the plugin, then PIDFILE; after SIGTERM prints PASS or FAIL: why.
 * $TESTDEV_EXPECT_FLAG=0: the task is never restored (a failed dump), so no flag comes.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "testdev.h"

#define TESTDEV_FD 10

static volatile uint64_t flag, iters, expected;
static volatile sig_atomic_t terminated;

static void on_sigterm(int sig)
{
	(void)sig;
	terminated = 1;
}

static int write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	/* Renamed into place: the runner and the plugin never read a half-written file. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	return rename(tmp, path);
}

static const char *check_fd(void)
{
	struct stat st;

	int flags = fcntl(TESTDEV_FD, F_GETFL);

	if (fstat(TESTDEV_FD, &st) || !S_ISCHR(st.st_mode) ||
	    st.st_rdev != makedev(TESTDEV_MAJOR, TESTDEV_MINOR))
		return "FAIL: fd 10 is not " TESTDEV_PATH "\n";
	if (flags < 0 || (flags & O_ACCMODE) != O_RDONLY || !(flags & O_NONBLOCK))
		return "FAIL: fd 10 lost its O_RDONLY | O_NONBLOCK flags\n";
	return "PASS\n";
}

/* Right after the loop, while iters is what the restore left. */
static const char *check_after_flag(void)
{
	static char why[256];

	if (expected == 0 || (iters != expected && iters != expected + 1)) {
		snprintf(why, sizeof(why),
			 "FAIL: %" PRIu64 " iterations after restore (dumped at %" PRIu64
			 "): the flag was written after the task ran\n",
			 iters, expected);
		return why;
	}
	return check_fd();
}

static const char *check_without_flag(bool flag_expected)
{
	if (flag_expected)
		return "FAIL: SIGTERM came, but RESUME_DEVICES_LATE never set the flag\n";
	if (iters < 2)
		return "FAIL: the loop never ran\n";
	return check_fd();
}

int main(int argc, char **argv)
{
	const char *expect_env = getenv("TESTDEV_EXPECT_FLAG");
	bool flag_expected = !expect_env || strcmp(expect_env, "0");
	struct sigaction sa = { .sa_handler = on_sigterm };
	char text[256], addrs_path[4096];
	const char *verdict;
	sigset_t term, old;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PIDFILE\n", argv[0]);
		return 2;
	}
	fd = open(TESTDEV_PATH, O_RDONLY | O_NONBLOCK);
	if (fd < 0 || dup2(fd, TESTDEV_FD) != TESTDEV_FD || sigaction(SIGTERM, &sa, NULL)) {
		perror("setup");
		return 1;
	}
	close(fd);
	/* iters starts at 1 so a plugin that never wrote "expected" (0) is caught. */
	iters = 1;
	snprintf(addrs_path, sizeof(addrs_path), "%s.addrs", argv[1]);
	snprintf(text, sizeof(text), "%d %" PRIxPTR " %" PRIxPTR " %" PRIxPTR "\n", getpid(),
		 (uintptr_t)&flag, (uintptr_t)&iters, (uintptr_t)&expected);
	if (write_file(addrs_path, text)) {
		perror(addrs_path);
		return 1;
	}
	snprintf(text, sizeof(text), "%d\n", getpid());
	if (write_file(argv[1], text)) {
		perror(argv[1]);
		return 1;
	}

	while (flag != TESTDEV_MAGIC && !terminated)
		iters++;

	verdict = flag == TESTDEV_MAGIC ? check_after_flag() : check_without_flag(flag_expected);
	/* Wait for the runner's SIGTERM without missing it between the test and the wait. */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, &old);
	while (!terminated)
		sigsuspend(&old);
	fputs(verdict, stdout);
	return strcmp(verdict, "PASS\n") ? 1 : 0;
}
