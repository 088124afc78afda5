/*
 * Service fds: criu's own descriptors parked at fixed numbers just below the soft
 * RLIMIT_NOFILE, where a restored task's fds are least likely to be.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "servicefd.h"

/* Highest reserved number; 0 until first computed. Inherited by forked restore tasks. */
static int service_fd_base;
static bool service_fd_installed[SERVICE_FD_MAX];

/*
 * Computed once: criu may change its limits later, but numbers already handed out
 * must stay where they are.
 */
static int sfd_base(void)
{
	struct rlimit rl;

	if (service_fd_base)
		return service_fd_base;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (1u << 20))
		rl.rlim_cur = 1u << 20; /* the kernel's default nr_open */
	service_fd_base = (int)rl.rlim_cur - 1;
	return service_fd_base;
}

/*
 * Tasks that share one fd table (CLONE_FILES) each need their own service fds in it: one
 * set of numbers (a slot) per task, slot 0 the highest. Every slot is in the reserved range.
 */
static unsigned int nr_slots = 1, own_slot;

static int sfd_number(enum sfd_type type)
{
	return sfd_base() - (int)(own_slot * SERVICE_FD_MAX) - (int)type;
}

void service_fd_range(int *lowest, int *highest)
{
	*highest = sfd_base();
	*lowest = sfd_base() - (int)(nr_slots * SERVICE_FD_MAX - 1);
}

void service_fd_reserve_slots(unsigned int nr)
{
	nr_slots = nr ? nr : 1;
}

int service_fd_enter_slot(unsigned int slot)
{
	int copies[SERVICE_FD_MAX];

	if (slot >= nr_slots) {
		pr_err("service fd slot %u of %u reserved\n", slot, nr_slots);
		return -EINVAL;
	}
	for (int type = 0; type < SERVICE_FD_MAX; type++)
		copies[type] = service_fd_installed[type] ? sfd_number(type) : -1;
	own_slot = slot;
	/* Copies: the other tasks of the table go on using the numbers of their slots. */
	for (int type = 0; type < SERVICE_FD_MAX; type++) {
		if (copies[type] < 0 || dup3(copies[type], sfd_number(type), O_CLOEXEC) >= 0)
			continue;
		pr_perror("service fd %d: cannot copy fd %d to slot %u", type, copies[type], slot);
		return -errno;
	}
	return 0;
}

bool is_service_fd(int fd)
{
	int lowest, highest;

	service_fd_range(&lowest, &highest);
	return fd >= lowest && fd <= highest;
}

int install_service_fd(enum sfd_type type, int fd)
{
	int nr = sfd_number(type);

	if (fd < 0) {
		pr_err("service fd %d: no descriptor to install\n", type);
		return -EBADF;
	}
	if (fd == nr) {
		if (fcntl(fd, F_SETFD, FD_CLOEXEC)) {
			pr_perror("service fd %d: cannot set close-on-exec on %d", type, fd);
			return -errno;
		}
	} else {
		if (dup3(fd, nr, O_CLOEXEC) < 0) {
			int err = errno;

			pr_err("service fd %d: cannot move fd %d to %d: %s\n", type, fd, nr,
			       strerror(err));
			close(fd);
			return -err;
		}
		close(fd);
	}
	service_fd_installed[type] = true;
	pr_debug("service fd %d installed at %d\n", type, nr);
	return nr;
}

int get_service_fd(enum sfd_type type)
{
	if (type >= SERVICE_FD_MAX || !service_fd_installed[type])
		return -EBADF;
	return sfd_number(type);
}

void close_service_fd(enum sfd_type type)
{
	if (type >= SERVICE_FD_MAX || !service_fd_installed[type])
		return;
	close(sfd_number(type));
	service_fd_installed[type] = false;
}

/* PROC_SFD, or /proc's own fd for what is opened relative to it (AT_FDCWD with "/proc/"). */
static int proc_dir(const char *path, char *buf, size_t size, const char **rel)
{
	int fd = get_service_fd(PROC_SFD);

	if (fd >= 0) {
		*rel = path;
		return fd;
	}
	snprintf(buf, size, "/proc/%s", path);
	*rel = buf;
	return AT_FDCWD;
}

int proc_open(const char *path, int flags)
{
	char buf[PATH_MAX];
	const char *rel;
	int dir = proc_dir(path, buf, sizeof(buf), &rel);

	return openat(dir, rel, flags | O_CLOEXEC);
}

FILE *proc_fopen(const char *path, const char *mode)
{
	int fd = proc_open(path, mode[0] == 'r' && !strchr(mode, '+') ? O_RDONLY : O_WRONLY);
	FILE *f = fd >= 0 ? fdopen(fd, mode) : NULL;

	if (!f && fd >= 0) {
		int err = errno;

		close(fd);
		errno = err;
	}
	return f;
}

DIR *proc_opendir(const char *path)
{
	int fd = proc_open(path, O_RDONLY | O_DIRECTORY);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;

	if (!dir && fd >= 0) {
		int err = errno;

		close(fd);
		errno = err;
	}
	return dir;
}

int proc_path_call(const char *path, int (*fn)(const char *path, void *arg), void *arg)
{
	int proc = get_service_fd(PROC_SFD), cwd, ret, err;
	char full[PATH_MAX];

	if (proc < 0) {
		snprintf(full, sizeof(full), "/proc/%s", path);
		return fn(full, arg);
	}
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0 || fchdir(proc)) {
		err = errno;
		pr_perror("cannot go into the proc of the tasks");
		if (cwd >= 0)
			close(cwd);
		errno = err;
		return -1;
	}
	ret = fn(path, arg);
	err = errno;
	if (fchdir(cwd)) {
		pr_perror("cannot go back to the cwd after reading proc");
		ret = -1;
		err = errno;
	}
	close(cwd);
	errno = err;
	return ret;
}
