/*
 * Packet sockets (AF_PACKET, file_entry.psk): type, protocol, the interface bound to, the
 * PACKET_* options, multicast memberships, fanout and ring geometry, read from sock_diag
 * (packet_diag) of the tree's network namespace. Restore makes a new socket and sets them
 * again. Queued packets are not kept, as in CRIU: packets are lost as on a network. A ring
 * mapped into memory is a VMA of the task (mem.c), mapped again from the restored socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/packet_diag.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "namespaces.h"
#include "sk-opts.h"

#include "sk-packet-sock.pb-c.h"

#define MAX_MC_ADDR 32 /* struct packet_diag_mclist's pdmc_addr */

static bool packet_sk_owns(const struct fd_parms *p)
{
	return sk_is_family(p, AF_PACKET);
}

/* ---------------------------------------------------------------- dump ---- */

/* What packet_diag says of one socket. */
struct packet_diag {
	struct packet_diag_msg msg;
	struct packet_diag_info info;
	struct packet_diag_mclist *mcs;
	size_t nr_mcs;
	bool has_fanout, has_rx, has_tx;
	uint32_t fanout;
	struct packet_diag_ring rx, tx;
};

static int diag_request(int nl)
{
	struct {
		struct nlmsghdr nlh;
		struct packet_diag_req r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.r = { .sdiag_family = AF_PACKET,
		       .pdiag_show = PACKET_SHOW_INFO | PACKET_SHOW_MCLIST | PACKET_SHOW_RING_CFG |
				     PACKET_SHOW_FANOUT },
	};
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		pr_perror("sock_diag: cannot ask for the packet socket table");
		return -errno;
	}
	return 0;
}

static int take_attrs(const struct nlmsghdr *h, struct packet_diag *pd)
{
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(pd->msg));
	const struct rtattr *rta = (const void *)((const char *)NLMSG_DATA(h) + sizeof(pd->msg));

	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		size_t n = RTA_PAYLOAD(rta);

		if (rta->rta_type == PACKET_DIAG_INFO && n >= sizeof(pd->info)) {
			memcpy(&pd->info, RTA_DATA(rta), sizeof(pd->info));
		} else if (rta->rta_type == PACKET_DIAG_MCLIST) {
			pd->nr_mcs = n / sizeof(*pd->mcs);
			pd->mcs = malloc(n ? n : 1);
			if (!pd->mcs) {
				pr_err("sock_diag: out of memory\n");
				return -ENOMEM;
			}
			memcpy(pd->mcs, RTA_DATA(rta), pd->nr_mcs * sizeof(*pd->mcs));
		} else if (rta->rta_type == PACKET_DIAG_FANOUT && n >= sizeof(uint32_t)) {
			pd->has_fanout = true;
			memcpy(&pd->fanout, RTA_DATA(rta), sizeof(pd->fanout));
		} else if (rta->rta_type == PACKET_DIAG_RX_RING && n >= sizeof(pd->rx)) {
			pd->has_rx = true;
			memcpy(&pd->rx, RTA_DATA(rta), sizeof(pd->rx));
		} else if (rta->rta_type == PACKET_DIAG_TX_RING && n >= sizeof(pd->tx)) {
			pd->has_tx = true;
			memcpy(&pd->tx, RTA_DATA(rta), sizeof(pd->tx));
		}
	}
	return 0;
}

/* One answer's messages; *found once ino's is taken; *done at NLMSG_DONE. */
static int read_answer(int nl, char *buf, size_t size, uint32_t ino, struct packet_diag *pd,
		       bool *found, bool *done)
{
	ssize_t len = recv(nl, buf, size, 0);
	const struct nlmsghdr *h;

	if (len < 0) {
		pr_perror("sock_diag: cannot read the packet socket table");
		return -errno;
	}
	for (h = (const void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
		if (h->nlmsg_type == NLMSG_DONE) {
			*done = true;
			return 0;
		}
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			pr_err("sock_diag: the packet socket table: %s\n", strerror(-e->error));
			return e->error ? e->error : -EIO;
		}
		if (((const struct packet_diag_msg *)NLMSG_DATA(h))->pdiag_ino != ino || *found)
			continue;
		memcpy(&pd->msg, NLMSG_DATA(h), sizeof(pd->msg));
		*found = true;
		if (take_attrs(h, pd))
			return -ENOMEM;
	}
	return 0;
}

/* The socket's record, from the table of the tree's network namespace. */
static int read_diag(uint32_t ino, struct packet_diag *pd, const char *what)
{
	bool found = false, done = false;
	size_t size = 64 << 10;
	char *buf = malloc(size);
	int nl, ret;

	if (!buf) {
		pr_err("sock_diag: out of memory\n");
		return -ENOMEM;
	}
	nl = net_tree_socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	ret = nl < 0 ? -EIO : diag_request(nl);
	while (!ret && !done)
		ret = read_answer(nl, buf, size, ino, pd, &found, &done);
	if (nl >= 0)
		close(nl);
	free(buf);
	if (!ret && !found) {
		pr_err("%s: not in the packet sockets of the tree's network namespace\n", what);
		ret = -ENOTSUP;
	}
	return ret;
}

/* PACKET_* options the image has no field for: each must be off, as a new socket has it. */
static const struct sk_opt_name unkept_opts[] = {
	{ PACKET_TX_HAS_OFF, "PACKET_TX_HAS_OFF" },
	{ PACKET_QDISC_BYPASS, "PACKET_QDISC_BYPASS" },
	{ PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING" },
};

static void fill_ring(PacketRing *ring, const struct packet_diag_ring *dr)
{
	ring->block_size = dr->pdr_block_size;
	ring->block_nr = dr->pdr_block_nr;
	ring->frame_size = dr->pdr_frame_size;
	ring->frame_nr = dr->pdr_frame_nr;
	ring->retire_tmo = dr->pdr_retire_tmo;
	ring->sizeof_priv = dr->pdr_sizeof_priv;
	ring->features = dr->pdr_features;
}

/* Each membership once (the kernel counts repeated joins, the image cannot). */
static int fill_mclist(const struct packet_diag *pd, PacketMclist *mcs, PacketMclist **ptrs,
		       const char *what)
{
	for (size_t i = 0; i < pd->nr_mcs; i++) {
		const struct packet_diag_mclist *m = &pd->mcs[i];

		if (m->pdmc_count != 1) {
			pr_err("%s: membership %zu (type %u) joined %u times, which is not "
			       "supported\n",
			       what, i, m->pdmc_type, m->pdmc_count);
			return -ENOTSUP;
		}
		if (m->pdmc_alen > MAX_MC_ADDR) {
			pr_err("%s: membership %zu has a %u-byte address\n", what, i, m->pdmc_alen);
			return -EINVAL;
		}
		packet_mclist__init(&mcs[i]);
		mcs[i].index = m->pdmc_index;
		mcs[i].type = m->pdmc_type;
		mcs[i].addr.len = m->pdmc_alen;
		mcs[i].addr.data = (uint8_t *)m->pdmc_addr;
		ptrs[i] = &mcs[i];
	}
	return 0;
}

static void fill_entry(const struct packet_diag *pd, PacketSockEntry *pe)
{
	const struct packet_diag_info *in = &pd->info;

	pe->type = pd->msg.pdiag_type;
	pe->protocol = htons(pd->msg.pdiag_num);
	pe->ifindex = in->pdi_index;
	pe->version = in->pdi_version;
	pe->reserve = in->pdi_reserve;
	pe->timestamp = in->pdi_tstamp;
	pe->copy_thresh = in->pdi_copy_thresh;
	pe->aux_data = in->pdi_flags & PDI_AUXDATA;
	pe->orig_dev = in->pdi_flags & PDI_ORIGDEV;
	pe->vnet_hdr = in->pdi_flags & PDI_VNETHDR;
	pe->loss = in->pdi_flags & PDI_LOSS;
	pe->has_fanout = pd->has_fanout;
	pe->fanout = pd->fanout;
}

static int packet_sk_dump(const struct fd_parms *p, uint32_t id)
{
	PacketSockEntry pe = PACKET_SOCK_ENTRY__INIT;
	SkOptsEntry opts = SK_OPTS_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	PacketRing rx = PACKET_RING__INIT, tx = PACKET_RING__INIT;
	struct packet_diag pd = {};
	PacketMclist *mcs = NULL, **ptrs = NULL;
	char what[96];
	int fd, ret;

	snprintf(what, sizeof(what), "fd %d of task %d (packet socket %lu)", p->fd, p->pid,
		 (unsigned long)p->st.st_ino);
	ret = read_diag(p->st.st_ino, &pd, what);
	if (!ret && pd.nr_mcs) {
		mcs = calloc(pd.nr_mcs, sizeof(*mcs));
		ptrs = calloc(pd.nr_mcs, sizeof(*ptrs));
		ret = mcs && ptrs ? fill_mclist(&pd, mcs, ptrs, what) : -ENOMEM;
	}
	fd = ret ? -1 : grab_task_fd(p);
	if (!ret && fd < 0)
		ret = fd;
	if (!ret)
		ret = sk_opts_check_off(fd, SOL_PACKET, unkept_opts,
					sizeof(unkept_opts) / sizeof(unkept_opts[0]), what);
	if (!ret)
		ret = sk_opts_dump(fd, &opts, what);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (fd >= 0)
		close(fd);
	if (!ret) {
		fill_entry(&pd, &pe);
		if (pd.has_rx) {
			fill_ring(&rx, &pd.rx);
			pe.rx_ring = &rx;
		}
		if (pd.has_tx) {
			fill_ring(&tx, &pd.tx);
			pe.tx_ring = &tx;
		}
		pe.id = id;
		pe.flags = p->flags;
		pe.fown = &fown;
		pe.opts = &opts;
		pe.n_mclist = pd.nr_mcs;
		pe.mclist = ptrs;
		fe.type = FD_TYPES__PACKETSK;
		fe.id = id;
		fe.psk = &pe;
		pr_debug("%s: type %u protocol %#x ifindex %u version %u, %zu memberships\n", what,
			 pe.type, pe.protocol, pe.ifindex, pe.version, pd.nr_mcs);
		ret = write_file_entry(&fe);
	}
	free(ptrs);
	free(mcs);
	free(pd.mcs);
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

static int check_entry(const PacketSockEntry *pe, uint32_t id)
{
	const char *why = NULL;

	if (pe->type != SOCK_RAW && pe->type != SOCK_DGRAM && pe->type != SOCK_PACKET)
		why = "an unknown socket type";
	else if (pe->protocol > UINT16_MAX)
		why = "a protocol past 16 bits";
	else if ((pe->flags & O_ACCMODE) != O_RDWR)
		why = "open flags that are not O_RDWR";
	else if (pe->type == SOCK_PACKET && (pe->n_mclist || pe->rx_ring || pe->tx_ring ||
					     pe->has_fanout))
		why = "memberships, rings or fanout on a SOCK_PACKET socket";
	for (size_t i = 0; !why && i < pe->n_mclist; i++)
		if (pe->mclist[i]->addr.len > MAX_MC_ADDR)
			why = "a membership address longer than 32 bytes";
	if (!why)
		return 0;
	pr_err("files.img: packet socket %u (type %u, protocol %#x) has %s\n", id, pe->type,
	       pe->protocol, why);
	return -EINVAL;
}

/* d->kind stays NULL: open() reads the entry itself. */
static int packet_sk_collect(struct file_desc *d)
{
	const PacketSockEntry *pe = d->fe->psk;
	char what[48];
	int ret;

	if (!pe || pe->id != d->id) {
		pr_err("files.img: packet socket %u has no packet entry of its own\n", d->id);
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "packet socket %u", d->id);
	ret = check_entry(pe, d->id);
	if (!ret)
		ret = sk_opts_check(pe->opts, what);
	return ret ? ret : collect_owner(d, pe->fown);
}

static int set_packet_opt(int fd, int opt, const char *name, const void *val, socklen_t len,
			  const char *what)
{
	if (!setsockopt(fd, SOL_PACKET, opt, val, len))
		return 0;
	pr_perror("%s: cannot set %s", what, name);
	return -errno;
}

#define SET_INT(fd, opt, val, what)                                                                \
	({                                                                                         \
		int __v = (val);                                                                   \
		set_packet_opt(fd, opt, #opt, &__v, sizeof(__v), what);                           \
	})

/* SOCK_PACKET sockets are bound by the interface's name. */
static int bind_spkt(int fd, const PacketSockEntry *pe, const char *what)
{
	struct sockaddr addr = { .sa_family = AF_PACKET };
	char name[IF_NAMESIZE];

	if (!pe->ifindex)
		return 0;
	if (!if_indextoname(pe->ifindex, name)) {
		pr_perror("%s: no interface %u to bind to", what, pe->ifindex);
		return -errno;
	}
	/* sockaddr's 14 bytes hold the name: the kernel reads no more of it. */
	if (strlen(name) >= sizeof(addr.sa_data)) {
		pr_err("%s: interface name %s is too long to bind a SOCK_PACKET socket to\n", what,
		       name);
		return -ENAMETOOLONG;
	}
	memcpy(addr.sa_data, name, strlen(name));
	if (bind(fd, &addr, sizeof(addr))) {
		pr_perror("%s: cannot bind it to %s", what, name);
		return -errno;
	}
	return 0;
}

static int bind_ll(int fd, const PacketSockEntry *pe, const char *what)
{
	struct sockaddr_ll addr = { .sll_family = AF_PACKET, .sll_ifindex = pe->ifindex,
				    .sll_protocol = pe->protocol };

	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		pr_perror("%s: cannot bind it to interface %u", what, pe->ifindex);
		return -errno;
	}
	return 0;
}

static int set_ring(int fd, int opt, const char *name, const PacketRing *ring, const char *what)
{
	struct tpacket_req3 req = {
		.tp_block_size = ring->block_size, .tp_block_nr = ring->block_nr,
		.tp_frame_size = ring->frame_size, .tp_frame_nr = ring->frame_nr,
		.tp_retire_blk_tov = ring->retire_tmo, .tp_sizeof_priv = ring->sizeof_priv,
		.tp_feature_req_word = ring->features,
	};

	return set_packet_opt(fd, opt, name, &req, sizeof(req), what);
}

static int join_all(int fd, const PacketSockEntry *pe, const char *what)
{
	int ret = 0;

	for (size_t i = 0; i < pe->n_mclist && !ret; i++) {
		const PacketMclist *mc = pe->mclist[i];
		struct {
			struct packet_mreq mreq;
			unsigned char more[MAX_MC_ADDR - 8];
		} m = { .mreq = { .mr_ifindex = mc->index, .mr_type = mc->type,
				  .mr_alen = mc->addr.len } };

		memcpy(m.mreq.mr_address, mc->addr.data, mc->addr.len);
		ret = set_packet_opt(fd, PACKET_ADD_MEMBERSHIP, "PACKET_ADD_MEMBERSHIP", &m,
				     sizeof(m), what);
	}
	return ret;
}

/* The version and the reserve before the rings, which they shape; fanout once bound. */
static int restore_ll(int fd, const PacketSockEntry *pe, const char *what)
{
	int ret = bind_ll(fd, pe, what);

	if (!ret)
		ret = SET_INT(fd, PACKET_VERSION, pe->version, what);
	if (!ret)
		ret = SET_INT(fd, PACKET_RESERVE, pe->reserve, what);
	if (!ret)
		ret = SET_INT(fd, PACKET_TIMESTAMP, pe->timestamp, what);
	if (!ret)
		ret = SET_INT(fd, PACKET_COPY_THRESH, pe->copy_thresh, what);
	if (!ret)
		ret = SET_INT(fd, PACKET_AUXDATA, pe->aux_data, what);
	if (!ret)
		ret = SET_INT(fd, PACKET_ORIGDEV, pe->orig_dev, what);
	if (!ret && pe->vnet_hdr)
		ret = SET_INT(fd, PACKET_VNET_HDR, 1, what);
	if (!ret && pe->loss)
		ret = SET_INT(fd, PACKET_LOSS, 1, what);
	if (!ret)
		ret = join_all(fd, pe, what);
	if (!ret && pe->rx_ring)
		ret = set_ring(fd, PACKET_RX_RING, "PACKET_RX_RING", pe->rx_ring, what);
	if (!ret && pe->tx_ring)
		ret = set_ring(fd, PACKET_TX_RING, "PACKET_TX_RING", pe->tx_ring, what);
	if (!ret && pe->has_fanout)
		ret = SET_INT(fd, PACKET_FANOUT, pe->fanout, what);
	return ret;
}

static int packet_sk_open(const struct file_desc *d)
{
	const PacketSockEntry *pe = d->fe->psk;
	char what[48];
	int fd, ret;

	snprintf(what, sizeof(what), "packet socket %u", d->id);
	fd = socket(AF_PACKET, pe->type | SOCK_CLOEXEC, pe->protocol);
	if (fd < 0) {
		pr_perror("%s: cannot create a socket of type %u protocol %#x", what, pe->type,
			  pe->protocol);
		return -errno;
	}
	ret = pe->type == SOCK_PACKET ? bind_spkt(fd, pe, what) : restore_ll(fd, pe, what);
	if (!ret)
		ret = sk_opts_restore(fd, pe->opts, what);
	if (ret) {
		close(fd);
		return ret;
	}
	return restore_status_flags(fd, pe->flags & ~O_ACCMODE, d);
}

const struct fdtype_ops packet_sk_fdtype_ops = {
	.type = FD_TYPES__PACKETSK,
	.name = "packet socket",
	.owns = packet_sk_owns,
	.dump = packet_sk_dump,
	.collect = packet_sk_collect,
	.open = packet_sk_open,
	.inheritable = true,
};
