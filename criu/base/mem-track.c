/*
 * Which pages a task wrote since the last pre-dump. This kernel has no soft-dirty bits;
 * it has userfaultfd write-protection in asynchronous mode (Linux 6.7): the kernel itself
 * resolves a write to a protected page by unprotecting it, the task never waits and sees
 * no change, and PAGEMAP_SCAN on /proc/PID/pagemap reports the unprotected (written)
 * pages and can protect them again in the same pass.
 *
 * The userfaultfd must be registered by the task itself (remote syscalls) and must stay
 * open between criu runs, or its registrations go with it: it stays in the task's fd
 * table, close-on-exec. Dumps leave it there and never put it in an image (the fd walk
 * skips it): a task left running (-R) goes on being tracked, and a killed one takes it
 * along without the cost of closing it (unprotecting every page: 0.6 s for 2 GiB). Only
 * a failed pre-dump closes it. A task that closes it itself (close_range) loses its
 * tracking, which only makes the next dump store every page again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "compel.h"
#include "log.h"
#include "pagemap-scan.h"
#include "mem-track.h"

/* Linux 6.7 uapi (linux/fs.h, linux/userfaultfd.h), newer than the build's headers. */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1ULL << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/*
 * WP_UNPOPULATED: anonymous memory needs it for PAGEMAP_SCAN to protect at all (pages
 * faulted in later then count as written). User-mode-only faults need no privilege, and
 * async write faults are resolved before that distinction matters.
 */
#define TRACK_FEATURES (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED)

#define TRACK_SCAN_BATCH 4096 /* regions per PAGEMAP_SCAN */
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096UL
#endif

bool mem_track_vma(const struct proc_vma *vma)
{
	const char *p = vma->path;

	return !vma->shared && (!p[0] || !strcmp(p, "[heap]") || !strcmp(p, "[stack]") ||
				!strncmp(p, "[anon:", 6));
}

/* One page of our own: protected, written, and reported written. */
static bool track_own_page(int uffd, int pagemap_fd, char *page)
{
	struct uffdio_api api = { .api = UFFD_API, .features = TRACK_FEATURES };
	struct uffdio_register reg = { .range = { (uintptr_t)page, PAGE_SIZE },
				       .mode = UFFDIO_REGISTER_MODE_WP };
	struct mem_written w = { 0 };
	bool ok;

	if (ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg) ||
	    mem_track_scan(pagemap_fd, (uintptr_t)page, (uintptr_t)page + PAGE_SIZE, true, &w))
		return false;
	mem_written_free(&w);
	page[0] = 1;
	ok = !mem_track_scan(pagemap_fd, (uintptr_t)page, (uintptr_t)page + PAGE_SIZE, false, &w) &&
	     w.nr == 1;
	mem_written_free(&w);
	return ok;
}

bool mem_track_supported(void)
{
	int uffd = syscall(SYS_userfaultfd, UFFD_USER_MODE_ONLY | O_CLOEXEC | O_NONBLOCK);
	int pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	char *page = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool ok = uffd >= 0 && pagemap_fd >= 0 && page != MAP_FAILED &&
		  track_own_page(uffd, pagemap_fd, page);

	if (page != MAP_FAILED)
		munmap(page, PAGE_SIZE);
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	if (uffd >= 0)
		close(uffd);
	return ok;
}

int mem_track_fd(pid_t pid)
{
	char path[64], link[64];
	struct dirent *de;
	int ret = -ENOENT;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir) {
		ret = -errno;
		pr_perror("task %d: cannot list its fds", pid);
		return ret;
	}
	while (ret == -ENOENT && (de = readdir(dir))) {
		struct proc_fdinfo fi;
		unsigned long long api, features;
		int fd = atoi(de->d_name);
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
		len = readlink(path, link, sizeof(link) - 1);
		if (de->d_name[0] == '.' || len <= 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, "anon_inode:[userfaultfd]") || parse_fd_fdinfo(pid, fd, &fi) ||
		    fdinfo_scan(&fi, "API:", 2, "%llx:%llx", &api, &features))
			continue;
		if ((features & TRACK_FEATURES) == TRACK_FEATURES)
			ret = fd;
	}
	closedir(dir);
	return ret;
}

/* An ioctl in the task, its argument copied to the scratch page first. */
static int remote_ioctl(struct compel_ctl *ctl, int mem_fd, int fd, unsigned long req,
			const void *arg, size_t len, const char *what)
{
	unsigned long scratch = compel_scratch_addr(ctl);
	long result;
	int ret;

	if (pwrite(mem_fd, arg, len, scratch) != (ssize_t)len) {
		ret = -errno;
		pr_perror("cannot write the %s argument into the task", what);
		return ret;
	}
	ret = compel_syscall(ctl, &result, SYS_ioctl, fd, req, scratch, 0, 0, 0);
	return ret ? ret : (int)(result < 0 && result > -4096 ? result : 0);
}

static int create_tracker(struct compel_ctl *ctl, pid_t pid, int mem_fd)
{
	struct uffdio_api api = { .api = UFFD_API, .features = TRACK_FEATURES };
	long fd;
	int ret;

	ret = compel_syscall(ctl, &fd, SYS_userfaultfd, UFFD_USER_MODE_ONLY | O_CLOEXEC | O_NONBLOCK,
			     0, 0, 0, 0, 0);
	if (!ret && fd < 0) {
		pr_err("task %d: userfaultfd() for write tracking failed: %s\n", pid, strerror(-fd));
		return (int)fd;
	}
	if (ret)
		return ret;
	ret = remote_ioctl(ctl, mem_fd, fd, UFFDIO_API, &api, sizeof(api), "UFFDIO_API");
	if (ret) {
		long ignored;

		pr_err("task %d: asynchronous write-protection is not available: %s\n", pid,
		       strerror(-ret));
		compel_syscall(ctl, &ignored, SYS_close, fd, 0, 0, 0, 0, 0);
		return ret;
	}
	pr_debug("task %d: write tracker is its fd %ld\n", pid, fd);
	return fd;
}

int mem_track_arm(struct compel_ctl *ctl, pid_t pid, const struct proc_vma *vmas,
		  unsigned int nr)
{
	char path[64];
	unsigned int i;
	int mem_fd, fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	mem_fd = open(path, O_RDWR | O_CLOEXEC);
	if (mem_fd < 0) {
		ret = -errno;
		pr_perror("task %d: cannot open its memory", pid);
		return ret;
	}
	fd = mem_track_fd(pid);
	if (fd == -ENOENT)
		fd = create_tracker(ctl, pid, mem_fd);
	for (i = 0; i < nr && fd >= 0 && !ret; i++) {
		struct uffdio_register reg = { .range = { vmas[i].start, vmas[i].end - vmas[i].start },
					       .mode = UFFDIO_REGISTER_MODE_WP };

		if (!mem_track_vma(&vmas[i]))
			continue;
		/* An area it refuses (locked, droppable) stays untracked: dumped whole each time. */
		if (remote_ioctl(ctl, mem_fd, fd, UFFDIO_REGISTER, &reg, sizeof(reg),
				 "UFFDIO_REGISTER"))
			pr_debug("task %d: %lx-%lx not tracked\n", pid, vmas[i].start, vmas[i].end);
	}
	close(mem_fd);
	return fd < 0 ? fd : ret;
}

int mem_track_disarm(struct compel_ctl *ctl, pid_t pid)
{
	int fd = mem_track_fd(pid);
	long result;
	int ret;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	ret = compel_syscall(ctl, &result, SYS_close, fd, 0, 0, 0, 0, 0);
	if (!ret && result) {
		pr_err("task %d: cannot close its write tracker (fd %d): %s\n", pid, fd,
		       strerror((int)-result));
		return (int)result;
	}
	if (!ret)
		pr_debug("task %d: write tracker (fd %d) closed\n", pid, fd);
	return ret;
}

static int add_written(struct mem_written *w, uint64_t start, uint64_t end)
{
	if (w->nr && w->ranges[w->nr - 1].end == start) {
		w->ranges[w->nr - 1].end = end;
		return 0;
	}
	if (w->nr == w->cap) {
		unsigned int cap = w->cap ? w->cap * 2 : 64;
		struct mem_written_range *grown = realloc(w->ranges, cap * sizeof(*grown));

		if (!grown) {
			pr_err("no memory for %u written ranges\n", cap);
			return -ENOMEM;
		}
		w->ranges = grown;
		w->cap = cap;
	}
	w->ranges[w->nr++] = (struct mem_written_range){ start, end };
	return 0;
}

/*
 * Protecting skips the VMAs the tracker does not cover and reports nothing of them, so
 * the written pages are read by a scan that does not protect (it reports every present
 * page of those VMAs), and protecting is a second pass that reports nothing.
 */
static int protect_range(int pagemap_fd, uint64_t start, uint64_t end)
{
	struct cr_pm_scan_arg arg = {
		.size = sizeof(arg), .flags = CR_PM_SCAN_WP_MATCHING, .start = start, .end = end,
		.category_mask = CR_PAGE_IS_WRITTEN, .return_mask = CR_PAGE_IS_WRITTEN,
	};

	if (ioctl(pagemap_fd, CR_PAGEMAP_SCAN, &arg) < 0) {
		int err = errno;

		pr_perror("PAGEMAP_SCAN protecting %" PRIx64 "-%" PRIx64, start, end);
		return -err;
	}
	return 0;
}

int mem_track_scan(int pagemap_fd, uint64_t start, uint64_t end, bool protect,
		   struct mem_written *w)
{
	uint64_t start_all = start, end_all = end;
	static struct cr_page_region regions[TRACK_SCAN_BATCH];
	int ret = 0;

	while (start < end && !ret) {
		struct cr_pm_scan_arg arg = {
			.size = sizeof(arg), .start = start, .end = end, .vec = (uintptr_t)regions,
				.vec_len = TRACK_SCAN_BATCH, .category_mask = CR_PAGE_IS_WRITTEN,
			.return_mask = CR_PAGE_IS_WRITTEN,
		};
		int nr = ioctl(pagemap_fd, CR_PAGEMAP_SCAN, &arg);

		if (nr < 0) {
			ret = -errno;
			pr_perror("PAGEMAP_SCAN of %" PRIx64 "-%" PRIx64, start, end);
			break;
		}
		for (int i = 0; i < nr && !ret; i++)
			ret = add_written(w, regions[i].start, regions[i].end);
		/* The scan stops early when the regions are full; it goes on from walk_end. */
		if (!ret && arg.walk_end <= start) {
			pr_err("PAGEMAP_SCAN of %" PRIx64 "-%" PRIx64 " made no progress\n", start, end);
			ret = -EIO;
		}
		start = arg.walk_end;
	}
	return ret || !protect ? ret : protect_range(pagemap_fd, start_all, end_all);
}

bool mem_written_has(struct mem_written *w, uint64_t addr)
{
	while (w->cursor < w->nr && w->ranges[w->cursor].end <= addr)
		w->cursor++;
	return w->cursor < w->nr && w->ranges[w->cursor].start <= addr;
}

void mem_written_free(struct mem_written *w)
{
	free(w->ranges);
	memset(w, 0, sizeof(*w));
}
