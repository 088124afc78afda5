/*
 * Seccomp across a restore: a process whose three threads share two filters (the second
 * with SECCOMP_FILTER_FLAG_LOG) and one thread with a third of its own, installed without
 * no_new_privs while it had CAP_SYS_ADMIN, which it dropped afterwards; and a child in
 * strict mode. After restore each thread has its filters (counted in /proc, and each
 * one's errno seen), the shared ones are one filter again (a TSYNC install succeeds and
 * reaches the other thread), the capability is still gone and no_new_privs still off,
 * and the strict child answers over a pipe and is killed by a syscall strict mode
 * refuses.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "zdtmtst.h"

#define ERR_UNAME 77 /* shared filter 1 */
#define ERR_GETPGID 78 /* shared filter 2, logged */
#define ERR_GETSID 79 /* the thread's own */
#define ERR_PRIO 80 /* installed with TSYNC after restore */

static pthread_mutex_t step = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 2: both threads ready; 3: restored, check; 4: TSYNC in; 5: checked */
static const char *failure_own, *failure_shared; /* of each thread */
static pid_t own_tid, shared_tid;

static void install(int nr, int err, unsigned int flags)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = 4, .filter = prog };
	long ret = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);

	if (ret > 0)
		test_fail("seccomp TSYNC: thread %ld does not share the filters", ret);
	if (ret)
		test_fail_errno("seccomp");
}

static void wait_stage(int want)
{
	pthread_mutex_lock(&step);
	while (stage < want)
		pthread_cond_wait(&cond, &step);
	pthread_mutex_unlock(&step);
}

static void next_stage(void)
{
	pthread_mutex_lock(&step);
	stage++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&step);
}

/* NULL when ret is -1 with errno err, else what. */
static const char *expect_errno(long ret, int err, const char *what)
{
	return ret == -1 && errno == err ? NULL : what;
}

static const char *check_shared(const char *who_uname, const char *who_getpgid)
{
	return expect_errno(syscall(SYS_uname, NULL), ERR_UNAME, who_uname) ?:
	       expect_errno(getpgid(0), ERR_GETPGID, who_getpgid);
}

/* A filter of its own on top of the shared ones; it checks them all, then exits. */
static void *own_thread(void *arg)
{
	(void)arg;
	own_tid = syscall(SYS_gettid);
	install(SYS_getsid, ERR_GETSID, 0);
	next_stage();
	wait_stage(3);
	failure_own = expect_errno(syscall(SYS_getsid, 0), ERR_GETSID, "own thread: getsid passes") ?:
		      check_shared("own thread: uname passes", "own thread: getpgid passes");
	return NULL;
}

/* Only the shared filters: after restore, a TSYNC filter of the main thread reaches it. */
static void *shared_thread(void *arg)
{
	(void)arg;
	shared_tid = syscall(SYS_gettid);
	next_stage();
	wait_stage(3);
	failure_shared = check_shared("shared thread: uname passes", "shared thread: getpgid passes");
	if (!failure_shared && syscall(SYS_getsid, 0) < 0)
		failure_shared = "shared thread: another thread's filter refuses getsid";
	wait_stage(4);
	if (!failure_shared && !getenv("ZDTM_SECCOMP_UNSHARED"))
		failure_shared = expect_errno(getpriority(PRIO_PROCESS, 0), ERR_PRIO,
					      "shared thread: the TSYNC filter did not reach it");
	return NULL;
}

static void drop_sys_admin(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		test_fail_errno("capget");
	data[0].effective &= ~(1u << CAP_SYS_ADMIN);
	data[0].permitted &= ~(1u << CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &hdr, data))
		test_fail_errno("capset");
}

static int has_sys_admin(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		test_fail_errno("capget");
	return !!(data[0].permitted & (1u << CAP_SYS_ADMIN));
}

/* Strict mode: read a byte, answer it + 1, read another, then try getppid(). */
static pid_t start_strict_child(int *to_child, int *from_child)
{
	int down[2], up[2];
	pid_t pid;

	if (pipe(down) || pipe(up))
		test_fail_errno("pipe");
	pid = fork();
	if (pid < 0)
		test_fail_errno("fork");
	if (pid == 0) {
		char c;

		close(down[1]);
		close(up[0]);
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
			_exit(2);
		if (syscall(SYS_read, down[0], &c, 1) != 1)
			syscall(SYS_exit, 3);
		c++;
		syscall(SYS_write, up[1], &c, 1);
		syscall(SYS_read, down[0], &c, 1);
		syscall(SYS_getppid); /* killed here */
		syscall(SYS_exit, 4);
	}
	close(down[0]);
	close(up[1]);
	*to_child = down[1];
	*from_child = up[0];
	return pid;
}

static int thread_filters(pid_t tid)
{
	char path[64], line[128];
	int count = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		test_fail_errno("status");
	while (fgets(line, sizeof(line), f))
		sscanf(line, "Seccomp_filters: %d", &count);
	fclose(f);
	return count;
}

int main(int argc, char **argv)
{
	int to_child, from_child, status, nr_main, nr_own, nr_shared;
	pthread_t own, shared;
	char c = 'a';
	pid_t child;

	test_init(argc, argv);
	child = start_strict_child(&to_child, &from_child);
	install(SYS_uname, ERR_UNAME, 0);
	install(SYS_getpgid, ERR_GETPGID, SECCOMP_FILTER_FLAG_LOG);
	if (pthread_create(&own, NULL, own_thread, NULL) ||
	    pthread_create(&shared, NULL, shared_thread, NULL))
		test_fail("pthread_create");
	wait_stage(2);
	drop_sys_admin();
	nr_main = thread_filters(getpid());
	nr_own = thread_filters(own_tid);
	nr_shared = thread_filters(shared_tid);

	test_ready();
	test_wait_sigterm();

	if (thread_filters(getpid()) != nr_main || nr_main != 2 || thread_filters(own_tid) != nr_own ||
	    nr_own != 3 || thread_filters(shared_tid) != nr_shared || nr_shared != 2)
		test_fail("filters: main %d (were %d), own %d (were %d), shared %d (were %d)",
			  thread_filters(getpid()), nr_main, thread_filters(own_tid), nr_own,
			  thread_filters(shared_tid), nr_shared);
	if (check_shared("main thread: uname passes", "main thread: getpgid passes") ||
	    getsid(0) < 0)
		test_fail("main thread: its filters do not answer as before");
	if (has_sys_admin() || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0))
		test_fail("CAP_SYS_ADMIN came back or no_new_privs turned on");
	next_stage();
	pthread_join(own, NULL);
	if (failure_own)
		test_fail("%s", failure_own);
	/* Without CAP_SYS_ADMIN a new filter needs no_new_privs. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		test_fail_errno("PR_SET_NO_NEW_PRIVS");
	/* Upstream criu's restore gives each thread filters of its own (ZDTM_SECCOMP_UNSHARED). */
	if (getenv("ZDTM_SECCOMP_UNSHARED"))
		install(SYS_getpriority, ERR_PRIO, 0);
	else
		install(SYS_getpriority, ERR_PRIO, SECCOMP_FILTER_FLAG_TSYNC);
	next_stage();
	pthread_join(shared, NULL);
	if (failure_shared)
		test_fail("%s", failure_shared);
	if (write(to_child, &c, 1) != 1 || read(from_child, &c, 1) != 1 || c != 'b')
		test_fail("the strict child does not answer (got %c)", c);
	if (write(to_child, &c, 1) != 1 || waitpid(child, &status, 0) != child ||
	    !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		test_fail("the strict child was not killed for getppid() (status %#x)", status);
	test_pass();
}
