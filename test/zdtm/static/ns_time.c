/*
 * A tree in a time namespace of its own whose clocks run days ahead of the machine's (as
 * `unshare -T --monotonic --boottime` makes it): after restore CLOCK_MONOTONIC (and its
 * raw and coarse kinds) and CLOCK_BOOTTIME go on from where they were at the dump, not
 * from the machine's (they have moved forward by less than a minute, and are still days
 * ahead), /proc/uptime too, in the root and in its child.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MONOTONIC_AHEAD (30 * 86400L)
#define BOOTTIME_AHEAD	(70 * 86400L)
#define MAX_GAP		60 /* seconds a dump and a restore may take */

static const struct {
	clockid_t id;
	const char *name;
	long ahead;
} clocks[] = {
	{ CLOCK_MONOTONIC, "CLOCK_MONOTONIC", MONOTONIC_AHEAD },
	{ CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW", MONOTONIC_AHEAD },
	{ CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE", MONOTONIC_AHEAD },
	{ CLOCK_BOOTTIME, "CLOCK_BOOTTIME", BOOTTIME_AHEAD },
};
#define NR_CLOCKS (sizeof(clocks) / sizeof(clocks[0]))

static double before[NR_CLOCKS + 1]; /* and /proc/uptime */

static double now(unsigned int i)
{
	struct timespec ts;
	char text[64];

	if (i == NR_CLOCKS) {
		read_file("/proc/uptime", text, sizeof(text));
		return atof(text);
	}
	if (clock_gettime(clocks[i].id, &ts))
		test_fail("clock_gettime(%s): %s", clocks[i].name, strerror(errno));
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void take_clocks(void)
{
	for (unsigned int i = 0; i <= NR_CLOCKS; i++) {
		before[i] = now(i);
		/* The namespace's offsets put each clock that far ahead. */
		if (before[i] < (i == NR_CLOCKS ? BOOTTIME_AHEAD : clocks[i].ahead))
			test_fail("%s reads %.3f: the time namespace's offset is not applied",
				  i == NR_CLOCKS ? "/proc/uptime" : clocks[i].name, before[i]);
	}
}

static void check_clocks(const char *who)
{
	for (unsigned int i = 0; i <= NR_CLOCKS; i++) {
		double gap = now(i) - before[i];

		/* uptime has a hundredth of a second, the coarse clock a tick */
		if (gap < -0.02 || gap > MAX_GAP)
			test_fail("%s: %s moved by %.3f s across the dump and restore (from %.3f)",
				  who, i == NR_CLOCKS ? "/proc/uptime" : clocks[i].name, gap,
				  before[i]);
	}
}

static void child_main(void)
{
	take_clocks();
	test_barrier_done();
	test_wait_sigterm();
	check_clocks("child");
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	test_unshare_time(MONOTONIC_AHEAD, BOOTTIME_AHEAD);
	test_launch_root(0);
	take_clocks();
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	check_clocks("root");
	test_children_verdict(&child, 1, "root");
	test_pass();
}
