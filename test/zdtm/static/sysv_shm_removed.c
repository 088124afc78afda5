/*
 * An attached SysV segment already removed (IPC_RMID) lives only as long as its attaches:
 * the dump, which would kill the task, refuses it with one line, and the task runs on with
 * the segment attached and intact.
 */
#include <sys/ipc.h>
#include <sys/shm.h>

#include "zdtmtst.h"

#define SEG_SIZE (3 * 4096ul)

int main(int argc, char **argv)
{
	struct shmid_ds ds;
	unsigned char *seg;
	int shmid;

	test_init(argc, argv);

	shmid = shmget(IPC_PRIVATE, SEG_SIZE, IPC_CREAT | 0600);
	if (shmid < 0)
		test_fail_errno("shmget");
	seg = shmat(shmid, NULL, 0);
	if (seg == (void *)-1)
		test_fail_errno("shmat");
	if (shmctl(shmid, IPC_RMID, NULL))
		test_fail_errno("shmctl IPC_RMID");
	pattern_fill(seg, SEG_SIZE, 79);

	test_ready();
	test_wait_sigterm();

	pattern_expect(seg, SEG_SIZE, 79, "removed segment after the failed dump");
	if (shmctl(shmid, IPC_STAT, &ds) || ds.shm_nattch != 1 || !(ds.shm_perm.mode & SHM_DEST))
		test_fail("segment %d: %lu attaches, mode %#o", shmid, (unsigned long)ds.shm_nattch,
			  ds.shm_perm.mode);
	test_pass();
}
