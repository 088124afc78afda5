/*
 * A watch on a file deleted while still open: the file comes back as a new inode (from
 * its ghost image) and the watch comes back on it, so a write through the restored fd is
 * reported on the watch's wd; the directory's watch is intact, and nothing the dump or
 * the restore did (reading the file, re-creating it and removing its name) is queued.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

/*
 * The dump reads the deleted file to save it: the file's watch takes IN_MODIFY alone, the
 * directory's leaves out its unlinked children (IN_EXCL_UNLINK).
 */
#define FILE_EVENTS IN_MODIFY
#define DIR_EVENTS (IN_ALL_EVENTS | IN_EXCL_UNLINK)

static void expect_event(int ifd, int wd, uint32_t mask, const char *what)
{
	char buf[4096] __attribute__((aligned(8)));
	struct inotify_event *ev = (struct inotify_event *)buf;
	ssize_t n = read(ifd, buf, sizeof(buf));

	if (n < (ssize_t)sizeof(*ev) || (size_t)n != sizeof(*ev) + ev->len)
		test_fail("%s: read %zd bytes of events, expected one event", what, n);
	if (ev->wd != wd || ev->mask != mask)
		test_fail("%s: event wd %d mask %#x, expected wd %d mask %#x", what, ev->wd,
			  ev->mask, wd, mask);
}

int main(int argc, char **argv)
{
	char buf[4096] __attribute__((aligned(8)));
	int ifd, file_fd, file_wd, dir_wd, queued;

	test_init(argc, argv);

	if (mkdir("dir", 0755))
		test_fail_errno("mkdir");
	file_fd = open("dir/victim", O_CREAT | O_RDWR, 0644);
	ifd = inotify_init1(IN_NONBLOCK);
	if (file_fd < 0 || ifd < 0)
		test_fail_errno("open, inotify_init1");
	file_wd = inotify_add_watch(ifd, "dir/victim", FILE_EVENTS);
	dir_wd = inotify_add_watch(ifd, "dir", DIR_EVENTS);
	if (file_wd < 0 || dir_wd < 0)
		test_fail_errno("inotify_add_watch");
	if (unlink("dir/victim"))
		test_fail_errno("unlink");
	while (read(ifd, buf, sizeof(buf)) > 0) /* IN_ATTRIB, IN_DELETE of the unlink */
		;

	test_ready();
	test_wait_sigterm();

	if (ioctl(ifd, FIONREAD, &queued) || queued)
		test_fail("%d bytes of events queued by the dump and restore", queued);
	if (write(file_fd, "x", 1) != 1)
		test_fail_errno("write");
	expect_event(ifd, file_wd, IN_MODIFY, "the deleted file's watch");
	if (mkdir("dir/sub", 0755))
		test_fail_errno("mkdir sub");
	expect_event(ifd, dir_wd, IN_CREATE | IN_ISDIR, "the directory's watch");
	test_pass();
}
