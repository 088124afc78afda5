/*
 * Shared anonymous memory right next to copy-on-write private memory: the parent maps
 * 8 MiB private and, adjacent to it (the pages just below), 1 MiB MAP_SHARED anonymous;
 * fills both and forks two children. Child c rewrites the private pages p % 8 == 1 + c
 * and writes shared page 10 + c; the parent then writes shared page 20.
 *
 * After restore the parent measures, then writes shared page 0; each child checks every
 * word of both regions (the parent's new page 0 included: one shared object again; all
 * but pages 1 and 2) and writes shared page 1 + c, which the parent reads once the children are
 * done: the shared region is one object by what each sees of the others' writes (a child maps a
 * shared page only once it touches it, so PFNs would say nothing there). The private
 * region's Pss over the tree at most 1.05 times what it was, and one PFN in the parent and
 * a child for the pages the child did not rewrite.
 */
#include "cow_share.h"

#define PRIV	     (8ul << 20)
#define PRIV_PAGES   (PRIV / COW_PAGE)
#define SHARED	     (1ul << 20)
#define SHARED_PAGES (SHARED / COW_PAGE)
#define NR_CHILDREN  2
#define PARENT	     (-1)

static unsigned char *priv, *shared;
static int me = PARENT;
static int peer;
static bool restored; /* after restore: shared pages 0 (parent), 1, 2 (children) written */

static bool child_rewrites(int c, size_t p)
{
	return c != PARENT && p % 8 == 1u + c;
}

static uint64_t priv_seed(size_t p)
{
	return child_rewrites(me, p) ? (uint64_t)(me + 1) << 32 | p : p;
}

static uint64_t original_priv(size_t p)
{
	return p;
}

/* Who wrote shared page p last, as everyone sees it (children: before their own writes). */
static uint64_t shared_seed(size_t p)
{
	uint64_t base = 1ull << 40 | p;

	if ((p == 10 || p == 11 || p == 20) ||
	    (restored && (p == 0 || (me == PARENT && (p == 1 || p == 2)))))
		return base | 7ull << 32;
	return base;
}

static enum cow_rule priv_rule(size_t p)
{
	return child_rewrites(peer, p) ? COW_DIFFERENT : COW_SAME;
}

static void write_shared(size_t p)
{
	pattern_fill(shared + p * COW_PAGE, COW_PAGE, 1ull << 40 | 7ull << 32 | p);
}

static void __attribute__((noreturn)) child_main(int c)
{
	char who[64];

	me = c;
	for (size_t p = 1 + c; p < PRIV_PAGES; p += 8)
		pattern_fill(priv + p * COW_PAGE, COW_PAGE, priv_seed(p));
	write_shared(10 + c);
	test_barrier_done();
	test_wait_sigterm();

	restored = true;
	snprintf(who, sizeof(who), "child %d: private", c);
	cow_expect_pages(priv, PRIV_PAGES, priv_seed, who);
	snprintf(who, sizeof(who), "child %d: shared", c);
	/* Pages 1 and 2 are the children's to write now, side by side: the parent checks them. */
	for (size_t p = 0; p < SHARED_PAGES; p++)
		if (p < 1 || p > NR_CHILDREN)
			pattern_expect(shared + p * COW_PAGE, COW_PAGE, shared_seed(p), who);
	write_shared(1 + c);
	exit(0);
}

static pid_t tree[1 + NR_CHILDREN];

static void check_pfns(const char *when)
{
	for (peer = 0; peer < NR_CHILDREN; peer++)
		cow_check_pfns(tree[0], tree[1 + peer], priv, PRIV_PAGES, priv_rule, when);
}

int main(int argc, char **argv)
{
	long before;

	test_init(argc, argv);
	priv = cow_map(PRIV);
	shared = mmap(priv - SHARED, SHARED, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (shared != priv - SHARED)
		test_fail_errno("mmap the shared region below the private one");
	cow_fill_pages(priv, PRIV_PAGES, original_priv);
	cow_fill_pages(shared, SHARED_PAGES, shared_seed);
	test_barrier_init();
	tree[0] = getpid();
	for (int c = 0; c < NR_CHILDREN; c++)
		tree[1 + c] = cow_fork(child_main, c);
	write_shared(20);
	test_barrier_wait();

	before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, priv, PRIV);
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(before, cow_tree_pss_kb(tree, 1 + NR_CHILDREN, priv, PRIV), "private region");
	check_pfns("after restore");
	write_shared(0);
	cow_children_verdict("parent");
	restored = true;
	cow_expect_pages(priv, PRIV_PAGES, priv_seed, "parent: private");
	cow_expect_pages(shared, SHARED_PAGES, shared_seed, "parent: shared");
	cow_sharing_verdict("after restore");
	test_pass();
}
