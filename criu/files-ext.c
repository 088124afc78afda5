/*
 * External files: fds no core kind handles (an unknown character device, a socket whose
 * peer is outside the tree) are offered to plugins (DUMP_EXT_FILE / RESTORE_EXT_FILE);
 * when no plugin takes one, the dump is refused with an error naming the fd and kind.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "plugin.h"

/* Kinds that later issues will add, named so the refusal says what the fd is. */
static const char *unsupported_kind(const struct fd_parms *p)
{
	if (S_ISSOCK(p->st.st_mode))
		return "sockets are";
	if (S_ISFIFO(p->st.st_mode))
		return "pipes and FIFOs are";
	if (!strncmp(p->link, "anon_inode:", 11))
		return "anonymous-inode files (eventfd, epoll, signalfd, timerfd, ...) are";
	if (S_ISCHR(p->st.st_mode))
		return "this character device is";
	if (S_ISBLK(p->st.st_mode))
		return "block devices are";
	if (p->st.st_nlink == 0)
		return "deleted files of this type are";
	return "files of this type are";
}

static void refuse_fd(const struct fd_parms *p)
{
	if (S_ISCHR(p->st.st_mode) || S_ISBLK(p->st.st_mode))
		pr_err("fd %d of task %d (%s, device %u:%u): %s not supported (and no plugin took it)\n",
		       p->fd, p->pid, p->link, major(p->st.st_rdev), minor(p->st.st_rdev),
		       unsupported_kind(p));
	else
		pr_err("fd %d of task %d (%s): %s not supported (and no plugin took it)\n", p->fd, p->pid,
		       p->link, unsupported_kind(p));
}

static bool ext_owns(const struct fd_parms *p)
{
	(void)p;
	return true;
}

/*
 * criu's own reference to the task's open file description. pidfd_getfd() and not an
 * open() of /proc/PID/fd/N: sockets cannot be re-opened by path (ENXIO), and a plugin
 * must see the same description (offsets, device state), not a fresh open.
 */
static int grab_task_fd(const struct fd_parms *p)
{
	int pidfd, fd;

	pidfd = syscall(SYS_pidfd_open, p->pid, 0);
	if (pidfd < 0) {
		pr_perror("fd %d of task %d: pidfd_open", p->fd, p->pid);
		return -errno;
	}
	fd = syscall(SYS_pidfd_getfd, pidfd, p->fd, 0);
	if (fd < 0)
		pr_perror("fd %d of task %d: cannot get a copy of it (pidfd_getfd)", p->fd, p->pid);
	close(pidfd);
	return fd < 0 ? -errno : fd;
}

static int ext_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	ExtFileEntry efe = EXT_FILE_ENTRY__INIT;
	int lfd, ret;

	lfd = grab_task_fd(p);
	if (lfd < 0)
		return lfd;
	ret = run_plugins(DUMP_EXT_FILE, lfd, id);
	close(lfd);
	if (ret == -ENOTSUP)
		refuse_fd(p);
	if (ret < 0)
		return ret;

	pr_info("fd %d of task %d (%s): dumped by a plugin as file %u\n", p->fd, p->pid, p->link, id);
	efe.id = id;
	fe.type = FD_TYPES__EXT;
	fe.id = id;
	fe.ext = &efe;
	return write_file_entry(&fe);
}

static int ext_collect(const FileEntry *fe)
{
	if (!fe->ext) {
		pr_err("files.img: plugin file %u has no ext entry\n", fe->id);
		return -EINVAL;
	}
	return 0;
}

static int ext_open(const FileEntry *fe)
{
	bool retry_needed = false;
	int fd = run_plugins(RESTORE_EXT_FILE, fe->ext->id, &retry_needed);

	/* Files are opened in fd order, once each: there is no later pass to retry in. */
	if (retry_needed) {
		pr_err("file %u: a plugin asked to open it again later, which this criu does not support\n",
		       fe->id);
		if (fd >= 0)
			close(fd);
		return -ENOTSUP;
	}
	if (fd == -ENOTSUP)
		pr_err("file %u was dumped by a plugin, and no loaded plugin restores it\n", fe->id);
	return fd;
}

const struct fdtype_ops ext_fdtype_ops = {
	.type = FD_TYPES__EXT,
	.name = "plugin file",
	.owns = ext_owns,
	.dump = ext_dump,
	.collect = ext_collect,
	.open = ext_open,
};
