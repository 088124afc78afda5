/*
 * A device file opened by a path that a mount now covers with another node of the same
 * device, as a container's process holds the /dev/null it opened before its /dev was made:
 * dump needs --evasive-devices for it. After restore the fd is /dev/null's device (1:3),
 * writes go and reads end at once, and, with $ZDTM_EVASIVE_RESTORED, it is the node of the
 * covering tmpfs that the path names (the one restore opened). The tmpfs is unmounted at
 * the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "zdtmtst.h"

#define DEV_FD 60

static void make_null(const char *path)
{
	if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) || chmod(path, 0666))
		test_fail("mknod %s: %s", path, strerror(errno));
}

int main(int argc, char **argv)
{
	struct stat st, covering;
	char byte;
	int fd;

	test_init(argc, argv);
	if (mkdir("evasive", 0755))
		test_fail_errno("mkdir evasive");
	make_null("evasive/null");
	fd = open("evasive/null", O_RDWR);
	if (fd < 0 || dup2(fd, DEV_FD) != DEV_FD)
		test_fail_errno("open evasive/null");
	close(fd);
	if (mount("zdtm_evasive", "evasive", "tmpfs", 0, "size=16k"))
		test_fail_errno("mount a tmpfs over evasive");
	make_null("evasive/null");
	test_ready();
	test_wait_sigterm();

	if (fstat(DEV_FD, &st) || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))
		test_fail("fd %d is not a node of device 1:3 after restore", DEV_FD);
	if (write(DEV_FD, "x", 1) != 1 || read(DEV_FD, &byte, 1) != 0)
		test_fail("fd %d does not act as /dev/null: %s", DEV_FD, strerror(errno));
	if (stat("evasive/null", &covering))
		test_fail_errno("stat evasive/null");
	if (getenv("ZDTM_EVASIVE_RESTORED") &&
	    (st.st_dev != covering.st_dev || st.st_ino != covering.st_ino))
		test_fail("fd %d is not the node evasive/null names", DEV_FD);
	if (umount2("evasive", MNT_DETACH))
		test_fail_errno("umount evasive");
	test_pass();
}
