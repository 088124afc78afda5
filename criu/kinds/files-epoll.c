/*
 * epoll instances: the instance itself on open, and its watched files registered once
 * the task that dumped it has all its fds again (fdtype_ops.finish), since the kernel
 * keys each registration by file and fd number. As in CRIU's images, a watched file is
 * named by its fd number in that task alone (eventpoll_tfd_entry.id is not its file id).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdinfo.pb-c.h"
#include "files.h"
#include "log.h"
#include "pstree.h"

/* ---------------------------------------------------------------- dump ---- */

static bool epoll_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, "anon_inode:[eventpoll]");
}

/*
 * Whether fd of task holder is the file registration toff of tfd in epoll efd (of task
 * pid) watches. kcmp() takes the candidate's task and fd first, the epoll's task second.
 */
static bool is_watched_file(pid_t pid, int efd, pid_t holder, int fd, uint32_t tfd, uint32_t toff)
{
	struct kcmp_epoll_slot slot = { .efd = efd, .tfd = tfd, .toff = toff };

	return syscall(SYS_kcmp, holder, pid, KCMP_EPOLL_TFD, fd, &slot) == 0;
}

/*
 * An epoll in flight (p->pid is criu, which took it from a socket's queue): restore
 * registers its files from the task that puts it back there (fdtype_ops.finish_in_flight),
 * under their numbers, so a task of the tree must hold each one at its number.
 */
static int find_in_flight_target(const struct fd_parms *p, const EventpollTfdEntry *t, uint32_t toff)
{
	struct pstree_item *item;

	for (item = root_item; item; item = pstree_next(item))
		if (!item->zombie && is_watched_file(p->pid, p->fd, item->pid, t->tfd, t->tfd, toff))
			return 0;
	pr_err("an epoll in flight watches fd %u (inode %llu), which no task of the tree holds at that number: not supported\n",
	       t->tfd, (unsigned long long)t->inode);
	return -ENOTSUP;
}

/*
 * The fd of the task that holds the watched file: its registration's number, or, when
 * that fd was closed (or now holds another file) after a dup, another fd that holds it.
 */
static int find_watched_fd(const struct fd_parms *p, const EventpollTfdEntry *t, uint32_t toff)
{
	char path[64];
	size_t nr = 0;
	int *fds, fd = -1, ret;

	if (is_watched_file(p->pid, p->fd, p->pid, t->tfd, t->tfd, toff))
		return t->tfd;
	snprintf(path, sizeof(path), "/proc/%d/fd", p->pid);
	ret = list_fds(path, &fds, &nr);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr && fd < 0; i++)
		if (is_watched_file(p->pid, p->fd, p->pid, fds[i], t->tfd, toff))
			fd = fds[i];
	free(fds);
	if (fd < 0) {
		pr_err("fd %d of task %d: epoll watches fd %u (inode %llu), which is open in no fd "
		       "of the task: not supported\n",
		       p->fd, p->pid, t->tfd, (unsigned long long)t->inode);
		return -ENOTSUP;
	}
	return fd;
}

/*
 * toff: how many registrations before t used the same fd number (closed and reused).
 * A file watched under a number it no longer has is written under the fd that holds it,
 * the only name the image has for it: it comes back registered under that number.
 */
static int locate_watched_file(const struct fd_parms *p, EventpollTfdEntry *t, uint32_t toff)
{
	int fd;

	if (p->pid == getpid())
		return find_in_flight_target(p, t, toff);
	fd = find_watched_fd(p, t, toff);

	if (fd < 0)
		return fd;
	if (fd != (int)t->tfd)
		pr_warn("fd %d of task %d: epoll watches fd %u, now closed; its file is at fd %d, "
			"under which it is restored\n",
			p->fd, p->pid, t->tfd, fd);
	t->tfd = fd;
	return 0;
}

static int add_tfd(EventpollFileEntry *ee, const EventpollTfdEntry *t)
{
	EventpollTfdEntry **grown = realloc(ee->tfd, (ee->n_tfd + 1) * sizeof(*grown));

	if (grown)
		ee->tfd = grown;
	if (grown)
		grown[ee->n_tfd] = malloc(sizeof(**grown));
	if (!grown || !grown[ee->n_tfd]) {
		pr_err("out of memory reading epoll %u's watched files\n", ee->id);
		return -ENOMEM;
	}
	*grown[ee->n_tfd++] = *t;
	return 0;
}

/* The tfd lines of /proc/PID/fdinfo/FD, as the kernel prints each registration. */
static int read_watched(const struct fd_parms *p, EventpollFileEntry *ee)
{
	char path[64], line[256];
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", p->pid, p->fd);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		EventpollTfdEntry t = EVENTPOLL_TFD_ENTRY__INIT;
		unsigned long long data, ino;
		long long pos;
		unsigned int dev;

		if (strncmp(line, "tfd:", 4))
			continue;
		if (sscanf(line, "tfd: %u events: %x data: %llx pos:%lli ino:%llx sdev:%x", &t.tfd,
			   &t.events, &data, &pos, &ino, &dev) != 6) {
			pr_err("%s: cannot parse '%.*s'\n", path, (int)strcspn(line, "\n"), line);
			ret = -EINVAL;
			break;
		}
		t.data = data;
		t.has_dev = t.has_inode = t.has_pos = true;
		t.dev = dev;
		t.inode = ino;
		t.pos = pos;
		ret = add_tfd(ee, &t);
	}
	fclose(f);
	return ret;
}

static void free_watched(EventpollFileEntry *ee)
{
	for (size_t i = 0; i < ee->n_tfd; i++)
		free(ee->tfd[i]);
	free(ee->tfd);
}

static int epoll_dump(const struct fd_parms *p, uint32_t id)
{
	EventpollFileEntry ee = EVENTPOLL_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	int ret;

	ee.id = id;
	ee.flags = p->flags;
	ee.fown = &fown;
	ret = dump_fown(p, &fown);
	if (!ret)
		ret = read_watched(p, &ee);
	/* Backwards: locating a registration may renumber it, which toffs before it must not see. */
	for (size_t i = ee.n_tfd; i-- > 0 && !ret;) {
		uint32_t toff = 0;

		for (size_t j = 0; j < i; j++)
			toff += ee.tfd[j]->tfd == ee.tfd[i]->tfd;
		ret = locate_watched_file(p, ee.tfd[i], toff);
	}
	if (!ret) {
		fe.type = FD_TYPES__EVENTPOLL;
		fe.id = id;
		fe.epfd = &ee;
		ret = write_file_entry(&fe);
	}
	free_watched(&ee);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

static int epoll_collect(struct file_desc *d)
{
	const EventpollFileEntry *ee = d->fe->epfd;

	if (!ee || ee->id != d->id) {
		pr_err("files.img: epoll %u has no eventpoll entry of its own\n", d->id);
		return -EINVAL;
	}
	return collect_owner(d, ee->fown);
}

/* O_NONBLOCK comes back; O_ASYNC would not (epoll has no fasync), nor could it be dumped. */
static int epoll_open(const struct file_desc *d)
{
	int fd = epoll_create1(0);

	if (fd < 0) {
		pr_perror("epoll %u: epoll_create1", d->id);
		return -errno;
	}
	return restore_status_flags(fd, d->fe->epfd->flags, d);
}

static int epoll_check_finish(const struct file_desc *d, const struct task_fds *fds)
{
	const EventpollFileEntry *ee = d->fe->epfd;

	for (size_t i = 0; i < ee->n_tfd; i++) {
		if (!task_fd_file(fds, ee->tfd[i]->tfd)) {
			pr_err("epoll %u watches fd %u, which task %d does not have\n", d->id,
			       ee->tfd[i]->tfd, fds->pid);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * The kernel adds EPOLLERR and EPOLLHUP to every registration, so a one-shot watch that
 * had fired (only its flag bits left) comes back armed for those two alone.
 */
static int epoll_finish(const struct file_desc *d, int fd, const struct task_fds *fds)
{
	const EventpollFileEntry *ee = d->fe->epfd;

	(void)fds; /* epoll_check_finish() found every watched fd in the task */
	for (size_t i = 0; i < ee->n_tfd; i++) {
		const EventpollTfdEntry *t = ee->tfd[i];
		struct epoll_event ev = { .events = t->events, .data.u64 = t->data };

		if (epoll_ctl(fd, EPOLL_CTL_ADD, t->tfd, &ev)) {
			pr_perror("epoll %u: cannot watch fd %u (events %#x)", d->id, t->tfd,
				  t->events);
			return -errno;
		}
	}
	pr_debug("epoll %u: %zu files watched again\n", d->id, ee->n_tfd);
	return 0;
}

const struct fdtype_ops epoll_fdtype_ops = {
	.type = FD_TYPES__EVENTPOLL,
	.name = "epoll",
	.owns = epoll_owns,
	.dump = epoll_dump,
	.collect = epoll_collect,
	.open = epoll_open,
	.inheritable = true,
	.finish = epoll_finish,
	.check_finish = epoll_check_finish,
	.finish_in_flight = true,
};
