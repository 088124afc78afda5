/*
 * libsoccr's test (make soccr-test, part of make test; root: repair mode takes
 * CAP_NET_ADMIN, the forged FIN CAP_NET_RAW): real connections on 127.0.0.1 and ::1 are
 * saved with queued bytes both ways, closed in repair mode, restored on a new socket, and
 * must then carry exactly their bytes; then the calls that must fail. One line per check
 * that fails, "soccr: N passed, N failed" at the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soccr.h"

static int passed, failed;

#define CHECK(cond, ...) check(!!(cond), __LINE__, __VA_ARGS__)

static bool check(bool ok, int line, const char *fmt, ...)
{
	va_list args;

	if (ok) {
		passed++;
		return true;
	}
	failed++;
	fprintf(stderr, "soccr_test.c:%d: FAIL: ", line);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
	return false;
}

/* The library's last error message, for the checks that it said why. */
static char last_error[512];

static void record_log(unsigned int level, const char *fmt, ...)
{
	va_list args;

	if (level != SOCCR_LOG_ERR)
		return;
	va_start(args, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, args);
	va_end(args);
}

/* Bytes that say where they are in a stream of their own (seed tells the streams apart). */
static void fill_pattern(char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * 7 + seed * 31 + (i >> 8)) & 0xff);
}

/* ------------------------------------------------------------ connections ---- */

struct conn {
	int family;
	int client; /* the end saved and restored */
	int server; /* its peer, which never stops */
};

static socklen_t loopback(int family, union libsoccr_addr *addr, uint16_t port)
{
	memset(addr, 0, sizeof(*addr));
	if (family == AF_INET) {
		addr->v4.sin_family = AF_INET;
		addr->v4.sin_port = htons(port);
		addr->v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(addr->v4);
	}
	addr->v6.sin6_family = AF_INET6;
	addr->v6.sin6_port = htons(port);
	addr->v6.sin6_addr = in6addr_loopback;
	return sizeof(addr->v6);
}

static int set_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

/*
 * A connection on the loopback. The server's receive buffer is small, so that a large
 * write of the client leaves most of it unsent; the client's send buffer is large, so
 * that all of it is queued.
 */
static int make_conn(int family, struct conn *c)
{
	union libsoccr_addr addr;
	socklen_t len = loopback(family, &addr, 0);
	int lfd = socket(family, SOCK_STREAM, IPPROTO_TCP);

	c->family = family;
	c->client = c->server = -1;
	if (lfd < 0 || set_int(lfd, SOL_SOCKET, SO_RCVBUF, 4096) || bind(lfd, &addr.sa, len) ||
	    listen(lfd, 1) || getsockname(lfd, &addr.sa, &len))
		goto fail;
	c->client = socket(family, SOCK_STREAM, IPPROTO_TCP);
	if (c->client < 0 || set_int(c->client, SOL_SOCKET, SO_SNDBUF, 1 << 20) ||
	    connect(c->client, &addr.sa, len))
		goto fail;
	c->server = accept(lfd, NULL, NULL);
	if (c->server < 0)
		goto fail;
	close(lfd);
	return 0;
fail:
	CHECK(0, "cannot make a connection (family %d): %s", family, strerror(errno));
	if (lfd >= 0)
		close(lfd);
	if (c->client >= 0)
		close(c->client);
	return -1;
}

static int queue_len(int fd, unsigned long req)
{
	int n = -1;

	return ioctl(fd, req, &n) ? -1 : n;
}

/*
 * Waits until fd's queue (SIOCINQ, SIOCOUTQ, ...) holds want bytes: the loopback carries
 * segments in softirqs, not always before send() returns. Polls for what changes it; 30 s
 * without reaching it is a failure, not a timing to tune.
 */
static bool wait_queue(int fd, unsigned long req, int want)
{
	for (int i = 0; i < 3000; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (queue_len(fd, req) == want)
			return true;
		poll(&p, 1, 10);
	}
	return false;
}

/* All of len bytes written (blocking), or false. */
static bool write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n <= 0)
			return false;
		buf += n;
		len -= n;
	}
	return true;
}

/*
 * Everything fd receives until its peer's FIN, into a new buffer; *len its length. 30 s
 * without a byte or the FIN is a failure.
 */
static char *read_to_eof(int fd, size_t *len)
{
	size_t size = 1 << 16, got = 0;
	char *buf = malloc(size);

	while (buf) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 30000) != 1)
			break;
		n = read(fd, buf + got, size - got);
		if (n < 0)
			break;
		if (n == 0) {
			*len = got;
			return buf;
		}
		got += n;
		if (got == size) {
			char *grown = realloc(buf, size * 2);

			if (!grown)
				break;
			buf = grown;
			size *= 2;
		}
	}
	free(buf);
	return NULL;
}

/* Drops every segment that reaches fd (a socket filter that accepts nothing). */
static int drop_incoming(int fd, bool on)
{
	struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {.len = 1, .filter = &drop};

	if (on)
		return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
	return setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &(int){0}, sizeof(int));
}

static bool same_bytes(const char *a, const char *b, size_t len)
{
	return len == 0 || (a && b && !memcmp(a, b, len));
}

/* -------------------------------------------------------- one connection ---- */

#define TO_CLIENT   5000   /* queued in the client's receive queue */
#define FROM_CLIENT 200000 /* its send queue: a few KB in flight (unacked), the rest unsent */
#define AFTER	    7000   /* each way after the restore */

/*
 * The client end saved: TO_CLIENT bytes in its receive queue, FROM_CLIENT in its send
 * queue, some of them sent and unacknowledged (the server's filter drops them and their
 * retransmissions), the rest unsent (the server's window is full of nothing it kept).
 */
static int queue_both_ways(struct conn *c, const char *to_client, const char *from_client)
{
	const char *what = c->family == AF_INET ? "127.0.0.1" : "::1";
	int outq, unsent;

	if (!CHECK(write_all(c->server, to_client, TO_CLIENT), "%s: server write: %s", what,
		   strerror(errno)) ||
	    !CHECK(wait_queue(c->client, SIOCINQ, TO_CLIENT),
		   "%s: the client's receive queue holds %d bytes, not %d", what,
		   queue_len(c->client, SIOCINQ), TO_CLIENT) ||
	    /* Acknowledged before the server stops hearing anything. */
	    !CHECK(wait_queue(c->server, SIOCOUTQ, 0), "%s: the server's bytes stay unacked",
		   what) ||
	    !CHECK(drop_incoming(c->server, true) == 0, "%s: SO_ATTACH_FILTER: %s", what,
		   strerror(errno)) ||
	    !CHECK(write_all(c->client, from_client, FROM_CLIENT), "%s: client write: %s", what,
		   strerror(errno)))
		return -1;
	outq = queue_len(c->client, SIOCOUTQ);
	unsent = queue_len(c->client, SIOCOUTQNSD);
	if (!CHECK(outq == FROM_CLIENT && unsent > 0 && unsent < outq,
		   "%s: the client's send queue: %d bytes, %d unsent: want %d, some sent and "
		   "some not",
		   what, outq, unsent, FROM_CLIENT))
		return -1;
	return 0;
}

/* What was saved, against what the connection had and what a restore should read back. */
static void check_saved(const char *what, int fd, const struct libsoccr_sk_data *d,
			struct libsoccr_sk *h, const char *to_client, const char *from_client)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int mss = 0;
	socklen_t mlen = sizeof(mss);

	CHECK(!getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len) &&
		      !getsockopt(fd, SOL_TCP, TCP_MAXSEG, &mss, &mlen),
	      "%s: TCP_INFO: %s", what, strerror(errno));
	CHECK(d->state == TCP_ESTABLISHED, "%s: saved state %u", what, d->state);
	CHECK(d->inq_len == TO_CLIENT && d->outq_len == FROM_CLIENT,
	      "%s: saved queues %u and %u, want %u and %u", what, d->inq_len, d->outq_len,
	      TO_CLIENT, FROM_CLIENT);
	CHECK(d->unsq_len == (uint32_t)queue_len(fd, SIOCOUTQNSD),
	      "%s: saved %u unsent bytes, SIOCOUTQNSD says %d", what, d->unsq_len,
	      queue_len(fd, SIOCOUTQNSD));
	CHECK(d->opt_mask == ti.tcpi_options && d->snd_wscale == ti.tcpi_snd_wscale &&
		      d->rcv_wscale == ti.tcpi_rcv_wscale,
	      "%s: saved options %#x, wscales %u/%u; TCP_INFO %#x, %u/%u", what, d->opt_mask,
	      d->snd_wscale, d->rcv_wscale, ti.tcpi_options, ti.tcpi_snd_wscale,
	      ti.tcpi_rcv_wscale);
	/* Loopback connections negotiate all three. */
	CHECK((d->opt_mask & (TCPI_OPT_TIMESTAMPS | TCPI_OPT_SACK | TCPI_OPT_WSCALE)) ==
			      (TCPI_OPT_TIMESTAMPS | TCPI_OPT_SACK | TCPI_OPT_WSCALE) &&
		      (d->flags & SOCCR_FLAGS_TIMESTAMP) && (d->flags & SOCCR_FLAGS_WINDOW),
	      "%s: options %#x, flags %#x: want timestamps, SACK, window scaling, window", what,
	      d->opt_mask, d->flags);
	CHECK(d->mss_clamp == (uint32_t)mss && mss > 0, "%s: saved MSS %u, TCP_MAXSEG %d", what,
	      d->mss_clamp, mss);
	CHECK(same_bytes(libsoccr_get_queue_bytes(h, TCP_RECV_QUEUE, 0), to_client, TO_CLIENT),
	      "%s: the saved receive queue differs from what the server sent", what);
	CHECK(same_bytes(libsoccr_get_queue_bytes(h, TCP_SEND_QUEUE, 0), from_client, FROM_CLIENT),
	      "%s: the saved send queue differs from what the client wrote", what);
}

/*
 * The restored socket read back in repair mode, before anything moves: as saved, less the
 * unsent tail, which the caller sends after libsoccr_resume().
 */
static void check_restored(const char *what, int fd, const struct libsoccr_sk_data *d)
{
	struct libsoccr_sk *h = libsoccr_pause(fd);
	struct libsoccr_sk_data r;
	uint32_t tail = libsoccr_unsent_len(d);

	if (!CHECK(h, "%s: restored socket: libsoccr_pause: %s", what, strerror(errno)))
		return;
	if (CHECK(libsoccr_save(h, &r, sizeof(r)) == (int)sizeof(r), "%s: restored socket: %s",
		  what, last_error)) {
		CHECK(r.state == d->state && r.inq_len == d->inq_len && r.inq_seq == d->inq_seq,
		      "%s: restored receive side: state %u, %u bytes to %u; saved %u, %u to %u",
		      what, r.state, r.inq_len, r.inq_seq, d->state, d->inq_len, d->inq_seq);
		CHECK(r.outq_len == d->outq_len - tail && r.outq_seq == d->outq_seq - tail &&
			      r.unsq_len == 0,
		      "%s: restored send queue %u bytes to %u (%u unsent); saved %u to %u less "
		      "%u",
		      what, r.outq_len, r.outq_seq, r.unsq_len, d->outq_len, d->outq_seq, tail);
		CHECK(r.opt_mask == d->opt_mask && r.mss_clamp == d->mss_clamp &&
			      r.snd_wscale == d->snd_wscale && r.rcv_wscale == d->rcv_wscale,
		      "%s: restored options %#x, MSS %u, wscales %u/%u; saved %#x, %u, %u/%u", what,
		      r.opt_mask, r.mss_clamp, r.snd_wscale, r.rcv_wscale, d->opt_mask,
		      d->mss_clamp, d->snd_wscale, d->rcv_wscale);
		CHECK(r.snd_wl1 == d->snd_wl1 && r.snd_wnd == d->snd_wnd &&
			      r.max_window == d->max_window && r.rcv_wnd == d->rcv_wnd &&
			      r.rcv_wup == d->rcv_wup,
		      "%s: restored window %u %u %u %u %u; saved %u %u %u %u %u", what, r.snd_wl1,
		      r.snd_wnd, r.max_window, r.rcv_wnd, r.rcv_wup, d->snd_wl1, d->snd_wnd,
		      d->max_window, d->rcv_wnd, d->rcv_wup);
		/* The clock goes on from the saved value: never back. */
		CHECK((int32_t)(r.timestamp - d->timestamp) >= 0,
		      "%s: restored timestamp clock %u is behind the saved %u", what, r.timestamp,
		      d->timestamp);
	}
	libsoccr_release(h);
}

/* Saved, closed in repair mode, restored on a new socket: the new one is returned. */
static int save_close_restore(struct conn *c, struct libsoccr_sk_data *d, char **inq, char **outq,
			      const char *to_client, const char *from_client)
{
	const char *what = c->family == AF_INET ? "127.0.0.1" : "::1";
	struct libsoccr_sk *h = libsoccr_pause(c->client);
	union libsoccr_addr *self, *peer;
	int fd;

	if (!CHECK(h, "%s: libsoccr_pause: %s", what, strerror(errno)))
		return -1;
	libsoccr_set_label(h, what);
	if (!CHECK(libsoccr_save(h, d, sizeof(*d)) == (int)sizeof(*d), "%s: libsoccr_save: %s",
		   what, last_error)) {
		libsoccr_release(h);
		return -1;
	}
	check_saved(what, c->client, d, h, to_client, from_client);
	*inq = libsoccr_get_queue_bytes(h, TCP_RECV_QUEUE, SOCCR_MEM_EXCL);
	*outq = libsoccr_get_queue_bytes(h, TCP_SEND_QUEUE, SOCCR_MEM_EXCL);
	self = libsoccr_get_addr(h, 1, SOCCR_MEM_EXCL);
	peer = libsoccr_get_addr(h, 0, SOCCR_MEM_EXCL);
	CHECK(*inq && *outq && self && peer, "%s: the saved queues and addresses", what);
	/* In repair mode: closing it sends neither a FIN nor a reset. */
	libsoccr_release(h);
	close(c->client);
	c->client = -1;
	if (!*inq || !*outq || !self || !peer) {
		free(self);
		free(peer);
		return -1;
	}

	fd = socket(c->family, SOCK_STREAM, IPPROTO_TCP);
	h = fd >= 0 ? libsoccr_pause(fd) : NULL;
	if (!CHECK(h, "%s: a new socket in repair mode: %s", what, strerror(errno))) {
		free(self);
		free(peer);
		return -1;
	}
	libsoccr_set_label(h, what);
	if (!CHECK(!libsoccr_set_addr(h, 1, self, SOCCR_MEM_EXCL) &&
			   !libsoccr_set_addr(h, 0, peer, SOCCR_MEM_EXCL) &&
			   !libsoccr_set_queue_bytes(h, TCP_RECV_QUEUE, *inq, 0) &&
			   !libsoccr_set_queue_bytes(h, TCP_SEND_QUEUE, *outq, 0) &&
			   !libsoccr_restore(h, d, sizeof(*d)) &&
			   !libsoccr_restore_fins(h, d, sizeof(*d)),
		   "%s: libsoccr_restore: %s", what, last_error)) {
		libsoccr_release(h);
		close(fd);
		return -1;
	}
	libsoccr_release(h);
	check_restored(what, fd, d);
	return fd;
}

/*
 * The whole round on one family: after the restore and the end of repair mode, the server
 * must receive exactly the client's send queue (its unacknowledged part retransmitted, its
 * unsent tail sent) and then the new bytes; the restored client exactly its old receive
 * queue and then the server's new bytes.
 */
static void test_established(int family)
{
	const char *what = family == AF_INET ? "127.0.0.1" : "::1";
	char *to_client = malloc(TO_CLIENT + AFTER), *from_client = malloc(FROM_CLIENT + AFTER);
	char *inq = NULL, *outq = NULL, *got;
	struct libsoccr_sk_data d;
	struct libsoccr_sk *h;
	struct conn c;
	size_t len;
	int fd;

	if (!to_client || !from_client || make_conn(family, &c))
		goto out;
	fill_pattern(to_client, TO_CLIENT + AFTER, 1);
	fill_pattern(from_client, FROM_CLIENT + AFTER, 2);
	if (queue_both_ways(&c, to_client, from_client))
		goto out_conn;
	fd = save_close_restore(&c, &d, &inq, &outq, to_client, from_client);
	if (fd < 0)
		goto out_conn;
	/* The server hears again, then the window probe goes out. */
	h = libsoccr_pause(fd);
	if (!CHECK(!drop_incoming(c.server, false) && h && !libsoccr_resume(h),
		   "%s: out of repair mode: %s", what, last_error))
		goto out_fd;
	len = libsoccr_unsent_len(&d);
	CHECK(len == d.unsq_len && len > 0, "%s: %zu bytes left to send, %u were unsent", what, len,
	      d.unsq_len);
	CHECK(write_all(fd, outq + d.outq_len - len, len) &&
		      write_all(fd, from_client + FROM_CLIENT, AFTER) && !shutdown(fd, SHUT_WR),
	      "%s: the restored socket's writes: %s", what, strerror(errno));
	got = read_to_eof(c.server, &len);
	CHECK(got && len == FROM_CLIENT + AFTER && same_bytes(got, from_client, len),
	      "%s: the server received %zd bytes, want the %d the client queued and wrote, "
	      "byte for byte",
	      what, got ? (ssize_t)len : -1, FROM_CLIENT + AFTER);
	free(got);
	CHECK(write_all(c.server, to_client + TO_CLIENT, AFTER) && !shutdown(c.server, SHUT_WR),
	      "%s: the server's writes: %s", what, strerror(errno));
	got = read_to_eof(fd, &len);
	CHECK(got && len == TO_CLIENT + AFTER && same_bytes(got, to_client, len),
	      "%s: the restored client read %zd bytes, want its %d queued and the server's new "
	      "ones, byte for byte",
	      what, got ? (ssize_t)len : -1, TO_CLIENT + AFTER);
	free(got);
out_fd:
	close(fd);
out_conn:
	if (c.client >= 0)
		close(c.client);
	close(c.server);
out:
	free(inq);
	free(outq);
	free(to_client);
	free(from_client);
}

/*
 * CLOSE_WAIT: the server's FIN is in the client's receive side. Restored, the socket gets
 * the FIN forged from the server's address (libsoccr_restore_fins()) and is in CLOSE_WAIT
 * again: it reads its queued bytes, then end of file; it can still send.
 */
static void test_close_wait(int family)
{
	const char *what = family == AF_INET ? "127.0.0.1 CLOSE_WAIT" : "::1 CLOSE_WAIT";
	char bye[] = "bye from the server", tail[] = "the client's last words";
	struct libsoccr_sk *h = NULL;
	struct libsoccr_sk_data d, r;
	union libsoccr_addr *self = NULL, *peer = NULL;
	char *inq = NULL, *got;
	struct tcp_info ti;
	socklen_t tlen = sizeof(ti);
	struct conn c;
	size_t len;
	int fd = -1;

	if (make_conn(family, &c))
		return;
	if (!CHECK(write_all(c.server, bye, sizeof(bye)) && !shutdown(c.server, SHUT_WR),
		   "%s: server: %s", what, strerror(errno)) ||
	    !CHECK(wait_queue(c.client, SIOCINQ, sizeof(bye)), "%s: the bytes did not arrive",
		   what))
		goto out;
	h = libsoccr_pause(c.client);
	if (!CHECK(h && libsoccr_save(h, &d, sizeof(d)) == (int)sizeof(d), "%s: save: %s", what,
		   last_error))
		goto out;
	CHECK(d.state == TCP_CLOSE_WAIT && d.inq_len == sizeof(bye),
	      "%s: saved state %u with %u bytes, want CLOSE_WAIT (%d) with %zu", what, d.state,
	      d.inq_len, TCP_CLOSE_WAIT, sizeof(bye));
	inq = libsoccr_get_queue_bytes(h, TCP_RECV_QUEUE, SOCCR_MEM_EXCL);
	self = libsoccr_get_addr(h, 1, SOCCR_MEM_EXCL);
	peer = libsoccr_get_addr(h, 0, SOCCR_MEM_EXCL);
	libsoccr_release(h);
	close(c.client);
	c.client = -1;

	fd = socket(family, SOCK_STREAM, IPPROTO_TCP);
	h = fd >= 0 ? libsoccr_pause(fd) : NULL;
	if (!CHECK(h && inq && self && peer, "%s: a new socket: %s", what, strerror(errno)))
		goto out;
	libsoccr_set_addr(h, 1, self, SOCCR_MEM_EXCL);
	libsoccr_set_addr(h, 0, peer, SOCCR_MEM_EXCL);
	self = peer = NULL;
	libsoccr_set_queue_bytes(h, TCP_RECV_QUEUE, inq, SOCCR_MEM_EXCL);
	inq = NULL;
	if (!CHECK(!libsoccr_restore(h, &d, sizeof(d)) && !libsoccr_restore_fins(h, &d, sizeof(d)),
		   "%s: restore: %s", what, last_error))
		goto out;
	CHECK(!getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &tlen) && ti.tcpi_state == TCP_CLOSE_WAIT,
	      "%s: restored state %u, want CLOSE_WAIT", what, ti.tcpi_state);
	CHECK(libsoccr_save(h, &r, sizeof(r)) == (int)sizeof(r) && r.inq_seq == d.inq_seq &&
		      r.outq_seq == d.outq_seq && r.inq_len == d.inq_len,
	      "%s: restored sequence numbers %u/%u (%u bytes), saved %u/%u (%u)", what, r.inq_seq,
	      r.outq_seq, r.inq_len, d.inq_seq, d.outq_seq, d.inq_len);
	CHECK(!libsoccr_resume(h), "%s: resume: %s", what, last_error);
	h = NULL;
	got = read_to_eof(fd, &len);
	CHECK(got && len == sizeof(bye) && !memcmp(got, bye, len),
	      "%s: the restored socket read %zd bytes before end of file, want \"%s\"", what,
	      got ? (ssize_t)len : -1, bye);
	free(got);
	CHECK(write_all(fd, tail, sizeof(tail)) && !shutdown(fd, SHUT_WR), "%s: its write: %s",
	      what, strerror(errno));
	got = read_to_eof(c.server, &len);
	CHECK(got && len == sizeof(tail) && !memcmp(got, tail, len),
	      "%s: the server read %zd bytes, want \"%s\"", what, got ? (ssize_t)len : -1, tail);
	free(got);
out:
	if (h)
		libsoccr_release(h);
	free(inq);
	free(self);
	free(peer);
	if (fd >= 0)
		close(fd);
	if (c.client >= 0)
		close(c.client);
	close(c.server);
}

/* ----------------------------------------------------------------- errors ---- */

/* ret is negative, errno-like, and the library said why (when it says anything). */
static void check_fails(int ret, int want, bool logged, const char *call)
{
	CHECK(ret == -want, "%s returned %d, want %d", call, ret, -want);
	if (logged)
		CHECK(last_error[0], "%s failed without a message", call);
	last_error[0] = 0;
}

static void test_errors(void)
{
	struct libsoccr_sk_data d, good;
	union libsoccr_addr peer;
	struct libsoccr_sk *h;
	struct conn c;
	int fd;

	/* Repair mode refused: a UDP socket, a listening one. */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	errno = 0;
	CHECK(!libsoccr_pause(fd) && errno, "libsoccr_pause of a UDP socket succeeded");
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	loopback(AF_INET, &peer, 0);
	bind(fd, &peer.sa, sizeof(peer.v4));
	listen(fd, 1);
	errno = 0;
	CHECK(!libsoccr_pause(fd) && errno == EPERM,
	      "libsoccr_pause of a listening socket: errno %d, want EPERM", errno);
	close(fd);

	if (make_conn(AF_INET, &c))
		return;
	h = libsoccr_pause(c.client);
	if (!CHECK(h, "libsoccr_pause: %s", strerror(errno)))
		goto out;
	CHECK(libsoccr_save(h, &good, sizeof(good)) == (int)sizeof(good), "libsoccr_save: %s",
	      last_error);
	check_fails(libsoccr_save(h, &d, sizeof(d) - 4), EINVAL, true, "libsoccr_save (short)");
	CHECK(!libsoccr_get_queue_bytes(h, 7, 0), "libsoccr_get_queue_bytes(7) gave bytes");
	check_fails(libsoccr_set_queue_bytes(h, 7, NULL, 0), EINVAL, true,
		    "libsoccr_set_queue_bytes(7)");

	/* The socket taken out of repair mode behind the library's back. */
	CHECK(!set_int(c.client, SOL_TCP, TCP_REPAIR, 0), "TCP_REPAIR off: %s", strerror(errno));
	check_fails(libsoccr_save(h, &d, sizeof(d)), EPERM, true,
		    "libsoccr_save out of repair mode");
	check_fails(libsoccr_save_seqs(h, &d, sizeof(d)), EPERM, true,
		    "libsoccr_save_seqs out of repair mode");
	libsoccr_release(h);

	/* Restores that must be refused, each on a new socket in repair mode. */
	struct {
		const char *what;
		bool peer;
		unsigned size;
		int err;
	} cases[] = {
		{"a listening state", true, sizeof(d), EINVAL},
		{"unsent > queued", true, sizeof(d), EINVAL},
		{"window scale 15", true, sizeof(d), EINVAL},
		{"no peer address", false, sizeof(d), EINVAL},
		{"a short data size", true, sizeof(d) - 1, EINVAL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d = good;
		d.inq_len = d.outq_len = d.unsq_len = 0;
		if (i == 0)
			d.state = TCP_LISTEN;
		if (i == 1)
			d.unsq_len = 1;
		if (i == 2)
			d.snd_wscale = 15;
		fd = socket(AF_INET, SOCK_STREAM, 0);
		h = libsoccr_pause(fd);
		if (!CHECK(h, "a new socket in repair mode: %s", strerror(errno))) {
			close(fd);
			continue;
		}
		loopback(AF_INET, &peer, 9);
		if (cases[i].peer)
			libsoccr_set_addr(h, 0, &peer, 0);
		check_fails(libsoccr_restore(h, &d, cases[i].size), cases[i].err, true,
			    cases[i].what);
		libsoccr_release(h);
		close(fd);
	}
	/* A restore on a socket not in repair mode. */
	d = good;
	d.inq_len = d.outq_len = d.unsq_len = 0;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	h = libsoccr_pause(fd);
	if (CHECK(h, "a new socket in repair mode: %s", strerror(errno))) {
		set_int(fd, SOL_TCP, TCP_REPAIR, 0);
		loopback(AF_INET, &peer, 9);
		libsoccr_set_addr(h, 0, &peer, 0);
		check_fails(libsoccr_restore(h, &d, sizeof(d)), EPERM, true,
			    "a restore out of repair mode");
		libsoccr_release(h);
	}
	close(fd);
	/* Queues announced, no bytes given. */
	d = good;
	d.inq_len = 10;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	h = libsoccr_pause(fd);
	if (CHECK(h, "a new socket in repair mode: %s", strerror(errno))) {
		loopback(AF_INET, &peer, 9);
		libsoccr_set_addr(h, 0, &peer, 0);
		check_fails(libsoccr_restore_queues(h, &d, sizeof(d)), EINVAL, true,
			    "a restore without its queues' bytes");
		libsoccr_release(h);
	}
	close(fd);
out:
	close(c.client);
	close(c.server);
}

int main(void)
{
	if (geteuid()) {
		printf("soccr: needs root (repair mode takes CAP_NET_ADMIN, a forged FIN "
		       "CAP_NET_RAW)\n");
		return 1;
	}
	/* A write to a connection the restore broke fails with EPIPE, which is checked. */
	signal(SIGPIPE, SIG_IGN);
	libsoccr_set_log(SOCCR_LOG_ERR, record_log);
	test_established(AF_INET);
	test_established(AF_INET6);
	test_close_wait(AF_INET);
	test_close_wait(AF_INET6);
	test_errors();
	printf("soccr: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
