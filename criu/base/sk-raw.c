/*
 * Raw INET sockets' own options, in the image's ip_opts.raw: IP_HDRINCL (IPV6_HDRINCL),
 * IP_NODEFRAG, and the ICMP type filters (ICMP_FILTER: one word, ICMPV6_FILTER: eight).
 * Everything else of a raw socket (addresses, connection, SOL_SOCKET and SOL_IP options)
 * is dumped and restored by sk-inet.c like a datagram socket's. A raw socket connected
 * without a port has no peer name (getpeername() answers ENOTCONN): its peer is read from
 * the kernel's table of raw sockets (raw_sk_dump_peer()), and restore connects it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
/* TCP_ESTABLISHED: the state of a raw socket connect() gave a peer. */
#define RAW_CONNECTED 1

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
 * The IPV6_CHECKSUM offset a new raw socket of this protocol has (the kernel's
 * rawv6_init_sk()): ICMPv6's checksum at 2, Mobility Header's at 4, none (-1) for the others.
 */
static int default_v6_checksum(uint32_t proto)
{
	if (proto == IPPROTO_ICMPV6)
		return 2;
	if (proto == IPPROTO_MH)
		return 4;
	return -1;
}

/*
 * IPV6_CHECKSUM's offset has no field (the image's checksum is a bool): a socket whose
 * offset is not the one a new socket of its protocol has is refused. An ICMPv6 socket's
 * cannot change.
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
	if (offset != default_v6_checksum(d->ie.proto)) {
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

/*
 * The kernel's table of raw sockets of one net namespace and family: /proc/net/raw, raw6
 * for IPv6. One line a socket: its slot, local and remote address (each the kernel's 32-bit
 * words printed as %08X, so that reading them back as integers gives the words' bytes
 * again) with a port (the protocol, and 0), the state, queues, timers, uid, timeout and
 * inode. Read once per namespace and family for the whole dump (the tree is frozen).
 */
struct raw_line {
	unsigned long ino;
	unsigned int state;
	uint32_t remote[4];
};

struct raw_table {
	ino_t net_ns; /* the namespace's inode */
	bool v6;
	size_t nr_lines;
	struct raw_line *lines;
	struct raw_table *next;
};

static struct raw_table *raw_tables;

/* One line of the table; false if it is not one (the header). */
static bool parse_raw_line(const char *text, bool v6, struct raw_line *line)
{
	uint32_t *r = line->remote;

	if (v6)
		return sscanf(text,
			      " %*u: %*32[0-9A-Fa-f]:%*x %8x%8x%8x%8x:%*x %x %*x:%*x %*x:%*x %*x "
			      "%*u %*d %lu",
			      &r[0], &r[1], &r[2], &r[3], &line->state, &line->ino) == 6;
	return sscanf(text, " %*u: %*x:%*x %x:%*x %x %*x:%*x %*x:%*x %*x %*u %*d %lu", &r[0],
		      &line->state, &line->ino) == 3;
}

static int read_raw_table(FILE *f, struct raw_table *t, const char *what)
{
	char text[512];
	struct raw_line line;

	while (fgets(text, sizeof(text), f)) {
		struct raw_line *grown;

		memset(&line, 0, sizeof(line));
		if (!parse_raw_line(text, t->v6, &line))
			continue;
		grown = realloc(t->lines, (t->nr_lines + 1) * sizeof(*grown));
		if (!grown) {
			pr_err("%s: out of memory reading the table of raw sockets\n", what);
			return -ENOMEM;
		}
		t->lines = grown;
		t->lines[t->nr_lines++] = line;
	}
	return 0;
}

/* The table of net namespace ns_fd, opened in it (it stays the namespace's once open). */
static FILE *open_raw_table(int ns_fd, bool v6, const char *what)
{
	const char *path = v6 ? "/proc/thread-self/net/raw6" : "/proc/thread-self/net/raw";
	int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	FILE *f = NULL;

	if (own < 0 || setns(ns_fd, CLONE_NEWNET)) {
		pr_perror("%s: cannot enter its net namespace", what);
	} else {
		f = fopen(path, "re");
		if (!f)
			pr_perror("%s: cannot open %s in its net namespace", what, path);
		if (setns(own, CLONE_NEWNET)) {
			pr_perror("cannot go back to criu's own net namespace");
			abort(); /* criu would go on in the socket's namespace */
		}
	}
	if (own >= 0)
		close(own);
	return f;
}

static struct raw_table *find_raw_table(ino_t net_ns, bool v6)
{
	for (struct raw_table *t = raw_tables; t; t = t->next)
		if (t->net_ns == net_ns && t->v6 == v6)
			return t;
	return NULL;
}

static struct raw_table *load_raw_table(int ns_fd, ino_t net_ns, bool v6, const char *what)
{
	struct raw_table *t = calloc(1, sizeof(*t));
	FILE *f = t ? open_raw_table(ns_fd, v6, what) : NULL;
	int ret = f ? 0 : -EIO;

	if (!t)
		pr_err("%s: out of memory\n", what);
	if (f) {
		t->v6 = v6;
		ret = read_raw_table(f, t, what);
		fclose(f);
	}
	if (ret) {
		if (t)
			free(t->lines);
		free(t);
		return NULL;
	}
	t->net_ns = net_ns;
	t->next = raw_tables;
	raw_tables = t;
	return t;
}

/* The table of fd's net namespace (SIOCGSKNS) for its family, read at its first use. */
static const struct raw_table *raw_table_of(int fd, bool v6, const char *what)
{
	int ns_fd = ioctl(fd, SIOCGSKNS);
	struct raw_table *t = NULL;
	struct stat st;

	if (ns_fd < 0 || fstat(ns_fd, &st))
		pr_perror("%s: cannot get its net namespace", what);
	else
		t = find_raw_table(st.st_ino, v6) ?: load_raw_table(ns_fd, st.st_ino, v6, what);
	if (ns_fd >= 0)
		close(ns_fd);
	return t;
}

int raw_sk_dump_peer(int fd, struct inet_dump *d, const char *what)
{
	bool v6 = d->ie.family == AF_INET6;
	const struct raw_table *t = raw_table_of(fd, v6, what);

	if (!t)
		return -EIO;
	for (size_t i = 0; i < t->nr_lines; i++) {
		const struct raw_line *line = &t->lines[i];

		if (line->ino != d->ie.ino)
			continue;
		if (line->state == RAW_CONNECTED) {
			d->connected = true;
			memcpy(d->dst, line->remote, (v6 ? 4 : 1) * sizeof(uint32_t));
		}
		return 0;
	}
	pr_err("%s: not in its net namespace's table of raw sockets\n", what);
	return -ENOENT;
}

void raw_sk_dump_fini(void)
{
	while (raw_tables) {
		struct raw_table *t = raw_tables;

		raw_tables = t->next;
		free(t->lines);
		free(t);
	}
}

/*
 * CRIU's net_diag_raw says whether raw sockets are collected for its dump (CRIU answers yes
 * also where sock_diag has no raw sockets, as here: it dumps them from the socket itself).
 * This criu reads them from the socket too, their peers from the table of raw sockets.
 */
bool raw_sk_dumpable(void)
{
	return access("/proc/self/net/raw", R_OK) == 0;
}
