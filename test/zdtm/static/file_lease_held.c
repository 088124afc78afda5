/*
 * A read lease (F_SETLEASE) on a file open read-only: the dump refuses it, naming the
 * lease, and leaves it as it was (nothing opened the file for writing, which would have
 * started breaking it).
 */
#include <unistd.h>

#include "zdtmtst.h"

#define LEASE_FD 40
#define LEASE_PATH "lease.data"

int main(int argc, char **argv)
{
	int fd, lease;

	test_init(argc, argv);
	write_file(LEASE_PATH, "lease", 5);
	fd = open(LEASE_PATH, O_RDONLY);
	if (fd < 0 || dup2(fd, LEASE_FD) != LEASE_FD)
		test_fail_errno("open");
	close(fd);
	if (fcntl(LEASE_FD, F_SETLEASE, F_RDLCK))
		test_fail_errno("F_SETLEASE");
	test_ready();
	test_wait_sigterm();

	lease = fcntl(LEASE_FD, F_GETLEASE);
	if (lease != F_RDLCK)
		test_fail("F_GETLEASE is %d, expected F_RDLCK (%d)", lease, F_RDLCK);
	test_pass();
}
