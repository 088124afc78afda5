/*
 * Copy-on-write sharing over three generations: the parent P fills 32 MiB of private
 * anonymous memory and forks C; C rewrites the pages p % 64 == 1, then forks G, which
 * rewrites p % 64 == 2; after the forks P rewrites p % 64 == 3 and C p % 64 == 4.
 *
 * After restore each process checks every word, and P checks the sharing: the tree's
 * Pss of the region at most 1.05 times what it was, and by PFN: the pages C rewrote
 * before G was forked are one page in C and G, the pages no one rewrote one page in all
 * three, the pages P rewrote one page in C and G. The pages C rewrote after G's fork are
 * still one page in P and G before the dump; a restore that hands pages down the tree
 * cannot bring that back (C, between them, holds others), so that pair is not checked
 * there (1/64 of the region: within the Pss bound).
 */
#include "cow_share.h"

#define REGION (32ul << 20)
#define PAGES  (REGION / COW_PAGE)

enum { P, C, G };

static unsigned char *region;
static int me = P;
static int pair; /* which pair cow_check_pfns() compares: PC, CG or PG */
enum { PC, CG, PG };

static uint64_t seed_in(int who, size_t p)
{
	size_t k = p % 64;

	if (who == P)
		return k == 3 ? 3ull << 32 | p : p;
	if (k == 1)
		return 1ull << 32 | p;
	if (who == C)
		return k == 4 ? 4ull << 32 | p : p;
	return k == 2 ? 2ull << 32 | p : p;
}

static uint64_t original_seed(size_t p)
{
	return p;
}

static uint64_t my_seed(size_t p)
{
	return seed_in(me, p);
}

static enum cow_rule pair_rule(size_t p)
{
	static const int sides[3][2] = {[PC] = {P, C}, [CG] = {C, G}, [PG] = {P, G}};

	if (pair == PG && p % 64 == 4)
		return COW_ANY;
	return seed_in(sides[pair][0], p) == seed_in(sides[pair][1], p) ? COW_SAME : COW_DIFFERENT;
}

static void rewrite(size_t k)
{
	for (size_t p = k; p < PAGES; p += 64)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, seed_in(me, p));
}

static void __attribute__((noreturn)) grandchild_main(int unused)
{
	(void)unused;
	me = G;
	rewrite(2);
	test_barrier_done();
	test_wait_sigterm();
	cow_expect_pages(region, PAGES, my_seed, "grandchild");
	exit(0);
}

static void __attribute__((noreturn)) child_main(int unused)
{
	(void)unused;
	me = C;
	rewrite(1);
	cow_fork(grandchild_main, 0);
	rewrite(4);
	test_barrier_done();
	test_wait_sigterm();
	cow_expect_pages(region, PAGES, my_seed, "child");
	cow_children_verdict("child");
	exit(0);
}

static pid_t tree[3];

static void check_pfns(const char *when)
{
	static const int sides[3][2] = {[PC] = {P, C}, [CG] = {C, G}, [PG] = {P, G}};

	for (pair = PC; pair <= PG; pair++)
		cow_check_pfns(tree[sides[pair][0]], tree[sides[pair][1]], region, PAGES, pair_rule,
			       when);
}

/* The grandchild: the only child of C (/proc/C/task/C/children). */
static pid_t grandchild_of(pid_t child)
{
	char path[64], text[64];
	int pid;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", child, child);
	read_file(path, text, sizeof(text));
	if (sscanf(text, "%d", &pid) != 1)
		test_fail("no grandchild in %s", path);
	return pid;
}

int main(int argc, char **argv)
{
	long before;

	test_init(argc, argv);
	region = cow_map(REGION);
	cow_fill_pages(region, PAGES, original_seed);
	test_barrier_init();
	tree[P] = getpid();
	tree[C] = cow_fork(child_main, 0);
	rewrite(3);
	test_barrier_wait();
	tree[G] = grandchild_of(tree[C]);

	before = cow_tree_pss_kb(tree, 3, region, REGION);
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(before, cow_tree_pss_kb(tree, 3, region, REGION), "three generations");
	check_pfns("after restore");
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, my_seed, "parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
