/*
 * A FIFO opened by its path comes back on the same FIFO with its queued bytes (exact,
 * once, though two fds of it are open), its size, O_NONBLOCK and access modes, and works.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FIFO_PATH "queued.fifo"
#define READ_FD	  60 /* O_RDONLY | O_NONBLOCK */
#define WRITE_FD  61
#define FIFO_SIZE (128 << 10)
#define WRITTEN	  100000
#define CONSUMED  333

static unsigned char data[WRITTEN];

static void open_at(int flags, int at)
{
	int fd = open(FIFO_PATH, flags);

	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("open the FIFO");
	close(fd);
}

static void check_fd(int fd, const struct stat *fifo_st, int status)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode) || st.st_ino != fifo_st->st_ino ||
	    st.st_dev != fifo_st->st_dev)
		test_fail("fd %d is not on %s", fd, FIFO_PATH);
	if ((fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != status)
		test_fail("fd %d: status flags %#o, expected %#o", fd, fcntl(fd, F_GETFL), status);
}

int main(int argc, char **argv)
{
	static unsigned char got[WRITTEN - CONSUMED];
	int queued = -1;
	struct stat fifo_st;
	char more[8];

	test_init(argc, argv);
	pattern_fill(data, sizeof(data), 180);
	unlink(FIFO_PATH);
	if (mkfifo(FIFO_PATH, 0600))
		test_fail_errno("mkfifo");
	open_at(O_RDONLY | O_NONBLOCK, READ_FD);
	open_at(O_WRONLY, WRITE_FD);
	if (fcntl(WRITE_FD, F_SETPIPE_SZ, FIFO_SIZE) != FIFO_SIZE)
		test_fail_errno("F_SETPIPE_SZ");
	if (write(WRITE_FD, data, sizeof(data)) != sizeof(data))
		test_fail_errno("write");
	read_exact(READ_FD, got, CONSUMED, "head");

	test_ready();
	test_wait_sigterm();

	if (stat(FIFO_PATH, &fifo_st))
		test_fail_errno("stat the FIFO");
	check_fd(READ_FD, &fifo_st, O_RDONLY | O_NONBLOCK);
	check_fd(WRITE_FD, &fifo_st, O_WRONLY);
	if (fcntl(READ_FD, F_GETPIPE_SZ) != FIFO_SIZE)
		test_fail("FIFO size %d, expected %d", fcntl(READ_FD, F_GETPIPE_SZ), FIFO_SIZE);
	if (ioctl(READ_FD, FIONREAD, &queued) || queued != (int)sizeof(got))
		test_fail("%d bytes queued, expected %zu", queued, sizeof(got));
	read_exact(READ_FD, got, sizeof(got), "queued bytes");
	if (memcmp(got, data + CONSUMED, sizeof(got)))
		test_fail("the queued bytes differ from what was written");
	if (read(READ_FD, more, sizeof(more)) != -1 || errno != EAGAIN)
		test_fail("the emptied non-blocking FIFO did not say EAGAIN");
	if (write(WRITE_FD, "again", 6) != 6)
		test_fail_errno("write after restore");
	read_exact(READ_FD, more, 6, "a write after restore");
	if (strcmp(more, "again"))
		test_fail("read back '%s' after restore", more);
	test_pass();
}
