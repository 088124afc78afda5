/*
 * inotify instances keep their watches: the same wd numbers (with the gap a removed watch
 * left, and one far above the others), masks with IN_ONESHOT, IN_EXCL_UNLINK and bits
 * IN_MASK_ADD added, the O_NONBLOCK flag, and a dup sharing the description. After
 * restore the whole fdinfo text of each fd is the same, nothing is queued, and touching
 * the watched files queues exactly the events expected, under the dumped wd numbers.
 * ZDTM_INOTIFY_FLAGS_LOST=1: the restorer (upstream criu) drops IN_ONESHOT and
 * IN_EXCL_UNLINK from the masks; everything else is checked all the same.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NB_FD 40 /* inotify_init1(IN_NONBLOCK) */
#define NB_DUP_FD 41 /* a dup of it, close-on-exec */
#define BLOCK_FD 42 /* a blocking one, its only watch at wd FAR_WD */
#define FAR_WD 1001
#define NR_NB_EVENTS 8

struct event {
	int wd;
	uint32_t mask;
	const char *name;
};

static const int test_fds[] = { NB_FD, NB_DUP_FD, BLOCK_FD };
#define NR_FDS (int)(sizeof(test_fds) / sizeof(test_fds[0]))
static char fdinfo_before[NR_FDS][4096], fdinfo_after[NR_FDS][4096];
static int fd_flags_before[NR_FDS];

static void make_file(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0 || close(fd))
		test_fail_errno(path);
}

static void move_fd(int fd, int target, int flags)
{
	if (fd < 0 || dup3(fd, target, flags) != target)
		test_fail_errno("place fd");
	close(fd);
}

static int add_watch(int ifd, const char *path, uint32_t mask, int want_wd)
{
	int wd = inotify_add_watch(ifd, path, mask);

	if (wd < 0)
		test_fail_errno(path);
	if (want_wd && wd != want_wd)
		test_fail("watch on %s got wd %d, not %d", path, wd, want_wd);
	return wd;
}

/* Read every queued event of a non-blocking instance; returns how many. */
static int drain(int ifd)
{
	char buf[4096] __attribute__((aligned(8)));
	int nr = 0;
	ssize_t n;

	while ((n = read(ifd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n; nr++) {
			struct inotify_event *ev = (struct inotify_event *)(buf + off);

			off += sizeof(*ev) + ev->len;
		}
	}
	return nr;
}

static void set_up_nonblocking(void)
{
	int ifd = inotify_init1(IN_NONBLOCK);

	move_fd(ifd, NB_FD, 0);
	add_watch(NB_FD, "watched", IN_CREATE | IN_DELETE, 1);
	add_watch(NB_FD, "watched/modify", IN_MODIFY, 2);
	add_watch(NB_FD, "watched/attrib", IN_ATTRIB | IN_ONESHOT, 3);
	add_watch(NB_FD, "watched/close", IN_CLOSE_WRITE, 4);
	add_watch(NB_FD, "watched/close", IN_MODIFY | IN_MASK_ADD, 4);
	if (inotify_rm_watch(NB_FD, add_watch(NB_FD, "gone", IN_ACCESS, 5)))
		test_fail_errno("inotify_rm_watch");
	add_watch(NB_FD, "watched/open", IN_OPEN | IN_EXCL_UNLINK, 6);
	if (drain(NB_FD) != 1) /* IN_IGNORED of wd 5 */
		test_fail("the removed watch did not queue one IN_IGNORED");
	if (dup3(NB_FD, NB_DUP_FD, O_CLOEXEC) != NB_DUP_FD)
		test_fail_errno("dup3");
}

/* wd FAR_WD: the numbers below it used up, the instance made blocking afterwards. */
static void set_up_blocking(void)
{
	int ifd = inotify_init1(IN_NONBLOCK);

	move_fd(ifd, BLOCK_FD, 0);
	for (int i = 1; i < FAR_WD; i++)
		if (inotify_rm_watch(BLOCK_FD, add_watch(BLOCK_FD, "far", IN_ATTRIB, i)))
			test_fail_errno("inotify_rm_watch");
	add_watch(BLOCK_FD, "far", IN_ATTRIB, FAR_WD);
	drain(BLOCK_FD);
	if (fcntl(BLOCK_FD, F_SETFL, 0))
		test_fail_errno("F_SETFL");
}

static void snapshot(char (*fdinfo)[4096])
{
	char path[64];

	for (int i = 0; i < NR_FDS; i++) {
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", test_fds[i]);
		read_file(path, fdinfo[i], sizeof(fdinfo[i]));
	}
}

/* fdinfo texts equal but for the mark flags in lost_bits of each watch's mask. */
static bool same_fdinfo(const char *a, const char *b, unsigned int lost_bits)
{
	while (*a && *b) {
		size_t len_a = strcspn(a, "\n"), len_b = strcspn(b, "\n");
		unsigned int mask_a, mask_b;
		int at_a = 0, at_b = 0;

		if (sscanf(a, "inotify wd:%*x ino:%*x sdev:%*x mask:%x%n", &mask_a, &at_a) == 1 &&
		    sscanf(b, "inotify wd:%*x ino:%*x sdev:%*x mask:%x%n", &mask_b, &at_b) == 1) {
			size_t head = strstr(a, "mask:") - a; /* wd, ino, sdev */

			if ((mask_a & ~lost_bits) != mask_b || strncmp(a, b, head) ||
			    len_a - at_a != len_b - at_b ||
			    strncmp(a + at_a, b + at_b, len_a - at_a))
				return false;
		} else if (len_a != len_b || strncmp(a, b, len_a)) {
			return false;
		}
		a += len_a + (a[len_a] == '\n');
		b += len_b + (b[len_b] == '\n');
	}
	return !*a && !*b;
}

static void check_queued(int ifd, int want)
{
	int queued;

	if (ioctl(ifd, FIONREAD, &queued))
		test_fail_errno("FIONREAD");
	if (queued != want)
		test_fail("fd %d: %d bytes queued, expected %d", ifd, queued, want);
}

static void touch_watched_files(void)
{
	int fd;

	make_file("watched/new");
	fd = open("watched/modify", O_WRONLY);
	if (fd < 0 || write(fd, "m", 1) != 1 || close(fd))
		test_fail_errno("modify");
	if (chmod("watched/attrib", 0600) || chmod("watched/attrib", 0644))
		test_fail_errno("chmod");
	fd = open("watched/close", O_WRONLY);
	if (fd < 0 || write(fd, "c", 1) != 1 || close(fd))
		test_fail_errno("close");
	fd = open("watched/open", O_RDONLY);
	if (fd < 0 || close(fd))
		test_fail_errno("open");
	if (unlink("watched/new") || chmod("far", 0600))
		test_fail_errno("unlink, chmod");
}

static void expect_events(int ifd, const struct event *want, int nr_want)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n = read(ifd, buf, sizeof(buf)), off = 0;
	int i = 0;

	if (n < 0)
		test_fail_errno("read events");
	for (; off < n && i < nr_want; i++) {
		struct inotify_event *ev = (struct inotify_event *)(buf + off);
		const char *name = ev->len ? ev->name : "";

		if (ev->wd != want[i].wd || ev->mask != want[i].mask || strcmp(name, want[i].name))
			test_fail("fd %d event %d: wd %d mask %#x '%s', expected %d %#x '%s'", ifd,
				  i, ev->wd, ev->mask, name, want[i].wd, want[i].mask,
				  want[i].name);
		off += sizeof(*ev) + ev->len;
	}
	if (i != nr_want || off != n)
		test_fail("fd %d: %d events read (%zd of %zd bytes), expected %d", ifd, i, off, n,
			  nr_want);
}

int main(int argc, char **argv)
{
	static const struct event nb_events[NR_NB_EVENTS] = {
		{ 1, IN_CREATE, "new" },  { 2, IN_MODIFY, "" },	     { 3, IN_ATTRIB, "" },
		{ 3, IN_IGNORED, "" },	  { 4, IN_MODIFY, "" },	     { 4, IN_CLOSE_WRITE, "" },
		{ 6, IN_OPEN, "" },	  { 1, IN_DELETE, "new" },
	};
	static const struct event far_events[] = { { FAR_WD, IN_ATTRIB, "" } };
	const char *lost = getenv("ZDTM_INOTIFY_FLAGS_LOST");
	unsigned int lost_bits = lost && !strcmp(lost, "1") ? IN_ONESHOT | IN_EXCL_UNLINK : 0;
	struct event want[NR_NB_EVENTS];
	int nr_want = 0;

	test_init(argc, argv);

	if (mkdir("watched", 0755))
		test_fail_errno("mkdir");
	make_file("watched/modify");
	make_file("watched/attrib");
	make_file("watched/close");
	make_file("watched/open");
	make_file("gone");
	make_file("far");
	set_up_nonblocking();
	set_up_blocking();
	snapshot(fdinfo_before);
	for (int i = 0; i < NR_FDS; i++)
		fd_flags_before[i] = fcntl(test_fds[i], F_GETFD);

	test_ready();
	test_wait_sigterm();

	snapshot(fdinfo_after);
	for (int i = 0; i < NR_FDS; i++) {
		if (!same_fdinfo(fdinfo_before[i], fdinfo_after[i], lost_bits))
			test_fail("fd %d: fdinfo\n%s\nbecame\n%s", test_fds[i], fdinfo_before[i],
				  fdinfo_after[i]);
		if (fcntl(test_fds[i], F_GETFD) != fd_flags_before[i])
			test_fail("fd %d: fd flags %d became %d", test_fds[i], fd_flags_before[i],
				  fcntl(test_fds[i], F_GETFD));
	}
	check_queued(NB_FD, 0);
	check_queued(BLOCK_FD, 0);
	touch_watched_files();
	/* Through the dup: one description, one queue. */
	/* Without IN_ONESHOT the second chmod's IN_ATTRIB merges into the first: no IN_IGNORED. */
	for (int i = 0; i < NR_NB_EVENTS; i++)
		if (!lost_bits || nb_events[i].mask != IN_IGNORED)
			want[nr_want++] = nb_events[i];
	expect_events(NB_DUP_FD, want, nr_want);
	check_queued(NB_FD, 0);
	expect_events(BLOCK_FD, far_events, 1);
	test_pass();
}
