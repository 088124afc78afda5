/*
 * The bytes queued in a pty's two line disciplines: the slave's output the master has not
 * read, and input the slave has not read. Dump reads them out and queues them again at
 * once, so the running tree keeps them; restore queues them in the new pty the same way.
 *
 * Output sits in the master's buffer as the slave's output processing left it, and the
 * master's own discipline is always raw (its termios cannot be set: TCSETS on a master
 * sets the slave's). Written back through the slave with OPOST off, it arrives as it was.
 *
 * Input sits in the slave's buffer after input processing (lines, ICRNL, ...). It is kept
 * as the keystrokes that queue it again when fed to the slave's discipline with echo,
 * signals and input mapping off (queue_termios()): a complete line with its terminator, a
 * line ended by EOF with VEOF, and in canonical mode each character the discipline would
 * take as special preceded by VLNEXT. They are fed with TIOCSTI, which runs the discipline
 * in the caller under the termios then set; a write to the master is processed later by a
 * kernel worker, under whatever termios is set by then.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "log.h"
#include "tty.h"

/* More than a canonical line can hold (the discipline's 4 KiB): one read takes it whole. */
#define LINE_BUF_SIZE 8192
#define DEFAULT_VLNEXT 0x16 /* ^V */

struct byte_buf {
	uint8_t *bytes;
	size_t len, cap;
};

static int buf_put(struct byte_buf *b, const uint8_t *data, size_t len, const char *what)
{
	if (b->len + len > PTY_QUEUE_MAX) {
		pr_err("%s: more than %d bytes queued\n", what, PTY_QUEUE_MAX);
		return -EFBIG;
	}
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *grown;

		while (cap < b->len + len)
			cap *= 2;
		grown = realloc(b->bytes, cap);
		if (!grown) {
			pr_err("%s: out of memory for %zu queued bytes\n", what, b->len + len);
			return -ENOMEM;
		}
		b->bytes = grown;
		b->cap = cap;
	}
	memcpy(b->bytes + b->len, data, len);
	b->len += len;
	return 0;
}

static int set_termios(int fd, const struct kernel_termios *t, const char *what)
{
	if (ioctl(fd, TCSETS, t)) {
		pr_perror("%s: cannot set the terminal's termios", what);
		return -errno;
	}
	return 0;
}

/*
 * Exactly what FIONREAD counts, so a blocking description (the task's own) never waits.
 * poll() first: with nothing readable it also waits for bytes still on their way in.
 * In packet mode every read starts with a status byte, TIOCPKT_DATA before data; a
 * pending status (POLLPRI) cannot be read without being consumed.
 */
static int read_output(int master_fd, bool packet, struct byte_buf *out, const char *what)
{
	uint8_t chunk[4096 + 1];

	for (;;) {
		struct pollfd pfd = { .fd = master_fd, .events = POLLIN | POLLPRI };
		int avail, ret;
		ssize_t n;

		if (poll(&pfd, 1, 0) < 0) {
			pr_perror("%s: cannot poll the master", what);
			return -errno;
		}
		if (packet && (pfd.revents & POLLPRI)) {
			pr_err("%s: a packet mode status (TIOCPKT) waits for the master to read "
			       "it: it cannot be read without losing it\n",
			       what);
			return -ENOTSUP;
		}
		if (!(pfd.revents & POLLIN))
			return 0;
		if (ioctl(master_fd, FIONREAD, &avail)) {
			pr_perror("%s: cannot count the bytes queued for the master", what);
			return -errno;
		}
		if (avail <= 0)
			return 0;
		if (avail > (int)sizeof(chunk) - 1)
			avail = sizeof(chunk) - 1;
		n = read(master_fd, chunk, avail + packet);
		if (n <= (ssize_t)packet || (packet && chunk[0] != TIOCPKT_DATA)) {
			pr_err("%s: reading the bytes queued for the master gave %zd: %s\n", what,
			       n, n < 0 ? strerror(errno) : "not what FIONREAD counted");
			return n < 0 ? -errno : -EIO;
		}
		ret = buf_put(out, chunk + packet, n - packet, what);
		if (ret)
			return ret;
	}
}

static bool is_line_end(const struct kernel_termios *t, uint8_t c)
{
	return c == '\n' || (c && c == t->c_cc[VEOL]) ||
	       (c && (t->c_lflag & IEXTEN) && c == t->c_cc[VEOL2]);
}

/* Whether the canonical discipline under q takes c as more than a character. 0: none. */
static bool is_special(const struct kernel_termios *q, uint8_t c)
{
	static const int specials[] = { VEOF, VEOL, VEOL2, VERASE, VKILL, VWERASE, VLNEXT };

	if (c == '\n')
		return true;
	if (!c)
		return false;
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		if (c == q->c_cc[specials[i]])
			return true;
	return (q->c_iflag & IXON) && (c == q->c_cc[VSTART] || c == q->c_cc[VSTOP]);
}

/*
 * Echo, signals, input mapping and parity marks off; canonical mode as it was, with VLNEXT
 * on to quote special characters. IXON and its characters stay: changing them sends a
 * status to a packet mode master.
 */
static void queue_termios(const struct kernel_termios *t, struct kernel_termios *q)
{
	*q = *t;
	q->c_lflag &= ~(ECHO | ECHOE | ECHOK | ECHONL | ECHOCTL | ECHOPRT | ECHOKE | ISIG | XCASE);
	q->c_iflag &= ~(INLCR | IGNCR | ICRNL | IUCLC | ISTRIP | PARMRK | IXANY);
	if (t->c_lflag & ICANON) {
		q->c_lflag |= IEXTEN;
		if (!q->c_cc[VLNEXT])
			q->c_cc[VLNEXT] = DEFAULT_VLNEXT;
	}
}

/* Characters as keystrokes: quoted where the canonical discipline would act on them. */
static int put_chars(struct byte_buf *keys, const struct kernel_termios *q, const uint8_t *chars,
		     size_t len, const char *what)
{
	bool canon = q->c_lflag & ICANON;
	int ret = 0;

	for (size_t i = 0; i < len && !ret; i++) {
		if (canon && is_special(q, chars[i]))
			ret = buf_put(keys, &q->c_cc[VLNEXT], 1, what);
		if (!ret)
			ret = buf_put(keys, &chars[i], 1, what);
	}
	return ret;
}

/* Complete canonical lines, one per read; a line ended by EOF comes without its end. */
static int read_lines(int slave_fd, const struct kernel_termios *t, const struct kernel_termios *q,
		      struct byte_buf *keys, const char *what)
{
	uint8_t line[LINE_BUF_SIZE];

	for (;;) {
		ssize_t n = read(slave_fd, line, sizeof(line));
		uint8_t end;
		int ret;

		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			pr_perror("%s: cannot read the lines queued for the slave", what);
			return -errno;
		}
		if (n > 0 && is_line_end(t, line[n - 1])) {
			end = line[--n];
		} else if (t->c_cc[VEOF]) {
			end = t->c_cc[VEOF];
		} else {
			pr_err("%s: a line queued for the slave ends in EOF, but VEOF is off\n",
			       what);
			return -EINVAL;
		}
		ret = put_chars(keys, q, line, n, what);
		if (!ret)
			ret = buf_put(keys, &end, 1, what);
		if (ret)
			return ret;
	}
}

/* Until EAGAIN (or 0 with VMIN 0): what a non-canonical read gives, as keystrokes. */
static int read_chars(int slave_fd, const struct kernel_termios *q, struct byte_buf *keys,
		      const char *what)
{
	uint8_t chunk[4096];

	for (;;) {
		ssize_t n = read(slave_fd, chunk, sizeof(chunk));
		int ret;

		if (n == 0 || (n < 0 && errno == EAGAIN))
			return 0;
		if (n < 0) {
			pr_perror("%s: cannot read the input queued for the slave", what);
			return -errno;
		}
		ret = put_chars(keys, q, chunk, n, what);
		if (ret)
			return ret;
	}
}

/*
 * Outside canonical mode nothing can be quoted: a flow control character with IXON on
 * (it arrived while IXON was off) would stop or start output instead of being queued.
 */
static int check_unquoted(const struct kernel_termios *q, const struct byte_buf *keys,
			  const char *what)
{
	if ((q->c_lflag & ICANON) || !(q->c_iflag & IXON))
		return 0;
	for (size_t i = 0; i < keys->len; i++) {
		uint8_t c = keys->bytes[i];

		if (c && (c == q->c_cc[VSTART] || c == q->c_cc[VSTOP])) {
			pr_err("%s: input queued for the slave holds its flow control character "
			       "%#x (IXON), which cannot be queued again\n",
			       what, c);
			return -ENOTSUP;
		}
	}
	return 0;
}

/*
 * Canonical mode: the complete lines, then, with ICANON off for a moment, the line being
 * typed (a canonical read does not return it). The buffer is empty when ICANON changes,
 * so the discipline loses no line boundary; t is set again before returning.
 */
static int read_input(int slave_fd, const struct kernel_termios *t, struct byte_buf *keys,
		      const char *what)
{
	struct kernel_termios q, partial = *t;
	int ret, reset;

	queue_termios(t, &q);
	if (!(t->c_lflag & ICANON)) {
		ret = read_chars(slave_fd, &q, keys, what);
		return ret ? ret : check_unquoted(&q, keys, what);
	}
	ret = read_lines(slave_fd, t, &q, keys, what);
	if (ret)
		return ret;
	partial.c_lflag &= ~ICANON;
	ret = set_termios(slave_fd, &partial, what);
	if (!ret)
		ret = read_chars(slave_fd, &q, keys, what);
	reset = set_termios(slave_fd, t, what);
	return ret ? ret : reset;
}

int pty_queue_input(int slave_fd, const struct kernel_termios *termios, const uint8_t *keys,
		    size_t len, const char *what)
{
	struct kernel_termios q;
	int ret, reset;

	if (!len)
		return 0;
	queue_termios(termios, &q);
	ret = set_termios(slave_fd, &q, what);
	for (size_t i = 0; i < len && !ret; i++) {
		if (ioctl(slave_fd, TIOCSTI, &keys[i])) {
			ret = -errno;
			pr_perror("%s: cannot queue input byte %zu of %zu (TIOCSTI)", what, i, len);
		}
	}
	reset = set_termios(slave_fd, termios, what);
	if (!ret && !reset)
		pr_debug("%s: %zu input keystrokes queued\n", what, len);
	return ret ? ret : reset;
}

int pty_queue_output(int slave_fd, const struct kernel_termios *termios, const uint8_t *bytes,
		     size_t len, const char *what)
{
	struct kernel_termios raw = *termios;
	size_t done = 0;
	int ret, reset;

	if (!len)
		return 0;
	raw.c_oflag &= ~OPOST;
	ret = set_termios(slave_fd, &raw, what);
	while (!ret && done < len) {
		ssize_t n = write(slave_fd, bytes + done, len - done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			pr_err("%s: cannot queue %zu output bytes for the master (%zu written): "
			       "%s\n",
			       what, len, done, n < 0 ? strerror(errno) : "short write");
		} else {
			done += n;
		}
	}
	reset = set_termios(slave_fd, termios, what);
	if (!ret && !reset)
		pr_debug("%s: %zu output bytes queued for the master\n", what, len);
	return ret ? ret : reset;
}

int pty_read_queues(int master_fd, int slave_fd, const struct kernel_termios *termios, bool packet,
		    struct pty_queues *q, const char *what)
{
	struct byte_buf out = { 0 }, in = { 0 };
	int ret, put;

	if (termios->c_lflag & EXTPROC) {
		pr_err("%s: the terminal is in EXTPROC mode (its other end edits lines), which is "
		       "not supported\n",
		       what);
		return -ENOTSUP;
	}
	ret = read_output(master_fd, packet, &out, what);
	if (!ret)
		ret = read_input(slave_fd, termios, &in, what);
	/* What was read goes back even after a failure: the tree runs on with it. */
	put = pty_queue_input(slave_fd, termios, in.bytes, in.len, what);
	if (!put)
		put = pty_queue_output(slave_fd, termios, out.bytes, out.len, what);
	if (ret || put) {
		free(out.bytes);
		free(in.bytes);
		return ret ? ret : put;
	}
	*q = (struct pty_queues){ .output = out.bytes, .output_len = out.len,
				  .input = in.bytes, .input_len = in.len };
	return 0;
}

void pty_queues_free(struct pty_queues *q)
{
	free(q->output);
	free(q->input);
	*q = (struct pty_queues){ 0 };
}
