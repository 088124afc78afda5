/*
 * A pipe and a FIFO between two siblings, whose parent (their common ancestor) holds
 * neither: each comes back as one object with its queued bytes exactly once. The writer
 * sends more after restore and exits; the reader gets the dump-time queue, the new bytes,
 * then EOF (no copy of a write end left in the parent or anywhere else).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PIPE_WRITE_FD 40
#define PIPE_READ_FD  41
#define FIFO_WRITE_FD 42
#define FIFO_READ_FD  43
#define FIFO_PATH     "siblings.fifo"
#define QUEUED	      30000 /* written by the writer before dump: pipe seed 41, FIFO seed 43 */
#define LATER	      2048  /* after restore: pipe seed 42, FIFO seed 44 */

static void write_pattern(int fd, size_t len, uint64_t seed, const char *what)
{
	static unsigned char buf[QUEUED];

	pattern_fill(buf, len, seed);
	if (write(fd, buf, len) != (ssize_t)len)
		test_fail("%s: write: %s", what, strerror(errno));
}

static void expect_stream(int fd, uint64_t queued_seed, uint64_t later_seed, const char *what)
{
	static unsigned char buf[QUEUED];
	char extra;
	ssize_t n;

	read_exact(fd, buf, QUEUED, what);
	pattern_expect(buf, QUEUED, queued_seed, what);
	read_exact(fd, buf, LATER, what);
	pattern_expect(buf, LATER, later_seed, what);
	n = read(fd, &extra, 1);
	if (n != 0)
		test_fail("%s: expected EOF after the writer exited, read returned %zd (%s)", what,
			  n, n < 0 ? strerror(errno) : "a byte too many");
}

static void __attribute__((noreturn)) writer_main(void)
{
	close(PIPE_READ_FD);
	close(FIFO_READ_FD);
	write_pattern(PIPE_WRITE_FD, QUEUED, 41, "writer: pipe");
	write_pattern(FIFO_WRITE_FD, QUEUED, 43, "writer: FIFO");
	test_barrier_done();
	test_wait_sigterm();

	write_pattern(PIPE_WRITE_FD, LATER, 42, "writer: pipe after restore");
	write_pattern(FIFO_WRITE_FD, LATER, 44, "writer: FIFO after restore");
	exit(0);
}

static void __attribute__((noreturn)) reader_main(void)
{
	close(PIPE_WRITE_FD);
	close(FIFO_WRITE_FD);
	test_barrier_done();
	test_wait_sigterm();

	expect_stream(PIPE_READ_FD, 41, 42, "reader: pipe");
	expect_stream(FIFO_READ_FD, 43, 44, "reader: FIFO");
	exit(0);
}

static void fd_at(int fd, int at)
{
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("open and dup2");
	close(fd);
}

static pid_t fork_sibling(void (*sibling_main)(void))
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0)
		sibling_main();
	return pid;
}

int main(int argc, char **argv)
{
	pid_t siblings[2];
	int ends[2], rdwr;

	test_init(argc, argv);
	if (pipe(ends))
		test_fail_errno("pipe");
	fd_at(ends[1], PIPE_WRITE_FD);
	fd_at(ends[0], PIPE_READ_FD);
	if (mkfifo(FIFO_PATH, 0600))
		test_fail_errno("mkfifo");
	/* Read-write first, so that the one-way openings do not block. */
	rdwr = open(FIFO_PATH, O_RDWR);
	fd_at(open(FIFO_PATH, O_RDONLY), FIFO_READ_FD);
	fd_at(open(FIFO_PATH, O_WRONLY), FIFO_WRITE_FD);
	close(rdwr);
	test_barrier_init();
	siblings[0] = fork_sibling(writer_main);
	siblings[1] = fork_sibling(reader_main);
	close(PIPE_WRITE_FD);
	close(PIPE_READ_FD);
	close(FIFO_WRITE_FD);
	close(FIFO_READ_FD);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	/* The writer first: it sends its bytes and exits, then the reader checks all of them. */
	test_children_verdict(siblings, 2, "parent");
	test_pass();
}
