/*
 * A deleted but still open file survives: same fd, contents, size and offset, still
 * unlinked (st_nlink 0), and its /proc/self/fd link still ends with " (deleted)".
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define DATA_SIZE (100 * 1024 + 17)
#define OFFSET 4321

int main(int argc, char **argv)
{
	static unsigned char data[DATA_SIZE];
	char path_before[PATH_MAX], path_after[PATH_MAX];
	const char *suffix = " (deleted)";
	struct stat st;
	int fd;

	test_init(argc, argv);

	pattern_fill(data, DATA_SIZE, 120);
	fd = open("ghost.data", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, data, DATA_SIZE) != DATA_SIZE)
		test_fail_errno("create ghost.data");
	if (unlink("ghost.data") || lseek(fd, OFFSET, SEEK_SET) != OFFSET)
		test_fail_errno("unlink");
	fd_link(fd, path_before, sizeof(path_before));

	test_ready();
	test_wait_sigterm();

	fd_link(fd, path_after, sizeof(path_after));
	if (strcmp(path_before, path_after))
		test_fail("link '%s' -> '%s'", path_before, path_after);
	if (strlen(path_after) < strlen(suffix) ||
	    strcmp(path_after + strlen(path_after) - strlen(suffix), suffix))
		test_fail("link '%s' does not end with '%s'", path_after, suffix);
	if (fstat(fd, &st))
		test_fail_errno("fstat");
	if (st.st_nlink != 0 || st.st_size != DATA_SIZE)
		test_fail("nlink %lu size %ld, expected 0 and %d", (unsigned long)st.st_nlink,
			  (long)st.st_size, DATA_SIZE);
	if (lseek(fd, 0, SEEK_CUR) != OFFSET)
		test_fail("offset %ld, expected %d", (long)lseek(fd, 0, SEEK_CUR), OFFSET);
	memset(data, 0, DATA_SIZE);
	if (pread(fd, data, DATA_SIZE, 0) != DATA_SIZE)
		test_fail_errno("read");
	pattern_expect(data, DATA_SIZE, 120, "deleted file contents");
	if (access("ghost.data", F_OK) == 0)
		test_fail("the deleted file is back in the directory");
	test_pass();
}
