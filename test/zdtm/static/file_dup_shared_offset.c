/*
 * Two fds sharing one open file description (dup) still share it: one offset and one
 * set of status flags; a separately opened fd of the same file keeps its own offset.
 */
#include <fcntl.h>
#include <unistd.h>

#include "zdtmtst.h"

#define ORIG_FD 50
#define DUP_FD 51
#define OWN_FD 52

int main(int argc, char **argv)
{
	static unsigned char data[8192];
	int fd;

	test_init(argc, argv);

	pattern_fill(data, sizeof(data), 130);
	write_file("shared-offset.data", data, sizeof(data));
	fd = open("shared-offset.data", O_RDWR);
	if (fd < 0 || dup2(fd, ORIG_FD) != ORIG_FD || dup2(ORIG_FD, DUP_FD) != DUP_FD)
		test_fail_errno("open and dup");
	close(fd);
	fd = open("shared-offset.data", O_RDONLY);
	if (fd < 0 || dup2(fd, OWN_FD) != OWN_FD)
		test_fail_errno("open own fd");
	close(fd);
	if (lseek(ORIG_FD, 100, SEEK_SET) != 100 || lseek(OWN_FD, 50, SEEK_SET) != 50)
		test_fail_errno("lseek");

	test_ready();
	test_wait_sigterm();

	if (lseek(DUP_FD, 0, SEEK_CUR) != 100 || lseek(OWN_FD, 0, SEEK_CUR) != 50)
		test_fail("offsets %ld and %ld, expected 100 and 50", (long)lseek(DUP_FD, 0, SEEK_CUR),
			  (long)lseek(OWN_FD, 0, SEEK_CUR));
	if (lseek(ORIG_FD, 200, SEEK_SET) != 200)
		test_fail_errno("lseek");
	if (lseek(DUP_FD, 0, SEEK_CUR) != 200)
		test_fail("the dup'ed fd no longer shares the offset: %ld",
			  (long)lseek(DUP_FD, 0, SEEK_CUR));
	if (lseek(OWN_FD, 0, SEEK_CUR) != 50)
		test_fail("the separate fd follows the shared offset");
	if (fcntl(ORIG_FD, F_SETFL, O_APPEND) || !(fcntl(DUP_FD, F_GETFL) & O_APPEND))
		test_fail("the dup'ed fd does not share status flags");
	if (fcntl(OWN_FD, F_GETFL) & O_APPEND)
		test_fail("the separate fd shares status flags");
	test_pass();
}
