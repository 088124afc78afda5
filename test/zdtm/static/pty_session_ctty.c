/*
 * A terminal multiplexer: the root holds a pty's master; its child leads a session whose
 * controlling terminal is the slave, on the child's stdin, stdout and stderr; a grandchild
 * is the terminal's foreground group, blocked reading it; both share an opening of
 * /dev/tty, the leader's. After restore each checks itself (/proc/self/stat's tty_nr is
 * the slave, the session, tcgetpgrp()), the root sees the same session and group through
 * the master, and what the root writes to the master reaches the grandchild, whose answer
 * comes back through it, written to /dev/tty.
 *
 * ZDTM_PTY_LEADER_CTTY_ONLY=1 (restored by upstream criu, which gives the terminal back to
 * the leader after it forked the others): the grandchild checks only its session.
 * ZDTM_PTY_NO_DEV_TTY=1 (dumped by upstream criu, which refuses a /dev/tty held by
 * another task than the master's: "ctty inheritance"): no /dev/tty, the answer goes to
 * stdout.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

/* Where the session leader and its child keep their opening of /dev/tty. */
#define CURRENT_TTY_FD 10

/* This task's controlling terminal, as the kernel's stat encodes it (0: none). */
static unsigned int stat_tty_nr(void)
{
	char buf[1024], *p;
	unsigned int tty_nr;

	read_file("/proc/self/stat", buf, sizeof(buf));
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %u", &tty_nr) != 1)
		test_fail("cannot parse /proc/self/stat");
	return tty_nr;
}

/*
 * In session sid, stdin its controlling terminal with foreground group fg; only the first
 * when not own_ctty.
 */
static const char *check_terminal(pid_t sid, pid_t fg, bool own_ctty)
{
	static char why[128];
	struct stat st;

	if (getsid(0) != sid)
		snprintf(why, sizeof(why), "session %d, want %d", getsid(0), sid);
	else if (!own_ctty)
		return NULL;
	else if (fstat(0, &st) || stat_tty_nr() != (unsigned int)st.st_rdev)
		snprintf(why, sizeof(why), "tty_nr %#x is not stdin's %#lx", stat_tty_nr(),
			 (unsigned long)st.st_rdev);
	else if (tcgetsid(0) != sid || tcgetpgrp(0) != fg)
		snprintf(why, sizeof(why), "the terminal's session %d, foreground %d; want %d, %d",
			 tcgetsid(0), tcgetpgrp(0), sid, fg);
	else
		return NULL;
	return why;
}

/* The foreground group: blocked reading the terminal; answers "pong" if all is right. */
static void grandchild(pid_t sid)
{
	const char *why;
	char buf[16];
	ssize_t n;

	/* Read only once in the foreground: a background read would stop us (SIGTTIN). */
	while (tcgetpgrp(0) != getpgrp())
		usleep(1000);
	test_barrier_done();
	n = read(0, buf, sizeof(buf));
	why = check_terminal(sid, getpgrp(), !getenv("ZDTM_PTY_LEADER_CTTY_ONLY"));
	if (!why && (n != 5 || memcmp(buf, "ping\n", 5)))
		why = "read something else than ping";
	if (why)
		dprintf(1, "FAIL: grandchild: %s\n", why);
	else
		dprintf(getenv("ZDTM_PTY_NO_DEV_TTY") ? 1 : CURRENT_TTY_FD, "pong\n");
	exit(why ? 1 : 0);
}

/* The session leader: the slave is its controlling terminal and its stdio. */
static void child(const char *slave_path, int master)
{
	const char *why;
	pid_t gc;
	int fd, status;

	close(master);
	if (setsid() < 0)
		test_fail_errno("setsid");
	fd = open(slave_path, O_RDWR); /* a session leader's first terminal: it controls */
	if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		test_fail_errno("the slave as stdio");
	close(fd);
	fd = getenv("ZDTM_PTY_NO_DEV_TTY") ? -1 : open("/dev/tty", O_RDWR);
	if (!getenv("ZDTM_PTY_NO_DEV_TTY") && (fd < 0 || dup2(fd, CURRENT_TTY_FD) < 0))
		test_fail_errno("open /dev/tty");
	if (fd >= 0)
		close(fd);
	gc = fork();
	if (gc < 0)
		test_fail_errno("fork");
	if (gc == 0) {
		setpgid(0, 0);
		grandchild(getsid(0));
	}
	if (setpgid(gc, gc) || tcsetpgrp(0, gc))
		test_fail_errno("a foreground group");
	test_barrier_done();
	test_wait_sigterm();

	why = check_terminal(getpid(), gc, true);
	if (waitpid(gc, &status, 0) != gc || !WIFEXITED(status) || WEXITSTATUS(status))
		why = why ? why : "the grandchild failed";
	/* On the terminal; the root judges by the exit status. */
	if (why)
		dprintf(2, "FAIL: child: %s\n", why);
	exit(why ? 1 : 0);
}

/* Everything the master gives until want is in it (the answer comes through the pty). */
static void expect_from_master(int master, const char *want)
{
	char buf[512];
	size_t len = 0;

	while (len < sizeof(buf) - 1) {
		struct pollfd pfd = { .fd = master, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 10000) != 1)
			break;
		n = read(master, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += n;
		buf[len] = '\0';
		if (strstr(buf, want))
			return;
	}
	buf[len] = '\0';
	test_fail("the master gave \"%s\", without \"%s\"", buf, want);
}

int main(int argc, char **argv)
{
	char slave_path[PATH_MAX];
	pid_t pid, sid = 0, pgrp = 0, fg;
	int master;

	test_init(argc, argv);
	master = pty_open_master(0, slave_path, sizeof(slave_path));
	test_barrier_init();
	pid = fork();
	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0)
		child(slave_path, master);
	test_barrier_wait();
	if (ioctl(master, TIOCGPGRP, &fg))
		test_fail_errno("TIOCGPGRP");

	test_ready();
	test_wait_sigterm();

	if (ioctl(master, TIOCGSID, &sid) || ioctl(master, TIOCGPGRP, &pgrp) || sid != pid ||
	    pgrp != fg)
		test_fail("through the master: session %d, foreground %d; want %d, %d", sid, pgrp,
			  pid, fg);
	if (write(master, "ping\n", 5) != 5)
		test_fail_errno("write to the master");
	expect_from_master(master, "pong\r\n");
	test_children_verdict(&pid, 1, "the session leader");
	test_pass();
}
