/*
 * fanotify groups keep their init flags and marks: inode marks with a mask, an ignored
 * mask by either API (FAN_MARK_IGNORED_MASK with FAN_MARK_IGNORED_SURV_MODIFY, or
 * FAN_MARK_IGNORE), an evictable mark, a directory's dirent events in a FID-reporting
 * group, and a mount mark. After restore each fd's whole fdinfo text is the same, nothing is
 * queued in the inode-marked groups, and touching the marked files queues their events.
 * ZDTM_FANOTIFY_OLD_IGNORE=1: FAN_MARK_IGNORE is not used (upstream criu's restore cannot
 * add it back).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FILES_FD 40 /* notification class, fds in events, non-blocking */
#define FID_FD 41 /* FAN_REPORT_FID: dirent and attribute events, blocking */
#define MOUNT_FD 42 /* a mark on the test's mount */
#define PIN_FD 43 /* keeps the evictable mark's inode in memory */

static const int test_fds[] = { FILES_FD, FID_FD, MOUNT_FD };
#define NR_FDS (int)(sizeof(test_fds) / sizeof(test_fds[0]))
static char fdinfo_before[NR_FDS][4096], fdinfo_after[NR_FDS][4096];

static void make_file(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0 || close(fd))
		test_fail_errno(path);
}

static void write_file_once(const char *path)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || write(fd, "w", 1) != 1 || close(fd))
		test_fail_errno(path);
}

static void new_fd_at(int fd, int target)
{
	if (fd < 0 || dup2(fd, target) != target)
		test_fail_errno("open");
	close(fd);
}

static void new_group(unsigned int flags, unsigned int event_flags, int target)
{
	new_fd_at(fanotify_init(flags, event_flags), target);
}

static void mark(int group, unsigned int flags, uint64_t mask, const char *path)
{
	if (fanotify_mark(group, FAN_MARK_ADD | flags, mask, AT_FDCWD, path))
		test_fail("fanotify_mark(%#x, %#llx, %s): %m", flags, (unsigned long long)mask,
			  path);
}

static void set_up(bool old_ignore_api)
{
	if (mkdir("marked", 0755))
		test_fail_errno("mkdir");
	make_file("marked/file");
	make_file("marked/quiet");
	make_file("marked/new_api");
	make_file("marked/evict");
	make_file("marked/mnt");
	new_fd_at(open("marked/evict", O_RDONLY), PIN_FD);

	new_group(FAN_CLASS_NOTIF | FAN_NONBLOCK, O_RDONLY | O_LARGEFILE, FILES_FD);
	mark(FILES_FD, 0, FAN_MODIFY | FAN_CLOSE_WRITE, "marked/file");
	mark(FILES_FD, FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY, FAN_OPEN,
	     "marked/quiet");
	mark(FILES_FD, 0, FAN_CLOSE_NOWRITE, "marked/new_api");
	mark(FILES_FD, old_ignore_api ? FAN_MARK_IGNORED_MASK : FAN_MARK_IGNORE, FAN_ACCESS,
	     "marked/new_api");

	new_group(FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY, FID_FD);
	mark(FID_FD, 0, FAN_CREATE | FAN_ONDIR, "marked");
	mark(FID_FD, FAN_MARK_EVICTABLE, FAN_ATTRIB, "marked/evict");

	new_group(FAN_CLASS_NOTIF | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE, O_RDONLY, MOUNT_FD);
	mark(MOUNT_FD, FAN_MARK_MOUNT, FAN_CLOSE_WRITE | FAN_ONDIR, ".");
	mark(MOUNT_FD, FAN_MARK_MOUNT | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY,
	     FAN_ACCESS, ".");
}

static void snapshot(char (*fdinfo)[4096])
{
	char path[64];

	for (int i = 0; i < NR_FDS; i++) {
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", test_fds[i]);
		read_file(path, fdinfo[i], sizeof(fdinfo[i]));
	}
}

static void check_queued(int group, int want)
{
	int queued;

	if (ioctl(group, FIONREAD, &queued))
		test_fail_errno("FIONREAD");
	if (queued != want)
		test_fail("fd %d: %d bytes queued, expected %d", group, queued, want);
}

/*
 * Read what is queued (up to EAGAIN) and OR the masks of the events on path's inode; the
 * fds events carry are closed. Events on other files count in *others.
 */
static uint64_t masks_on(int group, const char *path, int *others)
{
	char buf[4096] __attribute__((aligned(8)));
	struct stat want, got;
	uint64_t mask = 0;
	ssize_t n;

	if (stat(path, &want))
		test_fail_errno(path);
	while ((n = read(group, buf, sizeof(buf))) > 0) {
		struct fanotify_event_metadata *ev = (struct fanotify_event_metadata *)buf;

		for (; FAN_EVENT_OK(ev, n); ev = FAN_EVENT_NEXT(ev, n)) {
			if (ev->fd >= 0 && !fstat(ev->fd, &got) && got.st_ino == want.st_ino)
				mask |= ev->mask;
			else
				(*others)++;
			if (ev->fd >= 0)
				close(ev->fd);
		}
	}
	return mask;
}

/* The FID group's events: their masks in order (no fds: FAN_REPORT_FID). */
static void expect_fid_events(const uint64_t *want, int nr_want)
{
	char buf[4096] __attribute__((aligned(8)));
	struct fanotify_event_metadata *ev = (struct fanotify_event_metadata *)buf;
	ssize_t n = read(FID_FD, buf, sizeof(buf));
	int i = 0;

	for (; FAN_EVENT_OK(ev, n) && i < nr_want; ev = FAN_EVENT_NEXT(ev, n), i++)
		if (ev->mask != want[i] || ev->fd != FAN_NOFD)
			test_fail("FID group event %d: mask %#llx fd %d, expected %#llx", i,
				  (unsigned long long)ev->mask, ev->fd,
				  (unsigned long long)want[i]);
	if (i != nr_want || FAN_EVENT_OK(ev, n))
		test_fail("FID group: %d events read, expected %d", i, nr_want);
}

int main(int argc, char **argv)
{
	static const uint64_t fid_events[] = { FAN_CREATE, FAN_ATTRIB };
	const char *old_ignore = getenv("ZDTM_FANOTIFY_OLD_IGNORE");
	uint64_t mask;
	int others = 0;

	test_init(argc, argv);
	set_up(old_ignore && !strcmp(old_ignore, "1"));
	snapshot(fdinfo_before);

	test_ready();
	test_wait_sigterm();

	snapshot(fdinfo_after);
	for (int i = 0; i < NR_FDS; i++)
		if (strcmp(fdinfo_before[i], fdinfo_after[i]))
			test_fail("fd %d: fdinfo\n%s\nbecame\n%s", test_fds[i], fdinfo_before[i],
				  fdinfo_after[i]);
	check_queued(FILES_FD, 0);
	check_queued(FID_FD, 0);

	write_file_once("marked/file");
	mask = masks_on(FILES_FD, "marked/file", &others);
	if (mask != (FAN_MODIFY | FAN_CLOSE_WRITE) || others)
		test_fail("marked/file: events %#llx, and %d on other files",
			  (unsigned long long)mask, others);

	make_file("marked/new");
	if (chmod("marked/evict", 0600))
		test_fail_errno("chmod");
	expect_fid_events(fid_events, 2);

	/* Anything on the mount may have queued events: ours must be among them. */
	masks_on(MOUNT_FD, "marked/mnt", &others);
	write_file_once("marked/mnt");
	mask = masks_on(MOUNT_FD, "marked/mnt", &others);
	if (!(mask & FAN_CLOSE_WRITE))
		test_fail("the mount mark: events %#llx on marked/mnt", (unsigned long long)mask);
	test_pass();
}
