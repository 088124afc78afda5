/*
 * Copy-on-write memory a tree shares after fork is shared again after restore (issue
 * 22): the parent fills 512 MiB of private anonymous memory and forks 8 children. Child
 * c < 7 rewrites every page p with p % 64 == c + 1, children 0-3 also each rewrite the
 * pages p % 64 == 32 (each its own contents), child 7 rewrites nothing; after the forks
 * the parent rewrites the pages p % 1024 == 63, which the children keep unchanged.
 *
 * After restore every process checks every word of its 512 MiB (its own rewritten pages,
 * the parent's contents elsewhere), and the parent checks the sharing by the kernel's
 * numbers: the tree's Pss of the region and of all its memory (smaps_rollup) at most
 * 1.05 times what they were before the dump, and per page between the parent and each
 * child: a page neither rewrote has one PFN in both, a page one of them rewrote two.
 * Before the dump the same checks hold (the test checks them there too).
 */
#include "cow_share.h"

#define REGION	       (512ul << 20)
#define PAGES	       (REGION / COW_PAGE)
#define NR_CHILDREN    8
#define PARENT	       (-1)
#define PARENT_REWRITE 1024 /* the parent rewrites p % PARENT_REWRITE == 63 */

static unsigned char *region;
static int me = PARENT; /* which process this is: PARENT or child 0..7 */
static int peer;	/* the child the parent compares PFNs with */

static bool child_rewrites(int c, size_t p)
{
	return (c < 7 && p % 64 == (size_t)c + 1) || (c < 4 && p % 64 == 32);
}

static bool parent_rewrites(size_t p)
{
	return p % PARENT_REWRITE == 63;
}

static uint64_t seed_of(int who, size_t p)
{
	if (who == PARENT)
		return parent_rewrites(p) ? (1ull << 40) | p : p;
	return child_rewrites(who, p) ? ((uint64_t)(who + 1) << 32) | p : p;
}

static uint64_t original_seed(size_t p)
{
	return p;
}

static uint64_t my_seed(size_t p)
{
	return seed_of(me, p);
}

/* Parent against child peer: shared unless one of them rewrote the page. */
static enum cow_rule parent_peer_rule(size_t p)
{
	return parent_rewrites(p) || child_rewrites(peer, p) ? COW_DIFFERENT : COW_SAME;
}

static void rewrite_mine(void)
{
	for (size_t p = 0; p < PAGES; p++)
		if (seed_of(me, p) != p)
			pattern_fill(region + p * COW_PAGE, COW_PAGE, seed_of(me, p));
}

static void __attribute__((noreturn)) child_main(int c)
{
	char who[32];

	me = c;
	rewrite_mine();
	test_barrier_done();
	test_wait_sigterm();
	snprintf(who, sizeof(who), "child %d", c);
	cow_expect_pages(region, PAGES, my_seed, who);
	exit(0);
}

static pid_t tree[1 + NR_CHILDREN];

static void check_pfns(const char *when)
{
	for (peer = 0; peer < NR_CHILDREN; peer++)
		cow_check_pfns(tree[0], tree[1 + peer], region, PAGES, parent_peer_rule, when);
}

static long tree_rollup_kb(void)
{
	long sum = 0;

	for (int i = 0; i < 1 + NR_CHILDREN; i++)
		sum += cow_rollup_pss_kb(tree[i]);
	return sum;
}

int main(int argc, char **argv)
{
	long region_before, all_before;

	test_init(argc, argv);
	region = cow_map(REGION);
	cow_fill_pages(region, PAGES, original_seed);
	test_barrier_init();
	tree[0] = getpid();
	for (int c = 0; c < NR_CHILDREN; c++)
		tree[1 + c] = cow_fork(child_main, c);
	rewrite_mine();
	test_barrier_wait();

	region_before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION);
	all_before = tree_rollup_kb();
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	/* Measured while every child still waits, before anyone reads a word. */
	cow_check_pss(region_before, cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION),
		      "tree, the 512 MiB region");
	cow_check_pss(all_before, tree_rollup_kb(), "tree, all memory (smaps_rollup)");
	check_pfns("after restore");
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, my_seed, "parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
