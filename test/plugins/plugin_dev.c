/*
 * Test program for the testdev plugin, run by test/zdtm.py like a zdtm test: holds
 * TESTDEV_PATH (read-only, non-blocking) at fd TESTDEV_FD and spins without system calls until the plugin's
 * RESUME_DEVICES_LATE sets its flag. If the flag was written before the task was
 * released, the loop ran at most one more iteration than when it was dumped.
 * Usage: plugin_dev PIDFILE. Writes "PID FLAG ITERS EXPECTED" (addresses) to
 * PIDFILE.addrs for the plugin, then PIDFILE; after SIGTERM prints PASS or FAIL: why.
 * $TESTDEV_EXPECT_FLAG=0: the task is never restored (a failed dump), so no flag comes.
 * It also maps two windows of a memfd MAP_SHARED (testdev.h) and checks, at the end, their
 * bytes, that they still share one object, and their /proc/self/maps perms and offsets.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "testdev.h"

#define TESTDEV_FD 10

#define PAGE 4096

static volatile uint64_t flag, iters, expected;
static unsigned char *window_a, *window_b; /* the memfd's windows (testdev.h) */
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

static int map_memfd_windows(void)
{
	unsigned char page[PAGE];
	int fd, p, i;

	fd = memfd_create(TESTDEV_VMA_NAME, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, TESTDEV_VMA_PAGES * PAGE))
		return -1;
	for (p = 0; p < TESTDEV_VMA_PAGES; p++) {
		for (i = 0; i < PAGE; i++)
			page[i] = TESTDEV_VMA_BYTE(p, i);
		if (pwrite(fd, page, PAGE, p * PAGE) != PAGE)
			return -1;
	}
	window_a = mmap(NULL, TESTDEV_VMA_A_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			TESTDEV_VMA_A_PAGE * PAGE);
	window_b = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, TESTDEV_VMA_B_PAGE * PAGE);
	/* Only the mappings hold the memfd now, like a device buffer mapped by a runtime. */
	close(fd);
	return window_a == MAP_FAILED || window_b == MAP_FAILED ? -1 : 0;
}

/* The maps line of the VMA at addr: perms and offset as mapped, the memfd's name. */
static const char *check_maps_line(const void *addr, const char *perms, unsigned long offset)
{
	unsigned long start, end, off;
	char line[512], line_perms[8], path[256];
	const char *why = "FAIL: a memfd window is missing from /proc/self/maps\n";
	FILE *maps = fopen("/proc/self/maps", "r");

	while (maps && fgets(line, sizeof(line), maps)) {
		path[0] = '\0';
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255[^\n]", &start, &end, line_perms, &off,
			   path) < 4 || start != (unsigned long)addr)
			continue;
		if (strcmp(line_perms, perms) || off != offset ||
		    strncmp(path, "/memfd:" TESTDEV_VMA_NAME, strlen("/memfd:" TESTDEV_VMA_NAME)))
			why = "FAIL: a memfd window's maps line lost its perms, offset or memfd\n";
		else
			why = NULL;
		break;
	}
	if (maps)
		fclose(maps);
	return why;
}

static const char *check_memfd_windows(void)
{
	const char *why;
	int p, i;

	for (p = 0; p < TESTDEV_VMA_A_PAGES; p++)
		for (i = 0; i < PAGE; i++)
			if (window_a[p * PAGE + i] != TESTDEV_VMA_BYTE(TESTDEV_VMA_A_PAGE + p, i))
				return "FAIL: window A of the memfd lost its bytes\n";
	for (i = 0; i < PAGE; i++)
		if (window_b[i] != TESTDEV_VMA_BYTE(TESTDEV_VMA_B_PAGE, i))
			return "FAIL: window B of the memfd lost its bytes\n";
	why = check_maps_line(window_a, "rw-s", TESTDEV_VMA_A_PAGE * PAGE);
	if (!why)
		why = check_maps_line(window_b, "r--s", TESTDEV_VMA_B_PAGE * PAGE);
	if (why)
		return why;
	/* A write through A lands in the object: B, the same page, sees it. */
	window_a[(TESTDEV_VMA_B_PAGE - TESTDEV_VMA_A_PAGE) * PAGE + 5] ^= 0xff;
	if (window_b[5] != (unsigned char)~TESTDEV_VMA_BYTE(TESTDEV_VMA_B_PAGE, 5))
		return "FAIL: a write through window A is not seen through window B\n";
	return NULL;
}

static const char *check_state(void)
{
	const char *why = check_memfd_windows();

	return why ? why : check_fd();
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
	return check_state();
}

static const char *check_without_flag(bool flag_expected)
{
	if (flag_expected)
		return "FAIL: SIGTERM came, but RESUME_DEVICES_LATE never set the flag\n";
	if (iters < 2)
		return "FAIL: the loop never ran\n";
	return check_state();
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
	if (map_memfd_windows()) {
		perror("memfd windows");
		return 1;
	}
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
