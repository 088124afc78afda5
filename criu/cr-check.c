/*
 * The `criu check` command: every feature name CRIU knows, and the probes behind them.
 * Each probe asks the kernel the way the pipelines will use the feature, with no side
 * effects; the probes a pipeline also asks at run time live with it (kerndat.c, the kinds).
 */
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/wait.h>
#include <linux/kcmp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "compel.h"
#include "cr-check.h"
#include "kerndat.h"
#include "log.h"
#include "loginuid.h"
#include "mem-guard.h"
#include "mem-track.h"
#include "namespaces.h"
#include "net-lock.h"
#include "net-nft.h"
#include "netlock-nft.h"
#include "uffd.h"
#include "sk-inet.h"
#include "sk-raw.h"
#include "tun.h"

#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS 77
#define PR_TIMER_CREATE_RESTORE_IDS_GET 2
#endif
#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif

/*
 * Which `criu check` looks at a feature: plain check the required ones, --extra and
 * --experimental more; every feature answers to --feature NAME.
 */
enum feature_group {
	FEAT_REQUIRED,
	FEAT_EXTRA,
	FEAT_EXPERIMENTAL,
	FEAT_ONLY_BY_NAME,
};

/*
 * A feature is supported when this criu uses it and the kernel has it. Those this criu
 * does not implement have no probe: they answer "not supported" whatever the kernel
 * says, so that CRIU's test driver skips the tests that need them.
 */
struct feature {
	const char *name;
	enum feature_group group;
	bool (*probe)(void); /* NULL: not implemented by this criu */
	const char *what; /* with a probe: what needs it; without: what is missing */
};

static bool has_ptrace_rseq(void)
{
	/* An invalid pid gives ESRCH for a known request, EIO for an unknown one. */
	return ptrace(PTRACE_GET_RSEQ_CONFIGURATION, 0, 0, 0) < 0 && errno == ESRCH;
}

static bool has_prctl_mm_map(void)
{
	unsigned int size = 0;

	return prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, (unsigned long)&size, 0, 0) == 0 && size;
}

static bool has_mremap_vdso(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	bool vdso = false;

	if (!maps)
		return false;
	while (fgets(line, sizeof(line), maps))
		vdso |= strstr(line, "[vdso]") != NULL;
	fclose(maps);
	return vdso;
}

static bool has_memfd(void)
{
	int fd = memfd_create("criu-check", MFD_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Without free huge pages too: memfd_create() reserves nothing. */
static bool has_memfd_hugetlb(void)
{
	int fd = memfd_create("criu-check", MFD_CLOEXEC | MFD_HUGETLB);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool has_process_vm_readv(void)
{
	char src = 1, dst = 0;
	struct iovec l = { &dst, 1 }, r = { &src, 1 };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1 && dst == 1;
}

static bool has_map_fixed_noreplace(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *q;

	if (p == MAP_FAILED)
		return false;
	/* A kernel that knows the flag refuses to replace the existing page. */
	q = mmap(p, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	munmap(p, 4096);
	return q == MAP_FAILED && errno == EEXIST;
}

/* Asking for the current setting fails with EINVAL where the prctl is unknown. */
static bool has_timer_cr_ids(void)
{
	return prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_GET, 0, 0, 0) >= 0;
}

/* Dump names the fd holding a flock() or OFD lock by the "lock:" lines of its fdinfo. */
static bool has_fdinfo_lock(void)
{
	int fd = memfd_create("criu-check", MFD_CLOEXEC);
	char path[64], line[256];
	bool shown = false;
	FILE *f;

	if (fd < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = flock(fd, LOCK_EX) ? NULL : fopen(path, "re");
	while (f && !shown && fgets(line, sizeof(line), f))
		shown = !strncmp(line, "lock:", 5);
	if (f)
		fclose(f);
	close(fd);
	return shown;
}

/* Remote syscalls and the restorer run past a task's seccomp only with this option. */
static bool has_seccomp_suspend(void)
{
	return compel_seize_options() & PTRACE_O_SUSPEND_SECCOMP;
}

/* Filters are read with PTRACE_SECCOMP_GET_FILTER, which needs the kernel's filters. */
static bool has_seccomp_filters(void)
{
	return has_seccomp_suspend() && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

/* With a NULL argument the ioctl fails with EFAULT where it exists, ENOTTY where not. */
static bool has_timerfd_set_ticks(void)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	bool known;

	if (fd < 0)
		return false;
	known = ioctl(fd, TFD_IOC_SET_TICKS, NULL) < 0 && errno == EFAULT;
	close(fd);
	return known;
}

/* An epoll watching its own pipe's read end: kcmp finds the watched file at that fd. */
static bool has_kcmp_epoll(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ends[2], epfd = epoll_create1(EPOLL_CLOEXEC);
	bool found = false;

	if (epfd >= 0 && !pipe2(ends, O_CLOEXEC)) {
		struct kcmp_epoll_slot slot = { .efd = epfd, .tfd = ends[0], .toff = 0 };

		found = !epoll_ctl(epfd, EPOLL_CTL_ADD, ends[0], &ev) &&
			syscall(SYS_kcmp, getpid(), getpid(), KCMP_EPOLL_TFD, ends[0], &slot) == 0;
		close(ends[0]);
		close(ends[1]);
	}
	if (epfd >= 0)
		close(epfd);
	return found;
}

/* Cgroup namespaces: the kernel shows one for every process (Linux 4.6). */
static bool has_cgroupns(void)
{
	return access("/proc/self/ns/cgroup", F_OK) == 0;
}

/* Time namespaces: the kernel shows one for every process (Linux 5.6). */
static bool has_timens(void)
{
	return access("/proc/self/ns/time", F_OK) == 0;
}

/* A task's pids down its pid namespaces, which dump and restore read (Linux 4.1). */
static bool has_nspid(void)
{
	char buf[4096];
	ssize_t len;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	return strstr(buf, "\nNSpid:") != NULL;
}

/*
 * A namespace names the user namespace that owns it (NS_GET_USERNS, Linux 4.9): dump finds
 * the parent of the tree's user namespace so (NS_GET_PARENT, the same release).
 */
static bool has_userns(void)
{
	int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC), owner;

	if (fd < 0)
		return false;
	owner = ioctl(fd, NS_GET_USERNS);
	close(fd);
	if (owner < 0)
		return false;
	close(owner);
	return true;
}

/* Files name the mount they were reached through (statx's STATX_MNT_ID, Linux 5.8). */
static bool has_statx_mnt_id(void)
{
	struct statx stx;

	return !statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &stx) && (stx.stx_mask & STATX_MNT_ID);
}

/*
 * Mount namespaces' peer groups are restored with move_mount(MOVE_MOUNT_SET_GROUP) (Linux
 * 5.15): with no fds, a kernel that knows the flag says EBADF, one that does not EINVAL.
 */
static bool has_move_mount_set_group(void)
{
	return syscall(SYS_move_mount, -1, "", -1, "", 0x100 | 0x4 | 0x40) < 0 && errno == EBADF;
}

/*
 * AIO rings are restored by moving a new context's ring to the dumped address, which the
 * kernel allows since Linux 3.19 (the context follows its ring). Probed on a ring of our own.
 */
static bool has_aio_remap(void)
{
	unsigned long ctx = 0, len = sysconf(_SC_PAGESIZE);
	void *spot, *moved;
	bool ok;

	if (syscall(SYS_io_setup, 1, &ctx))
		return false;
	spot = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	moved = spot == MAP_FAILED ? MAP_FAILED :
				     mremap((void *)ctx, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, spot);
	ok = moved != MAP_FAILED;
	if (ok)
		ctx = (unsigned long)moved;
	else if (spot != MAP_FAILED)
		munmap(spot, len);
	syscall(SYS_io_destroy, ctx);
	return ok;
}

/*
 * A bound Unix socket's file is opened through the socket (SIOCUNIXFILE, Linux 4.13), so
 * that one bound in another mount namespace is found: an unbound socket has none (ENOENT),
 * a kernel without the ioctl does not know it.
 */
static bool has_unix_file(void)
{
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ret;

	if (sk < 0)
		return false;
	ret = ioctl(sk, SIOCPROTOPRIVATE + 0);
	close(sk);
	return ret < 0 && errno == ENOENT;
}

/* Whether a new socket of this family takes option opt at level (set to 1). */
static bool socket_takes_opt(int family, int level, int opt)
{
	int sk = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, ret;

	if (sk < 0)
		return false;
	ret = setsockopt(sk, level, opt, &one, sizeof(one));
	close(sk);
	return ret == 0;
}

/* SO_BUF_LOCK (5.14), which sk-opts.c dumps and sets again. */
static bool has_sockopt_buf_lock(void)
{
	return socket_takes_opt(AF_INET, SOL_SOCKET, 72 /* SO_BUF_LOCK */);
}

/* IPV6_FREEBIND (4.15), which sk-inet.c dumps and sets again for IPv6 sockets. */
static bool has_ipv6_freebind(void)
{
	return socket_takes_opt(AF_INET6, SOL_IPV6, 78 /* IPV6_FREEBIND */);
}

#define NOT_IMPLEMENTED(n, why) { n, FEAT_ONLY_BY_NAME, NULL, why }

/* Upstream CRIU's feature names first (CRIU 4.2), then this criu's own. */
static const struct feature features[] = {
	{ "mnt_id", FEAT_EXTRA, has_statx_mnt_id, "mount namespaces (files' mount ids)" },
	{ "mem_dirty_track", FEAT_EXTRA, mem_track_supported, "pre-dump (write tracking)" },
	{ "aio_remap", FEAT_EXTRA, has_aio_remap, "AIO rings (io_setup contexts)" },
	{ "timerfd", FEAT_EXTRA, has_timerfd_set_ticks, "timerfd restore with unread expirations" },
	{ "tun", FEAT_EXTRA, tun_has_dev, "tun/tap devices and their files" },
	{ "tun_ns", FEAT_EXTRA, tun_has_netns, "tun/tap devices of the tree's net namespaces" },
	{ "userns", FEAT_EXTRA, has_userns, "user namespaces" },
	{ "fdinfo_lock", FEAT_EXTRA, has_fdinfo_lock, "--file-locks" },
	{ "seccomp_suspend", FEAT_EXTRA, has_seccomp_suspend, "seccomp (strict mode and filters)" },
	{ "seccomp_filters", FEAT_EXTRA, has_seccomp_filters, "seccomp filters" },
	{ "loginuid", FEAT_EXTRA, kerndat_has_loginuid, "the audit loginuid" },
	{ "cgroupns", FEAT_EXTRA, has_cgroupns, "cgroup namespaces" },
	NOT_IMPLEMENTED("autofs", "autofs mounts are not dumped"),
	{ "tcp_half_closed", FEAT_EXTRA, tcp_has_half_closed, "closing TCP connections" },
	NOT_IMPLEMENTED("compat_cr", "32-bit tasks are not dumped"),
	{ "uffd", FEAT_EXTRA, kerndat_has_uffd, "restore --lazy-pages" },
	{ "uffd-noncoop", FEAT_EXTRA, kerndat_has_uffd_noncoop,
	  "restore --lazy-pages of tasks that fork, mremap or munmap" },
	NOT_IMPLEMENTED("can_map_vdso", "the vdso is moved with mremap, not mapped by arch_prctl"),
	NOT_IMPLEMENTED("sk_ns", "sockets are not dumped"),
	{ "sk_unix_file", FEAT_EXTRA, has_unix_file,
	  "Unix sockets bound in other mount namespaces (their files)" },
	{ "net_diag_raw", FEAT_EXTRA, raw_sk_dumpable,
	  "raw sockets (read from each socket and /proc/net/raw, not sock_diag)" },
	{ "nsid", FEAT_EXTRA, net_has_nsid, "nested net namespaces (veth peers among them)" },
	{ "link_nsid", FEAT_EXTRA, net_has_nsid, "veth links between the tree's net namespaces" },
	{ "kcmp_epoll", FEAT_EXTRA, has_kcmp_epoll, "epoll watches on closed-and-dup'ed fds" },
	{ "timens", FEAT_EXTRA, has_timens, "time namespaces" },
	NOT_IMPLEMENTED("external_net_ns", "--external net[] is not supported"),
	{ "clone3_set_tid", FEAT_REQUIRED, kerndat_has_clone3_set_tid, "restore with original pids" },
	{ "newifindex", FEAT_EXTRA, net_has_new_ifindex, "--external netdev[]" },
	{ "nftables", FEAT_EXTRA, nft_usable, "nftables of net namespaces (the nft tool)" },
	{ "has_ipt_legacy", FEAT_EXTRA, netlock_has_ipt_legacy,
	  "the network lock and iptables of net namespaces (legacy and nft)" },
	NOT_IMPLEMENTED("pidfd_store", "there is no RPC service to keep pidfds for"),
	{ "ns_pid", FEAT_EXTRA, has_nspid, "pid namespaces" },
	NOT_IMPLEMENTED("apparmor_stacking", "LSM profiles are not restored"),
	{ "network_lock_nftables", FEAT_EXTRA, netlock_nft_usable,
	  "--network-lock nftables (the nft tool)" },
	{ "sockopt_buf_lock", FEAT_EXTRA, has_sockopt_buf_lock, "SO_BUF_LOCK of sockets" },
	{ "memfd_hugetlb", FEAT_EXTRA, has_memfd_hugetlb, "hugetlb memfds" },
	{ "move_mount_set_group", FEAT_EXTRA, has_move_mount_set_group,
	  "mount namespaces (shared and slave mounts)" },
	NOT_IMPLEMENTED("openat2", "files are reopened without openat2()"),
	{ "get_rseq_conf", FEAT_EXTRA, has_ptrace_rseq, "rseq registration dump" },
	{ "ipv6_freebind", FEAT_EXTRA, has_ipv6_freebind, "IPV6_FREEBIND of IPv6 sockets" },
	{ "pagemap_scan", FEAT_EXTRA, mem_track_supported, "pre-dump (write tracking)" },
	{ "timer_cr_ids", FEAT_EXTRA, has_timer_cr_ids, "POSIX timers restored with their ids" },
	NOT_IMPLEMENTED("overlayfs_maps", "mounts are not restored"),
	NOT_IMPLEMENTED("breakpoints", "hardware breakpoints are not dumped"),
	{ "pagemap_scan_guard_pages", FEAT_EXTRA, kerndat_has_guard_scan,
	  "guard regions (MADV_GUARD_INSTALL)" },
	/* this criu's own */
	{ "ptrace_rseq", FEAT_EXTRA, has_ptrace_rseq, "rseq registration dump" },
	{ "prctl_mm_map", FEAT_REQUIRED, has_prctl_mm_map, "mm fields restore" },
	{ "vdso", FEAT_REQUIRED, has_mremap_vdso, "vdso restore" },
	{ "memfd", FEAT_EXPERIMENTAL, has_memfd, "memfds, emulated GPU buffers" },
	{ "process_vm_readv", FEAT_REQUIRED, has_process_vm_readv, "memory dump" },
	{ "map_fixed_noreplace", FEAT_REQUIRED, has_map_fixed_noreplace, "overlap checks on restore" },
};

#define NR_FEATURES (sizeof(features) / sizeof(features[0]))

static const struct feature *find_feature(const char *name)
{
	for (size_t i = 0; i < NR_FEATURES; i++)
		if (!strcmp(features[i].name, name))
			return &features[i];
	return NULL;
}

bool check_feature_known(const char *name)
{
	return find_feature(name) != NULL;
}

const char *const *check_feature_names(void)
{
	static const char *names[NR_FEATURES + 1];

	for (size_t i = 0; i < NR_FEATURES; i++)
		names[i] = features[i].name;
	return names;
}

/*
 * The answer to one feature. Not supported: nothing on stdout and a warning (silent at
 * -v0 and -v1, as upstream's), an error for a feature restore cannot do without.
 */
static bool feature_supported(const struct feature *f)
{
	int level = f->group == FEAT_REQUIRED ? LOG_ERROR : LOG_WARN;

	if (!f->probe) {
		print_on_level(level, "%s%s is not supported by this criu: %s\n",
			       level == LOG_ERROR ? "Error: " : "Warn: ", f->name, f->what);
		return false;
	}
	if (!f->probe()) {
		print_on_level(level, "%s%s is not supported by this kernel (needed for %s)\n",
			       level == LOG_ERROR ? "Error: " : "Warn: ", f->name, f->what);
		return false;
	}
	return true;
}

static bool group_asked(enum feature_group group, const struct check_request *req)
{
	return group == FEAT_REQUIRED || (group == FEAT_EXTRA && req->extra) ||
	       (group == FEAT_EXPERIMENTAL && req->experimental);
}

static int check_one(const char *name)
{
	const struct feature *f = find_feature(name);

	if (!f) {
		pr_err("unknown feature '%s'\n", name);
		return -1;
	}
	if (!feature_supported(f))
		return -1;
	pr_msg("%s is supported\n", f->name);
	return 0;
}

int cr_check(const struct check_request *req)
{
	bool required_ok = true, extra_ok = true;

	if (req->feature)
		return check_one(req->feature);
	for (size_t i = 0; i < NR_FEATURES; i++) {
		const struct feature *f = &features[i];

		if (!group_asked(f->group, req) || feature_supported(f))
			continue;
		if (f->group == FEAT_REQUIRED)
			required_ok = false;
		else
			extra_ok = false;
	}
	if (!required_ok)
		return -1;
	if (!extra_ok) {
		pr_msg("Looks good, but the kernel lacks some features this criu can use:\n"
		       "restore of the state that needs them fails.\n");
		return -1;
	}
	pr_msg("Looks good.\n");
	return 0;
}
