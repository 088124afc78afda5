/*
 * Netlink sockets (file_entry.nlsk): protocol, bound port id, multicast groups, the peer a
 * connect() named, socket options. Restore makes a new socket of the protocol and binds,
 * joins and connects it again. Queued messages are not kept, as in CRIU: a socket with a
 * message queued is refused, and so is one with a NETLINK_* option the image cannot carry.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "sk-opts.h"

#include "sk-netlink.pb-c.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif
/* netlink_sk_entry.state, as sock_diag reports it: TCP_ESTABLISHED once connect()ed. */
#define NETLINK_UNCONNECTED 7 /* TCP_CLOSE */
#define NETLINK_CONNECTED 1   /* TCP_ESTABLISHED */
/* Words of the group bitmap this criu reads and restores: 1024 groups. */
#define MAX_GROUP_WORDS 32
/* connect() names a group by a bit of the 32-bit nl_groups. */
#define MAX_DST_GROUP 32

static bool netlink_sk_owns(const struct fd_parms *p)
{
	return sk_is_family(p, AF_NETLINK);
}

/* ---------------------------------------------------------------- dump ---- */

/* Options the image has no field for: each must be off, as a new socket has it. */
static const struct sk_opt_name unkept_opts[] = {
	{ NETLINK_PKTINFO, "NETLINK_PKTINFO" },
	{ NETLINK_BROADCAST_ERROR, "NETLINK_BROADCAST_ERROR" },
	{ NETLINK_NO_ENOBUFS, "NETLINK_NO_ENOBUFS" },
	{ NETLINK_LISTEN_ALL_NSID, "NETLINK_LISTEN_ALL_NSID" },
	{ NETLINK_CAP_ACK, "NETLINK_CAP_ACK" },
	{ NETLINK_EXT_ACK, "NETLINK_EXT_ACK" },
	{ NETLINK_GET_STRICT_CHK, "NETLINK_GET_STRICT_CHK" },
};

static int check_dumpable(int fd, const char *what)
{
	socklen_t len = sizeof(int);
	int type;
	char c;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len)) {
		pr_perror("%s: cannot read its type", what);
		return -errno;
	}
	if (type != SOCK_RAW) {
		pr_err("%s: a netlink socket of type %d, not SOCK_RAW, which is not supported\n",
		       what, type);
		return -ENOTSUP;
	}
	if (sk_opts_check_off(fd, SOL_NETLINK, unkept_opts,
			      sizeof(unkept_opts) / sizeof(unkept_opts[0]), what))
		return -ENOTSUP;
	if (recv(fd, &c, sizeof(c), MSG_PEEK | MSG_DONTWAIT) >= 0) {
		pr_err("%s: has messages queued, which restore would lose: not supported\n", what);
		return -ENOTSUP;
	}
	return 0;
}

/* The groups joined, without the words of no group at their end. */
static int dump_groups(int fd, uint32_t *groups, size_t *nr, const char *what)
{
	socklen_t len = MAX_GROUP_WORDS * sizeof(*groups);

	memset(groups, 0, len);
	if (getsockopt(fd, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, groups, &len)) {
		pr_perror("%s: cannot list its groups", what);
		return -errno;
	}
	if (len > MAX_GROUP_WORDS * sizeof(*groups)) {
		pr_err("%s: its protocol has %u groups, more than the %d supported\n", what,
		       len * 8, MAX_GROUP_WORDS * 32);
		return -ENOTSUP;
	}
	for (*nr = len / sizeof(*groups); *nr && !groups[*nr - 1]; (*nr)--)
		;
	return 0;
}

static int dump_addresses(int fd, NetlinkSkEntry *ne, const char *what)
{
	struct sockaddr_nl own = {}, peer = {};
	socklen_t len = sizeof(own);

	if (getsockname(fd, (struct sockaddr *)&own, &len)) {
		pr_perror("%s: cannot read its address", what);
		return -errno;
	}
	len = sizeof(peer);
	if (getpeername(fd, (struct sockaddr *)&peer, &len)) {
		pr_perror("%s: cannot read its peer", what);
		return -errno;
	}
	ne->portid = own.nl_pid;
	ne->dst_portid = peer.nl_pid;
	/* The kernel shows a group past 32 as no group: it could not be connected to again. */
	ne->dst_group = peer.nl_groups ? __builtin_ffs(peer.nl_groups) : 0;
	ne->state = ne->dst_portid || ne->dst_group ? NETLINK_CONNECTED : NETLINK_UNCONNECTED;
	return 0;
}

static int read_protocol(int fd, uint32_t *protocol, const char *what)
{
	socklen_t len = sizeof(*protocol);

	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, protocol, &len)) {
		pr_perror("%s: cannot read its protocol", what);
		return -errno;
	}
	return 0;
}

static int netlink_sk_dump(const struct fd_parms *p, uint32_t id)
{
	NetlinkSkEntry ne = NETLINK_SK_ENTRY__INIT;
	SkOptsEntry opts = SK_OPTS_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	uint32_t groups[MAX_GROUP_WORDS];
	char what[96];
	int fd, ret;

	snprintf(what, sizeof(what), "fd %d of task %d (netlink socket %lu)", p->fd, p->pid,
		 (unsigned long)p->st.st_ino);
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	ret = check_dumpable(fd, what);
	if (!ret)
		ret = read_protocol(fd, &ne.protocol, what);
	if (!ret)
		ret = dump_addresses(fd, &ne, what);
	if (!ret)
		ret = dump_groups(fd, groups, &ne.n_groups, what);
	if (!ret)
		ret = sk_opts_dump(fd, &opts, what);
	if (!ret)
		ret = dump_fown(p, &fown);
	close(fd);
	if (ret)
		return ret;
	ne.id = id;
	ne.ino = p->st.st_ino;
	ne.flags = p->flags;
	ne.groups = groups;
	ne.fown = &fown;
	ne.opts = &opts;
	fe.type = FD_TYPES__NETLINKSK;
	fe.id = id;
	fe.nlsk = &ne;
	pr_debug("%s: protocol %u, port %u, %zu group words, peer %u group %u\n", what,
		 ne.protocol, ne.portid, ne.n_groups, ne.dst_portid, ne.dst_group);
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

static int check_entry(const NetlinkSkEntry *ne, uint32_t id)
{
	const char *why = NULL;

	if (ne->protocol >= MAX_LINKS)
		why = "an unknown protocol";
	/* CRIU writes 0 for a socket never bound: sock_diag does not list those. */
	else if (ne->state && ne->state != NETLINK_UNCONNECTED && ne->state != NETLINK_CONNECTED)
		why = "an unknown state";
	else if (ne->state == NETLINK_CONNECTED && ne->dst_group > MAX_DST_GROUP)
		why = "a peer group connect() cannot name";
	else if (ne->n_groups > MAX_GROUP_WORDS)
		why = "more groups than supported";
	else if ((ne->flags & O_ACCMODE) != O_RDWR)
		why = "open flags that are not O_RDWR";
	if (!why)
		return 0;
	pr_err("files.img: netlink socket %u (protocol %u, state %u, peer group %u, %zu group "
	       "words, flags %#o) has %s\n",
	       id, ne->protocol, ne->state, ne->dst_group, ne->n_groups, ne->flags, why);
	return -EINVAL;
}

/* d->kind stays NULL: open() reads the entry itself. */
static int netlink_sk_collect(struct file_desc *d)
{
	const NetlinkSkEntry *ne = d->fe->nlsk;
	char what[48];
	int ret;

	if (!ne || ne->id != d->id) {
		pr_err("files.img: netlink socket %u has no netlink entry of its own\n", d->id);
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "netlink socket %u", d->id);
	ret = check_entry(ne, d->id);
	if (!ret)
		ret = sk_opts_check(ne->opts, what);
	return ret ? ret : collect_owner(d, ne->fown);
}

/* The port id first (bind() would pick another for a socket that joins or connects). */
static int bind_and_join(int fd, const NetlinkSkEntry *ne, const char *what)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_pid = ne->portid };

	if (ne->portid && bind(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		pr_perror("%s: cannot bind it to port %u", what, ne->portid);
		return -errno;
	}
	for (size_t w = 0; w < ne->n_groups; w++)
		for (int bit = 0; bit < 32; bit++) {
			int group = w * 32 + bit + 1;

			if (!(ne->groups[w] & (1u << bit)))
				continue;
			if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group,
				       sizeof(group))) {
				pr_perror("%s: cannot join group %d", what, group);
				return -errno;
			}
		}
	return 0;
}

static int connect_peer(int fd, const NetlinkSkEntry *ne, const char *what)
{
	struct sockaddr_nl addr = {
		.nl_family = AF_NETLINK,
		.nl_pid = ne->dst_portid,
		.nl_groups = ne->dst_group ? 1u << (ne->dst_group - 1) : 0,
	};

	if (ne->state != NETLINK_CONNECTED || !connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		return 0;
	pr_perror("%s: cannot connect it to port %u group %u", what, ne->dst_portid,
		  ne->dst_group);
	return -errno;
}

static int netlink_sk_open(const struct file_desc *d)
{
	const NetlinkSkEntry *ne = d->fe->nlsk;
	char what[48];
	int fd, ret;

	snprintf(what, sizeof(what), "netlink socket %u", d->id);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, ne->protocol);
	if (fd < 0) {
		pr_perror("%s: cannot create a socket of protocol %u", what, ne->protocol);
		return -errno;
	}
	ret = bind_and_join(fd, ne, what);
	if (!ret)
		ret = connect_peer(fd, ne, what);
	if (!ret)
		ret = sk_opts_restore(fd, ne->opts, what);
	if (ret) {
		close(fd);
		return ret;
	}
	return restore_status_flags(fd, ne->flags & ~O_ACCMODE, d);
}

const struct fdtype_ops netlink_sk_fdtype_ops = {
	.type = FD_TYPES__NETLINKSK,
	.name = "netlink socket",
	.owns = netlink_sk_owns,
	.dump = netlink_sk_dump,
	.collect = netlink_sk_collect,
	.open = netlink_sk_open,
	.inheritable = true,
};
