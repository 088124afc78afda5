/*
 * A dump that must be refused: a pipe's I/O signals (F_SETOWN) go to the runner, the
 * test's parent, outside the dumped tree; with ZDTM_FOWN_OUTSIDE_GROUP=1, to the runner's
 * process group, which the test is in and restore would not give back. The test runs on
 * with its owner as it was. No O_ASYNC and no I/O: the runner never gets a signal.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PIPE_R 40

int main(int argc, char **argv)
{
	struct f_owner_ex owner, now;
	int ends[2];

	test_init(argc, argv);
	if (getenv("ZDTM_FOWN_OUTSIDE_GROUP")) {
		if (getpgrp() == getpid())
			test_fail("the test leads its group: it must be in the runner's");
		owner = (struct f_owner_ex){ F_OWNER_PGRP, getpgrp() };
	} else {
		owner = (struct f_owner_ex){ F_OWNER_PID, getppid() };
	}
	if (pipe(ends) || dup2(ends[0], PIPE_R) != PIPE_R || fcntl(PIPE_R, F_SETOWN_EX, &owner))
		test_fail_errno("pipe with an owner");
	close(ends[0]);

	test_ready();
	test_wait_sigterm();

	if (fcntl(PIPE_R, F_GETOWN_EX, &now) || now.type != owner.type || now.pid != owner.pid)
		test_fail("owner type %d pid %d, expected %d %d", now.type, now.pid, owner.type,
			  owner.pid);
	test_pass();
}
