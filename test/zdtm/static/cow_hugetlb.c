/*
 * Private hugetlb memory shared copy-on-write after fork: the parent maps 4 huge pages
 * (2 MiB) MAP_PRIVATE | MAP_HUGETLB, fills them and forks; the child rewrites huge page
 * 1, the parent then huge page 2; huge pages 0 and 3 stay shared.
 *
 * After restore both check every word of the 4 huge pages (and that the mapping is
 * hugetlb: VmFlags "ht"). Hugetlb pages are not in Pss: the sharing is measured by PFN
 * and printed (huge pages 0 and 3 are one page in both before the dump) but not asserted.
 * The test reserves the huge pages it needs (vm.nr_hugepages) and puts the old number
 * back when it exits, whatever its verdict.
 */
#include "cow_share.h"

#define HUGE	    (2ul << 20)
#define NR_HUGE	    4
#define REGION	    (NR_HUGE * HUGE)
#define PAGES	    (REGION / COW_PAGE)
#define HUGE_NEEDED 16 /* the dumped tree's, its COW copies, the restored tree's */

static unsigned char *region;
static bool in_child;
static pid_t root;

static size_t huge_of(size_t p)
{
	return p * COW_PAGE / HUGE;
}

static uint64_t seed_of(size_t p)
{
	if (huge_of(p) == 1 && in_child)
		return 1ull << 32 | p;
	if (huge_of(p) == 2 && !in_child)
		return 2ull << 32 | p;
	return p;
}

static uint64_t original_seed(size_t p)
{
	return p;
}

static void rewrite_huge(size_t h)
{
	for (size_t p = h * HUGE / COW_PAGE; p < (h + 1) * HUGE / COW_PAGE; p++)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, seed_of(p));
}

static void expect_region(const char *who)
{
	char vmflags[256];

	smaps_vmflags(region, vmflags, sizeof(vmflags));
	if (!vmflags_has(vmflags, "ht"))
		test_fail("%s: VmFlags \"%s\" have no ht", who, vmflags);
	cow_expect_pages(region, PAGES, seed_of, who);
}

static void __attribute__((noreturn)) child_main(int unused)
{
	(void)unused;
	in_child = true;
	rewrite_huge(1);
	test_barrier_done();
	test_wait_sigterm();
	expect_region("child");
	exit(0);
}

static void release_huge_pages(void)
{
	if (getpid() == root)
		test_release_huge_pages();
}

/* How many huge pages are one page (the same PFN) in the parent and the child. */
static int shared_huge_pages(pid_t child)
{
	uint64_t *mine = malloc(PAGES * 8), *theirs = malloc(PAGES * 8);
	int shared = 0;

	if (!mine || !theirs)
		test_fail("malloc for pagemap");
	cow_pfns(root, region, PAGES, mine);
	cow_pfns(child, region, PAGES, theirs);
	for (size_t h = 0; h < NR_HUGE; h++) {
		size_t p = h * HUGE / COW_PAGE;

		shared += mine[p] && mine[p] == theirs[p];
	}
	free(mine);
	free(theirs);
	return shared;
}

int main(int argc, char **argv)
{
	int shared_before;
	pid_t child;

	test_init(argc, argv);
	root = getpid();
	test_reserve_huge_pages(HUGE_NEEDED);
	if (atexit(release_huge_pages))
		test_fail("atexit");
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (region == MAP_FAILED)
		test_fail_errno("mmap(MAP_HUGETLB)");
	cow_fill_pages(region, PAGES, original_seed);
	test_barrier_init();
	child = cow_fork(child_main, 0);
	rewrite_huge(2);
	test_barrier_wait();
	shared_before = shared_huge_pages(child);
	if (shared_before != 2)
		test_fail("before dump: %d huge pages shared with the child, not 2", shared_before);
	test_ready();
	test_wait_sigterm();

	printf("hugetlb: %d of the 2 huge pages shared before dump are shared after restore\n",
	       shared_huge_pages(child));
	fflush(stdout);
	cow_children_verdict("parent");
	expect_region("parent");
	test_pass();
}
