/*
 * inotify watches on tmpfs inodes inside the tree's mount namespaces, which restore makes
 * anew (new device, new inode numbers, so no dumped file handle opens them): the root
 * (init of its own pid and mount namespaces, pivoted into a root of bind mounts) watches
 * its tmpfs /watched and a file in it, and, through its child's /proc links, the root of a
 * tmpfs /nested mounted only in the child's mount namespace and a file in that (as upstream
 * zdtm's inotify01 does). After restore: the same wd numbers and masks, each watch on the
 * inode its path names now (fdinfo's ino and sdev), and each watch reporting the events
 * made on its inode, in order.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STAGE2	    "--in-root"
#define NESTED_FD   40
#define NR_WATCHES  4
#define EVENTS_SIZE 4096

static void must(int ret, const char *what)
{
	if (ret)
		test_fail_errno(what);
}

static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd))
		test_fail_errno(path);
}

/* The child: a tmpfs of its own mount namespace, its root held at NESTED_FD. */
static void __attribute__((noreturn)) child_main(void)
{
	must(unshare(CLONE_NEWNS), "unshare");
	must(mount("nested", "/nested", "tmpfs", 0, "size=64k"), "tmpfs /nested");
	put_file("/nested/inner", "inner");
	open_fd_at("/nested", O_RDONLY | O_DIRECTORY, NESTED_FD);
	test_barrier_done();
	test_wait_sigterm();
	exit(0);
}

struct watch {
	char path[64];
	uint32_t mask;
	int wd;
};

/* fdinfo's line of wd: its inode, device (the kernel's encoding) and mask. */
static void fdinfo_watch(int ifd, int wd, unsigned long long *ino, unsigned int *sdev,
			 unsigned int *mask)
{
	static char buf[4096];
	char path[64], *save;
	unsigned int got_wd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ifd);
	read_file(path, buf, sizeof(buf));
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "inotify wd:%x ino:%llx sdev:%x mask:%x", &got_wd, ino, sdev,
			   mask) == 4 &&
		    (int)got_wd == wd)
			return;
	test_fail("fdinfo of the inotify fd has no watch %d", wd);
}

/* Each watch has its wd and mask, on the inode its path names. */
static void expect_watches(int ifd, const struct watch *w)
{
	for (int i = 0; i < NR_WATCHES; i++) {
		unsigned long long ino;
		unsigned int sdev, mask;
		struct stat st;

		fdinfo_watch(ifd, w[i].wd, &ino, &sdev, &mask);
		if (stat(w[i].path, &st))
			test_fail_errno(w[i].path);
		if (ino != st.st_ino || sdev != (major(st.st_dev) << 20 | minor(st.st_dev)))
			test_fail("watch %d is on inode %#llx of device %#x, %s is %#llx of %#x",
				  w[i].wd, ino, sdev, w[i].path, (unsigned long long)st.st_ino,
				  major(st.st_dev) << 20 | minor(st.st_dev));
		if (mask != w[i].mask)
			test_fail("watch %d: mask %#x, not %#x", w[i].wd, mask, w[i].mask);
	}
}

/* The queued events, as "wd:mask:name;" each, in order. */
static void read_events(int ifd, char *out, size_t size)
{
	char buf[EVENTS_SIZE] __attribute__((aligned(8)));
	size_t used = 0;
	ssize_t len;

	out[0] = '\0';
	while ((len = read(ifd, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < len;) {
			struct inotify_event *ev = (struct inotify_event *)(buf + off);

			used += snprintf(out + used, size - used, "%d:%#x:%s;", ev->wd, ev->mask,
					 ev->len ? ev->name : "");
			off += sizeof(*ev) + ev->len;
		}
}

/* One event on each watched inode; what each watch reports, in order. */
static void make_events(const struct watch *w, char *expected, size_t size)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/created", w[0].path);
	put_file(path, "x");
	put_file(w[1].path, "changed");
	snprintf(path, sizeof(path), "%s/created", w[2].path);
	must(mkdir(path, 0755), path);
	fd = open(w[3].path, O_RDONLY);
	if (fd < 0)
		test_fail_errno(w[3].path);
	close(fd);
	snprintf(expected, size, "%d:%#x:created;%d:%#x:;%d:%#x:;%d:%#x:created;%d:%#x:;", w[0].wd,
		 IN_CREATE, w[1].wd, IN_MODIFY, w[1].wd, IN_CLOSE_WRITE, w[2].wd,
		 IN_CREATE | IN_ISDIR, w[3].wd, IN_OPEN);
}

int main(int argc, char **argv)
{
	static char expected[1024], got[1024];
	struct watch w[NR_WATCHES] = {
		{"/watched", IN_CREATE | IN_DELETE, -1},
		{"/watched/file", IN_MODIFY | IN_CLOSE_WRITE, -1},
		{"", IN_CREATE, -1},
		{"", IN_OPEN, -1},
	};
	pid_t child;
	int ifd;

	test_init(argc, argv);
	test_mnt_ns_start(argc, argv, "usr\0out\0bin\0proc\0watched\0nested\0", STAGE2);

	must(mount("watched", "/watched", "tmpfs", 0, "size=64k"), "tmpfs /watched");
	put_file("/watched/file", "file");
	child = test_fork_child(child_main);
	snprintf(w[2].path, sizeof(w[2].path), "/proc/%d/fd/%d", child, NESTED_FD);
	snprintf(w[3].path, sizeof(w[3].path), "/proc/%d/root/nested/inner", child);

	ifd = inotify_init1(IN_NONBLOCK);
	if (ifd < 0)
		test_fail_errno("inotify_init1");
	for (int i = 0; i < NR_WATCHES; i++) {
		w[i].wd = inotify_add_watch(ifd, w[i].path, w[i].mask);
		if (w[i].wd < 0)
			test_fail_errno(w[i].path);
	}
	expect_watches(ifd, w);
	read_events(ifd, got, sizeof(got));
	test_ready();
	test_wait_sigterm();

	expect_watches(ifd, w);
	read_events(ifd, got, sizeof(got));
	if (got[0])
		test_fail("events queued after the restore: %s", got);
	make_events(w, expected, sizeof(expected));
	read_events(ifd, got, sizeof(got));
	if (strcmp(got, expected))
		test_fail("events %s, expected %s", got, expected);
	test_children_verdict(&child, 1, "root");
	test_pass();
}
