/*
 * A pending SIGTRAP, blocked, with a handler (upstream zdtm's sigtrap, which CRIU refuses to
 * dump: its parasite stops on int3, whose forced SIGTRAP would reset the handler of a
 * blocked SIGTRAP; this criu stops injected code at syscall stops, no SIGTRAP involved).
 * SIGTRAP is sent to the process (shared pending) and to the thread (private pending).
 * After restore: both still pending, once each, with the sender and si_code; the handler,
 * its flags and the blocked mask as they were.
 */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

static void on_trap(int sig)
{
	(void)sig;
}

static void expect_handler(void)
{
	struct sigaction act;
	sigset_t blocked;

	if (sigaction(SIGTRAP, NULL, &act) || sigprocmask(SIG_BLOCK, NULL, &blocked))
		test_fail_errno("sigaction");
	if (act.sa_handler != on_trap || (act.sa_flags & SA_RESETHAND))
		test_fail("SIGTRAP: handler %p flags %#x, not %p", (void *)act.sa_handler,
			  act.sa_flags, (void *)on_trap);
	if (!sigismember(&blocked, SIGTRAP))
		test_fail("SIGTRAP is not blocked");
}

static void take(siginfo_t *info, const char *which)
{
	struct timespec no_wait = {0, 0};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	if (sigtimedwait(&set, info, &no_wait) != SIGTRAP)
		test_fail("%s SIGTRAP is not pending", which);
}

static void send_to_thread(void)
{
	if (syscall(SYS_tgkill, getpid(), gettid(), SIGTRAP))
		test_fail_errno("tgkill");
}

static void send_to_process(void)
{
	if (kill(getpid(), SIGTRAP))
		test_fail_errno("kill");
}

/* The si_code the kernel gives such a send: sent once and taken, to be compared after. */
static int probe_code(void (*send)(void))
{
	siginfo_t info;

	send();
	take(&info, "probe:");
	return info.si_code;
}

/* One SIGTRAP pending (the thread's own first), sent by us with code. */
static void expect_taken(int code, const char *which)
{
	siginfo_t info;

	take(&info, which);
	if (info.si_code != code || info.si_pid != getpid() || info.si_uid != getuid())
		test_fail("%s SIGTRAP: si_code %d pid %d uid %d, expected %d %d %d", which,
			  info.si_code, info.si_pid, info.si_uid, code, getpid(), getuid());
}

int main(int argc, char **argv)
{
	char shared_before[32], private_before[32], shared_after[32], private_after[32];
	int thread_code, process_code;
	struct sigaction act = {.sa_handler = on_trap};
	struct timespec no_wait = {0, 0};
	siginfo_t info;
	sigset_t set;

	test_init(argc, argv);
	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	if (sigaction(SIGTRAP, &act, NULL) || sigprocmask(SIG_BLOCK, &set, NULL))
		test_fail_errno("sigaction, block");
	thread_code = probe_code(send_to_thread);
	process_code = probe_code(send_to_process);
	send_to_thread();
	send_to_process();
	status_field("ShdPnd", shared_before, sizeof(shared_before));
	status_field("SigPnd", private_before, sizeof(private_before));
	test_ready();
	test_wait_sigterm();

	status_field("ShdPnd", shared_after, sizeof(shared_after));
	status_field("SigPnd", private_after, sizeof(private_after));
	if (strcmp(shared_before, shared_after) || strcmp(private_before, private_after))
		test_fail("pending masks ShdPnd %s SigPnd %s -> ShdPnd %s SigPnd %s", shared_before,
			  private_before, shared_after, private_after);
	expect_handler();
	/* The thread's own pending signals are taken first. */
	expect_taken(thread_code, "the thread's");
	expect_taken(process_code, "the process's");
	if (sigtimedwait(&set, &info, &no_wait) != -1)
		test_fail("a third SIGTRAP is pending");
	test_pass();
}
