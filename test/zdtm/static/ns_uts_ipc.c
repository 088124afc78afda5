/*
 * UTS and IPC namespaces of the tree's own (unshare(CLONE_NEWUTS | CLONE_NEWIPC) by the
 * root itself, its pids in the runner's namespace): host and domain names, SysV shared
 * memory segments (contents byte for byte, an unaligned size, a sparse one, a locked one,
 * a hugetlb one where the machine has huge pages), message queues (messages in order, with
 * their types and sizes, an empty one with a smaller qbytes), semaphore sets (values),
 * every object with its id, key, owner and mode, and the namespace's sysctls (kernel/sem,
 * kernel/msgmax and the like, fs/mqueue's, a pending shm_next_id), and POSIX message queues
 * no task holds open (messages in priority order with their priorities, sizes, owner and
 * mode, an empty one). A child shares the namespaces: after restore it sees the same names
 * and takes a semaphore.
 *
 * ZDTM_IPC_UPSTREAM: restored by upstream criu, which queues no message longer than 8192
 * bytes, and does not give back a queue's qbytes, a segment's SHM_LOCK or a pending
 * shm_next_id: the test neither makes nor checks those. ZDTM_IPC_UPSTREAM and
 * ZDTM_IPC_UPSTREAM_DUMP: upstream criu dumps no POSIX message queue: none is made.
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define HOSTNAME	"zdtm-ns-uts-ipc"
#define DOMAINNAME	"ns.zdtm.example"
#define PAGE		4096ul
#define HUGE_PAGES_FREE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

/* Sysctls of the namespace, set to values no default has. */
static const struct {
	const char *path, *value;
} sysctls[] = {
	{ "/proc/sys/kernel/sem", "251\t32001\t101\t129" },
	{ "/proc/sys/kernel/msgmax", "9000" },
	{ "/proc/sys/kernel/msgmnb", "20000" },
	{ "/proc/sys/kernel/msgmni", "777" },
	{ "/proc/sys/kernel/shmmax", "123456789" },
	{ "/proc/sys/kernel/shmall", "987654" },
	{ "/proc/sys/kernel/shmmni", "1234" },
	{ "/proc/sys/fs/mqueue/queues_max", "300" },
	{ "/proc/sys/fs/mqueue/msg_max", "20" },
	{ "/proc/sys/fs/mqueue/msgsize_max", "9000" },
	{ "/proc/sys/fs/mqueue/msg_default", "5" },
	{ "/proc/sys/fs/mqueue/msgsize_default", "4000" },
};
#define NR_SYSCTLS (sizeof(sysctls) / sizeof(sysctls[0]))
/* Asked for at dump time and not taken yet: it stays asked for. */
#define PENDING_SHM_ID "4242"

/* Segments: key, size, mode, id asked for (-1: the kernel's), owner set after. */
static const struct shm_want {
	key_t key;
	size_t size;
	int mode;
	int id;
	uid_t uid;
	gid_t gid;
	bool sparse, lock, huge;
} shms[] = {
	{ 0x7a110001, 12345, 0640, 7, 0, 0, false, true, false },
	{ IPC_PRIVATE, 3 * PAGE, 0600, -1, 0, 0, false, false, false },
	{ 0x7a110003, 1 << 20, 0604, 32768 * 3 + 5, 1000, 2000, true, false, false },
	{ 0x7a110004, 2 << 20, 0660, 100, 0, 0, false, false, true },
};
#define NR_SHMS (sizeof(shms) / sizeof(shms[0]))
static int shm_ids[NR_SHMS];

static bool upstream_restore;

/* The messages of the first queue, in order: type, size. */
static const struct {
	long type;
	size_t size;
} msgs[] = { { 1, 0 }, { 2, 1 }, { 3, 100 }, { 2, 9000 }, { 1, 37 } };
#define UPSTREAM_MSGMAX 8192

static size_t msg_size(unsigned int i)
{
	return upstream_restore && msgs[i].size > UPSTREAM_MSGMAX ? UPSTREAM_MSGMAX : msgs[i].size;
}
#define NR_MSGS (sizeof(msgs) / sizeof(msgs[0]))
static int msq_full, msq_empty;
#define MSQ_EMPTY_QBYTES 5000

static const unsigned short sem_values[] = { 0, 1, 2, 32767, 100 };
#define NR_SEMS (sizeof(sem_values) / sizeof(sem_values[0]))
static int sem_set, sem_private;

static bool have_huge_pages;

static void write_text(const char *path, const char *text)
{
	write_file(path, text, strlen(text));
}

static void next_id(const char *kind, int id)
{
	char path[64], text[16];

	if (id < 0)
		return;
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s_next_id", kind);
	snprintf(text, sizeof(text), "%d", id);
	write_text(path, text);
}

/* Every byte of a segment: a pattern, or (sparse) a few pages of it amid zeros. */
static void fill_or_check_shm(unsigned int i, bool check)
{
	const struct shm_want *w = &shms[i];
	char what[32];
	char *addr;

	snprintf(what, sizeof(what), "shm segment %d", shm_ids[i]);
	addr = shmat(shm_ids[i], NULL, check ? SHM_RDONLY : 0);
	if (addr == (void *)-1)
		test_fail("%s: shmat: %s", what, strerror(errno));
	if (!w->sparse) {
		if (check)
			pattern_expect(addr, w->size, i, what);
		else
			pattern_fill(addr, w->size, i);
	}
	for (size_t off = 0; w->sparse && off < w->size; off += PAGE) {
		bool data = (off / PAGE) % 37 == 5;

		if (!check && data)
			pattern_fill(addr + off, PAGE, off);
		else if (check && data)
			pattern_expect(addr + off, PAGE, off, what);
		else if (check)
			for (size_t b = 0; b < PAGE; b++)
				if (addr[off + b])
					test_fail("%s: byte %zu is not 0", what, off + b);
	}
	shmdt(addr);
}

static void expect_perm(const char *what, int id, const struct ipc_perm *perm, key_t key, int mode,
			uid_t uid, gid_t gid)
{
	if (perm->__key != key || (int)(perm->mode & 0777) != mode || perm->uid != uid ||
	    perm->gid != gid)
		test_fail("%s %d: key %#x mode %#o owner %u:%u; expected %#x %#o %u:%u", what, id,
			  perm->__key, perm->mode & 0777, perm->uid, perm->gid, key, mode, uid,
			  gid);
}

static void make_shms(void)
{
	for (unsigned int i = 0; i < NR_SHMS; i++) {
		const struct shm_want *w = &shms[i];
		struct shmid_ds ds;

		if (w->huge && !have_huge_pages)
			continue;
		next_id("shm", w->id);
		shm_ids[i] = shmget(w->key, w->size,
				    IPC_CREAT | IPC_EXCL | w->mode | (w->huge ? SHM_HUGETLB : 0));
		if (shm_ids[i] < 0 || (w->id >= 0 && shm_ids[i] != w->id))
			test_fail("shmget segment %u: %d: %s", i, shm_ids[i], strerror(errno));
		if (w->uid || w->gid) {
			if (shmctl(shm_ids[i], IPC_STAT, &ds))
				test_fail_errno("IPC_STAT");
			ds.shm_perm.uid = w->uid;
			ds.shm_perm.gid = w->gid;
			if (shmctl(shm_ids[i], IPC_SET, &ds))
				test_fail_errno("IPC_SET");
		}
		if (w->lock && !upstream_restore && shmctl(shm_ids[i], SHM_LOCK, NULL))
			test_fail_errno("SHM_LOCK");
		fill_or_check_shm(i, false);
	}
}

static void check_shms(void)
{
	for (unsigned int i = 0; i < NR_SHMS; i++) {
		const struct shm_want *w = &shms[i];
		struct shmid_ds ds;

		if (w->huge && !have_huge_pages)
			continue;
		if (shmctl(shm_ids[i], IPC_STAT, &ds))
			test_fail("segment %d is gone: %s", shm_ids[i], strerror(errno));
		expect_perm("shm segment", shm_ids[i], &ds.shm_perm, w->key, w->mode, w->uid,
			    w->gid);
		if (ds.shm_segsz != w->size || ds.shm_nattch ||
		    !(ds.shm_perm.mode & SHM_LOCKED) != !(w->lock && !upstream_restore))
			test_fail("shm segment %d: size %zu, %lu attached, mode %#o; expected %zu, "
				  "0, "
				  "%slocked",
				  shm_ids[i], ds.shm_segsz, ds.shm_nattch, ds.shm_perm.mode,
				  w->size, w->lock ? "" : "not ");
		fill_or_check_shm(i, true);
	}
}

static void make_msgqs(void)
{
	struct msqid_ds ds;
	struct {
		long type;
		char text[9000];
	} m;

	next_id("msg", 21);
	msq_full = msgget(0x7a110010, IPC_CREAT | IPC_EXCL | 0620);
	msq_empty = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
	if (msq_full != 21 || msq_empty < 0)
		test_fail("msgget: %d %d: %s", msq_full, msq_empty, strerror(errno));
	for (unsigned int i = 0; i < NR_MSGS; i++) {
		m.type = msgs[i].type;
		pattern_fill(m.text, msg_size(i), 100 + i);
		if (msgsnd(msq_full, &m, msg_size(i), IPC_NOWAIT))
			test_fail("msgsnd %u: %s", i, strerror(errno));
	}
	if (msgctl(msq_empty, IPC_STAT, &ds))
		test_fail_errno("IPC_STAT");
	if (!upstream_restore)
		ds.msg_qbytes = MSQ_EMPTY_QBYTES;
	ds.msg_perm.uid = 33;
	ds.msg_perm.mode = 0466;
	if (msgctl(msq_empty, IPC_SET, &ds))
		test_fail_errno("IPC_SET");
}

/* The messages in order (MSG_COPY leaves them), then taken one by one. */
static void check_msgqs(void)
{
	struct msqid_ds ds;
	struct {
		long type;
		char text[9000];
	} m;

	if (msgctl(msq_empty, IPC_STAT, &ds))
		test_fail("queue %d is gone: %s", msq_empty, strerror(errno));
	expect_perm("msg queue", msq_empty, &ds.msg_perm, IPC_PRIVATE, 0466, 33, 0);
	if (ds.msg_qbytes != (upstream_restore ? 20000 : MSQ_EMPTY_QBYTES) || ds.msg_qnum)
		test_fail("msg queue %d: qbytes %lu, %lu messages", msq_empty, ds.msg_qbytes,
			  ds.msg_qnum);
	if (msgctl(msq_full, IPC_STAT, &ds))
		test_fail("queue %d is gone: %s", msq_full, strerror(errno));
	expect_perm("msg queue", msq_full, &ds.msg_perm, 0x7a110010, 0620, 0, 0);
	if (ds.msg_qnum != NR_MSGS || ds.msg_qbytes != 20000)
		test_fail("msg queue %d: %lu messages, qbytes %lu", msq_full, ds.msg_qnum,
			  ds.msg_qbytes);
	for (unsigned int i = 0; i < NR_MSGS; i++) {
		ssize_t len = msgrcv(msq_full, &m, sizeof(m.text), 0, IPC_NOWAIT);

		if (len != (ssize_t)msg_size(i) || m.type != msgs[i].type)
			test_fail("message %u: type %ld, %zd bytes; expected %ld, %zu", i, m.type,
				  len, msgs[i].type, msg_size(i));
		pattern_expect(m.text, len, 100 + i, "message");
	}
}

static void make_sems(void)
{
	next_id("sem", 32768 + 9);
	sem_set = semget(0x7a110020, NR_SEMS, IPC_CREAT | IPC_EXCL | 0600);
	sem_private = semget(IPC_PRIVATE, 1, IPC_CREAT | 0666);
	if (sem_set != 32768 + 9 || sem_private < 0)
		test_fail("semget: %d %d: %s", sem_set, sem_private, strerror(errno));
	if (semctl(sem_set, 0, SETALL, sem_values) || semctl(sem_private, 0, SETVAL, 9))
		test_fail_errno("semctl SETALL");
}

static void check_sems(void)
{
	unsigned short values[NR_SEMS];
	struct semid_ds ds;

	if (semctl(sem_set, 0, IPC_STAT, &ds) || semctl(sem_set, 0, GETALL, values))
		test_fail("semaphore set %d is gone: %s", sem_set, strerror(errno));
	expect_perm("semaphore set", sem_set, &ds.sem_perm, 0x7a110020, 0600, 0, 0);
	if (ds.sem_nsems != NR_SEMS || memcmp(values, sem_values, sizeof(values)))
		test_fail("semaphore set %d: %lu semaphores, values %u %u %u %u %u", sem_set,
			  ds.sem_nsems, values[0], values[1], values[2], values[3], values[4]);
	if (semctl(sem_private, 0, GETVAL) != 9)
		test_fail("semaphore set %d: value %d, not 9", sem_private,
			  semctl(sem_private, 0, GETVAL));
}

/* POSIX message queues: the messages as mq_receive() must give them back. */
static const struct {
	unsigned int prio;
	const char *text;
} mq_sent[] = { { 1, "first of prio 1" }, { 5, "prio 5" }, { 1, "second of prio 1" },
		{ 9, "prio 9, the highest" }, { 0, "" } };
static const unsigned int mq_order[] = { 3, 1, 0, 2, 4 };
#define NR_MQ_MSGS  (sizeof(mq_sent) / sizeof(mq_sent[0]))
#define MQ_FULL	    "/zdtm_mq_full"
#define MQ_EMPTY    "/zdtm_mq_empty"
#define MQ_OWNER    1000
#define MQ_GROUP    1001

static bool make_mqs;

static void make_posix_mq(const char *name, long maxmsg, long msgsize, mode_t mode, bool fill)
{
	struct mq_attr attr = { .mq_maxmsg = maxmsg, .mq_msgsize = msgsize };
	mqd_t mq = mq_open(name, O_CREAT | O_EXCL | O_WRONLY, 0600, &attr);

	if (mq == (mqd_t)-1 || fchmod(mq, mode) || fchown(mq, MQ_OWNER, MQ_GROUP))
		test_fail("%s: %s", name, strerror(errno));
	for (unsigned int i = 0; fill && i < NR_MQ_MSGS; i++)
		if (mq_send(mq, mq_sent[i].text, strlen(mq_sent[i].text), mq_sent[i].prio))
			test_fail("%s: mq_send %u: %s", name, i, strerror(errno));
	mq_close(mq);
}

static void check_posix_mq(const char *name, long maxmsg, long msgsize, mode_t mode, bool fill)
{
	mqd_t mq = mq_open(name, O_RDONLY | O_NONBLOCK);
	struct mq_attr attr;
	struct stat st;
	char buf[256];
	unsigned int prio;

	if (mq == (mqd_t)-1 || mq_getattr(mq, &attr) || fstat(mq, &st))
		test_fail("%s after restore: %s", name, strerror(errno));
	if (attr.mq_maxmsg != maxmsg || attr.mq_msgsize != msgsize ||
	    attr.mq_curmsgs != (fill ? (long)NR_MQ_MSGS : 0))
		test_fail("%s: maxmsg %ld msgsize %ld curmsgs %ld, expected %ld %ld %ld", name,
			  attr.mq_maxmsg, attr.mq_msgsize, attr.mq_curmsgs, maxmsg, msgsize,
			  fill ? (long)NR_MQ_MSGS : 0L);
	if ((st.st_mode & 07777) != mode || st.st_uid != MQ_OWNER || st.st_gid != MQ_GROUP)
		test_fail("%s: mode %#o owner %u:%u, expected %#o %u:%u", name, st.st_mode & 07777,
			  st.st_uid, st.st_gid, mode, MQ_OWNER, MQ_GROUP);
	for (unsigned int i = 0; fill && i < NR_MQ_MSGS; i++) {
		unsigned int want = mq_order[i];
		ssize_t n = mq_receive(mq, buf, sizeof(buf), &prio);

		if (n != (ssize_t)strlen(mq_sent[want].text) || prio != mq_sent[want].prio ||
		    memcmp(buf, mq_sent[want].text, n))
			test_fail("%s: message %u is %zd bytes of prio %u, expected \"%s\" of prio %u",
				  name, i, n, prio, mq_sent[want].text, mq_sent[want].prio);
	}
	mq_close(mq);
}

static void check_names(const char *who)
{
	struct utsname names;

	if (uname(&names) || strcmp(names.nodename, HOSTNAME) ||
	    strcmp(names.domainname, DOMAINNAME))
		test_fail("%s: names \"%s\" and \"%s\"", who, names.nodename, names.domainname);
}

static void check_sysctls(void)
{
	char text[128];

	for (unsigned int i = 0; i < NR_SYSCTLS; i++) {
		read_file(sysctls[i].path, text, sizeof(text));
		text[strcspn(text, "\n")] = '\0';
		if (strcmp(text, sysctls[i].value))
			test_fail("%s is \"%s\", not \"%s\"", sysctls[i].path, text,
				  sysctls[i].value);
	}
	read_file("/proc/sys/kernel/shm_next_id", text, sizeof(text));
	if (!upstream_restore && atoi(text) != atoi(PENDING_SHM_ID))
		test_fail("kernel/shm_next_id is %s", text);
}

/* Shares the namespaces: the names, and a semaphore it takes (2 of sem_set[2]). */
static void child_main(void)
{
	struct sembuf take = { 2, -2, IPC_NOWAIT };

	test_barrier_done();
	test_wait_sigterm();
	check_names("child");
	if (semop(sem_set, &take, 1))
		test_fail_errno("child: semop");
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t child;
	char text[32];

	test_init(argc, argv);
	upstream_restore = getenv("ZDTM_IPC_UPSTREAM");
	if (unshare(CLONE_NEWUTS | CLONE_NEWIPC))
		test_fail_errno("unshare(CLONE_NEWUTS | CLONE_NEWIPC)");
	if (sethostname(HOSTNAME, strlen(HOSTNAME)) ||
	    setdomainname(DOMAINNAME, strlen(DOMAINNAME)))
		test_fail_errno("set the names");
	for (unsigned int i = 0; i < NR_SYSCTLS; i++)
		write_text(sysctls[i].path, sysctls[i].value);
	/* Restore needs one too, once the dumped segment has gone with its namespace. */
	have_huge_pages = access(HUGE_PAGES_FREE, R_OK) == 0 &&
			  atoi((read_file(HUGE_PAGES_FREE, text, sizeof(text)), text)) > 0;
	make_shms();
	make_msgqs();
	make_sems();
	make_mqs = !upstream_restore && !getenv("ZDTM_IPC_UPSTREAM_DUMP");
	if (make_mqs) {
		make_posix_mq(MQ_FULL, 8, 200, 0640, true);
		make_posix_mq(MQ_EMPTY, 3, 16, 0604, false);
	}

	write_text("/proc/sys/kernel/shm_next_id", PENDING_SHM_ID);
	child = test_fork_child(child_main);
	test_ready();
	test_wait_sigterm();

	check_names("root");
	check_sysctls();
	check_shms();
	check_sems();
	test_children_verdict(&child, 1, "root");
	if (semctl(sem_set, 2, GETVAL) != 0)
		test_fail("the child's semop did not take semaphore 2");
	check_msgqs();
	if (make_mqs) {
		check_posix_mq(MQ_FULL, 8, 200, 0640, true);
		check_posix_mq(MQ_EMPTY, 3, 16, 0604, false);
	}
	test_pass();
}
