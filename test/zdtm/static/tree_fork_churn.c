/*
 * A child (the churner) forks short-lived children without pause, each exiting at once
 * with CHILD_STATUS and reaped, as a shell loop runs `sleep`. At dump time such a child is
 * often on its way out: listed among the stopped churner's children, it exits before criu
 * seizes it, and must be dumped as the zombie it has become rather than fail the dump.
 * After restore the churner forks on (the root waits for AFTER_RESTORE more children), and
 * every child it reaps, a restored zombie included, exited with CHILD_STATUS.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CHILD_STATUS 7
#define BEFORE_READY 200
#define AFTER_RESTORE 200
#define WAIT_SECONDS 10
/*
 * Private memory the churner touches before it forks: each child then spends most of its
 * short life in exit, tearing down its copy of the page tables, which is where criu finds it.
 */
#define CHURNER_MEM (16ul << 20)

/* Children reaped so far, shared with the root. */
static volatile unsigned long *nr_reaped;

static void churn(void)
{
	sigset_t none;
	char *mem;
	int status;
	pid_t pid;

	mem = mmap(NULL, CHURNER_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		test_fail_errno("churner: mmap");
	memset(mem, 0x5a, CHURNER_MEM);
	test_barrier_done();

	/* The SIGTERM handler (test_init()'s) only sets the flag the loop reads. */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL))
		test_fail_errno("churner: sigprocmask");
	while (!test_sigterm_received) {
		pid = fork();
		if (pid < 0)
			test_fail_errno("churner: fork");
		if (pid == 0)
			_exit(CHILD_STATUS);
		while (waitpid(pid, &status, 0) != pid)
			if (errno != EINTR)
				test_fail("churner: waitpid(%d): %s", pid, strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_STATUS)
			test_fail("churner: child %d ended with wait status %#x, expected exit %d",
				  pid, status, CHILD_STATUS);
		(*nr_reaped)++;
	}
	exit(0);
}

static void wait_reaped(unsigned long target, const char *when)
{
	struct timespec pause = { .tv_nsec = 1000000 };
	unsigned int ms;

	for (ms = 0; *nr_reaped < target; ms++) {
		if (ms > WAIT_SECONDS * 1000)
			test_fail("%s: the churner reaped %lu children, expected %lu", when,
				  *nr_reaped, target);
		nanosleep(&pause, NULL);
	}
}

int main(int argc, char **argv)
{
	unsigned long at_restore;
	pid_t churner;

	test_init(argc, argv);
	nr_reaped = mmap(NULL, sizeof(*nr_reaped), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (nr_reaped == MAP_FAILED)
		test_fail_errno("mmap");
	churner = test_fork_child(churn);
	wait_reaped(BEFORE_READY, "before the dump");
	test_ready();
	test_wait_sigterm();

	at_restore = *nr_reaped;
	wait_reaped(at_restore + AFTER_RESTORE, "after the restore");
	test_children_verdict(&churner, 1, "root");
	test_pass();
}
