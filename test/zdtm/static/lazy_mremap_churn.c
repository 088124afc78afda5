/*
 * Right after a lazy restore, usually while the daemon is still copying pages in (on a
 * loaded machine the copy may be done first; the moves are checked all the same): areas keep
 * swapping places with mremap (one moves into the address another just left) and pieces
 * of them are dropped with MADV_DONTNEED. A copy aimed at an address before such a move
 * must never land in the area that moved there, and a dropped piece must stay zero.
 * Every byte is checked against where each piece went.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "zdtmtst.h"

#define MIB (1ul << 20)
#define AREA_MIB 32
#define AREA (AREA_MIB * MIB)
#define NR_AREAS 6
#define ROUNDS 60

/* Each slot (a fixed address) holds some area's pieces; zero: pieces dropped since. */
struct slot {
	unsigned char *addr;
	unsigned int area;
	bool zero[AREA_MIB];
};

static uint64_t piece_seed(unsigned int area, unsigned int piece)
{
	return 1000 * (area + 1) + piece;
}

static uint64_t rng_state = 88172645463325252ull;

static unsigned int next_rand(unsigned int below)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state % below;
}

static unsigned char *map_at(void *where, int prot)
{
	void *p = mmap(where, AREA, prot,
		       MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	if (p == MAP_FAILED || (where && p != where))
		test_fail_errno("mmap");
	return p;
}

static void move(unsigned char *from, unsigned char *to)
{
	if (mremap(from, AREA, AREA, MREMAP_MAYMOVE | MREMAP_FIXED, to) != (void *)to)
		test_fail("mremap %p -> %p: %s", (void *)from, (void *)to, strerror(errno));
}

/* Slot i's area goes to slot j and j's to i, through the hole; the hole is made again. */
static void swap(struct slot *slots, unsigned int i, unsigned int j, unsigned char *hole)
{
	struct slot tmp = slots[i];

	move(slots[i].addr, hole);
	move(slots[j].addr, slots[i].addr);
	move(hole, slots[j].addr);
	map_at(hole, PROT_NONE);
	slots[i].area = slots[j].area;
	memcpy(slots[i].zero, slots[j].zero, sizeof(tmp.zero));
	slots[j].area = tmp.area;
	memcpy(slots[j].zero, tmp.zero, sizeof(tmp.zero));
}

static void drop_piece(struct slot *s, unsigned int piece)
{
	if (madvise(s->addr + piece * MIB, MIB, MADV_DONTNEED))
		test_fail_errno("madvise");
	s->zero[piece] = true;
}

static void check(const struct slot *slots, const char *when)
{
	char what[96];

	for (unsigned int i = 0; i < NR_AREAS; i++)
		for (unsigned int p = 0; p < AREA_MIB; p++) {
			const unsigned char *piece = slots[i].addr + p * MIB;

			snprintf(what, sizeof(what), "%s: slot %u (area %u) MiB %u", when, i,
				 slots[i].area, p);
			if (!slots[i].zero[p]) {
				pattern_expect(piece, MIB, piece_seed(slots[i].area, p), what);
				continue;
			}
			for (size_t b = 0; b < MIB; b++)
				if (piece[b])
					test_fail("%s: dropped, but byte %zu is %#x", what, b, piece[b]);
		}
}

int main(int argc, char **argv)
{
	struct slot slots[NR_AREAS] = {};
	unsigned char *hole, *top = NULL;

	test_init(argc, argv);
	for (unsigned int i = 0; i < NR_AREAS; i++) {
		slots[i].addr = map_at(NULL, PROT_READ | PROT_WRITE);
		slots[i].area = i;
		for (unsigned int p = 0; p < AREA_MIB; p++)
			pattern_fill(slots[i].addr + p * MIB, MIB, piece_seed(i, p));
		if (slots[i].addr > top)
			top = slots[i].addr;
	}
	hole = map_at(NULL, PROT_NONE);

	test_ready();
	/* The daemon copies in address order: the highest page comes last. */
	test_wait_lazy_restore(top + AREA - 1);
	for (unsigned int round = 0; round < ROUNDS; round++) {
		unsigned int i = next_rand(NR_AREAS), j = (i + 1 + next_rand(NR_AREAS - 1)) % NR_AREAS;

		swap(slots, i, j, hole);
		if (round % 3 == 0)
			drop_piece(&slots[next_rand(NR_AREAS)], next_rand(AREA_MIB));
	}
	check(slots, "after the moves");

	test_wait_sigterm();
	check(slots, "after SIGTERM");
	test_pass();
}
