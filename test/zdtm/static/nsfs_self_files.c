/*
 * Namespace files come back naming the restored task's own namespaces: an fd on each of
 * /proc/self/ns/{net,uts,ipc,mnt,cgroup,user,pid} (and time where the kernel has it)
 * names the same nsfs inode as /proc/self/ns/NAME after restore, with its flags
 * (O_NONBLOCK on one, close-on-exec on another); one description is shared with a child,
 * which checks it too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FIRST_FD 40
#define SHARED_FD FIRST_FD /* net: shared with the child */

static const char *const kinds[] = { "net", "uts", "ipc", "mnt", "cgroup", "user", "pid", "time" };
#define NR_KINDS (int)(sizeof(kinds) / sizeof(kinds[0]))

static bool has_kind(int k)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[k]);
	return access(path, F_OK) == 0;
}

static int kind_flags(int k)
{
	return O_RDONLY | (k == 1 ? O_NONBLOCK : 0) | (k == 2 ? O_CLOEXEC : 0);
}

static void expect_own_ns(int fd, int k, const char *who)
{
	char path[64], link[64], want_link[64];
	struct stat st, want;
	int flags, fdflags;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[k]);
	if (fstat(fd, &st) || stat(path, &want))
		test_fail("%s: cannot stat fd %d or %s: %s", who, fd, path, strerror(errno));
	if (st.st_ino != want.st_ino || st.st_dev != want.st_dev)
		test_fail("%s: fd %d names inode %lu, %s is %lu", who, fd, (unsigned long)st.st_ino,
			  path, (unsigned long)want.st_ino);
	fd_link(fd, link, sizeof(link));
	snprintf(want_link, sizeof(want_link), "%s:[%lu]", kinds[k], (unsigned long)want.st_ino);
	if (strcmp(link, want_link))
		test_fail("%s: fd %d links to %s, expected %s", who, fd, link, want_link);
	flags = fcntl(fd, F_GETFL);
	fdflags = fcntl(fd, F_GETFD);
	if ((flags & (O_ACCMODE | O_NONBLOCK)) != (kind_flags(k) & (O_ACCMODE | O_NONBLOCK)))
		test_fail("%s: fd %d has flags %#o, expected %#o", who, fd, flags, kind_flags(k));
	if (!!(fdflags & FD_CLOEXEC) != !!(kind_flags(k) & O_CLOEXEC))
		test_fail("%s: fd %d has fd flags %#x", who, fd, fdflags);
}

static void child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	expect_own_ns(SHARED_FD, 0, "child");
	_exit(0);
}

int main(int argc, char **argv)
{
	char path[64];
	pid_t child;

	test_init(argc, argv);
	for (int k = 0; k < NR_KINDS; k++) {
		if (!has_kind(k))
			continue;
		snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[k]);
		open_fd_at(path, kind_flags(k), FIRST_FD + k);
		/* dup2() leaves close-on-exec behind. */
		if ((kind_flags(k) & O_CLOEXEC) && fcntl(FIRST_FD + k, F_SETFD, FD_CLOEXEC))
			test_fail_errno("F_SETFD");
	}
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	test_children_verdict(&child, 1, "parent");
	for (int k = 0; k < NR_KINDS; k++)
		if (has_kind(k))
			expect_own_ns(FIRST_FD + k, k, "parent");
	test_pass();
}
