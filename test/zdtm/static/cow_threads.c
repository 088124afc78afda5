/*
 * Copy-on-write memory in a tree of multi-threaded processes: the parent fills 8 MiB of
 * private anonymous memory and forks two children; then two threads of the parent each
 * rewrite a page in 16 (p % 16 == 1 + t), and in each child c two threads of its own
 * rewrite theirs (p % 16 == 4 + 2c + t). The threads stay (parked in pause()) through
 * the dump and restore.
 *
 * After restore each process checks every word: its threads' pages, the parent's
 * original contents elsewhere (the children did not get the pages the parent's threads
 * wrote after the fork). The parent checks the sharing: the tree's Pss of the region at
 * most 1.05 times what it was plus one page for each page only the children shared (see
 * below), and between the parent and each child one PFN for every page neither's threads
 * rewrote, two for the others; between the two children one PFN for the pages no process
 * rewrote.
 *
 * The pages the parent's threads rewrote after the fork are the children's old page, one
 * page in both children before the dump (1/8 of the region). Restore rebuilds sharing from
 * a parent to its children (Documentation/design.md §4): the parent's memory holds its own
 * version when the children are forked, so each child writes the old page back on its own
 * and those pages come back as one copy per child. The test asserts that they are there
 * and right (every word), not that the children share them.
 */
#include <pthread.h>

#include "cow_share.h"

#define REGION	    (8ul << 20)
#define PAGES	    (REGION / COW_PAGE)
#define NR_CHILDREN 2
#define NR_THREADS  2
#define PARENT	    (-1)

static unsigned char *region;
static int me = PARENT;
static int peer; /* the child the parent compares PFNs with */
static bool after_restore;
static pthread_barrier_t written;

/* The first page (p % 16) thread t of process who rewrites. */
static size_t first_page(int who, int t)
{
	return who == PARENT ? 1 + t : 4 + 2 * who + t;
}

static bool rewrites(int who, size_t p)
{
	for (int t = 0; t < NR_THREADS; t++)
		if (p % 16 == first_page(who, t))
			return true;
	return false;
}

static uint64_t seed_in(int who, size_t p)
{
	return rewrites(who, p) ? (uint64_t)(who + 2) << 32 | p : p;
}

static uint64_t my_seed(size_t p)
{
	return seed_in(me, p);
}

static uint64_t original_seed(size_t p)
{
	return p;
}

static enum cow_rule peer_rule(size_t p)
{
	return rewrites(PARENT, p) || rewrites(peer, p) ? COW_DIFFERENT : COW_SAME;
}

/*
 * Child 0 against child 1: shared unless one of them rewrote the page. Before the dump
 * the pages the parent's threads rewrote are one page in both children too; after restore
 * they are one copy per child (see the top of the file).
 */
static enum cow_rule sibling_rule(size_t p)
{
	if (rewrites(0, p) || rewrites(1, p))
		return COW_DIFFERENT;
	return rewrites(PARENT, p) && after_restore ? COW_ANY : COW_SAME;
}

/* Pages only the children share: each comes back as one more page of Pss. */
static long sibling_only_kb(void)
{
	size_t pages = 0;

	for (size_t p = 0; p < PAGES; p++)
		pages += rewrites(PARENT, p) && !rewrites(0, p) && !rewrites(1, p);
	return (long)(pages * COW_PAGE / 1024);
}

static void *thread_main(void *arg)
{
	for (size_t p = first_page(me, (int)(intptr_t)arg); p < PAGES; p += 16)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, my_seed(p));
	pthread_barrier_wait(&written);
	for (;;)
		pause();
	return NULL;
}

/* Starts this process's threads and returns once they have written their pages. */
static void start_threads(void)
{
	pthread_t thread;
	int err;

	err = pthread_barrier_init(&written, NULL, NR_THREADS + 1);
	for (int t = 0; t < NR_THREADS && !err; t++)
		err = pthread_create(&thread, NULL, thread_main, (void *)(intptr_t)t);
	if (err)
		test_fail("pthread: %s", strerror(err));
	pthread_barrier_wait(&written);
}

static void __attribute__((noreturn)) child_main(int c)
{
	char who[32];

	me = c;
	start_threads();
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
		cow_check_pfns(tree[0], tree[1 + peer], region, PAGES, peer_rule, when);
	cow_check_pfns(tree[1], tree[2], region, PAGES, sibling_rule, when);
}

int main(int argc, char **argv)
{
	long before;

	test_init(argc, argv);
	region = cow_map(REGION);
	cow_fill_pages(region, PAGES, original_seed);
	test_barrier_init();
	tree[0] = getpid();
	for (int c = 0; c < NR_CHILDREN; c++)
		tree[1 + c] = cow_fork(child_main, c);
	start_threads();
	test_barrier_wait();

	before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION);
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	after_restore = true;
	cow_check_pss(before + sibling_only_kb(),
		      cow_tree_pss_kb(tree, 1 + NR_CHILDREN, region, REGION), "threaded tree");
	check_pfns("after restore");
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, my_seed, "parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
