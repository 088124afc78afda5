/*
 * Anonymous hugetlb memory comes back as hugetlb memory of the same page size
 * (KernelPageSize in smaps, VmFlags "ht", an /anon_hugepage mapping) with its contents:
 * a private mapping with one huge page touched and one not, and a shared one that a child
 * maps too: what the restored child writes there, the parent reads.
 * With ZDTM_SHMEM_NAME set, the shared mapping may have that name after restore instead.
 * The test reserves the huge pages it needs (vm.nr_hugepages) and puts the old number
 * back once it has checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define HUGE_SIZE   (2ul << 20)
#define PRIV_SIZE   (2 * HUGE_SIZE)
#define SHARED_SIZE (2 * HUGE_SIZE)
/* Both at once before the dump, and the restored ones while the dumped ones may linger. */
#define PAGES_NEEDED 8
#define CHILD_MARK   0x5a

static unsigned char *priv, *shared;

static void *map_huge(size_t len, int type)
{
	void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, type | MAP_ANONYMOUS | MAP_HUGETLB,
			 -1, 0);

	if (map == MAP_FAILED)
		test_fail_errno("mmap(MAP_HUGETLB)");
	return map;
}

static void expect_hugetlb(const void *addr, const char *name, const char *what)
{
	char vmflags[256], line[512];

	smaps_vmflags(addr, vmflags, sizeof(vmflags));
	if (!vmflags_has(vmflags, "ht"))
		test_fail("%s: VmFlags \"%s\" have no ht", what, vmflags);
	maps_line(addr, line, sizeof(line));
	if (!strstr(line, name))
		test_fail("%s: maps line \"%s\" is not %s", what, line, name);
	if (smaps_kernel_page_kb(addr) != 2048)
		test_fail("%s: KernelPageSize is %ld kB, not 2048 kB", what,
			  smaps_kernel_page_kb(addr));
}

/* Upstream criu restores shared hugetlb memory as a hugetlb memfd (ZDTM_SHMEM_NAME). */
static const char *shared_name(void)
{
	const char *name = getenv("ZDTM_SHMEM_NAME");

	return name ? name : "/anon_hugepage";
}

static void child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();
	expect_hugetlb(shared, shared_name(), "child: shared");
	pattern_expect(shared, HUGE_SIZE, 31, "child: shared, first huge page");
	memset(shared + HUGE_SIZE, CHILD_MARK, HUGE_SIZE);
	_exit(0);
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	test_reserve_huge_pages(PAGES_NEEDED);
	priv = map_huge(PRIV_SIZE, MAP_PRIVATE);
	shared = map_huge(SHARED_SIZE, MAP_SHARED);
	pattern_fill(priv, HUGE_SIZE, 30);
	pattern_fill(shared, HUGE_SIZE, 31);
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	test_children_verdict(&child, 1, "parent");
	expect_hugetlb(priv, "/anon_hugepage", "private");
	expect_hugetlb(shared, shared_name(), "shared");
	pattern_expect(priv, HUGE_SIZE, 30, "private, first huge page");
	for (size_t i = HUGE_SIZE; i < PRIV_SIZE; i++)
		if (priv[i])
			test_fail("private, untouched huge page: byte %zu is %#x", i - HUGE_SIZE,
				  priv[i]);
	pattern_expect(shared, HUGE_SIZE, 31, "shared, first huge page");
	for (size_t i = HUGE_SIZE; i < SHARED_SIZE; i++)
		if (shared[i] != CHILD_MARK)
			test_fail("shared: byte %zu is %#x, the child wrote %#x", i, shared[i],
				  CHILD_MARK);
	munmap(priv, PRIV_SIZE);
	munmap(shared, SHARED_SIZE);
	test_release_huge_pages();
	test_pass();
}
