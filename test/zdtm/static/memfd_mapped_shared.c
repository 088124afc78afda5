/*
 * Mapped memfds stay one object with their fds and across the tree. "mfd-map" (fd 60)
 * is mapped MAP_SHARED by parent and child (a write through one mapping shows through
 * the other and through the fd) and MAP_PRIVATE by the parent, whose COW'ed pages keep
 * their private contents while its other pages follow the object. "mfd-maponly" is only
 * mapped (read-only, shared), no fd left. "mfd-future" has F_SEAL_FUTURE_WRITE, added
 * after its writable shared mapping, which must still write; "mfd-sealed" has
 * F_SEAL_WRITE and a read-only shared mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MAP_FD	   60
#define PAGE	   4096ul
#define NR_PAGES   16 /* mfd-map: page i holds seed 100 + i at dump */
#define NR_PRIVATE 8  /* the private mapping's pages; 2 and 3 COW'ed with seeds 202, 203 */
#define SMALL	   (2 * PAGE)

static unsigned char *shared, *priv, *maponly, *future, *sealed;
static int future_fd, sealed_fd;

static int new_memfd(const char *name, unsigned int flags, size_t size, uint64_t seed)
{
	static unsigned char buf[NR_PAGES * PAGE];
	int fd = memfd_create(name, flags);

	if (fd < 0)
		test_fail_errno("memfd_create");
	pattern_fill(buf, size, seed);
	if (write(fd, buf, size) != (ssize_t)size)
		test_fail_errno("write");
	return fd;
}

static unsigned char *map(int fd, size_t len, int prot, int flags)
{
	unsigned char *p = mmap(NULL, len, prot, flags, fd, 0);

	if (p == MAP_FAILED)
		test_fail_errno("mmap");
	return p;
}

static void expect_maps_line(const void *addr, const char *perms, const char *name)
{
	char line[512], want[128];

	maps_line(addr, line, sizeof(line));
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	if (!strstr(line, perms) || !strstr(line, want))
		test_fail("%s mapping: %s, expected %s and %s", name, line, perms, want);
}

static void expect_page(const unsigned char *base, unsigned int page, uint64_t seed,
			const char *what)
{
	pattern_expect(base + page * PAGE, PAGE, seed, what);
}

static void expect_fd_page(unsigned int page, uint64_t seed, const char *what)
{
	static unsigned char buf[PAGE];

	if (pread(MAP_FD, buf, PAGE, page * PAGE) != PAGE)
		test_fail_errno("pread mfd-map");
	pattern_expect(buf, PAGE, seed, what);
}

/* Page 1 written by the child after restore, page 6 by the parent. */
static void __attribute__((noreturn)) child_main(void)
{
	close(MAP_FD);
	test_barrier_done();
	test_wait_sigterm();

	expect_maps_line(shared, " rw-s ", "mfd-map");
	expect_page(shared, 6, 306, "child: page 6 the parent wrote after restore");
	pattern_fill(shared + PAGE, PAGE, 301);
	exit(0);
}

static void setup_map(void)
{
	int fd = new_memfd("mfd-map", MFD_CLOEXEC, NR_PAGES * PAGE, 100);

	if (dup2(fd, MAP_FD) != MAP_FD)
		test_fail_errno("dup2");
	close(fd);
	/* Seed 100 + i for page i: rewrite each page with its own seed. */
	shared = map(MAP_FD, NR_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	for (unsigned int i = 0; i < NR_PAGES; i++)
		pattern_fill(shared + i * PAGE, PAGE, 100 + i);
	priv = map(MAP_FD, NR_PRIVATE * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	(void)*(volatile unsigned char *)priv; /* read, not COW'ed */
	pattern_fill(priv + 2 * PAGE, 2 * PAGE, 202);
}

static void setup_others(void)
{
	int fd = new_memfd("mfd-maponly", 0, SMALL, 400);

	maponly = map(fd, SMALL, PROT_READ, MAP_SHARED);
	close(fd);
	future_fd = new_memfd("mfd-future", MFD_ALLOW_SEALING, SMALL, 500);
	future = map(future_fd, SMALL, PROT_READ | PROT_WRITE, MAP_SHARED);
	if (fcntl(future_fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE))
		test_fail_errno("F_SEAL_FUTURE_WRITE");
	sealed_fd = new_memfd("mfd-sealed", MFD_ALLOW_SEALING, SMALL, 600);
	if (fcntl(sealed_fd, F_ADD_SEALS, F_SEAL_WRITE))
		test_fail_errno("F_SEAL_WRITE");
	sealed = map(sealed_fd, SMALL, PROT_READ, MAP_SHARED);
}

static void check_others(void)
{
	static unsigned char buf[SMALL];

	expect_maps_line(maponly, " r--s ", "mfd-maponly");
	pattern_expect(maponly, SMALL, 400, "mfd-maponly");
	expect_maps_line(future, " rw-s ", "mfd-future");
	pattern_expect(future, SMALL, 500, "mfd-future through its mapping");
	pattern_fill(future, PAGE, 501);
	if (pread(future_fd, buf, SMALL, 0) != SMALL)
		test_fail_errno("pread mfd-future");
	pattern_expect(buf, PAGE, 501, "mfd-future: what its old mapping wrote after restore");
	if (fcntl(future_fd, F_GET_SEALS) != F_SEAL_FUTURE_WRITE ||
	    pwrite(future_fd, buf, 1, 0) != -1 ||
	    mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, future_fd, 0) != MAP_FAILED)
		test_fail("mfd-future: F_SEAL_FUTURE_WRITE is not in force after restore");
	expect_maps_line(sealed, " r--s ", "mfd-sealed");
	pattern_expect(sealed, SMALL, 600, "mfd-sealed");
	if (fcntl(sealed_fd, F_GET_SEALS) != F_SEAL_WRITE || pwrite(sealed_fd, buf, 1, 0) != -1 ||
	    errno != EPERM)
		test_fail("mfd-sealed: F_SEAL_WRITE is not in force after restore");
}

int main(int argc, char **argv)
{
	pid_t child;

	test_init(argc, argv);
	setup_map();
	setup_others();
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	expect_maps_line(shared, " rw-s ", "mfd-map");
	expect_maps_line(priv, " rw-p ", "mfd-map");
	for (unsigned int i = 0; i < NR_PAGES; i++)
		expect_page(shared, i, 100 + i, "parent: mfd-map through its shared mapping");
	expect_page(priv, 0, 100, "parent: a private page never written");
	pattern_expect(priv + 2 * PAGE, 2 * PAGE, 202, "parent: the COW'ed private pages");
	expect_fd_page(2, 102, "mfd-map page 2 through the fd");
	pattern_fill(shared + 6 * PAGE, PAGE, 306);
	expect_page(priv, 6, 306, "parent: a private page that follows the object");
	test_children_verdict(&child, 1, "parent");
	expect_fd_page(1, 301, "page 1 the child wrote through its mapping");
	expect_page(priv, 1, 301, "parent: private page 1 after the child wrote it");
	check_others();
	test_pass();
}
