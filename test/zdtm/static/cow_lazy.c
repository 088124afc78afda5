/*
 * A copy-on-write tree restored lazily (criu lazy-pages): the parent fills 64 MiB of
 * private anonymous memory and forks two children, child c rewriting the pages
 * p % 16 == 1 + c. Right after the restore, while its pages are still coming in (when the
 * test sees one missing), the parent rewrites the pages p % 16 == 5: whatever the restore
 * lets the children share with the parent, those writes must not reach them, and a page
 * that has not arrived yet must not be put in a child as the parent has it then.
 *
 * After restore each process checks every word: the children the dumped contents, the
 * parent those with its new pages. The tree's Pss of the region after the lazy restore
 * (every page in by then) is printed, not asserted: sharing pages that arrive one by one
 * into each task is the lazy restore's own question; the other cow_* tests assert it.
 */
#include "cow_share.h"

#define REGION	    (64ul << 20)
#define PAGES	    (REGION / COW_PAGE)
#define NR_CHILDREN 2
#define PARENT	    (-1)

static unsigned char *region;
static int me = PARENT;
static bool rewritten_after_restore;

static uint64_t my_seed(size_t p)
{
	if (me != PARENT && p % 16 == 1u + me)
		return (uint64_t)(me + 1) << 32 | p;
	if (me == PARENT && rewritten_after_restore && p % 16 == 5)
		return 9ull << 32 | p;
	return p;
}

static void __attribute__((noreturn)) child_main(int c)
{
	char who[32];

	me = c;
	for (size_t p = 1 + c; p < PAGES; p += 16)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, my_seed(p));
	test_barrier_done();
	test_wait_sigterm();
	snprintf(who, sizeof(who), "child %d", c);
	cow_expect_pages(region, PAGES, my_seed, who);
	exit(0);
}

static void rewrite_after_restore(void)
{
	rewritten_after_restore = true;
	for (size_t p = 5; p < PAGES; p += 16)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, my_seed(p));
}

int main(int argc, char **argv)
{
	pid_t tree[1 + NR_CHILDREN];
	long before, after;
	bool lazy;

	test_init(argc, argv);
	region = cow_map(REGION);
	cow_fill_pages(region, PAGES, my_seed);
	test_barrier_init();
	tree[0] = getpid();
	for (int c = 0; c < NR_CHILDREN; c++)
		tree[1 + c] = cow_fork(child_main, c);
	test_barrier_wait();
	before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION);

	test_ready();
	/* The last page: no one rewrites it, resident until the lazy restore. */
	lazy = test_wait_lazy_restore(region + REGION - 1);
	rewrite_after_restore();
	test_wait_sigterm();
	printf("parent rewrote its pages %s\n",
	       lazy ? "while pages were still coming in"
		    : "after every page was in (SIGTERM came first)");

	after = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION);
	printf("lazy tree: Pss before dump %ld kB, after restore %ld kB, ratio %.3f (not "
	       "asserted)\n",
	       before, after, (double)after / before);
	fflush(stdout);
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, my_seed, "parent");
	test_pass();
}
