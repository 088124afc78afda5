/*
 * A process that cannot be seized in time: it waits in vfork() (a killable sleep that
 * no ptrace stop interrupts) for a child that exits after a few seconds. A dump with
 * --timeout 1 must give up on it, naming the timeout, and leave it running; once the
 * child is gone the process goes on and passes.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CHILD_SECONDS 3 /* well past the dump's --timeout 1 */

int main(int argc, char **argv)
{
	struct timespec nap = { CHILD_SECONDS, 0 };
	const char *tmp, *final;
	pid_t pid;

	test_init(argc, argv);
	/* The pidfile names this process; the child only publishes it. */
	test_ready_prepare(&tmp, &final);
	pid = vfork();
	if (pid < 0)
		test_fail_errno("vfork");
	if (pid == 0) {
		/* Shares our memory and stack until it exits: syscalls only. */
		if (rename(tmp, final))
			_exit(1);
		nanosleep(&nap, NULL);
		_exit(0);
	}
	test_wait_sigterm();
	test_pass();
}
