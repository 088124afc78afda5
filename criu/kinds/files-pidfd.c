/*
 * pidfds (anon_inode:[pidfd], on pidfs since Linux 6.9; file_entry.pidfd): the process a
 * pidfd names (a task of the tree, or -1 for one that had exited and was reaped),
 * PIDFD_NONBLOCK, PIDFD_THREAD and the pidfs inode, read from the fd's fdinfo.
 *
 * Restore cannot open a pidfd where files are usually opened: a description several tasks
 * share is opened by their common ancestor before it forks them, when the task it names
 * may not exist yet. So criu's main process makes every pidfd once the whole tree exists
 * and before any task opens its fds (tree_forked), and parks it in the fdstore; each task
 * that holds it takes that very description, shared as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdstore.h"
#include "files.h"
#include "log.h"
#include "namespaces.h"
#include "proc_parse.h"
#include "pstree.h"

#include "pidfd.pb-c.h"

#define PIDFD_LINK "anon_inode:[pidfd]"
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#define PIDFD_OPEN_FLAGS (PIDFD_NONBLOCK | PIDFD_THREAD)
#define PIDFS_MAGIC	 0x50494446

static bool pidfd_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, PIDFD_LINK);
}

/* ---------------------------------------------------------------- dump ---- */

/*
 * "Pid:" names the process as criu sees it; a task of the tree is named in the images by its
 * pid in the tree's pid namespace (pidns_img_pid()), whatever "NSpid:" says further down.
 */
static int read_named_pid(const struct fd_parms *p, pid_t *pid)
{
	struct proc_fdinfo fi;
	int ret;

	ret = parse_fd_fdinfo(p->pid, p->fd, &fi);
	return ret ? ret : fdinfo_scan(&fi, "Pid:", 1, "%d", pid);
}

/* The task of the tree that has tid as one of its other threads, or NULL. */
static const struct pstree_item *thread_owner(pid_t tid)
{
	for (struct pstree_item *item = root_item; item; item = pstree_next(item))
		for (unsigned int i = 0; i < item->nr_threads; i++)
			if (item->threads[i] == tid)
				return item;
	return NULL;
}

/*
 * What restore can name again: a task of the tree (restored with its pid) or a process
 * that is gone. Other threads are created by the restorer, after every fd is in place.
 */
static int check_named_pid(const struct fd_parms *p, pid_t pid)
{
	const struct pstree_item *owner;

	if (pid == -1 || pstree_find(pid))
		return 0;
	owner = thread_owner(pid);
	if (owner)
		pr_err("fd %d of task %d: pidfd on thread %d of task %d: pidfds on threads other "
		       "than a task's main one are not supported\n",
		       p->fd, p->pid, pid, owner->pid);
	else
		pr_err("fd %d of task %d: pidfd on process %d, which is outside the dumped tree\n",
		       p->fd, p->pid, pid);
	return -ENOTSUP;
}

/* pidfs gives each process its own inode; before it, every pidfd had the anonymous one. */
static uint32_t pidfs_ino(const struct fd_parms *p)
{
	char path[64];
	struct statfs sfs;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->fd);
	if (statfs(path, &sfs) || sfs.f_type != PIDFS_MAGIC)
		return 0;
	return (uint32_t)p->st.st_ino;
}

static int pidfd_dump(const struct fd_parms *p, uint32_t id)
{
	PidfdEntry pfe = PIDFD_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	pid_t pid;
	int ret;

	ret = read_named_pid(p, &pid);
	if (!ret)
		ret = check_named_pid(p, pid);
	if (ret)
		return ret;
	/* Restore opens it with pidfd_open(), which gives O_RDWR and takes only these. */
	if ((p->flags & O_ACCMODE) != O_RDWR || (p->flags & ~(O_ACCMODE | PIDFD_OPEN_FLAGS))) {
		pr_err("fd %d of task %d: pidfd with file flags %#o, which pidfd_open() cannot "
		       "give\n",
		       p->fd, p->pid, p->flags);
		return -ENOTSUP;
	}
	ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	pfe.id = id;
	pfe.ino = pidfs_ino(p);
	pfe.flags = p->flags & PIDFD_OPEN_FLAGS;
	pfe.nspid = pid == -1 ? -1 : pidns_img_pid(pid);
	pfe.fown = &fown;
	fe.type = FD_TYPES__PIDFD;
	fe.id = id;
	fe.pidfd = &pfe;
	pr_debug("fd %d of task %d: pidfd on %d, inode %u, flags %#o\n", p->fd, p->pid, pid,
		 pfe.ino, pfe.flags);
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

struct pidfd_file {
	uint32_t id;
	uint32_t ino;
	uint32_t flags;
	pid_t pid;    /* -1: a process that is gone */
	int store_id; /* its description in the fdstore; -1 until pidfd_tree_forked() */
};

/*
 * Collected in criu before forking, in memory shared with the tasks: criu sets store_id
 * once they exist, and they read it in prepare_fds().
 */
static struct pidfd_file *pidfd_files;
static size_t nr_pidfd_files, pidfd_files_room;

static int grow_pidfd_files(void)
{
	size_t room = pidfd_files_room ? 2 * pidfd_files_room : 64;
	struct pidfd_file *bigger;

	bigger = mmap(NULL, room * sizeof(*bigger), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (bigger == MAP_FAILED) {
		pr_perror("cannot map room for %zu pidfds", room);
		return -ENOMEM;
	}
	if (pidfd_files) {
		memcpy(bigger, pidfd_files, nr_pidfd_files * sizeof(*bigger));
		munmap(pidfd_files, pidfd_files_room * sizeof(*bigger));
	}
	pidfd_files = bigger;
	pidfd_files_room = room;
	return 0;
}

static int check_pidfd_entry(const struct file_desc *d, const PidfdEntry *pfe)
{
	if (!pfe || pfe->id != d->id) {
		pr_err("files.img: pidfd file %u has no pidfd entry of its own\n", d->id);
		return -EINVAL;
	}
	if (pfe->flags & ~PIDFD_OPEN_FLAGS) {
		pr_err("files.img: pidfd file %u: flags %#o, which pidfd_open() does not take\n",
		       d->id, pfe->flags);
		return -EINVAL;
	}
	if (pfe->nspid != -1 && !pstree_find(pfe->nspid)) {
		pr_err("files.img: pidfd file %u names pid %d, which is no task of the tree\n",
		       d->id, pfe->nspid);
		return -EINVAL;
	}
	return 0;
}

/* d->kind stays NULL: open() finds the file in pidfd_files by its id. */
static int pidfd_collect(struct file_desc *d)
{
	const PidfdEntry *pfe = d->fe->pidfd;
	int ret;

	ret = check_pidfd_entry(d, pfe);
	if (!ret)
		ret = collect_owner(d, pfe->fown);
	if (!ret && nr_pidfd_files == pidfd_files_room)
		ret = grow_pidfd_files();
	if (ret)
		return ret;
	pidfd_files[nr_pidfd_files++] = (struct pidfd_file){
		.id = d->id,
		.ino = pfe->ino,
		.flags = pfe->flags,
		.pid = pfe->nspid,
		.store_id = -1,
	};
	return 0;
}

static void pidfd_collect_fini(void)
{
	if (pidfd_files)
		munmap(pidfd_files, pidfd_files_room * sizeof(*pidfd_files));
	pidfd_files = NULL;
	nr_pidfd_files = pidfd_files_room = 0;
}

/* A pidfd on pid with pf's flags, parked in the fdstore for the tasks. */
static int make_pidfd(struct pidfd_file *pf, pid_t pid)
{
	int fd = syscall(SYS_pidfd_open, pid, pf->flags);

	if (fd < 0) {
		pr_perror("pidfd file %u: cannot open a pidfd on %d with flags %#o", pf->id, pid,
			  pf->flags);
		return -errno;
	}
	pf->store_id = fdstore_add(fd);
	close(fd);
	if (pf->store_id < 0)
		return pf->store_id;
	pr_debug("pidfd file %u: on %d (%s), flags %#o\n", pf->id, pid,
		 pf->pid == -1 ? "stands in for a reaped process" : "a task", pf->flags);
	return 0;
}

/* Whether pf names the same reaped process as dead: a pidfs inode of 0 joins nothing. */
static bool same_dead_process(const struct pidfd_file *pf, const struct pidfd_file *dead)
{
	return pf == dead || (pf->pid == -1 && pf->ino && pf->ino == dead->ino);
}

/*
 * Nothing is left of a reaped process but the pidfds that hold it. A helper stands in for
 * it: it kills itself at once, and every pidfd of the images with the same pidfs inode is
 * opened on it before it is reaped (pidfd_open() takes a zombie, PIDFD_THREAD too); then
 * they all name one process that exited (POLLIN, "Pid: -1"), as the originals did. It dies
 * by SIGKILL, as upstream criu's does: the images do not say how the original died.
 * Its pid is taken for that moment only, while no task of the tree makes one.
 */
static int make_dead_pidfds(struct pidfd_file *dead)
{
	struct pidfd_file *end = pidfd_files + nr_pidfd_files;
	int status, ret = 0;
	pid_t helper;

	helper = fork();
	if (helper < 0) {
		pr_perror("pidfd file %u: cannot fork a process to stand for the reaped one",
			  dead->id);
		return -errno;
	}
	if (helper == 0) {
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	for (struct pidfd_file *pf = dead; pf < end && !ret; pf++)
		if (same_dead_process(pf, dead))
			ret = make_pidfd(pf, helper);
	if (waitpid(helper, &status, 0) != helper) {
		pr_perror("pidfd file %u: cannot reap the process standing for the reaped one",
			  dead->id);
		return -ECHILD;
	}
	return ret;
}

/* tree_forked: every task exists and none has opened its fds yet. */
static int pidfd_tree_forked(void)
{
	int ret = 0;

	for (size_t i = 0; i < nr_pidfd_files && !ret; i++) {
		struct pidfd_file *pf = &pidfd_files[i];

		if (pf->store_id >= 0)
			continue; /* made with an earlier pidfd on the same reaped process */
		ret = pf->pid == -1 ? make_dead_pidfds(pf) : make_pidfd(pf, pidns_host_pid(pf->pid));
	}
	if (!ret && nr_pidfd_files)
		pr_info("%zu pidfds made for the tasks\n", nr_pidfd_files);
	return ret;
}

static int pidfd_open_file(const struct file_desc *d)
{
	for (size_t i = 0; i < nr_pidfd_files; i++)
		if (pidfd_files[i].id == d->id)
			return fdstore_get(pidfd_files[i].store_id);
	pr_err("pidfd file %u was not collected\n", d->id);
	return -ENOENT;
}

const struct fdtype_ops pidfd_fdtype_ops = {
	.type = FD_TYPES__PIDFD,
	.name = "pidfd",
	.owns = pidfd_owns,
	.dump = pidfd_dump,
	.collect = pidfd_collect,
	.collect_fini = pidfd_collect_fini,
	.open = pidfd_open_file,
	.parked = true,
	.tree_forked = pidfd_tree_forked,
};
