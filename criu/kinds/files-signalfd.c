/*
 * signalfds (anon_inode:[signalfd], file_entry.sgfd): the signal mask and the file status
 * flags, read from the fd's fdinfo; restored as a new signalfd with that mask. The
 * signals it reads are the reading task's pending ones, restored with the task.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "proc_parse.h"

#include "signalfd.pb-c.h"

#define SIGNALFD_LINK "anon_inode:[signalfd]"

static bool signalfd_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, SIGNALFD_LINK);
}

/* ---------------------------------------------------------------- dump ---- */

static int signalfd_dump(const struct fd_parms *p, uint32_t id)
{
	SignalfdEntry sfe = SIGNALFD_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	struct proc_fdinfo fi;
	int ret;

	ret = parse_fd_fdinfo(p->pid, p->fd, &fi);
	if (!ret)
		ret = fdinfo_scan(&fi, "sigmask:", 1, "%" SCNx64, &sfe.sigmask);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	sfe.id = id;
	sfe.flags = p->flags;
	sfe.fown = &fown;
	fe.type = FD_TYPES__SIGNALFD;
	fe.id = id;
	fe.sgfd = &sfe;
	pr_debug("fd %d of task %d: signalfd, mask %#" PRIx64 "\n", p->fd, p->pid, sfe.sigmask);
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/* d->kind stays NULL: open() reads the entry itself. */
static int signalfd_collect(struct file_desc *d)
{
	const SignalfdEntry *sfe = d->fe->sgfd;

	if (!sfe || sfe->id != d->id) {
		pr_err("files.img: signalfd file %u has no signalfd entry of its own\n", d->id);
		return -EINVAL;
	}
	return collect_owner(d, sfe->fown);
}

/*
 * The raw system call with the kernel's 64-bit mask: glibc's sigaddset() refuses the
 * signals it keeps for itself (32, 33), which a task may still read through a signalfd.
 */
static int signalfd_open(const struct file_desc *d)
{
	const SignalfdEntry *sfe = d->fe->sgfd;
	uint64_t mask = sfe->sigmask;
	int fd;

	fd = syscall(SYS_signalfd4, -1, &mask, sizeof(mask), SFD_CLOEXEC);
	if (fd < 0) {
		pr_perror("signalfd file %u: cannot create it with mask %#llx", d->id,
			  (unsigned long long)mask);
		return -errno;
	}
	return restore_status_flags(fd, sfe->flags, d);
}

const struct fdtype_ops signalfd_fdtype_ops = {
	.type = FD_TYPES__SIGNALFD,
	.name = "signalfd",
	.owns = signalfd_owns,
	.dump = signalfd_dump,
	.collect = signalfd_collect,
	.open = signalfd_open,
	.inheritable = true,
};
