/*
 * A child stopped by SIGSTOP that has SIGSTOP queued again (for the thread and for the
 * process) is dumped and restored stopped; SIGCONT then lets it run on and exit as it
 * would have.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *paren;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	read_file(path, buf, sizeof(buf));
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' ? paren[2] : '?';
}

int main(int argc, char **argv)
{
	siginfo_t info;
	int status;
	pid_t child;

	test_init(argc, argv);
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		for (int i = 0; i < 1000; i++)
			usleep(1000);
		_exit(42);
	}
	if (kill(child, SIGSTOP) || waitid(P_PID, child, &info, WSTOPPED | WNOWAIT))
		test_fail_errno("stopping the child");
	if (syscall(SYS_tkill, child, SIGSTOP) || kill(child, SIGSTOP))
		test_fail_errno("queuing SIGSTOP again");
	test_ready();
	test_wait_sigterm();

	if (proc_state(child) != 'T')
		test_fail("the child is in state %c, not stopped", proc_state(child));
	if (kill(child, SIGCONT) || waitpid(child, &status, 0) != child)
		test_fail_errno("continuing the child");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 42)
		test_fail("the child ended with status %#x, expected exit 42", status);
	test_pass();
}
