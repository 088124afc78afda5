/*
 * Copy-on-write memory moved with mremap() after fork: the parent maps three 4 MiB
 * regions (MOVED_BY_CHILD, MOVED_BY_PARENT, KEPT), fills them and forks. The child moves
 * MOVED_BY_CHILD, the parent MOVED_BY_PARENT, both to the same fixed address, so that at
 * one address the child has one region and the parent the other; each rewrites a page
 * in 8 of the region it moved and of KEPT (other pages each).
 *
 * Before the dump a moved region still shares its pages with the other process's
 * unmoved one (mremap moves page tables, not pages). The restore matches a parent's and
 * a child's VMAs by address: a moved region comes back as its own copy, so for the moved
 * regions the test checks contents only (the sharing across two addresses is checked
 * before the dump, to show the test's view is right), and for KEPT, unmoved, the sharing
 * too: Pss over the tree at most 1.05 times, one PFN for the pages neither rewrote.
 * After restore each process checks every word of its three regions.
 */
#include "cow_share.h"

#define REGION (4ul << 20)
#define PAGES  (REGION / COW_PAGE)
#define DEST   ((void *)0x610000000000ul)

enum { MOVED_BY_CHILD, MOVED_BY_PARENT, KEPT, NR_REGIONS };

static unsigned char *regions[NR_REGIONS];
static bool in_child;
static int region_now; /* the region the seed functions describe */

static bool rewritten_by(bool child, int r, size_t p)
{
	if (r == (child ? MOVED_BY_PARENT : MOVED_BY_CHILD))
		return false;
	return p % 8 == (child ? 1u : 2u);
}

static uint64_t seed_in(bool child, int r, size_t p)
{
	uint64_t base = (uint64_t)(r + 1) << 40 | p;

	return rewritten_by(child, r, p) ? base | (child ? 1ull : 2ull) << 32 : base;
}

static uint64_t my_seed(size_t p)
{
	return seed_in(in_child, region_now, p);
}

static uint64_t original_seed(size_t p)
{
	return seed_in(false, region_now, p) & ~(3ull << 32);
}

static enum cow_rule region_rule(size_t p)
{
	return seed_in(false, region_now, p) == seed_in(true, region_now, p) ? COW_SAME
									     : COW_DIFFERENT;
}

static void move_and_rewrite(int moved)
{
	if (mmap(DEST, REGION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
		 0) != DEST)
		test_fail_errno("mmap the destination");
	if (mremap(regions[moved], REGION, REGION, MREMAP_MAYMOVE | MREMAP_FIXED, DEST) != DEST)
		test_fail_errno("mremap");
	regions[moved] = DEST;
	for (region_now = 0; region_now < NR_REGIONS; region_now++)
		for (size_t p = 0; p < PAGES; p++)
			if (rewritten_by(in_child, region_now, p))
				pattern_fill(regions[region_now] + p * COW_PAGE, COW_PAGE,
					     my_seed(p));
}

static void expect_regions(const char *who)
{
	static const char *names[] = {"region the child moved", "region the parent moved",
				      "kept region"};
	char what[128];

	for (region_now = 0; region_now < NR_REGIONS; region_now++) {
		snprintf(what, sizeof(what), "%s: %s", who, names[region_now]);
		cow_expect_pages(regions[region_now], PAGES, my_seed, what);
	}
}

static void __attribute__((noreturn)) child_main(int unused)
{
	(void)unused;
	in_child = true;
	move_and_rewrite(MOVED_BY_CHILD);
	test_barrier_done();
	test_wait_sigterm();
	expect_regions("child");
	exit(0);
}

static pid_t tree[2];
static unsigned char *where_in_child[NR_REGIONS];

int main(int argc, char **argv)
{
	long before;

	test_init(argc, argv);
	for (region_now = 0; region_now < NR_REGIONS; region_now++) {
		regions[region_now] = cow_map(REGION);
		cow_fill_pages(regions[region_now], PAGES, original_seed);
		where_in_child[region_now] = regions[region_now];
	}
	where_in_child[MOVED_BY_CHILD] = DEST;
	test_barrier_init();
	tree[0] = getpid();
	tree[1] = cow_fork(child_main, 0);
	move_and_rewrite(MOVED_BY_PARENT);
	test_barrier_wait();

	before = cow_tree_pss_kb(tree, 2, regions[KEPT], REGION);
	for (region_now = 0; region_now < NR_REGIONS; region_now++)
		cow_check_pfns_at(tree[0], regions[region_now], tree[1], where_in_child[region_now],
				  PAGES, region_rule, "before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(before, cow_tree_pss_kb(tree, 2, regions[KEPT], REGION), "kept region");
	region_now = KEPT;
	cow_check_pfns(tree[0], tree[1], regions[KEPT], PAGES, region_rule, "after restore");
	cow_children_verdict("parent");
	expect_regions("parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
