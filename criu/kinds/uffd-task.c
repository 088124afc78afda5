/*
 * Lazy restore, the restore side: whether the kernel has the uffd features, which pages are
 * left out of the restore, and how a restore task hands its userfaultfd to the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cr_options.h"
#include "log.h"
#include "mem.h"
#include "pstree.h"
#include "servicefd.h"
#include "uffd.h"
#include "vma.h"

/* How long criu restore waits for a daemon that is still starting. */
#define PROBE_TIMEOUT_MS 5000

/* ---- kernel support ---- */

static int open_uffd(uint64_t features, uint64_t *got)
{
	struct uffdio_api api = {.api = UFFD_API, .features = features};
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
	       !(vma->flags & MAP_HUGETLB) && !(vma->madv & VMA_MADV_WIPEONFORK);
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
	map->runs[map->nr_runs++] = (struct page_run){
		vaddr, len, run->file_off + (vaddr - run->vaddr), run->level, run->remote};
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
	*lazy = (struct page_map){.pages_id = ti->pages.pages_id, .nr_levels = 1};
	for (i = 0; i < ti->pages.nr_runs && !ret; i++) {
		const struct page_run *run = &ti->pages.runs[i];
		uint64_t pos = run->vaddr, end = run->vaddr + run->len, piece;

		/* A run may cover neighbouring VMAs: each piece goes where its VMA says. */
		while (pos < end && !ret) {
			const struct vma_image *vma = vma_holding(ti, pos);
			bool is_lazy =
				vma && (run->remote ? vma_uffd_servable(vma) : vma_is_lazy(vma));

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
				pr_err("restore --lazy-pages: pages at %#llx are in a pre-dump "
				       "parent "
				       "image (level %u): lazy restore of a pre-dump chain is not "
				       "supported\n",
				       (unsigned long long)pos, run->level);
				ret = -ENOTSUP;
				break;
			}
			ret = map_add_run(is_lazy ? lazy : eager, is_lazy ? &lazy_cap : &eager_cap,
					  run, pos, piece);
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

int lazy_socket_addr(struct sockaddr_un *addr)
{
	const char *dir = opts.work_dir ?: opts.imgs_dir ?: ".";

	*addr = (struct sockaddr_un){.sun_family = AF_UNIX};
	if (snprintf(addr->sun_path, sizeof(addr->sun_path), "%s/%s", dir, LAZY_PAGES_SOCKET) >=
	    (int)sizeof(addr->sun_path)) {
		pr_err("lazy pages: the socket path %s/%s is longer than a Unix socket name may "
		       "be\n",
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
	struct lazy_msg msg = {.magic = LAZY_MSG_MAGIC, .kind = kind};
	struct timespec pause = {0, 10 * 1000 * 1000};
	struct sockaddr_un addr;
	int sock, ret, waited = 0;

	ret = lazy_socket_addr(&addr);
	if (ret)
		return ret;
	while ((sock = connect_daemon(&addr)) < 0 && (sock == -ENOENT || sock == -ECONNREFUSED) &&
	       waited < timeout_ms) {
		nanosleep(&pause, NULL);
		waited += 10;
	}
	if (sock < 0) {
		pr_err("lazy pages: cannot connect to %s: %s (is `criu lazy-pages` running with "
		       "this work dir?)\n",
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

/*
 * A work directory other than the images directory is kept open for the tasks as
 * LAZY_DIR_SFD (connect_daemon_in_images_dir()): the images directory they hold already.
 */
int lazy_pages_probe(void)
{
	int dir;

	if (send_control(LAZY_MSG_PROBE, PROBE_TIMEOUT_MS))
		return -1;
	if (!opts.work_dir || !opts.imgs_dir || !strcmp(opts.work_dir, opts.imgs_dir))
		return 0;
	dir = open(opts.work_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		pr_perror("lazy pages: cannot open the work directory %s", opts.work_dir);
		return -1;
	}
	return install_service_fd(LAZY_DIR_SFD, dir) < 0 ? -1 : 0;
}

void lazy_pages_done(bool restored)
{
	if (send_control(restored ? LAZY_MSG_DONE : LAZY_MSG_FAILED, 0))
		pr_warn("the lazy-pages daemon was not told that the restore ended\n");
}

/*
 * A task restored into a mount namespace of its own (a container) may not see the work
 * directory by its name: it holds it open, as the images directory (images_dir_fd) or, a
 * work directory of its own, as LAZY_DIR_SFD (lazy_pages_probe()), and connects by the
 * socket's name relative to it, from there as its cwd for the moment (the cwd a task
 * restores comes later).
 */
static int connect_daemon_in_images_dir(void)
{
	const char *work = opts.work_dir ?: opts.imgs_dir;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int dir = get_service_fd(LAZY_DIR_SFD), cwd, sock;

	if (dir < 0 && !(work && opts.imgs_dir && strcmp(work, opts.imgs_dir)))
		dir = images_dir_fd;
	if (dir < 0)
		return -ENOENT;
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0)
		return -errno;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", LAZY_PAGES_SOCKET);
	sock = fchdir(dir) ? -errno : connect_daemon(&addr);
	if (fchdir(cwd) && sock >= 0) {
		close(sock);
		sock = -errno;
	}
	close(cwd);
	return sock;
}

int lazy_pages_connect_task(pid_t pid, const struct page_map *lazy, int *uffd, int *sock)
{
	struct lazy_msg msg = {LAZY_MSG_MAGIC, LAZY_MSG_TASK, pid, lazy->pages_id, lazy->nr_runs};
	struct sockaddr_un addr;
	int ret;

	*uffd = open_uffd(LAZY_UFFD_FEATURES, NULL);
	if (*uffd < 0) {
		pr_err("task %d: cannot create a userfaultfd with fork/remap/remove/unmap events: "
		       "%s\n",
		       pid, strerror(-*uffd));
		return *uffd;
	}
	ret = lazy_socket_addr(&addr);
	if (ret)
		return ret;
	*sock = connect_daemon(&addr);
	if (*sock == -ENOENT)
		*sock = connect_daemon_in_images_dir();
	if (*sock < 0) {
		pr_err("task %d: cannot connect to the lazy-pages daemon at %s: %s\n", pid,
		       addr.sun_path, strerror(-*sock));
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
