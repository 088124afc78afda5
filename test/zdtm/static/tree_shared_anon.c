/*
 * Shared anonymous memory across a tree: a MAP_SHARED|MAP_ANONYMOUS region made before
 * fork must be one object again after restore. The parent writes a page the child then
 * reads, the child writes a page the parent then reads. The child maps the region
 * without its first page (a VMA at offset 4096), and each process has private memory at
 * the same address with its own contents.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PAGE	  4096ul
#define NR_PAGES  512ul /* 2 MiB */
#define PRIV_SIZE (64ul << 10)

static unsigned char *shared, *priv;

static void fill_page(unsigned int page, uint64_t seed)
{
	pattern_fill(shared + page * PAGE, PAGE, seed);
}

static void expect_page(unsigned int page, uint64_t seed, const char *what)
{
	pattern_expect(shared + page * PAGE, PAGE, seed, what);
}

/* Pages from first on hold their dump-time contents (seed 1000 + index). */
static void expect_dumped_pages(unsigned int first, const char *who)
{
	for (unsigned int page = first; page < NR_PAGES; page++)
		expect_page(page, 1000 + page, who);
}

static void expect_shared_maps_line(const void *addr, const char *who)
{
	char line[512];

	maps_line(addr, line, sizeof(line));
	if (!strstr(line, " rw-s ") || !strstr(line, restored_shmem_name()))
		test_fail("%s: shared region is no shared anonymous memory: %s", who, line);
}

static void __attribute__((noreturn)) child_main(void)
{
	/* Its own view starts at page 1. */
	if (munmap(shared, PAGE))
		test_fail_errno("munmap");
	pattern_fill(priv, PRIV_SIZE, 9);
	test_barrier_done();
	test_wait_sigterm();

	expect_shared_maps_line(shared + PAGE, "child");
	pattern_expect(priv, PRIV_SIZE, 9, "child private memory");
	expect_page(1, 77, "page 1 the parent wrote after restore");
	expect_dumped_pages(3, "child");
	fill_page(2, 88);
	exit(0);
}

int main(int argc, char **argv)
{
	unsigned int page;
	pid_t child;

	test_init(argc, argv);
	shared = mmap(NULL, NR_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	priv = mmap(NULL, PRIV_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED || priv == MAP_FAILED)
		test_fail_errno("mmap");
	for (page = 0; page < NR_PAGES; page++)
		fill_page(page, 1000 + page);
	pattern_fill(priv, PRIV_SIZE, 8);
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	expect_shared_maps_line(shared, "parent");
	pattern_expect(priv, PRIV_SIZE, 8, "parent private memory");
	expect_dumped_pages(0, "parent");
	fill_page(1, 77);
	test_children_verdict(&child, 1, "parent");
	expect_page(2, 88, "page 2 the child wrote after restore");
	test_pass();
}
