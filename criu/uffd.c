/*
 * Lazy restore: which pages are left out of the restore, how a restore task hands its
 * userfaultfd to the daemon, and `criu lazy-pages`, the daemon that serves page faults
 * from the images and streams the remaining pages in while the restored tasks run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cr_options.h"
#include "crtools.h"
#include "image.h"
#include "log.h"
#include "mem.h"
#include "page-server.h"
#include "pstree.h"
#include "uffd.h"
#include "vma.h"

#define PAGE_SIZE 4096ul
/* A fault brings this much of its run along: a task that walks its memory faults less. */
#define FAULT_CHUNK (64ul << 10)
/*
 * One background copy: small enough that a fault or an event (a munmap, a fork waits
 * for the daemon to read it) is served within a millisecond or so.
 */
#define BACKGROUND_CHUNK (2ul << 20)
/* How long criu restore waits for a daemon that is still starting. */
#define PROBE_TIMEOUT_MS 5000

/* ---- kernel support ---- */

static int open_uffd(uint64_t features, uint64_t *got)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api)) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (got)
		*got = api.features;
	return fd;
}

bool kerndat_has_uffd(void)
{
	int fd = open_uffd(0, NULL);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

bool kerndat_has_uffd_noncoop(void)
{
	uint64_t got = 0;
	int fd = open_uffd(LAZY_UFFD_FEATURES, &got);

	if (fd < 0)
		return false;
	close(fd);
	return (got & LAZY_UFFD_FEATURES) == LAZY_UFFD_FEATURES;
}

/* ---- which pages are lazy ---- */

/*
 * What the daemon can serve at all: not mlock()ed (mlock faults every page in before the
 * daemon has the uffd), not hugetlb (the daemon copies small pages), not MADV_WIPEONFORK
 * (a child forked meanwhile must find it empty, while the daemon would fill the child's
 * copy with the dumped pages), not an AIO ring (the blob copies it into the new ring it
 * makes).
 */
static bool vma_uffd_servable(const struct vma_image *vma)
{
	return vma_image_mapped(vma) && (vma->status & VMA_ANON_PRIVATE) &&
	       !(vma->status & (VMA_AREA_SYSVIPC | VMA_AREA_AIORING)) && !vma->locked &&
	       !(vma->flags & MAP_HUGETLB) &&
	       !(vma->madv & VMA_MADV_WIPEONFORK);
}

/*
 * Nor a stack: touched at once, it is read with the rest. (CRIU's dump --lazy-pages
 * leaves parts of stacks on the source all the same: those are served.)
 */
bool vma_is_lazy(const struct vma_image *vma)
{
	return vma_uffd_servable(vma) && !(vma->status & VMA_AREA_STACK) &&
	       !(vma->flags & MAP_GROWSDOWN);
}

static int map_add_run(struct page_map *map, unsigned int *cap, const struct page_run *run,
		       uint64_t vaddr, uint64_t len)
{
	struct page_run *runs;

	if (map->nr_runs == *cap) {
		runs = realloc(map->runs, (*cap * 2 + 16) * sizeof(*runs));
		if (!runs) {
			pr_err("out of memory for %u page runs\n", map->nr_runs);
			return -ENOMEM;
		}
		map->runs = runs;
		*cap = *cap * 2 + 16;
	}
	map->runs[map->nr_runs++] = (struct page_run){ vaddr, len,
						       run->file_off + (vaddr - run->vaddr),
						       run->level, run->remote };
	map->total_bytes += len;
	return 0;
}

/* The VMA holding addr (the runs were checked to lie in VMAs), or NULL. */
static const struct vma_image *vma_holding(const struct task_image *ti, uint64_t addr)
{
	for (unsigned int i = 0; i < ti->nr_vmas; i++)
		if (ti->vmas[i].start <= addr && addr < ti->vmas[i].end)
			return &ti->vmas[i];
	return NULL;
}

int lazy_split_pages(const struct task_image *ti, struct page_map *eager, struct page_map *lazy)
{
	unsigned int eager_cap = 0, lazy_cap = 0, i;
	int ret = 0;

	/* The eager runs keep their chain levels: the blob reads them from each level's image. */
	*eager = ti->pages;
	eager->runs = NULL;
	eager->nr_runs = 0;
	eager->total_bytes = 0;
	*lazy = (struct page_map){ .pages_id = ti->pages.pages_id, .nr_levels = 1 };
	for (i = 0; i < ti->pages.nr_runs && !ret; i++) {
		const struct page_run *run = &ti->pages.runs[i];
		uint64_t pos = run->vaddr, end = run->vaddr + run->len, piece;

		/* A run may cover neighbouring VMAs: each piece goes where its VMA says. */
		while (pos < end && !ret) {
			const struct vma_image *vma = vma_holding(ti, pos);
			bool is_lazy = vma && (run->remote ? vma_uffd_servable(vma) :
							     vma_is_lazy(vma));

			piece = vma && vma->end < end ? vma->end - pos : end - pos;
			if (run->remote && !is_lazy) {
				pr_err("restore --lazy-pages: pages at %#llx are left on the "
				       "dump's source, but their VMA is not one the lazy-pages "
				       "daemon can serve\n",
				       (unsigned long long)pos);
				ret = -ENOTSUP;
				break;
			}
			if (is_lazy && run->level) {
				/* The daemon serves from the images directory's own pages image. */
				pr_err("restore --lazy-pages: pages at %#llx are in a pre-dump parent "
				       "image (level %u): lazy restore of a pre-dump chain is not "
				       "supported\n",
				       (unsigned long long)pos, run->level);
				ret = -ENOTSUP;
				break;
			}
			ret = map_add_run(is_lazy ? lazy : eager,
					  is_lazy ? &lazy_cap : &eager_cap, run, pos, piece);
			pos += piece;
		}
	}
	if (ret) {
		page_map_free(eager);
		page_map_free(lazy);
	}
	return ret;
}

int lazy_refuse_remote(const struct task_image *ti)
{
	for (unsigned int i = 0; i < ti->pages.nr_runs; i++) {
		if (!ti->pages.runs[i].remote)
			continue;
		pr_err("task %d: its pages at %#llx are left on the dump's source (dump "
		       "--lazy-pages): restore with --lazy-pages and criu lazy-pages "
		       "--page-server\n",
		       ti->item->pid, (unsigned long long)ti->pages.runs[i].vaddr);
		return -ENOTSUP;
	}
	return 0;
}

/* ---- restore side ---- */

static int socket_addr(struct sockaddr_un *addr)
{
	const char *dir = opts.work_dir ?: opts.imgs_dir ?: ".";

	*addr = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if (snprintf(addr->sun_path, sizeof(addr->sun_path), "%s/%s", dir, LAZY_PAGES_SOCKET) >=
	    (int)sizeof(addr->sun_path)) {
		pr_err("lazy pages: the socket path %s/%s is longer than a Unix socket name may be\n",
		       dir, LAZY_PAGES_SOCKET);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int connect_daemon(struct sockaddr_un *addr)
{
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (sock < 0)
		return -errno;
	if (connect(sock, (struct sockaddr *)addr, sizeof(*addr))) {
		int err = -errno;

		close(sock);
		return err;
	}
	return sock;
}

static int send_all(int sock, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = send(sock, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= n;
	}
	return 0;
}

/* One message on a connection of its own; the daemon may still be starting (retry). */
static int send_control(enum lazy_msg_kind kind, int timeout_ms)
{
	struct lazy_msg msg = { .magic = LAZY_MSG_MAGIC, .kind = kind };
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	struct sockaddr_un addr;
	int sock, ret, waited = 0;

	ret = socket_addr(&addr);
	if (ret)
		return ret;
	while ((sock = connect_daemon(&addr)) < 0 && (sock == -ENOENT || sock == -ECONNREFUSED) &&
	       waited < timeout_ms) {
		nanosleep(&pause, NULL);
		waited += 10;
	}
	if (sock < 0) {
		pr_err("lazy pages: cannot connect to %s: %s (is `criu lazy-pages` running with this work dir?)\n",
		       addr.sun_path, strerror(-sock));
		return sock;
	}
	ret = send_all(sock, &msg, sizeof(msg));
	if (ret)
		pr_err("lazy pages: cannot talk to the daemon at %s: %s\n", addr.sun_path,
		       strerror(-ret));
	close(sock);
	return ret;
}

int lazy_pages_probe(void)
{
	return send_control(LAZY_MSG_PROBE, PROBE_TIMEOUT_MS) ? -1 : 0;
}

void lazy_pages_done(void)
{
	if (send_control(LAZY_MSG_DONE, 0))
		pr_warn("the lazy-pages daemon was not told that the restore ended\n");
}

int lazy_pages_connect_task(pid_t pid, const struct page_map *lazy, int *uffd, int *sock)
{
	struct lazy_msg msg = { LAZY_MSG_MAGIC, LAZY_MSG_TASK, pid, lazy->pages_id, lazy->nr_runs };
	struct sockaddr_un addr;
	int ret;

	*uffd = open_uffd(LAZY_UFFD_FEATURES, NULL);
	if (*uffd < 0) {
		pr_err("task %d: cannot create a userfaultfd with fork/remap/remove/unmap events: %s\n",
		       pid, strerror(-*uffd));
		return *uffd;
	}
	ret = socket_addr(&addr);
	if (ret)
		return ret;
	*sock = connect_daemon(&addr);
	if (*sock < 0) {
		pr_err("task %d: cannot connect to the lazy-pages daemon at %s: %s\n", pid, addr.sun_path,
		       strerror(-*sock));
		return *sock;
	}
	ret = send_all(*sock, &msg, sizeof(msg));
	if (!ret)
		ret = send_all(*sock, lazy->runs, lazy->nr_runs * sizeof(*lazy->runs));
	if (ret)
		pr_err("task %d: cannot send its %u lazy page runs to the daemon: %s\n", pid,
		       lazy->nr_runs, strerror(-ret));
	else
		pr_info("task %d: %llu bytes of pages left to the lazy-pages daemon\n", pid,
			(unsigned long long)lazy->total_bytes);
	return ret;
}

/* ---- the daemon: tasks and what is left of their pages ---- */

/* A PS_IOV_GET asked of the dump's source, or its answer: nr pages of task pid at at. */
struct remote_get {
	bool valid;
	pid_t pid;
	uint64_t at, nr;
};

/*
 * --page-server: the connection to the dump's source. One background chunk is asked for
 * ahead (ahead), so that the source reads and sends it while the last one is copied; an
 * answer that came for something else first waits in stash until its task's turn.
 */
struct lazy_remote {
	int sk; /* -1: no --page-server */
	uint8_t *buf; /* BACKGROUND_CHUNK bytes: the answer fetch() hands out */
	uint8_t *stash_buf; /* BACKGROUND_CHUNK bytes: stash's pages */
	struct remote_get ahead, stash;
	uint64_t requests, bytes, ahead_used;
};

/*
 * Where a task's pages come from, shared with the children it forks: its pages image,
 * mapped once, for runs stored in the images; the dump's source (remote, NULL without
 * --page-server), which knows the task by its pid in the images, for runs left there.
 */
struct lazy_src {
	unsigned int refs;
	const uint8_t *addr;
	uint64_t len;
	pid_t pid;
	struct lazy_remote *remote;
};

/*
 * One kind of run's pages: fetch() makes the data of [addr, addr + *len) of run r
 * readable at *data, *len possibly cut short (never to 0). 0 or -errno (logged).
 */
struct lazy_src_ops {
	int (*fetch)(const struct lazy_src *src, const struct page_run *r, uint64_t addr,
		     uint64_t *len, const void **data);
};

/* What epoll reports: the listening socket, a task's connection, or its uffd. */
enum lazy_watch_kind { WATCH_LISTEN, WATCH_SOCK, WATCH_UFFD };

struct lazy_task;

struct lazy_watch {
	enum lazy_watch_kind kind;
	struct lazy_task *task;
};

struct lazy_task {
	struct lazy_task *next;
	pid_t pid; /* in the images; 0: forked while its pages came in */
	pid_t peer_pid; /* the connected task as the daemon sees it (SO_PEERCRED) */
	uint64_t id; /* names it to the guardian */
	int sock; /* until the uffd came; -1 after */
	bool has_msg; /* the connection's lazy_msg was read */
	int uffd; /* -1 until it came */
	struct lazy_watch sock_watch, uffd_watch;
	struct lazy_src *src;
	struct page_run *runs; /* still to copy, by address */
	unsigned int nr_runs, cap_runs;
	uint64_t *retry; /* faults that met a changing address space (EAGAIN) */
	unsigned int nr_retry, cap_retry;
	uint64_t faults, copied;
};

struct lazy_daemon {
	int ep;
	struct lazy_watch listen_watch;
	struct lazy_task *tasks;
	struct lazy_task *bg_next; /* round robin of the background copy */
	bool restore_done; /* criu restore said no task comes any more */
	unsigned int nr_served;
	struct lazy_remote remote;
	int guardian_sock; /* to the guardian (its messages below) */
	pid_t guardian_pid;
	uint64_t next_id;
};

/* ---- the guardian ---- */

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
	int uffd; /* -1 once all its pages are in */
	int pidfd; /* -1: pid unknown (a child forked meanwhile) */
};

static int guard_send(int sock, const struct guard_msg *msg, int uffd, int pidfd)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { (void *)msg, sizeof(*msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[2] = { uffd, pidfd }, nr = pidfd >= 0 ? 2 : 1;
	struct cmsghdr *cm;

	if (msg->kind == GUARD_ADD) {
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nr * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		*cm = (struct cmsghdr){ .cmsg_len = CMSG_LEN(nr * sizeof(int)),
					.cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS };
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
	pr_err("the lazy-pages daemon died with pages of %u tasks still missing: killing them and %u descendants\n",
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
	struct iovec iov = { msg, sizeof(*msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
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
		held[nr++] = (struct guarded){ msg.id, msg.pid, fds[0], fds[1] };
		nr_missing++;
	}
	if (nr_missing)
		guardian_kill(held, nr);
	_exit(1);
}

static int start_guardian(struct lazy_daemon *d, int listen_fd)
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
static void stop_guardian(struct lazy_daemon *d)
{
	struct guard_msg bye = { .kind = GUARD_BYE };

	if (d->guardian_sock < 0)
		return;
	guard_send(d->guardian_sock, &bye, -1, -1);
	close(d->guardian_sock);
	d->guardian_sock = -1;
	while (waitpid(d->guardian_pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* A task's uffd arrived: the guardian gets a copy and a pidfd before any page is served. */
static int guard_task(struct lazy_daemon *d, struct lazy_task *t)
{
	struct guard_msg msg = { GUARD_ADD, t->peer_pid, t->id = ++d->next_id };
	int pidfd = t->peer_pid > 0 ? syscall(SYS_pidfd_open, t->peer_pid, 0) : -1;
	int ret;

	ret = guard_send(d->guardian_sock, &msg, t->uffd, pidfd);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

static void src_put(struct lazy_src *src)
{
	if (src && !--src->refs) {
		munmap((void *)src->addr, src->len);
		free(src);
	}
}

static int src_open(struct lazy_daemon *d, pid_t pid, uint32_t pages_id, struct lazy_src **out)
{
	struct cr_img *img = open_image(CR_IMG_PAGES, O_RDONLY, pages_id);
	struct lazy_src *src;
	struct stat st;
	void *addr;

	if (!img)
		return -EIO;
	if (fstat(img->fd, &st)) {
		pr_perror("%s: cannot stat", img->name);
		close_image(img);
		return -EIO;
	}
	addr = st.st_size ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, img->fd, 0) : NULL;
	if (addr == MAP_FAILED) {
		pr_perror("%s: cannot map %lld bytes", img->name, (long long)st.st_size);
		close_image(img);
		return -EIO;
	}
	close_image(img);
	src = malloc(sizeof(*src));
	if (!src) {
		munmap(addr, st.st_size);
		return -ENOMEM;
	}
	*src = (struct lazy_src){ 1, addr, st.st_size, pid, d->remote.sk >= 0 ? &d->remote : NULL };
	*out = src;
	return 0;
}

static int image_fetch(const struct lazy_src *src, const struct page_run *r, uint64_t addr,
		       uint64_t *len, const void **data)
{
	(void)len;
	*data = src->addr + r->file_off + (addr - r->vaddr);
	return 0;
}

static int remote_ask(struct lazy_remote *rm, pid_t pid, uint64_t at, uint64_t nr,
		      struct remote_get *asked)
{
	struct ps_iov pi = { PS_IOV_GET, nr, at, pid };
	int ret = ps_send(rm->sk, &pi, sizeof(pi));

	if (ret) {
		pr_err("the dump's source %s: cannot ask for the pages at %#llx of task %d: %s\n",
		       page_server_name(), (unsigned long long)at, pid,
		       ret == -EPIPE ? "it closed the connection" : strerror(-ret));
		return ret;
	}
	*asked = (struct remote_get){ true, pid, at, nr };
	return 0;
}

/*
 * The answer to asked, into buf; CRIU's: PS_IOV_ADD_F with PE_PRESENT naming the same
 * task and address, nr_pages at most those asked for, then the pages. got: what came.
 */
static int remote_answer(struct lazy_remote *rm, const struct remote_get *asked, uint8_t *buf,
			 struct remote_get *got)
{
	struct ps_iov ans;
	int ret = ps_recv(rm->sk, &ans, sizeof(ans));

	if (!ret && ((ans.cmd & PS_CMD_MASK) != PS_IOV_ADD_F ||
		     !((ans.cmd >> PS_CMD_BITS) & PE_PRESENT) || ans.vaddr != asked->at ||
		     ans.dst_id != (uint64_t)asked->pid || !ans.nr_pages || ans.nr_pages > asked->nr)) {
		pr_err("the dump's source %s answered %#x (%llu pages at %#llx of %lld) to a "
		       "request for %llu pages at %#llx of task %d\n",
		       page_server_name(), ans.cmd, (unsigned long long)ans.nr_pages,
		       (unsigned long long)ans.vaddr, (long long)ans.dst_id,
		       (unsigned long long)asked->nr, (unsigned long long)asked->at, asked->pid);
		return -EPROTO;
	}
	if (!ret)
		ret = ps_recv(rm->sk, buf, ans.nr_pages * PAGE_SIZE);
	if (ret) {
		pr_err("the dump's source %s: cannot get the pages at %#llx of task %d: %s\n",
		       page_server_name(), (unsigned long long)asked->at, asked->pid,
		       ret == -EPIPE ? "it closed the connection" : strerror(-ret));
		return ret;
	}
	rm->requests++;
	rm->bytes += ans.nr_pages * PAGE_SIZE;
	*got = (struct remote_get){ true, asked->pid, asked->at, ans.nr_pages };
	return 0;
}

static bool get_starts_at(const struct remote_get *g, pid_t pid, uint64_t at)
{
	return g->valid && g->pid == pid && g->at == at;
}

/* The chunk ahead's answer, if it is not the one wanted now: it waits in the stash. */
static int remote_stash_ahead(struct lazy_remote *rm)
{
	uint8_t *buf = rm->stash_buf;
	int ret;

	if (!rm->ahead.valid)
		return 0;
	ret = remote_answer(rm, &rm->ahead, buf, &rm->stash);
	rm->ahead.valid = false;
	return ret;
}

/*
 * Up to nr pages at at of task pid into *data (rm->buf or the stash's): from the answer
 * to the chunk asked ahead, the stash, or a request of its own. *got: what came.
 */
static int remote_get_pages(struct lazy_remote *rm, pid_t pid, uint64_t at, uint64_t nr,
			    struct remote_get *got, const void **data)
{
	struct remote_get asked;
	uint8_t *swap;
	int ret;

	if (get_starts_at(&rm->ahead, pid, at)) {
		asked = rm->ahead;
		rm->ahead.valid = false;
		rm->ahead_used++;
	} else if (get_starts_at(&rm->stash, pid, at)) {
		*got = rm->stash;
		rm->stash.valid = false;
		/* The stash's buffer is handed out: rm->buf takes the next stash. */
		swap = rm->buf;
		rm->buf = rm->stash_buf;
		rm->stash_buf = swap;
		*data = rm->buf;
		return 0;
	} else {
		ret = remote_stash_ahead(rm) ?: remote_ask(rm, pid, at, nr, &asked);
		if (ret)
			return ret;
	}
	*data = rm->buf;
	return remote_answer(rm, &asked, rm->buf, got);
}

/*
 * PS_IOV_GET of the task's pages at their address in the source. A background chunk
 * (BACKGROUND_CHUNK asked for) asks for the next one of its run right away: the source
 * reads and sends it while this one is copied into the task.
 */
static int remote_fetch(const struct lazy_src *src, const struct page_run *r, uint64_t addr,
			uint64_t *len, const void **data)
{
	struct lazy_remote *rm = src->remote;
	uint64_t at = r->file_off + (addr - r->vaddr), left;
	struct remote_get got;
	int ret;

	if (!rm) {
		pr_err("task %d: its pages at %#llx are left on the dump's source: start criu "
		       "lazy-pages with --page-server --address --port\n",
		       src->pid, (unsigned long long)at);
		return -ENOTSUP;
	}
	ret = remote_get_pages(rm, src->pid, at, *len / PAGE_SIZE, &got, data);
	if (ret)
		return ret;
	*len = (got.nr < *len / PAGE_SIZE ? got.nr : *len / PAGE_SIZE) * PAGE_SIZE;
	left = r->len - (addr - r->vaddr) - *len;
	if (*len == BACKGROUND_CHUNK && left && !rm->ahead.valid)
		ret = remote_ask(rm, src->pid, at + *len,
				 (left < BACKGROUND_CHUNK ? left : BACKGROUND_CHUNK) / PAGE_SIZE,
				 &rm->ahead);
	return ret;
}

static const struct lazy_src_ops image_src_ops = { .fetch = image_fetch };
static const struct lazy_src_ops remote_src_ops = { .fetch = remote_fetch };

static const struct lazy_src_ops *run_src_ops(const struct page_run *r)
{
	return r->remote ? &remote_src_ops : &image_src_ops;
}

static struct lazy_task *task_new(struct lazy_daemon *d)
{
	struct lazy_task *t = calloc(1, sizeof(*t));

	if (!t) {
		pr_err("out of memory for a lazy task\n");
		return NULL;
	}
	t->sock = t->uffd = -1;
	t->sock_watch = (struct lazy_watch){ WATCH_SOCK, t };
	t->uffd_watch = (struct lazy_watch){ WATCH_UFFD, t };
	t->next = d->tasks;
	d->tasks = t;
	return t;
}

static void task_free(struct lazy_daemon *d, struct lazy_task *t)
{
	struct lazy_task **p;

	for (p = &d->tasks; *p != t; p = &(*p)->next)
		;
	*p = t->next;
	if (d->bg_next == t)
		d->bg_next = t->next;
	if (t->id && d->guardian_sock >= 0) {
		struct guard_msg done = { .kind = GUARD_DONE, .id = t->id };

		guard_send(d->guardian_sock, &done, -1, -1);
	}
	/*
	 * Out of epoll first: the guardian's copy (or one in flight to it) keeps the file
	 * open, and epoll forgets a file only once it is released. Our last uffd reference
	 * gone, the kernel unregisters whatever is left.
	 */
	if (t->sock >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, t->sock, NULL);
		close(t->sock);
	}
	if (t->uffd >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, t->uffd, NULL);
		close(t->uffd);
	}
	src_put(t->src);
	free(t->runs);
	free(t->retry);
	free(t);
}

static const char *task_name(const struct lazy_task *t, char *buf, size_t len)
{
	if (t->pid)
		snprintf(buf, len, "task %d", t->pid);
	else
		snprintf(buf, len, "forked child (uffd %d)", t->uffd);
	return buf;
}

static int watch(struct lazy_daemon *d, int fd, struct lazy_watch *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev)) {
		pr_perror("lazy pages: cannot watch fd %d", fd);
		return -errno;
	}
	return 0;
}

/* ---- runs: find, remove, move ---- */

/* The first run ending after addr. */
static unsigned int run_after(const struct lazy_task *t, uint64_t addr)
{
	return page_run_after(t->runs, t->nr_runs, addr);
}

static int runs_reserve(struct lazy_task *t, unsigned int more)
{
	struct page_run *runs;
	unsigned int cap;

	if (t->nr_runs + more <= t->cap_runs)
		return 0;
	cap = (t->nr_runs + more) * 2;
	runs = realloc(t->runs, cap * sizeof(*runs));
	if (!runs) {
		pr_err("out of memory for %u lazy page runs\n", cap);
		return -ENOMEM;
	}
	t->runs = runs;
	t->cap_runs = cap;
	return 0;
}

/* Forgets [start, end): copied, or the task unmapped or discarded it. */
static int remove_range(struct lazy_task *t, uint64_t start, uint64_t end)
{
	unsigned int i = run_after(t, start), j;
	struct page_run *r;
	uint64_t cut;

	if (i < t->nr_runs && t->runs[i].vaddr < start && t->runs[i].vaddr + t->runs[i].len > end) {
		/* Inside one run: it becomes two. */
		if (runs_reserve(t, 1))
			return -ENOMEM;
		r = &t->runs[i];
		memmove(r + 1, r, (t->nr_runs - i) * sizeof(*r));
		t->nr_runs++;
		cut = end - r->vaddr;
		r[1].vaddr += cut, r[1].file_off += cut, r[1].len -= cut;
		r->len = start - r->vaddr;
		return 0;
	}
	if (i < t->nr_runs && t->runs[i].vaddr < start) {
		t->runs[i].len = start - t->runs[i].vaddr;
		i++;
	}
	for (j = i; j < t->nr_runs && t->runs[j].vaddr + t->runs[j].len <= end; j++)
		;
	if (j < t->nr_runs && t->runs[j].vaddr < end) {
		r = &t->runs[j];
		cut = end - r->vaddr;
		r->vaddr += cut, r->file_off += cut, r->len -= cut;
	}
	memmove(&t->runs[i], &t->runs[j], (t->nr_runs - j) * sizeof(*t->runs));
	t->nr_runs -= j - i;
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct page_run *ra = a, *rb = b;

	return ra->vaddr < rb->vaddr ? -1 : ra->vaddr > rb->vaddr;
}

/* mremap moved [from, from + len) to `to`: what was left to copy there moves along. */
static int move_range(struct lazy_task *t, uint64_t from, uint64_t to, uint64_t len)
{
	unsigned int i, first = run_after(t, from), nr_moved = 0;
	struct page_run *moved;
	int ret;

	for (i = first; i < t->nr_runs && t->runs[i].vaddr < from + len; i++)
		nr_moved++;
	moved = malloc((nr_moved + 1) * sizeof(*moved));
	if (!moved)
		return -ENOMEM;
	for (i = 0; i < nr_moved; i++) {
		struct page_run r = t->runs[first + i];
		uint64_t lo = r.vaddr > from ? r.vaddr : from;
		uint64_t hi = r.vaddr + r.len < from + len ? r.vaddr + r.len : from + len;

		/* file_off keeps where the data are: the image's offset or the source's address. */
		moved[i] = (struct page_run){ lo - from + to, hi - lo, r.file_off + (lo - r.vaddr),
					      r.level, r.remote };
	}
	ret = remove_range(t, from, from + len);
	/* Whatever was at the destination is gone (mremap unmapped it). */
	if (!ret)
		ret = remove_range(t, to, to + len);
	if (!ret)
		ret = runs_reserve(t, nr_moved);
	if (!ret) {
		memcpy(&t->runs[t->nr_runs], moved, nr_moved * sizeof(*moved));
		t->nr_runs += nr_moved;
		qsort(t->runs, t->nr_runs, sizeof(*t->runs), cmp_run);
	}
	free(moved);
	return ret;
}

/* ---- copying pages in ---- */

static void wake_page(struct lazy_task *t, uint64_t addr)
{
	struct uffdio_range range = { addr, PAGE_SIZE };

	ioctl(t->uffd, UFFDIO_WAKE, &range);
}

/*
 * Copies len bytes of data to addr; *done: bytes dealt with (copied, or found there
 * already). 0, -EAGAIN (the address space is changing: read the events first), -ESRCH
 * (the task is gone) or another -errno.
 */
static int copy_pages(struct lazy_task *t, uint64_t addr, uint64_t len, const void *data,
		      uint64_t *done)
{
	struct uffdio_copy uc;

	*done = 0;
	while (*done < len) {
		uc = (struct uffdio_copy){ .dst = addr + *done,
					   .src = (uintptr_t)data + *done,
					   .len = len - *done };
		if (!ioctl(t->uffd, UFFDIO_COPY, &uc)) {
			*done = len;
			break;
		}
		if (uc.copy > 0) {
			*done += uc.copy;
			continue;
		}
		if (errno == EEXIST) {
			/* Served by a fault meanwhile, or a fault raced the copy: wake it all the same. */
			wake_page(t, addr + *done);
			*done += PAGE_SIZE;
			continue;
		}
		if (errno == ENOENT) {
			/* Not registered any more: the task's own mapping replaced it. */
			*done = len;
			break;
		}
		return -errno;
	}
	t->copied += *done;
	return 0;
}

/* Up to len bytes of run r from addr on, from where the run's pages are. */
static int copy_run(struct lazy_task *t, const struct page_run *r, uint64_t addr, uint64_t len,
		    uint64_t *done)
{
	const void *data;
	int ret = run_src_ops(r)->fetch(t->src, r, addr, &len, &data);

	*done = 0;
	return ret ? ret : copy_pages(t, addr, len, data, done);
}

/* A fault outside the stored pages: the page was never written (a hole) or discarded. */
static int zero_page(struct lazy_task *t, uint64_t addr)
{
	struct uffdio_zeropage zp = { .range = { addr, PAGE_SIZE } };

	if (!ioctl(t->uffd, UFFDIO_ZEROPAGE, &zp))
		return 0;
	if (errno == EEXIST) {
		wake_page(t, addr);
		return 0;
	}
	return errno == ENOENT ? 0 : -errno;
}

static int serve_fault(struct lazy_task *t, uint64_t addr)
{
	unsigned int i = run_after(t, addr);
	uint64_t off, len, done = 0;
	struct page_run *r;
	int ret;

	if (i >= t->nr_runs || t->runs[i].vaddr > addr)
		return zero_page(t, addr);
	r = &t->runs[i];
	off = addr - r->vaddr;
	len = r->len - off < FAULT_CHUNK ? r->len - off : FAULT_CHUNK;
	ret = copy_run(t, r, addr, len, &done);
	if (done && remove_range(t, addr, addr + done))
		return -ENOMEM;
	return done ? 0 : ret;
}

static int add_retry(struct lazy_task *t, uint64_t addr)
{
	uint64_t *retry;

	if (t->nr_retry == t->cap_retry) {
		retry = realloc(t->retry, (t->cap_retry * 2 + 8) * sizeof(*retry));
		if (!retry) {
			pr_err("out of memory for faults to retry\n");
			return -ENOMEM;
		}
		t->retry = retry;
		t->cap_retry = t->cap_retry * 2 + 8;
	}
	t->retry[t->nr_retry++] = addr;
	return 0;
}

/* A fault that found the address space changing is served again after the events. */
static int fault(struct lazy_task *t, uint64_t addr)
{
	int ret = serve_fault(t, addr);

	t->faults++;
	return ret == -EAGAIN ? add_retry(t, addr) : ret;
}

static int retry_faults(struct lazy_task *t)
{
	unsigned int i, n = t->nr_retry;
	int ret = 0;

	t->nr_retry = 0;
	for (i = 0; i < n && !ret; i++) {
		ret = serve_fault(t, t->retry[i]);
		if (ret == -EAGAIN)
			ret = add_retry(t, t->retry[i]);
	}
	return ret;
}

/* The lowest run left: copied in order, one chunk per turn. */
static int background_copy(struct lazy_task *t)
{
	struct page_run *r = &t->runs[0];
	uint64_t len = r->len < BACKGROUND_CHUNK ? r->len : BACKGROUND_CHUNK, done = 0;
	uint64_t addr = r->vaddr;
	int ret = copy_run(t, r, addr, len, &done);

	if (done && remove_range(t, addr, addr + done))
		return -ENOMEM;
	return ret == -EAGAIN ? 0 : ret;
}

/* ---- events ---- */

static int on_fork(struct lazy_daemon *d, struct lazy_task *parent, int ufd)
{
	struct lazy_task *child = task_new(d);

	if (!child) {
		close(ufd);
		return -ENOMEM;
	}
	child->uffd = ufd;
	child->has_msg = true;
	child->src = parent->src;
	child->src->refs++;
	/* Its memory is the parent's: the same pages are still missing in it. */
	if (runs_reserve(child, parent->nr_runs))
		return -ENOMEM;
	memcpy(child->runs, parent->runs, parent->nr_runs * sizeof(*child->runs));
	child->nr_runs = parent->nr_runs;
	pr_debug("task %d forked a child (uffd %d), %u runs left in it\n", parent->pid, ufd,
		 child->nr_runs);
	return guard_task(d, child) ?: watch(d, ufd, &child->uffd_watch);
}

static int on_uffd_msg(struct lazy_daemon *d, struct lazy_task *t, const struct uffd_msg *msg)
{
	char name[48];

	switch (msg->event) {
	case UFFD_EVENT_PAGEFAULT:
		return fault(t, msg->arg.pagefault.address & ~(PAGE_SIZE - 1));
	case UFFD_EVENT_FORK:
		return on_fork(d, t, msg->arg.fork.ufd);
	case UFFD_EVENT_REMAP:
		pr_debug("%s: mremap %#llx -> %#llx (%llu bytes)\n", task_name(t, name, sizeof(name)),
			 (unsigned long long)msg->arg.remap.from, (unsigned long long)msg->arg.remap.to,
			 (unsigned long long)msg->arg.remap.len);
		return move_range(t, msg->arg.remap.from, msg->arg.remap.to, msg->arg.remap.len);
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		pr_debug("%s: %s %#llx-%#llx\n", task_name(t, name, sizeof(name)),
			 msg->event == UFFD_EVENT_UNMAP ? "munmap" : "madvise",
			 (unsigned long long)msg->arg.remove.start,
			 (unsigned long long)msg->arg.remove.end);
		return remove_range(t, msg->arg.remove.start, msg->arg.remove.end);
	}
	pr_err("%s: unexpected userfaultfd event %u\n", task_name(t, name, sizeof(name)), msg->event);
	return -EINVAL;
}

static int on_uffd(struct lazy_daemon *d, struct lazy_task *t)
{
	struct uffd_msg msgs[64];
	ssize_t n;
	int ret = 0;

	while (!ret) {
		n = read(t->uffd, msgs, sizeof(msgs));
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msgs[0]) && !ret; i++)
			ret = on_uffd_msg(d, t, &msgs[i]);
	}
	return ret;
}

/* ---- connections ---- */

static int recv_all(int sock, void *buf, size_t len)
{
	ssize_t n;

	do
		n = recv(sock, buf, len, MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EPIPE;
}

/* The runs must lie in the pages image the task named. */
static int check_runs(const struct lazy_task *t)
{
	for (unsigned int i = 0; i < t->nr_runs; i++) {
		const struct page_run *r = &t->runs[i];

		if ((!r->remote && (r->file_off + r->len > t->src->len ||
				    r->file_off + r->len < r->file_off)) ||
		    r->vaddr % PAGE_SIZE || r->len % PAGE_SIZE || r->file_off % PAGE_SIZE) {
			pr_err("task %d: lazy run %#llx (%llu bytes at %llu) is not in its pages image (%llu bytes)\n",
			       t->pid, (unsigned long long)r->vaddr, (unsigned long long)r->len,
			       (unsigned long long)r->file_off, (unsigned long long)t->src->len);
			return -EINVAL;
		}
	}
	return 0;
}

static int on_task_msg(struct lazy_daemon *d, struct lazy_task *t, const struct lazy_msg *msg)
{
	uint64_t local = 0, remote = 0;
	int ret;

	t->pid = msg->pid;
	if (msg->nr_runs > (1u << 28)) {
		pr_err("task %d: %llu lazy runs is not believable\n", t->pid,
		       (unsigned long long)msg->nr_runs);
		return -EINVAL;
	}
	ret = runs_reserve(t, msg->nr_runs);
	if (!ret)
		ret = recv_all(t->sock, t->runs, msg->nr_runs * sizeof(*t->runs));
	if (ret) {
		pr_err("task %d: cannot read its %llu lazy runs: %s\n", t->pid,
		       (unsigned long long)msg->nr_runs, strerror(-ret));
		return ret;
	}
	t->nr_runs = msg->nr_runs;
	ret = src_open(d, t->pid, msg->pages_id, &t->src);
	if (!ret)
		ret = check_runs(t);
	for (unsigned int i = 0; i < t->nr_runs; i++)
		*(t->runs[i].remote ? &remote : &local) += t->runs[i].len;
	if (!ret)
		pr_info("task %d: %u runs, %llu bytes to serve from pages-%u.img, %llu from the "
			"dump's source\n",
			t->pid, t->nr_runs, (unsigned long long)local, msg->pages_id,
			(unsigned long long)remote);
	return ret;
}

/* The blob's byte with the uffd attached. */
static int recv_uffd(struct lazy_daemon *d, struct lazy_task *t)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	char byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm;
	ssize_t n;

	n = recvmsg(t->sock, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0) {
		/* Its restore failed before the blob registered its memory: nothing to serve. */
		pr_info("task %d: gone before it sent its userfaultfd\n", t->pid);
		return -ESRCH;
	}
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int))) {
		pr_err("task %d: its message carries no userfaultfd\n", t->pid);
		return -EPROTO;
	}
	memcpy(&t->uffd, CMSG_DATA(cm), sizeof(int));
	close(t->sock);
	t->sock = -1;
	pr_debug("task %d: userfaultfd %d\n", t->pid, t->uffd);
	return guard_task(d, t) ?: watch(d, t->uffd, &t->uffd_watch);
}

static int on_sock(struct lazy_daemon *d, struct lazy_task *t)
{
	struct lazy_msg msg;
	int ret;

	if (t->has_msg)
		return recv_uffd(d, t);
	ret = recv_all(t->sock, &msg, sizeof(msg));
	if (ret || msg.magic != LAZY_MSG_MAGIC) {
		pr_err("lazy pages: a connection sent no valid message: %s\n",
		       ret ? strerror(-ret) : "bad magic");
		return -EPROTO;
	}
	t->has_msg = true;
	switch (msg.kind) {
	case LAZY_MSG_PROBE:
		return -ESRCH; /* nothing to serve: close it */
	case LAZY_MSG_DONE:
		pr_info("criu restore ended: no more tasks\n");
		d->restore_done = true;
		return -ESRCH;
	case LAZY_MSG_TASK:
		return on_task_msg(d, t, &msg);
	}
	pr_err("lazy pages: unknown message %u\n", msg.kind);
	return -EPROTO;
}

static int on_listen(struct lazy_daemon *d, int listen_fd)
{
	int sock = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct lazy_task *t;

	if (sock < 0) {
		pr_perror("lazy pages: accept");
		return errno == EINTR || errno == ECONNABORTED ? 0 : -errno;
	}
	t = task_new(d);
	if (!t) {
		close(sock);
		return -ENOMEM;
	}
	t->sock = sock;
	if (!getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		t->peer_pid = cred.pid;
	return watch(d, sock, &t->sock_watch);
}

/* ---- the loop ---- */

/*
 * A task is done once nothing is left to copy (its uffd then closes: what it faults on
 * afterwards is ordinary anonymous memory) or once it is gone. Errors other than a task
 * going away end the daemon: a half-served task must not go on with zeroes.
 */
static int task_result(struct lazy_daemon *d, struct lazy_task *t, int ret)
{
	char name[48];

	if (ret == -ESRCH) {
		if (t->uffd >= 0 && t->nr_runs)
			pr_info("%s exited with %u runs not copied\n", task_name(t, name, sizeof(name)),
				t->nr_runs);
		task_free(d, t);
		return 0;
	}
	if (ret) {
		pr_err("%s: %s\n", task_name(t, name, sizeof(name)), strerror(-ret));
		return ret;
	}
	if (t->uffd >= 0 && !t->nr_runs && !t->nr_retry) {
		pr_info("%s: all pages in (%llu faults, %llu bytes copied)\n",
			task_name(t, name, sizeof(name)), (unsigned long long)t->faults,
			(unsigned long long)t->copied);
		d->nr_served++;
		task_free(d, t);
	}
	return 0;
}

static int on_event(struct lazy_daemon *d, struct lazy_watch *w, int listen_fd)
{
	switch (w->kind) {
	case WATCH_LISTEN:
		return on_listen(d, listen_fd);
	case WATCH_SOCK:
		return task_result(d, w->task, on_sock(d, w->task));
	case WATCH_UFFD:
		return task_result(d, w->task, on_uffd(d, w->task));
	}
	return -EINVAL;
}

static bool has_work(const struct lazy_daemon *d)
{
	for (const struct lazy_task *t = d->tasks; t; t = t->next)
		if (t->uffd >= 0 && (t->nr_retry || (t->nr_runs && d->restore_done)))
			return true;
	return false;
}

/* Faults to serve again first, then one background chunk of the next task in turn. */
static int copy_step(struct lazy_daemon *d)
{
	struct lazy_task *t, *next;
	int ret = 0;

	for (t = d->tasks; t && !ret; t = next) {
		next = t->next;
		if (t->uffd >= 0 && t->nr_retry)
			ret = task_result(d, t, retry_faults(t));
	}
	/*
	 * The background copy waits for the restore's end: until then it would only take
	 * the CPUs from criu releasing the tree, which is what the time to run is made of.
	 */
	if (ret || !d->restore_done)
		return ret;
	for (unsigned int tries = 0; d->tasks && tries < 2; tries++) {
		for (t = d->bg_next ?: d->tasks; t; t = t->next) {
			if (t->uffd < 0 || !t->nr_runs)
				continue;
			d->bg_next = t->next;
			return task_result(d, t, background_copy(t));
		}
		d->bg_next = NULL;
	}
	return 0;
}

static int serve(struct lazy_daemon *d, int listen_fd)
{
	struct epoll_event evs[16];
	int n, ret = 0;

	while (!ret && !(d->restore_done && !d->tasks)) {
		n = epoll_wait(d->ep, evs, 16, has_work(d) ? 0 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			pr_perror("lazy pages: epoll_wait");
			return -errno;
		}
		for (int i = 0; i < n && !ret; i++)
			ret = on_event(d, evs[i].data.ptr, listen_fd);
		if (!ret)
			ret = copy_step(d);
	}
	return ret;
}

static int listen_socket(struct sockaddr_un *addr)
{
	int sock;

	if (socket_addr(addr))
		return -1;
	unlink(addr->sun_path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)addr, sizeof(*addr)) || listen(sock, 128)) {
		pr_perror("lazy pages: cannot listen on %s", addr->sun_path);
		if (sock >= 0)
			close(sock);
		return -1;
	}
	pr_info("listening on %s\n", addr->sun_path);
	return sock;
}

/* --page-server: the dump --lazy-pages that keeps the pages, before any task comes. */
static int connect_remote(struct lazy_remote *rm)
{
	int one = 1;

	if (!opts.use_page_server)
		return 0;
	rm->buf = malloc(BACKGROUND_CHUNK);
	rm->stash_buf = malloc(BACKGROUND_CHUNK);
	if (!rm->buf || !rm->stash_buf) {
		pr_err("lazy pages: no memory for the pages from the dump's source\n");
		return -1;
	}
	rm->sk = page_server_connect();
	if (rm->sk < 0)
		return -1;
	/* Each request is waited for: it must not sit in Nagle's queue. */
	setsockopt(rm->sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/*
 * Every page is in: the source may let its tree go (PS_IOV_FLUSH, CRIU's close, answered
 * with a status). After a failure the connection just closes: the source then keeps its
 * tree, whose copy here is being killed.
 */
static int disconnect_remote(struct lazy_remote *rm, bool done)
{
	struct ps_iov pi = { .cmd = PS_IOV_FLUSH };
	int32_t status = 0;
	int ret = 0;

	if (rm->sk >= 0 && done) {
		status = -1;
		/* A chunk asked ahead of pages that came otherwise since: its answer first. */
		ret = remote_stash_ahead(rm) ?: ps_send(rm->sk, &pi, sizeof(pi));
		if (!ret)
			ret = ps_recv(rm->sk, &status, sizeof(status));
		if (ret || status)
			pr_err("the dump's source %s did not confirm the end: %s\n",
			       page_server_name(), ret ? strerror(-ret) : "bad status");
		else
			pr_info("the dump's source %s served %llu requests (%llu asked ahead), "
				"%llu bytes\n",
				page_server_name(), (unsigned long long)rm->requests,
				(unsigned long long)rm->ahead_used, (unsigned long long)rm->bytes);
	}
	if (rm->sk >= 0)
		close(rm->sk);
	free(rm->buf);
	free(rm->stash_buf);
	return ret || status ? -1 : 0;
}

int cr_lazy_pages(void)
{
	struct lazy_daemon d = { .ep = -1,
				 .listen_watch = { WATCH_LISTEN, NULL },
				 .guardian_sock = -1,
				 .remote = { .sk = -1 } };
	struct sockaddr_un addr;
	int listen_fd = listen_socket(&addr), ret = -1;

	if (listen_fd < 0)
		return -1;
	if (connect_remote(&d.remote))
		goto out;
	if (daemonize())
		goto out;
	/* --status-fd: restore may connect now (CRIU's test driver waits for this byte). */
	report_status_ready();
	if (start_guardian(&d, listen_fd))
		goto out;
	d.ep = epoll_create1(EPOLL_CLOEXEC);
	if (d.ep < 0) {
		pr_perror("lazy pages: epoll_create1");
		goto out;
	}
	if (watch(&d, listen_fd, &d.listen_watch))
		goto out;
	ret = serve(&d, listen_fd);
	if (!ret)
		pr_info("every page is in: %u tasks served\n", d.nr_served);
out:
	/* On an error the tasks still waiting for pages are killed: never zeroes for them. */
	if (ret && d.guardian_sock >= 0) {
		close(d.guardian_sock);
		d.guardian_sock = -1;
		while (waitpid(d.guardian_pid, NULL, 0) < 0 && errno == EINTR)
			;
	} else if (!ret) {
		stop_guardian(&d);
	}
	while (d.tasks)
		task_free(&d, d.tasks);
	if (d.ep >= 0)
		close(d.ep);
	if (disconnect_remote(&d.remote, !ret))
		ret = -1;
	close(listen_fd);
	unlink(addr.sun_path);
	return ret ? -1 : 0;
}
