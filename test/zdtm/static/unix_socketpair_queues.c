/*
 * Socketpairs of the three types come back connected to each other with the data queued
 * in both directions: a stream's bytes (its head read before the dump), datagrams and
 * records with their boundaries (an empty datagram too, and a datagram queue read after
 * its socket was shut down for reading); shutdown states, O_NONBLOCK, buffer sizes,
 * timeouts, SO_PASSCRED, an unset peek offset; unnamed names; and they still work.
 * ZDTM_UNIX_UPSTREAM_DUMP in the environment leaves out SO_PASSCRED and the empty
 * datagram (upstream criu refuses the queue of the one, and stops dumping at the other).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define STREAM_A 30 /* O_NONBLOCK, buffers and timeouts set */
#define STREAM_B 31 /* SO_PASSCRED */
#define DGRAM_A	 32 /* shut down for reading after its queue was filled */
#define DGRAM_B	 33
#define SEQ_A	 34
#define SEQ_B	 35 /* shut down for writing */
#define STREAM_BYTES 100000
#define STREAM_READ  777 /* read by B before the dump */
#define BACK_BYTES   5000 /* B -> A */
#define NR_RECORDS   20
#define SNDBUF	     65536
#define RCVBUF	     50000

static unsigned char stream_data[STREAM_BYTES], back_data[BACK_BYTES];
/* As the kernel keeps them (in jiffies), read back after setting. */
static struct timeval snd_timeout, rcv_timeout;
static bool upstream_dump;

/* Record i: (i * 37) % 300 + 1 bytes of seed 40 + i; record 5 is empty. */
static size_t record_len(int i)
{
	return i == 5 && !upstream_dump ? 0 : (size_t)(i * 37) % 300 + 1;
}

static void record(int i, unsigned char *buf)
{
	pattern_fill(buf, record_len(i), 40 + i);
}

static void place(int fd, int at)
{
	if (dup2(fd, at) != at)
		test_fail_errno("dup2");
	close(fd);
}

static void make_pair(int type, int a, int b)
{
	int sk[2];

	if (socketpair(AF_UNIX, type, 0, sk))
		test_fail_errno("socketpair");
	place(sk[0], a);
	place(sk[1], b);
}

static void send_records(int fd, int seed_base, int type_tag)
{
	unsigned char buf[512];

	for (int i = 0; i < NR_RECORDS; i++) {
		size_t len = record_len(i + seed_base);

		record(i + seed_base, buf);
		if (send(fd, buf, len, 0) != (ssize_t)len)
			test_fail("send record %d (type %d): %s", i, type_tag, strerror(errno));
	}
}

static void set_int(int fd, int opt, int val)
{
	if (setsockopt(fd, SOL_SOCKET, opt, &val, sizeof(val)))
		test_fail_errno("setsockopt");
}

static void set_timeout(int fd, int opt, long sec, long usec, struct timeval *kept)
{
	struct timeval tv = { sec, usec };
	socklen_t len = sizeof(*kept);

	if (setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)) ||
	    getsockopt(fd, SOL_SOCKET, opt, kept, &len))
		test_fail_errno("setsockopt timeout");
}

static void setup(void)
{
	make_pair(SOCK_STREAM, STREAM_A, STREAM_B);
	make_pair(SOCK_DGRAM, DGRAM_A, DGRAM_B);
	make_pair(SOCK_SEQPACKET, SEQ_A, SEQ_B);

	set_int(STREAM_A, SO_SNDBUF, SNDBUF);
	set_int(STREAM_A, SO_RCVBUF, RCVBUF);
	set_timeout(STREAM_A, SO_SNDTIMEO, 1, 500000, &snd_timeout);
	set_timeout(STREAM_A, SO_RCVTIMEO, 3, 250000, &rcv_timeout);
	set_int(STREAM_B, SO_PASSCRED, !upstream_dump);
	if (write(STREAM_A, stream_data, STREAM_BYTES) != STREAM_BYTES)
		test_fail_errno("write the stream");
	read_exact(STREAM_B, stream_data, STREAM_READ, "the stream's head");
	if (write(STREAM_B, back_data, BACK_BYTES) != BACK_BYTES)
		test_fail_errno("write the stream back");
	if (fcntl(STREAM_A, F_SETFL, O_NONBLOCK))
		test_fail_errno("O_NONBLOCK");

	send_records(DGRAM_B, 0, SOCK_DGRAM);
	send_records(DGRAM_A, 100, SOCK_DGRAM);
	if (shutdown(DGRAM_A, SHUT_RD))
		test_fail_errno("shutdown dgram");
	send_records(SEQ_A, 200, SOCK_SEQPACKET);
	send_records(SEQ_B, 300, SOCK_SEQPACKET);
	if (shutdown(SEQ_B, SHUT_WR))
		test_fail_errno("shutdown seqpacket");
}

static int get_int(int fd, int opt)
{
	socklen_t len = sizeof(int);
	int val;

	if (getsockopt(fd, SOL_SOCKET, opt, &val, &len))
		test_fail("fd %d: getsockopt %d: %s", fd, opt, strerror(errno));
	return val;
}

static void expect_int(int fd, int opt, const char *name, int want)
{
	int val = get_int(fd, opt);

	if (val != want)
		test_fail("fd %d: %s is %d, not %d", fd, name, val, want);
}

static void expect_timeout(int fd, int opt, const char *name, const struct timeval *want)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, opt, &tv, &len) || tv.tv_sec != want->tv_sec ||
	    tv.tv_usec != want->tv_usec)
		test_fail("fd %d: %s is %ld.%06ld, not %ld.%06ld", fd, name, (long)tv.tv_sec,
			  (long)tv.tv_usec, (long)want->tv_sec, (long)want->tv_usec);
}

/* An unnamed socket's name and its peer's are the bare family. */
static void expect_unnamed(int fd)
{
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);

	if (getsockname(fd, (struct sockaddr *)&addr, &len) || len != sizeof(sa_family_t) ||
	    addr.sun_family != AF_UNIX)
		test_fail("fd %d: getsockname gives %u bytes", fd, len);
	len = sizeof(addr);
	if (getpeername(fd, (struct sockaddr *)&addr, &len) || len != sizeof(sa_family_t))
		test_fail("fd %d: getpeername gives %u bytes (%s)", fd, len, strerror(errno));
}

static void expect_type(int fd, int type)
{
	expect_int(fd, SO_DOMAIN, "SO_DOMAIN", AF_UNIX);
	expect_int(fd, SO_TYPE, "SO_TYPE", type);
	expect_int(fd, SO_PEEK_OFF, "SO_PEEK_OFF", -1);
	expect_unnamed(fd);
}

static void expect_records(int fd, int seed_base, const char *what)
{
	unsigned char want[512], got[512];

	for (int i = 0; i < NR_RECORDS; i++) {
		ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);

		record(i + seed_base, want);
		if (n != (ssize_t)record_len(i + seed_base) || memcmp(got, want, n))
			test_fail("%s: record %d has %zd bytes, expected %zu (or other bytes)",
				  what, i, n, record_len(i + seed_base));
	}
}

static void expect_queue_end(int fd, ssize_t want, const char *what)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

	if (n != want || (want < 0 && errno != EAGAIN))
		test_fail("%s: after the queue recv gives %zd (%s), expected %zd", what, n,
			  n < 0 ? strerror(errno) : "data", want);
}

static void check_stream(void)
{
	static unsigned char got[STREAM_BYTES];
	int queued = -1;

	expect_type(STREAM_A, SOCK_STREAM);
	expect_type(STREAM_B, SOCK_STREAM);
	if (fcntl(STREAM_A, F_GETFL) != (O_RDWR | O_NONBLOCK) || fcntl(STREAM_B, F_GETFL) != O_RDWR)
		test_fail("stream file flags %#o %#o", fcntl(STREAM_A, F_GETFL),
			  fcntl(STREAM_B, F_GETFL));
	expect_int(STREAM_A, SO_SNDBUF, "SO_SNDBUF", 2 * SNDBUF);
	expect_int(STREAM_A, SO_RCVBUF, "SO_RCVBUF", 2 * RCVBUF);
	expect_timeout(STREAM_A, SO_SNDTIMEO, "SO_SNDTIMEO", &snd_timeout);
	expect_timeout(STREAM_A, SO_RCVTIMEO, "SO_RCVTIMEO", &rcv_timeout);
	expect_int(STREAM_A, SO_PASSCRED, "SO_PASSCRED", 0);
	expect_int(STREAM_B, SO_PASSCRED, "SO_PASSCRED", !upstream_dump);
	if (ioctl(STREAM_B, SIOCINQ, &queued) || queued != STREAM_BYTES - STREAM_READ)
		test_fail("stream: %d bytes queued, expected %d", queued,
			  STREAM_BYTES - STREAM_READ);
	read_exact(STREAM_B, got, STREAM_BYTES - STREAM_READ, "stream A -> B");
	if (memcmp(got, stream_data + STREAM_READ, STREAM_BYTES - STREAM_READ))
		test_fail("stream A -> B: other bytes");
	read_exact(STREAM_A, got, BACK_BYTES, "stream B -> A");
	if (memcmp(got, back_data, BACK_BYTES))
		test_fail("stream B -> A: other bytes");
	expect_queue_end(STREAM_A, -1, "stream A");
	if (write(STREAM_A, "ab", 2) != 2 || read(STREAM_B, got, 2) != 2 || memcmp(got, "ab", 2))
		test_fail("the stream pair no longer works");
}

static void check_records(void)
{
	char c = 'x';

	expect_type(DGRAM_A, SOCK_DGRAM);
	expect_type(DGRAM_B, SOCK_DGRAM);
	expect_type(SEQ_A, SOCK_SEQPACKET);
	expect_type(SEQ_B, SOCK_SEQPACKET);
	expect_records(DGRAM_B, 100, "dgram A -> B");
	expect_queue_end(DGRAM_B, -1, "dgram B");
	expect_records(DGRAM_A, 0, "dgram B -> A");
	expect_queue_end(DGRAM_A, -1, "dgram A");
	if (send(DGRAM_B, &c, 1, MSG_DONTWAIT) != -1 || errno != EPIPE)
		test_fail("dgram B can still send to A, which was shut down for reading");
	expect_records(SEQ_B, 200, "seqpacket A -> B");
	expect_records(SEQ_A, 300, "seqpacket B -> A");
	/* B shut down writing: A reads the end, B cannot send. */
	expect_queue_end(SEQ_A, 0, "seqpacket A");
	if (send(SEQ_B, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != -1 || errno != EPIPE)
		test_fail("seqpacket B can still send after SHUT_WR");
	if (send(SEQ_A, &c, 1, 0) != 1 || recv(SEQ_B, &c, 1, 0) != 1)
		test_fail("seqpacket A -> B no longer works");
	if (send(DGRAM_A, &c, 1, 0) != 1 || recv(DGRAM_B, &c, 1, 0) != 1)
		test_fail("dgram A -> B no longer works");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	upstream_dump = getenv("ZDTM_UNIX_UPSTREAM_DUMP");
	pattern_fill(stream_data, sizeof(stream_data), 30);
	pattern_fill(back_data, sizeof(back_data), 31);
	setup();

	test_ready();
	test_wait_sigterm();

	check_stream();
	check_records();
	test_pass();
}
