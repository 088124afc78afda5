/*
 * The clear-child-tid address (set_tid_address) survives: PR_GET_TID_ADDRESS returns
 * the address the test set, not glibc's or the restorer's.
 */
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

static int tid_word;

int main(int argc, char **argv)
{
	int *reported = NULL;

	test_init(argc, argv);

	syscall(SYS_set_tid_address, &tid_word);
	if (prctl(PR_GET_TID_ADDRESS, &reported) || reported != &tid_word)
		test_fail("PR_GET_TID_ADDRESS before dump: %p, expected %p", reported, &tid_word);

	test_ready();
	test_wait_sigterm();

	reported = NULL;
	if (prctl(PR_GET_TID_ADDRESS, &reported))
		test_fail_errno("PR_GET_TID_ADDRESS");
	if (reported != &tid_word)
		test_fail("tid address %p, expected %p", reported, &tid_word);
	test_pass();
}
