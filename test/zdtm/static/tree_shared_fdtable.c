/*
 * Fd tables shared by processes (CLONE_FILES without threads). The root shares its table
 * with its child C, and C with its child G; C's child N has a copy of its own. After
 * restore the table is still one: an fd the root opens after restore is G's too, one C
 * opens is the root's, N sees neither; the file opened before the dump is at its offset.
 * With ZDTM_FDTABLE_SIBLINGS set the root clones A and B with CLONE_FILES and then leaves
 * their table (unshare): two processes share a table that is not their parent's, which
 * restore cannot give back; the dump is refused and A's new fd is still B's afterwards.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BEFORE_FD 77 /* opened before the dump by the root */
#define C_FD	  88 /* opened by C after restore */
#define ROOT_FD	  99 /* opened by the root after restore */
#define OFFSET	  3

static char stacks[2][64 << 10] __attribute__((aligned(16)));
static int ready[2], cmd_c[2], cmd_g[2], cmd_n[2];

static void wait_cmd(int *cmd)
{
	char byte;

	read_exact(cmd[0], &byte, 1, "a command");
}

static void say(int *pipe_fds)
{
	if (write(pipe_fds[1], "x", 1) != 1)
		test_fail_errno("write a command");
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void expect_before_fd(const char *who)
{
	if (lseek(BEFORE_FD, 0, SEEK_CUR) != OFFSET)
		test_fail("%s: fd %d is not at offset %d", who, BEFORE_FD, OFFSET);
}

static pid_t clone_files(int (*fn)(void *), int stack)
{
	pid_t pid = clone(fn, stacks[stack] + sizeof(stacks[stack]), CLONE_FILES | SIGCHLD, NULL);

	if (pid < 0)
		test_fail_errno("clone(CLONE_FILES)");
	return pid;
}

static int g_main(void *arg)
{
	(void)arg;
	say(ready);
	wait_cmd(cmd_g);
	expect_before_fd("G");
	if (!fd_open(ROOT_FD))
		test_fail("G: fd %d the root opened after restore is not in the shared table",
			  ROOT_FD);
	_exit(0);
}

static void n_main(void)
{
	say(ready);
	wait_cmd(cmd_n);
	expect_before_fd("N");
	if (fd_open(ROOT_FD))
		test_fail("N: fd %d of the root's table is in N's own", ROOT_FD);
	_exit(0);
}

static int c_main(void *arg)
{
	pid_t children[2];

	(void)arg;
	children[0] = clone_files(g_main, 1);
	children[1] = test_fork(n_main);
	say(ready);
	wait_cmd(cmd_c);
	if (dup2(BEFORE_FD, C_FD) != C_FD)
		test_fail_errno("C: dup2");
	/* G and N are told by the root and only exit: no signal needed */
	for (int i = 0; i < 2; i++) {
		int status;

		if (waitpid(children[i], &status, 0) != children[i] || status)
			test_fail("C: child %d failed (status %#x)", children[i], status);
	}
	_exit(0);
}

static void expect_exit_0(pid_t pid, const char *who)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || status)
		test_fail("%s %d failed (wait status %#x)", who, pid, status);
}

/* The root keeps its table; C (sharing it) and G are told in turn, N last. */
static void shared_with_child(void)
{
	pid_t c;
	char byte;

	c = clone_files(c_main, 0);
	for (int i = 0; i < 3; i++)
		read_exact(ready[0], &byte, 1, "the children's setup");
	test_ready();
	test_wait_sigterm();

	expect_before_fd("root");
	if (dup2(BEFORE_FD, ROOT_FD) != ROOT_FD)
		test_fail_errno("root: dup2");
	say(cmd_g);
	say(cmd_n);
	say(cmd_c);
	expect_exit_0(c, "C");
	if (!fd_open(C_FD))
		test_fail("root: fd %d C opened after restore is not in the shared table", C_FD);
	test_pass();
}

static int a_main(void *arg)
{
	(void)arg;
	wait_cmd(cmd_c);
	_exit(dup2(cmd_c[0], C_FD) == C_FD ? 0 : 1);
}

static int b_main(void *arg)
{
	(void)arg;
	wait_cmd(cmd_g);
	_exit(fd_open(C_FD) ? 0 : 2);
}

/* After the refused dump: A's new fd is B's, not the root's (which left the table). */
static void shared_by_siblings(void)
{
	pid_t a = clone_files(a_main, 0), b = clone_files(b_main, 1);

	if (unshare(CLONE_FILES))
		test_fail_errno("unshare(CLONE_FILES)");
	test_ready();
	test_wait_sigterm();

	say(cmd_c);
	expect_exit_0(a, "A");
	say(cmd_g);
	expect_exit_0(b, "B");
	if (fd_open(C_FD))
		test_fail("root: fd %d of A and B's table is in the root's own", C_FD);
	test_pass();
}

int main(int argc, char **argv)
{
	int fd;

	test_init(argc, argv);
	if (pipe(ready) || pipe(cmd_c) || pipe(cmd_g) || pipe(cmd_n))
		test_fail_errno("pipe");
	fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0 || dup2(fd, BEFORE_FD) != BEFORE_FD || lseek(BEFORE_FD, OFFSET, SEEK_SET) < 0)
		test_fail_errno("open the file at fd 77");
	close(fd);
	if (getenv("ZDTM_FDTABLE_SIBLINGS"))
		shared_by_siblings();
	shared_with_child();
}
