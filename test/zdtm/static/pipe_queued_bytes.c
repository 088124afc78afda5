/*
 * Pipes within one process come back with their queued bytes (exact, in order, the
 * consumed head gone), their size, O_NONBLOCK, both ends at their fd numbers on one pipe,
 * and a pipe whose write end was closed still ends in EOF after its bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BIG_READ_FD    40 /* O_NONBLOCK, 256 KiB, 200000 bytes written, 1000 read */
#define BIG_WRITE_FD   41
#define CLOSED_READ_FD 45 /* its write end was closed after queuing TAIL */
#define REV_WRITE_FD   50 /* the write end below the read end, read end close-on-exec */
#define REV_READ_FD    51

#define BIG_SIZE     (256 << 10)
#define BIG_WRITTEN  200000
#define BIG_CONSUMED 1000
#define TAIL	     "bytes left behind by a writer that is gone"
#define REV_MSG	     "reverse order"

static unsigned char big[BIG_WRITTEN];

static void write_all(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		test_fail_errno("write");
}

static void setup(void)
{
	static unsigned char head[BIG_CONSUMED];

	pattern_fill(big, sizeof(big), 170);
	pipe_at(BIG_READ_FD, BIG_WRITE_FD);
	if (fcntl(BIG_WRITE_FD, F_SETPIPE_SZ, BIG_SIZE) != BIG_SIZE)
		test_fail_errno("F_SETPIPE_SZ");
	write_all(BIG_WRITE_FD, big, sizeof(big));
	read_exact(BIG_READ_FD, head, sizeof(head), "head");
	if (fcntl(BIG_READ_FD, F_SETFL, O_NONBLOCK))
		test_fail_errno("F_SETFL");

	pipe_at(CLOSED_READ_FD, CLOSED_READ_FD + 1);
	write_all(CLOSED_READ_FD + 1, TAIL, sizeof(TAIL));
	close(CLOSED_READ_FD + 1);

	pipe_at(REV_READ_FD, REV_WRITE_FD);
	write_all(REV_WRITE_FD, REV_MSG, sizeof(REV_MSG));
	if (fcntl(REV_READ_FD, F_SETFD, FD_CLOEXEC))
		test_fail_errno("F_SETFD");
}

static void expect_ends(int read_fd, int write_fd, int read_status, int write_status)
{
	struct stat rst, wst;

	if (fstat(read_fd, &rst) || fstat(write_fd, &wst))
		test_fail("fds %d/%d: fstat: %s", read_fd, write_fd, strerror(errno));
	if (!S_ISFIFO(rst.st_mode) || !S_ISFIFO(wst.st_mode) || rst.st_ino != wst.st_ino)
		test_fail("fds %d and %d are not the two ends of one pipe", read_fd, write_fd);
	if ((fcntl(read_fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != read_status ||
	    (fcntl(write_fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != write_status)
		test_fail("fds %d/%d: status flags %#o/%#o, expected %#o/%#o", read_fd, write_fd,
			  fcntl(read_fd, F_GETFL), fcntl(write_fd, F_GETFL), read_status,
			  write_status);
}

static void check_big(void)
{
	static unsigned char got[BIG_WRITTEN - BIG_CONSUMED];
	int queued = -1;
	char more[16];

	expect_ends(BIG_READ_FD, BIG_WRITE_FD, O_RDONLY | O_NONBLOCK, O_WRONLY);
	if (fcntl(BIG_READ_FD, F_GETPIPE_SZ) != BIG_SIZE)
		test_fail("pipe size %d, expected %d", fcntl(BIG_READ_FD, F_GETPIPE_SZ), BIG_SIZE);
	if (ioctl(BIG_READ_FD, FIONREAD, &queued) || queued != (int)sizeof(got))
		test_fail("%d bytes queued, expected %zu", queued, sizeof(got));
	read_exact(BIG_READ_FD, got, sizeof(got), "queued bytes");
	if (memcmp(got, big + BIG_CONSUMED, sizeof(got)))
		test_fail("the queued bytes differ from what was written");
	if (read(BIG_READ_FD, more, sizeof(more)) != -1 || errno != EAGAIN)
		test_fail("the emptied non-blocking pipe did not say EAGAIN");
	write_all(BIG_WRITE_FD, "after", 6);
	read_exact(BIG_READ_FD, more, 6, "a write after restore");
	if (strcmp(more, "after"))
		test_fail("read back '%s' after restore", more);
}

static void check_closed_writer(void)
{
	char got[sizeof(TAIL)];
	struct stat st;

	if (fstat(CLOSED_READ_FD + 1, &st) == 0)
		test_fail("the closed write end is open again at fd %d", CLOSED_READ_FD + 1);
	if ((fcntl(CLOSED_READ_FD, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != O_RDONLY)
		test_fail("fd %d: status flags %#o", CLOSED_READ_FD,
			  fcntl(CLOSED_READ_FD, F_GETFL));
	read_exact(CLOSED_READ_FD, got, sizeof(got), "bytes of the closed writer");
	if (memcmp(got, TAIL, sizeof(TAIL)))
		test_fail("read '%.*s', expected '%s'", (int)sizeof(got), got, TAIL);
	if (read(CLOSED_READ_FD, got, sizeof(got)) != 0)
		test_fail("no EOF after the bytes of a closed writer");
}

static void check_reverse(void)
{
	char got[sizeof(REV_MSG)];

	expect_ends(REV_READ_FD, REV_WRITE_FD, O_RDONLY, O_WRONLY);
	if (fcntl(REV_READ_FD, F_GETFD) != FD_CLOEXEC || fcntl(REV_WRITE_FD, F_GETFD) != 0)
		test_fail("close-on-exec flags %d/%d, expected 1/0", fcntl(REV_READ_FD, F_GETFD),
			  fcntl(REV_WRITE_FD, F_GETFD));
	read_exact(REV_READ_FD, got, sizeof(got), "reverse-order pipe");
	if (memcmp(got, REV_MSG, sizeof(REV_MSG)))
		test_fail("read '%.*s', expected '%s'", (int)sizeof(got), got, REV_MSG);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	setup();

	test_ready();
	test_wait_sigterm();

	check_big();
	check_closed_writer();
	check_reverse();
	test_pass();
}
