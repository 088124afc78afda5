/*
 * The personality survives: the same flags word, and its effect (UNAME26 makes uname
 * report a 2.6 release).
 */
#include <string.h>
#include <sys/personality.h>
#include <sys/utsname.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	unsigned long wanted = PER_LINUX | UNAME26 | ADDR_NO_RANDOMIZE | SHORT_INODE;
	struct utsname uts;
	int after;

	test_init(argc, argv);

	if (personality(wanted) < 0 || (unsigned long)personality(0xffffffff) != wanted)
		test_fail_errno("personality");

	test_ready();
	test_wait_sigterm();

	after = personality(0xffffffff);
	if ((unsigned long)after != wanted)
		test_fail("personality %#x, expected %#lx", after, wanted);
	if (uname(&uts) || strncmp(uts.release, "2.6.", 4))
		test_fail("UNAME26 has no effect: release %s", uts.release);
	test_pass();
}
