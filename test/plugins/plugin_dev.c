/*
 * Test program for the testdev plugin: holds /dev/full at fd TESTDEV_FD and spins
 * without system calls until the plugin's RESUME_DEVICES_LATE sets its flag. If the
 * flag was written before the task was released, the loop ran at most one more
 * iteration than when it was dumped. Writes "PASS" or "FAIL: why" to RESULT_FILE.
 * Usage: plugin_dev ADDRS_FILE RESULT_FILE
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "testdev.h"

#define TESTDEV_FD 10

static volatile uint64_t flag, iters, expected;

static int write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	/* Renamed into place: the runner never reads a half-written file. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	return rename(tmp, path);
}

static const char *check_state(void)
{
	static char why[256];
	struct stat st;

	if (expected == 0 || (iters != expected && iters != expected + 1)) {
		snprintf(why, sizeof(why),
			 "FAIL: %" PRIu64 " iterations after restore (dumped at %" PRIu64
			 "): the flag was written after the task ran\n",
			 iters, expected);
		return why;
	}
	if (fstat(TESTDEV_FD, &st) || !S_ISCHR(st.st_mode) ||
	    st.st_rdev != makedev(TESTDEV_MAJOR, TESTDEV_MINOR))
		return "FAIL: fd 10 is not /dev/full after restore\n";
	if (write(TESTDEV_FD, "x", 1) != -1)
		return "FAIL: a write to /dev/full succeeded\n";
	return "PASS\n";
}

int main(int argc, char **argv)
{
	char addrs[256];
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: %s ADDRS_FILE RESULT_FILE\n", argv[0]);
		return 2;
	}
	fd = open("/dev/full", O_RDWR);
	if (fd < 0 || dup2(fd, TESTDEV_FD) != TESTDEV_FD) {
		perror("/dev/full");
		return 1;
	}
	close(fd);
	/* iters starts at 1 so a plugin that never wrote "expected" (0) is caught. */
	iters = 1;
	snprintf(addrs, sizeof(addrs), "%d %" PRIxPTR " %" PRIxPTR " %" PRIxPTR "\n", getpid(), (uintptr_t)&flag,
		 (uintptr_t)&iters, (uintptr_t)&expected);
	if (write_file(argv[1], addrs)) {
		perror(argv[1]);
		return 1;
	}

	while (flag != TESTDEV_MAGIC)
		iters++;

	return write_file(argv[2], check_state()) ? 1 : 0;
}
