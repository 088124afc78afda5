/*
 * External files: fds no core kind handles (an unknown character device, a socket whose
 * peer is outside the tree) are offered to plugins (DUMP_EXT_FILE / RESTORE_EXT_FILE);
 * when no plugin takes one, the dump is refused with an error naming the fd and kind.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
	if (!strncmp(p->link, "anon_inode:", 11))
		return "anonymous-inode files of this kind (epoll, inotify, ...) are";
	if (S_ISCHR(p->st.st_mode))
		return "this character device is";
	if (S_ISBLK(p->st.st_mode))
		return "block devices are";
	if (fd_is_mqueue(p))
		return "POSIX message queues (mq_open) are";
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

static int ext_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	ExtFileEntry efe = EXT_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	int lfd, ret;

	lfd = grab_task_fd(p);
	if (lfd < 0)
		return lfd;
	ret = run_plugins(DUMP_EXT_FILE, lfd, id);
	close(lfd);
	if (ret == -ENOTSUP)
		refuse_fd(p);
	if (ret >= 0)
		ret = dump_fown(p, &fown);
	if (ret < 0)
		return ret;

	pr_info("fd %d of task %d (%s): dumped by a plugin as file %u\n", p->fd, p->pid, p->link, id);
	efe.id = id;
	efe.fown = &fown;
	fe.type = FD_TYPES__EXT;
	fe.id = id;
	fe.ext = &efe;
	return write_file_entry(&fe);
}

/* The plugin finds its own images by the id; nothing else is in the entry. */
static int ext_collect(struct file_desc *d)
{
	const ExtFileEntry *efe = d->fe->ext;

	if (!efe) {
		pr_err("files.img: file %u has type EXT but no ext entry\n", d->id);
		return -EINVAL;
	}
	if (efe->id != d->id) {
		pr_err("files.img: file %u: its ext entry names file %u\n", d->id, efe->id);
		return -EINVAL;
	}
	return collect_owner(d, efe->fown);
}

static int ext_open(const struct file_desc *d)
{
	bool retry_needed = false;
	int fd = run_plugins(RESTORE_EXT_FILE, d->id, &retry_needed);

	/* Files are opened in fd order, once each: there is no later pass to retry in. */
	if (retry_needed) {
		pr_err("file %u: a plugin asked to open it again later, which this criu does not support\n",
		       d->id);
		if (fd >= 0)
			close(fd);
		return -ENOTSUP;
	}
	if (fd == -ENOTSUP)
		pr_err("file %u was dumped by a plugin, and no loaded plugin restores it\n", d->id);
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
