/*
 * Threads dumped while blocked in read() on pipes of their own process carry on after
 * restore: each of three threads waits on its own pipe for a 60 KiB message, and two
 * threads wait together on one pipe for numbered records. Only after restore does
 * the main thread write; every reader must get exactly those bytes, nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NR_OWN	       3 /* threads with a pipe each */
#define NR_SHARED      2 /* threads waiting on one pipe */
#define NR_READERS     (NR_OWN + NR_SHARED)
#define OWN_READ_FD(i) (60 + 2 * (i))
#define SHARED_READ_FD 70
#define WRITE_FD(rfd)  ((rfd) + 1)

/*
 * Fits the default 64 KiB pipe, so writing it never blocks: a reader that failed leaves
 * the bytes queued and the test reports why instead of hanging in write().
 */
#define OWN_MSG_BYTES (60 << 10)
#define OWN_SEED(i)   (700 + (i))
/* Records are written one write() each, at most PIPE_BUF, so no reader gets half of one. */
#define NR_RECORDS    64
#define RECORD_BYTES  64
#define STOP_INDEX    0xffffffffu

struct record {
	uint32_t index; /* 0..NR_RECORDS-1, or STOP_INDEX: the reader is done */
	unsigned char payload[RECORD_BYTES - sizeof(uint32_t)];
};

static pid_t tids[NR_READERS];
static char failures[NR_READERS][200];
static unsigned char own_msgs[NR_OWN][OWN_MSG_BYTES];
static unsigned char own_got[NR_OWN][OWN_MSG_BYTES];
/* How often each record index reached a shared reader (its own slot, no locking). */
static int record_hits[NR_SHARED][NR_RECORDS];

static void fail_reader(int idx, const char *fmt, const char *detail)
{
	snprintf(failures[idx], sizeof(failures[idx]), fmt, idx, detail);
}

/*
 * The first read() is the one blocked across dump and restore: it must come back with
 * bytes, not an error (an interrupted call not restarted shows as EINTR or -ERESTARTSYS).
 */
static void *own_reader(void *arg)
{
	int idx = (int)(long)arg, fd = OWN_READ_FD(idx), queued = -1;
	size_t done = 0;

	__atomic_store_n(&tids[idx], gettid(), __ATOMIC_RELEASE);
	while (done < OWN_MSG_BYTES) {
		ssize_t n = read(fd, own_got[idx] + done, OWN_MSG_BYTES - done);

		if (n <= 0) {
			fail_reader(idx, "reader %d: read: %s", n ? strerror(errno) : "EOF");
			return NULL;
		}
		done += n;
	}
	if (pattern_check(own_got[idx], OWN_MSG_BYTES, OWN_SEED(idx)) >= 0)
		fail_reader(idx, "reader %d: %s", "the bytes read differ from those written");
	else if (ioctl(fd, FIONREAD, &queued) || queued != 0)
		fail_reader(idx, "reader %d: %s", "bytes are left in its pipe after the message");
	return NULL;
}

static void *shared_reader(void *arg)
{
	int idx = (int)(long)arg, slot = idx - NR_OWN;
	struct record rec;

	__atomic_store_n(&tids[idx], gettid(), __ATOMIC_RELEASE);
	for (;;) {
		ssize_t n = read(SHARED_READ_FD, &rec, sizeof(rec));

		if (n != sizeof(rec)) {
			fail_reader(idx, "reader %d: %s", n < 0 ? strerror(errno) : "short record");
			return NULL;
		}
		if (rec.index == STOP_INDEX)
			return NULL;
		if (rec.index >= NR_RECORDS ||
		    pattern_check(rec.payload, sizeof(rec.payload), rec.index) >= 0) {
			fail_reader(idx, "reader %d: %s", "got a record that was never written");
			return NULL;
		}
		record_hits[slot][rec.index]++;
	}
}

/* Whether the thread sits in read(fd, ...), from /proc/self/task/TID/syscall ("NR ARG0 ..."). */
static int blocked_in_read(pid_t tid, int fd)
{
	char path[64], buf[256];
	unsigned long arg0;
	long nr;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	read_file(path, buf, sizeof(buf));
	return sscanf(buf, "%ld %lx", &nr, &arg0) == 2 && nr == SYS_read && arg0 == (unsigned)fd;
}

static int reader_fd(int idx)
{
	return idx < NR_OWN ? OWN_READ_FD(idx) : SHARED_READ_FD;
}

static void wait_blocked(int idx)
{
	pid_t tid;

	while (!(tid = __atomic_load_n(&tids[idx], __ATOMIC_ACQUIRE)) ||
	       !blocked_in_read(tid, reader_fd(idx)))
		usleep(1000);
}

static void write_all(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		test_fail_errno("write after restore");
}

static void feed_readers(void)
{
	struct record rec;

	for (int i = 0; i < NR_OWN; i++)
		write_all(WRITE_FD(OWN_READ_FD(i)), own_msgs[i], OWN_MSG_BYTES);
	for (uint32_t index = 0; index < NR_RECORDS; index++) {
		rec.index = index;
		pattern_fill(rec.payload, sizeof(rec.payload), index);
		write_all(WRITE_FD(SHARED_READ_FD), &rec, sizeof(rec));
	}
	memset(&rec, 0, sizeof(rec));
	rec.index = STOP_INDEX;
	for (int i = 0; i < NR_SHARED; i++)
		write_all(WRITE_FD(SHARED_READ_FD), &rec, sizeof(rec));
}

static void check_records(void)
{
	for (int index = 0; index < NR_RECORDS; index++) {
		int hits = 0;

		for (int slot = 0; slot < NR_SHARED; slot++)
			hits += record_hits[slot][index];
		if (hits != 1)
			test_fail("record %d reached the shared readers %d times", index, hits);
	}
}

int main(int argc, char **argv)
{
	pthread_t threads[NR_READERS];
	int queued = -1;

	test_init(argc, argv);
	for (int i = 0; i < NR_OWN; i++) {
		pattern_fill(own_msgs[i], OWN_MSG_BYTES, OWN_SEED(i));
		pipe_at(OWN_READ_FD(i), WRITE_FD(OWN_READ_FD(i)));
	}
	pipe_at(SHARED_READ_FD, WRITE_FD(SHARED_READ_FD));

	for (long i = 0; i < NR_READERS; i++) {
		if (pthread_create(&threads[i], NULL, i < NR_OWN ? own_reader : shared_reader,
				   (void *)i))
			test_fail("cannot create reader %ld", i);
		wait_blocked(i);
	}

	test_ready();
	test_wait_sigterm();

	feed_readers();
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(threads[i], NULL);
	for (int i = 0; i < NR_READERS; i++)
		if (failures[i][0])
			test_fail("%s", failures[i]);
	check_records();
	if (ioctl(SHARED_READ_FD, FIONREAD, &queued) || queued != 0)
		test_fail("%d bytes left in the shared pipe", queued);
	test_pass();
}
