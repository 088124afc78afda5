/*
 * Shared helpers of the zdtm test programs: the ready/SIGTERM/verdict protocol with
 * the runner, deterministic byte patterns, and small /proc readers.
 */
#ifndef ZDTMTST_H
#define ZDTMTST_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/*
 * Protocol: the runner starts "PROG PIDFILE". test_init() blocks SIGTERM (it stays
 * blocked outside test_wait_sigterm(), so the wait has no lost-wakeup race; tests that
 * compare their sigmask see it blocked on both sides). test_ready() publishes PIDFILE
 * atomically; the runner then dumps and restores; test_wait_sigterm() returns once the
 * runner's SIGTERM arrived; the test checks its state and ends with test_pass() or
 * test_fail().
 */
void test_init(int argc, char **argv);
void test_ready(void);
void test_wait_sigterm(void);

/*
 * Trees in namespaces of their own, made as `unshare -p -f` makes them (tests with
 * 'launcher' in zdtm.py). Right after test_init(), the test program unshares a time
 * namespace whose clocks run the given seconds ahead (test_unshare_time(), optional), then
 * test_launch_root() unshares the namespaces of flags (CLONE_NEWPID, CLONE_NEWUTS,
 * CLONE_NEWIPC, ...) and forks the tree's root, born into all of them (in a new pid
 * namespace, its init); it returns in the root only. The program's first process stays a
 * launcher: once the root calls test_ready(), it publishes the root's pid as the runner
 * sees it and exits, and the root is the runner's child from then on.
 */
void test_unshare_time(long monotonic_sec, long boottime_sec);
void test_launch_root(unsigned long flags);
/*
 * test_launch_root() into pid and net namespaces of the root's own (with user, UTS and IPC
 * ones too where userns, the root then root in it), the root a session leader (as a container's init: upstream criu
 * dumps no session led from outside) with its loopback up.
 */
void test_launch_netns_root(bool userns);
/*
 * With CLONE_NEWUSER in its flags, test_launch_root() maps ids 0..TEST_USERNS_IDS-1 of the
 * new user namespace to TEST_USERNS_HOST_ID on (uids and gids alike); the launcher keeps
 * its ids (unmapped there) and all capabilities in it.
 */
#define TEST_USERNS_HOST_ID 100000u
#define TEST_USERNS_IDS	    65536u
/*
 * In a launched root (or any test before test_ready()): execv(prog, argv), the new image's
 * test_init() taking over the duty to tell the launcher (a root that pivot_root()ed into a
 * tree of its own runs its binary from there). Returns only to fail the test.
 */
void test_reexec(const char *prog, char *const argv[]) __attribute__((noreturn));
/*
 * The calling thread's pid (or tid) is want in its own pid namespace, levels deep in all
 * ("NSpid:" of /proc/thread-self/status, which says so from criu's namespace down), or
 * the test fails, naming who.
 */
void expect_ns_pid(pid_t want, unsigned int levels, const char *who);
/* How many pid namespaces deep the calling thread is ("NSpid:" entries). */
unsigned int ns_pid_levels(void);
/*
 * Whether process host (as /proc, the runner's, names it) is in our pid namespace: other
 * namespaces as deep as ours use the same pids inside.
 */
bool test_same_pidns(pid_t host);

/*
 * For tests that must be inside hand-written code when the dump happens (registers):
 * writes PIDFILE's temporary twin and returns both absolute paths; the caller renames
 * tmp to final (rename(2)) when its state is loaded. No fd stays open.
 */
void test_ready_prepare(const char **tmp_path, const char **final_path);

/* Set by the SIGTERM handler of test_init(); read it from asm by this name. */
extern volatile sig_atomic_t test_sigterm_received;

/* Verdicts: print "PASS" or "FAIL: reason" on stdout and exit 0 / 1. */
void test_pass(void) __attribute__((noreturn));
void test_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* A setup step failed: "FAIL: <what>: strerror(errno)". */
void test_fail_errno(const char *what) __attribute__((noreturn));
/* Read exactly len bytes (looping over short reads) or fail the test naming what. */
void read_exact(int fd, void *buf, size_t len, const char *what);

/*
 * Deterministic pattern: every byte depends on seed and its offset, so shifted,
 * swapped or zeroed pages are all caught. pattern_check() returns the offset of the
 * first wrong byte, or -1 when all of buf matches.
 */
void pattern_fill(void *buf, size_t len, uint64_t seed);
ssize_t pattern_check(const void *buf, size_t len, uint64_t seed);
/* Checks and fails the test with what and the first bad offset. */
void pattern_expect(const void *buf, size_t len, uint64_t seed, const char *what);

/*
 * Read a whole (proc) file into buf with raw read(2), no allocation, so reading
 * /proc/self/maps does not itself change the address space. NUL-terminated.
 * Returns the length; fails the test when the file does not fit or cannot be read.
 */
size_t read_file(const char *path, char *buf, size_t size);
/* Write len bytes to a new file (created with mode 0600). */
void write_file(const char *path, const void *buf, size_t len);

/* What /proc/self/fd/FD links to, into out (NUL-terminated). */
void fd_link(int fd, char *out, size_t size);
/* The VmFlags of the smaps entry holding addr, into out (a line, no "VmFlags:"). */
void smaps_vmflags(const void *addr, char *out, size_t size);
/* The KernelPageSize of the smaps entry holding addr, in KiB. */
long smaps_kernel_page_kb(const void *addr);
/*
 * hugetlb tests: at least nr free 2 MiB huge pages, vm.nr_hugepages raised if need be;
 * test_release_huge_pages() puts back the number there was.
 */
void test_reserve_huge_pages(long nr);
void test_release_huge_pages(void);
/* Whether a VmFlags line has the two-letter flag as a whole word. */
bool vmflags_has(const char *vmflags, const char *flag);
/* The /proc/self/maps line of the VMA holding addr (without newline). */
void maps_line(const void *addr, char *out, size_t size);
/*
 * The name /proc/self/maps gives restored shared anonymous memory: "/dev/zero (deleted)",
 * unless the runner says otherwise in ZDTM_SHMEM_NAME (upstream CRIU restores it as a
 * memfd, "/memfd: (deleted)"; contents and sharing are checked all the same).
 */
const char *restored_shmem_name(void);
/* The value of "Name:" in /proc/self/status, trimmed. */
void status_field(const char *name, char *out, size_t size);
/* The value of "name:" in /proc/self/fdinfo/FD, trimmed ("pos", the first line, excepted). */
void fdinfo_field(int fd, const char *name, char *out, size_t size);

/*
 * Process trees. A setup barrier: test_barrier_init() before the first fork; each
 * process of the tree calls test_barrier_done() once its setup (and its own forks) are
 * done; the root's test_barrier_wait() returns when all did. No fd of it is left open,
 * so it is not part of what is dumped.
 */
void test_barrier_init(void);
void test_barrier_done(void);
void test_barrier_wait(void);
/*
 * The common tree of one child: test_barrier_init(), fork, the child runs child_main
 * (which calls test_barrier_done() once set up and exits, never returning), the root
 * returns the child's pid once the barrier is passed.
 */
pid_t test_fork_child(void (*child_main)(void));
/*
 * After restore: SIGTERM each child (so it checks itself), wait for it, and fail the
 * test (with who) if it did not exit 0.
 */
void test_children_verdict(const pid_t *children, int nr, const char *who);

/* open(path, flags) (created 0600 with O_CREAT) moved to fd number at; fails the test. */
void open_fd_at(const char *path, int flags, int at);
/* A new pipe, its ends moved to fd numbers read_fd and write_fd; fails the test. */
void pipe_at(int read_fd, int write_fd);
/* A new socket moved to fd number at; fails the test. */
void socket_at(int family, int type, int protocol, int at);
/* bind() fd to addr (text, of family AF_INET or AF_INET6), port 0; fails the test. */
void bind_inet(int fd, int family, const char *addr);

/* fork(): the child runs child_main, which does not return; the parent gets its pid. */
pid_t test_fork(void (*child_main)(void));

/* Runs fn(arg) in a forked child; fails the test naming who unless the child exits 0. */
void test_in_child(void (*fn)(void *arg), void *arg, const char *who);

/*
 * File locks as another process sees them. Call these from a child of the holder (see
 * test_in_child()): a POSIX lock never conflicts with its own process, and the close()
 * of the new opening they make would drop the holder's POSIX locks on the file.
 * expect_lock(): F_GETLK (ofd: F_OFD_GETLK) on a new opening of path, asking for a
 * write lock on [start, start + len), must answer want: its l_type, and unless that is
 * F_UNLCK its l_start, l_len and l_pid (-1 for an OFD lock). Fails the test naming what.
 */
void expect_lock(const char *path, bool ofd, off_t start, off_t len, const struct flock *want,
		 const char *what);
/* Whether flock(op | LOCK_NB) succeeds on a new opening of path (closed again at once). */
bool flock_free(const char *path, int op);
/* The lines of /proc/locks on fd's file whose class is cls (POSIX, FLOCK, OFDLCK). */
int proc_locks_count(int fd, const char *cls);

/*
 * A new pty, unlocked, in the devpts instance the runner mounted for the test
 * ($ZDTM_DEVPTS: its own index space, which no other process of the machine takes from it
 * between dump and restore), else in /dev/pts. Returns the master (opened with flags
 * | O_RDWR | O_NOCTTY); the slave's path goes to slave_path.
 */
int pty_open_master(int flags, char *slave_path, size_t size);

/*
 * A process outside the dumped tree: forked by a child that exits, it goes to the runner
 * (a subreaper). It runs run(ready_fd, arg), which writes one byte to ready_fd once it is
 * set up and must not return; test_fork_outside() returns its pid after that byte.
 */
pid_t test_fork_outside(void (*run)(int ready_fd, void *arg), void *arg);
/* Wait until the process outside the tree has exited (the runner reaps it). */
void test_wait_outside_exited(pid_t pid);

/*
 * Dumps that must fail: a socket of a kind the dumper refuses (netlink), with the kernel's
 * answer to a request left queued in it. test_unsupported_socket_check() fails the test
 * (naming who) unless that answer is still there, byte for byte, and the socket works.
 */
struct unsupported_socket {
	int fd;
	char queued[8192];
	ssize_t len;
};
void test_unsupported_socket(struct unsupported_socket *us);
void test_unsupported_socket_check(const struct unsupported_socket *us, const char *who);

/*
 * Unix sockets: fd's own name (peer false) or its peer's is want (want_len bytes, as
 * getsockname() gives them), or the test fails.
 */
void expect_sock_name(int fd, bool peer, const struct sockaddr_un *want, socklen_t want_len);

/*
 * SCM_RIGHTS: test_send_fds() sends nr (at most 2) fds with the text data through sk;
 * test_recv_fds() receives the next message, which must say data and carry fds, into
 * fds[] and returns how many came. Either fails the test otherwise.
 */
void test_send_fds(int sk, const int *fds, int nr, const char *data);
int test_recv_fds(int sk, int *fds, const char *data);

/*
 * Lazy restore tests: after test_ready(), waits until the page at probe is missing
 * (mincore: the restore left it to criu lazy-pages, which has not copied it in yet) and
 * returns true, so that the test acts while its pages are still coming in; returns false
 * once SIGTERM is pending instead (a run without restore). probe must have been resident.
 */
bool test_wait_lazy_restore(const void *probe);
/* len bytes of private anonymous memory filled with pattern_fill(seed); fails the test. */
void *test_map_pattern(size_t len, uint64_t seed);

/* mount --bind from to, then remounted with the mount flags flags (if any); fails the test. */
void test_bind_mount(const char *from, const char *to, unsigned long flags);
/*
 * Mount namespace tests, in a root launched with CLONE_NEWNS, still in the runner's tree:
 * a new root made of bind mounts in ./root, with the directories dirs (each NUL-ended, an
 * empty one last), the runner's /usr read-only at /usr and out_dir at /out; the pivot into
 * it; then the program again from there as ARGV0 PIDFILE stage2 (its binary at /bin/test).
 * With $ZDTM_MNT_OVERLAY_ROOT the root is an overlay instead, of ./lower (which holds
 * /from_lower: OVERLAY_LOWER_LEN bytes of pattern OVERLAY_LOWER_SEED), ./upper and ./ovwork.
 */
#define OVERLAY_LOWER_LEN  500
#define OVERLAY_LOWER_SEED 82
void test_mnt_new_root(const char *out_dir, const char *dirs, char **argv, const char *stage2)
	__attribute__((noreturn));
/*
 * How the simple mount namespace tests start: in stage 1 (argv[2] is not stage2) the root is
 * launched in new pid and mount namespaces with test_mnt_new_root(dirs) beside the pidfile;
 * in stage 2 it leads a session, mounts /proc and has stdin and stdout/stderr on /out/output.
 */
void test_mnt_ns_start(int argc, char **argv, const char *dirs, const char *stage2);
/*
 * The mounts of mountinfo files, as a test compares them before the dump and after the
 * restore: each file's mounts as "POINT ROOT OPTS PROPAGATION FSTYPE SOURCE SUPER in
 * PARENT_POINT" by mount point, ids left out and peer groups numbered as they first appear
 * (across the files: a group two namespaces share has one number). Fails on bad lines.
 */
void test_mount_tables(const char *const *mountinfos, int nr, char *out, size_t size);
void test_mount_table(const char *mountinfo, char *out, size_t size);

#endif
