/*
 * SOL_SOCKET options of a socket (sk_opts_entry), its filter and bound device, and the
 * TCP keepalive timings: read from criu's copy of the socket on dump and set on the new
 * socket on restore. Options the image has no field for are
 * checked at their defaults, so a socket never comes back reading differently.
 */
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>

#include <unistd.h>

#include "files.h"
#include "log.h"
#include "namespaces.h"
#include "sk-opts.h"

/* Newer than some libc headers (asm-generic/socket.h numbers). */
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif

static int get_int_opt(int fd, int name, const char *opt, int *val, const char *what)
{
	socklen_t len = sizeof(*val);

	if (getsockopt(fd, SOL_SOCKET, name, val, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	return 0;
}

static int set_opt(int fd, int name, const char *opt, const void *val, socklen_t len,
		   const char *what)
{
	if (setsockopt(fd, SOL_SOCKET, name, val, len)) {
		pr_perror("%s: cannot set %s", what, opt);
		return -errno;
	}
	return 0;
}

static int set_int_opt(int fd, int name, const char *opt, int val, const char *what)
{
	return set_opt(fd, name, opt, &val, sizeof(val), what);
}

/*
 * Options no field of the image holds, and the value they must have: each changes what
 * the owner reads (extra ancillary data, or its absence). An option the kernel does not
 * know (ENOPROTOOPT), or not for this kind of socket, has its default by definition.
 * inet_kept: an inet socket's kind keeps it in an image of its own (sk-inet.c).
 */
static const struct {
	int name;
	const char *opt;
	int def;
	bool inet_kept;
} fixed_opts[] = {
	{ SO_PASSPIDFD, "SO_PASSPIDFD", 0, false },
	{ SO_PASSRIGHTS, "SO_PASSRIGHTS", 1, false },
	{ SO_TIMESTAMP, "SO_TIMESTAMP", 0, true },
	{ SO_TIMESTAMPNS, "SO_TIMESTAMPNS", 0, true },
	{ SO_RXQ_OVFL, "SO_RXQ_OVFL", 0, true },
	/* A locked filter would need the lock restored: refused. */
	{ SO_LOCK_FILTER, "SO_LOCK_FILTER", 0, false },
};

static int check_fixed_opts(int fd, bool inet, const char *what)
{
	for (size_t i = 0; i < sizeof(fixed_opts) / sizeof(fixed_opts[0]); i++) {
		socklen_t len = sizeof(int);
		int val;

		if (inet && fixed_opts[i].inet_kept)
			continue;

		if (getsockopt(fd, SOL_SOCKET, fixed_opts[i].name, &val, &len)) {
			/* EOPNOTSUPP: an option of another family's (SO_PASSPIDFD: unix). */
			if (errno == ENOPROTOOPT || errno == EOPNOTSUPP)
				continue;
			pr_perror("%s: cannot read %s", what, fixed_opts[i].opt);
			return -errno;
		}
		if (val != fixed_opts[i].def) {
			pr_err("%s: %s is %d, which is not supported\n", what, fixed_opts[i].opt,
			       val);
			return -ENOTSUP;
		}
	}
	return 0;
}

/*
 * A classic BPF filter (SO_ATTACH_FILTER): SO_GET_FILTER gives its instructions back,
 * stored one a word (code << 48 | jt << 40 | jf << 32 | k, as CRIU packs them).
 */
static int dump_filter(int fd, SkOptsEntry *soe, const char *what)
{
	struct sock_filter *insns;
	socklen_t len = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &len)) {
		pr_perror("%s: cannot read SO_GET_FILTER", what);
		return -errno;
	}
	if (!len)
		return 0;
	insns = calloc(len, sizeof(*insns));
	soe->so_filter = calloc(len, sizeof(*soe->so_filter));
	if (!insns || !soe->so_filter) {
		free(insns);
		pr_err("%s: out of memory for its socket filter\n", what);
		return -ENOMEM;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, insns, &len)) {
		pr_perror("%s: cannot read its socket filter", what);
		free(insns);
		return -errno;
	}
	for (socklen_t i = 0; i < len; i++)
		soe->so_filter[i] = (uint64_t)insns[i].code << 48 | (uint64_t)insns[i].jt << 40 |
				    (uint64_t)insns[i].jf << 32 | insns[i].k;
	soe->n_so_filter = len;
	free(insns);
	return 0;
}

static int dump_bound_dev(int fd, SkOptsEntry *soe, const char *what)
{
	char dev[IFNAMSIZ + 1] = "";
	socklen_t len = IFNAMSIZ;

	if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &len)) {
		pr_perror("%s: cannot read SO_BINDTODEVICE", what);
		return -errno;
	}
	if (!len || !dev[0])
		return 0;
	soe->so_bound_dev = strdup(dev);
	if (!soe->so_bound_dev) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	return 0;
}

void sk_opts_free(SkOptsEntry *soe)
{
	free(soe->so_filter);
	soe->so_filter = NULL;
	soe->n_so_filter = 0;
	free(soe->so_bound_dev);
	soe->so_bound_dev = NULL;
}

static int dump_timeout(int fd, int name, const char *opt, uint64_t *sec, uint64_t *usec,
			const char *what)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, name, &tv, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	*sec = tv.tv_sec;
	*usec = tv.tv_usec;
	return 0;
}

/* The boolean options: stored as has_X + X in the entry. */
#define BOOL_OPT(field, name)                                                              \
	{ name, #name, offsetof(SkOptsEntry, has_##field), offsetof(SkOptsEntry, field) }
static const struct {
	int name;
	const char *opt;
	size_t has_off, val_off; /* protobuf_c_boolean each */
} bool_opts[] = {
	BOOL_OPT(reuseaddr, SO_REUSEADDR),   BOOL_OPT(so_passcred, SO_PASSCRED),
	BOOL_OPT(so_passsec, SO_PASSSEC),    BOOL_OPT(so_dontroute, SO_DONTROUTE),
	BOOL_OPT(so_no_check, SO_NO_CHECK),  BOOL_OPT(so_reuseport, SO_REUSEPORT),
	BOOL_OPT(so_broadcast, SO_BROADCAST), BOOL_OPT(so_keepalive, SO_KEEPALIVE),
};
#define NR_BOOL_OPTS (sizeof(bool_opts) / sizeof(bool_opts[0]))

static protobuf_c_boolean *opt_field(const SkOptsEntry *soe, size_t off)
{
	return (protobuf_c_boolean *)((char *)soe + off);
}

/* The integer options: has_X + X (uint32), and a new socket's value. */
#define UINT_OPT(field, name, def)                                                         \
	{ name, #name, offsetof(SkOptsEntry, has_##field), offsetof(SkOptsEntry, field), def }
static const struct {
	int name;
	const char *opt;
	size_t has_off, val_off;
	uint32_t def;
} uint_opts[] = {
	UINT_OPT(so_priority, SO_PRIORITY, 0),
	UINT_OPT(so_rcvlowat, SO_RCVLOWAT, 1),
	/* Setting even 0 takes CAP_NET_ADMIN: set only when it differs. */
	UINT_OPT(so_mark, SO_MARK, 0),
	UINT_OPT(so_oobinline, SO_OOBINLINE, 0),
};
#define NR_UINT_OPTS (sizeof(uint_opts) / sizeof(uint_opts[0]))

static uint32_t *uint_field(const SkOptsEntry *soe, size_t off)
{
	return (uint32_t *)((char *)soe + off);
}

static int dump_flags_and_numbers(int fd, SkOptsEntry *soe, const char *what)
{
	int val, ret;

	for (size_t i = 0; i < NR_BOOL_OPTS; i++) {
		socklen_t len = sizeof(val);

		/* Not one of this family's (SO_PASSCRED on a packet socket): left out. */
		if (getsockopt(fd, SOL_SOCKET, bool_opts[i].name, &val, &len) &&
		    errno == EOPNOTSUPP)
			continue;
		ret = get_int_opt(fd, bool_opts[i].name, bool_opts[i].opt, &val, what);
		if (ret)
			return ret;
		*opt_field(soe, bool_opts[i].has_off) = true;
		*opt_field(soe, bool_opts[i].val_off) = val != 0;
	}
	for (size_t i = 0; i < NR_UINT_OPTS; i++) {
		ret = get_int_opt(fd, uint_opts[i].name, uint_opts[i].opt, &val, what);
		if (ret)
			return ret;
		*opt_field(soe, uint_opts[i].has_off) = true;
		*uint_field(soe, uint_opts[i].val_off) = val;
	}
	return 0;
}

static int dump_linger(int fd, SkOptsEntry *soe, const char *what)
{
	struct linger lin;
	socklen_t len = sizeof(lin);

	if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, &len)) {
		pr_perror("%s: cannot read SO_LINGER", what);
		return -errno;
	}
	soe->has_so_linger = lin.l_onoff != 0;
	soe->so_linger = lin.l_linger;
	return 0;
}

int sk_family(const struct fd_parms *p)
{
	int fd, family = -1;
	socklen_t len = sizeof(family);

	if (!S_ISSOCK(p->st.st_mode))
		return false;
	fd = grab_task_fd(p);
	if (fd < 0)
		return false;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len))
		family = -1;
	close(fd);
	return family;
}

bool sk_is_family(const struct fd_parms *p, int domain)
{
	return sk_family(p) == domain;
}

int sk_opts_check_off(int fd, int level, const struct sk_opt_name *opts, size_t nr,
		      const char *what)
{
	for (size_t i = 0; i < nr; i++) {
		int val = 0;
		socklen_t len = sizeof(val);

		if (getsockopt(fd, level, opts[i].opt, &val, &len))
			val = 0;
		if (val) {
			pr_err("%s: %s is set, which is not supported\n", what, opts[i].name);
			return -ENOTSUP;
		}
	}
	return 0;
}

static int dump_opts(int fd, SkOptsEntry *soe, bool inet, const char *what)
{
	int val, ret = check_fixed_opts(fd, inet, what);

	if (!ret)
		ret = get_int_opt(fd, SO_SNDBUF, "SO_SNDBUF", &val, what);
	if (!ret) {
		soe->so_sndbuf = val;
		ret = get_int_opt(fd, SO_RCVBUF, "SO_RCVBUF", &val, what);
	}
	if (!ret) {
		soe->so_rcvbuf = val;
		ret = dump_timeout(fd, SO_SNDTIMEO, "SO_SNDTIMEO", &soe->so_snd_tmo_sec,
				   &soe->so_snd_tmo_usec, what);
	}
	if (!ret)
		ret = dump_timeout(fd, SO_RCVTIMEO, "SO_RCVTIMEO", &soe->so_rcv_tmo_sec,
				   &soe->so_rcv_tmo_usec, what);
	if (!ret)
		ret = dump_flags_and_numbers(fd, soe, what);
	if (!ret)
		ret = dump_linger(fd, soe, what);
	if (!ret)
		ret = get_int_opt(fd, SO_BUF_LOCK, "SO_BUF_LOCK", &val, what);
	if (!ret) {
		soe->has_so_buf_lock = true;
		soe->so_buf_lock = val;
	}
	if (!ret)
		ret = dump_filter(fd, soe, what);
	if (!ret)
		ret = dump_bound_dev(fd, soe, what);
	if (ret)
		sk_opts_free(soe);
	return ret;
}

int sk_opts_dump(int fd, SkOptsEntry *soe, const char *what)
{
	return dump_opts(fd, soe, false, what);
}

int sk_opts_dump_inet(int fd, SkOptsEntry *soe, const char *what)
{
	return dump_opts(fd, soe, true, what);
}

/* As CRIU keeps them: the keepalive timings only while keepalive is on. */
int sk_opts_dump_tcp(int fd, SkOptsEntry *soe, const char *what)
{
	static const struct {
		int name;
		const char *opt;
	} keep[] = { { TCP_KEEPCNT, "TCP_KEEPCNT" },
		     { TCP_KEEPIDLE, "TCP_KEEPIDLE" },
		     { TCP_KEEPINTVL, "TCP_KEEPINTVL" } };
	int val[3];

	if (!soe->so_keepalive)
		return 0;
	for (int i = 0; i < 3; i++) {
		socklen_t len = sizeof(val[i]);

		if (getsockopt(fd, SOL_TCP, keep[i].name, &val[i], &len)) {
			pr_perror("%s: cannot read %s", what, keep[i].opt);
			return -errno;
		}
	}
	soe->has_tcp_keepcnt = soe->has_tcp_keepidle = soe->has_tcp_keepintvl = true;
	soe->tcp_keepcnt = val[0];
	soe->tcp_keepidle = val[1];
	soe->tcp_keepintvl = val[2];
	return 0;
}

static int check_opts(const SkOptsEntry *soe, bool tcp, const char *what)
{
	if (!soe) {
		pr_err("%s: no socket options in the image\n", what);
		return -EINVAL;
	}
	if (soe->n_so_filter > BPF_MAXINSNS ||
	    (soe->so_bound_dev && strlen(soe->so_bound_dev) >= IFNAMSIZ)) {
		pr_err("%s: a socket filter of %zu instructions or a device name longer than "
		       "%d: out of range\n",
		       what, soe->n_so_filter, IFNAMSIZ - 1);
		return -EINVAL;
	}
	if (!tcp && (soe->has_tcp_keepcnt || soe->has_tcp_keepidle || soe->has_tcp_keepintvl)) {
		pr_err("%s: TCP keepalive options on a socket that is not TCP\n", what);
		return -EINVAL;
	}
	if (soe->so_snd_tmo_sec > LONG_MAX || soe->so_rcv_tmo_sec > LONG_MAX ||
	    soe->so_snd_tmo_usec >= 1000000 || soe->so_rcv_tmo_usec >= 1000000) {
		pr_err("%s: a send or receive timeout out of range\n", what);
		return -EINVAL;
	}
	return 0;
}

int sk_opts_check(const SkOptsEntry *soe, const char *what)
{
	return check_opts(soe, false, what);
}

int sk_opts_check_tcp(const SkOptsEntry *soe, const char *what)
{
	return check_opts(soe, true, what);
}

/*
 * getsockopt() reads twice what setsockopt() was given (the kernel's bookkeeping
 * overhead); the FORCE variants pass the system's maximum, which a size the task set
 * by hand within its own limits never needed, but criu's own widening does. They take
 * CAP_NET_ADMIN in the initial user namespace: a task of a tree with a user namespace
 * of its own asks the owner service; with neither, the size is capped by the system's.
 */
static int set_buf(int fd, int force_name, int name, const char *opt, uint32_t size,
		   const char *what)
{
	int val = size / 2, ret = 0;

	if (setsockopt(fd, SOL_SOCKET, force_name, &val, sizeof(val)))
		ret = errno == EPERM ? userns_sock_buf(fd, force_name, val) : -errno;
	if (ret == -EPERM)
		return set_opt(fd, name, opt, &val, sizeof(val), what);
	if (ret)
		pr_err("%s: cannot set %s to %u: %s\n", what, opt, size, strerror(-ret));
	return ret;
}

int sk_opts_widen_sndbuf(int fd, const char *what)
{
	return set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF", INT_MAX, what);
}

int sk_opts_widen_rcvbuf(int fd, const char *what)
{
	return set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF", INT_MAX, what);
}

static int restore_timeout(int fd, int name, const char *opt, uint64_t sec, uint64_t usec,
			   const char *what)
{
	struct timeval tv = { .tv_sec = sec, .tv_usec = usec };

	return set_opt(fd, name, opt, &tv, sizeof(tv), what);
}

/* Only what differs from a new socket's defaults is set. */
static int restore_flags_and_numbers(int fd, const SkOptsEntry *soe, const char *what)
{
	int ret = 0;

	for (size_t i = 0; i < NR_BOOL_OPTS && !ret; i++)
		if (*opt_field(soe, bool_opts[i].has_off) && *opt_field(soe, bool_opts[i].val_off))
			ret = set_int_opt(fd, bool_opts[i].name, bool_opts[i].opt, 1, what);
	for (size_t i = 0; i < NR_UINT_OPTS && !ret; i++)
		if (*opt_field(soe, uint_opts[i].has_off) &&
		    *uint_field(soe, uint_opts[i].val_off) != uint_opts[i].def)
			ret = set_int_opt(fd, uint_opts[i].name, uint_opts[i].opt,
					  *uint_field(soe, uint_opts[i].val_off), what);
	if (!ret && soe->has_so_linger) {
		struct linger lin = { .l_onoff = 1, .l_linger = soe->so_linger };

		ret = set_opt(fd, SO_LINGER, "SO_LINGER", &lin, sizeof(lin), what);
	}
	return ret;
}

static int restore_tcp_keepalive(int fd, const SkOptsEntry *soe, const char *what)
{
	const struct {
		bool has;
		int name, val;
		const char *opt;
	} keep[] = { { soe->has_tcp_keepcnt, TCP_KEEPCNT, soe->tcp_keepcnt, "TCP_KEEPCNT" },
		     { soe->has_tcp_keepidle, TCP_KEEPIDLE, soe->tcp_keepidle, "TCP_KEEPIDLE" },
		     { soe->has_tcp_keepintvl, TCP_KEEPINTVL, soe->tcp_keepintvl,
		       "TCP_KEEPINTVL" } };

	for (int i = 0; i < 3; i++)
		if (keep[i].has &&
		    setsockopt(fd, SOL_TCP, keep[i].name, &keep[i].val, sizeof(keep[i].val))) {
			pr_perror("%s: cannot set %s to %d", what, keep[i].opt, keep[i].val);
			return -errno;
		}
	return 0;
}

static int restore_filter(int fd, const SkOptsEntry *soe, const char *what)
{
	struct sock_filter insns[BPF_MAXINSNS];
	struct sock_fprog prog = { .len = soe->n_so_filter, .filter = insns };

	for (size_t i = 0; i < soe->n_so_filter; i++) {
		uint64_t w = soe->so_filter[i];

		insns[i] = (struct sock_filter){ w >> 48, w >> 40, w >> 32, (uint32_t)w };
	}
	return set_opt(fd, SO_ATTACH_FILTER, "SO_ATTACH_FILTER", &prog, sizeof(prog), what);
}

static int bind_device(int fd, const char *dev, const char *what)
{
	return set_opt(fd, SO_BINDTODEVICE, "SO_BINDTODEVICE", dev, strlen(dev) + 1, what);
}

/*
 * Setting a buffer size locks it against the kernel's tuning (SO_BUF_LOCK): the dumped
 * lock bits are set last. An image without them (older CRIU) keeps both locked, as CRIU
 * restores it.
 */
int sk_opts_restore(int fd, const SkOptsEntry *soe, const char *what)
{
	int ret = set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF", soe->so_sndbuf, what);

	if (!ret)
		ret = set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF", soe->so_rcvbuf, what);
	if (!ret)
		ret = restore_timeout(fd, SO_SNDTIMEO, "SO_SNDTIMEO", soe->so_snd_tmo_sec,
				      soe->so_snd_tmo_usec, what);
	if (!ret)
		ret = restore_timeout(fd, SO_RCVTIMEO, "SO_RCVTIMEO", soe->so_rcv_tmo_sec,
				      soe->so_rcv_tmo_usec, what);
	if (!ret)
		ret = restore_flags_and_numbers(fd, soe, what);
	if (!ret && soe->has_so_buf_lock)
		ret = set_int_opt(fd, SO_BUF_LOCK, "SO_BUF_LOCK", soe->so_buf_lock, what);
	if (!ret)
		ret = restore_tcp_keepalive(fd, soe, what);
	if (!ret && soe->n_so_filter)
		ret = restore_filter(fd, soe, what);
	if (!ret && soe->so_bound_dev && soe->so_bound_dev[0])
		ret = bind_device(fd, soe->so_bound_dev, what);
	return ret;
}
