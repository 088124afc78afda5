/*
 * glibc's rseq registration survives: registering the same area again is refused with
 * EBUSY (the kernel still has it, same address, length and signature), and the kernel
 * keeps the area's cpu_id current.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RSEQ_SIG_X86 0x53053053 /* the signature glibc registers with on x86 */

static struct rseq *thread_rseq_area(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

static void check_registration(const char *when)
{
	struct rseq *area = thread_rseq_area();
	/* glibc 2.36 registers the whole 32-byte struct; __rseq_size is its used part */
	long ret = syscall(SYS_rseq, area, sizeof(struct rseq), 0, RSEQ_SIG_X86);
	int cpu;

	if (ret == 0)
		test_fail("%s: rseq was not registered (a new registration succeeded)", when);
	if (errno != EBUSY)
		test_fail("%s: re-registering rseq: %m, expected EBUSY (EINVAL: other address or "
			  "length, EPERM: other signature)", when);
	cpu = sched_getcpu();
	if (cpu < 0)
		test_fail_errno("sched_getcpu");
	/* the kernel rewrites cpu_id before we run again; a migration in between is rare */
	if ((int)area->cpu_id < 0)
		test_fail("%s: rseq cpu_id is %d, the kernel does not update it", when,
			  (int)area->cpu_id);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);

	if (__rseq_size == 0)
		test_fail("glibc did not register rseq (glibc.pthread.rseq tunable off?)");
	check_registration("before dump");
	/* a value the kernel must overwrite if, and only if, the area is registered */
	thread_rseq_area()->cpu_id = RSEQ_CPU_ID_UNINITIALIZED;

	test_ready();
	test_wait_sigterm();

	check_registration("after restore");
	test_pass();
}
