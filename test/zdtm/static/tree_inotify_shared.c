/*
 * An inotify instance inherited over fork stays one description in parent and child: the
 * event the restored child causes and reads half of is gone from the parent's queue too,
 * and the rest the parent reads, under the dumped wd.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define IFD 50
#define WD 3 /* after two watches added and removed */

static void expect_event(int wd, uint32_t mask, const char *who)
{
	char buf[sizeof(struct inotify_event)] __attribute__((aligned(8)));
	struct inotify_event *ev = (struct inotify_event *)buf;
	ssize_t n = read(IFD, buf, sizeof(buf)); /* one event: no name, no room for another */

	if (n != sizeof(*ev) || ev->wd != wd || ev->mask != mask)
		test_fail("%s: read %zd bytes, wd %d mask %#x; expected wd %d mask %#x", who, n,
			  n >= (ssize_t)sizeof(*ev) ? ev->wd : -1,
			  n >= (ssize_t)sizeof(*ev) ? ev->mask : 0, wd, mask);
}

static void __attribute__((noreturn)) child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();

	if (chmod("watched", 0600) || chmod("watched", 0644) || truncate("watched", 1))
		test_fail_errno("child: chmod, truncate");
	/* Two IN_ATTRIB merge into one; then the IN_MODIFY, left to the parent. */
	expect_event(WD, IN_ATTRIB, "child");
	exit(0);
}

int main(int argc, char **argv)
{
	char drained[4096] __attribute__((aligned(8)));
	int fd, queued;
	pid_t child;

	test_init(argc, argv);
	fd = open("watched", O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || close(fd))
		test_fail_errno("create");
	fd = inotify_init1(IN_NONBLOCK);
	if (fd < 0 || dup2(fd, IFD) != IFD)
		test_fail_errno("inotify_init1");
	close(fd);
	for (int i = 1; i < WD; i++)
		if (inotify_rm_watch(IFD, inotify_add_watch(IFD, "watched", IN_ATTRIB)))
			test_fail_errno("add and remove a watch");
	if (inotify_add_watch(IFD, "watched", IN_ATTRIB | IN_MODIFY) != WD)
		test_fail("the watch did not get wd %d", WD);
	while (read(IFD, drained, sizeof(drained)) > 0) /* the IN_IGNORED of the removed ones */
		;
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	test_children_verdict(&child, 1, "parent");
	expect_event(WD, IN_MODIFY, "parent");
	if (ioctl(IFD, FIONREAD, &queued) || queued)
		test_fail("parent: %d bytes still queued", queued);
	test_pass();
}
