/*
 * A pty's master and slave in one process come back as the same pty: the slave's index
 * and path, raw mode with control characters of our own, locked termios bits, window
 * size, packet mode on the master, the pty locked (with its slave open), and the bytes
 * queued both ways, byte for byte (special characters included), in the queue they were
 * in. Then the pair still carries data both ways.
 *
 * ZDTM_PTY_PLAIN=1 (cross tests with upstream criu): no packet mode and no locked termios,
 * which upstream restores otherwise (it keeps the master's packet status byte with the
 * queued bytes, and sets the locked termios before the termios they lock).
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

/* The control characters the kernel keeps (glibc's struct has room for more). */
#define KERNEL_NCCS 19

/* Raw mode: every byte is kept as it is, specials and newlines too. */
static const char to_slave[] = "to the slave\x03\x1a\x7f\r\n\x04 end";
static const char to_master[] = "to the master\n\x11\x13\r";

struct pty_snapshot {
	unsigned int index;
	dev_t rdev;
	char slave_link[PATH_MAX];
	struct termios termios, locked;
	struct winsize ws;
	int packet, pty_locked;
};

static void snapshot(int master, int slave, struct pty_snapshot *s)
{
	struct stat st;

	if (ioctl(master, TIOCGPTN, &s->index) || fstat(slave, &st) ||
	    tcgetattr(slave, &s->termios) || ioctl(slave, TIOCGLCKTRMIOS, &s->locked) ||
	    ioctl(master, TIOCGWINSZ, &s->ws) || ioctl(master, TIOCGPKT, &s->packet) ||
	    ioctl(master, TIOCGPTLCK, &s->pty_locked))
		test_fail_errno("reading the pty's state");
	s->rdev = st.st_rdev;
	fd_link(slave, s->slave_link, sizeof(s->slave_link));
}

static bool plain;

static void set_up(int master, int slave)
{
	struct winsize ws = { .ws_row = 33, .ws_col = 101, .ws_xpixel = 640, .ws_ypixel = 480 };
	struct termios t, locked = { 0 };
	int on = 1;

	if (tcgetattr(slave, &t))
		test_fail_errno("tcgetattr");
	cfmakeraw(&t);
	t.c_cc[VMIN] = 3;
	t.c_cc[VTIME] = 7;
	t.c_cc[VINTR] = 0x01;
	t.c_cc[VEOF] = 0x02;
	t.c_cc[VSTART] = 0x05;
	t.c_iflag |= IUTF8;
	if (tcsetattr(slave, TCSANOW, &t))
		test_fail_errno("tcsetattr");
	/* Locked termios: IXON stays off, whatever a later tcsetattr asks. */
	locked.c_iflag = IXON;
	locked.c_cc[VMIN] = 0xff;
	if ((!plain && ioctl(slave, TIOCSLCKTRMIOS, &locked)) || ioctl(master, TIOCSWINSZ, &ws) ||
	    (!plain && ioctl(master, TIOCPKT, &on)))
		test_fail_errno("locked termios, window size or packet mode");
	if (write(master, to_slave, sizeof(to_slave) - 1) != sizeof(to_slave) - 1 ||
	    write(slave, to_master, sizeof(to_master) - 1) != sizeof(to_master) - 1)
		test_fail_errno("queueing bytes");
	/*
	 * Locked with its slave open: the open slave works, a new opening would not (nor is it
	 * tried: a refused opening marks the slave with an I/O error).
	 */
	if (ioctl(master, TIOCSPTLCK, &on))
		test_fail_errno("TIOCSPTLCK");
}

static void compare(const struct pty_snapshot *a, const struct pty_snapshot *b)
{
	if (a->index != b->index || a->rdev != b->rdev || strcmp(a->slave_link, b->slave_link))
		test_fail("pty %u (%#lx, %s) came back as %u (%#lx, %s)", a->index,
			  (unsigned long)a->rdev, a->slave_link, b->index, (unsigned long)b->rdev,
			  b->slave_link);
	if (a->termios.c_iflag != b->termios.c_iflag || a->termios.c_oflag != b->termios.c_oflag ||
	    a->termios.c_cflag != b->termios.c_cflag || a->termios.c_lflag != b->termios.c_lflag ||
	    memcmp(a->termios.c_cc, b->termios.c_cc, KERNEL_NCCS))
		test_fail("termios %#x %#x %#x %#x -> %#x %#x %#x %#x (or c_cc)",
			  a->termios.c_iflag, a->termios.c_oflag, a->termios.c_cflag,
			  a->termios.c_lflag, b->termios.c_iflag, b->termios.c_oflag,
			  b->termios.c_cflag, b->termios.c_lflag);
	if (a->locked.c_iflag != b->locked.c_iflag ||
	    memcmp(a->locked.c_cc, b->locked.c_cc, KERNEL_NCCS))
		test_fail("locked termios: iflag %#x -> %#x (or c_cc)", a->locked.c_iflag,
			  b->locked.c_iflag);
	if (memcmp(&a->ws, &b->ws, sizeof(a->ws)))
		test_fail("window size %ux%u -> %ux%u", a->ws.ws_col, a->ws.ws_row, b->ws.ws_col,
			  b->ws.ws_row);
	if (a->packet != b->packet || a->pty_locked != b->pty_locked)
		test_fail("packet mode %d, locked %d -> %d, %d", a->packet, a->pty_locked,
			  b->packet, b->pty_locked);
}

/* Exactly want is queued on fd (FIONREAD), and reads back as want (after a status byte). */
static void expect_queued(int fd, const char *want, size_t len, bool packet, const char *what)
{
	char buf[256];
	int queued;
	ssize_t n;

	if (ioctl(fd, FIONREAD, &queued))
		test_fail_errno("FIONREAD");
	if ((size_t)queued != len)
		test_fail("%s: %d bytes queued, %zu expected", what, queued, len);
	n = read(fd, buf, len + packet);
	if (n != (ssize_t)(len + packet) || (packet && buf[0] != TIOCPKT_DATA) ||
	    memcmp(buf + packet, want, len))
		test_fail("%s: read %zd bytes, not the %zu queued", what, n, len);
}

static void expect_carries(int master, int slave)
{
	struct pollfd pfd = { .fd = master, .events = POLLIN };
	char buf[8];

	if (write(master, "abc", 3) != 3 || read(slave, buf, 3) != 3 || memcmp(buf, "abc", 3))
		test_fail("master -> slave after restore");
	if (write(slave, "xyz", 3) != 3 || poll(&pfd, 1, 5000) != 1 ||
	    read(master, buf, 3 + !plain) != 3 + !plain || (!plain && buf[0] != TIOCPKT_DATA) ||
	    memcmp(buf + !plain, "xyz", 3))
		test_fail("slave -> master after restore");
}

int main(int argc, char **argv)
{
	struct pty_snapshot before = { 0 }, after = { 0 };
	char slave_path[PATH_MAX];
	int master, slave;

	test_init(argc, argv);
	plain = getenv("ZDTM_PTY_PLAIN") != NULL;
	master = pty_open_master(0, slave_path, sizeof(slave_path));
	slave = open(slave_path, O_RDWR | O_NOCTTY);
	if (slave < 0)
		test_fail_errno("open the slave");
	set_up(master, slave);
	snapshot(master, slave, &before);

	test_ready();
	test_wait_sigterm();

	snapshot(master, slave, &after);
	compare(&before, &after);
	expect_queued(slave, to_slave, sizeof(to_slave) - 1, false, "queued for the slave");
	expect_queued(master, to_master, sizeof(to_master) - 1, !plain, "queued for the master");
	expect_carries(master, slave);
	test_pass();
}
