/*
 * Stdio on a terminal survives a --shell-job dump and restore: fds 0-2 are still that
 * terminal (same tty name and rdev, read-write), its termios are unchanged, the
 * session and process group are the same, and output still reaches the terminal (the
 * runner reads this verdict from the pty master).
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

struct tty_snapshot {
	char name[PATH_MAX];
	dev_t rdev[3];
	int status_flags[3];
	struct termios termios;
	pid_t sid, pgrp;
};

static struct tty_snapshot before, after;

static void snapshot(struct tty_snapshot *snap)
{
	struct stat st;

	if (ttyname_r(0, snap->name, sizeof(snap->name)))
		test_fail("stdin is not a terminal");
	for (int fd = 0; fd < 3; fd++) {
		if (!isatty(fd) || fstat(fd, &st))
			test_fail("fd %d is not a terminal", fd);
		snap->rdev[fd] = st.st_rdev;
		snap->status_flags[fd] = fcntl(fd, F_GETFL);
	}
	if (tcgetattr(0, &snap->termios))
		test_fail_errno("tcgetattr");
	snap->sid = getsid(0);
	snap->pgrp = getpgrp();
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	snapshot(&before);

	test_ready();
	test_wait_sigterm();

	snapshot(&after);
	if (strcmp(before.name, after.name))
		test_fail("terminal '%s' -> '%s'", before.name, after.name);
	for (int fd = 0; fd < 3; fd++)
		if (before.rdev[fd] != after.rdev[fd] ||
		    before.status_flags[fd] != after.status_flags[fd])
			test_fail("fd %d: rdev %#lx flags %#o -> %#lx %#o", fd,
				  (unsigned long)before.rdev[fd], before.status_flags[fd],
				  (unsigned long)after.rdev[fd], after.status_flags[fd]);
	if (memcmp(&before.termios, &after.termios, sizeof(before.termios)))
		test_fail("termios changed");
	if (before.sid != after.sid || before.pgrp != after.pgrp)
		test_fail("session %d pgrp %d -> %d %d", before.sid, before.pgrp, after.sid,
			  after.pgrp);
	test_pass();
}
