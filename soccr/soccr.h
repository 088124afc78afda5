/*
 * libsoccr: saving and restoring a TCP connection through the kernel's repair mode
 * (TCP_REPAIR, Linux 4.8 or later), independent of criu: the caller keeps the saved state
 * wherever it likes and gives it back on a new socket. The API names follow CRIU's libsoccr.
 */
#ifndef LIBSOCCR_H
#define LIBSOCCR_H

#include <netinet/in.h>
/* TCP_RECV_QUEUE, TCP_SEND_QUEUE, TCP states, TCPI_OPT_*: glibc's _DEFAULT_SOURCE names. */
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The mark (SO_MARK) of the segments the library forges (libsoccr_restore_fins()): a
 * network lock that drops a connection's packets lets those with this mark through.
 */
#define SOCCR_MARK 0xC114

/* ---- logging ---------------------------------------------------------------------- */

#define SOCCR_LOG_ERR 1
#define SOCCR_LOG_DBG 2

/*
 * Where the library's messages go: fn is called with a level and a printf format whose
 * text ends with a newline; messages above level are not made. Without a call (or with
 * fn NULL) the library says nothing and only returns its errors. Process-wide, not
 * thread-safe: set it once before the other calls.
 */
void libsoccr_set_log(unsigned int level, void (*fn)(unsigned int level, const char *fmt, ...));

/* ---- the handle and the saved state ----------------------------------------------- */

/* One socket in repair mode, from libsoccr_pause() to libsoccr_resume() or _release(). */
struct libsoccr_sk;

union libsoccr_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/*
 * A connection as libsoccr_save() reads it and libsoccr_restore() takes it. Every field
 * is in host order.
 */
struct libsoccr_sk_data {
	uint32_t state; /* TCP_ESTABLISHED, TCP_FIN_WAIT1, ... (netinet/tcp.h) */
	/* Receive queue: its length, and the sequence number after it (rcv_nxt). */
	uint32_t inq_len;
	uint32_t inq_seq;
	/* Send queue: its length (sent and unsent), the sequence number after it (write_seq). */
	uint32_t outq_len;
	uint32_t outq_seq;
	uint32_t unsq_len;   /* the tail of the send queue never sent */
	uint32_t opt_mask;   /* TCPI_OPT_TIMESTAMPS, TCPI_OPT_SACK, TCPI_OPT_WSCALE */
	uint32_t mss_clamp;  /* the MSS the peer announced */
	uint32_t snd_wscale; /* the peer's window scale */
	uint32_t rcv_wscale; /* this end's */
	uint32_t timestamp;  /* the timestamp clock (TCP_TIMESTAMP), with SOCCR_FLAGS_TIMESTAMP */
	uint32_t flags;	     /* SOCCR_FLAGS_* below: which of the optional fields hold values */
	/* The window (TCP_REPAIR_WINDOW), with SOCCR_FLAGS_WINDOW. */
	uint32_t snd_wl1;
	uint32_t snd_wnd;
	uint32_t max_window;
	uint32_t rcv_wnd;
	uint32_t rcv_wup;
};

/* snd_wl1, snd_wnd, max_window, rcv_wnd and rcv_wup hold the window. */
#define SOCCR_FLAGS_WINDOW 0x1
/* timestamp holds the timestamp clock (the connection uses timestamps). */
#define SOCCR_FLAGS_TIMESTAMP 0x2

/*
 * Queue lengths and sequence numbers of a connection that is closing count no FIN: a FIN
 * takes a sequence number but is no byte of a queue. inq_seq and outq_seq include the
 * FINs already received and queued; inq_len, outq_len and unsq_len do not. A connecting
 * socket (TCP_SYN_SENT) has empty queues and outq_seq one past its SYN; a closed one
 * (TCP_CLOSE) an empty send queue.
 */

/* Memory handed over with a call: the receiver owns it and frees it with free(). */
#define SOCCR_MEM_EXCL 0x1

/* ---- repair mode ------------------------------------------------------------------ */

/*
 * Puts fd, a TCP socket, into repair mode: from now on nothing the caller does to it
 * (connect, writes to its queues, close) sends a packet. On a socket already in repair
 * mode it takes the socket as it is. The handle, or NULL with errno set (EPERM without
 * CAP_NET_ADMIN, ENOMEM), and nothing logged. The handle does not own fd: the caller
 * closes it.
 *
 * Before a connection is saved or restored, no packet of it may come in or go out (a
 * firewall rule that drops its packets, or a link that is down), or the saved state and
 * the peer's would part.
 */
struct libsoccr_sk *libsoccr_pause(int fd);

/*
 * Names the socket in the library's messages (copied, 63 characters at most); by
 * default "socket fd N".
 */
void libsoccr_set_label(struct libsoccr_sk *sk, const char *label);

/*
 * Takes the socket out of repair mode with a window probe, which the peer answers with
 * its window, so that both ends agree on the stream again (the peer must be there and
 * no lock may drop the probe), and frees the handle and the memory it owns. 0, or
 * -errno (the handle is freed all the same).
 */
int libsoccr_resume(struct libsoccr_sk *sk);

/*
 * As libsoccr_resume(), without the window probe (TCP_REPAIR_OFF_NO_WP): for a socket
 * that was only saved and goes on where it was.
 */
int libsoccr_resume_no_probe(struct libsoccr_sk *sk);

/*
 * Frees the handle and the memory it owns; the socket stays in repair mode, so that
 * closing it sends nothing to the peer.
 */
void libsoccr_release(struct libsoccr_sk *sk);

/* ---- saving ----------------------------------------------------------------------- */

/*
 * Reads the connection into data (data_size: sizeof(*data)): its state, queues (their
 * bytes are kept by the handle, libsoccr_get_queue_bytes()), sequence numbers,
 * negotiated options, timestamp clock and window. The socket must be in repair mode and
 * be connecting, established or closing. Returns sizeof(*data), -EAGAIN where a queue
 * changed while it was read (nothing logged: the caller reads again), or another -errno.
 */
int libsoccr_save(struct libsoccr_sk *sk, struct libsoccr_sk_data *data, unsigned data_size);

/*
 * The cheap part of libsoccr_save(): state, queue lengths and sequence numbers only, the
 * other fields zero. Comparing two reads tells whether the connection moved in between.
 * Returns sizeof(*data) or -errno.
 */
int libsoccr_save_seqs(struct libsoccr_sk *sk, struct libsoccr_sk_data *data, unsigned data_size);

/*
 * The bytes of a queue (TCP_RECV_QUEUE: data->inq_len of them; TCP_SEND_QUEUE:
 * data->outq_len) as the last libsoccr_save() read them, or NULL (another queue, none
 * read). With SOCCR_MEM_EXCL the caller takes the buffer and frees it; without, the
 * handle keeps it until it is freed.
 */
char *libsoccr_get_queue_bytes(struct libsoccr_sk *sk, int queue_id, unsigned flags);

/*
 * The socket's own address (self non-zero, getsockname()) or its peer's (getpeername()),
 * or NULL with errno set. With SOCCR_MEM_EXCL the caller frees it; without, the handle
 * does.
 */
union libsoccr_addr *libsoccr_get_addr(struct libsoccr_sk *sk, int self, unsigned flags);

/* ---- restoring -------------------------------------------------------------------- */

/*
 * Restoring, on a new socket of the saved connection's family:
 *
 *	sk = libsoccr_pause(socket(family, SOCK_STREAM, IPPROTO_TCP));
 *	libsoccr_set_addr(sk, 1, &self, 0);
 *	libsoccr_set_addr(sk, 0, &peer, 0);
 *	libsoccr_set_queue_bytes(sk, TCP_RECV_QUEUE, inq, 0);
 *	libsoccr_set_queue_bytes(sk, TCP_SEND_QUEUE, outq, 0);
 *	libsoccr_restore(sk, &data, sizeof(data));
 *	libsoccr_restore_fins(sk, &data, sizeof(data));   (a closing connection)
 *	libsoccr_resume(sk);                               (once the peer can answer)
 *	send(fd, outq + data.outq_len - libsoccr_unsent_len(&data), ...)
 *
 * A closing connection is restored established, its FINs put back by
 * libsoccr_restore_fins(); the unsent tail of the send queue is the caller's to send
 * once the socket is out of repair mode.
 */

/*
 * The buffer restore fills a queue from (TCP_RECV_QUEUE, TCP_SEND_QUEUE), as long as the
 * data given to the restore says. It must live until the restore; with SOCCR_MEM_EXCL the
 * handle takes it and frees it. 0 or -EINVAL (another queue).
 */
int libsoccr_set_queue_bytes(struct libsoccr_sk *sk, int queue_id, char *bytes, unsigned flags);

/*
 * The address the socket binds to (self non-zero; without one it binds to none) or
 * connects to (the peer; required), as for libsoccr_set_queue_bytes(). 0 or -EINVAL.
 */
int libsoccr_set_addr(struct libsoccr_sk *sk, int self, union libsoccr_addr *addr, unsigned flags);

/*
 * The first part of libsoccr_restore(): the sequence numbers, bind and connect (no
 * packet), the negotiated options and the timestamp clock. A connecting socket
 * (TCP_SYN_SENT) is connected out of repair mode instead, with its initial sequence
 * number, non-blocking: its SYN goes out again (a lock should drop it until the restore
 * is over: the kernel sends it again), then it is back in repair mode; nothing else is
 * left to restore. Between the two parts a caller may change the socket's buffers,
 * which the kernel sizes the window from at connect. 0 or -errno: EINVAL for data out
 * of range, a state the library does not restore, or a missing peer address or queue.
 */
int libsoccr_restore_open(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			  unsigned data_size);

/*
 * The second part: the receive queue as received, the send queue as sent and not yet
 * acknowledged, except its unsent tail (libsoccr_unsent_len()), then the window. 0 or
 * -errno.
 */
int libsoccr_restore_queues(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			    unsigned data_size);

/* Both parts. 0 or -errno. */
int libsoccr_restore(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
		     unsigned data_size);

/*
 * How many bytes at the end of the send queue the restore left out, for the caller to
 * send after libsoccr_resume(): data->unsq_len, but none where the connection's own FIN
 * is queued and not acknowledged (the FIN must follow every byte, so all go in as sent;
 * the kernel retransmits what the peer never had).
 */
uint32_t libsoccr_unsent_len(const struct libsoccr_sk_data *data);

/*
 * The FINs of a closing connection (and the acknowledgement of its own FIN), in the
 * order its state took them, once libsoccr_restore() is done and while it is still in
 * repair mode: its own by shutdown() counted as sent, the peer's as segments from the
 * peer's address forged on a raw socket (marked SOCCR_MARK) made in the calling thread's
 * net namespace, which must be the socket's (CAP_NET_RAW). The loopback hands them over
 * while they are sent; the state is then read until it is data->state (2 s at most).
 * Nothing for a connection that is not closing. 0 or -errno.
 */
int libsoccr_restore_fins(struct libsoccr_sk *sk, const struct libsoccr_sk_data *data,
			  unsigned data_size);

#ifdef __cplusplus
}
#endif

#endif /* LIBSOCCR_H */
