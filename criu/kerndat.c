/*
 * Kernel probes the pipelines ask at run time (and `criu check` reports): each asks the
 * kernel the way the pipelines use the feature, with no side effects.
 */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kerndat.h"

/*
 * clone3 with a set_tid array of a bogus size fails with EINVAL where set_tid is
 * understood; kernels before 5.5 answer E2BIG (struct too big) or ENOSYS.
 */
bool kerndat_has_clone3_set_tid(void)
{
	static int probed = -1; /* asked once per run; forked tasks inherit the answer */
	struct clone_args args = { .set_tid_size = 1 };
	pid_t tid = 0;

	if (probed >= 0)
		return probed;
	args.set_tid = (unsigned long)&tid;
	args.exit_signal = SIGCHLD;
	/* tid 0 is invalid: the kernel rejects the call before creating anything. */
	probed = syscall(SYS_clone3, &args, sizeof(args)) < 0 && errno == EINVAL;
	return probed;
}

bool probe_in_scratch_netns(bool (*probe)(void))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(!unshare(CLONE_NEWNET) && probe() ? 0 : 1);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
