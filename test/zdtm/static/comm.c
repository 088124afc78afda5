/*
 * The task name survives: PR_GET_NAME and /proc/self/comm give the name set with
 * PR_SET_NAME, not the executable's.
 */
#include <string.h>
#include <sys/prctl.h>

#include "zdtmtst.h"

#define TEST_COMM "zdtm-comm-42"

int main(int argc, char **argv)
{
	char name[17] = "", comm[32];

	test_init(argc, argv);

	if (prctl(PR_SET_NAME, TEST_COMM))
		test_fail_errno("PR_SET_NAME");

	test_ready();
	test_wait_sigterm();

	if (prctl(PR_GET_NAME, name))
		test_fail_errno("PR_GET_NAME");
	if (strcmp(name, TEST_COMM))
		test_fail("comm '%s', expected '%s'", name, TEST_COMM);
	read_file("/proc/self/comm", comm, sizeof(comm));
	if (strcmp(comm, TEST_COMM "\n"))
		test_fail("/proc/self/comm '%s'", comm);
	test_pass();
}
