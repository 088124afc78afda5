/*
 * The umask survives: umask() returns the value set before dump, and a new file gets
 * its mode masked by it.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define TEST_UMASK 0247

int main(int argc, char **argv)
{
	mode_t after;
	struct stat st;
	int fd;

	test_init(argc, argv);

	umask(TEST_UMASK);

	test_ready();
	test_wait_sigterm();

	after = umask(TEST_UMASK);
	if (after != TEST_UMASK)
		test_fail("umask %#o, expected %#o", after, TEST_UMASK);
	fd = open("umask.probe", O_WRONLY | O_CREAT | O_EXCL, 0777);
	if (fd < 0 || fstat(fd, &st))
		test_fail_errno("create umask.probe");
	if ((st.st_mode & 0777) != (0777 & ~TEST_UMASK))
		test_fail("new file mode %#o, expected %#o", st.st_mode & 0777, 0777 & ~TEST_UMASK);
	test_pass();
}
