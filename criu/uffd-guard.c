/*
 * The lazy-pages daemon's guardian: a child that holds a copy of every task's uffd and
 * kills the tasks still missing pages when the daemon dies without saying goodbye.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "uffd-daemon.h"

/*
 * Should the daemon die while pages are missing, the kernel would release the uffds and
 * the tasks' waiting faults would read zeroes: silently wrong memory. A child of the
 * daemon, the guardian, holds a copy of every task's uffd (so the faults keep waiting)
 * and a pidfd of it; when the daemon is gone without saying goodbye, it kills those tasks
 * and their descendants (children forked meanwhile, whose pids the daemon never learns),
 * then exits. CRIU's lazy restore ends the same way: the tasks are killed.
 */
enum guard_msg_kind { GUARD_ADD = 1, GUARD_DONE, GUARD_BYE };

struct guard_msg {
	uint32_t kind;
	int32_t pid; /* GUARD_ADD: as the daemon sees it, 0: unknown (a forked child) */
	uint64_t id;
};

struct guarded {
	uint64_t id;
	pid_t pid;
	int uffd;  /* -1 once all its pages are in */
	int pidfd; /* -1: pid unknown (a child forked meanwhile) */
};

static int guard_send(int sock, const struct guard_msg *msg, int uffd, int pidfd)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {(void *)msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[2] = {uffd, pidfd}, nr = pidfd >= 0 ? 2 : 1;
	struct cmsghdr *cm;

	if (msg->kind == GUARD_ADD) {
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nr * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		*cm = (struct cmsghdr){.cmsg_len = CMSG_LEN(nr * sizeof(int)),
				       .cmsg_level = SOL_SOCKET,
				       .cmsg_type = SCM_RIGHTS};
		memcpy(CMSG_DATA(cm), fds, nr * sizeof(int));
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) != sizeof(*msg)) {
		pr_perror("lazy pages: cannot reach the guardian");
		return -EIO;
	}
	return 0;
}

static bool pid_listed(const pid_t *pids, unsigned int nr, pid_t pid)
{
	for (unsigned int i = 0; i < nr; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* The pids whose parent is in pids[0..*nr), added to pids (up to max), from /proc. */
static void add_descendants(pid_t *pids, unsigned int *nr, unsigned int max)
{
	unsigned int before;

	do {
		char path[64], buf[512], *p;
		struct dirent *de;
		DIR *proc = opendir("/proc");
		pid_t pid, ppid;

		before = *nr;
		while (proc && (de = readdir(proc)) && *nr < max) {
			FILE *f;

			pid = atoi(de->d_name);
			if (pid <= 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/stat", pid);
			f = fopen(path, "re");
			if (!f)
				continue;
			p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
			fclose(f);
			if (!p || sscanf(p, ") %*c %d", &ppid) != 1)
				continue;
			if (pid_listed(pids, *nr, ppid) && !pid_listed(pids, *nr, pid))
				pids[(*nr)++] = pid;
		}
		if (proc)
			closedir(proc);
	} while (*nr != before && *nr < max);
}

/*
 * Entries whose pages were all in (uffd -1) stay as roots: a child one forked while its
 * pages came in is known by its uffd alone, and found among their descendants. When such
 * a child is still missing pages, every descendant is killed: its pid is unknown.
 */
static void guardian_kill(struct guarded *held, unsigned int nr)
{
	unsigned int nr_pids = 0, nr_roots, nr_missing = 0, i;
	bool pidless_missing = false;
	pid_t pids[4096];

	for (i = 0; i < nr; i++) {
		if (held[i].uffd < 0 && held[i].pidfd >= 0 &&
		    syscall(SYS_pidfd_send_signal, held[i].pidfd, 0, NULL, 0))
			continue; /* gone: its pid may be someone else's by now */
		if (held[i].pid > 0 && nr_pids < 4096)
			pids[nr_pids++] = held[i].pid;
		if (held[i].uffd >= 0) {
			nr_missing++;
			pidless_missing |= held[i].pid <= 0;
		}
	}
	nr_roots = nr_pids;
	if (pidless_missing)
		add_descendants(pids, &nr_pids, 4096);
	pr_err("the lazy-pages daemon died with pages of %u tasks still missing: killing them and "
	       "%u descendants\n",
	       nr_missing, nr_pids - nr_roots);
	/* The tasks by pidfd (a pid of theirs may have been reused), their children just seen. */
	for (i = 0; i < nr; i++)
		if (held[i].uffd >= 0 && held[i].pidfd >= 0)
			syscall(SYS_pidfd_send_signal, held[i].pidfd, SIGKILL, NULL, 0);
	for (i = nr_roots; i < nr_pids; i++)
		kill(pids[i], SIGKILL);
}

static int guardian_recv(int sock, struct guard_msg *msg, int fds[2])
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = control.buf,
			    .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *cm;
	ssize_t n;

	fds[0] = fds[1] = -1;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(*msg))
		return -EPIPE;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fds, CMSG_DATA(cm), cm->cmsg_len - CMSG_LEN(0));
	return 0;
}

static void __attribute__((noreturn)) guardian_main(int sock)
{
	struct guarded *held = NULL, *grown;
	unsigned int nr = 0, cap = 0, nr_missing = 0, i;
	struct guard_msg msg;
	int fds[2];

	while (!guardian_recv(sock, &msg, fds)) {
		if (msg.kind == GUARD_BYE)
			_exit(0);
		if (msg.kind == GUARD_DONE) {
			for (i = 0; i < nr && held[i].id != msg.id; i++)
				;
			if (i < nr && held[i].uffd >= 0) {
				close(held[i].uffd);
				held[i].uffd = -1;
				nr_missing--;
			}
			continue;
		}
		if (nr == cap) {
			grown = realloc(held, (cap * 2 + 16) * sizeof(*held));
			if (!grown)
				break; /* act as if the daemon died: never let a task read zeroes */
			held = grown;
			cap = cap * 2 + 16;
		}
		held[nr++] = (struct guarded){msg.id, msg.pid, fds[0], fds[1]};
		nr_missing++;
	}
	if (nr_missing)
		guardian_kill(held, nr);
	_exit(1);
}

int lazy_guard_start(struct lazy_daemon *d, int listen_fd)
{
	int sk[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk)) {
		pr_perror("lazy pages: cannot make the guardian's socket");
		return -1;
	}
	d->guardian_pid = fork();
	if (d->guardian_pid < 0) {
		pr_perror("lazy pages: cannot fork the guardian");
		close(sk[0]);
		close(sk[1]);
		return -1;
	}
	if (d->guardian_pid == 0) {
		close(listen_fd);
		/* The source must see the daemon's end at once, not the guardian's. */
		if (d->remote.sk >= 0)
			close(d->remote.sk);
		close(sk[0]);
		guardian_main(sk[1]);
	}
	close(sk[1]);
	d->guardian_sock = sk[0];
	return 0;
}

/* A clean exit: the guardian lets go of what it holds, killing nothing. */
void lazy_guard_stop(struct lazy_daemon *d)
{
	struct guard_msg bye = {.kind = GUARD_BYE};

	if (d->guardian_sock < 0)
		return;
	guard_send(d->guardian_sock, &bye, -1, -1);
	close(d->guardian_sock);
	d->guardian_sock = -1;
	while (waitpid(d->guardian_pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* A task's uffd arrived: the guardian gets a copy and a pidfd before any page is served. */
int lazy_guard_task(struct lazy_daemon *d, struct lazy_task *t)
{
	struct guard_msg msg = {GUARD_ADD, t->peer_pid, t->id = ++d->next_id};
	int pidfd = t->peer_pid > 0 ? syscall(SYS_pidfd_open, t->peer_pid, 0) : -1;
	int ret;

	ret = guard_send(d->guardian_sock, &msg, t->uffd, pidfd);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

void lazy_guard_done(struct lazy_daemon *d, struct lazy_task *t)
{
	struct guard_msg done = {.kind = GUARD_DONE, .id = t->id};

	guard_send(d->guardian_sock, &done, -1, -1);
}
