/*
 * Resource limits survive, soft and hard, including soft limits lowered below the hard
 * ones and hard limits lowered (which nobody without CAP_SYS_RESOURCE may raise back).
 */
#include <sys/resource.h>

#include "zdtmtst.h"

static void lower(int resource, rlim_t soft, rlim_t hard)
{
	struct rlimit limit;

	if (getrlimit(resource, &limit))
		test_fail_errno("getrlimit");
	if (soft < limit.rlim_cur)
		limit.rlim_cur = soft;
	if (hard < limit.rlim_max)
		limit.rlim_max = hard;
	if (limit.rlim_cur > limit.rlim_max)
		limit.rlim_cur = limit.rlim_max;
	if (setrlimit(resource, &limit))
		test_fail("setrlimit(%d): %m", resource);
}

int main(int argc, char **argv)
{
	struct rlimit before[RLIM_NLIMITS], after;

	test_init(argc, argv);

	lower(RLIMIT_NOFILE, 777, RLIM_INFINITY);
	lower(RLIMIT_CORE, 4096, RLIM_INFINITY);
	lower(RLIMIT_NPROC, 3333, 4444);
	lower(RLIMIT_LOCKS, 555, 666);
	lower(RLIMIT_MSGQUEUE, 100000, 200000);
	lower(RLIMIT_SIGPENDING, 1000, 2000);
	lower(RLIMIT_FSIZE, 1ull << 40, RLIM_INFINITY);
	lower(RLIMIT_RTTIME, 5000000, 6000000);
	for (int resource = 0; resource < RLIM_NLIMITS; resource++)
		if (getrlimit(resource, &before[resource]))
			test_fail_errno("getrlimit");

	test_ready();
	test_wait_sigterm();

	for (int resource = 0; resource < RLIM_NLIMITS; resource++) {
		if (getrlimit(resource, &after))
			test_fail_errno("getrlimit");
		if (after.rlim_cur != before[resource].rlim_cur ||
		    after.rlim_max != before[resource].rlim_max)
			test_fail("limit %d: %llu/%llu -> %llu/%llu", resource,
				  (unsigned long long)before[resource].rlim_cur,
				  (unsigned long long)before[resource].rlim_max,
				  (unsigned long long)after.rlim_cur,
				  (unsigned long long)after.rlim_max);
	}
	test_pass();
}
