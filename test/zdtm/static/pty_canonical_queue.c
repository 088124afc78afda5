/*
 * A pty in canonical mode with echo keeps what was typed and not yet read: complete lines
 * (ended by newline, by VEOL, by EOF, an empty one by EOF alone), and the line being typed,
 * with an erased character gone and a VLNEXT-quoted special character kept; the echo and
 * the slave's output queued for the master. After restore, the slave reads what a new pty
 * given the same keystrokes reads, read by read, and the master the same bytes; the
 * slave's exclusive mode is kept.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

/* Typed at the master: ^D is VEOF, '@' VEOL, ^V VLNEXT, DEL VERASE. */
static const char typed[] = "line one\n"
			    "ended by eof\x04"
			    "\x04"
			    "ended by eol@"
			    "being typed, a typo\x7f, a quoted \x16\x7f and \x16@";
static const char written[] = "output\nof the slave\n";

/* What one side gives, read by read, until it has nothing more. */
struct transcript {
	char bytes[4096];
	size_t len;
	unsigned int reads;
};

/*
 * The kernel echoes typed characters and moves written ones to the master in a worker of
 * its own: until the master's queue stops growing, the order of what it holds is not
 * settled.
 */
static void wait_echo(int master)
{
	int queued = -1, last, stable = 0;

	while (stable < 5) {
		last = queued;
		usleep(20000);
		if (ioctl(master, FIONREAD, &queued))
			test_fail_errno("FIONREAD");
		stable = queued == last ? stable + 1 : 0;
	}
}

static void set_up(int master, int slave)
{
	struct termios t;

	if (tcgetattr(slave, &t))
		test_fail_errno("tcgetattr");
	t.c_lflag |= ICANON | ECHO | ECHOE | ECHOCTL | IEXTEN;
	t.c_cc[VEOL] = '@';
	if (tcsetattr(slave, TCSANOW, &t))
		test_fail_errno("tcsetattr");
	if (write(master, typed, sizeof(typed) - 1) != sizeof(typed) - 1)
		test_fail_errno("typing");
	wait_echo(master);
	if (write(slave, written, sizeof(written) - 1) != sizeof(written) - 1)
		test_fail_errno("writing to the slave");
	wait_echo(master);
}

/* Each read's length, then its bytes: the line boundaries are part of what is compared. */
static void record(struct transcript *t, const char *buf, ssize_t n)
{
	if (t->len + sizeof(n) + n > sizeof(t->bytes))
		test_fail("transcript too long");
	memcpy(t->bytes + t->len, &n, sizeof(n));
	memcpy(t->bytes + t->len + sizeof(n), buf, n);
	t->len += sizeof(n) + n;
	t->reads++;
}

/*
 * Non-blocking reads until EAGAIN; for the slave, then a newline typed to end the line
 * being typed, and that line. The slave is read first: the newline's echo comes last.
 */
static void drain(int master, int slave, struct transcript *in, struct transcript *out)
{
	char buf[1024];
	ssize_t n;

	if (fcntl(slave, F_SETFL, O_NONBLOCK) || fcntl(master, F_SETFL, O_NONBLOCK))
		test_fail_errno("O_NONBLOCK");
	while ((n = read(slave, buf, sizeof(buf))) >= 0)
		record(in, buf, n);
	if (write(master, "\n", 1) != 1)
		test_fail_errno("typing a newline");
	wait_echo(master);
	n = read(slave, buf, sizeof(buf));
	if (n <= 0)
		test_fail("the line being typed did not come after a newline");
	record(in, buf, n);
	while ((n = read(master, buf, sizeof(buf))) > 0)
		record(out, buf, n);
}

static void compare(const char *what, const struct transcript *got, const struct transcript *want)
{
	if (got->len != want->len || memcmp(got->bytes, want->bytes, got->len))
		test_fail("%s: %u reads, %zu bytes; a new pty given the same gives %u reads, %zu "
			  "bytes",
			  what, got->reads, got->len, want->reads, want->len);
}

/* The same keystrokes and output on a new pty: what the restored one must give. */
static void expected(struct transcript *in, struct transcript *out)
{
	char slave_path[PATH_MAX];
	int master, slave;

	master = pty_open_master(0, slave_path, sizeof(slave_path));
	slave = open(slave_path, O_RDWR | O_NOCTTY);
	if (slave < 0)
		test_fail_errno("open the new pty's slave");
	set_up(master, slave);
	drain(master, slave, in, out);
	close(slave);
	close(master);
}

int main(int argc, char **argv)
{
	static struct transcript in, out, want_in, want_out;
	char slave_path[PATH_MAX], link[PATH_MAX];
	int master, slave, excl = 0;
	unsigned int index, index_after;

	test_init(argc, argv);
	master = pty_open_master(0, slave_path, sizeof(slave_path));
	slave = open(slave_path, O_RDWR | O_NOCTTY);
	if (slave < 0 || ioctl(master, TIOCGPTN, &index) || ioctl(slave, TIOCEXCL))
		test_fail_errno("open the slave, exclusive");
	set_up(master, slave);

	test_ready();
	test_wait_sigterm();

	fd_link(slave, link, sizeof(link));
	if (ioctl(master, TIOCGPTN, &index_after) || index_after != index ||
	    strcmp(link, slave_path))
		test_fail("pty %u (%s) came back as %u (%s)", index, slave_path, index_after, link);
	if (ioctl(slave, TIOCGEXCL, &excl) || !excl)
		test_fail("the slave is no longer exclusive");
	drain(master, slave, &in, &out);
	expected(&want_in, &want_out);
	compare("the slave", &in, &want_in);
	compare("the master", &out, &want_out);
	test_pass();
}
