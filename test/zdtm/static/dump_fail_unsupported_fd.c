/*
 * A dump that fails (this process holds a socketpair, which the dumper does not
 * support) leaves the process untouched: it keeps running, its memory, sigmask and
 * the socketpair itself (queued data, both ends) are intact.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define AREA_SIZE (8ul << 20)
#define MESSAGE "queued before the dump"

int main(int argc, char **argv)
{
	char received[64] = "";
	sigset_t mask_before, mask_after;
	unsigned char *area;
	int sk[2];

	test_init(argc, argv);

	area = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(area, AREA_SIZE, 140);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sk))
		test_fail_errno("socketpair");
	if (write(sk[0], MESSAGE, sizeof(MESSAGE)) != sizeof(MESSAGE))
		test_fail_errno("queue a message");
	if (sigprocmask(SIG_BLOCK, NULL, &mask_before))
		test_fail_errno("sigprocmask");

	test_ready();
	test_wait_sigterm();

	pattern_expect(area, AREA_SIZE, 140, "memory after the failed dump");
	if (sigprocmask(SIG_BLOCK, NULL, &mask_after) ||
	    memcmp(&mask_before, &mask_after, sizeof(mask_before)))
		test_fail("the blocked mask changed");
	if (read(sk[1], received, sizeof(received)) != sizeof(MESSAGE) ||
	    strcmp(received, MESSAGE))
		test_fail("the queued message is gone: '%s'", received);
	if (write(sk[1], "x", 1) != 1 || read(sk[0], received, 1) != 1 || received[0] != 'x')
		test_fail("the socketpair no longer works");
	test_pass();
}
