/*
 * INET and INET6 sockets (file_entry.isk): TCP, UDP, UDP-Lite, ICMP ping and raw sockets
 * (their own options: sk-raw.c).
 * Dump reads each socket through criu's copy of the fd: its kind (SO_DOMAIN, SO_TYPE,
 * SO_PROTOCOL), its addresses (getsockname, getpeername), its state (TCP_INFO for TCP,
 * being connected for the others) and options. Only the shutdown state has no socket
 * option: it comes from sock_diag (INET_DIAG_SHUTDOWN). Restore makes the socket again,
 * sets its options, binds, listens or connects. Datagram queues are not dumped (as CRIU:
 * the datagrams are lost, as they may be on any network). Established TCP: sk-tcp.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "sk-inet.h"
#include "sk-opts.h"
#include "sk-raw.h"

#include "sk-inet.pb-c.h"

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif
#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78
#endif

/* The kernel's TCP states (include/net/tcp_states.h), as the images store them. */
enum {
	SK_ESTABLISHED = 1,
	SK_SYN_SENT = 2,
	SK_CLOSE = 7,
	SK_LISTEN = 10,
};

/* What a socket of this kind can be: a protocol for the type and family. */
static bool known_kind(uint32_t family, uint32_t type, uint32_t proto)
{
	if (family != AF_INET && family != AF_INET6)
		return false;
	if (type == SOCK_STREAM)
		return proto == IPPROTO_TCP;
	if (type == SOCK_RAW)
		return raw_sk_kind(proto);
	if (type != SOCK_DGRAM)
		return false;
	return proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
	       proto == (family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
}

static bool is_icmp(uint32_t proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

static size_t addr_words(uint32_t family)
{
	return family == AF_INET ? 1 : 4;
}

/* ---------------------------------------------------------------- dump ---- */

static int get_opt(int fd, int level, int name, const char *opt, int *val, const char *what)
{
	socklen_t len = sizeof(*val);

	if (getsockopt(fd, level, name, val, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	return 0;
}

/* A sockaddr as the image's words (network order, as the kernel keeps them) and port. */
static void image_addr(const struct sockaddr_storage *ss, uint32_t *words, uint32_t *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		memcpy(words, &sin->sin_addr, 4);
		*port = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		memcpy(words, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
	}
}

/*
 * A link-local bind's scope is the index of a link of the socket's namespace, which the
 * bind made the socket's bound device: CRIU's image keeps that link's name (ifname), the
 * index it has again in the restored namespace is then the scope.
 */
static int dump_scope(int fd, struct inet_dump *d, const char *what)
{
	socklen_t len = IFNAMSIZ;

	if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, d->ifname, &len)) {
		pr_perror("%s: cannot read the link of its link-local address", what);
		return -errno;
	}
	if (!len || !d->ifname[0]) {
		pr_err("%s: bound to a link-local address of no link\n", what);
		return -EINVAL;
	}
	d->ie.ifname = d->ifname;
	return 0;
}

static int dump_addresses(int fd, struct inet_dump *d, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		pr_perror("%s: cannot read its address", what);
		return -errno;
	}
	if (ss.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_scope_id) {
		int ret = dump_scope(fd, d, what);

		if (ret)
			return ret;
	}
	image_addr(&ss, d->src, &d->ie.src_port);
	len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len)) {
		if (errno != ENOTCONN) {
			pr_perror("%s: cannot read its peer's address", what);
			return -errno;
		}
		return 0;
	}
	d->connected = true;
	image_addr(&ss, d->dst, &d->ie.dst_port);
	return 0;
}

/*
 * A connection closed both ways (or reset) that its task still holds: getpeername() answers
 * ENOTCONN for a closed socket, SO_PEERNAME still gives the peer it had. With
 * --tcp-established it is dumped with its stream (sk-tcp.c), as CRIU dumps it, so that it
 * keeps its peer's name and what it had not read.
 */
static int dump_closed_peer(int fd, struct inet_dump *d, const char *what)
{
	struct sockaddr_storage ss = { .ss_family = d->ie.family };
	/* The kernel refuses a length longer than the address's. */
	socklen_t len = d->ie.family == AF_INET ? sizeof(struct sockaddr_in) :
						  sizeof(struct sockaddr_in6);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERNAME, &ss, &len)) {
		if (errno == ENOTCONN)
			return 0;
		pr_perror("%s: cannot read its peer's address (SO_PEERNAME)", what);
		return -errno;
	}
	d->connected = true;
	image_addr(&ss, d->dst, &d->ie.dst_port);
	return 0;
}

/*
 * TCP: the state and, listening, the backlog (TCP_INFO's tcpi_sacked is then the
 * socket's sk_max_ack_backlog and tcpi_unacked the connections waiting for accept()).
 */
static int dump_state(int fd, struct inet_dump *d, const char *what)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (d->ie.type != SOCK_STREAM) {
		d->ie.state = d->connected ? SK_ESTABLISHED : SK_CLOSE;
		return 0;
	}
	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len)) {
		pr_perror("%s: cannot read TCP_INFO", what);
		return -errno;
	}
	d->ie.state = ti.tcpi_state;
	if (ti.tcpi_state == SK_LISTEN) {
		d->ie.backlog = ti.tcpi_sacked;
		d->pending = ti.tcpi_unacked;
	}
	/* A connecting socket's peer too: getpeername() answers ENOTCONN until it is connected. */
	if ((ti.tcpi_state == SK_CLOSE || ti.tcpi_state == SK_SYN_SENT) && !d->connected &&
	    opts.tcp_established)
		return dump_closed_peer(fd, d, what);
	return 0;
}

/* The answers to one INET_DIAG dump, scanned for the socket's inode (*shutdown stays when absent). */
static int find_diag_shutdown(int nl, uint32_t ino, int *shutdown, const char *what)
{
	static char buf[32 << 10];

	for (;;) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n < 0) {
			pr_perror("%s: sock_diag: cannot read the answer", what);
			return -errno;
		}
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct inet_diag_msg *m = NLMSG_DATA(h);
			struct rtattr *rta = (struct rtattr *)(m + 1);
			int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));

			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				pr_err("%s: sock_diag refused the request\n", what);
				return -EIO;
			}
			if (m->idiag_inode != ino)
				continue;
			for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
				if (rta->rta_type == INET_DIAG_SHUTDOWN)
					*shutdown = *(uint8_t *)RTA_DATA(rta);
		}
	}
}

/*
 * What a socket sock_diag does not list (a ping socket: no table; a closed TCP socket:
 * in no hash) shows of its shutdown through poll(): a shut receiving side reads end of
 * file (POLLRDHUP), a datagram socket shut both ways hangs up (POLLHUP). What neither
 * shows changes nothing for the owner: sends fail on a closed TCP socket anyway, and a
 * ping socket shut for sending only reads as not shut.
 */
static int poll_shutdown(int fd, const struct inet_dump *d, int *shut, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	if (poll(&pfd, 1, 0) < 0) {
		pr_perror("%s: cannot poll it", what);
		return -errno;
	}
	if (d->ie.type == SOCK_STREAM)
		*shut = pfd.revents & POLLRDHUP ? 3 : 0;
	else
		*shut = pfd.revents & POLLHUP ? 3 : pfd.revents & POLLRDHUP ? 1 : 0;
	return 0;
}

/*
 * The shutdown state (RCV_SHUTDOWN 1, SEND_SHUTDOWN 2, as sk_shutdown numbers them) has no
 * socket option: sock_diag of the tree's net namespace gives it for TCP, UDP and UDP-Lite.
 */
static int dump_shutdown(int fd, struct inet_dump *d, const char *what)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.r = { .sdiag_family = d->ie.family, .sdiag_protocol = d->ie.proto,
		       .idiag_states = ~0u },
	};
	int shut = -1, nl, ret = 0;

	if (d->ie.type != SOCK_RAW && !is_icmp(d->ie.proto)) {
		nl = net_tree_socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (nl < 0) {
			pr_perror("%s: cannot open a NETLINK_SOCK_DIAG socket", what);
			return -errno;
		}
		ret = send(nl, &req, sizeof(req), 0) < 0 ? -errno : 0;
		if (ret)
			pr_perror("%s: sock_diag: cannot ask for the socket table", what);
		else
			ret = find_diag_shutdown(nl, d->ie.ino, &shut, what);
		close(nl);
	}
	if (!ret && shut < 0)
		ret = poll_shutdown(fd, d, &shut, what);
	if (ret)
		return ret;
	/* sk_shutdown's bits are the image's READ and WRITE. */
	d->ie.has_shutdown = shut != 0;
	d->ie.shutdown = shut;
	return 0;
}

/* A corked UDP socket holds the datagram being built, which is not dumped. */
static int check_udp_cork(int fd, const struct inet_dump *d, const char *what)
{
	int val, ret;

	if (d->ie.type != SOCK_DGRAM ||
	    (d->ie.proto != IPPROTO_UDP && d->ie.proto != IPPROTO_UDPLITE))
		return 0;
	ret = get_opt(fd, SOL_UDP, UDP_CORK, "UDP_CORK", &val, what);
	if (!ret && val) {
		pr_err("%s: UDP_CORK is set (a datagram may be half built), which is not "
		       "supported\n",
		       what);
		ret = -ENOTSUP;
	}
	return ret;
}

/*
 * What the socket's packets carry: IP_TOS and IP_TTL (IPV6_TCLASS and IPV6_UNICAST_HOPS
 * for IPv6, in the same fields), written where they differ from a new socket's. A TTL never
 * set reads as the namespace's default (net.ipv4.ip_default_ttl, net.ipv6.conf.all.
 * hop_limit), 64 unless changed: that one is taken as not set, and a new socket follows
 * the default of its namespace again.
 */
#define DEFAULT_TTL 64

static int dump_tos_ttl(int fd, struct inet_dump *d, const char *what)
{
	bool v6 = d->ie.family == AF_INET6;
	int tos, ttl;
	int ret = v6 ? get_opt(fd, SOL_IPV6, IPV6_TCLASS, "IPV6_TCLASS", &tos, what) :
		       get_opt(fd, SOL_IP, IP_TOS, "IP_TOS", &tos, what);

	if (!ret)
		ret = v6 ? get_opt(fd, SOL_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", &ttl, what) :
			   get_opt(fd, SOL_IP, IP_TTL, "IP_TTL", &ttl, what);
	if (ret)
		return ret;
	d->ip_opts.has_tos = tos != 0;
	d->ip_opts.tos = tos;
	d->ip_opts.has_ttl = ttl != DEFAULT_TTL;
	d->ip_opts.ttl = ttl;
	return 0;
}

/*
 * IP_PKTINFO (IPv4) and IPV6_RECVPKTINFO (IPv6): each datagram read with recvmsg() comes
 * with the address it was sent to and the link it came in on. Both are the image's pktinfo,
 * as CRIU keeps them.
 */
static int dump_pktinfo(int fd, struct inet_dump *d, const char *what)
{
	int val, ret;

	if (d->ie.family == AF_INET6)
		ret = get_opt(fd, SOL_IPV6, IPV6_RECVPKTINFO, "IPV6_RECVPKTINFO", &val, what);
	else
		ret = get_opt(fd, SOL_IP, IP_PKTINFO, "IP_PKTINFO", &val, what);
	if (ret)
		return ret;
	d->ip_opts.has_pktinfo = val != 0;
	d->ip_opts.pktinfo = val != 0;
	return 0;
}

/* An option that gives recvmsg() ancillary data. */
struct cmsg_opt {
	int level, name;
	const char *opt;
	int kept_family; /* the family whose sockets keep it in pktinfo, or 0 */
};

#define CMSG_OPT(level, name, kept) { level, name, #name, kept }

/*
 * Those of them CRIU's images have no field for: kept in inetsk-ext.img, this criu's own
 * (CRIU's tools skip it; a restore by CRIU loses only these options). An IPv6 socket has
 * the IPv4 ones too (for its IPv4-mapped datagrams), but for a raw one.
 */
static const struct cmsg_opt cmsg_opts[] = {
	CMSG_OPT(SOL_IP, IP_PKTINFO, AF_INET),
	CMSG_OPT(SOL_IP, IP_RECVOPTS, 0),
	CMSG_OPT(SOL_IP, IP_RETOPTS, 0),
	CMSG_OPT(SOL_IP, IP_RECVTOS, 0),
	CMSG_OPT(SOL_IP, IP_RECVTTL, 0),
	CMSG_OPT(SOL_IP, IP_RECVERR, 0),
	CMSG_OPT(SOL_IP, IP_RECVERR_RFC4884, 0),
	CMSG_OPT(SOL_IP, IP_RECVORIGDSTADDR, 0),
	CMSG_OPT(SOL_IP, IP_CHECKSUM, 0),
	CMSG_OPT(SOL_IP, IP_RECVFRAGSIZE, 0),
	CMSG_OPT(SOL_IPV6, IPV6_2292PKTINFO, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVHOPLIMIT, 0),
	CMSG_OPT(SOL_IPV6, IPV6_2292HOPLIMIT, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVHOPOPTS, 0),
	CMSG_OPT(SOL_IPV6, IPV6_2292HOPOPTS, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVDSTOPTS, 0),
	CMSG_OPT(SOL_IPV6, IPV6_2292DSTOPTS, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVRTHDR, 0),
	CMSG_OPT(SOL_IPV6, IPV6_2292RTHDR, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVTCLASS, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVPATHMTU, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVERR, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVERR_RFC4884, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVORIGDSTADDR, 0),
	CMSG_OPT(SOL_IPV6, IPV6_RECVFRAGSIZE, 0),
	/*
	 * The socket's own: each of the four timestamps reads as on only while it is the one
	 * recvmsg() gives (the last one set), so that setting that one again gives it back.
	 */
	CMSG_OPT(SOL_SOCKET, SO_TIMESTAMP_OLD, 0),
	CMSG_OPT(SOL_SOCKET, SO_TIMESTAMPNS_OLD, 0),
	CMSG_OPT(SOL_SOCKET, SO_TIMESTAMP_NEW, 0),
	CMSG_OPT(SOL_SOCKET, SO_TIMESTAMPNS_NEW, 0),
	CMSG_OPT(SOL_SOCKET, SO_RXQ_OVFL, 0),
};

_Static_assert(sizeof(cmsg_opts) / sizeof(cmsg_opts[0]) == INET_NR_CMSG_OPTS,
	       "inet_dump.cmsg_vals has one value per cmsg_opts[] row");

/* Whether a socket of family and type has o, and keeps it in inetsk-ext.img. */
static bool has_cmsg_opt(uint32_t family, uint32_t type, const struct cmsg_opt *o)
{
	if (o->kept_family == (int)family)
		return false;
	if (o->level == SOL_SOCKET)
		return true;
	if (o->level == SOL_IPV6)
		return family == AF_INET6;
	return family == AF_INET || type != SOCK_RAW;
}

static int dump_cmsg_opts(int fd, struct inet_dump *d, const char *what)
{
	for (size_t i = 0; i < INET_NR_CMSG_OPTS; i++) {
		const struct cmsg_opt *o = &cmsg_opts[i];
		socklen_t len = sizeof(int);
		int val = 0;

		if (!has_cmsg_opt(d->ie.family, d->ie.type, o))
			continue;
		/* An option the kernel does not know cannot be on. */
		if (getsockopt(fd, o->level, o->name, &val, &len) && errno != ENOPROTOOPT) {
			pr_perror("%s: cannot read %s", what, o->opt);
			return -errno;
		}
		d->cmsg_vals[i] = val;
	}
	return 0;
}

/* d's options of cmsg_opts[] that are on, as its inetsk-ext.img entry (if it has one). */
static int write_cmsg_opts(const struct inet_dump *d)
{
	CrSkIntOpt opts[INET_NR_CMSG_OPTS], *ptrs[INET_NR_CMSG_OPTS];
	CrInetSkExtEntry ext = CR_INET_SK_EXT_ENTRY__INIT;
	struct cr_img *img;

	ext.id = d->ie.id;
	ext.opts = ptrs;
	for (size_t i = 0; i < INET_NR_CMSG_OPTS; i++) {
		if (!d->cmsg_vals[i])
			continue;
		cr_sk_int_opt__init(&opts[ext.n_opts]);
		opts[ext.n_opts].level = cmsg_opts[i].level;
		opts[ext.n_opts].name = cmsg_opts[i].name;
		opts[ext.n_opts].value = d->cmsg_vals[i];
		ptrs[ext.n_opts] = &opts[ext.n_opts];
		ext.n_opts++;
	}
	if (!ext.n_opts)
		return 0;
	img = files_side_image(CR_IMG_INETSK_EXT);
	return img ? pb_write_one(img, &ext) : -EIO;
}

static int dump_ip_opts(int fd, struct inet_dump *d, const char *what)
{
	int val, ret;

	if (d->ie.family == AF_INET6) {
		ret = get_opt(fd, SOL_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY", &val, what);
		if (ret)
			return ret;
		d->ie.has_v6only = true;
		d->ie.v6only = val;
		ret = get_opt(fd, SOL_IPV6, IPV6_FREEBIND, "IPV6_FREEBIND", &val, what);
	} else {
		ret = get_opt(fd, SOL_IP, IP_FREEBIND, "IP_FREEBIND", &val, what);
	}
	if (ret)
		return ret;
	d->ie.ip_opts = &d->ip_opts;
	d->ip_opts.has_freebind = true;
	d->ip_opts.freebind = val;
	ret = dump_tos_ttl(fd, d, what) ?: dump_pktinfo(fd, d, what) ?:
		      dump_cmsg_opts(fd, d, what);
	if (!ret && d->ie.type == SOCK_RAW)
		ret = raw_sk_dump(fd, d, what);
	/* An option CRIU's images have no field for (an IPv6 raw socket has no SOL_IP). */
	if (!ret && d->ie.family == AF_INET6 && d->ie.type == SOCK_RAW)
		ret = get_opt(fd, SOL_IPV6, IPV6_TRANSPARENT, "IPV6_TRANSPARENT", &val, what);
	else if (!ret)
		ret = get_opt(fd, SOL_IP, IP_TRANSPARENT, "IP_TRANSPARENT", &val, what);
	if (!ret && val) {
		pr_err("%s: IP_TRANSPARENT is set, which is not supported\n", what);
		ret = -ENOTSUP;
	}
	return ret;
}

/*
 * TCP_NODELAY and TCP_CORK of a socket that is not established (tcp_opts); an established
 * one has them in its stream image. Only what differs from a new socket is written.
 */
static int dump_tcp_opts(int fd, struct inet_dump *d, const char *what)
{
	int nodelay, cork, ret;

	ret = get_opt(fd, SOL_TCP, TCP_NODELAY, "TCP_NODELAY", &nodelay, what) ?:
		      get_opt(fd, SOL_TCP, TCP_CORK, "TCP_CORK", &cork, what);
	if (ret || (!nodelay && !cork))
		return ret;
	d->ie.tcp_opts = &d->tcp_opts;
	d->tcp_opts.has_nodelay = nodelay != 0;
	d->tcp_opts.nodelay = nodelay != 0;
	d->tcp_opts.has_cork = cork != 0;
	d->tcp_opts.cork = cork != 0;
	return 0;
}

static int dump_kind(int fd, struct inet_dump *d, const char *what)
{
	int family, type, proto, ret;

	ret = get_opt(fd, SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN", &family, what) ?:
		      get_opt(fd, SOL_SOCKET, SO_TYPE, "SO_TYPE", &type, what) ?:
		      get_opt(fd, SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL", &proto, what);
	if (ret)
		return ret;
	if (!known_kind(family, type, proto)) {
		pr_err("%s: a socket of type %d, protocol %d is not supported (TCP, UDP, "
		       "UDP-Lite, ICMP ping and raw sockets are)\n",
		       what, type, proto);
		return -ENOTSUP;
	}
	d->ie.family = family;
	d->ie.type = type;
	d->ie.proto = proto;
	return 0;
}

static void init_dump(struct inet_dump *d, const struct fd_parms *p, uint32_t id)
{
	memset(d, 0, sizeof(*d));
	inet_sk_entry__init(&d->ie);
	sk_opts_entry__init(&d->opts);
	ip_opts_entry__init(&d->ip_opts);
	tcp_opts_entry__init(&d->tcp_opts);
	d->ie.id = id;
	d->ie.ino = p->st.st_ino;
	d->ie.flags = p->flags;
	d->ie.opts = &d->opts;
	d->ie.fown = &d->fown;
	d->ie.src_addr = d->src;
	d->ie.dst_addr = d->dst;
	snprintf(d->what, sizeof(d->what), "fd %d of task %d (socket %lu)", p->fd, p->pid,
		 (unsigned long)p->st.st_ino);
}

/* A TCP connection, established, closing or closed, dumped with its stream. */
static bool is_connection(const struct inet_dump *d)
{
	if (d->ie.type != SOCK_STREAM || d->ie.state == SK_LISTEN)
		return false;
	return d->ie.state != SK_CLOSE || d->connected;
}

/* Everything but the state's own part (the established connection's stream). */
static int dump_socket(int fd, const struct fd_parms *p, struct inet_dump *d)
{
	int ret = dump_kind(fd, d, d->what);

	if (!ret) {
		d->ie.n_src_addr = d->ie.n_dst_addr = addr_words(d->ie.family);
		ret = dump_addresses(fd, d, d->what);
	}
	if (!ret && d->ie.type == SOCK_RAW && !d->connected)
		ret = raw_sk_dump_peer(fd, d, d->what);
	if (!ret)
		ret = dump_state(fd, d, d->what);
	if (!ret)
		ret = dump_shutdown(fd, d, d->what);
	if (!ret)
		ret = sk_opts_dump_inet(fd, &d->opts, d->what);
	if (!ret && d->ie.type == SOCK_STREAM)
		ret = sk_opts_dump_tcp(fd, &d->opts, d->what);
	if (!ret)
		ret = dump_ip_opts(fd, d, d->what) ?: check_udp_cork(fd, d, d->what);
	if (!ret && d->ie.type == SOCK_STREAM && !is_connection(d))
		ret = dump_tcp_opts(fd, d, d->what);
	if (!ret)
		ret = dump_fown(p, &d->fown);
	return ret;
}

static int check_state(const struct inet_dump *d)
{
	if (d->ie.type != SOCK_STREAM || (d->ie.state == SK_CLOSE && !d->connected))
		return 0;
	if (d->ie.state == SK_LISTEN) {
		if (d->pending && !opts.tcp_skip_in_flight) {
			pr_err("%s: listening with %u connections not accepted yet (in flight): "
			       "dump with --skip-in-flight to drop them\n",
			       d->what, d->pending);
			return -ENOTSUP;
		}
		return 0;
	}
	return tcp_dump_check_state(d);
}

static bool inet_sk_owns(const struct fd_parms *p)
{
	int family = sk_family(p);

	return family == AF_INET || family == AF_INET6;
}

static int inet_sk_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	struct inet_dump *d = malloc(sizeof(*d));
	int fd, ret;

	if (!d) {
		pr_err("fd %d of task %d: out of memory\n", p->fd, p->pid);
		return -ENOMEM;
	}
	init_dump(d, p, id);
	fd = ret = grab_task_fd(p);
	if (fd >= 0)
		ret = dump_socket(fd, p, d) ?: check_state(d);
	if (!ret && is_connection(d))
		ret = tcp_dump_stream(fd, d);
	if (!ret) {
		fe.type = FD_TYPES__INETSK;
		fe.id = id;
		fe.isk = &d->ie;
		ret = write_file_entry(&fe) ?: write_cmsg_opts(d);
	}
	if (fd >= 0)
		close(fd);
	sk_opts_free(&d->opts);
	free(d);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

static int check_addresses(const InetSkEntry *ie, const char *what)
{
	size_t words = addr_words(ie->family);

	if (ie->n_src_addr != words || (ie->n_dst_addr && ie->n_dst_addr != words) ||
	    ie->src_port > 0xffff || ie->dst_port > 0xffff) {
		pr_err("%s: addresses of %zu and %zu words, ports %u and %u: not an address of "
		       "family %u\n",
		       what, ie->n_src_addr, ie->n_dst_addr, ie->src_port, ie->dst_port,
		       ie->family);
		return -EINVAL;
	}
	return 0;
}

/* As CRIU names it: the tree's own net namespace, or criu's where the tree shares it. */
static bool is_tree_net_ns(uint32_t id)
{
	const struct ns_id *own = ns_root_own(NS_NET);
	struct pstree_item item;

	if (own)
		return own->id == id;
	ns_criu_ids(&item.ids);
	return item.ids.net_ns_id == id;
}

static int check_inet_state(const InetSkEntry *ie, const char *what)
{
	bool ok;

	if (ie->type != SOCK_STREAM)
		ok = ie->state == SK_CLOSE || (ie->state == SK_ESTABLISHED && ie->n_dst_addr);
	else
		ok = ie->state == SK_CLOSE || ie->state == SK_LISTEN ||
		     tcp_state_restorable(ie->state);
	if (!ok) {
		pr_err("%s: state %u is not one this criu restores for this kind of socket\n",
		       what, ie->state);
		return -ENOTSUP;
	}
	if (ie->has_shutdown && ie->shutdown > SK_SHUTDOWN__BOTH) {
		pr_err("%s: shutdown %u is not one of NONE, READ, WRITE, BOTH\n", what,
		       ie->shutdown);
		return -EINVAL;
	}
	if (ie->has_ns_id && !is_tree_net_ns(ie->ns_id)) {
		pr_err("%s: in net namespace %u, which is not its tasks'\n", what, ie->ns_id);
		return -EINVAL;
	}
	return 0;
}

static int check_ip_opts(const InetSkEntry *ie, const char *what)
{
	const IpOptsEntry *io = ie->ip_opts;

	if (raw_sk_check(ie, what))
		return -EINVAL;
	if (io && ((io->has_tos && io->tos > 0xff) || (io->has_ttl && io->ttl > 0xff))) {
		pr_err("%s: IP_TOS %u or IP_TTL %u out of range\n", what, io->tos, io->ttl);
		return -EINVAL;
	}
	if (ie->ifname && (ie->family != AF_INET6 || strlen(ie->ifname) >= IFNAMSIZ)) {
		pr_err("%s: ifname %s: not the scope of an IPv6 address\n", what, ie->ifname);
		return -EINVAL;
	}
	return 0;
}

/* inetsk-ext.img's entries, read before the sockets are collected. */
static CrInetSkExtEntry **exts;
static size_t nr_exts;
/* Which of them a collected socket took: one left over names no inet socket. */
static bool *ext_taken;

static int add_ext(void *msg, void *arg)
{
	CrInetSkExtEntry *ext = msg, **grown_exts;
	bool *grown_taken;

	(void)arg;
	for (size_t i = 0; i < nr_exts; i++)
		if (exts[i]->id == ext->id) {
			pr_err("inetsk-ext.img: two entries for file %u\n", ext->id);
			return -EINVAL;
		}
	grown_exts = realloc(exts, (nr_exts + 1) * sizeof(*grown_exts));
	if (grown_exts)
		exts = grown_exts;
	grown_taken = realloc(ext_taken, (nr_exts + 1) * sizeof(*grown_taken));
	if (grown_taken)
		ext_taken = grown_taken;
	if (!grown_exts || !grown_taken) {
		pr_err("inetsk-ext.img: out of memory\n");
		return -ENOMEM;
	}
	ext_taken[nr_exts] = false;
	exts[nr_exts++] = ext;
	return 1;
}

static int inet_sk_collect_images(void)
{
	return pb_collect_optional_image(CR_IMG_INETSK_EXT, add_ext, NULL);
}

static const struct cmsg_opt *find_cmsg_opt(const InetSkEntry *ie, const CrSkIntOpt *opt)
{
	for (size_t i = 0; i < INET_NR_CMSG_OPTS; i++)
		if ((uint32_t)cmsg_opts[i].level == opt->level &&
		    (uint32_t)cmsg_opts[i].name == opt->name)
			return has_cmsg_opt(ie->family, ie->type, &cmsg_opts[i]) ? &cmsg_opts[i] :
										      NULL;
	return NULL;
}

/* sk's inetsk-ext.img entry, if any: each option one that such a socket keeps there. */
static int collect_ext(struct inet_sk *sk)
{
	for (size_t i = 0; i < nr_exts; i++) {
		if (exts[i]->id != sk->id)
			continue;
		for (size_t k = 0; k < exts[i]->n_opts; k++) {
			const CrSkIntOpt *opt = exts[i]->opts[k];

			if (!find_cmsg_opt(sk->ie, opt)) {
				pr_err("%s: inetsk-ext.img has option %u of level %u, not one "
				       "this criu sets on such a socket from there\n",
				       sk->what, opt->name, opt->level);
				return -EINVAL;
			}
		}
		sk->ext = exts[i];
		ext_taken[i] = true;
		break;
	}
	return 0;
}

static int inet_sk_collect_done(void)
{
	for (size_t i = 0; i < nr_exts; i++)
		if (!ext_taken[i]) {
			pr_err("inetsk-ext.img: an entry for file %u, which is no inet socket\n",
			       exts[i]->id);
			return -EINVAL;
		}
	return tcp_collect_done();
}

/* The collected sockets, for deps(). */
static struct inet_sk **isks;
static size_t nr_isks;

static int add_isk(struct inet_sk *sk)
{
	struct inet_sk **grown = realloc(isks, (nr_isks + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("%s: out of memory\n", sk->what);
		return -ENOMEM;
	}
	isks = grown;
	isks[nr_isks++] = sk;
	return 0;
}

static int inet_sk_collect(struct file_desc *d)
{
	const InetSkEntry *ie = d->fe->isk;
	struct inet_sk *sk;
	int ret;

	if (!ie || ie->id != d->id || !ie->opts || !ie->fown) {
		pr_err("files.img: file %u has type INETSK but no inet_sk_entry of its own\n",
		       d->id);
		return -EINVAL;
	}
	sk = calloc(1, sizeof(*sk));
	if (!sk) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	d->kind = sk;
	sk->id = d->id;
	sk->ie = ie;
	snprintf(sk->what, sizeof(sk->what), "inet socket %u (file %u)", ie->ino, d->id);
	if (!known_kind(ie->family, ie->type, ie->proto)) {
		pr_err("%s: family %u, type %u, protocol %u is not a kind this criu restores\n",
		       sk->what, ie->family, ie->type, ie->proto);
		return -ENOTSUP;
	}
	ret = check_addresses(ie, sk->what) ?: check_inet_state(ie, sk->what);
	if (!ret)
		ret = ie->type == SOCK_STREAM ? sk_opts_check_tcp(ie->opts, sk->what) :
						 sk_opts_check(ie->opts, sk->what);
	if (!ret)
		ret = check_ip_opts(ie, sk->what) ?: collect_ext(sk);
	if (!ret && tcp_restores_stream(ie))
		ret = tcp_collect_stream(sk);
	if (!ret)
		ret = collect_owner(d, ie->fown);
	return ret ?: add_isk(sk);
}

static void inet_sk_collect_fini(void)
{
	free(isks);
	isks = NULL;
	nr_isks = 0;
	for (size_t i = 0; i < nr_exts; i++)
		cr_inet_sk_ext_entry__free_unpacked(exts[i], NULL);
	free(exts);
	exts = NULL;
	free(ext_taken);
	ext_taken = NULL;
	nr_exts = 0;
	tcp_collect_fini();
}

static bool is_listener_of(const InetSkEntry *l, const InetSkEntry *ie)
{
	return l->type == SOCK_STREAM && l->state == SK_LISTEN && l->src_port == ie->src_port;
}

/*
 * A connection on a listening socket's port (one it accepted) is made after the listener:
 * once the connection's socket is back, its SO_REUSEADDR as dumped (off, usually) would
 * keep the listener from binding the port again. Repair mode lets the connection bind
 * beside the listener.
 */
static size_t inet_sk_deps(const struct file_desc *d, uint32_t *ids, size_t max)
{
	const struct inet_sk *sk = d->kind;
	size_t nr = 0;

	if (sk->ie->type != SOCK_STREAM || sk->ie->state == SK_LISTEN || !sk->ie->src_port)
		return 0;
	for (size_t i = 0; i < nr_isks; i++) {
		if (!is_listener_of(isks[i]->ie, sk->ie))
			continue;
		if (nr < max)
			ids[nr] = isks[i]->id;
		nr++;
	}
	return nr;
}

socklen_t inet_sk_addr(const InetSkEntry *ie, bool peer, struct sockaddr_storage *ss)
{
	const uint32_t *words = peer ? ie->dst_addr : ie->src_addr;
	uint16_t port = htons(peer ? ie->dst_port : ie->src_port);

	memset(ss, 0, sizeof(*ss));
	ss->ss_family = ie->family;
	if (ie->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		memcpy(&sin->sin_addr, words, 4);
		sin->sin_port = port;
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memcpy(&sin6->sin6_addr, words, 16);
	sin6->sin6_port = port;
	/* ifname: the interface of a link-local address (if_nametoindex() gives 0 if gone). */
	if (!peer && ie->ifname)
		sin6->sin6_scope_id = if_nametoindex(ie->ifname);
	return sizeof(*sin6);
}

static int set_opt(int fd, int level, int name, const char *opt, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val))) {
		pr_perror("%s: cannot set %s to %d", what, opt, val);
		return -errno;
	}
	return 0;
}

static int set_freebind(int fd, const InetSkEntry *ie, bool on, const char *what)
{
	if (ie->family == AF_INET6)
		return set_opt(fd, SOL_IPV6, IPV6_FREEBIND, "IPV6_FREEBIND", on, what);
	return set_opt(fd, SOL_IP, IP_FREEBIND, "IP_FREEBIND", on, what);
}

/*
 * The address family's options, set before bind(): IP_FREEBIND and v6only decide which
 * addresses it may take.
 */
static int restore_ip_opts(int fd, const struct inet_sk *sk)
{
	const InetSkEntry *ie = sk->ie;
	const char *what = sk->what;
	const IpOptsEntry *io = ie->ip_opts;
	bool v6 = ie->family == AF_INET6;
	int ret = 0;

	/* A raw socket has its number from socket(): its IPV6_V6ONLY cannot change. */
	if (v6 && ie->has_v6only && ie->type != SOCK_RAW)
		ret = set_opt(fd, SOL_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY", ie->v6only, what);
	/* On while binding: the address was bound with it, and may be gone since. */
	if (!ret)
		ret = set_freebind(fd, ie, true, what);
	if (!ret && io && io->has_tos)
		ret = v6 ? set_opt(fd, SOL_IPV6, IPV6_TCLASS, "IPV6_TCLASS", io->tos, what) :
			   set_opt(fd, SOL_IP, IP_TOS, "IP_TOS", io->tos, what);
	if (!ret && io && io->has_ttl)
		ret = v6 ? set_opt(fd, SOL_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", io->ttl,
				   what) :
			   set_opt(fd, SOL_IP, IP_TTL, "IP_TTL", io->ttl, what);
	if (!ret && io && io->has_pktinfo && io->pktinfo)
		ret = v6 ? set_opt(fd, SOL_IPV6, IPV6_RECVPKTINFO, "IPV6_RECVPKTINFO", 1, what) :
			   set_opt(fd, SOL_IP, IP_PKTINFO, "IP_PKTINFO", 1, what);
	for (size_t i = 0; !ret && sk->ext && i < sk->ext->n_opts; i++) {
		const CrSkIntOpt *opt = sk->ext->opts[i];

		ret = set_opt(fd, opt->level, opt->name, find_cmsg_opt(ie, opt)->opt, opt->value,
			      what);
	}
	return ret;
}

static int restore_tcp_opts(int fd, const InetSkEntry *ie, const char *what)
{
	const TcpOptsEntry *to = ie->tcp_opts;
	int ret = 0;

	if (!to)
		return 0;
	if (to->has_nodelay && to->nodelay)
		ret = set_opt(fd, SOL_TCP, TCP_NODELAY, "TCP_NODELAY", 1, what);
	if (!ret && to->has_cork && to->cork)
		ret = set_opt(fd, SOL_TCP, TCP_CORK, "TCP_CORK", 1, what);
	if (!ret && to->has_keepcnt)
		ret = set_opt(fd, SOL_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", to->keepcnt, what);
	if (!ret && to->has_keepidle)
		ret = set_opt(fd, SOL_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", to->keepidle, what);
	if (!ret && to->has_keepintvl)
		ret = set_opt(fd, SOL_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", to->keepintvl, what);
	return ret;
}

/* Whether the dumped socket had a local address: bound, or given one by connect(). */
bool inet_sk_bound(const InetSkEntry *ie)
{
	for (size_t i = 0; i < ie->n_src_addr; i++)
		if (ie->src_addr[i])
			return true;
	return ie->src_port != 0;
}

/*
 * The port may still be held by what the dumped task left (a TIME_WAIT connection), or by
 * sockets that shared it (SO_REUSEPORT, then turned off): the bind is done with
 * SO_REUSEADDR and SO_REUSEPORT, the dumped values are set back afterwards
 * (inet_sk_finish()). In repair mode the kernel forces the reuse itself, and setting
 * SO_REUSEADDR would take that back.
 */
int inet_sk_bind(int fd, const struct inet_sk *sk, bool repair)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_sk_addr(sk->ie, false, &ss);
	/* A closed TCP socket may share its port with its own TIME_WAIT left at dump. */
	bool repair_bind = !repair && sk->ie->type == SOCK_STREAM && sk->ie->state == SK_CLOSE;
	int ret = 0;

	if (!inet_sk_bound(sk->ie))
		return 0;
	if (!repair)
		ret = set_opt(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", 1, sk->what) ?:
		      set_opt(fd, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", 1, sk->what);
	if (!ret && repair_bind)
		ret = set_opt(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", 1, sk->what);
	if (!ret && bind(fd, (struct sockaddr *)&ss, len)) {
		ret = -errno;
		pr_perror("%s: cannot bind it to port %u", sk->what, sk->ie->src_port);
	}
	/* Off again (0): a closed socket sends no window probe. */
	if (!ret && repair_bind)
		ret = set_opt(fd, SOL_TCP, TCP_REPAIR, "TCP_REPAIR", 0, sk->what);
	return ret;
}

static int connect_datagram(int fd, const struct inet_sk *sk)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_sk_addr(sk->ie, true, &ss);

	if (connect(fd, (struct sockaddr *)&ss, len)) {
		pr_perror("%s: cannot connect it to port %u", sk->what, sk->ie->dst_port);
		return -errno;
	}
	return 0;
}

/*
 * A ping socket takes a gid of net.ipv4.ping_group_range, which a task of a tree with a
 * user namespace of its own does not have yet (it has criu's until its creds are set):
 * the owner service makes it there.
 */
static int new_socket(const InetSkEntry *ie, const char *what)
{
	int fd = socket(ie->family, ie->type | SOCK_CLOEXEC, ie->proto);

	if (fd < 0 && errno == EACCES && ie->type == SOCK_DGRAM && is_icmp(ie->proto))
		fd = userns_ping_socket(ie->family);
	else if (fd < 0)
		fd = -errno;
	if (fd < 0)
		pr_err("%s: cannot create it: %s\n", what, strerror(-fd));
	return fd;
}

int inet_sk_new(const struct inet_sk *sk)
{
	const InetSkEntry *ie = sk->ie;
	int fd = new_socket(ie, sk->what), ret;

	if (fd < 0)
		return fd;
	/* Before bind(): SO_REUSEPORT, SO_BINDTODEVICE decide which ports it may take. */
	ret = restore_ip_opts(fd, sk) ?: sk_opts_restore(fd, ie->opts, sk->what);
	if (!ret && ie->type == SOCK_RAW)
		ret = raw_sk_restore(fd, ie, sk->what);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * Once bound and connected: what binding needed changed back (SO_REUSEADDR, IP_FREEBIND
 * as dumped), the TCP options, shutdown, file flags.
 */
int inet_sk_finish(int fd, const struct inet_sk *sk, const struct file_desc *d)
{
	const InetSkEntry *ie = sk->ie;
	uint32_t how = ie->type == SOCK_STREAM ? tcp_task_shutdown(sk) :
			ie->has_shutdown ? ie->shutdown : SK_SHUTDOWN__NONE;
	int ret = restore_tcp_opts(fd, ie, sk->what);

	/* Also after repair mode, whose end clears SO_REUSEADDR. */
	if (!ret)
		ret = set_opt(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", ie->opts->reuseaddr,
			      sk->what);
	if (!ret)
		ret = set_opt(fd, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", ie->opts->so_reuseport,
			      sk->what);
	if (!ret && !(ie->ip_opts && ie->ip_opts->has_freebind && ie->ip_opts->freebind))
		ret = set_freebind(fd, ie, false, sk->what);
	/*
	 * sk_shutdown is SHUT_RD + 1, SHUT_WR + 1, SHUT_RDWR + 1. A socket not connected
	 * answers ENOTCONN, but is shut down all the same.
	 */
	if (!ret && how != SK_SHUTDOWN__NONE && shutdown(fd, how - 1) && errno != ENOTCONN) {
		ret = -errno;
		pr_perror("%s: cannot shut it down (%u)", sk->what, ie->shutdown);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return restore_status_flags(fd, ie->flags, d);
}

static int inet_sk_open(const struct file_desc *d)
{
	const struct inet_sk *sk = d->kind;
	const InetSkEntry *ie = sk->ie;
	int fd, ret;

	if (sk->stream || (tcp_restores_stream(ie) && ie->state != SK_CLOSE))
		return tcp_open_stream(sk, d);
	fd = inet_sk_new(sk);
	if (fd < 0)
		return fd;
	ret = inet_sk_bind(fd, sk, false);
	if (!ret && ie->state == SK_LISTEN && listen(fd, ie->backlog)) {
		ret = -errno;
		pr_perror("%s: cannot listen (backlog %u)", sk->what, ie->backlog);
	}
	if (!ret && ie->type != SOCK_STREAM && ie->state == SK_ESTABLISHED)
		ret = connect_datagram(fd, sk);
	if (ret) {
		close(fd);
		return ret;
	}
	return inet_sk_finish(fd, sk, d);
}

/* An established connection: where it is, for criu to end its repair mode. */
static int inet_sk_finish_task(const struct file_desc *d, int fd, const struct task_fds *fds)
{
	const struct inet_sk *sk = d->kind;

	return sk->stream ? tcp_note_repaired(sk, fd, fds->pid) : 0;
}

const struct fdtype_ops inet_sk_fdtype_ops = {
	.type = FD_TYPES__INETSK,
	.name = "inet socket",
	.owns = inet_sk_owns,
	.dump = inet_sk_dump,
	.dump_check = tcp_dump_check,
	.dump_fini = raw_sk_dump_fini,
	.collect_images = inet_sk_collect_images,
	.collect = inet_sk_collect,
	.collect_done = inet_sk_collect_done,
	.collect_fini = inet_sk_collect_fini,
	.open = inet_sk_open,
	.inheritable = true,
	.deps = inet_sk_deps,
	.finish = inet_sk_finish_task,
	.finish_in_flight = true,
};
