/*
 * A SysV SHM_HUGETLB segment attached in criu's IPC namespace comes back attached at its
 * address, as hugetlb memory of the same page size (KernelPageSize, VmFlags "ht"), the
 * same segment (id, a write through a second attach is seen through the first) with its
 * contents. The test reserves its huge pages and removes the segment at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include "zdtmtst.h"

#define HUGE_SIZE (2ul << 20)
#define SEG_SIZE  (2 * HUGE_SIZE)
#define MARK	  0xa5

static int shmid = -1;

static void remove_segment(void)
{
	if (shmid >= 0)
		shmctl(shmid, IPC_RMID, NULL);
	test_release_huge_pages();
}

static unsigned char *attach(void)
{
	void *addr = shmat(shmid, NULL, 0);

	if (addr == (void *)-1)
		test_fail_errno("shmat");
	return addr;
}

int main(int argc, char **argv)
{
	unsigned char *seg, *again;
	char vmflags[256];
	struct shmid_ds ds;

	test_init(argc, argv);
	test_reserve_huge_pages(6);
	atexit(remove_segment);
	shmid = shmget(IPC_PRIVATE, SEG_SIZE, IPC_CREAT | SHM_HUGETLB | 0600);
	if (shmid < 0)
		test_fail_errno("shmget(SHM_HUGETLB)");
	seg = attach();
	pattern_fill(seg, HUGE_SIZE, 40);

	test_ready();
	test_wait_sigterm();

	smaps_vmflags(seg, vmflags, sizeof(vmflags));
	if (!vmflags_has(vmflags, "ht"))
		test_fail("VmFlags \"%s\" have no ht", vmflags);
	if (smaps_kernel_page_kb(seg) != 2048)
		test_fail("KernelPageSize is %ld kB, not 2048 kB", smaps_kernel_page_kb(seg));
	pattern_expect(seg, HUGE_SIZE, 40, "first huge page");
	if (shmctl(shmid, IPC_STAT, &ds) || ds.shm_nattch != 1 || ds.shm_segsz != SEG_SIZE)
		test_fail("segment %d: %lu attaches of %zu bytes", shmid,
			  (unsigned long)ds.shm_nattch, (size_t)ds.shm_segsz);
	again = attach();
	memset(again + HUGE_SIZE, MARK, HUGE_SIZE);
	for (size_t i = HUGE_SIZE; i < SEG_SIZE; i++)
		if (seg[i] != MARK)
			test_fail("byte %zu written through a new attach is %#x", i, seg[i]);
	test_pass();
}
