/*
 * A fanotify mark on a whole filesystem (FAN_MARK_FILESYSTEM) has no place in CRIU's image
 * format: the dump fails naming it and leaves the process as it was, its group still
 * reporting events of that filesystem.
 */
#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	char buf[4096] __attribute__((aligned(8)));
	struct fanotify_event_metadata *ev = (struct fanotify_event_metadata *)buf;
	int group, fd;
	ssize_t n;

	test_init(argc, argv);

	group = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY);
	if (group < 0)
		test_fail_errno("fanotify_init");
	if (fanotify_mark(group, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_CREATE | FAN_ONDIR,
			  AT_FDCWD, "."))
		test_fail_errno("fanotify_mark");

	test_ready();
	test_wait_sigterm();

	/* Creations anywhere on the filesystem are queued: ours among them. */
	fd = open("created", O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || close(fd))
		test_fail_errno("create");
	n = read(group, buf, sizeof(buf));
	if (!FAN_EVENT_OK(ev, n) || !(ev->mask & FAN_CREATE))
		test_fail("no FAN_CREATE event after the failed dump (read %zd)", n);
	test_pass();
}
