/*
 * Pending standard signals survive with their siginfo: SIGUSR1 sent to the process
 * (shared pending) and SIGUSR2 sent to the thread (private pending) are both still
 * pending, with the same ShdPnd/SigPnd masks, sender pid and si_code.
 */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

static void send_to_process(int sig)
{
	if (kill(getpid(), sig))
		test_fail_errno("kill");
}

static void send_to_thread(int sig)
{
	if (syscall(SYS_tgkill, getpid(), gettid(), sig))
		test_fail_errno("tgkill");
}

/* Take sig if it is pending; returns its si_code, or fails the test */
static int take_pending(int sig, siginfo_t *info, const char *when)
{
	struct timespec no_wait = { 0, 0 };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	if (sigtimedwait(&set, info, &no_wait) != sig)
		test_fail("%s: signal %d is not pending", when, sig);
	return info->si_code;
}

/*
 * The si_code a kill or tgkill gets is the kernel's business (6.18 gives SI_USER to
 * both): learn it from a first send, then send again and leave that one pending.
 */
static int probe_and_send(int sig, void (*send)(int))
{
	siginfo_t info;

	send(sig);
	take_pending(sig, &info, "probe");
	send(sig);
	return info.si_code;
}

static void expect_one(int sig, int code)
{
	struct timespec no_wait = { 0, 0 };
	siginfo_t info;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	take_pending(sig, &info, "after restore");
	if (info.si_code != code || info.si_pid != getpid() || info.si_uid != getuid())
		test_fail("signal %d: si_code %d pid %d uid %d, expected %d %d %d", sig,
			  info.si_code, info.si_pid, info.si_uid, code, getpid(), getuid());
	if (sigtimedwait(&set, &info, &no_wait) != -1)
		test_fail("signal %d is pending twice", sig);
}

int main(int argc, char **argv)
{
	char shared_before[32], private_before[32], shared_after[32], private_after[32];
	int usr1_code, usr2_code;
	sigset_t set;

	test_init(argc, argv);

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		test_fail_errno("block");
	usr1_code = probe_and_send(SIGUSR1, send_to_process);
	usr2_code = probe_and_send(SIGUSR2, send_to_thread);
	status_field("ShdPnd", shared_before, sizeof(shared_before));
	status_field("SigPnd", private_before, sizeof(private_before));

	test_ready();
	test_wait_sigterm();

	status_field("ShdPnd", shared_after, sizeof(shared_after));
	status_field("SigPnd", private_after, sizeof(private_after));
	if (strcmp(shared_before, shared_after) || strcmp(private_before, private_after))
		test_fail("pending masks ShdPnd %s SigPnd %s -> ShdPnd %s SigPnd %s", shared_before,
			  private_before, shared_after, private_after);
	expect_one(SIGUSR1, usr1_code);
	expect_one(SIGUSR2, usr2_code);
	test_pass();
}
