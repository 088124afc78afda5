/*
 * Test plugin "test_unixsk": takes a Unix socket whose peer, outside the dumped tree, is
 * bound (DUMP_UNIX_SK): saves the socket's type and the peer's name in unixsk-INO.img in
 * the images dir; restore (RESTORE_UNIX_SK) connects a new socket of that type to that
 * name. A socket whose peer has no name it leaves to others (-ENOTSUP).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "criu-plugin.h"

struct saved_sk {
	int type;
	socklen_t len;
	struct sockaddr_un peer;
};

static int open_saved(int ino, int flags)
{
	char name[64];

	snprintf(name, sizeof(name), "unixsk-%d.img", ino);
	return openat(criu_get_image_dir(), name, flags | O_CLOEXEC, 0600);
}

static int unixsk_init(int stage)
{
	(void)stage;
	return 0;
}

static void unixsk_exit(int stage, int ret)
{
	(void)stage;
	(void)ret;
}

CR_PLUGIN_REGISTER("test_unixsk", unixsk_init, unixsk_exit)

static int unixsk_dump(int fd, int ino)
{
	struct saved_sk s = { .len = sizeof(s.peer) };
	socklen_t len = sizeof(s.type);
	int out;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &s.type, &len) ||
	    getpeername(fd, (struct sockaddr *)&s.peer, &s.len) || s.len <= sizeof(sa_family_t))
		return -ENOTSUP;
	out = open_saved(ino, O_WRONLY | O_CREAT | O_TRUNC);
	if (out < 0)
		return -errno;
	if (write(out, &s, sizeof(s)) != sizeof(s)) {
		close(out);
		return -EIO;
	}
	close(out);
	return 0;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_UNIX_SK, unixsk_dump)

static int unixsk_restore(int ino)
{
	int in = open_saved(ino, O_RDONLY), fd;
	struct saved_sk s;

	if (in < 0)
		return -ENOTSUP;
	if (read(in, &s, sizeof(s)) != sizeof(s)) {
		close(in);
		return -EIO;
	}
	close(in);
	fd = socket(AF_UNIX, s.type, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&s.peer, s.len)) {
		close(fd);
		return -errno;
	}
	return fd;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_UNIX_SK, unixsk_restore)
