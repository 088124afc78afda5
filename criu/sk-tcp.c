/*
 * Established and closing TCP connections (--tcp-established), through the kernel's repair
 * mode, whose socket calls are libsoccr's (soccr/): dump saves the sequence numbers,
 * queues, negotiated options and window into tcp-stream-INODE.img and leaves the socket in
 * repair mode, so that killing the dumped task closes it without a word to the peer.
 * Restore makes the socket in repair mode, where bind() and connect() set the connection
 * up without a packet, puts the queues and options back; criu puts a closing one's FINs
 * back and ends repair mode once the whole tree is restored. Every connection is held by
 * the network lock (net-lock.c) from its dump to its restore, whether its peer is in the
 * tree or not: its own rules in criu's net namespace, the whole namespace where the tree
 * has one of its own. What stays here: the images, the lock, when each step runs, and the
 * waiting for connections to stand still.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "sk-inet.h"
#include "sk-opts.h"
#include "soccr/soccr.h"

/* The lock lets criu's forged segments through: libsoccr marks them with its mark. */
_Static_assert(NET_LOCK_MARK == SOCCR_MARK, "the network lock's mark is libsoccr's");

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
 * A closing connection has sent its own FIN, received its peer's, or both (soccr.c draws
 * the states). The images (as CRIU's, and as libsoccr's data) keep the queues' lengths
 * without the FINs and their sequence numbers with them.
 */
#define OWN_FIN                                                                                    \
	(STATE(SK_FIN_WAIT1) | STATE(SK_FIN_WAIT2) | STATE(SK_CLOSING) | STATE(SK_LAST_ACK) |      \
	 STATE(SK_CLOSE))
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

/* ------------------------------------------------------------ libsoccr ---- */

/* libsoccr's messages, into criu's log: its errors as errors, the rest as debug. */
static void soccr_log(unsigned int level, const char *fmt, ...)
{
	char line[512];
	va_list args;

	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	if (level == SOCCR_LOG_ERR)
		print_on_level(LOG_ERROR, "Error (soccr): %s", line);
	else
		print_on_level(LOG_DEBUG, "soccr: %s", line);
}

/* Before the first libsoccr call of a dump or a restore; the tasks inherit it. */
static void soccr_log_init(void)
{
	libsoccr_set_log(SOCCR_LOG_DBG, soccr_log);
}

/* fd in repair mode, named what in libsoccr's messages; NULL after one error line. */
static struct libsoccr_sk *repair_on(int fd, const char *what)
{
	struct libsoccr_sk *h = libsoccr_pause(fd);

	if (!h) {
		pr_perror("%s: cannot put it into TCP repair mode", what);
		return NULL;
	}
	libsoccr_set_label(h, what);
	return h;
}

/* ---------------------------------------------------------------- dump ---- */

/*
 * A dumped connection: criu's copy of its socket, in repair mode until
 * tcp_dump_release(), and its addresses, which its lock names.
 */
struct tcp_conn {
	int fd;
	struct libsoccr_sk *soccr; /* from repair mode on */
	uint8_t src[16], dst[16];  /* IPv4 as v4-mapped IPv6, as the lock takes them */
	uint16_t src_port, dst_port;
	bool closed;	/* --tcp-close: dumped without its stream */
	bool locked;	/* its own lock rules hold its packets (criu's net namespace) */
	uint32_t state; /* as its inet entry has it */
	uint32_t ino;	/* names its tcp-stream image */
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

static int get_int(int fd, int level, int name, const char *opt, uint32_t *val, const char *what)
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
		pr_err("%s: an established TCP connection: dump with --tcp-established\n", d->what);
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

/* What libsoccr saved, as the image keeps it (every field CRIU's dump writes). */
static void stream_entry(const struct libsoccr_sk_data *data, TcpStreamEntry *te)
{
	te->inq_len = data->inq_len;
	te->inq_seq = data->inq_seq;
	te->outq_len = data->outq_len;
	te->outq_seq = data->outq_seq;
	te->has_unsq_len = true;
	te->unsq_len = data->unsq_len;
	te->opt_mask = data->opt_mask;
	te->snd_wscale = data->snd_wscale;
	te->has_rcv_wscale = true;
	te->rcv_wscale = data->rcv_wscale;
	te->mss_clamp = data->mss_clamp;
	te->has_timestamp = data->flags & SOCCR_FLAGS_TIMESTAMP;
	te->timestamp = data->timestamp;
	te->has_snd_wl1 = te->has_snd_wnd = te->has_max_window = true;
	te->has_rcv_wnd = te->has_rcv_wup = true;
	te->snd_wl1 = data->snd_wl1;
	te->snd_wnd = data->snd_wnd;
	te->max_window = data->max_window;
	te->rcv_wnd = data->rcv_wnd;
	te->rcv_wup = data->rcv_wup;
}

static int write_stream(uint32_t ino, const TcpStreamEntry *te, const char *inq, const char *outq)
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
	struct tcp_conn *c;
	int ret = add_conn(fd, d);

	if (ret)
		return ret;
	c = &conns[nr_conns - 1];
	ret = lock_conn(c);
	if (ret)
		return ret;
	soccr_log_init();
	c->soccr = repair_on(c->fd, c->what);
	return c->soccr ? 0 : -EPERM;
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

/* Its stream saved by libsoccr (-EAGAIN: a queue moved while it was read), its options. */
static int read_one_stream(const struct tcp_conn *c, struct stream_read *r)
{
	struct libsoccr_sk_data data;
	TcpStreamEntry *te = &r->te;
	uint32_t val;
	int ret = libsoccr_save(c->soccr, &data, sizeof(data));

	if (ret < 0)
		return ret;
	/* Its inet entry, already written, has the state its fd was dumped in. */
	if (data.state != c->state) {
		pr_err("%s: went from TCP state %u to %u while the tree was dumped\n", c->what,
		       c->state, data.state);
		return -EBUSY;
	}
	tcp_stream_entry__init(te);
	stream_entry(&data, te);
	r->inq = libsoccr_get_queue_bytes(c->soccr, TCP_RECV_QUEUE, SOCCR_MEM_EXCL);
	r->outq = libsoccr_get_queue_bytes(c->soccr, TCP_SEND_QUEUE, SOCCR_MEM_EXCL);
	ret = get_int(c->fd, SOL_TCP, TCP_NODELAY, "TCP_NODELAY", &val, c->what);
	te->has_nodelay = te->nodelay = !ret && val;
	if (!ret)
		ret = get_int(c->fd, SOL_TCP, TCP_CORK, "TCP_CORK", &val, c->what);
	te->has_cork = te->cork = !ret && val;
	return ret;
}

static bool has_stream(const struct tcp_conn *c)
{
	return !c->closed;
}

/*
 * What moves while a connection still carries bytes: its state, sequence numbers and
 * queue lengths (libsoccr_save_seqs(), every other field zero).
 */
static int read_motion(const struct tcp_conn *c, struct libsoccr_sk_data *m)
{
	/*
	 * An acknowledgement the kernel holds back (delayed ACK, up to 200 ms) would move the
	 * peer's send queue after the streams are read: TCP_QUICKACK sends it now.
	 */
	int ret = set_int(c->fd, SOL_TCP, TCP_QUICKACK, "TCP_QUICKACK", 1, c->what);

	if (ret)
		return ret;
	ret = libsoccr_save_seqs(c->soccr, m, sizeof(*m));
	return ret < 0 ? ret : 0;
}

/*
 * The tasks are frozen, but the kernel goes on moving their bytes: a connection of the
 * tree sends what its window allows to its peer, which acknowledges it, until the windows
 * are full or the queues empty (repair mode stops none of it). Unlocked (--network-lock
 * skip), the dump waits for every connection to stand still, so that both ends of one are
 * read at the same point of its stream. 2 s at most.
 */
#define SETTLE_STEP_US 5000
#define SETTLE_STEPS   400
#define SETTLE_STILL   3

static int wait_conns_settled(void)
{
	struct libsoccr_sk_data *last = calloc(nr_conns ? nr_conns : 1, sizeof(*last));
	int ret = last ? 0 : -ENOMEM, step, still = 0;
	bool moved = true;

	/* Still over SETTLE_STILL steps in a row: a loaded machine may hold a packet a step. */
	for (step = 0; !ret && still < SETTLE_STILL && step < SETTLE_STEPS; step++) {
		moved = false;
		for (size_t i = 0; i < nr_conns && !ret; i++) {
			struct libsoccr_sk_data now;

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
	struct libsoccr_sk_data m;
	int ret = read_motion(c, &m);

	if (ret)
		return ret;
	return m.inq_seq == r->te.inq_seq && m.outq_seq == r->te.outq_seq &&
			       m.inq_len == r->te.inq_len && m.outq_len == r->te.outq_len &&
			       m.unsq_len == r->te.unsq_len
		       ? 0
		       : -EAGAIN;
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
		/* Killed, it keeps repair mode: closing it sends nothing. */
		if (conns[i].soccr && !killed)
			libsoccr_resume_no_probe(conns[i].soccr);
		else if (conns[i].soccr)
			libsoccr_release(conns[i].soccr);
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
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	struct libsoccr_sk *h = fd >= 0 && raw >= 0 ? libsoccr_pause(fd) : NULL;
	bool ok = h != NULL;

	if (h)
		libsoccr_release(h);
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
 * A stream entry as libsoccr restores it. The state is the inet entry's (the image has
 * none); the window is there (check_stream()).
 */
static void stream_data(const struct tcp_stream *st, struct libsoccr_sk_data *data)
{
	const TcpStreamEntry *te = st->te;

	memset(data, 0, sizeof(*data));
	data->state = st->state;
	data->inq_len = te->inq_len;
	data->inq_seq = te->inq_seq;
	data->outq_len = te->outq_len;
	data->outq_seq = te->outq_seq;
	data->unsq_len = te->has_unsq_len ? te->unsq_len : 0;
	data->opt_mask = te->opt_mask;
	data->mss_clamp = te->mss_clamp;
	data->snd_wscale = te->snd_wscale;
	data->rcv_wscale = te->rcv_wscale;
	if (te->has_timestamp) {
		data->flags |= SOCCR_FLAGS_TIMESTAMP;
		data->timestamp = te->timestamp;
	}
	data->flags |= SOCCR_FLAGS_WINDOW;
	data->snd_wl1 = te->snd_wl1;
	data->snd_wnd = te->snd_wnd;
	data->max_window = te->max_window;
	data->rcv_wnd = te->rcv_wnd;
	data->rcv_wup = te->rcv_wup;
}

/* One of sk's dumped addresses, for libsoccr (which frees it); NULL: out of memory. */
static union libsoccr_addr *soccr_addr(const struct inet_sk *sk, bool peer)
{
	union libsoccr_addr *addr = calloc(1, sizeof(*addr));
	struct sockaddr_storage ss;
	socklen_t len = inet_sk_addr(sk->ie, peer, &ss);

	if (addr)
		memcpy(addr, &ss, len < sizeof(*addr) ? len : sizeof(*addr));
	return addr;
}

/*
 * The address the socket connects to and the one it binds to: the dumped ones (where the
 * dumped socket had none of its own, it binds to none and forges nothing).
 */
static int set_addrs(struct libsoccr_sk *h, const struct inet_sk *sk)
{
	bool bound = inet_sk_bound(sk->ie);
	union libsoccr_addr *peer = soccr_addr(sk, true);
	union libsoccr_addr *self = bound ? soccr_addr(sk, false) : NULL;
	int ret;

	if (!peer || (bound && !self)) {
		pr_err("%s: out of memory\n", sk->what);
		free(peer);
		free(self);
		return -ENOMEM;
	}
	ret = libsoccr_set_addr(h, 0, peer, SOCCR_MEM_EXCL);
	if (ret)
		free(peer);
	if (!ret && self) {
		ret = libsoccr_set_addr(h, 1, self, SOCCR_MEM_EXCL);
		if (ret)
			free(self);
	} else {
		free(self);
	}
	return ret;
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
 * libsoccr connects the socket (no packet), sets the negotiated options and the timestamp
 * clock, then refills the queues: the receive queue as received, the part of the send
 * queue the peer has seen (or may have) as sent; the unsent tail waits for the end of
 * repair mode (send_unsent()); then the window. A closing connection is made established,
 * its FINs come at the end of the restore (close_in_repair()). The buffers are as large
 * as they go while the queues are filled (the kernel's accounting of the new queues may
 * exceed what the old ones took), after connect, which sizes the window from them; the
 * dumped sizes are set afterwards.
 *
 * A connecting socket (SYN_SENT) has nothing negotiated yet: libsoccr gives it its
 * initial sequence number and connects it out of repair mode, which sends its SYN again
 * (the network lock drops it until the restore's end, then the kernel retransmits it as
 * the dumped socket would have), non-blocking whatever the task's flags (set after,
 * restore_status_flags()), and puts it back into repair mode.
 */
static int open_stream(struct libsoccr_sk *h, int fd, const struct inet_sk *sk)
{
	const struct tcp_stream *st = sk->stream;
	struct libsoccr_sk_data data;
	int ret;

	stream_data(st, &data);
	ret = set_addrs(h, sk) ?: libsoccr_set_queue_bytes(h, TCP_RECV_QUEUE, st->inq, 0) ?:
	      libsoccr_set_queue_bytes(h, TCP_SEND_QUEUE, st->outq, 0) ?:
	      libsoccr_restore_open(h, &data, sizeof(data));
	if (ret || st->state == SK_SYN_SENT)
		return ret ?: set_stream_opts(fd, st->te, sk->what);
	return sk_opts_widen_sndbuf(fd, sk->what) ?: sk_opts_widen_rcvbuf(fd, sk->what) ?:
	       libsoccr_restore_queues(h, &data, sizeof(data)) ?:
	       set_stream_opts(fd, st->te, sk->what) ?:
	       /* The buffer sizes as dumped, widened above. */
	       sk_opts_restore(fd, sk->ie->opts, sk->what);
}

/* The socket stays in repair mode until tcp_restore_unlock(). */
int tcp_open_stream(const struct inet_sk *sk, const struct file_desc *d)
{
	struct libsoccr_sk *h;
	int fd, ret;

	if (restore_closed())
		return open_closed(sk, d);
	fd = inet_sk_new(sk);
	if (fd < 0)
		return fd;
	h = repair_on(fd, sk->what);
	ret = h ? open_stream(h, fd, sk) : -EPERM;
	/* The handle goes, the socket stays in repair mode. */
	if (h)
		libsoccr_release(h);
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
 * repair mode, it takes its FINs again (libsoccr_restore_fins()): its own as shutdown()
 * puts it in the send queue (counted as sent: nothing leaves), the peer's, and the
 * acknowledgement of its own, as segments from the peer's address forged on a raw socket
 * of its net namespace (nothing else makes a FIN arrive), marked to pass the network
 * lock. As CRIU does.
 *
 * fd, criu's copy of sk, in repair mode, once every socket of the tree is back (the
 * socket acknowledges the peer's FIN). The receive buffer is as wide as it goes while the
 * FIN comes (a full receive queue would drop it), then as dumped. criu enters the task's
 * net namespace (through pidfd) for the raw socket libsoccr makes there.
 */
static int close_in_repair(struct libsoccr_sk *h, int fd, int pidfd, const struct inet_sk *sk)
{
	uint32_t state = sk->stream->state;
	struct libsoccr_sk_data data;
	int own, ret;

	if (!in_states(state, OWN_FIN | PEER_FIN))
		return 0;
	stream_data(sk->stream, &data);
	ret = sk_opts_widen_rcvbuf(fd, sk->what);
	if (ret)
		return ret;
	own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0 || setns(pidfd, CLONE_NEWNET)) {
		pr_perror("%s: cannot enter its net namespace", sk->what);
		if (own >= 0)
			close(own);
		return -errno;
	}
	ret = libsoccr_restore_fins(h, &data, sizeof(data));
	if (setns(own, CLONE_NEWNET)) {
		pr_perror("cannot go back to criu's own net namespace");
		abort(); /* criu would go on in the tree's namespace */
	}
	close(own);
	ret = ret ?: sk_opts_restore(fd, sk->ie->opts, sk->what);
	if (!ret)
		pr_info("%s: closing state %u restored\n", sk->what, state);
	return ret;
}

/* Criu's own copy of a restored connection, in repair mode, with libsoccr's handle. */
struct taken_sk {
	int fd; /* -1: none */
	struct libsoccr_sk *soccr;
};

/*
 * Criu's own copy of a restored connection (pidfd_getfd), once every task is restored and
 * before any of them runs, with its FINs given back (close_in_repair()).
 */
static int take_restored(const struct repaired_sk *r, const struct inet_sk *sk, struct taken_sk *t)
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
	if (!ret) {
		t->fd = fd;
		/* Already in repair mode: libsoccr takes it as it is. */
		t->soccr = repair_on(fd, r->what);
		ret = t->soccr ? set_addrs(t->soccr, sk) : -EPERM;
	}
	if (!ret)
		ret = close_in_repair(t->soccr, fd, pidfd, sk);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

/*
 * Repair mode ends with a window probe, which the peer answers with its window: both ends
 * agree on where the stream is again. The peer must exist by then, or it would answer
 * with a reset, and no lock may hold the probe back. The end of repair mode clears
 * SO_REUSEADDR.
 */
static int end_repair(struct taken_sk *t, const struct repaired_sk *r)
{
	int ret = libsoccr_resume(t->soccr);

	t->soccr = NULL;
	return ret
		       ?: set_int(t->fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", r->reuseaddr,
				  r->what);
}

/*
 * A send in chunks that halve down to 1 KiB where one is refused: the task's socket may be
 * non-blocking, and the kernel's accounting of the queue may differ from the dumped one's.
 */
static int send_bytes(int fd, const char *buf, uint32_t len, const char *what)
{
	uint32_t chunk = len;

	while (len) {
		ssize_t n = send(fd, buf, chunk < len ? chunk : len, 0);

		if (n <= 0 && chunk > 1024) {
			chunk /= 2;
			continue;
		}
		if (n <= 0) {
			pr_perror("%s: cannot send its unsent bytes (%u left)", what, len);
			return n < 0 ? -errno : -EIO;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * The tail of the send queue the task had not sent yet (libsoccr_unsent_len()), sent now
 * as the task would have: out of repair mode, once every peer is out of it too. With the
 * largest send buffer while it goes in (the queue fitted the dumped size, the kernel's
 * accounting may differ), then the dumped size.
 */
static int send_unsent(int fd, const struct inet_sk *sk)
{
	struct libsoccr_sk_data data;
	const char *buf;
	uint32_t left;

	stream_data(sk->stream, &data);
	left = libsoccr_unsent_len(&data);
	if (!left)
		return 0;
	buf = sk->stream->outq + data.outq_len - left;
	return sk_opts_widen_sndbuf(fd, sk->what) ?: send_bytes(fd, buf, left, sk->what) ?:
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

/* Criu's copies of the restored connections, by slot, from tcp_restore_fins() on. */
static struct taken_sk *taken;

/* What is still taken is closed in repair mode: the restore failed, nothing is sent. */
static void release_taken(void)
{
	for (size_t i = 0; taken && i < nr_streams; i++) {
		if (taken[i].soccr)
			libsoccr_release(taken[i].soccr);
		if (taken[i].fd >= 0)
			close(taken[i].fd);
	}
	free(taken);
	taken = NULL;
}

/*
 * First, under the network lock: the forged FINs are marked to pass the lock, and the
 * lock's ACCEPT of them, first in INPUT, passes them by the namespace's own rules too.
 */
int tcp_restore_fins(void)
{
	int ret = 0;

	taken = malloc((nr_streams ? nr_streams : 1) * sizeof(*taken));
	if (!taken)
		return -ENOMEM;
	for (size_t i = 0; i < nr_streams; i++)
		taken[i] = (struct taken_sk){.fd = -1, .soccr = NULL};
	soccr_log_init();
	for (size_t i = 0; i < nr_streams && !ret; i++)
		if (repaired[i].pid)
			ret = take_restored(&repaired[i], slot_sks[i], &taken[i]);
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
	for (i = 0; taken && i < nr_streams && !ret; i++)
		if (taken[i].soccr)
			ret = end_repair(&taken[i], &repaired[i]);
	for (i = 0; taken && i < nr_streams && !ret; i++)
		if (taken[i].fd >= 0)
			ret = send_unsent(taken[i].fd, slot_sks[i]);
	release_taken();
	if (!ret && nr_streams)
		pr_info("%zu TCP connections out of repair mode\n", nr_streams);
	return ret;
}
