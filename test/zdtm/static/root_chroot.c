/*
 * The root directory survives: after chroot into a directory holding a marker file,
 * "/" is still that directory (same device/inode, the marker at /marker) and the cwd
 * inside it is kept.
 */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	struct stat root_before, root_after;
	char marker[16], cwd[PATH_MAX];

	test_init(argc, argv);

	if (mkdir("newroot", 0755) || mkdir("newroot/sub", 0755))
		test_fail_errno("mkdir newroot");
	write_file("newroot/marker", "root-marker", 11);
	if (chroot("newroot") || chdir("/sub") || stat("/", &root_before))
		test_fail_errno("chroot");

	test_ready();
	test_wait_sigterm();

	if (stat("/", &root_after))
		test_fail_errno("stat /");
	if (root_before.st_dev != root_after.st_dev || root_before.st_ino != root_after.st_ino)
		test_fail("/ is no longer the chroot directory");
	read_file("/marker", marker, sizeof(marker));
	if (strcmp(marker, "root-marker"))
		test_fail("/marker reads '%s'", marker);
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/sub"))
		test_fail("cwd inside the chroot is '%s', expected /sub", cwd);
	test_pass();
}
