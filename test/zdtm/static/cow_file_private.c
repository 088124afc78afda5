/*
 * A private file mapping with copy-on-write pages across fork: the test writes a 4 MiB
 * file (in its work directory), maps it MAP_PRIVATE and writes the odd pages through the
 * mapping (anonymous copies of the file's pages), maps 4 MiB of private anonymous memory
 * beside it, fills that, and forks two children. Child 0 only reads; child 1 rewrites the
 * pages p % 8 == 2 of both. Every process reads all of both before the dump.
 *
 * After restore each process checks every word of both (the file's contents on the even
 * pages it did not write, the parent's writes on the odd ones), and the file on disk is
 * what the test wrote. Sharing: asserted for the anonymous region (the tree's Pss at most
 * 1.05 times, one PFN in the parent and a child for the pages the child did not rewrite);
 * for the file mapping measured and printed only: the tree's Pss of it, and how many of
 * the parent's COW'ed pages child 0 still shares by PFN.
 */
#include "cow_share.h"

#define REGION	    (4ul << 20)
#define PAGES	    (REGION / COW_PAGE)
#define NR_CHILDREN 2
#define PARENT	    (-1)
#define FILE_SEED   (1ull << 40)
#define ANON_SEED   (2ull << 40)

static unsigned char *file_map, *anon;
static int me = PARENT;
static int peer;

static bool child_rewrites(int who, size_t p)
{
	return who == 1 && p % 8 == 2;
}

static uint64_t file_seed(size_t p)
{
	if (child_rewrites(me, p))
		return FILE_SEED | 3ull << 32 | p;
	return FILE_SEED | (p % 2 ? 1ull << 32 : 0) | p;
}

static uint64_t on_disk_seed(size_t p)
{
	return FILE_SEED | p;
}

static uint64_t anon_seed(size_t p)
{
	return ANON_SEED | (child_rewrites(me, p) ? 3ull << 32 : 0) | p;
}

static enum cow_rule anon_rule(size_t p)
{
	return child_rewrites(peer, p) ? COW_DIFFERENT : COW_SAME;
}

/* Reads every word: every page of the file mapping is mapped in this process. */
static void read_all(void)
{
	volatile uint64_t sum = 0;

	for (size_t i = 0; i < REGION; i += COW_PAGE)
		sum += file_map[i] + anon[i];
	(void)sum;
}

static void expect_both(const char *who)
{
	char what[64];

	snprintf(what, sizeof(what), "%s: private file mapping", who);
	cow_expect_pages(file_map, PAGES, file_seed, what);
	snprintf(what, sizeof(what), "%s: anonymous memory", who);
	cow_expect_pages(anon, PAGES, anon_seed, what);
}

static void __attribute__((noreturn)) child_main(int c)
{
	char who[32];

	me = c;
	for (size_t p = 0; p < PAGES; p++)
		if (child_rewrites(me, p)) {
			pattern_fill(file_map + p * COW_PAGE, COW_PAGE, file_seed(p));
			pattern_fill(anon + p * COW_PAGE, COW_PAGE, anon_seed(p));
		}
	read_all();
	test_barrier_done();
	test_wait_sigterm();
	snprintf(who, sizeof(who), "child %d", c);
	expect_both(who);
	exit(0);
}

static pid_t tree[1 + NR_CHILDREN];

/* How many odd (COW'ed by the parent) pages of the file mapping child 0 shares by PFN. */
static size_t cowed_pages_shared(void)
{
	uint64_t *mine = malloc(PAGES * 8), *theirs = malloc(PAGES * 8);
	size_t shared = 0;

	if (!mine || !theirs)
		test_fail("malloc for pagemap");
	cow_pfns(tree[0], file_map, PAGES, mine);
	cow_pfns(tree[1], file_map, PAGES, theirs);
	for (size_t p = 1; p < PAGES; p += 2)
		shared += mine[p] && mine[p] == theirs[p];
	free(mine);
	free(theirs);
	return shared;
}

static void map_file(void)
{
	unsigned char *contents = cow_map(REGION);
	int fd;

	cow_fill_pages(contents, PAGES, on_disk_seed);
	write_file("cow_file_private.data", contents, REGION);
	munmap(contents, REGION);
	fd = open("cow_file_private.data", O_RDONLY);
	if (fd < 0)
		test_fail_errno("open the data file");
	file_map = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (file_map == MAP_FAILED)
		test_fail_errno("mmap the data file");
	close(fd);
	for (size_t p = 1; p < PAGES; p += 2)
		pattern_fill(file_map + p * COW_PAGE, COW_PAGE, file_seed(p));
}

static void expect_file_unchanged(void)
{
	unsigned char *on_disk = cow_map(REGION);
	int fd = open("cow_file_private.data", O_RDONLY);

	if (fd < 0)
		test_fail_errno("reopen the data file");
	read_exact(fd, on_disk, REGION, "the data file");
	close(fd);
	cow_expect_pages(on_disk, PAGES, on_disk_seed, "the data file on disk");
}

int main(int argc, char **argv)
{
	long anon_before, file_before, file_after;
	size_t shared_before, shared_after;

	test_init(argc, argv);
	map_file();
	anon = cow_map(REGION);
	cow_fill_pages(anon, PAGES, anon_seed);
	test_barrier_init();
	tree[0] = getpid();
	for (int c = 0; c < NR_CHILDREN; c++)
		tree[1 + c] = cow_fork(child_main, c);
	read_all();
	test_barrier_wait();

	anon_before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, anon, REGION);
	file_before = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, file_map, REGION);
	shared_before = cowed_pages_shared();
	for (peer = 0; peer < NR_CHILDREN; peer++)
		cow_check_pfns(tree[0], tree[1 + peer], anon, PAGES, anon_rule, "before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(anon_before, cow_tree_pss_kb(tree, 1 + NR_CHILDREN, anon, REGION),
		      "anonymous region");
	for (peer = 0; peer < NR_CHILDREN; peer++)
		cow_check_pfns(tree[0], tree[1 + peer], anon, PAGES, anon_rule, "after restore");
	file_after = cow_tree_pss_kb(tree, 1 + NR_CHILDREN, file_map, REGION);
	shared_after = cowed_pages_shared();
	cow_children_verdict("parent");
	expect_both("parent");
	expect_file_unchanged();
	printf("private file mapping (not asserted): tree Pss before dump %ld kB, after restore "
	       "%ld kB (ratio %.3f); COW'ed pages child 0 shares with the parent: %zu of %zu "
	       "before dump, %zu after restore\n",
	       file_before, file_after, (double)file_after / file_before, shared_before, PAGES / 2,
	       shared_after);
	fflush(stdout);
	cow_sharing_verdict("after restore");
	test_pass();
}
