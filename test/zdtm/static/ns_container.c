/*
 * A container as a runtime starts one: the tree's root is the init of its own pid
 * namespace, in UTS, IPC and time namespaces of its own too, and leads its session; its
 * children (one with a child of its own) use the namespace's SysV objects. After restore:
 * every task's pids inside, the host name, the shared memory the children wrote, the
 * semaphore they counted on, the messages they queued (in order), clocks that go on from
 * the dump; and the objects still work between the tasks.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zdtmtst.h"

#define HOSTNAME	"zdtm-container"
#define MONOTONIC_AHEAD (10 * 86400L)
#define BOOTTIME_AHEAD	(20 * 86400L)
#define MAX_GAP		60
#define NR_WORKERS	3    /* two children and a grandchild */
#define SLOT		4096 /* each worker's part of the segment */
#define MSG_KEY		0x7c000001
#define SHM_KEY		0x7c000002
#define SEM_KEY		0x7c000003

static unsigned int levels;
static int shm_id, msq_id, sem_id;
static double mono_before;

/* Workers are pids 2 (a child), 3 (its child) and 4 (a child), each with its slot. */
#define FIRST_WORKER 2

struct worker_msg {
	long type; /* 1: before the dump; 2: after the restore */
	pid_t pid;
};

static double monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void expect_host_and_clock(const char *who)
{
	struct utsname names;
	double gap = monotonic() - mono_before;

	if (uname(&names) || strcmp(names.nodename, HOSTNAME))
		test_fail("%s: host name \"%s\"", who, names.nodename);
	if (gap < 0 || gap > MAX_GAP)
		test_fail("%s: CLOCK_MONOTONIC moved by %.3f s across the dump", who, gap);
}

static char *attach(int flags)
{
	char *shm = shmat(shm_id, NULL, flags);

	if (shm == (void *)-1)
		test_fail_errno("shmat");
	return shm;
}

/* Writes its slot of the segment, counts itself on the semaphore, queues a message. */
static void worker_work(long type)
{
	struct worker_msg msg = { type, getpid() };
	struct sembuf up = { 0, 1, 0 };
	char *shm = attach(0);

	pattern_fill(shm + (getpid() - FIRST_WORKER) * SLOT, SLOT, getpid() + type * 100);
	shmdt(shm);
	if (semop(sem_id, &up, 1) || msgsnd(msq_id, &msg, sizeof(msg) - sizeof(long), 0))
		test_fail_errno("worker: semop or msgsnd");
}

static void worker_main(pid_t parent)
{
	pid_t pid = getpid();

	worker_work(1);
	test_barrier_done();
	test_wait_sigterm();
	expect_ns_pid(pid, levels, "worker");
	if (getppid() != parent)
		test_fail("worker %d: parent %d, not %d", pid, getppid(), parent);
	expect_host_and_clock("worker");
	worker_work(2);
	exit(0);
}

static void grandchild_main(void)
{
	worker_main(FIRST_WORKER);
}

static void child_main(void)
{
	if (getpid() == FIRST_WORKER)
		test_fork(grandchild_main);
	worker_main(1);
}

/* Each worker's message of one type, and nothing else. */
static void expect_messages(long type)
{
	struct worker_msg msg;
	unsigned int seen = 0, bit;

	while (msgrcv(msq_id, &msg, sizeof(msg) - sizeof(long), type, IPC_NOWAIT) >= 0) {
		bit = 1u << (msg.pid - FIRST_WORKER);
		if (msg.pid < FIRST_WORKER || msg.pid >= FIRST_WORKER + NR_WORKERS || (seen & bit))
			test_fail("message of type %ld from pid %d", type, msg.pid);
		seen |= bit;
	}
	if (errno != ENOMSG || seen != (1u << NR_WORKERS) - 1)
		test_fail("messages of type %ld: workers %#x seen (%s)", type, seen,
			  strerror(errno));
}

static void expect_slots(long type)
{
	char *shm = attach(SHM_RDONLY);

	for (pid_t w = FIRST_WORKER; w < FIRST_WORKER + NR_WORKERS; w++)
		pattern_expect(shm + (w - FIRST_WORKER) * SLOT, SLOT, w + type * 100, "a slot");
	shmdt(shm);
}

static void wait_count(int count)
{
	while (semctl(sem_id, 0, GETVAL) < count)
		sched_yield();
}

static void expect_exit(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || status)
		test_fail("worker %d: wait status %#x (%s)", pid, status, strerror(errno));
}

/* A segment the init attached and then removed (IPC_RMID): it lives while attached. */
static char *attach_removed(int *id)
{
	char *addr;

	*id = shmget(IPC_PRIVATE, 3 * 4096, IPC_CREAT | 0600);
	addr = *id < 0 ? (void *)-1 : shmat(*id, NULL, 0);
	if (addr == (void *)-1 || shmctl(*id, IPC_RMID, NULL))
		test_fail_errno("removed segment");
	pattern_fill(addr, 3 * 4096, 55);
	return addr;
}

/*
 * Still there, removed, attached once, its contents kept; gone with its detach. Upstream
 * criu's restore leaves it not removed (ZDTM_SHM_REMOVED_KEPT): only the contents count.
 */
static void expect_removed(int id, char *addr)
{
	struct shmid_ds ds;

	if (getenv("ZDTM_SHM_REMOVED_KEPT")) {
		pattern_expect(addr, 3 * 4096, 55, "the removed segment");
		return;
	}
	if (shmctl(id, IPC_STAT, &ds) || !(ds.shm_perm.mode & SHM_DEST) || ds.shm_nattch != 1)
		test_fail("removed segment %d: mode %#o, %lu attaches", id, ds.shm_perm.mode,
			  (unsigned long)ds.shm_nattch);
	pattern_expect(addr, 3 * 4096, 55, "the removed segment");
	if (shmdt(addr) || !shmctl(id, IPC_STAT, &ds))
		test_fail("removed segment %d outlived its last detach", id);
}

int main(int argc, char **argv)
{
	char *kept, *removed;
	int removed_id;

	test_init(argc, argv);
	test_unshare_time(MONOTONIC_AHEAD, BOOTTIME_AHEAD);
	test_launch_root(CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC);
	levels = ns_pid_levels();
	expect_ns_pid(1, levels, "init");
	if (setsid() != 1 || sethostname(HOSTNAME, strlen(HOSTNAME)))
		test_fail_errno("setsid or sethostname");
	mono_before = monotonic();
	shm_id = shmget(SHM_KEY, NR_WORKERS * SLOT, IPC_CREAT | IPC_EXCL | 0600);
	msq_id = msgget(MSG_KEY, IPC_CREAT | IPC_EXCL | 0600);
	sem_id = semget(SEM_KEY, 1, IPC_CREAT | IPC_EXCL | 0600);
	if (shm_id < 0 || msq_id < 0 || sem_id < 0)
		test_fail_errno("SysV objects");
	test_barrier_init();
	/* pid 2 forks pid 3 before it counts itself: then the next child is pid 4 */
	test_fork(child_main);
	wait_count(2);
	test_fork(child_main);
	test_barrier_wait();
	/* The init keeps the segment attached across the dump (its VMA names it by id). */
	kept = attach(0);
	removed = attach_removed(&removed_id);
	test_ready();
	test_wait_sigterm();

	expect_ns_pid(1, levels, "init");
	if (getsid(0) != 1 || getpgid(0) != 1)
		test_fail("init: session %d, group %d", getsid(0), getpgid(0));
	expect_host_and_clock("init");
	if (semctl(sem_id, 0, GETVAL) != NR_WORKERS)
		test_fail("semaphore %d, not %d", semctl(sem_id, 0, GETVAL), NR_WORKERS);
	expect_slots(1);
	pattern_expect(kept, SLOT, FIRST_WORKER + 100, "the init's attach of the segment");
	expect_removed(removed_id, removed);
	expect_messages(1);
	/* pid 3 first: it checks that its parent is still pid 2 */
	if (kill(3, SIGTERM))
		test_fail_errno("SIGTERM to worker 3");
	wait_count(NR_WORKERS + 1);
	if (kill(2, SIGTERM) || kill(4, SIGTERM))
		test_fail_errno("SIGTERM to the workers");
	expect_exit(2);
	expect_exit(4);
	/* pid 3, the init's child once pid 2 exited */
	expect_exit(3);
	expect_slots(2);
	expect_messages(2);
	test_pass();
}
