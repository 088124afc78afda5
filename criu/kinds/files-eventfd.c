/*
 * eventfds (anon_inode:[eventfd], file_entry.efd): the counter, EFD_SEMAPHORE and the file
 * status flags, read from the fd's fdinfo; restored as a new eventfd written up to the
 * counter.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "proc_parse.h"

#include "eventfd.pb-c.h"

#define EVENTFD_LINK "anon_inode:[eventfd]"

/*
 * The image keeps EFD_SEMAPHORE in the flags' bit 0, O_WRONLY's: an eventfd is always
 * O_RDWR, so the bit is otherwise clear (images/eventfd.proto).
 */
_Static_assert(EFD_SEMAPHORE == O_WRONLY, "EFD_SEMAPHORE must be O_WRONLY's bit");

static bool eventfd_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, EVENTFD_LINK);
}

/* ---------------------------------------------------------------- dump ---- */

/* "eventfd-semaphore:" is there since Linux 6.5; without it the dump is refused. */
static int read_eventfd_state(const struct fd_parms *p, uint64_t *counter, bool *semaphore)
{
	struct proc_fdinfo fi;
	int sem = 0, ret;

	ret = parse_fd_fdinfo(p->pid, p->fd, &fi);
	if (!ret)
		ret = fdinfo_scan(&fi, "eventfd-count:", 1, "%" SCNx64, counter);
	if (!ret)
		ret = fdinfo_scan(&fi, "eventfd-semaphore:", 1, "%d", &sem);
	*semaphore = sem == 1;
	return ret;
}

static int eventfd_dump(const struct fd_parms *p, uint32_t id)
{
	EventfdFileEntry efe = EVENTFD_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	bool semaphore;
	int ret;

	ret = read_eventfd_state(p, &efe.counter, &semaphore);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	efe.id = id;
	efe.flags = p->flags | (semaphore ? EFD_SEMAPHORE : 0);
	efe.fown = &fown;
	fe.type = FD_TYPES__EVENTFD;
	fe.id = id;
	fe.efd = &efe;
	pr_debug("fd %d of task %d: eventfd, counter %llu%s\n", p->fd, p->pid,
		 (unsigned long long)efe.counter, semaphore ? ", semaphore" : "");
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/* d->kind stays NULL: open() reads the entry itself. */
static int eventfd_collect(struct file_desc *d)
{
	const EventfdFileEntry *efe = d->fe->efd;

	if (!efe || efe->id != d->id) {
		pr_err("files.img: eventfd file %u has no eventfd entry of its own\n", d->id);
		return -EINVAL;
	}
	/* A write may add at most UINT64_MAX - 1 (the kernel's own signals may reach more). */
	if (efe->counter == UINT64_MAX) {
		pr_err("files.img: eventfd file %u: counter %#llx cannot be set from user space\n",
		       d->id, (unsigned long long)efe->counter);
		return -EINVAL;
	}
	return collect_owner(d, efe->fown);
}

/* eventfd() takes an unsigned int: the 64-bit counter is written to a zero one instead. */
static int eventfd_open(const struct file_desc *d)
{
	const EventfdFileEntry *efe = d->fe->efd;
	int fd;

	fd = eventfd(0, EFD_CLOEXEC | (efe->flags & EFD_SEMAPHORE));
	if (fd < 0) {
		pr_perror("eventfd file %u: cannot create it", d->id);
		return -errno;
	}
	if (efe->counter && write(fd, &efe->counter, sizeof(efe->counter)) < 0) {
		int err = errno;

		pr_err("eventfd file %u: cannot set its counter to %llu: %s\n", d->id,
		       (unsigned long long)efe->counter, strerror(err));
		close(fd);
		return -err;
	}
	return restore_status_flags(fd, efe->flags & ~EFD_SEMAPHORE, d);
}

const struct fdtype_ops eventfd_fdtype_ops = {
	.type = FD_TYPES__EVENTFD,
	.name = "eventfd",
	.owns = eventfd_owns,
	.dump = eventfd_dump,
	.collect = eventfd_collect,
	.open = eventfd_open,
	.inheritable = true,
};
