/*
 * The blocked signal mask survives, bit for bit: a mix of standard and real-time
 * signals (plus the SIGTERM the test library blocks).
 */
#include <signal.h>
#include <string.h>

#include "zdtmtst.h"

static const int blocked_signals[] = { SIGHUP, SIGINT, SIGUSR1, SIGPIPE, SIGCHLD, SIGWINCH,
				       SIGSYS, 34, 40, 50, 64 };

int main(int argc, char **argv)
{
	sigset_t wanted, before, after;

	test_init(argc, argv);

	sigemptyset(&wanted);
	for (unsigned i = 0; i < sizeof(blocked_signals) / sizeof(blocked_signals[0]); i++)
		sigaddset(&wanted, blocked_signals[i]);
	if (sigprocmask(SIG_BLOCK, &wanted, NULL) || sigprocmask(SIG_BLOCK, NULL, &before))
		test_fail_errno("sigprocmask");

	test_ready();
	test_wait_sigterm();

	if (sigprocmask(SIG_BLOCK, NULL, &after))
		test_fail_errno("sigprocmask");
	for (int sig = 1; sig <= 64; sig++)
		if (sigismember(&before, sig) != sigismember(&after, sig))
			test_fail("signal %d was %s, is %s", sig,
				  sigismember(&before, sig) ? "blocked" : "unblocked",
				  sigismember(&after, sig) ? "blocked" : "unblocked");
	test_pass();
}
