/*
 * Private anonymous memory survives byte for byte: malloc'd heap, memory taken with
 * sbrk, a 64 MiB mmap, and a pattern on the stack.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BIG_MAP_SIZE (64ul << 20)
#define HEAP_SIZE (200 * 1024) /* below glibc's mmap threshold: lands in [heap] */
#define BRK_SIZE (3 * 4096 + 123)
#define STACK_SIZE (64 * 1024)

int main(int argc, char **argv)
{
	unsigned char stack_buf[STACK_SIZE];
	unsigned char *heap_buf, *brk_buf, *big_map;

	test_init(argc, argv);

	heap_buf = malloc(HEAP_SIZE);
	brk_buf = sbrk(BRK_SIZE);
	big_map = mmap(NULL, BIG_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!heap_buf || brk_buf == (void *)-1 || big_map == MAP_FAILED)
		test_fail_errno("allocate");

	pattern_fill(heap_buf, HEAP_SIZE, 1);
	pattern_fill(brk_buf, BRK_SIZE, 2);
	pattern_fill(big_map, BIG_MAP_SIZE, 3);
	pattern_fill(stack_buf, STACK_SIZE, 4);

	test_ready();
	test_wait_sigterm();

	pattern_expect(heap_buf, HEAP_SIZE, 1, "malloc heap");
	pattern_expect(brk_buf, BRK_SIZE, 2, "sbrk area");
	pattern_expect(big_map, BIG_MAP_SIZE, 3, "64 MiB mmap");
	pattern_expect(stack_buf, STACK_SIZE, 4, "stack buffer");
	if (sbrk(0) != brk_buf + BRK_SIZE)
		test_fail("program break moved: %p, expected %p", sbrk(0), brk_buf + BRK_SIZE);
	test_pass();
}
