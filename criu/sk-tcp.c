/*
 * Established and closing TCP connections (--tcp-established), through the kernel's repair
 * mode (TCP_REPAIR): dump reads the sequence numbers, queues, negotiated options and window
 * into tcp-stream-INODE.img and leaves the socket in repair mode, so that killing the
 * dumped task closes it without a word to the peer. Restore makes the socket in repair
 * mode, where bind() and connect() set the connection up without a packet, puts the
 * queues and options back; criu puts a closing one's FINs back and ends repair mode once
 * the whole tree is restored. Every connection is held by the network lock (net-lock.c)
 * from its dump to its restore, whether its peer is in the tree or not: its own rules in
 * criu's net namespace, the whole namespace where the tree has one of its own.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "sk-inet.h"
#include "sk-opts.h"

/* The kernel's (linux/tcp.h), which glibc's netinet/tcp.h may lack. */
#ifndef TCP_REPAIR_WINDOW
#define TCP_REPAIR_WINDOW 29
#endif
#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif
#define TCP_REPAIR_ON 1
#define TCP_REPAIR_OFF 0

struct repair_window {
	uint32_t snd_wl1, snd_wnd, max_window, rcv_wnd, rcv_wup;
};

/* TCP_INFO's tcpi_options, as tcp_stream_entry.opt_mask keeps them. */
#define OPT_TIMESTAMPS 1
#define OPT_SACK 2
#define OPT_WSCALE 4

/* TCP options of TCP_REPAIR_OPTIONS (the option kinds on the wire). */
#define OPTION_MSS 2
#define OPTION_WINDOW 3
#define OPTION_SACK_PERM 4
#define OPTION_TIMESTAMP 8

/* The kernel's TCP states (include/net/tcp_states.h), as the images store them. */
enum {
	SK_ESTABLISHED = 1,
	SK_SYN_SENT = 2,
	SK_FIN_WAIT1 = 4,
	SK_FIN_WAIT2 = 5,
	SK_CLOSE = 7,
	SK_CLOSE_WAIT = 8,
	SK_LAST_ACK = 9,
	SK_LISTEN = 10,
	SK_CLOSING = 11,
};
#define STATE(s) (1u << (s))

/*
 * How a connection closes, one FIN each way (each FIN takes one sequence number):
 *
 *   ESTABLISHED -shutdown-> FIN_WAIT1 -its ACK-> FIN_WAIT2 -peer's FIN-> (TIME_WAIT)
 *   ESTABLISHED -peer's FIN-> CLOSE_WAIT -shutdown-> LAST_ACK -its ACK-> CLOSE
 *   FIN_WAIT1 -peer's FIN-> CLOSING -its ACK-> (TIME_WAIT)
 *
 * A socket a task holds leaves TIME_WAIT to the kernel and is then CLOSE itself, with
 * both FINs behind it. The images (as CRIU's) keep the queues' lengths without the FINs
 * and their sequence numbers with them.
 */
/* Own FIN queued, before the peer's (or with none) and after it. */
#define OWN_FIN_FIRST (STATE(SK_FIN_WAIT1) | STATE(SK_FIN_WAIT2) | STATE(SK_CLOSING))
#define OWN_FIN_SECOND (STATE(SK_LAST_ACK) | STATE(SK_CLOSE))
#define OWN_FIN (OWN_FIN_FIRST | OWN_FIN_SECOND)
/* ... and the peer acknowledged it. */
#define OWN_FIN_ACKED (STATE(SK_FIN_WAIT2) | STATE(SK_CLOSE))
/* The peer's FIN received. */
#define PEER_FIN (STATE(SK_CLOSE_WAIT) | STATE(SK_LAST_ACK) | STATE(SK_CLOSING) | STATE(SK_CLOSE))
/*
 * Every state a dumped connection may have: connecting (its SYN sent, no answer yet: the
 * network lock keeps the answer away while it is dumped), established, closing.
 */
#define STREAM_STATES (STATE(SK_SYN_SENT) | STATE(SK_ESTABLISHED) | OWN_FIN | PEER_FIN)

static bool in_states(uint32_t state, uint32_t mask)
{
	return state < 32 && (STATE(state) & mask);
}

/* ---------------------------------------------------------------- dump ---- */

/*
 * A dumped connection: criu's copy of its socket, in repair mode until
 * tcp_dump_release(), and its addresses, which its lock names.
 */
struct tcp_conn {
	int fd;
	uint8_t src[16], dst[16]; /* IPv4 as v4-mapped IPv6, as the lock takes them */
	uint16_t src_port, dst_port;
	bool closed; /* --tcp-close: dumped without its stream */
	bool locked; /* its own lock rules hold its packets (criu's net namespace) */
	uint32_t state; /* as its inet entry has it */
	uint32_t ino; /* names its tcp-stream image */
	char what[96];
};

static struct tcp_conn *conns;
static size_t nr_conns;

static int set_int(int fd, int level, int name, const char *opt, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val))) {
		pr_perror("%s: cannot set %s to %d", what, opt, val);
		return -errno;
	}
	return 0;
}

static int get_int(int fd, int level, int name, const char *opt, uint32_t *val,
		   const char *what)
{
	socklen_t len = sizeof(*val);

	if (getsockopt(fd, level, name, val, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	return 0;
}

int tcp_dump_check_state(const struct inet_dump *d)
{
	if (!in_states(d->ie.state, STREAM_STATES)) {
		pr_err("%s: TCP state %u (a connection half made): only connecting (SYN_SENT), "
		       "established and closing connections are dumped\n",
		       d->what, d->ie.state);
		return -ENOTSUP;
	}
	if (!opts.tcp_established && !opts.tcp_close) {
		pr_err("%s: an established TCP connection: dump with --tcp-established\n",
		       d->what);
		return -ENOTSUP;
	}
	return 0;
}

static void conn_addr(uint32_t family, const uint32_t *words, uint8_t *out)
{
	if (family == AF_INET6) {
		memcpy(out, words, 16);
		return;
	}
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, words, 4);
}

static int add_conn(int fd, const struct inet_dump *d)
{
	struct tcp_conn *grown = realloc(conns, (nr_conns + 1) * sizeof(*conns));
	struct tcp_conn *c;

	if (!grown) {
		pr_err("%s: out of memory\n", d->what);
		return -ENOMEM;
	}
	conns = grown;
	c = &conns[nr_conns];
	memset(c, 0, sizeof(*c));
	c->fd = dup(fd);
	if (c->fd < 0) {
		pr_perror("%s: cannot keep a copy of it", d->what);
		return -errno;
	}
	nr_conns++;
	c->closed = !opts.tcp_established;
	c->state = d->ie.state;
	conn_addr(d->ie.family, d->ie.src_addr, c->src);
	conn_addr(d->ie.family, d->ie.dst_addr, c->dst);
	c->src_port = d->ie.src_port;
	c->dst_port = d->ie.dst_port;
	c->ino = d->ie.ino;
	snprintf(c->what, sizeof(c->what), "%s", d->what);
	return 0;
}

/*
 * One queue (TCP_RECV_QUEUE, TCP_SEND_QUEUE) peeked whole into buf (len + 1 bytes), and
 * the sequence number that follows it.
 */
static int peek_queue(int fd, int queue, uint32_t len, uint32_t *seq, char *buf,
		      const char *what)
{
	ssize_t n;
	int ret = set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", queue, what) ?:
			  get_int(fd, SOL_TCP, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ", seq, what);

	if (ret || !len)
		return ret;
	/*
	 * One byte more than the queue has: it must have exactly len (buf has room). Another
	 * length: the queue moved since its length was read (-EAGAIN, not logged: read again).
	 */
	n = recv(fd, buf, len + 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0) {
		pr_perror("%s: cannot read its %s queue", what,
			  queue == TCP_RECV_QUEUE ? "receive" : "send");
		return -errno;
	}
	return n == (ssize_t)len ? 0 : -EAGAIN;
}

/*
 * The send queue's lengths (SIOCOUTQ, SIOCOUTQNSD) count a FIN queued in it, which is no
 * byte: the image's do not (as CRIU's). A closed socket's send queue is nothing a task can
 * read or have sent again (a reset may leave bytes in it): empty, as CRIU keeps it.
 */
static void drop_fin(uint32_t state, int *outq, int *unsent)
{
	/* A connecting socket's send queue holds its SYN alone (one sequence number). */
	if (state == SK_CLOSE || state == SK_SYN_SENT) {
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

static int dump_queue_lengths(const struct tcp_conn *c, TcpStreamEntry *te)
{
	int inq, outq, unsent;

	if (ioctl(c->fd, SIOCINQ, &inq) || ioctl(c->fd, SIOCOUTQ, &outq) ||
	    ioctl(c->fd, SIOCOUTQNSD, &unsent)) {
		pr_perror("%s: cannot read its queues' lengths", c->what);
		return -errno;
	}
	drop_fin(c->state, &outq, &unsent);
	te->inq_len = inq;
	te->outq_len = outq;
	te->has_unsq_len = true;
	te->unsq_len = unsent;
	return 0;
}

/* What the connection negotiated, its timestamp clock and window. */
static int dump_conn_opts(int fd, uint32_t state, TcpStreamEntry *te, const char *what)
{
	struct repair_window win;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	uint32_t val;
	int ret;

	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len)) {
		pr_perror("%s: cannot read TCP_INFO", what);
		return -errno;
	}
	/* Its inet entry, already written, has the state its fd was dumped in. */
	if (ti.tcpi_state != state) {
		pr_err("%s: went from TCP state %u to %u while the tree was dumped\n", what, state,
		       ti.tcpi_state);
		return -EBUSY;
	}
	te->opt_mask = ti.tcpi_options;
	te->snd_wscale = ti.tcpi_snd_wscale;
	te->has_rcv_wscale = true;
	te->rcv_wscale = ti.tcpi_rcv_wscale;
	/* In repair mode TCP_MAXSEG reads the clamp the peer's MSS option set. */
	ret = get_int(fd, SOL_TCP, TCP_MAXSEG, "TCP_MAXSEG", &te->mss_clamp, what);
	if (!ret && (te->opt_mask & OPT_TIMESTAMPS)) {
		ret = get_int(fd, SOL_TCP, TCP_TIMESTAMP, "TCP_TIMESTAMP", &te->timestamp, what);
		te->has_timestamp = true;
	}
	len = sizeof(win);
	if (!ret && getsockopt(fd, SOL_TCP, TCP_REPAIR_WINDOW, &win, &len)) {
		pr_perror("%s: cannot read TCP_REPAIR_WINDOW", what);
		ret = -errno;
	}
	if (ret)
		return ret;
	te->has_snd_wl1 = te->has_snd_wnd = te->has_max_window = true;
	te->has_rcv_wnd = te->has_rcv_wup = true;
	te->snd_wl1 = win.snd_wl1;
	te->snd_wnd = win.snd_wnd;
	te->max_window = win.max_window;
	te->rcv_wnd = win.rcv_wnd;
	te->rcv_wup = win.rcv_wup;
	ret = get_int(fd, SOL_TCP, TCP_NODELAY, "TCP_NODELAY", &val, what);
	te->has_nodelay = te->nodelay = !ret && val;
	if (!ret)
		ret = get_int(fd, SOL_TCP, TCP_CORK, "TCP_CORK", &val, what);
	te->has_cork = te->cork = !ret && val;
	return ret;
}

static int write_stream(uint32_t ino, const TcpStreamEntry *te, const char *inq,
			const char *outq)
{
	struct cr_img *img = open_image(CR_IMG_TCP_STREAM, O_WRONLY, ino);
	int ret;

	if (!img)
		return -EIO;
	ret = pb_write_one(img, te);
	if (!ret && te->inq_len)
		ret = img_write_raw(img, inq, te->inq_len);
	if (!ret && te->outq_len)
		ret = img_write_raw(img, outq, te->outq_len);
	close_image(img);
	return ret;
}

/* ------------------------------------------------------ the network lock ---- */

/*
 * Every connection is locked from its dump to its restore, as CRIU locks them: a peer
 * outside the tree would go on sending to the dumped socket and, the socket gone, get a
 * reset; a peer inside would go on answering the kernel's retransmissions, acknowledging
 * or resetting them (a closed end answers with a reset), so that its end and this one
 * would never stand still at one point of their stream. In criu's own net namespace each
 * connection gets its own rules (netlock_conn(): both ends of a pair in the tree get
 * theirs); a tree's own namespace is locked whole already (netlock_dump_tree(), before
 * any socket was read). Each peer retransmits what the lock dropped once it is back.
 * --network-lock skip: nothing is locked (dump_streams() then waits for the connections
 * to stand still); --tcp-close: a connection restored closed does not care.
 */
static bool needs_own_lock(const struct tcp_conn *c)
{
	return !opts.network_lock_skip && !c->closed && !ns_root_own(NS_NET);
}

static const char *lock_method(void)
{
	return netlock_is_nft() ? "nftables" : "iptables";
}

static int lock_conn(struct tcp_conn *c)
{
	int ret;

	if (!needs_own_lock(c))
		return 0;
	ret = netlock_conn(NETLOCK_ADD, c->src, c->src_port, c->dst, c->dst_port);
	if (ret) {
		pr_err("%s: %s cannot lock the connection: dump with --network-lock skip to dump "
		       "it unlocked\n",
		       c->what, lock_method());
		/* One of its rules may be in. */
		netlock_conn(NETLOCK_DEL, c->src, c->src_port, c->dst, c->dst_port);
		return -ENOTSUP;
	}
	c->locked = true;
	pr_info("%s: locked (%s)\n", c->what, lock_method());
	return 0;
}

static void unlock_conn(struct tcp_conn *c)
{
	if (c->locked && netlock_conn(NETLOCK_DEL, c->src, c->src_port, c->dst, c->dst_port))
		pr_warn("%s: its network lock's rules could not be removed\n", c->what);
	c->locked = false;
}

/*
 * Locked first (where it needs its own lock), then in repair mode, as CRIU does: from the
 * lock on, neither end of the connection hears from the other. Repair mode even with
 * --tcp-close, which restores it closed: killed in repair mode, the socket leaves no
 * orphan behind to hold its port. The stream itself is read once every connection is
 * locked and in repair mode (tcp_dump_check()). On failure the connection stays listed:
 * tcp_dump_release() unlocks it and ends its repair mode with the others'.
 */
int tcp_dump_stream(int fd, struct inet_dump *d)
{
	int ret = add_conn(fd, d);

	if (ret)
		return ret;
	return lock_conn(&conns[nr_conns - 1]) ?:
	       set_int(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_ON, d->what);
}

/* One connection's stream as read, kept until every stream is read at one point. */
struct stream_read {
	TcpStreamEntry te;
	char *inq, *outq;
};

static void free_stream_read(struct stream_read *r)
{
	free(r->inq);
	free(r->outq);
	r->inq = r->outq = NULL;
}

static int read_one_stream(const struct tcp_conn *c, struct stream_read *r)
{
	TcpStreamEntry *te = &r->te;
	int ret;

	tcp_stream_entry__init(te);
	ret = dump_queue_lengths(c, te);
	if (!ret) {
		r->inq = malloc(te->inq_len + 1);
		r->outq = malloc(te->outq_len + 1);
		if (!r->inq || !r->outq) {
			pr_err("%s: out of memory for its queues\n", c->what);
			ret = -ENOMEM;
		}
	}
	if (!ret)
		ret = peek_queue(c->fd, TCP_RECV_QUEUE, te->inq_len, &te->inq_seq, r->inq, c->what);
	if (!ret)
		ret = peek_queue(c->fd, TCP_SEND_QUEUE, te->outq_len, &te->outq_seq, r->outq,
				 c->what);
	if (!ret)
		ret = set_int(c->fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_NO_QUEUE,
			      c->what);
	if (!ret)
		ret = dump_conn_opts(c->fd, c->state, te, c->what);
	return ret;
}

static bool has_stream(const struct tcp_conn *c)
{
	return !c->closed;
}

/* What moves while a connection still carries bytes: its sequence numbers and queues. */
struct conn_motion {
	uint32_t rcv_nxt, write_seq;
	int inq, outq, unsent;
};

static int read_motion(const struct tcp_conn *c, struct conn_motion *m)
{
	/*
	 * An acknowledgement the kernel holds back (delayed ACK, up to 200 ms) would move the
	 * peer's send queue after the streams are read: TCP_QUICKACK sends it now.
	 */
	int ret = set_int(c->fd, SOL_TCP, TCP_QUICKACK, "TCP_QUICKACK", 1, c->what);

	if (ret)
		return ret;
	memset(m, 0, sizeof(*m));
	if (ioctl(c->fd, SIOCINQ, &m->inq) || ioctl(c->fd, SIOCOUTQ, &m->outq) ||
	    ioctl(c->fd, SIOCOUTQNSD, &m->unsent)) {
		pr_perror("%s: cannot read its queues' lengths", c->what);
		return -errno;
	}
	return peek_queue(c->fd, TCP_RECV_QUEUE, 0, &m->rcv_nxt, NULL, c->what) ?:
		       peek_queue(c->fd, TCP_SEND_QUEUE, 0, &m->write_seq, NULL, c->what);
}

/*
 * The tasks are frozen, but the kernel goes on moving their bytes: a connection of the
 * tree sends what its window allows to its peer, which acknowledges it, until the windows
 * are full or the queues empty (repair mode stops none of it). Unlocked (--network-lock
 * skip), the dump waits for every connection to stand still, so that both ends of one are
 * read at the same point of its stream. 2 s at most.
 */
#define SETTLE_STEP_US 5000
#define SETTLE_STEPS 400
#define SETTLE_STILL 3

static int wait_conns_settled(void)
{
	struct conn_motion *last = calloc(nr_conns ? nr_conns : 1, sizeof(*last));
	int ret = last ? 0 : -ENOMEM, step, still = 0;
	bool moved = true;

	/* Still over SETTLE_STILL steps in a row: a loaded machine may hold a packet a step. */
	for (step = 0; !ret && still < SETTLE_STILL && step < SETTLE_STEPS; step++) {
		moved = false;
		for (size_t i = 0; i < nr_conns && !ret; i++) {
			struct conn_motion now;

			if (!has_stream(&conns[i]))
				continue;
			ret = read_motion(&conns[i], &now);
			moved |= step == 0 || memcmp(&now, &last[i], sizeof(now));
			last[i] = now;
		}
		still = moved ? 0 : still + 1;
		if (still < SETTLE_STILL && !ret)
			usleep(SETTLE_STEP_US);
	}
	free(last);
	if (!ret && still < SETTLE_STILL) {
		pr_err("TCP connections of the tree still carry bytes after %d ms: their streams "
		       "cannot be dumped at one point\n",
		       SETTLE_STEPS * SETTLE_STEP_US / 1000);
		ret = -EBUSY;
	}
	if (!ret)
		pr_info("TCP connections still after %d ms\n", step * SETTLE_STEP_US / 1000);
	return ret;
}

/* Whether c reads now as r was read: its sequence numbers and queue lengths. */
static int still_as_read(const struct tcp_conn *c, const struct stream_read *r)
{
	struct conn_motion m;
	int ret = read_motion(c, &m);

	if (ret)
		return ret;
	drop_fin(c->state, &m.outq, &m.unsent);
	return m.rcv_nxt == r->te.inq_seq && m.write_seq == r->te.outq_seq &&
			       (uint32_t)m.inq == r->te.inq_len && (uint32_t)m.outq == r->te.outq_len &&
			       (uint32_t)m.unsent == r->te.unsq_len ?
		       0 :
		       -EAGAIN;
}

/*
 * Every stream read. Under the network lock no segment passes between a connection and
 * its peer any more (what the kernel's timers send, the lock drops): each stream read once
 * is at one point of it, and so are both ends of a pair in the tree. Unlocked
 * (--network-lock skip) the kernel goes on carrying bytes between two such ends, and a
 * retransmission may be answered (acknowledged, or reset by an end already closed): the
 * dump waits for every connection to stand still first, and checks each again after the
 * reads; one that moved meanwhile makes the whole pass start again. -EAGAIN: moved (or a
 * queue changed while it was peeked).
 */
static int read_streams(struct stream_read *reads)
{
	bool unlocked = opts.network_lock_skip;
	int ret = unlocked ? wait_conns_settled() : 0;

	for (size_t i = 0; i < nr_conns && !ret; i++)
		if (has_stream(&conns[i]))
			ret = read_one_stream(&conns[i], &reads[i]);
	for (size_t i = 0; i < nr_conns && !ret && unlocked; i++)
		if (has_stream(&conns[i]))
			ret = still_as_read(&conns[i], &reads[i]);
	return ret;
}

#define READ_STREAMS_TRIES 10

static int dump_streams(void)
{
	struct stream_read *reads;
	int ret = -EAGAIN, tries = 0;
	bool any = false;

	for (size_t i = 0; i < nr_conns; i++)
		any |= has_stream(&conns[i]);
	if (!any)
		return 0;
	reads = calloc(nr_conns, sizeof(*reads));
	if (!reads) {
		pr_err("out of memory for %zu TCP streams\n", nr_conns);
		return -ENOMEM;
	}
	while (ret == -EAGAIN && tries++ < READ_STREAMS_TRIES) {
		for (size_t i = 0; i < nr_conns; i++)
			free_stream_read(&reads[i]);
		ret = read_streams(reads);
	}
	if (ret == -EAGAIN)
		pr_err("TCP connections of the tree kept moving over %d reads of their streams\n",
		       READ_STREAMS_TRIES);
	if (!ret)
		pr_info("TCP streams read at one point in %d passes\n", tries);
	for (size_t i = 0; i < nr_conns && !ret; i++)
		if (has_stream(&conns[i]))
			ret = write_stream(conns[i].ino, &reads[i].te, reads[i].inq, reads[i].outq);
	for (size_t i = 0; i < nr_conns; i++)
		free_stream_read(&reads[i]);
	free(reads);
	return ret;
}

int tcp_dump_check(void)
{
	return dump_streams();
}

void tcp_dump_release(bool killed)
{
	for (size_t i = 0; i < nr_conns; i++) {
		/* A killed tree's connections stay locked until they are restored. */
		if (!killed)
			unlock_conn(&conns[i]);
		if (!killed)
			set_int(conns[i].fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR",
				TCP_REPAIR_OFF_NO_WP, conns[i].what);
		close(conns[i].fd);
	}
	free(conns);
	conns = NULL;
	nr_conns = 0;
}

/*
 * A closing connection takes repair mode (CAP_NET_ADMIN), shutdown() in it, and raw
 * sockets for its FINs (CAP_NET_RAW): what a new socket of criu's lets it do.
 */
bool tcp_has_half_closed(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP), on = TCP_REPAIR_ON;
	int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	bool ok = fd >= 0 && raw >= 0 && !setsockopt(fd, SOL_TCP, TCP_REPAIR, &on, sizeof(on));

	if (fd >= 0)
		close(fd);
	if (raw >= 0)
		close(raw);
	return ok;
}

/* ------------------------------------------------------------- restore ---- */

/* An established connection as collected: its stream entry and queues. */
struct tcp_stream {
	TcpStreamEntry *te;
	uint32_t state; /* its inet entry's */
	char *inq, *outq;
	size_t slot; /* its place in repaired[] */
	struct tcp_stream *next;
};

static struct tcp_stream *streams;
static size_t nr_streams;

/*
 * Where each restored connection is, for criu to end its repair mode once the whole tree
 * is restored: shared with the tasks, which fill it in (tcp_note_repaired()).
 */
struct repaired_sk {
	pid_t pid; /* as the images name the task; 0: not opened (yet) */
	int fd;
	bool reuseaddr; /* repair mode's end clears SO_REUSEADDR */
	char what[64];
};

static struct repaired_sk *repaired;
static void release_taken(void);
/* Main process: the connection of each slot. */
static const struct inet_sk **slot_sks;
/*
 * Main process: the connections restored closed (--tcp-close) that were dumped with their
 * streams, locked from their dump on all the same (unlock_restored()).
 */
static const struct inet_sk **closed_sks;
static size_t nr_closed;

bool tcp_state_restorable(uint32_t state)
{
	return in_states(state, STREAM_STATES);
}

bool tcp_restores_stream(const InetSkEntry *ie)
{
	if (ie->proto != IPPROTO_TCP || ie->type != SOCK_STREAM || ie->state == SK_LISTEN)
		return false;
	/* A closed socket with a peer, dumped with its stream (without: a plain closed one). */
	if (ie->state == SK_CLOSE)
		return ie->n_dst_addr && ie->dst_port && img_exists(CR_IMG_TCP_STREAM, ie->ino);
	return true;
}

/* Restore: the dump was made with --tcp-close (its inventory says). */
static bool dumped_closed;

void tcp_restore_as_dumped_closed(void)
{
	dumped_closed = true;
}

/* --tcp-close (or a dump with it): the connection comes back closed, no stream read. */
static bool restore_closed(void)
{
	return opts.tcp_close || dumped_closed;
}

static int check_stream(const TcpStreamEntry *te, const char *what)
{
	if ((te->has_unsq_len && te->unsq_len > te->outq_len) || te->snd_wscale > 14 ||
	    (te->has_rcv_wscale && te->rcv_wscale > 14) || te->mss_clamp > 0xffff) {
		pr_err("%s: tcp stream: %u unsent bytes of %u queued, window scales %u/%u, MSS "
		       "%u: out of range\n",
		       what, te->unsq_len, te->outq_len, te->snd_wscale, te->rcv_wscale,
		       te->mss_clamp);
		return -EINVAL;
	}
	if (!te->has_snd_wl1 || !te->has_snd_wnd || !te->has_max_window || !te->has_rcv_wnd ||
	    !te->has_rcv_wup) {
		pr_err("%s: tcp stream without its window (TCP_REPAIR_WINDOW): not supported\n",
		       what);
		return -ENOTSUP;
	}
	return 0;
}

static int read_stream(struct cr_img *img, struct tcp_stream *st, const char *what)
{
	off_t left;
	int ret = pb_read_one_required(img, (void **)&st->te);

	if (!ret)
		ret = check_stream(st->te, what);
	if (ret)
		return ret;
	left = img_bytes_left(img);
	if (left < 0 || (uint64_t)left != (uint64_t)st->te->inq_len + st->te->outq_len) {
		pr_err("%s: %s: %lld bytes after the entry, its queues have %u + %u\n", what,
		       img->name, (long long)left, st->te->inq_len, st->te->outq_len);
		return -EINVAL;
	}
	st->inq = malloc(st->te->inq_len + 1);
	st->outq = malloc(st->te->outq_len + 1);
	if (!st->inq || !st->outq) {
		pr_err("%s: out of memory for its queues\n", what);
		return -ENOMEM;
	}
	ret = img_read_raw(img, st->inq, st->te->inq_len);
	return ret ?: img_read_raw(img, st->outq, st->te->outq_len);
}

static int add_slot(const struct inet_sk *sk)
{
	const struct inet_sk **grown = realloc(slot_sks, (nr_streams + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("%s: out of memory\n", sk->what);
		return -ENOMEM;
	}
	slot_sks = grown;
	slot_sks[nr_streams++] = sk;
	return 0;
}

static int add_closed(const struct inet_sk *sk)
{
	const struct inet_sk **grown = realloc(closed_sks, (nr_closed + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("%s: out of memory\n", sk->what);
		return -ENOMEM;
	}
	closed_sks = grown;
	closed_sks[nr_closed++] = sk;
	return 0;
}

int tcp_collect_stream(struct inet_sk *sk)
{
	struct tcp_stream *st;
	struct cr_img *img;
	int ret;

	/* A dump with --tcp-close read no stream and locked nothing. */
	if (restore_closed())
		return img_exists(CR_IMG_TCP_STREAM, sk->ie->ino) ? add_closed(sk) : 0;
	if (!sk->ie->n_dst_addr) {
		pr_err("%s: established without a peer address\n", sk->what);
		return -EINVAL;
	}
	if (!img_exists(CR_IMG_TCP_STREAM, sk->ie->ino)) {
		pr_err("%s: established, but the images have no tcp-stream-%x.img (dumped "
		       "without --tcp-established?): restore with --tcp-close to get it closed\n",
		       sk->what, sk->ie->ino);
		return -ENOENT;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		pr_err("%s: out of memory\n", sk->what);
		return -ENOMEM;
	}
	st->next = streams;
	streams = st;
	st->state = sk->ie->state;
	st->slot = nr_streams;
	ret = add_slot(sk);
	if (ret)
		return ret;
	img = open_image(CR_IMG_TCP_STREAM, O_RDONLY, sk->ie->ino);
	if (!img)
		return -EIO;
	ret = read_stream(img, st, sk->what);
	close_image(img);
	sk->stream = st;
	return ret;
}

/* Before anything is forked: the tasks inherit the table. */
int tcp_collect_done(void)
{
	if (!nr_streams)
		return 0;
	repaired = mmap(NULL, nr_streams * sizeof(*repaired), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (repaired == MAP_FAILED) {
		repaired = NULL;
		pr_perror("cannot map the table of %zu TCP connections", nr_streams);
		return -ENOMEM;
	}
	return 0;
}

void tcp_collect_fini(void)
{
	release_taken();
	if (repaired)
		munmap(repaired, nr_streams * sizeof(*repaired));
	repaired = NULL;
	free(slot_sks);
	slot_sks = NULL;
	nr_streams = 0;
	free(closed_sks);
	closed_sks = NULL;
	nr_closed = 0;
	while (streams) {
		struct tcp_stream *st = streams;

		streams = st->next;
		if (st->te)
			pb_free(NULL, st->te);
		free(st->inq);
		free(st->outq);
		free(st);
	}
}

/*
 * In repair mode the kernel puts a receive-queue write into one linear buffer of the
 * size asked, which a large one fails (ENOMEM): the chunks halve down to 1 KiB.
 */
static int send_bytes(int fd, const char *buf, uint32_t len, const char *queue,
		      const char *what)
{
	uint32_t chunk = len;

	while (len) {
		ssize_t n = send(fd, buf, chunk < len ? chunk : len, 0);

		if (n <= 0 && chunk > 1024) {
			chunk /= 2;
			continue;
		}
		if (n <= 0) {
			pr_perror("%s: cannot refill its %s queue (%u bytes left)", what, queue, len);
			return n < 0 ? -errno : -EIO;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * In repair mode a write to a queue goes into it as is: the receive queue gets the bytes
 * as if they had arrived, the send queue as if sent and not yet acked.
 */
static int fill_queue(int fd, int queue, const char *buf, uint32_t len, const char *what)
{
	return set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", queue, what) ?:
		       send_bytes(fd, buf, len, queue == TCP_RECV_QUEUE ? "receive" : "send",
				  what);
}

/*
 * The images have the sequence numbers that follow each queue (rcv_nxt, write_seq, as
 * TCP_QUEUE_SEQ reads them); a queue is refilled from its first byte's, which refilling
 * moves on by the queue's length. A closing connection is made established, its FINs
 * come at the end of its restore (close_in_repair()): the numbers are those before them.
 */
static uint32_t rcv_nxt_before_fin(const struct tcp_stream *st)
{
	return st->te->inq_seq - in_states(st->state, PEER_FIN);
}

static uint32_t write_seq_before_fin(const struct tcp_stream *st)
{
	return st->te->outq_seq - in_states(st->state, OWN_FIN);
}

static int set_seqs(int fd, const struct tcp_stream *st, const char *what)
{
	const TcpStreamEntry *te = st->te;

	return set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_RECV_QUEUE, what) ?:
		       set_int(fd, SOL_TCP, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ",
			       rcv_nxt_before_fin(st) - te->inq_len, what) ?:
		       set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_SEND_QUEUE,
			       what) ?:
		       set_int(fd, SOL_TCP, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ",
			       write_seq_before_fin(st) - te->outq_len, what);
}

static int connect_repaired(int fd, const struct inet_sk *sk)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_sk_addr(sk->ie, true, &ss);

	if (connect(fd, (struct sockaddr *)&ss, len)) {
		pr_perror("%s: cannot connect it (in repair mode) to port %u", sk->what,
			  sk->ie->dst_port);
		return -errno;
	}
	return 0;
}

/* The options the connection negotiated, then its timestamp clock. */
static int set_conn_opts(int fd, const TcpStreamEntry *te, const char *what)
{
	struct tcp_repair_opt ro[4];
	int n = 0, ret = 0;

	ro[n++] = (struct tcp_repair_opt){ OPTION_MSS, te->mss_clamp };
	if (te->opt_mask & OPT_SACK)
		ro[n++] = (struct tcp_repair_opt){ OPTION_SACK_PERM, 0 };
	if (te->opt_mask & OPT_WSCALE)
		ro[n++] = (struct tcp_repair_opt){ OPTION_WINDOW,
						   te->snd_wscale | te->rcv_wscale << 16 };
	if (te->opt_mask & OPT_TIMESTAMPS)
		ro[n++] = (struct tcp_repair_opt){ OPTION_TIMESTAMP, 0 };
	if (setsockopt(fd, SOL_TCP, TCP_REPAIR_OPTIONS, ro, n * sizeof(ro[0]))) {
		pr_perror("%s: cannot set the connection's options (TCP_REPAIR_OPTIONS)", what);
		return -errno;
	}
	if (te->has_timestamp)
		ret = set_int(fd, SOL_TCP, TCP_TIMESTAMP, "TCP_TIMESTAMP", te->timestamp, what);
	return ret;
}

/*
 * After the queues, whose refilling moves the window on. The peer's FIN is still to come:
 * the window's left edge is one before it (the kernel refuses one past rcv_nxt), and one
 * wider, so that it still takes the FIN where it was full.
 */
static int set_window(int fd, const struct tcp_stream *st, const char *what)
{
	const TcpStreamEntry *te = st->te;
	uint32_t fin = in_states(st->state, PEER_FIN);
	struct repair_window win = { te->snd_wl1, te->snd_wnd, te->max_window, te->rcv_wnd + fin,
				     te->rcv_wup - fin };

	if (setsockopt(fd, SOL_TCP, TCP_REPAIR_WINDOW, &win, sizeof(win))) {
		pr_perror("%s: cannot set its window (TCP_REPAIR_WINDOW)", what);
		return -errno;
	}
	return 0;
}

/*
 * Where the connection's own FIN is not acknowledged yet, the whole send queue goes in as
 * sent: the FIN must follow it, and is put in as sent in repair mode (close_in_repair()).
 * The kernel retransmits what the peer never had.
 */
static uint32_t unsent_len(const struct tcp_stream *st)
{
	if (in_states(st->state, OWN_FIN & ~OWN_FIN_ACKED))
		return 0;
	return st->te->has_unsq_len ? st->te->unsq_len : 0;
}

/*
 * The part of the send queue the peer has seen (or may have) goes in in repair mode; the
 * unsent tail waits for the end of repair mode (send_unsent()). The buffers are as large
 * as they go while the queues are filled (the kernel's accounting of the new queues may
 * exceed what the old ones took); the dumped sizes are set afterwards.
 */
static int fill_queues(int fd, const struct tcp_stream *st, const char *what)
{
	const TcpStreamEntry *te = st->te;

	return sk_opts_widen_sndbuf(fd, what) ?: sk_opts_widen_rcvbuf(fd, what) ?:
		       fill_queue(fd, TCP_RECV_QUEUE, st->inq, te->inq_len, what) ?:
		       fill_queue(fd, TCP_SEND_QUEUE, st->outq, te->outq_len - unsent_len(st),
				  what) ?:
		       set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_NO_QUEUE, what);
}

static int set_stream_opts(int fd, const TcpStreamEntry *te, const char *what)
{
	int ret = 0;

	if (te->has_nodelay && te->nodelay)
		ret = set_int(fd, SOL_TCP, TCP_NODELAY, "TCP_NODELAY", 1, what);
	if (!ret && te->has_cork && te->cork)
		ret = set_int(fd, SOL_TCP, TCP_CORK, "TCP_CORK", 1, what);
	return ret;
}

/*
 * What a connection closed by --tcp-close looks like: no peer, both directions shut
 * (reads give end of file, writes EPIPE). shutdown() of a socket never connected sets
 * both and answers ENOTCONN.
 */
static int open_closed(const struct inet_sk *sk, const struct file_desc *d)
{
	int fd = inet_sk_new(sk);

	if (fd < 0)
		return fd;
	if (shutdown(fd, SHUT_RDWR) && errno != ENOTCONN) {
		pr_perror("%s: cannot shut it down", sk->what);
		close(fd);
		return -errno;
	}
	pr_info("%s: restored closed (--tcp-close)\n", sk->what);
	return restore_status_flags(fd, sk->ie->flags, d);
}

/*
 * A connecting socket (SYN_SENT) has nothing negotiated yet: as CRIU restores it, its
 * initial sequence number (one before the dumped one, which its SYN took) in repair mode,
 * then connect() out of it sends that SYN again (the network lock drops it until the
 * restore's end, then the kernel retransmits it as the dumped socket would have), and back
 * into repair mode. Non-blocking whatever the task's flags (set after, restore_status_flags()):
 * connect() must not wait for an answer.
 */
static int connect_again(int fd, const struct inet_sk *sk)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_sk_addr(sk->ie, true, &ss);
	int flags = fcntl(fd, F_GETFL), ret;

	ret = set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_SEND_QUEUE,
		      sk->what) ?:
	      set_int(fd, SOL_TCP, TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ", sk->stream->te->outq_seq - 1,
		      sk->what) ?:
	      inet_sk_bind(fd, sk, true) ?:
	      set_int(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_OFF_NO_WP, sk->what);
	if (ret)
		return ret;
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) ||
	    (connect(fd, (struct sockaddr *)&ss, len) && errno != EINPROGRESS) ||
	    fcntl(fd, F_SETFL, flags)) {
		pr_perror("%s: cannot connect it again to port %u", sk->what, sk->ie->dst_port);
		return -errno;
	}
	return set_int(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_ON, sk->what) ?:
	       set_stream_opts(fd, sk->stream->te, sk->what);
}

static int open_stream(int fd, const struct inet_sk *sk)
{
	const struct tcp_stream *st = sk->stream;

	return set_seqs(fd, st, sk->what) ?: inet_sk_bind(fd, sk, true) ?:
	       connect_repaired(fd, sk) ?: set_conn_opts(fd, st->te, sk->what) ?:
	       fill_queues(fd, st, sk->what) ?: set_window(fd, st, sk->what) ?:
	       set_stream_opts(fd, st->te, sk->what) ?:
	       /* The buffer sizes as dumped, fill_queues() widened them. */
	       sk_opts_restore(fd, sk->ie->opts, sk->what);
}

/* The socket stays in repair mode until tcp_restore_unlock(). */
int tcp_open_stream(const struct inet_sk *sk, const struct file_desc *d)
{
	int fd, ret;

	if (restore_closed())
		return open_closed(sk, d);
	fd = inet_sk_new(sk);
	if (fd < 0)
		return fd;
	ret = set_int(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_ON, sk->what);
	if (!ret)
		ret = sk->stream->state == SK_SYN_SENT ? connect_again(fd, sk) :
							 open_stream(fd, sk);
	if (ret) {
		close(fd);
		return ret;
	}
	return inet_sk_finish(fd, sk, d);
}

int tcp_note_repaired(const struct inet_sk *sk, int fd, pid_t pid)
{
	struct repaired_sk *r = &repaired[sk->stream->slot];

	r->pid = pid;
	r->fd = fd;
	r->reuseaddr = sk->ie->opts->reuseaddr;
	snprintf(r->what, sizeof(r->what), "%s", sk->what);
	return 0;
}

uint32_t tcp_task_shutdown(const struct inet_sk *sk)
{
	const InetSkEntry *ie = sk->ie;
	uint32_t how = ie->has_shutdown ? ie->shutdown : SK_SHUTDOWN__NONE;

	if (!sk->stream || !in_states(sk->stream->state, OWN_FIN | PEER_FIN))
		return how;
	/* The FINs shut the socket (close_in_repair()); only a receiving side shut by hand. */
	if (in_states(sk->stream->state, PEER_FIN) ||
	    (how != SK_SHUTDOWN__READ && how != SK_SHUTDOWN__BOTH))
		return SK_SHUTDOWN__NONE;
	return SK_SHUTDOWN__READ;
}

/* ------------------------------------------------- closing connections ---- */

/*
 * A closing connection is restored established; at the end of its restore, still in
 * repair mode, it takes its FINs again: its own as shutdown() puts it in the send queue
 * (with TCP_REPAIR_QUEUE on the send queue, it counts as sent and nothing leaves), the
 * peer's, and the acknowledgement of its own, as segments from the peer's address forged
 * on a raw socket of its net namespace (nothing else makes a FIN arrive). As CRIU does;
 * the segments carry no options (the kernel takes them without a timestamp).
 */
#define TH_FIN 0x01
#define TH_ACK 0x10

/* The ones' complement sum of a buffer of network-order 16-bit words (even length). */
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

static bool is_v4_mapped(const uint32_t *words)
{
	return !words[0] && !words[1] && words[2] == htonl(0xffff);
}

/* IPv4 for an AF_INET socket and an AF_INET6 one with v4-mapped addresses. */
static bool speaks_v4(const InetSkEntry *ie)
{
	return ie->family == AF_INET || is_v4_mapped(ie->src_addr);
}

/* A raw socket (IP header included) in the net namespace of the task of pidfd. */
static int raw_socket_in(int pidfd, int family, const char *what)
{
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), fd = -1;

	if (own < 0 || setns(pidfd, CLONE_NEWNET)) {
		pr_perror("%s: cannot enter its net namespace", what);
		if (own >= 0)
			close(own);
		return -errno;
	}
	fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (fd < 0)
		pr_perror("%s: cannot make a raw socket to forge its FINs", what);
	/* Through the network lock, which holds the connection's other segments. */
	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &(int){ NET_LOCK_MARK }, sizeof(int))) {
		pr_perror("%s: cannot mark its forged segments (SO_MARK)", what);
		close(fd);
		fd = -1;
	}
	if (setns(own, CLONE_NEWNET)) {
		pr_perror("cannot go back to criu's own net namespace");
		abort(); /* criu would go on in the tree's namespace */
	}
	close(own);
	return fd < 0 ? -EPERM : fd;
}

/* The window the peer last advertised, as its segments carry it. */
static uint16_t peer_window(const TcpStreamEntry *te)
{
	uint32_t win = te->snd_wnd >> (te->opt_mask & OPT_WSCALE ? te->snd_wscale : 0);

	return htons(win > 0xffff ? 0xffff : win);
}

/* One segment from sk's peer to sk: flags, seq and ack in host order. */
static int forge_segment(int raw, const struct inet_sk *sk, uint8_t flags, uint32_t seq,
			 uint32_t ack)
{
	const InetSkEntry *ie = sk->ie;
	bool v4 = speaks_v4(ie);
	/* The peer's address is the segment's source, the socket's its destination. */
	const uint8_t *from = (const uint8_t *)ie->dst_addr + (v4 && ie->family == AF_INET6 ? 12 : 0);
	const uint8_t *to = (const uint8_t *)ie->src_addr + (v4 && ie->family == AF_INET6 ? 12 : 0);
	size_t alen = v4 ? 4 : 16, hlen = v4 ? sizeof(struct iphdr) : sizeof(struct ip6_hdr);
	uint8_t pkt[sizeof(struct ip6_hdr) + sizeof(struct tcphdr)] = { 0 };
	struct tcphdr *th = (struct tcphdr *)(pkt + hlen);
	struct sockaddr_storage dst = { 0 };
	uint32_t sum;

	th->source = htons(ie->dst_port);
	th->dest = htons(ie->src_port);
	th->seq = htonl(seq);
	th->ack_seq = htonl(ack);
	th->doff = sizeof(*th) / 4;
	th->fin = !!(flags & TH_FIN);
	th->ack = !!(flags & TH_ACK);
	th->window = peer_window(sk->stream->te);
	/* The pseudo-header: addresses, protocol, TCP length. */
	sum = csum_add(0, from, alen);
	sum = csum_add(sum, to, alen);
	sum += htons(IPPROTO_TCP) + htons(sizeof(*th));
	th->check = csum_fold(csum_add(sum, th, sizeof(*th)));
	if (v4) {
		struct iphdr *ip = (struct iphdr *)pkt;
		struct sockaddr_in *sin = (struct sockaddr_in *)&dst;

		/* The kernel fills in the length, id and header checksum. */
		ip->version = 4;
		ip->ihl = sizeof(*ip) / 4;
		ip->ttl = 64;
		ip->protocol = IPPROTO_TCP;
		memcpy(&ip->saddr, from, 4);
		memcpy(&ip->daddr, to, 4);
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, to, 4);
	} else {
		struct ip6_hdr *ip6 = (struct ip6_hdr *)pkt;
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&dst;

		ip6->ip6_flow = htonl(6u << 28);
		ip6->ip6_plen = htons(sizeof(*th));
		ip6->ip6_nxt = IPPROTO_TCP;
		ip6->ip6_hops = 64;
		memcpy(&ip6->ip6_src, from, 16);
		memcpy(&ip6->ip6_dst, to, 16);
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, to, 16);
	}
	if (sendto(raw, pkt, hlen + sizeof(*th), 0, (struct sockaddr *)&dst,
		   v4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0) {
		pr_perror("%s: cannot send it its peer's %s", sk->what, flags & TH_FIN ? "FIN" : "ACK");
		return -errno;
	}
	return 0;
}

/* Its own FIN into its send queue as sent: shutdown() in repair mode, on the send queue. */
static int shut_as_sent(int fd, const char *what)
{
	int ret = set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_SEND_QUEUE, what);

	if (!ret && shutdown(fd, SHUT_WR)) {
		pr_perror("%s: cannot shut it down (repair mode)", what);
		ret = -errno;
	}
	return ret ?: set_int(fd, SOL_TCP, TCP_REPAIR_QUEUE, "TCP_REPAIR_QUEUE", TCP_NO_QUEUE, what);
}

/*
 * The forged segments go through the loopback, which hands them to the socket on its
 * way out of sendto() (softirq): the state is read until it is the dumped one.
 */
#define CLOSE_WAIT_STEP_US 1000
#define CLOSE_WAIT_STEPS 2000

static int expect_state(int fd, uint32_t state, const char *what)
{
	struct tcp_info ti;

	for (int step = 0; step < CLOSE_WAIT_STEPS; step++) {
		socklen_t len = sizeof(ti);

		if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len)) {
			pr_perror("%s: cannot read TCP_INFO", what);
			return -errno;
		}
		if (ti.tcpi_state == state)
			return 0;
		usleep(CLOSE_WAIT_STEP_US);
	}
	pr_err("%s: TCP state %u after its FINs, not %u as dumped\n", what, ti.tcpi_state, state);
	return -EIO;
}

static int forge_fins(int fd, int raw, const struct inet_sk *sk)
{
	const struct tcp_stream *st = sk->stream;
	uint32_t snd_una = write_seq_before_fin(st) - st->te->outq_len;
	int ret = 0;

	if (in_states(st->state, OWN_FIN_FIRST))
		ret = shut_as_sent(fd, sk->what);
	if (!ret && in_states(st->state, PEER_FIN))
		ret = forge_segment(raw, sk, TH_FIN | TH_ACK, rcv_nxt_before_fin(st), snd_una);
	if (!ret && in_states(st->state, OWN_FIN_SECOND))
		ret = shut_as_sent(fd, sk->what);
	if (!ret && in_states(st->state, OWN_FIN_ACKED))
		ret = forge_segment(raw, sk, TH_ACK, st->te->inq_seq, st->te->outq_seq);
	return ret;
}

/*
 * fd, criu's copy of sk, in repair mode, once every socket of the tree is back (the
 * socket acknowledges the peer's FIN). The receive buffer is as wide as it goes while the
 * FIN comes (a full receive queue would drop it), then as dumped.
 */
static int close_in_repair(int fd, int pidfd, const struct inet_sk *sk)
{
	uint32_t state = sk->stream->state;
	int raw = -1, ret = 0;

	if (!in_states(state, OWN_FIN | PEER_FIN))
		return 0;
	if (in_states(state, PEER_FIN | OWN_FIN_ACKED)) {
		raw = raw_socket_in(pidfd, speaks_v4(sk->ie) ? AF_INET : AF_INET6, sk->what);
		if (raw < 0)
			return raw;
	}
	ret = sk_opts_widen_rcvbuf(fd, sk->what) ?: forge_fins(fd, raw, sk) ?:
		expect_state(fd, state, sk->what) ?: sk_opts_restore(fd, sk->ie->opts, sk->what);
	if (raw >= 0)
		close(raw);
	if (!ret)
		pr_info("%s: closing state %u restored\n", sk->what, state);
	return ret;
}

/*
 * Criu's own copy of a restored connection (pidfd_getfd), once every task is restored and
 * before any of them runs, with its FINs given back (close_in_repair()). The fd, or -errno.
 */
static int take_restored(const struct repaired_sk *r, const struct inet_sk *sk)
{
	pid_t pid = pidns_host_pid(r->pid);
	int pidfd = syscall(SYS_pidfd_open, pid, 0), fd = -1, ret = 0;

	if (pidfd >= 0)
		fd = syscall(SYS_pidfd_getfd, pidfd, r->fd, 0);
	if (fd < 0) {
		pr_perror("%s: cannot get it from task %d (fd %d) to end its repair mode", r->what,
			  pid, r->fd);
		ret = -errno;
	}
	if (!ret)
		ret = close_in_repair(fd, pidfd, sk);
	if (pidfd >= 0)
		close(pidfd);
	if (ret && fd >= 0)
		close(fd);
	return ret ? ret : fd;
}

/*
 * Repair mode ends (TCP_REPAIR_OFF) with a window probe, which the peer answers with its
 * window: both ends agree on where the stream is again. The peer must exist by then, or
 * it would answer with a reset, and no lock may hold the probe back.
 */
static int end_repair(int fd, const struct repaired_sk *r)
{
	return set_int(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", TCP_REPAIR_OFF, r->what) ?:
	       set_int(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", r->reuseaddr, r->what);
}

/*
 * The tail of the send queue the task had not sent yet, sent now as the task would have:
 * out of repair mode, once every peer is out of it too. With the largest send buffer while
 * it goes in (the queue fitted the dumped size, the kernel's accounting may differ), then
 * the dumped size.
 */
static int send_unsent(int fd, const struct inet_sk *sk)
{
	const TcpStreamEntry *te = sk->stream->te;
	uint32_t unsent = unsent_len(sk->stream);

	if (!unsent)
		return 0;
	return sk_opts_widen_sndbuf(fd, sk->what) ?:
		       send_bytes(fd, sk->stream->outq + te->outq_len - unsent, unsent, "send",
				  sk->what) ?:
		       sk_opts_restore(fd, sk->ie->opts, sk->what);
}

/*
 * The lock a dump left on a connection (whichever criu dumped it, whether its peer is in
 * the tree or not): its rules go, before it leaves repair mode, so that its window probe
 * reaches the peer. Only in criu's own net namespace, where the dump locks each
 * connection; a connection without rules has nothing to remove.
 */
static void unlock_restored(const struct inet_sk *sk)
{
	uint8_t self[16], peer[16];

	if (opts.network_lock_skip || ns_root_own(NS_NET))
		return;
	conn_addr(sk->ie->family, sk->ie->src_addr, self);
	conn_addr(sk->ie->family, sk->ie->dst_addr, peer);
	/* Each lock of the connection (a dump with -R locks it again each time). */
	for (int i = 0; i < 4; i++) {
		if (netlock_conn(NETLOCK_DEL, self, sk->ie->src_port, peer, sk->ie->dst_port))
			return;
		pr_info("%s: network lock removed\n", sk->what);
	}
}

/* Criu's copies of the restored connections, by slot, from tcp_restore_fins() on; -1: none. */
static int *taken_fds;

static void release_taken(void)
{
	for (size_t i = 0; taken_fds && i < nr_streams; i++)
		if (taken_fds[i] >= 0)
			close(taken_fds[i]);
	free(taken_fds);
	taken_fds = NULL;
}

/*
 * First, under the network lock: the forged FINs are marked to pass the lock, and the
 * lock's ACCEPT of them, first in INPUT, passes them by the namespace's own rules too.
 */
int tcp_restore_fins(void)
{
	int ret = 0;

	taken_fds = malloc((nr_streams ? nr_streams : 1) * sizeof(*taken_fds));
	if (!taken_fds)
		return -ENOMEM;
	for (size_t i = 0; i < nr_streams; i++)
		taken_fds[i] = -1;
	for (size_t i = 0; i < nr_streams && !ret; i++) {
		if (!repaired[i].pid)
			continue;
		taken_fds[i] = take_restored(&repaired[i], slot_sks[i]);
		ret = taken_fds[i] < 0 ? taken_fds[i] : 0;
	}
	if (ret)
		release_taken();
	return ret;
}

/* Then, the namespace unlocked (netlock_restore_unlock()): out of repair mode. */
int tcp_restore_unlock(void)
{
	int ret = 0;
	size_t i;

	for (i = 0; i < nr_streams; i++)
		if (repaired[i].pid)
			unlock_restored(slot_sks[i]);
	for (i = 0; i < nr_closed; i++)
		unlock_restored(closed_sks[i]);
	/* Unless every one ends repair mode, the restore fails: the tasks never run. */
	for (i = 0; taken_fds && i < nr_streams && !ret; i++)
		if (taken_fds[i] >= 0)
			ret = end_repair(taken_fds[i], &repaired[i]);
	for (i = 0; taken_fds && i < nr_streams && !ret; i++)
		if (taken_fds[i] >= 0)
			ret = send_unsent(taken_fds[i], slot_sks[i]);
	release_taken();
	if (!ret && nr_streams)
		pr_info("%zu TCP connections out of repair mode\n", nr_streams);
	return ret;
}
