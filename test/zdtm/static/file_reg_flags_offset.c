/*
 * Regular file fds survive on their own fd numbers with path, access mode, O_APPEND,
 * FD_CLOEXEC, offset and the whole /proc/self/fdinfo text (pos, flags).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

#define APPEND_FD 77 /* O_RDWR | O_APPEND | O_CLOEXEC */
#define READ_FD 78 /* O_RDONLY, inheritable */
#define DATA_SIZE 20000

struct fd_snapshot {
	int status_flags, fd_flags;
	off_t offset;
	char path[PATH_MAX];
	char fdinfo[512];
};

static struct fd_snapshot before[2], after[2];
static const int test_fds[2] = { APPEND_FD, READ_FD };

static void move_fd(int fd, int target)
{
	if (fd < 0 || dup3(fd, target, fcntl(fd, F_GETFD) & FD_CLOEXEC ? O_CLOEXEC : 0) != target)
		test_fail_errno("place fd");
	close(fd);
}

static void snapshot(struct fd_snapshot *snap, int fd)
{
	char link[64];
	ssize_t len;

	snap->status_flags = fcntl(fd, F_GETFL);
	snap->fd_flags = fcntl(fd, F_GETFD);
	snap->offset = lseek(fd, 0, SEEK_CUR);
	if (snap->status_flags < 0 || snap->fd_flags < 0 || snap->offset < 0)
		test_fail("fd %d: %m", fd);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, snap->path, sizeof(snap->path) - 1);
	if (len < 0)
		test_fail_errno("readlink");
	snap->path[len] = '\0';
	snprintf(link, sizeof(link), "/proc/self/fdinfo/%d", fd);
	read_file(link, snap->fdinfo, sizeof(snap->fdinfo));
}

int main(int argc, char **argv)
{
	static unsigned char data[DATA_SIZE], read_back[DATA_SIZE];

	test_init(argc, argv);

	pattern_fill(data, DATA_SIZE, 110);
	write_file("regular.data", data, DATA_SIZE / 2);
	move_fd(open("regular.data", O_RDWR | O_APPEND | O_CLOEXEC), APPEND_FD);
	move_fd(open("regular.data", O_RDONLY), READ_FD);
	if (write(APPEND_FD, data + DATA_SIZE / 2, DATA_SIZE / 2) != DATA_SIZE / 2)
		test_fail_errno("append");
	/* O_APPEND moves writes to the end, but the read offset is ours to set */
	if (lseek(APPEND_FD, 1234, SEEK_SET) != 1234 || lseek(READ_FD, 12345, SEEK_SET) != 12345)
		test_fail_errno("lseek");
	for (int i = 0; i < 2; i++)
		snapshot(&before[i], test_fds[i]);

	test_ready();
	test_wait_sigterm();

	for (int i = 0; i < 2; i++) {
		snapshot(&after[i], test_fds[i]);
		if (before[i].status_flags != after[i].status_flags ||
		    before[i].fd_flags != after[i].fd_flags || before[i].offset != after[i].offset)
			test_fail("fd %d: flags %#o fd flags %d offset %ld -> %#o %d %ld", test_fds[i],
				  before[i].status_flags, before[i].fd_flags, (long)before[i].offset,
				  after[i].status_flags, after[i].fd_flags, (long)after[i].offset);
		if (strcmp(before[i].path, after[i].path))
			test_fail("fd %d: path '%s' -> '%s'", test_fds[i], before[i].path,
				  after[i].path);
		if (strcmp(before[i].fdinfo, after[i].fdinfo))
			test_fail("fd %d: fdinfo '%s' -> '%s'", test_fds[i], before[i].fdinfo,
				  after[i].fdinfo);
	}
	if (pread(READ_FD, read_back, DATA_SIZE, 0) != DATA_SIZE)
		test_fail_errno("read back");
	pattern_expect(read_back, DATA_SIZE, 110, "file contents");
	test_pass();
}
