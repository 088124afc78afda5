/*
 * Raw INET sockets' own options, in the image's ip_opts.raw: IP_HDRINCL (IPV6_HDRINCL),
 * IP_NODEFRAG, and the ICMP type filters (ICMP_FILTER: one word, ICMPV6_FILTER: eight).
 * Everything else of a raw socket (addresses, connection, SOL_SOCKET and SOL_IP options)
 * is dumped and restored by sk-inet.c like a datagram socket's. A connected raw socket has
 * no peer name (getpeername() answers ENOTCONN): it comes back bound to the address its
 * connect() gave it but not connected, as with CRIU.
 */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sk-raw.h"

#ifndef SOL_RAW
#define SOL_RAW 255
#endif
#ifndef SOL_ICMPV6
#define SOL_ICMPV6 58
#endif
#ifndef IP_NODEFRAG
#define IP_NODEFRAG 22
#endif
#ifndef IPV6_HDRINCL
#define IPV6_HDRINCL 36
#endif
/* linux/icmp.h and linux/icmpv6.h, which clash with the libc headers. */
#define ICMP_FILTER 1
#define ICMPV6_FILTER 1
#define ICMP_FILTER_WORDS 1
#define ICMPV6_FILTER_WORDS 8

/*
 * Any protocol socket() took (up to the kernel's IPPROTO_MAX, which grows: IPPROTO_MPTCP
 * is 262): restore makes the socket again with the same number.
 */
bool raw_sk_kind(uint32_t proto)
{
	return proto <= 0xffff;
}

/* The filter a raw socket of this family and protocol has: its words, or 0 for none. */
static size_t filter_words(uint32_t family, uint32_t proto)
{
	if (family == AF_INET && proto == IPPROTO_ICMP)
		return ICMP_FILTER_WORDS;
	if (family == AF_INET6 && proto == IPPROTO_ICMPV6)
		return ICMPV6_FILTER_WORDS;
	return 0;
}

static int get_flag(int fd, int level, int name, const char *opt, protobuf_c_boolean *on,
		    const char *what)
{
	int val;
	socklen_t len = sizeof(val);

	if (getsockopt(fd, level, name, &val, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	*on = val != 0;
	return 0;
}

/*
 * IPV6_CHECKSUM's offset has no field (the image's checksum is a bool): a socket that set
 * one is refused. ICMPv6 sockets always have the kernel's own, which needs nothing.
 */
static int check_v6_checksum(int fd, const struct inet_dump *d, const char *what)
{
	int offset;
	socklen_t len = sizeof(offset);

	if (d->ie.proto == IPPROTO_ICMPV6)
		return 0;
	if (getsockopt(fd, SOL_IPV6, IPV6_CHECKSUM, &offset, &len)) {
		pr_perror("%s: cannot read IPV6_CHECKSUM", what);
		return -errno;
	}
	if (offset != -1) {
		pr_err("%s: IPV6_CHECKSUM at offset %d, which the image cannot hold\n", what,
		       offset);
		return -ENOTSUP;
	}
	return 0;
}

static int dump_filter(int fd, struct inet_dump *d, const char *what)
{
	size_t words = filter_words(d->ie.family, d->ie.proto);
	bool v6 = d->ie.family == AF_INET6;
	socklen_t len = words * sizeof(uint32_t);

	if (!words)
		return 0;
	if (getsockopt(fd, v6 ? SOL_ICMPV6 : SOL_RAW, v6 ? ICMPV6_FILTER : ICMP_FILTER,
		       d->icmp_filter, &len)) {
		pr_perror("%s: cannot read its ICMP filter", what);
		return -errno;
	}
	d->raw.n_icmpv_filter = words;
	d->raw.icmpv_filter = d->icmp_filter;
	return 0;
}

int raw_sk_dump(int fd, struct inet_dump *d, const char *what)
{
	bool v6 = d->ie.family == AF_INET6;
	int ret;

	ip_opts_raw_entry__init(&d->raw);
	d->ip_opts.raw = &d->raw;
	d->raw.has_hdrincl = true;
	if (v6) {
		ret = get_flag(fd, SOL_IPV6, IPV6_HDRINCL, "IPV6_HDRINCL", &d->raw.hdrincl, what) ?:
			      check_v6_checksum(fd, d, what);
	} else {
		d->raw.has_nodefrag = true;
		ret = get_flag(fd, SOL_IP, IP_HDRINCL, "IP_HDRINCL", &d->raw.hdrincl, what) ?:
			      get_flag(fd, SOL_IP, IP_NODEFRAG, "IP_NODEFRAG", &d->raw.nodefrag,
				       what);
	}
	return ret ?: dump_filter(fd, d, what);
}

int raw_sk_check(const InetSkEntry *ie, const char *what)
{
	const IpOptsRawEntry *raw = ie->ip_opts ? ie->ip_opts->raw : NULL;

	if (!raw)
		return 0;
	if (ie->type != SOCK_RAW) {
		pr_err("%s: raw socket options on a socket of type %u\n", what, ie->type);
		return -EINVAL;
	}
	if (raw->n_icmpv_filter && raw->n_icmpv_filter != filter_words(ie->family, ie->proto)) {
		pr_err("%s: an ICMP filter of %zu words for family %u, protocol %u\n", what,
		       raw->n_icmpv_filter, ie->family, ie->proto);
		return -EINVAL;
	}
	if ((raw->has_checksum && raw->checksum) ||
	    (ie->family == AF_INET6 && raw->has_nodefrag && raw->nodefrag)) {
		pr_err("%s: IPV6_CHECKSUM or IP_NODEFRAG set where this criu cannot set it again\n",
		       what);
		return -EINVAL;
	}
	return 0;
}

static int set_flag(int fd, int level, int name, const char *opt, int val, const char *what)
{
	if (setsockopt(fd, level, name, &val, sizeof(val))) {
		pr_perror("%s: cannot set %s to %d", what, opt, val);
		return -errno;
	}
	return 0;
}

int raw_sk_restore(int fd, const InetSkEntry *ie, const char *what)
{
	const IpOptsRawEntry *raw = ie->ip_opts ? ie->ip_opts->raw : NULL;
	bool v6 = ie->family == AF_INET6;
	int ret = 0;

	if (!raw)
		return 0;
	if (raw->has_hdrincl && raw->hdrincl)
		ret = v6 ? set_flag(fd, SOL_IPV6, IPV6_HDRINCL, "IPV6_HDRINCL", 1, what) :
			   set_flag(fd, SOL_IP, IP_HDRINCL, "IP_HDRINCL", 1, what);
	if (!ret && raw->has_nodefrag && raw->nodefrag)
		ret = set_flag(fd, SOL_IP, IP_NODEFRAG, "IP_NODEFRAG", 1, what);
	if (!ret && raw->n_icmpv_filter &&
	    setsockopt(fd, v6 ? SOL_ICMPV6 : SOL_RAW, v6 ? ICMPV6_FILTER : ICMP_FILTER,
		       raw->icmpv_filter, raw->n_icmpv_filter * sizeof(uint32_t))) {
		ret = -errno;
		pr_perror("%s: cannot set its ICMP filter", what);
	}
	return ret;
}

/* The sock_diag request for the raw sockets of this family and protocol. */
struct raw_diag_req {
	struct nlmsghdr nlh;
	struct inet_diag_req_v2 r;
	struct nlattr attr;
	uint32_t proto;
};

static void init_diag_req(struct raw_diag_req *req, uint8_t family, uint32_t proto)
{
	memset(req, 0, sizeof(*req));
	req->nlh.nlmsg_len = sizeof(*req);
	req->nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req->nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req->nlh.nlmsg_seq = 1;
	req->r.sdiag_family = family;
	req->r.sdiag_protocol = IPPROTO_RAW;
	req->r.idiag_states = ~0u;
	req->attr.nla_len = NLA_HDRLEN + sizeof(uint32_t);
	req->attr.nla_type = INET_DIAG_REQ_PROTOCOL;
	req->proto = proto;
}

/* Whether the answers to a raw sock_diag request list the socket of inode ino. */
static bool diag_lists(int nl, ino_t ino)
{
	static char buf[32 << 10];

	for (;;) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0)
			return false;
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
				return false;
			if (m->idiag_inode == ino)
				return true;
		}
	}
}

/*
 * sock_diag of raw sockets (4.17, CONFIG_INET_RAW_DIAG): a request for IPPROTO_RAW names
 * the raw protocol in an INET_DIAG_REQ_PROTOCOL attribute. A kernel without it may answer
 * with an empty list: the probe asks for a raw socket of its own.
 */
bool raw_sk_has_diag(void)
{
	struct raw_diag_req req;
	int sk = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	struct stat st;
	bool listed = false;

	init_diag_req(&req, AF_INET, IPPROTO_ICMP);
	if (sk >= 0 && nl >= 0 && !fstat(sk, &st) && send(nl, &req, sizeof(req), 0) == sizeof(req))
		listed = diag_lists(nl, st.st_ino);
	if (nl >= 0)
		close(nl);
	if (sk >= 0)
		close(sk);
	return listed;
}
