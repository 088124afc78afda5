/*
 * A dump that fails (this process holds a netlink socket, a kind the dumper does not
 * support) leaves the process untouched: it keeps running, its memory, sigmask and the
 * socket itself (the kernel's answer queued in it, unread) are intact.
 */
#include <signal.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define AREA_SIZE (8ul << 20)

int main(int argc, char **argv)
{
	static struct unsupported_socket us;
	sigset_t mask_before, mask_after;
	unsigned char *area;

	test_init(argc, argv);

	area = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(area, AREA_SIZE, 140);
	test_unsupported_socket(&us);
	if (sigprocmask(SIG_BLOCK, NULL, &mask_before))
		test_fail_errno("sigprocmask");

	test_ready();
	test_wait_sigterm();

	pattern_expect(area, AREA_SIZE, 140, "memory after the failed dump");
	if (sigprocmask(SIG_BLOCK, NULL, &mask_after))
		test_fail_errno("sigprocmask");
	/* Signal by signal: glibc leaves the sigset_t's bytes past the kernel's as they were. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&mask_before, sig) != sigismember(&mask_after, sig))
			test_fail("the blocked mask changed: signal %d", sig);
	test_unsupported_socket_check(&us, "the process");
	test_pass();
}
