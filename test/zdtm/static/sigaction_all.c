/*
 * Every signal's disposition survives exactly as the kernel holds it (handler, flags
 * incl. SA_RESTART/SA_ONSTACK/SA_SIGINFO/SA_NODEFER/SA_RESETHAND, restorer, mask), and
 * a restored handler really runs, with its mask applied.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

/* The kernel's struct sigaction on x86_64: what the dump must carry, restorer included */
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

#define SA_RESTORER_FLAG 0x04000000ul

static struct kernel_sigaction actions_before[65];
static volatile int handled_sig;
static volatile uint64_t mask_in_handler;

static int kernel_sigaction(int sig, const struct kernel_sigaction *act,
			    struct kernel_sigaction *old)
{
	return syscall(SYS_rt_sigaction, sig, act, old, sizeof(uint64_t));
}

static void plain_handler(int sig)
{
	handled_sig = sig;
}

static void info_handler(int sig, siginfo_t *info, void *uctx)
{
	uint64_t mask;

	(void)info;
	(void)uctx;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, sizeof(mask));
	mask_in_handler = mask;
	handled_sig = sig;
}

/* glibc's internal signals (cancellation, setxid) and the ones nobody may change */
static bool left_alone(int sig)
{
	return sig == SIGKILL || sig == SIGSTOP || sig == SIGTERM || sig == 32 || sig == 33;
}

static void set_action(int sig, void *restorer)
{
	static const unsigned long flag_sets[] = {
		SA_SIGINFO | SA_RESTART, SA_ONSTACK, SA_NODEFER | SA_RESETHAND,
		SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER, 0,
	};
	struct kernel_sigaction act = {
		.flags = flag_sets[sig % 5] | SA_RESTORER_FLAG,
		.restorer = restorer,
		/* any bits but SIGKILL and SIGSTOP, which the kernel drops */
		.mask = (0x5a5a5a5a5a5a5a5aull * (uint64_t)sig) & ~((1ull << (SIGKILL - 1)) |
								 (1ull << (SIGSTOP - 1))),
	};

	if (sig % 7 == 0)
		act.handler = SIG_IGN;
	else if (sig % 7 == 1)
		act.handler = SIG_DFL;
	else if (act.flags & SA_SIGINFO)
		act.handler = (void *)info_handler;
	else
		act.handler = (void *)plain_handler;
	if (kernel_sigaction(sig, &act, NULL))
		test_fail("rt_sigaction(%d): %m", sig);
}

int main(int argc, char **argv)
{
	struct kernel_sigaction glibc_term, after;
	const int probe_sig = SIGUSR1;

	test_init(argc, argv);

	/* borrow glibc's sa_restorer (the lib's SIGTERM action was set through glibc) */
	if (kernel_sigaction(SIGTERM, NULL, &glibc_term))
		test_fail_errno("read SIGTERM action");
	for (int sig = 1; sig <= 64; sig++)
		if (!left_alone(sig))
			set_action(sig, glibc_term.restorer);
	for (int sig = 1; sig <= 64; sig++)
		if (kernel_sigaction(sig, NULL, &actions_before[sig]))
			test_fail("read action of %d: %m", sig);
	if (actions_before[probe_sig].handler != (void *)info_handler)
		test_fail("the probe signal must use info_handler");

	test_ready();
	test_wait_sigterm();

	for (int sig = 1; sig <= 64; sig++) {
		struct kernel_sigaction *before = &actions_before[sig];

		if (kernel_sigaction(sig, NULL, &after))
			test_fail("read action of %d: %m", sig);
		if (memcmp(before, &after, sizeof(after)))
			test_fail("signal %d: handler %p flags %#lx restorer %p mask %#lx -> "
				  "%p %#lx %p %#lx",
				  sig, before->handler, before->flags, before->restorer,
				  (unsigned long)before->mask, after.handler, after.flags,
				  after.restorer, (unsigned long)after.mask);
	}
	raise(probe_sig);
	if (handled_sig != probe_sig)
		test_fail("the restored handler of %d did not run", probe_sig);
	if ((mask_in_handler & actions_before[probe_sig].mask) != actions_before[probe_sig].mask)
		test_fail("mask in the handler %#lx lacks the action's mask %#lx",
			  (unsigned long)mask_in_handler, (unsigned long)actions_before[probe_sig].mask);
	test_pass();
}
