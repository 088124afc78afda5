/*
 * libsoccr (soccr.h): a TCP connection saved and restored through the kernel's repair
 * mode. Only the socket calls live here; where the saved state is kept, how the network
 * is held still, and what is logged where are the caller's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* netinet/tcp.h's TCP states, struct tcphdr's flag bits */
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "soccr.h"

/* The kernel's (linux/tcp.h), which an older glibc's netinet/tcp.h may lack. */
#ifndef TCP_REPAIR_WINDOW
#define TCP_REPAIR_WINDOW 29
#endif
#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif
#define REPAIR_ON  1
#define REPAIR_OFF 0

struct repair_window {
	uint32_t snd_wl1, snd_wnd, max_window, rcv_wnd, rcv_wup;
};

/* The option kinds TCP_REPAIR_OPTIONS takes (their kinds on the wire). */
#define OPTION_MSS	 2
#define OPTION_WINDOW	 3
#define OPTION_SACK_PERM 4
#define OPTION_TIMESTAMP 8

#define STATE(s) (1u << (s))
/*
 * How a connection closes, one FIN each way (each takes one sequence number):
 *
 *   ESTABLISHED -shutdown-> FIN_WAIT1 -its ACK-> FIN_WAIT2 -peer's FIN-> (TIME_WAIT)
 *   ESTABLISHED -peer's FIN-> CLOSE_WAIT -shutdown-> LAST_ACK -its ACK-> CLOSE
 *   FIN_WAIT1 -peer's FIN-> CLOSING -its ACK-> (TIME_WAIT)
 *
 * A socket still held leaves TIME_WAIT to the kernel and is CLOSE itself, both FINs done.
 */
/* Its own FIN queued, before the peer's (or with none), and after it. */
#define OWN_FIN_FIRST  (STATE(TCP_FIN_WAIT1) | STATE(TCP_FIN_WAIT2) | STATE(TCP_CLOSING))
#define OWN_FIN_SECOND (STATE(TCP_LAST_ACK) | STATE(TCP_CLOSE))
#define OWN_FIN	       (OWN_FIN_FIRST | OWN_FIN_SECOND)
/* ... and the peer acknowledged it. */
#define OWN_FIN_ACKED (STATE(TCP_FIN_WAIT2) | STATE(TCP_CLOSE))
/* The peer's FIN received. */
#define PEER_FIN                                                                                   \
	(STATE(TCP_CLOSE_WAIT) | STATE(TCP_LAST_ACK) | STATE(TCP_CLOSING) | STATE(TCP_CLOSE))
/* What the library saves and restores: connecting, established, closing. */
#define KNOWN_STATES (STATE(TCP_SYN_SENT) | STATE(TCP_ESTABLISHED) | OWN_FIN | PEER_FIN)

static bool in_states(uint32_t state, uint32_t mask)
{
	return state < 32 && (STATE(state) & mask);
}

/* Queue ids (TCP_RECV_QUEUE, TCP_SEND_QUEUE) as indexes of the handle's arrays. */
#define NR_QUEUES	2
#define QUEUE_INDEX(id) ((id)-TCP_RECV_QUEUE)

struct libsoccr_sk {
	int fd;
	char *queue[NR_QUEUES];
	bool owns_queue[NR_QUEUES];
	union libsoccr_addr *addr[2]; /* [0] the peer's, [1] its own */
	bool owns_addr[2];
	char label[64];
};

/* ---------------------------------------------------------------- logging ---- */

static unsigned int log_level;
static void (*log_fn)(unsigned int level, const char *fmt, ...);

void libsoccr_set_log(unsigned int level, void (*fn)(unsigned int level, const char *fmt, ...))
{
	log_level = level;
	log_fn = fn;
}

#define sk_log(lvl, sk, fmt, ...)                                                                  \
	do {                                                                                       \
		if (log_fn && log_level >= (lvl))                                                  \
			log_fn((lvl), "%s: " fmt "\n", (sk)->label, ##__VA_ARGS__);                \
	} while (0)
#define sk_err(sk, fmt, ...)   sk_log(SOCCR_LOG_ERR, sk, fmt, ##__VA_ARGS__)
#define sk_debug(sk, fmt, ...) sk_log(SOCCR_LOG_DBG, sk, fmt, ##__VA_ARGS__)
/* Logs a failed call with errno's text; -errno (saved before the log function runs). */
#define sk_perror(sk, fmt, ...)                                                                    \
	({                                                                                         \
		int err_ = errno;                                                                  \
		sk_err(sk, fmt ": %s", ##__VA_ARGS__, strerror(err_));                             \
		-err_;                                                                             \
	})

/* ---------------------------------------------------------------- helpers ---- */

static int set_tcp(struct libsoccr_sk *sk, int name, const char *opt, int val)
{
	if (setsockopt(sk->fd, SOL_TCP, name, &val, sizeof(val)))
		return sk_perror(sk, "cannot set %s to %d", opt, val);
	return 0;
}

static int get_tcp(struct libsoccr_sk *sk, int name, const char *opt, uint32_t *val)
{
	socklen_t len = sizeof(*val);

	if (getsockopt(sk->fd, SOL_TCP, name, val, &len))
		return sk_perror(sk, "cannot read %s", opt);
	return 0;
}

static int select_queue(struct libsoccr_sk *sk, int queue)
{
	return set_tcp(sk, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", queue);
}

static const char *queue_name(int queue)
{
	return queue == TCP_RECV_QUEUE ? "receive" : "send";
}

static int check_size(struct libsoccr_sk *sk, unsigned data_size)
{
	if (data_size < sizeof(struct libsoccr_sk_data)) {
		sk_err(sk, "data of %u bytes, the library's is %zu", data_size,
		       sizeof(struct libsoccr_sk_data));
		return -EINVAL;
	}
	return 0;
}

static void drop_queue(struct libsoccr_sk *sk, int index)
{
	if (sk->owns_queue[index])
		free(sk->queue[index]);
	sk->queue[index] = NULL;
	sk->owns_queue[index] = false;
}

static void drop_addr(struct libsoccr_sk *sk, int self)
{
	if (sk->owns_addr[self])
		free(sk->addr[self]);
	sk->addr[self] = NULL;
	sk->owns_addr[self] = false;
}

static void free_handle(struct libsoccr_sk *sk)
{
	for (int i = 0; i < NR_QUEUES; i++)
		drop_queue(sk, i);
	drop_addr(sk, 0);
	drop_addr(sk, 1);
	free(sk);
}

/* ------------------------------------------------------------ repair mode ---- */

struct libsoccr_sk *libsoccr_pause(int fd)
{
	struct libsoccr_sk *sk = calloc(1, sizeof(*sk));
	int ret;

	if (!sk) {
		errno = ENOMEM;
		return NULL;
	}
	sk->fd = fd;
	snprintf(sk->label, sizeof(sk->label), "socket fd %d", fd);
	/* Not logged: the caller knows what the socket is (errno says why). */
	ret = setsockopt(fd, SOL_TCP, TCP_REPAIR, &(int){REPAIR_ON}, sizeof(int));
	if (ret) {
		ret = errno;
		free(sk);
		errno = ret;
		return NULL;
	}
	return sk;
}

void libsoccr_set_label(struct libsoccr_sk *sk, const char *label)
{
	snprintf(sk->label, sizeof(sk->label), "%s", label);
}

int libsoccr_resume(struct libsoccr_sk *sk)
{
	int ret = set_tcp(sk, TCP_REPAIR, "TCP_REPAIR", REPAIR_OFF);

	free_handle(sk);
	return ret;
}

int libsoccr_resume_no_probe(struct libsoccr_sk *sk)
{
	int ret = set_tcp(sk, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_OFF_NO_WP);

	free_handle(sk);
	return ret;
}

void libsoccr_release(struct libsoccr_sk *sk)
{
	free_handle(sk);
}

/* ----------------------------------------------------------------- saving ---- */

/*
 * The send queue's lengths (SIOCOUTQ, SIOCOUTQNSD) count a FIN queued in it, which is no
 * byte. A closed socket's send queue is nothing anyone can read or send again (a reset
 * may leave bytes in it): empty. A connecting socket's holds its SYN alone.
 */
static void drop_fin(uint32_t state, int *outq, int *unsent)
{
	if (state == TCP_CLOSE || state == TCP_SYN_SENT) {
		*outq = *unsent = 0;
		return;
	}
	if (!in_states(state, OWN_FIN))
		return;
	if (*outq)
		(*outq)--;
	if (*unsent)
		(*unsent)--;
}

static int read_tcp_info(struct libsoccr_sk *sk, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	if (getsockopt(sk->fd, SOL_TCP, TCP_INFO, ti, &len))
		return sk_perror(sk, "cannot read TCP_INFO");
	return 0;
}

/* The state, queue lengths without FINs. */
static int read_lengths(struct libsoccr_sk *sk, const struct tcp_info *ti,
			struct libsoccr_sk_data *data)
{
	int inq, outq, unsent;

	if (!in_states(ti->tcpi_state, KNOWN_STATES)) {
		sk_err(sk,
		       "TCP state %u: only connecting, established and closing connections "
		       "are saved",
		       ti->tcpi_state);
		return -EINVAL;
	}
	if (ioctl(sk->fd, SIOCINQ, &inq) || ioctl(sk->fd, SIOCOUTQ, &outq) ||
	    ioctl(sk->fd, SIOCOUTQNSD, &unsent))
		return sk_perror(sk, "cannot read its queues' lengths");
	data->state = ti->tcpi_state;
	drop_fin(data->state, &outq, &unsent);
	data->inq_len = inq;
	data->outq_len = outq;
	data->unsq_len = unsent;
	return 0;
}

/*
 * One queue's sequence number (the one after it) and, with buf (len + 1 bytes), its
 * bytes, peeked. One byte more is asked than the queue should have: another length means
 * it moved since its length was read (-EAGAIN, not logged).
 */
static int peek_queue(struct libsoccr_sk *sk, int queue, uint32_t len, uint32_t *seq, char *buf)
{
	ssize_t n;
	int ret = select_queue(sk, queue) ?: get_tcp(sk, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ", seq);

	if (ret || !buf || !len)
		return ret;
	n = recv(sk->fd, buf, len + 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return sk_perror(sk, "cannot read its %s queue", queue_name(queue));
	return n == (ssize_t)len ? 0 : -EAGAIN;
}

static int read_queues(struct libsoccr_sk *sk, struct libsoccr_sk_data *data, bool bytes)
{
	char *buf[NR_QUEUES] = {NULL, NULL};
	int ret = 0;

	if (bytes) {
		buf[0] = malloc(data->inq_len + 1);
		buf[1] = malloc(data->outq_len + 1);
		if (!buf[0] || !buf[1]) {
			sk_err(sk, "out of memory for its queues (%u and %u bytes)", data->inq_len,
			       data->outq_len);
			ret = -ENOMEM;
		}
	}
	if (!ret)
		ret = peek_queue(sk, TCP_RECV_QUEUE, data->inq_len, &data->inq_seq, buf[0]) ?:
			      peek_queue(sk, TCP_SEND_QUEUE, data->outq_len, &data->outq_seq,
					 buf[1]) ?:
			      select_queue(sk, TCP_NO_QUEUE);
	for (int i = 0; i < NR_QUEUES; i++) {
		if (ret || !bytes) {
			free(buf[i]);
			continue;
		}
		drop_queue(sk, i);
		sk->queue[i] = buf[i];
		sk->owns_queue[i] = true;
	}
	return ret;
}

/* What the connection negotiated, its timestamp clock and its window. */
static int read_options(struct libsoccr_sk *sk, const struct tcp_info *ti,
			struct libsoccr_sk_data *data)
{
	struct repair_window win;
	socklen_t len = sizeof(win);
	int ret;

	data->opt_mask = ti->tcpi_options;
	data->snd_wscale = ti->tcpi_snd_wscale;
	data->rcv_wscale = ti->tcpi_rcv_wscale;
	/* In repair mode TCP_MAXSEG reads the clamp the peer's MSS option set. */
	ret = get_tcp(sk, TCP_MAXSEG, "TCP_MAXSEG", &data->mss_clamp);
	if (!ret && (data->opt_mask & TCPI_OPT_TIMESTAMPS)) {
		ret = get_tcp(sk, TCP_TIMESTAMP, "TCP_TIMESTAMP", &data->timestamp);
		data->flags |= SOCCR_FLAGS_TIMESTAMP;
	}
	if (ret)
		return ret;
	if (getsockopt(sk->fd, SOL_TCP, TCP_REPAIR_WINDOW, &win, &len))
		return sk_perror(sk, "cannot read TCP_REPAIR_WINDOW");
	data->flags |= SOCCR_FLAGS_WINDOW;
	data->snd_wl1 = win.snd_wl1;
	data->snd_wnd = win.snd_wnd;
	data->max_window = win.max_window;
	data->rcv_wnd = win.rcv_wnd;
	data->rcv_wup = win.rcv_wup;
	return 0;
}

int libsoccr_save(struct libsoccr_sk *sk, struct libsoccr_sk_data *data, unsigned data_size)
{
	struct tcp_info ti;
	int ret = check_size(sk, data_size);

	if (ret)
		return ret;
	memset(data, 0, sizeof(*data));
	ret = read_tcp_info(sk, &ti) ?: read_lengths(sk, &ti, data) ?:
	      read_queues(sk, data, true) ?: read_options(sk, &ti, data);
	if (!ret)
		sk_debug(sk, "saved: state %u, queues %u (seq %u) and %u (seq %u, %u unsent)",
			 data->state, data->inq_len, data->inq_seq, data->outq_len, data->outq_seq,
			 data->unsq_len);
	return ret ?: (int)sizeof(*data);
}

int libsoccr_save_seqs(struct libsoccr_sk *sk, struct libsoccr_sk_data *data, unsigned data_size)
{
	struct tcp_info ti;
	int ret = check_size(sk, data_size);

	if (ret)
		return ret;
	memset(data, 0, sizeof(*data));
	ret = read_tcp_info(sk, &ti) ?: read_lengths(sk, &ti, data) ?: read_queues(sk, data, false);
	return ret ?: (int)sizeof(*data);
}

char *libsoccr_get_queue_bytes(struct libsoccr_sk *sk, int queue_id, unsigned flags)
{
	char *buf;

	if (queue_id != TCP_RECV_QUEUE && queue_id != TCP_SEND_QUEUE)
		return NULL;
	buf = sk->queue[QUEUE_INDEX(queue_id)];
	if (buf && (flags & SOCCR_MEM_EXCL)) {
		if (!sk->owns_queue[QUEUE_INDEX(queue_id)])
			return NULL; /* the caller's own buffer: it has it already */
		sk->queue[QUEUE_INDEX(queue_id)] = NULL;
		sk->owns_queue[QUEUE_INDEX(queue_id)] = false;
	}
	return buf;
}

union libsoccr_addr *libsoccr_get_addr(struct libsoccr_sk *sk, int self, unsigned flags)
{
	union libsoccr_addr *addr = calloc(1, sizeof(*addr));
	socklen_t len = sizeof(*addr);
	int ret;

	self = !!self;
	if (!addr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = self ? getsockname(sk->fd, &addr->sa, &len) : getpeername(sk->fd, &addr->sa, &len);
	if (ret) {
		ret = sk_perror(sk, "cannot read its %s address", self ? "own" : "peer's");
		free(addr);
		errno = -ret;
		return NULL;
	}
	if (flags & SOCCR_MEM_EXCL)
		return addr;
	drop_addr(sk, self);
	sk->addr[self] = addr;
	sk->owns_addr[self] = true;
	return addr;
}

/* -------------------------------------------------------------- restoring ---- */

int libsoccr_set_queue_bytes(struct libsoccr_sk *sk, int queue_id, char *bytes, unsigned flags)
{
	if (queue_id != TCP_RECV_QUEUE && queue_id != TCP_SEND_QUEUE) {
		sk_err(sk, "no queue %d to set", queue_id);
		return -EINVAL;
	}
	drop_queue(sk, QUEUE_INDEX(queue_id));
	sk->queue[QUEUE_INDEX(queue_id)] = bytes;
	sk->owns_queue[QUEUE_INDEX(queue_id)] = flags & SOCCR_MEM_EXCL;
	return 0;
}

int libsoccr_set_addr(struct libsoccr_sk *sk, int self, union libsoccr_addr *addr, unsigned flags)
{
	self = !!self;
	if (!addr || (addr->sa.sa_family != AF_INET && addr->sa.sa_family != AF_INET6)) {
		sk_err(sk, "its %s address is not an IPv4 or IPv6 one", self ? "own" : "peer's");
		return -EINVAL;
	}
	drop_addr(sk, self);
	sk->addr[self] = addr;
	sk->owns_addr[self] = flags & SOCCR_MEM_EXCL;
	return 0;
}

static socklen_t addr_len(const union libsoccr_addr *addr)
{
	return addr->sa.sa_family == AF_INET ? sizeof(addr->v4) : sizeof(addr->v6);
}

/* Whether data can be restored; with queues, whether the handle has its queues' bytes. */
static int check_data(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
		      unsigned data_size, bool queues)
{
	int ret = check_size(sk, data_size);

	if (ret)
		return ret;
	if (!in_states(data->state, KNOWN_STATES)) {
		sk_err(sk,
		       "TCP state %u: only connecting, established and closing connections "
		       "are restored",
		       data->state);
		return -EINVAL;
	}
	if (data->unsq_len > data->outq_len || data->snd_wscale > 14 || data->rcv_wscale > 14 ||
	    data->mss_clamp > 0xffff) {
		sk_err(sk,
		       "%u unsent bytes of %u queued, window scales %u/%u, MSS %u: out of "
		       "range",
		       data->unsq_len, data->outq_len, data->snd_wscale, data->rcv_wscale,
		       data->mss_clamp);
		return -EINVAL;
	}
	if (!sk->addr[0]) {
		sk_err(sk, "no peer address to connect to (libsoccr_set_addr())");
		return -EINVAL;
	}
	if (queues && ((data->inq_len && !sk->queue[0]) || (data->outq_len && !sk->queue[1]))) {
		sk_err(sk, "no bytes for its queues (libsoccr_set_queue_bytes())");
		return -EINVAL;
	}
	return 0;
}

/*
 * Sequence numbers before the FINs: a closing connection is made established, and gets
 * its FINs at the end (libsoccr_restore_fins()).
 */
static uint32_t rcv_nxt_before_fin(const struct libsoccr_sk_data *data)
{
	return data->inq_seq - in_states(data->state, PEER_FIN);
}

static uint32_t write_seq_before_fin(const struct libsoccr_sk_data *data)
{
	return data->outq_seq - in_states(data->state, OWN_FIN);
}

static int bind_self(struct libsoccr_sk *sk)
{
	const union libsoccr_addr *self = sk->addr[1];

	if (self && bind(sk->fd, &self->sa, addr_len(self)))
		return sk_perror(sk, "cannot bind it");
	return 0;
}

/* A queue is refilled from its first byte's sequence number; the writes move it on. */
static int set_seqs(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data)
{
	return select_queue(sk, TCP_RECV_QUEUE) ?:
		       set_tcp(sk, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ",
			       rcv_nxt_before_fin(data) - data->inq_len) ?:
		       select_queue(sk, TCP_SEND_QUEUE) ?:
		       set_tcp(sk, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ",
			       write_seq_before_fin(data) - data->outq_len);
}

static int connect_peer(struct libsoccr_sk *sk)
{
	const union libsoccr_addr *peer = sk->addr[0];

	if (connect(sk->fd, &peer->sa, addr_len(peer)))
		return sk_perror(sk, "cannot connect it (in repair mode)");
	return 0;
}

/* The options the connection negotiated, then its timestamp clock. */
static int set_options(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data)
{
	struct tcp_repair_opt ro[4];
	int n = 0;

	ro[n++] = (struct tcp_repair_opt){OPTION_MSS, data->mss_clamp};
	if (data->opt_mask & TCPI_OPT_SACK)
		ro[n++] = (struct tcp_repair_opt){OPTION_SACK_PERM, 0};
	if (data->opt_mask & TCPI_OPT_WSCALE)
		ro[n++] = (struct tcp_repair_opt){OPTION_WINDOW,
						  data->snd_wscale | data->rcv_wscale << 16};
	if (data->opt_mask & TCPI_OPT_TIMESTAMPS)
		ro[n++] = (struct tcp_repair_opt){OPTION_TIMESTAMP, 0};
	if (setsockopt(sk->fd, SOL_TCP, TCP_REPAIR_OPTIONS, ro, n * sizeof(ro[0])))
		return sk_perror(sk, "cannot set the connection's options (TCP_REPAIR_OPTIONS)");
	if (data->flags & SOCCR_FLAGS_TIMESTAMP)
		return set_tcp(sk, TCP_TIMESTAMP, "TCP_TIMESTAMP", data->timestamp);
	return 0;
}

/*
 * A connecting socket has nothing negotiated yet: its initial sequence number (one before
 * the saved one, which its SYN took) in repair mode, then connect() out of it sends that
 * SYN again, non-blocking (it must not wait for an answer), and back into repair mode.
 */
static int connect_again(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data)
{
	const union libsoccr_addr *peer = sk->addr[0];
	int flags = fcntl(sk->fd, F_GETFL);
	int ret = select_queue(sk, TCP_SEND_QUEUE) ?:
		  set_tcp(sk, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ", data->outq_seq - 1) ?: bind_self(sk) ?:
		  set_tcp(sk, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_OFF_NO_WP);

	if (ret)
		return ret;
	if (flags < 0 || fcntl(sk->fd, F_SETFL, flags | O_NONBLOCK) ||
	    (connect(sk->fd, &peer->sa, addr_len(peer)) && errno != EINPROGRESS) ||
	    fcntl(sk->fd, F_SETFL, flags))
		return sk_perror(sk, "cannot connect it again");
	return set_tcp(sk, TCP_REPAIR, "TCP_REPAIR", REPAIR_ON);
}

int libsoccr_restore_open(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			  unsigned data_size)
{
	int ret = check_data(sk, data, data_size, false);

	if (ret)
		return ret;
	if (data->state == TCP_SYN_SENT)
		return connect_again(sk, data);
	return set_seqs(sk, data) ?: bind_self(sk) ?: connect_peer(sk) ?: set_options(sk, data);
}

/*
 * In repair mode the kernel puts a write to the receive queue into one linear buffer of
 * the size asked, which a large one fails (ENOMEM): the chunks halve down to 1 KiB.
 */
static int write_queue(struct libsoccr_sk *sk, int queue, const char *buf, uint32_t len)
{
	uint32_t chunk = len;
	int ret = select_queue(sk, queue);

	while (!ret && len) {
		ssize_t n = send(sk->fd, buf, chunk < len ? chunk : len, 0);

		if (n <= 0 && chunk > 1024) {
			chunk /= 2;
			continue;
		}
		if (n < 0)
			return sk_perror(sk, "cannot refill its %s queue (%u bytes left)",
					 queue_name(queue), len);
		if (n == 0) {
			sk_err(sk, "cannot refill its %s queue (%u bytes left): nothing taken",
			       queue_name(queue), len);
			return -EIO;
		}
		buf += n;
		len -= n;
	}
	return ret;
}

uint32_t libsoccr_unsent_len(const struct libsoccr_sk_data *data)
{
	if (in_states(data->state, OWN_FIN & ~OWN_FIN_ACKED))
		return 0;
	return data->unsq_len;
}

/*
 * After the queues, whose refilling moves the window on. The peer's FIN is still to come
 * for a closing connection: the window's left edge is one before it (the kernel refuses
 * one past rcv_nxt), and one wider, so that it still takes the FIN where it was full.
 */
static int set_window(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data)
{
	uint32_t fin = in_states(data->state, PEER_FIN);
	struct repair_window win = {data->snd_wl1, data->snd_wnd, data->max_window,
				    data->rcv_wnd + fin, data->rcv_wup - fin};

	if (!(data->flags & SOCCR_FLAGS_WINDOW))
		return 0;
	if (setsockopt(sk->fd, SOL_TCP, TCP_REPAIR_WINDOW, &win, sizeof(win)))
		return sk_perror(sk, "cannot set its window (TCP_REPAIR_WINDOW)");
	return 0;
}

int libsoccr_restore_queues(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			    unsigned data_size)
{
	int ret = check_data(sk, data, data_size, true);

	if (ret || data->state == TCP_SYN_SENT)
		return ret;
	/* In repair mode a queue takes writes as they are: received, or sent and unacked. */
	return write_queue(sk, TCP_RECV_QUEUE, sk->queue[0], data->inq_len) ?:
		       write_queue(sk, TCP_SEND_QUEUE, sk->queue[1],
				   data->outq_len - libsoccr_unsent_len(data)) ?:
		       select_queue(sk, TCP_NO_QUEUE) ?: set_window(sk, data);
}

int libsoccr_restore(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
		     unsigned data_size)
{
	return libsoccr_restore_open(sk, data, data_size)
		       ?: libsoccr_restore_queues(sk, data, data_size);
}

/* ------------------------------------------------------------------- FINs ---- */

#define TH_FIN 0x01
#define TH_ACK 0x10

/* The ones' complement sum of network-order 16-bit words (len even). */
static uint32_t csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i += 2) {
		uint16_t word;

		memcpy(&word, p + i, 2);
		sum += word;
	}
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* IPv4 for an AF_INET address and an AF_INET6 one that maps an IPv4 address. */
static bool speaks_v4(const union libsoccr_addr *addr)
{
	return addr->sa.sa_family == AF_INET || IN6_IS_ADDR_V4MAPPED(&addr->v6.sin6_addr);
}

static const uint8_t *addr_bytes(const union libsoccr_addr *addr, bool v4)
{
	if (addr->sa.sa_family == AF_INET)
		return (const uint8_t *)&addr->v4.sin_addr;
	return addr->v6.sin6_addr.s6_addr + (v4 ? 12 : 0);
}

static uint16_t addr_port(const union libsoccr_addr *addr)
{
	return addr->sa.sa_family == AF_INET ? addr->v4.sin_port : addr->v6.sin6_port;
}

/* The window the peer last advertised, as its segments carry it. */
static uint16_t peer_window(const struct libsoccr_sk_data *data)
{
	uint32_t win = data->snd_wnd >> (data->opt_mask & TCPI_OPT_WSCALE ? data->snd_wscale : 0);

	return htons(win > 0xffff ? 0xffff : win);
}

/*
 * One segment from the peer to the socket, without options (the kernel takes it without
 * a timestamp): flags, seq and ack in host order.
 */
static int forge_segment(struct libsoccr_sk *sk, int raw, const struct libsoccr_sk_data *data,
			 uint8_t flags, uint32_t seq, uint32_t ack)
{
	const union libsoccr_addr *self = sk->addr[1], *peer = sk->addr[0];
	bool v4 = speaks_v4(self);
	/* The peer's address is the segment's source, the socket's its destination. */
	const uint8_t *from = addr_bytes(peer, v4), *to = addr_bytes(self, v4);
	size_t alen = v4 ? 4 : 16, hlen = v4 ? sizeof(struct iphdr) : sizeof(struct ip6_hdr);
	uint8_t pkt[sizeof(struct ip6_hdr) + sizeof(struct tcphdr)] = {0};
	struct tcphdr *th = (struct tcphdr *)(pkt + hlen);
	union libsoccr_addr dst;
	uint32_t sum;

	memset(&dst, 0, sizeof(dst));
	th->source = addr_port(peer);
	th->dest = addr_port(self);
	th->seq = htonl(seq);
	th->ack_seq = htonl(ack);
	th->doff = sizeof(*th) / 4;
	th->fin = !!(flags & TH_FIN);
	th->ack = !!(flags & TH_ACK);
	th->window = peer_window(data);
	/* The pseudo-header: addresses, protocol, TCP length. */
	sum = csum_add(0, from, alen);
	sum = csum_add(sum, to, alen);
	sum += htons(IPPROTO_TCP) + htons(sizeof(*th));
	th->check = csum_fold(csum_add(sum, th, sizeof(*th)));
	if (v4) {
		struct iphdr *ip = (struct iphdr *)pkt;

		/* The kernel fills in the length, id and header checksum. */
		ip->version = 4;
		ip->ihl = sizeof(*ip) / 4;
		ip->ttl = 64;
		ip->protocol = IPPROTO_TCP;
		memcpy(&ip->saddr, from, 4);
		memcpy(&ip->daddr, to, 4);
		dst.v4.sin_family = AF_INET;
		memcpy(&dst.v4.sin_addr, to, 4);
	} else {
		struct ip6_hdr *ip6 = (struct ip6_hdr *)pkt;

		ip6->ip6_flow = htonl(6u << 28);
		ip6->ip6_plen = htons(sizeof(*th));
		ip6->ip6_nxt = IPPROTO_TCP;
		ip6->ip6_hops = 64;
		memcpy(&ip6->ip6_src, from, 16);
		memcpy(&ip6->ip6_dst, to, 16);
		dst.v6.sin6_family = AF_INET6;
		memcpy(&dst.v6.sin6_addr, to, 16);
	}
	if (sendto(raw, pkt, hlen + sizeof(*th), 0, &dst.sa, addr_len(&dst)) < 0)
		return sk_perror(sk, "cannot send it its peer's %s",
				 flags & TH_FIN ? "FIN" : "ACK");
	return 0;
}

/* Its own FIN into its send queue as sent: shutdown() in repair mode, on the send queue. */
static int shut_as_sent(struct libsoccr_sk *sk)
{
	int ret = select_queue(sk, TCP_SEND_QUEUE);

	if (!ret && shutdown(sk->fd, SHUT_WR))
		ret = sk_perror(sk, "cannot shut it down (repair mode)");
	return ret ?: select_queue(sk, TCP_NO_QUEUE);
}

/*
 * The forged segments reach the socket on their way out of sendto() (the loopback hands
 * them to the stack in a softirq): the state is read until it is the saved one.
 */
#define STATE_WAIT_STEP_NS 1000000
#define STATE_WAIT_STEPS   2000

static int expect_state(struct libsoccr_sk *sk, uint32_t state)
{
	struct timespec step = {0, STATE_WAIT_STEP_NS};
	struct tcp_info ti;

	for (int i = 0; i < STATE_WAIT_STEPS; i++) {
		int ret = read_tcp_info(sk, &ti);

		if (ret)
			return ret;
		if (ti.tcpi_state == state)
			return 0;
		nanosleep(&step, NULL);
	}
	sk_err(sk, "TCP state %u after its FINs, not %u as saved", ti.tcpi_state, state);
	return -EIO;
}

static int raw_socket(struct libsoccr_sk *sk, int family)
{
	int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW), mark = SOCCR_MARK;

	if (fd < 0)
		return sk_perror(sk, "cannot make a raw socket to forge its FINs");
	if (setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark))) {
		int ret = sk_perror(sk, "cannot mark its forged segments (SO_MARK)");

		close(fd);
		return ret;
	}
	return fd;
}

static int give_fins(struct libsoccr_sk *sk, int raw, const struct libsoccr_sk_data *data)
{
	uint32_t snd_una = write_seq_before_fin(data) - data->outq_len;
	int ret = 0;

	if (in_states(data->state, OWN_FIN_FIRST))
		ret = shut_as_sent(sk);
	if (!ret && in_states(data->state, PEER_FIN))
		ret = forge_segment(sk, raw, data, TH_FIN | TH_ACK, rcv_nxt_before_fin(data),
				    snd_una);
	if (!ret && in_states(data->state, OWN_FIN_SECOND))
		ret = shut_as_sent(sk);
	if (!ret && in_states(data->state, OWN_FIN_ACKED))
		ret = forge_segment(sk, raw, data, TH_ACK, data->inq_seq, data->outq_seq);
	return ret;
}

int libsoccr_restore_fins(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			  unsigned data_size)
{
	int raw = -1, ret = check_data(sk, data, data_size, false);

	if (ret || !in_states(data->state, OWN_FIN | PEER_FIN))
		return ret;
	if (in_states(data->state, PEER_FIN | OWN_FIN_ACKED)) {
		if (!sk->addr[1]) {
			sk_err(sk, "no address of its own to forge its peer's segments to");
			return -EINVAL;
		}
		raw = raw_socket(sk, speaks_v4(sk->addr[1]) ? AF_INET : AF_INET6);
		if (raw < 0)
			return raw;
	}
	ret = give_fins(sk, raw, data) ?: expect_state(sk, data->state);
	if (raw >= 0)
		close(raw);
	if (!ret)
		sk_debug(sk, "closing state %u restored", data->state);
	return ret;
}
