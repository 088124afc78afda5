/*
 * SysV shared memory attached three times in criu's IPC namespace: read-write, read-only,
 * and read-write with its middle page made read-only (one attach, three VMAs). After
 * restore each attach is back at its address with its protection, all three are still
 * the one segment (a write through one is seen through the others), its contents and id
 * are the same, and the segment counts as many attaches as before (the kernel counts
 * VMAs: the split attach counts three).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PAGE 4096ul
#define SEG_PAGES 5
#define SEG_SIZE (SEG_PAGES * PAGE - 100) /* the kernel rounds the attach up to pages */

static int shmid = -1;

static void remove_segment(void)
{
	if (shmid >= 0)
		shmctl(shmid, IPC_RMID, NULL);
}

static unsigned char *attach(int flags)
{
	void *addr = shmat(shmid, NULL, flags);

	if (addr == (void *)-1)
		test_fail_errno("shmat");
	return addr;
}

/* The maps lines of the attach at addr, one per VMA, joined. */
static void attach_lines(unsigned char *addr, int nr_vmas, char *out, size_t size)
{
	size_t used = 0;

	for (unsigned long off = 0; off < SEG_PAGES * PAGE && nr_vmas; off += PAGE) {
		char line[512];

		maps_line(addr + off, line, sizeof(line));
		if (used && strstr(out, line))
			continue;
		used += snprintf(out + used, size - used, "%s|", line);
		nr_vmas--;
	}
}

static void expect_same_lines(const char *before, const char *after, const char *what)
{
	if (strcmp(before, after))
		test_fail("%s: maps lines changed: '%s' -> '%s'", what, before, after);
}

int main(int argc, char **argv)
{
	char rw_before[2048], ro_before[2048], split_before[2048];
	char rw_after[2048], ro_after[2048], split_after[2048];
	unsigned char *rw, *ro, *split;
	struct shmid_ds ds;
	unsigned long nattch_before;
	int id_before;

	test_init(argc, argv);

	shmid = shmget(IPC_PRIVATE, SEG_SIZE, IPC_CREAT | 0640);
	if (shmid < 0)
		test_fail_errno("shmget");
	atexit(remove_segment);
	id_before = shmid;
	rw = attach(0);
	ro = attach(SHM_RDONLY);
	split = attach(0);
	if (mprotect(split + PAGE * 2, PAGE, PROT_READ))
		test_fail_errno("mprotect");
	pattern_fill(rw, SEG_SIZE, 77);
	attach_lines(rw, 1, rw_before, sizeof(rw_before));
	attach_lines(ro, 1, ro_before, sizeof(ro_before));
	attach_lines(split, 3, split_before, sizeof(split_before));
	if (shmctl(shmid, IPC_STAT, &ds))
		test_fail_errno("shmctl IPC_STAT");
	nattch_before = ds.shm_nattch;

	test_ready();
	test_wait_sigterm();

	attach_lines(rw, 1, rw_after, sizeof(rw_after));
	attach_lines(ro, 1, ro_after, sizeof(ro_after));
	attach_lines(split, 3, split_after, sizeof(split_after));
	expect_same_lines(rw_before, rw_after, "read-write attach");
	expect_same_lines(ro_before, ro_after, "read-only attach");
	expect_same_lines(split_before, split_after, "split attach");
	pattern_expect(ro, SEG_SIZE, 77, "segment through the read-only attach");
	pattern_expect(split, SEG_SIZE, 77, "segment through the split attach");
	pattern_fill(split, PAGE, 78);
	pattern_expect(rw, PAGE, 78, "a write through one attach seen through another");
	if (shmctl(shmid, IPC_STAT, &ds))
		test_fail_errno("shmctl IPC_STAT after restore");
	if (shmid != id_before || ds.shm_segsz != SEG_SIZE || ds.shm_nattch != nattch_before ||
	    (ds.shm_perm.mode & 0777) != 0640)
		test_fail("segment %d (was %d): size %zu, %lu attaches (were %lu), mode %o", shmid,
			  id_before, (size_t)ds.shm_segsz, (unsigned long)ds.shm_nattch, nattch_before,
			  ds.shm_perm.mode & 0777);
	test_pass();
}
