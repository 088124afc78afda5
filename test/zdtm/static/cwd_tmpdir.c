/*
 * The working directory survives: after chdir into a fresh directory, getcwd() and the
 * directory's device/inode are unchanged, and relative paths resolve there.
 */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	char cwd_before[PATH_MAX], cwd_after[PATH_MAX], marker[16];
	struct stat dir_before, dir_after;

	test_init(argc, argv);

	if (mkdir("cwd.dir", 0700) || chdir("cwd.dir"))
		test_fail_errno("enter cwd.dir");
	write_file("marker", "cwd-marker", 10);
	if (!getcwd(cwd_before, sizeof(cwd_before)) || stat(".", &dir_before))
		test_fail_errno("getcwd");

	test_ready();
	test_wait_sigterm();

	if (!getcwd(cwd_after, sizeof(cwd_after)) || stat(".", &dir_after))
		test_fail_errno("getcwd");
	if (strcmp(cwd_before, cwd_after))
		test_fail("cwd '%s' -> '%s'", cwd_before, cwd_after);
	if (dir_before.st_dev != dir_after.st_dev || dir_before.st_ino != dir_after.st_ino)
		test_fail("cwd is another directory with the same name");
	read_file("marker", marker, sizeof(marker));
	if (strcmp(marker, "cwd-marker"))
		test_fail("relative path reads '%s'", marker);
	test_pass();
}
