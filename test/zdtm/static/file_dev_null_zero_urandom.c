/*
 * Character-device fds survive: /dev/null, /dev/zero and /dev/urandom on their fd
 * numbers with their device numbers, access modes and CLOEXEC, and they still behave
 * (null swallows, zero reads zeroes, urandom reads random bytes).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "zdtmtst.h"

struct dev_fd {
	const char *path;
	int open_flags;
	int fd;
	unsigned major, minor;
	int status_flags, fd_flags;
};

static struct dev_fd devs[] = {
	{ .path = "/dev/null", .open_flags = O_WRONLY, .fd = 40, .major = 1, .minor = 3 },
	{ .path = "/dev/zero", .open_flags = O_RDONLY, .fd = 41, .major = 1, .minor = 5 },
	{ .path = "/dev/urandom", .open_flags = O_RDONLY | O_CLOEXEC, .fd = 42, .major = 1,
	  .minor = 9 },
};

static void check_dev(struct dev_fd *dev, const char *when)
{
	struct stat st;

	if (fstat(dev->fd, &st))
		test_fail("%s: fd %d (%s): %m", when, dev->fd, dev->path);
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != dev->major ||
	    minor(st.st_rdev) != dev->minor)
		test_fail("%s: fd %d is %u:%u, expected %s (%u:%u)", when, dev->fd,
			  major(st.st_rdev), minor(st.st_rdev), dev->path, dev->major, dev->minor);
}

int main(int argc, char **argv)
{
	unsigned char buf[4096], zeroes[4096] = { 0 };

	test_init(argc, argv);

	for (unsigned i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		struct dev_fd *dev = &devs[i];
		int fd = open(dev->path, dev->open_flags);

		if (fd < 0 || dup3(fd, dev->fd, dev->open_flags & O_CLOEXEC) != dev->fd)
			test_fail_errno(dev->path);
		close(fd);
		check_dev(dev, "before dump");
		dev->status_flags = fcntl(dev->fd, F_GETFL);
		dev->fd_flags = fcntl(dev->fd, F_GETFD);
	}

	test_ready();
	test_wait_sigterm();

	for (unsigned i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		struct dev_fd *dev = &devs[i];

		check_dev(dev, "after restore");
		if (fcntl(dev->fd, F_GETFL) != dev->status_flags ||
		    fcntl(dev->fd, F_GETFD) != dev->fd_flags)
			test_fail("%s: flags %#o/%d -> %#o/%d", dev->path, dev->status_flags,
				  dev->fd_flags, fcntl(dev->fd, F_GETFL), fcntl(dev->fd, F_GETFD));
	}
	if (write(devs[0].fd, buf, sizeof(buf)) != sizeof(buf))
		test_fail_errno("write /dev/null");
	memset(buf, 0xa5, sizeof(buf));
	if (read(devs[1].fd, buf, sizeof(buf)) != sizeof(buf) || memcmp(buf, zeroes, sizeof(buf)))
		test_fail("/dev/zero did not read zeroes");
	if (read(devs[2].fd, buf, sizeof(buf)) != sizeof(buf) || !memcmp(buf, zeroes, sizeof(buf)))
		test_fail("/dev/urandom did not read random bytes");
	test_pass();
}
