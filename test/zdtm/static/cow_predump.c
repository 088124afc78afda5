/*
 * A copy-on-write tree dumped after two pre-dumps (zdtm.py's pre_dump mode): the parent
 * fills 16 MiB of private anonymous memory and forks a child, which rewrites the pages
 * p % 16 == 1. On each of the runner's SIGUSR1 (after each pre-dump) the parent rewrites
 * pages, passes the step on to the child (SIGUSR1), which rewrites its own and answers on
 * a pipe, and then writes the step's number to $ZDTM_STEP_FILE: step 1, the parent
 * p % 16 == 2, the child p % 16 == 3; step 2, the parent p % 16 == 4 and again
 * p % 64 == 2, the child p % 16 == 5. So the final dump holds pages changed since the
 * pre-dumps in both, and the pages no one changed are the pre-dumps' only.
 *
 * After restore each process checks every word; the parent checks the sharing as it was
 * after step 2: one PFN for the pages neither rewrote, two for the others, and the tree's
 * Pss of the region at most 1.05 times its Pss when the test reported ready (measured)
 * plus the pages the steps made private (counted: STEPS_GROWTH_KB). That is the Pss the
 * tree has after step 2, unless the pre-dumps themselves lost the sharing in the running
 * tree: the test prints what it sees there before the final dump.
 */
#include "cow_share.h"

#define REGION (16ul << 20)
#define PAGES  (REGION / COW_PAGE)

static unsigned char *region;
static bool in_child;
static volatile sig_atomic_t steps_asked;
static int steps_done;
static int answers[2];
static pid_t tree[2];
/*
 * The Pss the tree's region has after step 2: what it had when the test reported ready,
 * plus 4 kB for each page one of the two wrote for the first time in a step (a page both
 * shared, 4 kB in all, becomes two): p % 16 == 2, 3, 4, 5.
 */
#define STEPS_GROWTH_KB (4 * (PAGES / 16) * 4)
static long pss_before;

static void on_sigusr1(int sig)
{
	(void)sig;
	steps_asked++;
}

/* Who rewrote page p (and when) up to step steps_done. */
static uint64_t seed_of(size_t p)
{
	size_t k = p % 16;

	if (in_child) {
		if (k == 1 || (k == 3 && steps_done >= 1) || (k == 5 && steps_done >= 2))
			return (10ull + k) << 32 | p;
		return p;
	}
	if (k == 2 && p % 64 == 2 && steps_done >= 2)
		return 30ull << 32 | p;
	if ((k == 2 && steps_done >= 1) || (k == 4 && steps_done >= 2))
		return (20ull + k) << 32 | p;
	return p;
}

static enum cow_rule rule(size_t p)
{
	size_t k = p % 16;

	/* The pages the child rewrote before the steps, then those each step rewrote. */
	if (k == 1 || ((k == 2 || k == 3) && steps_done >= 1) ||
	    ((k == 4 || k == 5) && steps_done >= 2))
		return COW_DIFFERENT;
	return COW_SAME;
}

static void rewrite(size_t k, size_t every)
{
	for (size_t p = k; p < PAGES; p += every)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, seed_of(p));
}

/*
 * Returns true once the next step was asked (SIGUSR1 is blocked outside sigsuspend()),
 * false once SIGTERM came instead (a run without dumps: zdtm.py --no-criu).
 */
static bool wait_step(void)
{
	sigset_t during;

	sigprocmask(SIG_SETMASK, NULL, &during);
	sigdelset(&during, SIGUSR1);
	sigdelset(&during, SIGTERM);
	while (steps_asked == steps_done && !test_sigterm_received)
		sigsuspend(&during);
	if (steps_asked == steps_done)
		return false;
	steps_done++;
	return true;
}

static void report_step(void)
{
	const char *path = getenv("ZDTM_STEP_FILE");
	char tmp[4096], text[16];

	if (!path)
		test_fail("ZDTM_STEP_FILE is not set");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(text, sizeof(text), "%d", steps_done);
	write_file(tmp, text, strlen(text));
	if (rename(tmp, path))
		test_fail_errno("rename the step file");
}

static void __attribute__((noreturn)) child_main(int unused)
{
	(void)unused;
	in_child = true;
	close(answers[0]);
	rewrite(1, 16);
	test_barrier_done();
	while (steps_done < 2 && wait_step()) {
		rewrite(steps_done == 1 ? 3 : 5, 16);
		if (write(answers[1], "", 1) != 1)
			test_fail_errno("child: answer the step");
	}
	test_wait_sigterm();
	cow_expect_pages(region, PAGES, seed_of, "child");
	exit(0);
}

/* The PFN of page 0 in the parent and the child, printed. */
static void print_first_pfns(const char *when)
{
	uint64_t mine, theirs;

	cow_pfns(tree[0], region, 1, &mine);
	cow_pfns(tree[1], region, 1, &theirs);
	printf("%s: page 0 has PFN %#" PRIx64 " in the parent, %#" PRIx64 " in the child\n", when,
	       mine, theirs);
	fflush(stdout);
}

/*
 * After step 2, before the final dump: what the pre-dumps left of the sharing in the
 * running tree, printed (the pre-dumps are not what this test is about); the nr
 * checks noted are dropped.
 */
static void report_live_sharing(void)
{
	size_t broken = cow_check_pfns(tree[0], tree[1], region, PAGES, rule,
				       "after the pre-dumps, before dump");

	printf("after the pre-dumps, before dump: Pss %ld kB (%ld kB expected), %zu pages "
	       "no longer shared\n",
	       cow_tree_pss_kb(tree, 2, region, REGION), pss_before, broken);
	print_first_pfns("after the pre-dumps");
	cow_nr_broken = 0;
}

/* One step asked by the runner; false once SIGTERM came instead. */
static bool parent_step(void)
{
	char byte;

	if (!wait_step())
		return false;
	if (steps_done == 1) {
		rewrite(2, 16);
	} else {
		rewrite(4, 16);
		rewrite(2, 64);
	}
	if (kill(tree[1], SIGUSR1))
		test_fail_errno("pass the step on to the child");
	if (read(answers[0], &byte, 1) != 1)
		test_fail_errno("the child's answer");
	if (steps_done == 2)
		report_live_sharing();
	report_step();
	return true;
}

int main(int argc, char **argv)
{
	sigset_t usr1;

	test_init(argc, argv);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &usr1, NULL) || signal(SIGUSR1, on_sigusr1) == SIG_ERR)
		test_fail_errno("SIGUSR1");
	region = cow_map(REGION);
	rewrite(0, 1);
	if (pipe(answers))
		test_fail_errno("pipe");
	test_barrier_init();
	tree[0] = getpid();
	tree[1] = cow_fork(child_main, 0);
	close(answers[1]);
	test_barrier_wait();

	cow_check_pfns(tree[0], tree[1], region, PAGES, rule, "before the pre-dumps");
	cow_sharing_verdict("before the pre-dumps");
	print_first_pfns("before the pre-dumps");
	pss_before = cow_tree_pss_kb(tree, 2, region, REGION) + STEPS_GROWTH_KB;
	test_ready();
	while (steps_done < 2 && parent_step())
		;
	test_wait_sigterm();

	cow_check_pss(pss_before, cow_tree_pss_kb(tree, 2, region, REGION), "after pre-dumps");
	cow_check_pfns(tree[0], tree[1], region, PAGES, rule, "after restore");
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, seed_of, "parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
