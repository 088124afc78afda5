/*
 * mlocked memory stays locked: the locked area's VmFlags has "lo" (an unlocked
 * neighbour's has not), VmLck in /proc/self/status is unchanged, and the data is intact.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define AREA_SIZE (256 * 1024)

static bool has_lo_flag(const void *addr)
{
	char vmflags[256];

	smaps_vmflags(addr, vmflags, sizeof(vmflags));
	return vmflags_has(vmflags, "lo");
}

static void check_lock_state(unsigned char *locked, unsigned char *unlocked, const char *when)
{
	if (!has_lo_flag(locked))
		test_fail("%s: locked area has no 'lo' VmFlag", when);
	if (has_lo_flag(unlocked))
		test_fail("%s: unlocked area has the 'lo' VmFlag", when);
}

int main(int argc, char **argv)
{
	char vmlck_before[64], vmlck_after[64];
	unsigned char *locked, *unlocked;

	test_init(argc, argv);

	locked = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unlocked = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (locked == MAP_FAILED || unlocked == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(locked, AREA_SIZE, 80);
	pattern_fill(unlocked, AREA_SIZE, 81);
	if (mlock(locked, AREA_SIZE))
		test_fail_errno("mlock");
	check_lock_state(locked, unlocked, "before dump");
	status_field("VmLck", vmlck_before, sizeof(vmlck_before));

	test_ready();
	test_wait_sigterm();

	check_lock_state(locked, unlocked, "after restore");
	status_field("VmLck", vmlck_after, sizeof(vmlck_after));
	if (strcmp(vmlck_before, vmlck_after))
		test_fail("VmLck '%s' -> '%s'", vmlck_before, vmlck_after);
	pattern_expect(locked, AREA_SIZE, 80, "locked area");
	pattern_expect(unlocked, AREA_SIZE, 81, "unlocked area");
	test_pass();
}
