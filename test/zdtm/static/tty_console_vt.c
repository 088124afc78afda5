/*
 * The system's terminals held by path, without --shell-job: /dev/console and a virtual
 * console, each through a device node of the test's own. After restore each fd is open
 * at the same node, on the same device, with its flags, and the virtual console keeps
 * the modes the test gave it (set back to what they were at the end).
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CONSOLE_FD 40
#define VT_FD 41
#define VT_MINOR 63 /* the last virtual console: no one logs in there */

static struct termios vt_modes_before;

static void open_node(const char *name, dev_t rdev, int flags, int at)
{
	int fd;

	if (mknod(name, S_IFCHR | 0600, rdev))
		test_fail_errno("mknod");
	fd = open(name, flags | O_NOCTTY);
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("open the node");
	close(fd);
}

static void expect_node(int fd, const char *name, dev_t rdev, int flags)
{
	char link[64], path[512];
	struct stat st;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	path[n < 0 ? 0 : n] = '\0';
	if (n < 0 || strlen(path) <= strlen(name) || path[strlen(path) - strlen(name) - 1] != '/' ||
	    strcmp(path + strlen(path) - strlen(name), name))
		test_fail("fd %d is at '%s', not at the node %s", fd, path, name);
	if (fstat(fd, &st) || st.st_rdev != rdev)
		test_fail("fd %d: device %u:%u, expected %u:%u", fd, major(st.st_rdev),
			  minor(st.st_rdev), major(rdev), minor(rdev));
	if ((fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK | O_APPEND)) != flags)
		test_fail("fd %d: flags %#o, expected %#o", fd, fcntl(fd, F_GETFL), flags);
}

int main(int argc, char **argv)
{
	struct termios modes, after;

	test_init(argc, argv);
	open_node("console", makedev(5, 1), O_WRONLY | O_APPEND, CONSOLE_FD);
	open_node("vt", makedev(4, VT_MINOR), O_RDWR | O_NONBLOCK, VT_FD);
	if (tcgetattr(VT_FD, &vt_modes_before))
		test_fail_errno("tcgetattr");
	modes = vt_modes_before;
	modes.c_lflag ^= ECHO | ICANON;
	modes.c_cc[VINTR] = 0x07;
	if (tcsetattr(VT_FD, TCSANOW, &modes))
		test_fail_errno("tcsetattr");

	test_ready();
	test_wait_sigterm();

	expect_node(CONSOLE_FD, "console", makedev(5, 1), O_WRONLY | O_APPEND);
	expect_node(VT_FD, "vt", makedev(4, VT_MINOR), O_RDWR | O_NONBLOCK);
	if (tcgetattr(VT_FD, &after))
		test_fail_errno("tcgetattr after restore");
	tcsetattr(VT_FD, TCSANOW, &vt_modes_before);
	if (after.c_lflag != modes.c_lflag || after.c_cc[VINTR] != 0x07)
		test_fail("the virtual console's modes: lflag %#x (expected %#x), VINTR %#x",
			  after.c_lflag, modes.c_lflag, after.c_cc[VINTR]);
	test_pass();
}
