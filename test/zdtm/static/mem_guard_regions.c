/*
 * Guard regions (MADV_GUARD_INSTALL): in a private anonymous mapping with data around
 * them, one of them at its first page, one across the boundary of two VMAs of it (a part
 * made read-only: PAGEMAP_SCAN reports one range), and in a private mapping of a file. After
 * restore: exactly the same guard ranges (PAGEMAP_SCAN's PAGE_IS_GUARD over the whole address
 * space), the pages between them with their contents, no VMA split by them (the maps
 * lines of both mappings the same), and a write to a guard page faults (SIGSEGV).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#define PAGE_IS_GUARD (1ULL << 8)

struct scan_region {
	uint64_t start, end, categories;
};

struct scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define SCAN_IOCTL _IOWR('f', 16, struct scan_arg)
#define PAGE	   4096
#define ANON_PAGES 16
#define FILE_PAGES 8
#define MAX_GUARDS 16
#define SEED	   41

/* Pages of the anonymous mapping and of the file mapping that are guarded. */
static const int anon_guarded[] = {0, 3, 4, 9};
static const int file_guarded[] = {2, 7};

static sigjmp_buf fault_jmp;

static void on_segv(int sig)
{
	siglongjmp(fault_jmp, sig);
}

static bool write_faults(volatile char *p)
{
	if (sigsetjmp(fault_jmp, 1))
		return true;
	*p = 1;
	return false;
}

/* Every guard range of the address space, as "start-end;" each. */
static void scan_guards(char *out, size_t size)
{
	struct scan_region regions[MAX_GUARDS];
	struct scan_arg arg = {
		.size = sizeof(arg),
		.start = 0,
		.end = 0x7ffffffff000ULL,
		.vec = (uintptr_t)regions,
		.vec_len = MAX_GUARDS,
		.category_mask = PAGE_IS_GUARD,
		.return_mask = PAGE_IS_GUARD,
	};
	int fd = open("/proc/self/pagemap", O_RDONLY), nr;
	size_t used = 0;

	if (fd < 0)
		test_fail_errno("open /proc/self/pagemap");
	nr = ioctl(fd, SCAN_IOCTL, &arg);
	if (nr < 0)
		test_fail_errno("PAGEMAP_SCAN");
	close(fd);
	out[0] = '\0';
	for (int i = 0; i < nr; i++)
		used += snprintf(out + used, size - used, "%llx-%llx;",
				 (unsigned long long)regions[i].start,
				 (unsigned long long)regions[i].end);
}

static void guard(char *base, const int *pages, int nr)
{
	for (int i = 0; i < nr; i++)
		if (madvise(base + pages[i] * PAGE, PAGE, MADV_GUARD_INSTALL))
			test_fail_errno("MADV_GUARD_INSTALL");
}

static bool is_guarded(const int *pages, int nr, int page)
{
	for (int i = 0; i < nr; i++)
		if (pages[i] == page)
			return true;
	return false;
}

/* Each page not guarded holds its part of the pattern; each guarded one faults. */
static void expect_pages(char *base, int nr_pages, const int *pages, int nr, uint64_t seed,
			 const char *what)
{
	char want[PAGE];

	for (int p = 0; p < nr_pages; p++) {
		if (is_guarded(pages, nr, p)) {
			if (!write_faults(base + p * PAGE))
				test_fail("%s: page %d is no guard", what, p);
			continue;
		}
		pattern_fill(want, PAGE, seed + p);
		if (memcmp(base + p * PAGE, want, PAGE))
			test_fail("%s: page %d differs", what, p);
	}
}

/* The /proc/self/maps line of the VMA holding addr, into out. */
static void vma_line(const void *addr, char *out, size_t size)
{
	static char maps[16384];
	char *save;

	read_file("/proc/self/maps", maps, sizeof(maps));
	for (char *line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long start, end;

		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && (uintptr_t)addr >= start &&
		    (uintptr_t)addr < end) {
			snprintf(out, size, "%s", line);
			return;
		}
	}
	test_fail("no VMA holds %p", addr);
}

static void fill_pages(char *base, int nr_pages, uint64_t seed)
{
	for (int p = 0; p < nr_pages; p++)
		pattern_fill(base + p * PAGE, PAGE, seed + p);
}

int main(int argc, char **argv)
{
	static char guards_before[1024], guards_after[1024], maps_before[2][512], maps_after[512];
	char path[] = "guard_file_XXXXXX", *anon, *file;
	int fd;

	test_init(argc, argv);
	if (signal(SIGSEGV, on_segv) == SIG_ERR)
		test_fail_errno("signal");
	anon = mmap(NULL, ANON_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	fd = mkstemp(path);
	if (anon == MAP_FAILED || fd < 0 || ftruncate(fd, FILE_PAGES * PAGE))
		test_fail_errno("mmap, file");
	file = mmap(NULL, FILE_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (file == MAP_FAILED)
		test_fail_errno("mmap the file");
	close(fd);
	fill_pages(anon, ANON_PAGES, SEED);
	fill_pages(file, FILE_PAGES, SEED + 100);
	if (mprotect(anon + 4 * PAGE, 4 * PAGE, PROT_READ))
		test_fail_errno("mprotect");
	guard(anon, anon_guarded, sizeof(anon_guarded) / sizeof(anon_guarded[0]));
	guard(file, file_guarded, sizeof(file_guarded) / sizeof(file_guarded[0]));
	scan_guards(guards_before, sizeof(guards_before));
	vma_line(anon, maps_before[0], sizeof(maps_before[0]));
	vma_line(file, maps_before[1], sizeof(maps_before[1]));
	expect_pages(anon, ANON_PAGES, anon_guarded, sizeof(anon_guarded) / sizeof(anon_guarded[0]),
		     SEED, "before: anonymous mapping");
	if (!strstr(guards_before, "-"))
		test_fail("no guard region found: %s", guards_before);
	test_ready();
	test_wait_sigterm();

	scan_guards(guards_after, sizeof(guards_after));
	if (strcmp(guards_before, guards_after))
		test_fail("guard regions %s, before the dump %s", guards_after, guards_before);
	for (int i = 0; i < 2; i++) {
		vma_line(i ? file : anon, maps_after, sizeof(maps_after));
		if (strcmp(maps_before[i], maps_after))
			test_fail("VMA %s before the dump, %s after the restore", maps_before[i],
				  maps_after);
	}
	expect_pages(anon, ANON_PAGES, anon_guarded, sizeof(anon_guarded) / sizeof(anon_guarded[0]),
		     SEED, "anonymous mapping");
	expect_pages(file, FILE_PAGES, file_guarded, sizeof(file_guarded) / sizeof(file_guarded[0]),
		     SEED + 100, "file mapping");
	unlink(path);
	test_pass();
}
