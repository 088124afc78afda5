/*
 * A big private buffer restored lazily is word for word what was dumped: read at once
 * after the restore (racing the lazy-pages daemon's background copy), and again at the
 * end. Neither the userfaultfd nor the daemon's socket is left in the fd table.
 * ZDTM_LAZY_MIB sets its size (default 256 MiB).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdtmtst.h"

/* The test's own fds are stdio: anything else came from the restore. */
static void expect_stdio_only(void)
{
	char path[64], target[256];
	struct dirent *de;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		test_fail_errno("opendir /proc/self/fd");
	while ((de = readdir(dir))) {
		int fd = atoi(de->d_name);
		ssize_t len;

		if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(dir))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		test_fail("fd %d (%s) is left in the restored task", fd, target);
	}
	closedir(dir);
}

int main(int argc, char **argv)
{
	const char *mib = getenv("ZDTM_LAZY_MIB");
	size_t size = (mib ? strtoul(mib, NULL, 10) : 256) << 20;
	unsigned char *buf;

	test_init(argc, argv);
	buf = test_map_pattern(size, 7);

	test_ready();
	if (test_wait_lazy_restore(buf + size - 1))
		pattern_expect(buf, size, 7, "buffer read while its pages came in");
	test_wait_sigterm();
	expect_stdio_only();
	pattern_expect(buf, size, 7, "buffer");
	test_pass();
}
