/*
 * Right after a lazy restore, before the daemon copied them in: one area moves with
 * mremap (its contents go along), a part of another is unmapped and mapped anew (zeroes,
 * not the dumped bytes), a part of a third is dropped with MADV_DONTNEED (zeroes) and
 * its tail unmapped. Everything else is word for word what was dumped.
 */
#include <sys/mman.h>

#include "zdtmtst.h"

#define AREA (64ul << 20)
#define MIB (1ul << 20)

static void fill_pieces(unsigned char *area, const size_t *bounds, int nr, uint64_t seed)
{
	for (int i = 0; i < nr; i++)
		pattern_fill(area + bounds[i], bounds[i + 1] - bounds[i], seed + i);
}

static void expect_piece(unsigned char *area, const size_t *bounds, int i, uint64_t seed,
			 const char *what)
{
	pattern_expect(area + bounds[i], bounds[i + 1] - bounds[i], seed + i, what);
}

static void expect_zero(const unsigned char *p, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			test_fail("%s: byte %zu is %#x, not zero", what, i, p[i]);
}

static unsigned char *map_area(int prot)
{
	void *p = mmap(NULL, AREA, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		test_fail_errno("mmap");
	return p;
}

static void check(unsigned char *moved, unsigned char *b, unsigned char *c, const size_t *b_bounds,
		  const size_t *c_bounds)
{
	pattern_expect(moved, AREA, 21, "the area moved with mremap");
	expect_piece(b, b_bounds, 0, 30, "head of the partly unmapped area");
	expect_zero(b + b_bounds[1], b_bounds[2] - b_bounds[1], "the part unmapped and mapped anew");
	expect_piece(b, b_bounds, 2, 30, "tail of the partly unmapped area");
	expect_piece(c, c_bounds, 0, 40, "head of the MADV_DONTNEED area");
	expect_zero(c + c_bounds[1], c_bounds[2] - c_bounds[1], "the part dropped with MADV_DONTNEED");
	expect_piece(c, c_bounds, 2, 40, "the rest of the MADV_DONTNEED area");
}

int main(int argc, char **argv)
{
	const size_t b_bounds[] = { 0, 16 * MIB, 48 * MIB, AREA };
	const size_t c_bounds[] = { 0, 8 * MIB, 16 * MIB, 48 * MIB, AREA };
	unsigned char *a, *b, *c, *dest, *top, *moved;

	test_init(argc, argv);
	a = test_map_pattern(AREA, 21);
	b = map_area(PROT_READ | PROT_WRITE);
	c = map_area(PROT_READ | PROT_WRITE);
	dest = map_area(PROT_NONE); /* where a goes: a hole of our own */
	fill_pieces(b, b_bounds, 3, 30);
	fill_pieces(c, c_bounds, 4, 40);
	/* The daemon copies in address order: the highest page comes last. */
	top = a > b ? a : b;
	top = top > c ? top : c;

	test_ready();
	test_wait_lazy_restore(top + AREA - 1);
	moved = mremap(a, AREA, AREA, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	if (moved != dest)
		test_fail_errno("mremap");
	if (munmap(b + b_bounds[1], b_bounds[2] - b_bounds[1]) ||
	    mmap(b + b_bounds[1], b_bounds[2] - b_bounds[1], PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != b + b_bounds[1])
		test_fail_errno("unmap and map anew");
	if (madvise(c + c_bounds[1], c_bounds[2] - c_bounds[1], MADV_DONTNEED) ||
	    munmap(c + c_bounds[3], AREA - c_bounds[3]))
		test_fail_errno("MADV_DONTNEED and munmap");
	check(moved, b, c, b_bounds, c_bounds);

	test_wait_sigterm();
	check(moved, b, c, b_bounds, c_bounds);
	test_pass();
}
