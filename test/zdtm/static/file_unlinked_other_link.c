/*
 * A file open under a name that was removed while another name remains (--link-remap):
 * after restore the fd is the same inode as the other name, with its contents, offset
 * and link text "... (deleted)", and dump's link_remap.* name is gone again. With
 * $ZDTM_REMOVED_DIR, the removed name was in a directory removed too, which stays so.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define DATA_SIZE (64 * 1024 + 5)
#define OFFSET 777

/* Nothing of criu's may be left in the test's directory. */
static void expect_no_link_remap(void)
{
	DIR *dir = opendir(".");
	struct dirent *de;

	if (!dir)
		test_fail_errno("opendir");
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, "link_remap.", 11))
			test_fail("%s is left in the directory", de->d_name);
	closedir(dir);
}

int main(int argc, char **argv)
{
	static unsigned char data[DATA_SIZE];
	char link_before[PATH_MAX], link_after[PATH_MAX];
	bool in_dir = getenv("ZDTM_REMOVED_DIR");
	const char *name = in_dir ? "gone/removed.data" : "removed.data";
	struct stat st, other;
	int fd;

	test_init(argc, argv);

	pattern_fill(data, DATA_SIZE, 77);
	if (in_dir && mkdir("gone", 0700))
		test_fail_errno("mkdir gone");
	fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || link(name, "other.data"))
		test_fail_errno("create removed.data and its second name");
	if (unlink(name) || (in_dir && rmdir("gone")) || write(fd, data, DATA_SIZE) != DATA_SIZE ||
	    lseek(fd, OFFSET, SEEK_SET) != OFFSET)
		test_fail_errno("unlink and write");
	fd_link(fd, link_before, sizeof(link_before));

	test_ready();
	test_wait_sigterm();

	fd_link(fd, link_after, sizeof(link_after));
	if (strcmp(link_before, link_after))
		test_fail("link '%s' -> '%s'", link_before, link_after);
	if (fstat(fd, &st) || stat("other.data", &other))
		test_fail_errno("stat");
	if (st.st_dev != other.st_dev || st.st_ino != other.st_ino || st.st_nlink != 1)
		test_fail("fd is inode %lu (%lu links), other.data %lu", (unsigned long)st.st_ino,
			  (unsigned long)st.st_nlink, (unsigned long)other.st_ino);
	if (lseek(fd, 0, SEEK_CUR) != OFFSET)
		test_fail("offset %ld, expected %d", (long)lseek(fd, 0, SEEK_CUR), OFFSET);
	memset(data, 0, DATA_SIZE);
	if (pread(fd, data, DATA_SIZE, 0) != DATA_SIZE)
		test_fail_errno("read");
	pattern_expect(data, DATA_SIZE, 77, "contents");
	if (access(name, F_OK) == 0 || (in_dir && access("gone", F_OK) == 0))
		test_fail("the removed name (or its directory) is back");
	expect_no_link_remap();
	test_pass();
}
