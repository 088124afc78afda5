/*
 * A PROT_NONE guard page between two data pages stays PROT_NONE: its maps line says
 * "---p" and touching it still raises SIGSEGV; its neighbours keep their data.
 */
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define PAGE 4096

static sigjmp_buf fault_jump;

static void segv_handler(int signo)
{
	siglongjmp(fault_jump, signo);
}

/* Returns 1 when reading addr faults, 0 when it can be read */
static int read_faults(volatile unsigned char *addr)
{
	struct sigaction sa = { .sa_handler = segv_handler }, old_sa;
	int faulted = 0;

	if (sigaction(SIGSEGV, &sa, &old_sa))
		test_fail_errno("sigaction(SIGSEGV)");
	if (sigsetjmp(fault_jump, 1) == 0)
		(void)*addr;
	else
		faulted = 1;
	sigaction(SIGSEGV, &old_sa, NULL);
	return faulted;
}

static void check_guard(unsigned char *area, const char *when)
{
	char line[512];

	maps_line(area + PAGE, line, sizeof(line));
	if (!strstr(line, " ---p "))
		test_fail("%s: guard page is not ---p: %s", when, line);
	if (!read_faults(area + PAGE))
		test_fail("%s: reading the guard page did not fault", when);
	if (!read_faults(area + 2 * PAGE - 1))
		test_fail("%s: reading the guard page's last byte did not fault", when);
}

int main(int argc, char **argv)
{
	unsigned char *area;

	test_init(argc, argv);

	area = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		test_fail_errno("mmap");
	pattern_fill(area, PAGE, 50);
	pattern_fill(area + 2 * PAGE, PAGE, 51);
	if (mprotect(area + PAGE, PAGE, PROT_NONE))
		test_fail_errno("mprotect");
	check_guard(area, "before dump");

	test_ready();
	test_wait_sigterm();

	check_guard(area, "after restore");
	pattern_expect(area, PAGE, 50, "page below the guard");
	pattern_expect(area + 2 * PAGE, PAGE, 51, "page above the guard");
	test_pass();
}
