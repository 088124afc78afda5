/*
 * The zdtm test library: ready/SIGTERM/verdict protocol with test/zdtm.py, byte
 * patterns, and /proc readers that do not allocate (so they do not change the state
 * they observe).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "zdtmtst.h"

volatile sig_atomic_t test_sigterm_received;

static char pidfile_path[PATH_MAX];
static char pidfile_tmp_path[PATH_MAX + 8];
/*
 * The pidfile's directory, opened at init: tests may chroot or chdir before they are
 * ready, and the runner's path must still resolve. Closed by test_ready(), because an
 * open directory fd is not something every dumper supports.
 */
static int pidfile_dir_fd = -1;
static const char *pidfile_name;
static const char *pidfile_tmp_name;

void test_fail(const char *fmt, ...)
{
	va_list args;

	fputs("FAIL: ", stdout);
	va_start(args, fmt);
	vfprintf(stdout, fmt, args);
	va_end(args);
	fputc('\n', stdout);
	fflush(stdout);
	exit(1);
}

void test_fail_errno(const char *what)
{
	test_fail("%s: %s", what, strerror(errno));
}

void test_pass(void)
{
	fputs("PASS\n", stdout);
	fflush(stdout);
	exit(0);
}

static void sigterm_handler(int signo)
{
	(void)signo;
	test_sigterm_received = 1;
}

/* Set in a root that test_launch_root() forked: its launcher waits for a byte on it. */
static int launch_ready_fd = -1;
#define LAUNCH_READY_ENV "ZDTM_LAUNCH_READY_FD"

void test_init(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = sigterm_handler };
	sigset_t term_set;
	char *slash;

	if (argc < 2 || argv[1][0] != '/')
		test_fail("usage: %s /ABSOLUTE/PIDFILE", argv[0]);
	if (strlen(argv[1]) >= sizeof(pidfile_path))
		test_fail("pidfile path too long");
	strcpy(pidfile_path, argv[1]);
	snprintf(pidfile_tmp_path, sizeof(pidfile_tmp_path), "%s.tmp", pidfile_path);

	slash = strrchr(pidfile_path, '/');
	pidfile_name = slash + 1;
	pidfile_tmp_name = strrchr(pidfile_tmp_path, '/') + 1;
	*slash = '\0';
	pidfile_dir_fd = open(slash == pidfile_path ? "/" : pidfile_path, O_PATH | O_DIRECTORY);
	*slash = '/';
	if (pidfile_dir_fd < 0)
		test_fail_errno("open pidfile directory");

	/* A launched root that re-executed itself (test_reexec()) still owes its launcher. */
	if (getenv(LAUNCH_READY_ENV))
		launch_ready_fd = atoi(getenv(LAUNCH_READY_ENV));

	sigemptyset(&term_set);
	sigaddset(&term_set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &term_set, NULL))
		test_fail_errno("block SIGTERM");
	if (sigaction(SIGTERM, &sa, NULL))
		test_fail_errno("sigaction(SIGTERM)");
	/*
	 * ZDTM_PIDNS_ROOT (zdtm.py's remote lazy tests): any test as the init of a pid
	 * namespace of its own, so that its restore gets its pids back while the dumped tree,
	 * still frozen, serves its pages. It leads a session of its own there, as a
	 * container's init does (CRIU dumps no session leader outside the namespace).
	 */
	if (getenv("ZDTM_PIDNS_ROOT") && launch_ready_fd < 0) {
		test_launch_root(CLONE_NEWPID);
		if (setsid() < 0)
			test_fail_errno("setsid in the new pid namespace");
	}
}

static void proc_field(const char *path, const char *name, char *out, size_t size);



static void write_pidfile_tmp_of(pid_t pid)
{
	char pid_text[32];
	int len = snprintf(pid_text, sizeof(pid_text), "%d\n", pid);
	int fd = openat(pidfile_dir_fd, pidfile_tmp_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		test_fail_errno("create pidfile");
	if (write(fd, pid_text, len) != len)
		test_fail_errno("write pidfile");
	if (close(fd))
		test_fail_errno("close pidfile");
}

static void write_pidfile_tmp(void)
{
	write_pidfile_tmp_of(getpid());
}

static void publish_pidfile(pid_t pid)
{
	write_pidfile_tmp_of(pid);
	/* rename is atomic: the runner never sees a half-written pidfile */
	if (renameat(pidfile_dir_fd, pidfile_tmp_name, pidfile_dir_fd, pidfile_name))
		test_fail_errno("publish pidfile");
	close(pidfile_dir_fd);
	pidfile_dir_fd = -1;
}

void test_ready_prepare(const char **tmp_path, const char **final_path)
{
	write_pidfile_tmp();
	close(pidfile_dir_fd);
	pidfile_dir_fd = -1;
	*tmp_path = pidfile_tmp_path;
	*final_path = pidfile_path;
}

void test_ready(void)
{
	if (launch_ready_fd < 0) {
		publish_pidfile(getpid());
		return;
	}
	/* A launched root: its launcher publishes the pid, as the runner sees it. */
	if (write(launch_ready_fd, "R", 1) != 1)
		test_fail_errno("tell the launcher the root is ready");
	close(launch_ready_fd);
	launch_ready_fd = -1;
	close(pidfile_dir_fd);
	pidfile_dir_fd = -1;
}

void test_reexec(const char *prog, char *const argv[])
{
	char fd_text[16];

	snprintf(fd_text, sizeof(fd_text), "%d", launch_ready_fd);
	if (launch_ready_fd >= 0 && setenv(LAUNCH_READY_ENV, fd_text, 1))
		test_fail_errno("setenv " LAUNCH_READY_ENV);
	close(pidfile_dir_fd);
	execv(prog, argv);
	test_fail("exec %s: %s", prog, strerror(errno));
}

void test_unshare_time(long monotonic_sec, long boottime_sec)
{
	char text[96];
	int fd, len;

	if (unshare(CLONE_NEWTIME))
		test_fail_errno("unshare(CLONE_NEWTIME)");
	len = snprintf(text, sizeof(text), "monotonic %ld 0\nboottime %ld 0\n", monotonic_sec,
		       boottime_sec);
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, text, len) != len)
		test_fail_errno("write /proc/self/timens_offsets");
	close(fd);
}

/*
 * Maps for a user namespace the caller is about to unshare: only a process outside it may
 * write more than its own id, so a child forked before the unshare writes them once told
 * to (a byte on go), and the caller waits for it.
 */
static pid_t fork_map_writer(int *go)
{
	int ends[2];
	pid_t writer;

	if (pipe(ends))
		test_fail_errno("pipe for the map writer");
	writer = fork();
	if (writer < 0)
		test_fail_errno("fork the map writer");
	if (writer == 0) {
		static const char *const maps[] = { "uid_map", "gid_map" };
		char byte, path[64], line[64];
		int len = snprintf(line, sizeof(line), "0 %u %u\n", TEST_USERNS_HOST_ID,
				   TEST_USERNS_IDS);

		close(ends[1]);
		if (read(ends[0], &byte, 1) != 1)
			_exit(1);
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "/proc/%d/%s", getppid(), maps[i]);
			int fd = open(path, O_WRONLY);

			if (fd < 0 || write(fd, line, len) != len)
				_exit(2);
			close(fd);
		}
		_exit(0);
	}
	close(ends[0]);
	*go = ends[1];
	return writer;
}

static void unshare_mapped(unsigned long flags)
{
	int go = -1, status;
	pid_t writer = 0;

	if (flags & CLONE_NEWUSER)
		writer = fork_map_writer(&go);
	if (unshare(flags))
		test_fail("unshare(%#lx): %s", flags, strerror(errno));
	if (!writer)
		return;
	if (write(go, "M", 1) != 1 || waitpid(writer, &status, 0) != writer ||
	    !WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("the user namespace's maps were not written (writer status %#x)",
			  status);
	close(go);
}

void test_launch_root(unsigned long flags)
{
	int ready[2], status;
	pid_t root;
	char byte;

	if (flags)
		unshare_mapped(flags);
	if (pipe(ready))
		test_fail_errno("pipe for the root's launch");
	root = fork();
	if (root < 0)
		test_fail_errno("fork the root");
	if (root == 0) {
		close(ready[0]);
		launch_ready_fd = ready[1];
		return;
	}
	close(ready[1]);
	if (read(ready[0], &byte, 1) != 1) {
		waitpid(root, &status, 0);
		test_fail("the root exited before it was ready (wait status %#x)", status);
	}
	publish_pidfile(root);
	_exit(0);
}

void test_launch_netns_root(bool userns)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd;

	test_launch_root(CLONE_NEWPID | CLONE_NEWNET |
			 (userns ? CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWIPC : 0));
	/* root inside, with every capability of the namespace */
	if (userns && (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		test_fail_errno("become root in the user namespace");
	if (setsid() != 1)
		test_fail_errno("setsid");
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr))
		test_fail_errno("SIOCGIFFLAGS lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr))
		test_fail_errno("SIOCSIFFLAGS lo");
	close(fd);
}

/* "NSpid:" of the calling thread: how many entries, and the last one. */
static unsigned int thread_nspid(pid_t *last)
{
	char text[256], *pos, *end;
	unsigned int nr = 0;

	proc_field("/proc/thread-self/status", "NSpid", text, sizeof(text));
	for (pos = text;; pos = end, nr++) {
		long id = strtol(pos, &end, 10);

		if (end == pos)
			return nr;
		*last = id;
	}
}

unsigned int ns_pid_levels(void)
{
	pid_t last;

	return thread_nspid(&last);
}

void expect_ns_pid(pid_t want, unsigned int levels, const char *who)
{
	pid_t own = syscall(SYS_gettid), last = 0;
	unsigned int nr = thread_nspid(&last);

	if (own != want || last != want || nr != levels)
		test_fail("%s: pid %d, the last of %u \"NSpid:\" entries %d; expected %d, %u "
			  "entries", who, own, nr, last, want, levels);
}

void test_wait_sigterm(void)
{
	sigset_t wait_mask;

	if (sigprocmask(SIG_BLOCK, NULL, &wait_mask))
		test_fail_errno("read sigmask");
	sigdelset(&wait_mask, SIGTERM);
	while (!test_sigterm_received)
		sigsuspend(&wait_mask);
}

/* splitmix64: cheap, and every output bit depends on every input bit */
static uint64_t pattern_word(uint64_t seed, uint64_t index)
{
	uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void pattern_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *bytes = buf;
	size_t off;

	for (off = 0; off + 8 <= len; off += 8) {
		uint64_t word = pattern_word(seed, off / 8);

		memcpy(bytes + off, &word, 8);
	}
	if (off < len) {
		uint64_t word = pattern_word(seed, off / 8);

		memcpy(bytes + off, &word, len - off);
	}
}

ssize_t pattern_check(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *bytes = buf;
	size_t off, i;

	for (off = 0; off < len; off += 8) {
		uint64_t word = pattern_word(seed, off / 8);
		size_t chunk = len - off < 8 ? len - off : 8;

		if (!memcmp(bytes + off, &word, chunk))
			continue;
		for (i = 0; i < chunk; i++)
			if (bytes[off + i] != ((unsigned char *)&word)[i])
				return off + i;
	}
	return -1;
}

void pattern_expect(const void *buf, size_t len, uint64_t seed, const char *what)
{
	ssize_t bad = pattern_check(buf, len, seed);

	if (bad >= 0)
		test_fail("%s: byte %zd of %zu differs (at %p)", what, bad, len,
			  (const char *)buf + bad);
}

size_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	size_t len = 0;
	ssize_t ret;

	if (fd < 0)
		test_fail("open %s: %s", path, strerror(errno));
	while ((ret = read(fd, buf + len, size - 1 - len)) > 0) {
		len += ret;
		if (len == size - 1)
			test_fail("%s does not fit in %zu bytes", path, size);
	}
	if (ret < 0)
		test_fail("read %s: %s", path, strerror(errno));
	close(fd);
	buf[len] = '\0';
	return len;
}

void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		test_fail("create %s: %s", path, strerror(errno));
	if (write(fd, buf, len) != (ssize_t)len)
		test_fail("write %s: %s", path, strerror(errno));
	if (close(fd))
		test_fail("close %s: %s", path, strerror(errno));
}

/* Big enough for smaps of a test process (about 1 KiB per VMA) */
static char proc_buf[1 << 20];

/* The line of a /proc/self/{maps,smaps} header whose range holds addr, or NULL */
static char *find_vma_header(char *text, const void *addr)
{
	unsigned long target = (unsigned long)addr, start, end;
	char *line = text;

	while (line && *line) {
		/* smaps has "Key: value" lines between the headers; they do not parse */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2 && start <= target && target < end)
			return line;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return NULL;
}

bool vmflags_has(const char *vmflags, const char *flag)
{
	size_t flag_len = strlen(flag);

	for (const char *pos = vmflags; (pos = strstr(pos, flag)); pos += flag_len)
		if ((pos == vmflags || pos[-1] == ' ') &&
		    (pos[flag_len] == ' ' || pos[flag_len] == '\0'))
			return true;
	return false;
}

static void copy_line(char *out, size_t size, const char *line)
{
	size_t len = strcspn(line, "\n");

	if (len >= size)
		test_fail("line too long for its buffer: %.40s...", line);
	memcpy(out, line, len);
	out[len] = '\0';
}

void fd_link(int fd, char *out, size_t size)
{
	char link[64];
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, out, size - 1);
	if (len < 0)
		test_fail_errno("readlink");
	out[len] = '\0';
}

const char *restored_shmem_name(void)
{
	const char *name = getenv("ZDTM_SHMEM_NAME");

	return name ? name : "/dev/zero (deleted)";
}

void maps_line(const void *addr, char *out, size_t size)
{
	char *line;

	read_file("/proc/self/maps", proc_buf, sizeof(proc_buf));
	line = find_vma_header(proc_buf, addr);
	if (!line)
		test_fail("no VMA holds %p in /proc/self/maps", addr);
	copy_line(out, size, line);
}

/* The text after "name:" in the smaps entry of the VMA holding addr, in proc_buf. */
static char *smaps_field(const void *addr, const char *name)
{
	char key[64], *vma, *field;

	read_file("/proc/self/smaps", proc_buf, sizeof(proc_buf));
	vma = find_vma_header(proc_buf, addr);
	if (!vma)
		test_fail("no VMA holds %p in /proc/self/smaps", addr);
	snprintf(key, sizeof(key), "\n%s:", name);
	field = strstr(vma, key);
	if (!field)
		test_fail("no %s for the VMA at %p", name, addr);
	field += strlen(key);
	return field + strspn(field, " \t");
}

void smaps_vmflags(const void *addr, char *out, size_t size)
{
	copy_line(out, size, smaps_field(addr, "VmFlags"));
}

long smaps_kernel_page_kb(const void *addr)
{
	return strtol(smaps_field(addr, "KernelPageSize"), NULL, 10);
}

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"
static long nr_hugepages_before = -1;

static long read_long_file(const char *path)
{
	char buf[32];

	read_file(path, buf, sizeof(buf));
	return strtol(buf, NULL, 10);
}

static void set_nr_hugepages(long nr)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", nr);
	write_file(NR_HUGEPAGES, buf, strlen(buf));
}

void test_reserve_huge_pages(long nr)
{
	long free_pages =
		read_long_file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");

	if (free_pages >= nr)
		return;
	nr_hugepages_before = read_long_file(NR_HUGEPAGES);
	set_nr_hugepages(nr_hugepages_before + nr - free_pages);
}

void test_release_huge_pages(void)
{
	if (nr_hugepages_before >= 0)
		set_nr_hugepages(nr_hugepages_before);
}

/* The value of "name:" on a line of the proc file at path, except its first line. */
static void proc_field(const char *path, const char *name, char *out, size_t size)
{
	char key[64];
	char *field;

	snprintf(key, sizeof(key), "\n%s:", name);
	read_file(path, proc_buf, sizeof(proc_buf));
	field = strstr(proc_buf, key);
	if (!field)
		test_fail("no %s in %s", name, path);
	field += strlen(key);
	field += strspn(field, " \t");
	copy_line(out, size, field);
}

void status_field(const char *name, char *out, size_t size)
{
	proc_field("/proc/self/status", name, out, size);
}

void fdinfo_field(int fd, const char *name, char *out, size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	proc_field(path, name, out, size);
}

static int barrier_fds[2] = { -1, -1 };

void test_barrier_init(void)
{
	if (pipe(barrier_fds))
		test_fail_errno("pipe for the setup barrier");
}

void test_barrier_done(void)
{
	close(barrier_fds[0]);
	close(barrier_fds[1]);
}

/* EOF once every process holding the write end has closed it. */
void test_barrier_wait(void)
{
	char byte;
	ssize_t n;

	close(barrier_fds[1]);
	do
		n = read(barrier_fds[0], &byte, 1);
	while (n > 0 || (n < 0 && errno == EINTR));
	if (n < 0)
		test_fail_errno("setup barrier");
	close(barrier_fds[0]);
}

pid_t test_fork_child(void (*child_main)(void))
{
	pid_t child;

	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		child_main();
		test_fail("child_main returned");
	}
	test_barrier_wait();
	return child;
}

void test_children_verdict(const pid_t *children, int nr, const char *who)
{
	int i, status;

	for (i = 0; i < nr; i++) {
		if (kill(children[i], SIGTERM))
			test_fail("%s: SIGTERM to child %d: %s", who, children[i], strerror(errno));
		if (waitpid(children[i], &status, 0) != children[i])
			test_fail("%s: waitpid(%d): %s", who, children[i], strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			test_fail("%s: child %d failed (wait status %#x)", who, children[i], status);
	}
}

pid_t test_fork_outside(void (*run)(int ready_fd, void *arg), void *arg)
{
	int report[2], ready[2], status;
	pid_t child, pid;
	char byte;

	if (pipe(report) || pipe(ready))
		test_fail_errno("pipe for a process outside the tree");
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		pid = fork();
		if (pid == 0) {
			close(ready[0]);
			run(ready[1], arg);
			_exit(1);
		}
		if (pid < 0 || write(report[1], &pid, sizeof(pid)) != sizeof(pid))
			_exit(1);
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || status)
		test_fail("the child forking outside the tree failed (status %#x)", status);
	close(ready[1]);
	if (read(report[0], &pid, sizeof(pid)) != sizeof(pid) || read(ready[0], &byte, 1) != 1)
		test_fail("the process outside the tree did not start");
	close(report[0]);
	close(report[1]);
	close(ready[0]);
	return pid;
}

void test_wait_outside_exited(pid_t pid)
{
	char path[32], stat[1024], *state;
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (;;) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return;
		len = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (len <= 0)
			return;
		stat[len] = '\0';
		state = strrchr(stat, ')');
		if (state && state[1] == ' ' && state[2] == 'Z')
			return;
		sched_yield();
	}
}

/* RTM_GETLINK for the loopback device (ifindex 1). */
static void ask_for_lo(int fd)
{
	struct {
		struct nlmsghdr nlh;
		struct ifinfomsg ifi;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.ifi = { .ifi_family = AF_UNSPEC, .ifi_index = 1 },
	};

	if (send(fd, &req, sizeof(req), 0) != sizeof(req))
		test_fail_errno("ask the netlink socket for the loopback link");
}

void test_unsupported_socket(struct unsupported_socket *us)
{
	us->fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (us->fd < 0)
		test_fail_errno("netlink socket");
	ask_for_lo(us->fd);
	us->len = recv(us->fd, us->queued, sizeof(us->queued), MSG_PEEK);
	if (us->len <= 0)
		test_fail_errno("peek at the netlink answer");
}

void test_unsupported_socket_check(const struct unsupported_socket *us, const char *who)
{
	static char received[sizeof(us->queued)];

	if (recv(us->fd, received, sizeof(received), MSG_DONTWAIT) != us->len ||
	    memcmp(received, us->queued, us->len))
		test_fail("%s: the answer queued in the netlink socket is gone or changed", who);
	ask_for_lo(us->fd);
	if (recv(us->fd, received, sizeof(received), 0) <= 0)
		test_fail("%s: the netlink socket no longer works", who);
}

void expect_sock_name(int fd, bool peer, const struct sockaddr_un *want, socklen_t want_len)
{
	/* Printable: a path, or an abstract name from its second byte. */
	const char *shown =
		want_len > sizeof(sa_family_t) ? want->sun_path + !want->sun_path[0] : "";
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	int ret = peer ? getpeername(fd, (struct sockaddr *)&addr, &len)
		       : getsockname(fd, (struct sockaddr *)&addr, &len);

	if (ret || len != want_len || memcmp(&addr, want, len))
		test_fail("fd %d: %s is %u bytes (%s), expected %u ('%s')", fd,
			  peer ? "the peer's name" : "its name", len,
			  ret ? strerror(errno) : "other bytes", want_len, shown);
}

void read_exact(int fd, void *buf, size_t len, const char *what)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, (char *)buf + done, len - done);

		if (n <= 0)
			test_fail("%s: read returned %zd after %zu of %zu bytes: %s", what, n, done,
				  len, n ? strerror(errno) : "EOF");
		done += n;
	}
}

void open_fd_at(const char *path, int flags, int at)
{
	int fd = open(path, flags, 0600);

	if (fd < 0 || dup2(fd, at) != at)
		test_fail("open %s at fd %d: %s", path, at, strerror(errno));
	if (fd != at)
		close(fd);
}

void pipe_at(int read_fd, int write_fd)
{
	int ends[2];

	if (pipe(ends) || dup2(ends[0], read_fd) != read_fd || dup2(ends[1], write_fd) != write_fd)
		test_fail_errno("pipe and dup2");
	close(ends[0]);
	close(ends[1]);
}

void socket_at(int family, int type, int protocol, int at)
{
	int fd = socket(family, type, protocol);

	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("socket and dup2");
	close(fd);
}

void bind_inet(int fd, int family, const char *addr)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	bool v4 = family == AF_INET;

	if (inet_pton(family, addr, v4 ? (void *)&a4.sin_addr : (void *)&a6.sin6_addr) != 1)
		test_fail("bind_inet: %s is not an address of family %d", addr, family);
	if (bind(fd, v4 ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6,
		 v4 ? sizeof(a4) : sizeof(a6)))
		test_fail_errno("bind");
}

pid_t test_fork(void (*child_main)(void))
{
	pid_t pid = fork();

	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0) {
		child_main();
		exit(1); /* child_main() does not return */
	}
	return pid;
}

void test_in_child(void (*fn)(void *arg), void *arg, const char *who)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		test_fail("%s: fork: %s", who, strerror(errno));
	if (pid == 0) {
		fn(arg);
		exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		test_fail("%s: waitpid: %s", who, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("%s: failed (wait status %#x)", who, status);
}

void expect_lock(const char *path, bool ofd, off_t start, off_t len, const struct flock *want,
		 const char *what)
{
	struct flock got = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start,
			     .l_len = len };
	int fd = open(path, O_RDWR);

	if (fd < 0)
		test_fail("%s: open %s: %s", what, path, strerror(errno));
	if (fcntl(fd, ofd ? F_OFD_GETLK : F_GETLK, &got))
		test_fail("%s: F_%sGETLK: %s", what, ofd ? "OFD_" : "", strerror(errno));
	close(fd);
	if (got.l_type != want->l_type ||
	    (want->l_type != F_UNLCK && (got.l_start != want->l_start ||
					 got.l_len != want->l_len || got.l_pid != want->l_pid)))
		test_fail("%s: [%lld, +%lld) of %s: got type %d at %lld+%lld pid %d, expected type "
			  "%d at %lld+%lld pid %d",
			  what, (long long)start, (long long)len, path, got.l_type,
			  (long long)got.l_start, (long long)got.l_len, got.l_pid, want->l_type,
			  (long long)want->l_start, (long long)want->l_len, want->l_pid);
}

bool flock_free(const char *path, int op)
{
	int fd = open(path, O_RDONLY);
	bool free_now;

	if (fd < 0)
		test_fail("open %s: %s", path, strerror(errno));
	free_now = flock(fd, op | LOCK_NB) == 0;
	if (!free_now && errno != EWOULDBLOCK)
		test_fail("flock %s: %s", path, strerror(errno));
	close(fd);
	return free_now;
}

int proc_locks_count(int fd, const char *cls)
{
	char key[64], *line;
	struct stat st;
	int nr = 0;

	if (fstat(fd, &st))
		test_fail_errno("fstat for /proc/locks");
	snprintf(key, sizeof(key), " %02x:%02x:%lu ", major(st.st_dev), minor(st.st_dev),
		 (unsigned long)st.st_ino);
	read_file("/proc/locks", proc_buf, sizeof(proc_buf));
	for (line = strtok(proc_buf, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, key) && strstr(line, cls) && !strstr(line, "->"))
			nr++;
	return nr;
}

int pty_open_master(int flags, char *slave_path, size_t size)
{
	const char *dir = getenv("ZDTM_DEVPTS");
	char ptmx[PATH_MAX];
	int master, unlock = 0;
	unsigned int index;

	snprintf(ptmx, sizeof(ptmx), "%s/ptmx", dir ? dir : "/dev");
	master = open(ptmx, flags | O_RDWR | O_NOCTTY);
	if (master < 0 || ioctl(master, TIOCSPTLCK, &unlock) || ioctl(master, TIOCGPTN, &index))
		test_fail("cannot open a pty at %s: %s", ptmx, strerror(errno));
	snprintf(slave_path, size, "%s/%u", dir ? dir : "/dev/pts", index);
	return master;
}

void test_send_fds(int sk, const int *fds, int nr, const char *data)
{
	char control[CMSG_SPACE(sizeof(int) * 2)] = { 0 };
	struct iovec iov = { .iov_base = (void *)data, .iov_len = strlen(data) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = CMSG_SPACE(sizeof(int) * nr) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nr);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nr);
	if (sendmsg(sk, &msg, 0) != (ssize_t)strlen(data))
		test_fail_errno("sendmsg");
}

int test_recv_fds(int sk, int *fds, const char *data)
{
	char control[CMSG_SPACE(sizeof(int) * 2)], got[32];
	struct iovec iov = { .iov_base = got, .iov_len = sizeof(got) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c;
	ssize_t n = recvmsg(sk, &msg, MSG_DONTWAIT);

	if (n != (ssize_t)strlen(data) || memcmp(got, data, n))
		test_fail("fd %d: the message '%s' is gone (%zd bytes)", sk, data, n);
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		test_fail("fd %d: the files in flight with '%s' are gone", sk, data);
	memcpy(fds, CMSG_DATA(c), c->cmsg_len - CMSG_LEN(0));
	return (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
}

bool test_wait_lazy_restore(const void *probe)
{
	void *page = (void *)((uintptr_t)probe & ~(uintptr_t)4095);
	struct timespec pause = { 0, 1000 * 1000 };
	unsigned char resident;
	sigset_t pending;

	for (;;) {
		if (mincore(page, 4096, &resident))
			test_fail_errno("mincore");
		if (!(resident & 1))
			return true;
		if (sigpending(&pending))
			test_fail_errno("sigpending");
		if (sigismember(&pending, SIGTERM))
			return false;
		nanosleep(&pause, NULL);
	}
}

void *test_map_pattern(size_t len, uint64_t seed)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(p, len, seed);
	return p;
}

/* ---- mount namespaces ---- */

static void mnt_must(int ret, const char *what)
{
	if (ret)
		test_fail_errno(what);
}

void test_bind_mount(const char *from, const char *to, unsigned long flags)
{
	mnt_must(mount(from, to, NULL, MS_BIND, NULL), to);
	if (flags)
		mnt_must(mount(NULL, to, NULL, MS_BIND | MS_REMOUNT | flags, NULL), "remount bind");
}

/*
 * $ZDTM_MNT_OVERLAY_ROOT: "root" an overlay of lower (holding from_lower, OVERLAY_LOWER_LEN
 * bytes of pattern OVERLAY_LOWER_SEED), upper and ovwork, all beside it.
 */
static void mount_overlay_root(void)
{
	char cwd[2048], opts[8192], data[OVERLAY_LOWER_LEN];
	int fd;

	if (!getcwd(cwd, sizeof(cwd)))
		test_fail_errno("getcwd");
	mnt_must(mkdir("lower", 0755) || mkdir("upper", 0755) || mkdir("ovwork", 0755),
		 "mkdir lower, upper, ovwork");
	pattern_fill(data, sizeof(data), OVERLAY_LOWER_SEED);
	fd = open("lower/from_lower", O_WRONLY | O_CREAT | O_EXCL, 0640);
	if (fd < 0 || write(fd, data, sizeof(data)) != (ssize_t)sizeof(data) || close(fd))
		test_fail_errno("lower/from_lower");
	snprintf(opts, sizeof(opts), "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/ovwork", cwd,
		 cwd, cwd);
	mnt_must(mount("overlay", "root", "overlay", 0, opts), "mount the overlay root");
}

void test_mnt_new_root(const char *out_dir, const char *dirs, char **argv, const char *stage2)
{
	char exe[4096], pidfile[4096];
	ssize_t len;
	int src, dst;

	mnt_must(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");
	/* $ZDTM_MNT_USERNS: made beforehand, for the user namespace's root (see mnt_ns_tree). */
	mnt_must(mkdir("root", 0755) && errno != EEXIST, "mkdir root");
	if (getenv("ZDTM_MNT_OVERLAY_ROOT"))
		mount_overlay_root();
	else
		test_bind_mount("root", "root", 0);
	mnt_must(chdir("root"), "chdir root");
	for (const char *d = dirs; *d; d += strlen(d) + 1)
		mnt_must(mkdir(d, 0755), d);
	mnt_must(symlink("usr/lib", "lib") || symlink("usr/lib64", "lib64"), "symlink lib");
	test_bind_mount("/usr", "usr", MS_RDONLY | MS_NOSUID);
	test_bind_mount(out_dir, "out", 0);
	/* In a user namespace, proc mounts only where one is fully visible: the runner's. */
	if (getenv("ZDTM_MNT_USERNS"))
		mnt_must(mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
			 "proc");

	src = open("/proc/self/exe", O_RDONLY);
	dst = open("bin/test", O_WRONLY | O_CREAT | O_EXCL, 0755);
	if (src < 0 || dst < 0)
		test_fail_errno("copy the binary");
	while ((len = read(src, exe, sizeof(exe))) > 0)
		if (write(dst, exe, len) != len)
			test_fail_errno("copy the binary");
	close(src);
	close(dst);

	mnt_must(syscall(SYS_pivot_root, ".", "."), "pivot_root");
	mnt_must(umount2(".", MNT_DETACH), "umount the old root");
	mnt_must(chdir("/"), "chdir /");
	snprintf(pidfile, sizeof(pidfile), "/out/%s", strrchr(argv[1], '/') + 1);
	test_reexec("/bin/test", (char *[]){ argv[0], pidfile, (char *)stage2, NULL });
}

void test_mnt_ns_start(int argc, char **argv, const char *dirs, const char *stage2)
{
	char out_dir[PATH_MAX];
	int fd;

	if (argc < 3 || strcmp(argv[2], stage2)) {
		snprintf(out_dir, sizeof(out_dir), "%s", argv[1]);
		*strrchr(out_dir, '/') = '\0';
		test_launch_root(CLONE_NEWPID | CLONE_NEWNS);
		test_mnt_new_root(out_dir, dirs, argv, stage2);
	}
	if (getsid(0) != 1 && setsid() != 1)
		test_fail_errno("setsid");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		test_fail_errno("mount /proc");
	fd = open("/out/output", O_WRONLY | O_APPEND);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || close(fd))
		test_fail_errno("stdout to /out/output");
	fd = open("/out/output", O_RDONLY);
	if (fd < 0 || dup2(fd, 0) < 0 || close(fd))
		test_fail_errno("stdin from /out/output");
}

#define MNT_TABLE_MAX 32

/* One mount, as the tables show it: ids left out, peer groups renamed by first use. */
struct mnt_line {
	int id, parent;
	char text[1024];
};

static int group_name(int *groups, int *nr, int group)
{
	for (int i = 0; i < *nr; i++)
		if (groups[i] == group)
			return i + 1;
	if (*nr < MNT_TABLE_MAX * 4)
		groups[(*nr)++] = group;
	return *nr;
}

/* "TYPE SOURCE SUPER", one blank after each: the source may be empty. */
static bool split_fs_fields(const char *tail, char fstype[32], char src[64], char super[128])
{
	size_t type_len = strcspn(tail, " "), src_len;

	if (!tail[type_len] || type_len >= 32)
		return false;
	snprintf(fstype, 32, "%.*s", (int)type_len, tail);
	tail += type_len + 1;
	src_len = strcspn(tail, " ");
	if (!tail[src_len] || src_len >= 64)
		return false;
	snprintf(src, 64, "%.*s", (int)src_len, tail);
	return sscanf(tail + src_len + 1, "%127s", super) == 1;
}

/* mountinfo lines by their mount point (the 5th field): the kernel lists by creation. */
static const char *mount_point_of(const char *line)
{
	for (int i = 0; i < 4 && line; i++)
		line = strchr(line, ' ') ? strchr(line, ' ') + 1 : NULL;
	return line ? line : "";
}

/* Then, for mounts stacked on one point, by filesystem ("TYPE SOURCE ..."): no ids in it. */
static int by_mount_point(const void *a, const void *b)
{
	const char *la = *(char *const *)a, *lb = *(char *const *)b;
	size_t pa = strcspn(mount_point_of(la), " "), pb = strcspn(mount_point_of(lb), " ");
	int ret = strncmp(mount_point_of(la), mount_point_of(lb), pa < pb ? pa : pb);

	if (!ret && pa != pb)
		ret = pa < pb ? -1 : 1;
	if (!ret && strstr(la, " - ") && strstr(lb, " - "))
		ret = strcmp(strstr(la, " - "), strstr(lb, " - "));
	return ret;
}

/* One mountinfo file's lines, parsed, by mount point; groups named across calls. */
static int mount_lines(const char *mountinfo, struct mnt_line *lines, int *groups, int *nr_groups)
{
	static char buf[16384];
	char *line, *save, *sorted[MNT_TABLE_MAX];
	int nr_lines = 0, nr;

	read_file(mountinfo, buf, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line && nr_lines < MNT_TABLE_MAX;
	     line = strtok_r(NULL, "\n", &save))
		sorted[nr_lines++] = line;
	qsort(sorted, nr_lines, sizeof(sorted[0]), by_mount_point);
	for (nr = 0; nr < nr_lines; nr++) {
		char point[256], root[256], opts[128], tail[256], fstype[32], src[64], super[128];
		char prop[128] = "", *dash;
		unsigned int maj, min;
		int n;

		line = sorted[nr];
		dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%d %d %u:%u %255s %255s %127s%n", &lines[nr].id,
				    &lines[nr].parent, &maj, &min, root, point, opts, &n) != 7 ||
		    !split_fs_fields(dash + 3, fstype, src, super))
			test_fail("mountinfo line \"%s\"", line);
		snprintf(tail, sizeof(tail), "%.*s", (int)(dash - line - n), line + n);
		for (char *tag = strtok(tail, " "); tag; tag = strtok(NULL, " ")) {
			int group;
			size_t at = strlen(prop);

			if (sscanf(tag, "shared:%d", &group) == 1)
				snprintf(prop + at, sizeof(prop) - at, " shared:%d",
					 group_name(groups, nr_groups, group));
			else if (sscanf(tag, "master:%d", &group) == 1)
				snprintf(prop + at, sizeof(prop) - at, " master:%d",
					 group_name(groups, nr_groups, group));
			else
				snprintf(prop + at, sizeof(prop) - at, " %s", tag);
		}
		snprintf(lines[nr].text, sizeof(lines[nr].text), "%s %s %s%s %s %s %s", point,
			 root, opts, prop, fstype, src, super);
	}
	return nr;
}

void test_mount_tables(const char *const *mountinfos, int nr_files, char *out, size_t size)
{
	int groups[MNT_TABLE_MAX * 4], nr_groups = 0;
	struct mnt_line lines[MNT_TABLE_MAX];
	size_t used = 0;

	out[0] = '\0';
	for (int f = 0; f < nr_files; f++) {
		int nr = mount_lines(mountinfos[f], lines, groups, &nr_groups);

		used += snprintf(out + used, size - used, "%s:\n", mountinfos[f]);
		for (int i = 0; i < nr && used < size; i++) {
			const char *parent = "-";
			int len = 0;

			for (int j = 0; j < nr; j++)
				if (lines[j].id == lines[i].parent) {
					parent = lines[j].text;
					len = strcspn(parent, " ");
				}
			used += snprintf(out + used, size - used, "%s in %.*s\n", lines[i].text,
					 len ? len : 1, parent);
		}
	}
}

void test_mount_table(const char *mountinfo, char *out, size_t size)
{
	test_mount_tables(&mountinfo, 1, out, size);
}

bool test_same_pidns(pid_t host)
{
	char path[64], ours[64], its[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", host);
	len = readlink(path, its, sizeof(its) - 1);
	if (len < 0)
		return false;
	its[len] = '\0';
	len = readlink("/proc/self/ns/pid", ours, sizeof(ours) - 1);
	if (len < 0)
		test_fail_errno("readlink /proc/self/ns/pid");
	ours[len] = '\0';
	return !strcmp(ours, its);
}
