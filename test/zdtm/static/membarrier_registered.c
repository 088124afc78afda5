/*
 * The address space keeps its membarrier registrations (global and private expedited):
 * the expedited barriers still work after restore (they fail with EPERM unregistered)
 * and the kernel reports the same registrations.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define GET_REGISTRATIONS (1 << 9) /* MEMBARRIER_CMD_GET_REGISTRATIONS, Linux 6.3 */

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

int main(int argc, char **argv)
{
	long before, after;

	test_init(argc, argv);
	if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) ||
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		test_fail_errno("membarrier registration");
	before = membarrier(GET_REGISTRATIONS);
	if (before < 0)
		test_fail_errno("MEMBARRIER_CMD_GET_REGISTRATIONS");
	test_ready();
	test_wait_sigterm();

	after = membarrier(GET_REGISTRATIONS);
	if (after != before)
		test_fail("registrations %#lx after restore, %#lx before", after, before);
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		test_fail("private expedited barrier: %s", strerror(errno));
	if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED))
		test_fail("global expedited barrier: %s", strerror(errno));
	test_pass();
}
