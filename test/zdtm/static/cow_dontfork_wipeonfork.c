/*
 * madvise() flags that decide what fork passes on, around copy-on-write memory: before
 * forking, the parent marks a region MADV_DONTFORK (the child does not get it: it maps
 * memory of its own at the same address) and one MADV_WIPEONFORK (the child gets it
 * empty and writes half of it); a third region is plain COW memory, the child rewriting
 * some of its pages.
 *
 * After restore each process checks every word of the three (the child's wiped pages it
 * did not write are zero: nothing of the parent's leaked into them), VmFlags still say
 * "dc" for the parent's DONTFORK region (not for the child's own one there) and "wf" for
 * both WIPEONFORK ones, and the COW region is shared as before: Pss of the tree at most
 * 1.05 times, one PFN in both for the pages the child did not rewrite. The DONTFORK and
 * WIPEONFORK pages are two pages by PFN.
 */
#include "cow_share.h"

#define SMALL	    (16 * COW_PAGE)
#define SMALL_PAGES (SMALL / COW_PAGE)
#define COW	    (8ul << 20)
#define COW_PAGES   (COW / COW_PAGE)

static unsigned char *dontfork, *wipe, *cow;
static bool in_child;

static uint64_t dontfork_seed(size_t p)
{
	return (in_child ? 200ull : 100ull) << 32 | p;
}

static bool child_rewrites(size_t p)
{
	return p % 8 == 5;
}

static uint64_t cow_seed(size_t p)
{
	return in_child && child_rewrites(p) ? 5ull << 32 | p : p;
}

static uint64_t wipe_seed(size_t p)
{
	return 300ull << 32 | p;
}

static enum cow_rule cow_rule(size_t p)
{
	return child_rewrites(p) ? COW_DIFFERENT : COW_SAME;
}

static enum cow_rule distinct(size_t p)
{
	(void)p;
	return COW_DIFFERENT;
}

/* The child wrote the even pages of its wiped region, the odd ones are not there. */
static enum cow_rule wiped_rule(size_t p)
{
	return p % 2 ? COW_ANY : COW_DIFFERENT;
}

static void expect_flag(const void *addr, const char *flag, bool want, const char *what)
{
	char vmflags[256];

	smaps_vmflags(addr, vmflags, sizeof(vmflags));
	if (vmflags_has(vmflags, flag) != want)
		test_fail("%s: VmFlags \"%s\" %s %s", what, vmflags, want ? "lack" : "have", flag);
}

/* The child's wiped region: even pages written by it, odd ones never touched (zero). */
static void expect_child_wipe(void)
{
	for (size_t p = 0; p < SMALL_PAGES; p++) {
		const unsigned char *page = wipe + p * COW_PAGE;

		if (p % 2 == 0) {
			pattern_expect(page, COW_PAGE, wipe_seed(p) + 1,
				       "child: wiped page it wrote");
			continue;
		}
		for (size_t i = 0; i < COW_PAGE; i++)
			if (page[i])
				test_fail("child: wiped page %zu, byte %zu is %#x, not 0", p, i,
					  page[i]);
	}
}

static void __attribute__((noreturn)) child_main(int unused)
{
	(void)unused;
	in_child = true;
	if (mmap(dontfork, SMALL, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != dontfork)
		test_fail_errno("child: mmap at the DONTFORK address");
	cow_fill_pages(dontfork, SMALL_PAGES, dontfork_seed);
	for (size_t p = 0; p < SMALL_PAGES; p += 2)
		pattern_fill(wipe + p * COW_PAGE, COW_PAGE, wipe_seed(p) + 1);
	for (size_t p = 0; p < COW_PAGES; p++)
		if (child_rewrites(p))
			pattern_fill(cow + p * COW_PAGE, COW_PAGE, cow_seed(p));
	test_barrier_done();
	test_wait_sigterm();

	cow_expect_pages(dontfork, SMALL_PAGES, dontfork_seed, "child: own memory at DONTFORK's");
	expect_flag(dontfork, "dc", false, "child: own memory at DONTFORK's");
	expect_child_wipe();
	expect_flag(wipe, "wf", true, "child: WIPEONFORK region");
	cow_expect_pages(cow, COW_PAGES, cow_seed, "child: COW region");
	exit(0);
}

static unsigned char *map_advised(size_t len, int advice, uint64_t (*seed)(size_t))
{
	unsigned char *p = cow_map(len);

	cow_fill_pages(p, len / COW_PAGE, seed);
	if (advice && madvise(p, len, advice))
		test_fail_errno("madvise");
	return p;
}

static pid_t tree[2];

static void check_pfns(const char *when)
{
	cow_check_pfns(tree[0], tree[1], cow, COW_PAGES, cow_rule, when);
	cow_check_pfns(tree[0], tree[1], dontfork, SMALL_PAGES, distinct, when);
	cow_check_pfns(tree[0], tree[1], wipe, SMALL_PAGES, wiped_rule, when);
}

int main(int argc, char **argv)
{
	long before;

	test_init(argc, argv);
	dontfork = map_advised(SMALL, MADV_DONTFORK, dontfork_seed);
	wipe = map_advised(SMALL, MADV_WIPEONFORK, wipe_seed);
	cow = map_advised(COW, 0, cow_seed);
	test_barrier_init();
	tree[0] = getpid();
	tree[1] = cow_fork(child_main, 0);
	test_barrier_wait();

	before = cow_tree_pss_kb(tree, 2, cow, COW);
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(before, cow_tree_pss_kb(tree, 2, cow, COW), "COW region");
	check_pfns("after restore");
	cow_children_verdict("parent");
	cow_expect_pages(dontfork, SMALL_PAGES, dontfork_seed, "parent: DONTFORK region");
	expect_flag(dontfork, "dc", true, "parent: DONTFORK region");
	cow_expect_pages(wipe, SMALL_PAGES, wipe_seed, "parent: WIPEONFORK region");
	expect_flag(wipe, "wf", true, "parent: WIPEONFORK region");
	cow_expect_pages(cow, COW_PAGES, cow_seed, "parent: COW region");
	cow_sharing_verdict("after restore");
	test_pass();
}
