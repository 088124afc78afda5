/*
 * The alternate signal stack survives: sigaltstack() reports the same base, size and
 * flags, its memory keeps its pattern, and an SA_ONSTACK handler runs on it.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "zdtmtst.h"

#define ALT_STACK_SIZE (64 * 1024)
#define PATTERN_SIZE 4096 /* the low end, far from where a handler's frame goes */

static unsigned char alt_stack[ALT_STACK_SIZE];
static volatile uintptr_t handler_frame;
static volatile int handler_ss_flags;

static void onstack_handler(int sig)
{
	stack_t now;
	volatile char on_frame;

	(void)sig;
	handler_frame = (uintptr_t)&on_frame;
	if (!sigaltstack(NULL, &now))
		handler_ss_flags = now.ss_flags;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = onstack_handler, .sa_flags = SA_ONSTACK };
	stack_t wanted = { .ss_sp = alt_stack, .ss_size = ALT_STACK_SIZE }, before, after;

	test_init(argc, argv);

	pattern_fill(alt_stack, PATTERN_SIZE, 100);
	if (sigaltstack(&wanted, NULL) || sigaltstack(NULL, &before))
		test_fail_errno("sigaltstack");
	if (sigaction(SIGUSR2, &sa, NULL))
		test_fail_errno("sigaction");

	test_ready();
	test_wait_sigterm();

	if (sigaltstack(NULL, &after))
		test_fail_errno("sigaltstack");
	if (after.ss_sp != before.ss_sp || after.ss_size != before.ss_size ||
	    after.ss_flags != before.ss_flags)
		test_fail("sigaltstack %p+%zu flags %d -> %p+%zu flags %d", before.ss_sp,
			  before.ss_size, before.ss_flags, after.ss_sp, after.ss_size,
			  after.ss_flags);
	pattern_expect(alt_stack, PATTERN_SIZE, 100, "alternate stack memory");
	raise(SIGUSR2);
	if (handler_frame < (uintptr_t)alt_stack ||
	    handler_frame >= (uintptr_t)alt_stack + ALT_STACK_SIZE)
		test_fail("SA_ONSTACK handler ran at %#lx, outside the alternate stack %p",
			  (unsigned long)handler_frame, alt_stack);
	if (!(handler_ss_flags & SS_ONSTACK))
		test_fail("in the handler sigaltstack does not report SS_ONSTACK");
	test_pass();
}
