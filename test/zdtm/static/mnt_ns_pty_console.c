/*
 * A container's console: the root (init of its own pid and mount namespaces, pivoted into
 * a root of bind mounts) mounts a devpts instance at /dev/pts, opens a pty in it and binds
 * the pty's slave node onto /dev/console, as a container runtime does. After restore: the
 * mounts the same (the bind's root is the pty's index), the master's fd on the same pty,
 * and /dev/console, opened again, is that pty's slave: bytes written to the master are
 * read from it, and the other way round.
 * With $ZDTM_PTY_CONSOLE_SHARED, /dev is shared: criu, which binds the pty after the tree
 * is built, refuses to restore it (the bind would propagate where the dumped one did not).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STAGE2 "--in-root"

static void must(int ret, const char *what)
{
	if (ret)
		test_fail_errno(what);
}

/* One line through the pty from the fd from to the fd to, byte for byte. */
static void expect_passes(int from, int to, const char *line, const char *what)
{
	char buf[64];
	ssize_t len = strlen(line), got;

	if (write(from, line, len) != len)
		test_fail_errno(what);
	got = read(to, buf, sizeof(buf));
	if (got != len || memcmp(buf, line, len))
		test_fail("%s: read %zd bytes, not the %zd written", what, got, len);
}

int main(int argc, char **argv)
{
	static char before[8192], after[8192];
	char slave[32];
	int fd, master, console;
	unsigned int index, index_after;
	struct termios tio;

	test_init(argc, argv);
	test_mnt_ns_start(argc, argv, "usr\0out\0bin\0proc\0dev\0", STAGE2);

	must(mount("devs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=64k"), "tmpfs /dev");
	if (getenv("ZDTM_PTY_CONSOLE_SHARED"))
		must(mount(NULL, "/dev", NULL, MS_SHARED, NULL), "make /dev shared");
	must(mkdir("/dev/pts", 0755), "mkdir /dev/pts");
	must(mount("pts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=620,ptmxmode=666"),
	     "devpts");
	master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY);
	if (master < 0 || ioctl(master, TIOCGPTN, &index) || unlockpt(master))
		test_fail_errno("open a pty");
	snprintf(slave, sizeof(slave), "/dev/pts/%u", index);
	fd = open("/dev/console", O_CREAT | O_RDONLY, 0600);
	if (fd < 0 || close(fd))
		test_fail_errno("make /dev/console");
	must(mount(slave, "/dev/console", NULL, MS_BIND, NULL), "bind the pty at /dev/console");
	test_mount_table("/proc/self/mountinfo", before, sizeof(before));
	test_ready();
	test_wait_sigterm();

	test_mount_table("/proc/self/mountinfo", after, sizeof(after));
	if (strcmp(before, after))
		test_fail("mounts before the dump:\n%safter the restore:\n%s", before, after);
	if (ioctl(master, TIOCGPTN, &index_after) || index_after != index)
		test_fail("the master is of pty %u, not %u", index_after, index);
	console = open("/dev/console", O_RDWR | O_NOCTTY);
	if (console < 0 || tcgetattr(console, &tio))
		test_fail_errno("open /dev/console");
	/* Raw: the bytes pass as they are, without waiting for a line's end. */
	cfmakeraw(&tio);
	if (tcsetattr(console, TCSANOW, &tio))
		test_fail_errno("make /dev/console raw");
	expect_passes(master, console, "to the console", "master to /dev/console");
	expect_passes(console, master, "from the console", "/dev/console to the master");
	test_pass();
}
