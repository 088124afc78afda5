/*
 * Network namespaces: the links (netdev-ID.img), the sysctls under net/ (netns-ID.img),
 * and, as CRIU keeps them, the addresses, routes and rules as `ip ... save` writes them and
 * iptables as iptables-save writes it (raw images; nftables in net-nft.c). Restore builds the
 * namespace in criu itself right before it forks the root, which is born into it (enter),
 * and goes back to its own after (leave): the outer end of a veth link is made in criu's
 * namespace. A root with a user namespace of its own is cloned into a new net namespace
 * with it instead, which the kernel makes the new user namespace's (its root administers
 * it, as in a rootless container): criu fills it from outside, before the root takes its
 * first step (born).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <linux/net_namespace.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "net-nft.h"
#include "servicefd.h"
#include "tool.h"
#include "tun.h"

#include "macvlan.pb-c.h"
#include "netdev.pb-c.h"

/*
 * The per-device settings, in the order CRIU's images list them: conf4[i] and conf6[i]
 * are the i-th name's (net/ipv4/conf/DEV/NAME, net/ipv6/conf/DEV/NAME).
 */
static const char *const conf4_names[] = {
	"accept_local",
	"accept_redirects",
	"accept_source_route",
	"arp_accept",
	"arp_announce",
	"arp_filter",
	"arp_ignore",
	"arp_notify",
	"bootp_relay",
	"disable_policy",
	"disable_xfrm",
	"force_igmp_version",
	"forwarding",
	"igmpv2_unsolicited_report_interval",
	"igmpv3_unsolicited_report_interval",
	"log_martians",
	"medium_id",
	"promote_secondaries",
	"proxy_arp",
	"proxy_arp_pvlan",
	"route_localnet",
	"rp_filter",
	"secure_redirects",
	"send_redirects",
	"shared_media",
	"src_valid_mark",
	"tag",
	"ignore_routes_with_linkdown",
	"drop_gratuitous_arp",
	"drop_unicast_in_l2_multicast",
};

static const char *const conf6_names[] = {
	"accept_dad",
	"accept_ra",
	"accept_ra_defrtr",
	"accept_ra_from_local",
	"accept_ra_min_hop_limit",
	"accept_ra_mtu",
	"accept_ra_pinfo",
	"accept_ra_rt_info_max_plen",
	"accept_ra_rtr_pref",
	"accept_redirects",
	"accept_source_route",
	"autoconf",
	"dad_transmits",
	"disable_ipv6",
	"drop_unicast_in_l2_multicast",
	"drop_unsolicited_na",
	"force_mld_version",
	"force_tllao",
	"forwarding",
	"hop_limit",
	"ignore_routes_with_linkdown",
	"keep_addr_on_down",
	"max_addresses",
	"max_desync_factor",
	"mldv1_unsolicited_report_interval",
	"mldv2_unsolicited_report_interval",
	"mtu",
	"ndisc_notify",
	"optimistic_dad",
	"proxy_ndp",
	"regen_max_retry",
	"router_probe_interval",
	"router_solicitation_delay",
	"router_solicitation_interval",
	"router_solicitations",
	"stable_secret",
	"suppress_frag_ndisc",
	"temp_prefered_lft",
	"temp_valid_lft",
	"use_oif_addrs_only",
	"use_optimistic",
	"use_tempaddr",
};

/* The one string among them; the kernel refuses to read it (EIO) until it is set. */
#define STABLE_SECRET "stable_secret"

/* The namespace-wide ones CRIU keeps (netns_entry.unix_conf, .ipv4_sysctl), in order. */
static const char *const unix_names[] = {"unix/max_dgram_qlen"};
static const char *const ipv4_names[] = {"ipv4/ping_group_range"};

#define NR(a) (sizeof(a) / sizeof((a)[0]))
/* The kernel's longest link-layer address (MAX_ADDR_LEN of linux/netdevice.h). */
#define LINK_ADDR_MAX 32
/* Longest sysctl value kept (CRIU's bound for the string ones). */
#define SYSCTL_MAX 200

/* Restore: what collect() read, and what enter() (or born()) keeps for the fill. */
struct net_state {
	NetnsEntry *netns; /* NULL: --empty-ns net or --join-ns net (nothing to restore) */
	NetDeviceEntry **links;
	size_t nr_links;
	int criu_ns;   /* criu's own network namespace: leave() and the outer veth ends */
	int criu_rtnl; /* rtnetlink in criu's namespace: an outer end into its bridge */
};

/* ------------------------------------------------------------- sysctls ---- */

static int sysctl_path(char *path, size_t len, const char *fmt, const char *proto, const char *dev,
		       const char *name)
{
	int n = snprintf(path, len, fmt, proto, dev, name);

	if (n < 0 || (size_t)n >= len) {
		pr_err("sysctl path for %s/%s too long\n", dev ?: "", name);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* One value read into e (type already set); left unset where the kernel has none. */
static int sysctl_read(const char *path, SysctlEntry *e)
{
	char buf[SYSCTL_MAX + 1];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	n = read(fd, buf, SYSCTL_MAX);
	close(fd);
	/* An unset stable_secret reads as EIO: there is nothing to restore. */
	if (n < 0 && errno == EIO && e->type == SYSCTL_TYPE__CTL_STR)
		return 0;
	if (n < 0) {
		pr_perror("cannot read %s", path);
		return -errno;
	}
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (e->type == SYSCTL_TYPE__CTL_STR) {
		e->sarg = strdup(buf);
		if (!e->sarg) {
			pr_err("%s: out of memory\n", path);
			return -ENOMEM;
		}
		return 0;
	}
	e->iarg = strtol(buf, NULL, 10);
	e->has_iarg = true;
	return 0;
}

static int sysctl_write(const char *path, const SysctlEntry *e)
{
	char buf[32];
	const char *val = buf;
	int fd, ret = 0;

	if (e->type == SYSCTL_TYPE__CTL_STR && e->sarg)
		val = e->sarg;
	else if (e->type == SYSCTL_TYPE__CTL_32 && e->has_iarg)
		snprintf(buf, sizeof(buf), "%d", e->iarg);
	else
		return 0; /* the dumping kernel had none */
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, strlen(val)) < 0) {
		pr_perror("cannot set %s to \"%s\"", path, val);
		ret = -errno;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* A freshly allocated list of n entries, each typed as names[i] wants. */
static SysctlEntry **sysctls_new(const char *const *names, size_t n)
{
	SysctlEntry **list = calloc(n, sizeof(*list) + sizeof(SysctlEntry));
	SysctlEntry *entries = (SysctlEntry *)(list + n);

	if (!list) {
		pr_err("out of memory for %zu sysctls\n", n);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		sysctl_entry__init(&entries[i]);
		entries[i].type =
			strcmp(names[i], STABLE_SECRET) && strcmp(names[i], "ipv4/ping_group_range")
				? SYSCTL_TYPE__CTL_32
				: SYSCTL_TYPE__CTL_STR;
		list[i] = &entries[i];
	}
	return list;
}

static void sysctls_free(SysctlEntry **list, size_t n)
{
	if (!list)
		return;
	for (size_t i = 0; i < n; i++)
		free(list[i]->sarg);
	free(list);
}

/*
 * A list of settings read or written: net/PROTO/conf/DEV/NAME for a device's (dev set),
 * net/NAME for the namespace's (proto and dev NULL).
 */
static int sysctls_op(bool write, const char *proto, const char *dev, const char *const *names,
		      SysctlEntry **list, size_t n)
{
	char path[PATH_MAX];
	ssize_t redirects = -1;
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		/* Written last: setting forwarding resets it (kernel's devinet/addrconf). */
		if (write && !strcmp(names[i], "accept_redirects")) {
			redirects = i;
			continue;
		}
		ret = dev ? sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", proto,
					dev, names[i])
			  : sysctl_path(path, sizeof(path), "/proc/sys/net/%s%s%s", "", "",
					names[i]);
		if (!ret)
			ret = write ? sysctl_write(path, list[i]) : sysctl_read(path, list[i]);
	}
	if (!ret && redirects >= 0 &&
	    !(ret = sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", proto, dev,
				names[redirects])))
		ret = sysctl_write(path, list[redirects]);
	return ret;
}

/* ------------------------------------------------------------ rtnetlink ---- */

struct nl_msg {
	struct nlmsghdr h;
	struct ifinfomsg i;
	char attrs[1024];
};

static struct rtattr *nl_add(struct nl_msg *m, int type, const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)m + NLMSG_ALIGN(m->h.nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static void nl_nest_end(struct nl_msg *m, struct rtattr *nest)
{
	nest->rta_len = (char *)m + m->h.nlmsg_len - (char *)nest;
}

static void nl_init(struct nl_msg *m, int type, int flags, int ifindex)
{
	memset(m, 0, sizeof(*m));
	m->h.nlmsg_len = NLMSG_LENGTH(sizeof(m->i));
	m->h.nlmsg_type = type;
	m->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	m->i.ifi_family = AF_UNSPEC;
	m->i.ifi_index = ifindex;
}

static int rtnl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		pr_perror("cannot open a rtnetlink socket");
	return fd < 0 ? -errno : fd;
}

/* Sends a request and waits for its acknowledgement: 0 or the kernel's -errno. */
/* A request and its acknowledgement: 0 or -errno, logged unless it is quiet_err. */
static int rtnl_talk_quiet(int fd, struct nl_msg *m, const char *what, int quiet_err)
{
	char buf[4096];
	ssize_t n;

	if (send(fd, m, m->h.nlmsg_len, 0) < 0) {
		pr_perror("%s: cannot send the request", what);
		return -errno;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		pr_perror("%s: no answer", what);
		return -errno;
	}
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		const struct nlmsgerr *err = NLMSG_DATA(h);

		if (h->nlmsg_type != NLMSG_ERROR)
			continue;
		if (err->error && err->error != quiet_err)
			pr_err("%s: %s\n", what, strerror(-err->error));
		return err->error;
	}
	pr_err("%s: no acknowledgement\n", what);
	return -EIO;
}

static int rtnl_talk(int fd, struct nl_msg *m, const char *what)
{
	return rtnl_talk_quiet(fd, m, what, 0);
}

/* The attributes of one nested (or top-level) list, by type; the rest NULL. */
static void rta_parse(struct rtattr **tb, int max, struct rtattr *rta, int len)
{
	memset(tb, 0, sizeof(*tb) * (max + 1));
	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type <= max)
			tb[rta->rta_type] = rta;
}

/* ------------------------------------------------------------------ dump ---- */

/*
 * Dump: the nsids the tree's net namespaces have for one another (a link's
 * IFLA_LINK_NETNSID names its peer's namespace so), read by the main process before the
 * namespaces are dumped, each from a child joined to one.
 */
struct nsid_map {
	uint32_t ns_id;	     /* the namespace the nsid is of */
	int32_t nsid;	     /* as it names ... */
	uint32_t peer_ns_id; /* ... this one of the tree's */
};
#define NSID_MAPS_MAX 64
static struct nsid_map nsid_maps[NSID_MAPS_MAX];
static size_t nr_nsid_maps;

/* The tree's namespace that nsid names in ns, or 0 (one outside the tree). */
static uint32_t tree_ns_of_nsid(const struct ns_id *ns, int32_t nsid)
{
	for (size_t i = 0; i < nr_nsid_maps; i++)
		if (nsid_maps[i].ns_id == ns->id && nsid_maps[i].nsid == nsid)
			return nsid_maps[i].peer_ns_id;
	return 0;
}

/* A macvlan link's mode and flags (IFLA_INFO_DATA), as CRIU keeps them. */
static void macvlan_entry(struct rtattr *data, MacvlanLinkEntry *mv)
{
	struct rtattr *tb[IFLA_MACVLAN_MAX + 1];

	if (!data)
		return;
	rta_parse(tb, IFLA_MACVLAN_MAX, RTA_DATA(data), RTA_PAYLOAD(data));
	if (tb[IFLA_MACVLAN_MODE])
		mv->mode = *(uint32_t *)RTA_DATA(tb[IFLA_MACVLAN_MODE]);
	if (tb[IFLA_MACVLAN_FLAGS]) {
		mv->has_flags = true;
		mv->flags = *(uint16_t *)RTA_DATA(tb[IFLA_MACVLAN_FLAGS]);
	}
}

/*
 * One link as its netdev entry. The loopback, the inner ends of veth pairs whose other
 * end is in another namespace, macvlan links whose lower link is in another namespace and
 * bridges are what restore can make again (a link may have a bridge of the namespace as
 * its master); anything else is refused with its name and kind. A bridge comes back with
 * its address, MTU and flags, and the kernel's defaults for its own settings (STP,
 * timers...), as CRIU restores one.
 */
static int link_entry(const struct ns_id *ns, struct ifinfomsg *ifi, struct rtattr **tb,
		      NetDeviceEntry *nde, MacvlanLinkEntry *mv, TunLinkEntry *tun)
{
	struct rtattr *info[IFLA_INFO_MAX + 1] = {};
	const char *kind = "";

	if (!tb[IFLA_IFNAME] || !tb[IFLA_MTU]) {
		pr_err("net namespace %u: link %d has no name or MTU\n", ns->id, ifi->ifi_index);
		return -EINVAL;
	}
	nde->name = RTA_DATA(tb[IFLA_IFNAME]);
	nde->ifindex = ifi->ifi_index;
	nde->mtu = *(uint32_t *)RTA_DATA(tb[IFLA_MTU]);
	nde->flags = ifi->ifi_flags;
	if (tb[IFLA_LINKINFO])
		rta_parse(info, IFLA_INFO_MAX, RTA_DATA(tb[IFLA_LINKINFO]),
			  RTA_PAYLOAD(tb[IFLA_LINKINFO]));
	if (info[IFLA_INFO_KIND])
		kind = RTA_DATA(info[IFLA_INFO_KIND]);
	if (ifi->ifi_type == ARPHRD_LOOPBACK) {
		nde->type = ND_TYPE__LOOPBACK;
		/* As CRIU writes it: the loopback is its own peer, in this namespace. */
		nde->has_peer_ifindex = nde->has_peer_nsid = true;
		nde->peer_ifindex = ifi->ifi_index;
		nde->peer_nsid = ns->id;
		return 0;
	}
	if (!strcmp(kind, "bridge")) {
		nde->type = ND_TYPE__BRIDGE;
	} else if (!strcmp(kind, "veth") && tb[IFLA_LINK_NETNSID]) {
		nde->type = ND_TYPE__VETH;
		/* A peer in another of the tree's namespaces: which one (CRIU's peer_nsid). */
		nde->peer_nsid = tree_ns_of_nsid(ns, *(int32_t *)RTA_DATA(tb[IFLA_LINK_NETNSID]));
		nde->has_peer_nsid = nde->peer_nsid != 0;
	} else if (!strcmp(kind, "macvlan") && tb[IFLA_LINK_NETNSID]) {
		nde->type = ND_TYPE__MACVLAN;
		macvlan_entry(info[IFLA_INFO_DATA], mv);
		nde->macvlan = mv;
	} else if (!strcmp(kind, "tun")) {
		int ret = tun_link_dump(ns, info[IFLA_INFO_DATA], nde->name, tun);

		if (ret)
			return ret;
		nde->type = ND_TYPE__TUN;
		nde->tun = tun;
	} else {
		pr_err("net namespace %u: link %s (index %d) is %s%s: only the loopback, bridges, "
		       "tun/tap links, and veth and macvlan links whose peer or lower link is "
		       "outside are supported\n",
		       ns->id, nde->name, ifi->ifi_index, *kind ? "a " : "of no kind", kind);
		return -ENOTSUP;
	}
	if (tb[IFLA_MASTER]) {
		nde->has_master = true;
		nde->master = *(uint32_t *)RTA_DATA(tb[IFLA_MASTER]);
	}
	if (nde->type == ND_TYPE__VETH && tb[IFLA_LINK]) {
		nde->has_peer_ifindex = true;
		nde->peer_ifindex = *(uint32_t *)RTA_DATA(tb[IFLA_LINK]);
	}
	if (tb[IFLA_ADDRESS]) {
		nde->has_address = true;
		nde->address.data = RTA_DATA(tb[IFLA_ADDRESS]);
		nde->address.len = RTA_PAYLOAD(tb[IFLA_ADDRESS]);
	}
	return 0;
}

static const char *link_kind_name(NdType type)
{
	switch (type) {
	case ND_TYPE__LOOPBACK:
		return "loopback";
	case ND_TYPE__BRIDGE:
		return "bridge";
	case ND_TYPE__MACVLAN:
		return "macvlan";
	case ND_TYPE__TUN:
		return "tun";
	default:
		return "veth";
	}
}

/*
 * A nested namespace is made again by the root task alone: a link of it whose peer or
 * lower link is outside it (in another of the tree's, or criu's) cannot be.
 */
static int check_nested_link(const struct ns_id *ns, const NetDeviceEntry *nde)
{
	const struct ns_id *root = ns_root_own(NS_NET);

	if (ns == root || nde->type == ND_TYPE__LOOPBACK || nde->type == ND_TYPE__BRIDGE ||
	    nde->type == ND_TYPE__TUN ||
	    (nde->type == ND_TYPE__VETH && nde->has_peer_nsid && nde->peer_nsid == root->id))
		return 0;
	pr_err("nested net namespace %u: link %s is a %s: only the loopback, bridges, tun/tap "
	       "and veth links whose peer is in the root's net namespace are supported in a "
	       "nested one\n",
	       ns->id, nde->name, link_kind_name(nde->type));
	return -ENOTSUP;
}

static int dump_link(const struct ns_id *ns, struct cr_img *img, struct nlmsghdr *h)
{
	NetDeviceEntry nde = NET_DEVICE_ENTRY__INIT;
	MacvlanLinkEntry mv = MACVLAN_LINK_ENTRY__INIT;
	TunLinkEntry tun = TUN_LINK_ENTRY__INIT;
	struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct rtattr *tb[IFLA_MAX + 1];
	int ret;

	rta_parse(tb, IFLA_MAX, IFLA_RTA(ifi), IFLA_PAYLOAD(h));
	ret = link_entry(ns, ifi, tb, &nde, &mv, &tun) ?: check_nested_link(ns, &nde);
	if (ret)
		return ret;
	nde.n_conf4 = NR(conf4_names);
	nde.n_conf6 = NR(conf6_names);
	nde.conf4 = sysctls_new(conf4_names, nde.n_conf4);
	nde.conf6 = sysctls_new(conf6_names, nde.n_conf6);
	ret = !nde.conf4 || !nde.conf6 ? -ENOMEM : 0;
	if (!ret)
		ret = sysctls_op(false, "ipv4", nde.name, conf4_names, nde.conf4, nde.n_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv6", nde.name, conf6_names, nde.conf6, nde.n_conf6);
	if (!ret)
		ret = pb_write_one(img, &nde);
	if (!ret)
		pr_info("net namespace %u: link %s (index %u, %s), MTU %u, flags %#x\n", ns->id,
			nde.name, nde.ifindex, link_kind_name(nde.type), nde.mtu, nde.flags);
	sysctls_free(nde.conf4, nde.n_conf4);
	sysctls_free(nde.conf6, nde.n_conf6);
	return ret;
}

/*
 * A dump request (RTM_GETLINK, RTM_GETRULE, ...) of one family: cb(arg, message) for each
 * answer, until one fails (its -errno returned) or the kernel is done.
 */
static int rtnl_dump(const struct ns_id *ns, int type, int family,
		     int (*cb)(void *arg, struct nlmsghdr *h), void *arg)
{
	struct {
		struct nlmsghdr h;
		struct rtgenmsg g;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = type,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		 .g = {.rtgen_family = family}};
	static char buf[32768];
	bool done = false;
	int fd, ret = 0;

	fd = rtnl_open();
	if (fd < 0)
		return fd;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		pr_perror("net namespace %u: cannot send netlink dump request %d", ns->id, type);
		ret = -errno;
	}
	while (!ret && !done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0) {
			pr_perror("net namespace %u: reading netlink dump %d", ns->id, type);
			ret = -EIO;
		}
		for (; !ret && !done && n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
			} else if (h->nlmsg_type == NLMSG_ERROR) {
				pr_err("net namespace %u: netlink dump %d: %s\n", ns->id, type,
				       strerror(-((struct nlmsgerr *)NLMSG_DATA(h))->error));
				ret = -EIO;
			} else {
				ret = cb(arg, h);
			}
		}
	}
	close(fd);
	return ret;
}

struct link_dump {
	const struct ns_id *ns;
	struct cr_img *img;
};

static int dump_link_cb(void *arg, struct nlmsghdr *h)
{
	struct link_dump *ld = arg;

	return h->nlmsg_type == RTM_NEWLINK ? dump_link(ld->ns, ld->img, h) : 0;
}

/* Every link of the namespace (RTM_GETLINK dump) into netdev-ID.img. */
static int dump_links(const struct ns_id *ns)
{
	struct link_dump ld = {ns, open_image(CR_IMG_NETDEV, O_WRONLY, ns->id)};
	int ret;

	if (!ld.img)
		return -EIO;
	ret = rtnl_dump(ns, RTM_GETLINK, AF_UNSPEC, dump_link_cb, &ld);
	close_image(ld.img);
	return ret;
}

/* One of the kernel's own rules of a new namespace (lookup local at 0, main at 32766). */
static bool rule_is_default(struct nlmsghdr *h)
{
	struct fib_rule_hdr *frh = NLMSG_DATA(h);
	struct rtattr *tb[FRA_MAX + 1];
	uint32_t prio = 0;

	rta_parse(tb, FRA_MAX, (struct rtattr *)((char *)frh + NLMSG_ALIGN(sizeof(*frh))),
		  h->nlmsg_len - NLMSG_LENGTH(sizeof(*frh)));
	if (tb[FRA_PRIORITY])
		prio = *(uint32_t *)RTA_DATA(tb[FRA_PRIORITY]);
	/* The selectors a rule of the user's would have (the kernel's have none). */
	if (tb[FRA_SRC] || tb[FRA_DST] || tb[FRA_IIFNAME] || tb[FRA_OIFNAME] || tb[FRA_FWMARK] ||
	    frh->src_len || frh->dst_len)
		return false;
	return (prio == 0 && frh->table == RT_TABLE_LOCAL) ||
	       (prio == 32766 && frh->table == RT_TABLE_MAIN);
}

/*
 * How ip and the iptables tools run here: in criu's current namespaces (the root task's, when
 * it fills a nested one), as that user namespace's root, stdin from in_fd, stdout to out_fd
 * (-1: /dev/null and the log), a non-zero exit status an error.
 */
static struct tool_run ns_net_tool(const char *const argv[], int in_fd, int out_fd)
{
	return (struct tool_run){ .argv = argv,
				  .net_ns_fd = -1,
				  .in_fd = in_fd,
				  .out_fd = out_fd,
				  .must_succeed = true,
				  .as_ns_root = true };
}

/* A raw image filled by a tool's output. */
static int dump_tool_output(enum cr_img_type type, const struct ns_id *ns, const char *const argv[])
{
	struct cr_img *img = open_image(type, O_WRONLY, ns->id);
	int ret;

	if (!img)
		return -EIO;
	ret = tool_run(ns_net_tool(argv, -1, img->fd));
	close_image(img);
	return ret;
}

/*
 * Routes as `ip route save` wrote them (a magic, then RTM_NEWROUTE messages), made
 * restorable, in place: the kernel's own (proto kernel, and the local table) go, as adding
 * the addresses makes them again, and so do the flags a link without carrier gives a route
 * (DEAD, LINKDOWN), which the kernel refuses in a request. The length kept.
 */
static size_t routes_restorable(char *buf, size_t len)
{
	size_t kept = sizeof(uint32_t), at = sizeof(uint32_t);

	if (len < sizeof(uint32_t))
		return len;
	while (NLMSG_OK((struct nlmsghdr *)(buf + at), len - at)) {
		struct nlmsghdr *h = (struct nlmsghdr *)(buf + at);
		struct rtmsg *rtm = NLMSG_DATA(h);
		size_t size = NLMSG_ALIGN(h->nlmsg_len);

		at += size;
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*rtm)) ||
		    rtm->rtm_protocol == RTPROT_KERNEL || rtm->rtm_table == RT_TABLE_LOCAL)
			continue;
		rtm->rtm_flags &= ~(RTNH_F_DEAD | RTNH_F_LINKDOWN);
		memmove(buf + kept, h, size);
		kept += size;
	}
	return kept;
}

/* The routes image just written, made restorable (the image is open for writing only). */
static int filter_routes(struct cr_img *img)
{
	char *buf = NULL, path[64];
	struct stat st;
	size_t kept;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", img->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		pr_perror("%s: cannot open it again to read it", img->name);
		ret = -errno;
		goto out;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		pr_err("%s: out of memory\n", img->name);
		ret = -ENOMEM;
		goto out;
	}
	if (pread(fd, buf, st.st_size, 0) != st.st_size) {
		pr_perror("%s: cannot read it back", img->name);
		ret = -EIO;
		goto out;
	}
	kept = routes_restorable(buf, st.st_size);
	if (ftruncate(fd, 0) || pwrite(fd, buf, kept, 0) != (ssize_t)kept) {
		pr_perror("%s: cannot rewrite it", img->name);
		ret = -EIO;
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Every table's routes of one family (`ip [-6] route save table all`), filtered. */
static int dump_routes(const struct ns_id *ns, enum cr_img_type type, const char *const argv[])
{
	struct cr_img *img = open_image(type, O_WRONLY, ns->id);
	int ret;

	if (!img)
		return -EIO;
	ret = tool_run(ns_net_tool(argv, -1, img->fd)) ?: filter_routes(img);
	close_image(img);
	return ret;
}

/*
 * The rules: `ip rule save` writes the IPv4 ones only, as CRIU keeps them; the IPv6 ones of
 * `ip -6 rule save` but the kernel's own follow in the same image, without their magic,
 * so that `ip rule restore` (upstream's too, which flushes the IPv4 defaults only) adds
 * them without making the kernel's twice.
 */
static int dump_rules(const struct ns_id *ns)
{
	static const char *const rule[] = {"ip", "rule", "save", NULL};
	static const char *const rule6[] = {"ip", "-6", "rule", "save", NULL};
	struct cr_img *img = open_image(CR_IMG_RULE, O_WRONLY, ns->id);
	char *buf = NULL;
	struct stat st;
	int ret, fd;

	if (!img)
		return -EIO;
	fd = memfd_create("rules6", MFD_CLOEXEC);
	ret = fd < 0 ? -errno :
		       tool_run(ns_net_tool(rule, -1, img->fd)) ?: tool_run(ns_net_tool(rule6, -1, fd));
	if (!ret && (fstat(fd, &st) || !(buf = malloc(st.st_size + 1)) ||
		     pread(fd, buf, st.st_size, 0) != st.st_size)) {
		pr_perror("%s: cannot read the IPv6 rules back", img->name);
		ret = -EIO;
	}
	for (size_t at = sizeof(uint32_t);
	     !ret && NLMSG_OK((struct nlmsghdr *)(buf + at), st.st_size - at);) {
		struct nlmsghdr *h = (struct nlmsghdr *)(buf + at);

		at += NLMSG_ALIGN(h->nlmsg_len);
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct fib_rule_hdr)) || rule_is_default(h))
			continue;
		ret = img_write_raw(img, h, NLMSG_ALIGN(h->nlmsg_len));
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	close_image(img);
	return ret;
}

/* Whether the kernel has a table of this family in the namespace (/proc/net/NAME). */
static int has_tables(const char *names, bool *has)
{
	char path[64], c;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/net/%s", names);
	*has = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : (pr_perror("cannot open %s", path), -errno);
	n = read(fd, &c, 1);
	close(fd);
	*has = n > 0;
	return 0;
}

/*
 * A tool's output, as it printed it, into img: its lines but the network lock's own (the
 * dump saves the tables while the namespace is locked, net-lock.c), and with skip_filter
 * not its filter table (the lock made it: net-lock.c), through a memfd.
 */
static int save_tool_output(struct cr_img *img, const char *const argv[], bool skip_filter)
{
	int fd = memfd_create(argv[0], MFD_CLOEXEC), ret;
	bool in_filter = false;
	char *buf = NULL;
	off_t size;

	if (fd < 0) {
		pr_perror("%s: cannot make a memfd for its output", argv[0]);
		return -errno;
	}
	ret = tool_run(ns_net_tool(argv, -1, fd));
	size = ret ? 0 : lseek(fd, 0, SEEK_END);
	if (size > 0) {
		buf = malloc(size);
		if (!buf || pread(fd, buf, size, 0) != size) {
			pr_perror("%s: cannot read its output back", argv[0]);
			ret = -EIO;
		}
	}
	for (off_t at = 0; !ret && buf && at < size;) {
		char *nl = memchr(buf + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (buf + at)) : (size_t)(size - at);
		bool skip = in_filter;

		if (skip_filter && len == 7 && !memcmp(buf + at, "*filter", 7))
			skip = in_filter = true;
		else if (in_filter && len == 6 && !memcmp(buf + at, "COMMIT", 6))
			in_filter = false;
		if (!skip && !netlock_is_lock_rule(buf + at, len))
			ret = img_write_raw(img, buf + at, len + (nl ? 1 : 0));
		at += len + 1;
	}
	free(buf);
	close(fd);
	return ret;
}

/*
 * iptables, whichever backend holds them, one after the other in CRIU's raw image as the
 * tools print them: the legacy tables (iptables-legacy-save, only where the kernel has
 * some: /proc/net/ip_tables_names, so that a namespace without needs no legacy tool), then
 * those made through iptables-nft (iptables-nft-save prints nothing where there are none).
 * Each part starts with its tool's "# Generated by" line, by which restore_iptables()
 * picks the tool that loads it. nftables tables that iptables-nft-save does not print are
 * not iptables' and not saved here.
 */
static int dump_iptables(const struct ns_id *ns, enum cr_img_type type, bool v6)
{
	const char *const legacy[] = { v6 ? "ip6tables-legacy-save" : "iptables-legacy-save",
				       NULL };
	const char *const nft[] = { v6 ? "ip6tables-nft-save" : "iptables-nft-save", NULL };
	struct cr_img *img;
	bool has_legacy;
	int ret;

	ret = has_tables(v6 ? "ip6_tables_names" : "ip_tables_names", &has_legacy);
	if (ret)
		return ret;
	img = open_image(type, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	if (has_legacy)
		ret = save_tool_output(img, legacy, false);
	if (!ret)
		ret = save_tool_output(img, nft, netlock_made_filter_table(v6));
	close_image(img);
	return ret;
}

static int dump_netns_entry(const struct ns_id *ns)
{
	NetnsEntry e = NETNS_ENTRY__INIT;
	struct cr_img *img;
	int ret;

	e.n_def_conf4 = e.n_all_conf4 = NR(conf4_names);
	e.n_def_conf6 = e.n_all_conf6 = NR(conf6_names);
	e.n_unix_conf = NR(unix_names);
	e.n_ipv4_sysctl = NR(ipv4_names);
	e.def_conf4 = sysctls_new(conf4_names, e.n_def_conf4);
	e.all_conf4 = sysctls_new(conf4_names, e.n_all_conf4);
	e.def_conf6 = sysctls_new(conf6_names, e.n_def_conf6);
	e.all_conf6 = sysctls_new(conf6_names, e.n_all_conf6);
	e.unix_conf = sysctls_new(unix_names, e.n_unix_conf);
	e.ipv4_sysctl = sysctls_new(ipv4_names, e.n_ipv4_sysctl);
	ret = e.def_conf4 && e.all_conf4 && e.def_conf6 && e.all_conf6 && e.unix_conf &&
			      e.ipv4_sysctl
		      ? 0
		      : -ENOMEM;
	if (!ret)
		ret = sysctls_op(false, "ipv4", "all", conf4_names, e.all_conf4, e.n_all_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv4", "default", conf4_names, e.def_conf4, e.n_def_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv6", "all", conf6_names, e.all_conf6, e.n_all_conf6);
	if (!ret)
		ret = sysctls_op(false, "ipv6", "default", conf6_names, e.def_conf6, e.n_def_conf6);
	if (!ret)
		ret = sysctls_op(false, NULL, NULL, unix_names, e.unix_conf, e.n_unix_conf);
	if (!ret)
		ret = sysctls_op(false, NULL, NULL, ipv4_names, e.ipv4_sysctl, e.n_ipv4_sysctl);
	img = ret ? NULL : open_image(CR_IMG_NETNS, O_WRONLY, ns->id);
	if (!ret && !img)
		ret = -EIO;
	if (img) {
		ret = pb_write_one(img, &e);
		close_image(img);
	}
	sysctls_free(e.def_conf4, e.n_def_conf4);
	sysctls_free(e.all_conf4, e.n_all_conf4);
	sysctls_free(e.def_conf6, e.n_def_conf6);
	sysctls_free(e.all_conf6, e.n_all_conf6);
	sysctls_free(e.unix_conf, e.n_unix_conf);
	sysctls_free(e.ipv4_sysctl, e.n_ipv4_sysctl);
	return ret;
}

/*
 * The nsid the namespace of socket rtnl has for the one of target_fd (RTM_GETNSID):
 * NETNSA_NSID_NOT_ASSIGNED where it has none. 0 or -errno.
 */
static int get_nsid(int rtnl, int target_fd, int32_t *nsid)
{
	struct {
		struct nlmsghdr h;
		struct rtgenmsg g;
		char pad[3];
		struct rtattr fd_attr;
		uint32_t fd;
	} req = {.h = {.nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETNSID,
		       .nlmsg_flags = NLM_F_REQUEST},
		 .g = {.rtgen_family = AF_UNSPEC},
		 .fd_attr = {.rta_len = RTA_LENGTH(sizeof(uint32_t)), .rta_type = NETNSA_FD},
		 .fd = target_fd};
	char buf[512];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rtattr *rta;
	ssize_t n;
	int len;

	if (send(rtnl, &req, sizeof(req), 0) < 0 || (n = recv(rtnl, buf, sizeof(buf), 0)) < 0) {
		pr_perror("RTM_GETNSID");
		return -errno;
	}
	if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_type != RTM_NEWNSID) {
		pr_err("RTM_GETNSID: %s\n", h->nlmsg_type == NLMSG_ERROR ?
			strerror(-((struct nlmsgerr *)NLMSG_DATA(h))->error) : "no answer");
		return -EIO;
	}
	*nsid = NETNSA_NSID_NOT_ASSIGNED;
	len = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct rtgenmsg)));
	for (rta = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct rtgenmsg)));
	     RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type == NETNSA_NSID)
			*nsid = *(int32_t *)RTA_DATA(rta);
	return 0;
}

bool net_has_nsid(void)
{
	int rtnl = rtnl_open(), self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int32_t nsid;
	bool has = rtnl >= 0 && self >= 0 && !get_nsid(rtnl, self, &nsid);

	if (rtnl >= 0)
		close(rtnl);
	if (self >= 0)
		close(self);
	return has;
}

/* Main process: the nsids ns has for the tree's other net namespaces (nsid_maps). */
static int net_dump_check(struct ns_id *ns)
{
	int rtnl = net_ns_socket(ns, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), ret = 0;

	if (rtnl < 0)
		return -EIO;
	for (const struct ns_id *peer = ns_tree_next(NS_NET, NULL); peer && !ret;
	     peer = ns_tree_next(NS_NET, peer)) {
		int32_t nsid = NETNSA_NSID_NOT_ASSIGNED;
		char path[64];
		int fd;

		if (peer == ns)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/net", peer->pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			pr_perror("net namespace %u: cannot open %s", peer->id, path);
			ret = -errno;
			break;
		}
		ret = get_nsid(rtnl, fd, &nsid);
		close(fd);
		if (ret || nsid == NETNSA_NSID_NOT_ASSIGNED)
			continue;
		if (nr_nsid_maps == NSID_MAPS_MAX) {
			pr_err("net namespace %u: too many nsids among the tree's\n", ns->id);
			ret = -E2BIG;
			break;
		}
		nsid_maps[nr_nsid_maps++] = (struct nsid_map){ns->id, nsid, peer->id};
	}
	close(rtnl);
	return ret;
}

/* In a child joined to the namespace (namespaces.c): its links, settings and tables. */
static int net_dump(const struct ns_id *ns)
{
	static const char *const addr[] = {"ip", "addr", "save", NULL};
	static const char *const route[] = {"ip", "route", "save", "table", "all", NULL};
	static const char *const route6[] = {"ip", "-6", "route", "save", "table", "all", NULL};
	int ret;

	if (opts.empty_ns_net) {
		pr_info("net namespace %u: --empty-ns net, not dumped\n", ns->id);
		return 0;
	}
	ret = dump_links(ns);
	if (!ret)
		ret = dump_netns_entry(ns);
	if (!ret)
		ret = dump_tool_output(CR_IMG_IFADDR, ns, addr);
	if (!ret)
		ret = dump_routes(ns, CR_IMG_ROUTE, route);
	if (!ret)
		ret = dump_routes(ns, CR_IMG_ROUTE6, route6);
	if (!ret)
		ret = dump_rules(ns);
	if (!ret)
		ret = dump_iptables(ns, CR_IMG_IPTABLES, false);
	if (!ret)
		ret = dump_iptables(ns, CR_IMG_IP6TABLES, true);
	if (!ret)
		ret = nft_dump_ruleset(ns);
	return ret;
}

int net_tree_socket(int domain, int type, int protocol)
{
	return net_ns_socket(ns_root_own(NS_NET), domain, type, protocol);
}

bool net_has_nested(void)
{
	const struct ns_id *root = ns_root_own(NS_NET);

	return root && ns_tree_next(NS_NET, root);
}

int net_ns_socket(const struct ns_id *ns, int domain, int type, int protocol)
{
	char path[64];
	int own, theirs, fd;

	if (!ns)
		return socket(domain, type, protocol);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", ns->pid);
	own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	theirs = open(path, O_RDONLY | O_CLOEXEC);
	if (own < 0 || theirs < 0 || setns(theirs, CLONE_NEWNET)) {
		pr_perror("net namespace %u: cannot enter it through %s", ns->id, path);
		fd = -1;
	} else {
		fd = socket(domain, type, protocol);
		if (setns(own, CLONE_NEWNET)) {
			pr_perror("cannot go back to criu's own net namespace");
			abort(); /* criu would go on in the tree's namespace */
		}
	}
	if (own >= 0)
		close(own);
	if (theirs >= 0)
		close(theirs);
	return fd;
}

/*
 * IFLA_NEW_IFINDEX (Linux 6.2) in a request that changes nothing: a kernel that knows it
 * refuses the index -1 (its policy wants one from 1), an older one ignores the attribute
 * and answers 0. Asked of the loopback of criu's namespace (CAP_NET_ADMIN).
 */
bool net_has_new_ifindex(void)
{
	int32_t bad_index = -1;
	struct nl_msg m;
	int fd = rtnl_open(), ret;

	if (fd < 0)
		return false;
	nl_init(&m, RTM_NEWLINK, 0, 1);
	nl_add(&m, IFLA_NEW_IFINDEX, &bad_index, sizeof(bad_index));
	ret = rtnl_talk_quiet(fd, &m, "probing IFLA_NEW_IFINDEX", -ERANGE);
	close(fd);
	return ret == -ERANGE;
}

/* --------------------------------------------------------------- restore ---- */

/* Restore: a veth whose peer is in another of the tree's net namespaces (peer_nsid). */
static bool peer_in_tree(const struct ns_id *ns, const NetDeviceEntry *nde)
{
	if (!nde->has_peer_nsid || nde->peer_nsid == ns->id)
		return false;
	for (const struct ns_id *t = ns_tree_next(NS_NET, NULL); t; t = ns_tree_next(NS_NET, t))
		if (t->id == nde->peer_nsid)
			return true;
	return false;
}

static uint32_t max_ifindex(const struct net_state *st)
{
	uint32_t max = 0;

	for (size_t i = 0; i < st->nr_links; i++)
		if (st->links[i]->ifindex > max)
			max = st->links[i]->ifindex;
	return max;
}

/*
 * The name the end of a veth between the root's namespace and a nested one has in the
 * root's until the root task moves it into the nested one: by that one's id and index.
 */
static void tree_peer_name(char *buf, size_t size, uint32_t ns_id, uint32_t ifindex)
{
	snprintf(buf, size, "crv%u.%u", ns_id, ifindex);
}

static int collect_links(struct ns_id *ns, struct net_state *st)
{
	struct cr_img *img = open_image(CR_IMG_NETDEV, O_RDONLY, ns->id);
	NetDeviceEntry *nde;
	int ret;

	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&nde)) > 0) {
		NetDeviceEntry **grown = realloc(st->links, (st->nr_links + 1) * sizeof(*grown));

		if (!grown) {
			pr_err("%s: out of memory\n", img->name);
			pb_free(img, nde);
			ret = -ENOMEM;
			break;
		}
		st->links = grown;
		st->links[st->nr_links++] = nde;
		if (nde->type != ND_TYPE__LOOPBACK && nde->type != ND_TYPE__VETH &&
		    nde->type != ND_TYPE__BRIDGE && nde->type != ND_TYPE__MACVLAN &&
		    nde->type != ND_TYPE__TUN) {
			pr_err("%s: link %s is of type %d: only the loopback, bridges, tun/tap, veth "
			       "and macvlan links are supported\n",
			       img->name, nde->name, nde->type);
			ret = -ENOTSUP;
			break;
		}
		if (nde->type == ND_TYPE__TUN && !nde->tun) {
			pr_err("%s: tun link %.32s has no tun entry\n", img->name, nde->name);
			ret = -EINVAL;
			break;
		}
		/* What goes into a request as it is (nl_msg's room): as the kernel bounds it. */
		if (strlen(nde->name) >= IFNAMSIZ ||
		    (nde->has_address && nde->address.len > LINK_ADDR_MAX)) {
			pr_err("%s: link %.32s: name or address too long\n", img->name, nde->name);
			ret = -EINVAL;
			break;
		}
		/* A peer in another namespace of the images: one of the tree's (create_veth()). */
		if (nde->type == ND_TYPE__VETH && !opts_ext_veth(nde->name) &&
		    !opts_ext_netdev(nde->name) &&
		    !(nde->has_peer_nsid && nde->peer_nsid != ns->id)) {
			pr_err("%s: veth link %s: its outer end must be named with --external "
			       "veth[%s]:NAME (or the link itself with netdev[%s]:NAME)\n",
			       img->name, nde->name, nde->name, nde->name);
			ret = -EINVAL;
			break;
		}
		if (nde->type == ND_TYPE__MACVLAN && !opts_ext_macvlan(nde->name) &&
		    !opts_ext_netdev(nde->name)) {
			pr_err("%s: macvlan link %s: its lower link must be named with --external "
			       "macvlan[%s]:NAME\n",
			       img->name, nde->name, nde->name);
			ret = -EINVAL;
			break;
		}
	}
	close_image(img);
	return ret;
}

/*
 * A nested namespace is made by criu alone, in its own: its links may not reach outside
 * (a veth's peer, a macvlan's lower link), which would be another of the tree's.
 */
static int check_nested_links(const struct ns_id *ns, const struct net_state *st)
{
	if (ns == ns_root_own(NS_NET))
		return 0;
	for (size_t i = 0; i < st->nr_links; i++) {
		const NetDeviceEntry *nde = st->links[i];

		if (nde->type == ND_TYPE__LOOPBACK || nde->type == ND_TYPE__BRIDGE ||
		    nde->type == ND_TYPE__TUN ||
		    (nde->type == ND_TYPE__VETH && nde->has_peer_nsid &&
		     nde->peer_nsid == ns_root_own(NS_NET)->id))
			continue;
		pr_err("nested net namespace %u: link %s is a %s: only the loopback, bridges, "
		       "tun/tap and veth links whose peer is in the root's net namespace are "
		       "restored in a nested one\n",
		       ns->id, nde->name, link_kind_name(nde->type));
		return -ENOTSUP;
	}
	return 0;
}

static int net_collect(struct ns_id *ns)
{
	struct net_state *st = calloc(1, sizeof(*st));
	struct cr_img *img;
	int ret;

	if (!st) {
		pr_err("net namespace %u: out of memory\n", ns->id);
		return -ENOMEM;
	}
	st->criu_ns = st->criu_rtnl = -1;
	ns->priv = st;
	if (ns != ns_root_own(NS_NET) && (opts.join_ns_net || opts.empty_ns_net)) {
		pr_err("net namespace %u: nested net namespaces are not restored with %s\n",
		       ns->id, opts.join_ns_net ? "--join-ns net" : "--empty-ns net");
		return -ENOTSUP;
	}
	if (opts.join_ns_net || opts.empty_ns_net) {
		pr_info("net namespace %u: %s, its images are not restored\n", ns->id,
			opts.join_ns_net ? "--join-ns net" : "--empty-ns net");
		return 0;
	}
	img = open_image(CR_IMG_NETNS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&st->netns);
	if (!ret && st->netns->ext_key) {
		pr_err("%s: the namespace was dumped as an external one (%s): restore it with "
		       "--join-ns net:PATH\n",
		       img->name, st->netns->ext_key);
		ret = -ENOTSUP;
	}
	close_image(img);
	return ret ?: collect_links(ns, st) ?: check_nested_links(ns, st);
}

/*
 * How long a link's name or MAC may stay taken by a link of a namespace going away (the
 * dumped tree's): 5 s.
 */
#define DYING_NS_WAIT_TRIES 100
#define DYING_NS_WAIT_US    50000

/* A request the kernel may refuse with busy_err while a dying namespace holds a link. */
static int rtnl_talk_dying_ns(int rtnl, struct nl_msg *m, const char *what, int busy_err)
{
	for (int tries = 0; tries < DYING_NS_WAIT_TRIES; tries++) {
		int ret = rtnl_talk_quiet(rtnl, m, what, busy_err);

		if (ret != busy_err)
			return ret;
		usleep(DYING_NS_WAIT_US);
	}
	return rtnl_talk(rtnl, m, what);
}

static int set_link(int rtnl, const NetDeviceEntry *nde)
{
	struct nl_msg m;
	char what[64];

	nl_init(&m, RTM_NEWLINK, 0, nde->ifindex);
	m.i.ifi_flags = nde->flags;
	/* What the flags can set; the rest (RUNNING, LOWER_UP, ...) the kernel says. */
	m.i.ifi_change = IFF_UP | IFF_NOARP | IFF_MULTICAST | IFF_ALLMULTI | IFF_PROMISC;
	nl_add(&m, IFLA_MTU, &nde->mtu, sizeof(nde->mtu));
	snprintf(what, sizeof(what), "link %s: setting its MTU and flags", nde->name);
	/*
	 * A macvlan goes up only while no other macvlan of its lower link has its MAC: the
	 * dumped tree's own may still have it until the kernel has torn that tree's network
	 * namespace down, some time after the tree died.
	 */
	return rtnl_talk_dying_ns(rtnl, &m, what, -EADDRINUSE);
}

/* The pair: the inner end here with its index, name and MAC, the outer in criu's. */
static int create_veth(int rtnl, const struct ns_id *ns, const NetDeviceEntry *nde)
{
	const struct net_state *st = ns->priv;
	const struct ext_veth *ext = opts_ext_veth(nde->name);
	struct rtattr *linkinfo, *data, *peer;
	struct ifinfomsg peer_ifi = {};
	char what[64], peer_name[IFNAMSIZ];
	bool in_tree = peer_in_tree(ns, nde);
	struct nl_msg m;

	if (!in_tree && !ext) {
		pr_err("veth link %s: its peer is in net namespace %u, not one of the tree's: name "
		       "its outer end with --external veth[%s]:NAME\n",
		       nde->name, nde->peer_nsid, nde->name);
		return -EINVAL;
	}
	nl_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, nde->ifindex);
	nl_add(&m, IFLA_IFNAME, nde->name, strlen(nde->name) + 1);
	/* Now, not with the flags: its net.ipv6.conf mtu, set before them, may not exceed it. */
	nl_add(&m, IFLA_MTU, &nde->mtu, sizeof(nde->mtu));
	if (nde->has_address)
		nl_add(&m, IFLA_ADDRESS, nde->address.data, nde->address.len);
	linkinfo = nl_add(&m, IFLA_LINKINFO, NULL, 0);
	nl_add(&m, IFLA_INFO_KIND, "veth", 5);
	data = nl_add(&m, IFLA_INFO_DATA, NULL, 0);
	/*
	 * A peer in a nested namespace stays here until the root task makes that one, at an
	 * index above every link of this one: one of theirs it would take fails them (EBUSY).
	 */
	if (in_tree)
		peer_ifi.ifi_index = max_ifindex(st) + nde->ifindex;
	peer = nl_add(&m, VETH_INFO_PEER, &peer_ifi, sizeof(peer_ifi));
	if (in_tree) {
		tree_peer_name(peer_name, sizeof(peer_name), nde->peer_nsid, nde->peer_ifindex);
		nl_add(&m, IFLA_IFNAME, peer_name, strlen(peer_name) + 1);
	} else {
		nl_add(&m, IFLA_IFNAME, ext->outer, strlen(ext->outer) + 1);
		nl_add(&m, IFLA_NET_NS_FD, &st->criu_ns, sizeof(st->criu_ns));
	}
	nl_nest_end(&m, peer);
	nl_nest_end(&m, data);
	nl_nest_end(&m, linkinfo);
	snprintf(what, sizeof(what), "veth %s (outer end %s): cannot create it", nde->name,
		 in_tree ? peer_name : ext->outer);
	/*
	 * The outer name may still be taken by the dumped tree's own end: the kernel removes it
	 * when it has torn the tree's network namespace down, some time after the tree died.
	 */
	return rtnl_talk_dying_ns(rtnl, &m, what, -EEXIST);
}

/* A bridge of the namespace, with its index, name and address; its ports join it later. */
static int create_bridge(int rtnl, const NetDeviceEntry *nde)
{
	struct rtattr *linkinfo;
	struct nl_msg m;
	char what[64];

	nl_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, nde->ifindex);
	nl_add(&m, IFLA_IFNAME, nde->name, strlen(nde->name) + 1);
	if (nde->has_address)
		nl_add(&m, IFLA_ADDRESS, nde->address.data, nde->address.len);
	linkinfo = nl_add(&m, IFLA_LINKINFO, NULL, 0);
	nl_add(&m, IFLA_INFO_KIND, "bridge", 7);
	nl_nest_end(&m, linkinfo);
	snprintf(what, sizeof(what), "bridge %s: cannot create it", nde->name);
	return rtnl_talk(rtnl, &m, what);
}

/*
 * A macvlan link on the lower link --external macvlan[NAME]:OUTER names in criu's
 * namespace: asked of criu's (where the lower link is found by its index) and made in
 * this one, criu's current (IFLA_NET_NS_FD), with its index, name, MAC, mode and flags.
 * Its index is looked up in criu's namespace first, as the kernel does with any request:
 * one taken there fails the creation (EXCL) rather than change criu's link.
 */
static int create_macvlan(const struct net_state *st, const NetDeviceEntry *nde)
{
	const struct ext_link *ext = opts_ext_macvlan(nde->name);
	struct rtattr *linkinfo, *data;
	struct ifreq ifr = {};
	uint32_t lower, mode = nde->macvlan ? nde->macvlan->mode : 0;
	struct nl_msg m;
	char what[96];
	int target, ret;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ext->outer);
	if (ioctl(st->criu_rtnl, SIOCGIFINDEX, &ifr)) {
		pr_perror("macvlan %s: no link %s in criu's net namespace", nde->name, ext->outer);
		return -errno;
	}
	lower = ifr.ifr_ifindex;
	target = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (target < 0) {
		pr_perror("macvlan %s: cannot open the net namespace it goes into", nde->name);
		return -errno;
	}
	nl_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, nde->ifindex);
	nl_add(&m, IFLA_IFNAME, nde->name, strlen(nde->name) + 1);
	nl_add(&m, IFLA_MTU, &nde->mtu, sizeof(nde->mtu));
	if (nde->has_address)
		nl_add(&m, IFLA_ADDRESS, nde->address.data, nde->address.len);
	nl_add(&m, IFLA_LINK, &lower, sizeof(lower));
	nl_add(&m, IFLA_NET_NS_FD, &target, sizeof(target));
	linkinfo = nl_add(&m, IFLA_LINKINFO, NULL, 0);
	nl_add(&m, IFLA_INFO_KIND, "macvlan", 8);
	data = nl_add(&m, IFLA_INFO_DATA, NULL, 0);
	nl_add(&m, IFLA_MACVLAN_MODE, &mode, sizeof(mode));
	if (nde->macvlan && nde->macvlan->has_flags) {
		uint16_t flags = nde->macvlan->flags;

		nl_add(&m, IFLA_MACVLAN_FLAGS, &flags, sizeof(flags));
	}
	nl_nest_end(&m, data);
	nl_nest_end(&m, linkinfo);
	snprintf(what, sizeof(what), "macvlan %s (index %u) on %s: cannot create it", nde->name,
		 nde->ifindex, ext->outer);
	ret = rtnl_talk_quiet(st->criu_rtnl, &m, what, -EEXIST);
	if (ret == -EEXIST)
		pr_err("%s: criu's net namespace has a link of that index\n", what);
	close(target);
	return ret;
}

/*
 * --external netdev[NAME]:OUTER: criu's link OUTER, made by the caller (a veth's end whose
 * peer stays outside), goes into this namespace, criu's current, as the dumped link: with
 * its index (IFLA_NEW_IFINDEX, Linux 6.2), name and MAC. Asked of criu's namespace, where
 * it is found by its index.
 */
static int move_link(int from_rtnl, const char *from, const NetDeviceEntry *nde)
{
	struct ifreq ifr = {};
	int32_t new_index = nde->ifindex;
	struct nl_msg m;
	char what[96];
	int target, ret;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", from);
	if (ioctl(from_rtnl, SIOCGIFINDEX, &ifr)) {
		pr_perror("link %s: no link %s in criu's net namespace", nde->name, from);
		return -errno;
	}
	target = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (target < 0) {
		pr_perror("link %s: cannot open the net namespace it goes into", nde->name);
		return -errno;
	}
	nl_init(&m, RTM_NEWLINK, 0, ifr.ifr_ifindex);
	nl_add(&m, IFLA_NET_NS_FD, &target, sizeof(target));
	nl_add(&m, IFLA_NEW_IFINDEX, &new_index, sizeof(new_index));
	nl_add(&m, IFLA_IFNAME, nde->name, strlen(nde->name) + 1);
	if (nde->has_address)
		nl_add(&m, IFLA_ADDRESS, nde->address.data, nde->address.len);
	snprintf(what, sizeof(what), "link %s (index %u): cannot move criu's %s in", nde->name,
		 nde->ifindex, from);
	ret = rtnl_talk(from_rtnl, &m, what);
	close(target);
	return ret;
}

static int move_netdev(const struct net_state *st, const NetDeviceEntry *nde)
{
	return move_link(st->criu_rtnl, opts_ext_netdev(nde->name)->outer, nde);
}

/*
 * In a nested namespace (the root task, criu_rtnl then the root's namespace's): its end of
 * a veth whose peer is in the root's, made there by criu (create_veth()).
 */
static int move_tree_peer(const struct ns_id *ns, const NetDeviceEntry *nde)
{
	const struct net_state *st = ns->priv;
	char name[IFNAMSIZ];

	tree_peer_name(name, sizeof(name), ns->id, nde->ifindex);
	return move_link(st->criu_rtnl, name, nde);
}

/* Once every link exists: each port into its bridge (IFLA_MASTER). */
static int set_masters(int rtnl, const struct net_state *st)
{
	int ret = 0;

	for (size_t i = 0; i < st->nr_links && !ret; i++) {
		const NetDeviceEntry *nde = st->links[i];
		struct nl_msg m;
		char what[64];

		if (!nde->has_master)
			continue;
		nl_init(&m, RTM_NEWLINK, 0, nde->ifindex);
		nl_add(&m, IFLA_MASTER, &nde->master, sizeof(nde->master));
		snprintf(what, sizeof(what), "link %s: cannot put it into link %u", nde->name,
			 nde->master);
		ret = rtnl_talk(rtnl, &m, what);
	}
	return ret;
}

/* --external veth[IN]:OUT@BRIDGE: the outer end joins the bridge, in criu's namespace. */
static int enslave_outer(const struct net_state *st, const struct ext_veth *ext)
{
	struct ifreq ifr = {};
	struct nl_msg m;
	char what[96];
	uint32_t bridge;

	if (!ext->bridge)
		return 0;
	/* Any socket answers SIOCGIFINDEX for the namespace it was made in: criu's. */
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ext->bridge);
	if (ioctl(st->criu_rtnl, SIOCGIFINDEX, &ifr)) {
		pr_perror("veth %s: no bridge %s in criu's net namespace", ext->inner, ext->bridge);
		return -errno;
	}
	bridge = ifr.ifr_ifindex;
	nl_init(&m, RTM_NEWLINK, 0, 0);
	nl_add(&m, IFLA_IFNAME, ext->outer, strlen(ext->outer) + 1);
	nl_add(&m, IFLA_MASTER, &bridge, sizeof(bridge));
	snprintf(what, sizeof(what), "veth %s: cannot put its outer end %s into bridge %s",
		 ext->inner, ext->outer, ext->bridge);
	return rtnl_talk(st->criu_rtnl, &m, what);
}

/*
 * A link going up takes its MTU as its net.ipv6.conf mtu again (addrconf's NETDEV_UP): the
 * image's, written with the others before the flags, goes in once more after them.
 */
static int rewrite_ipv6_mtu(const NetDeviceEntry *nde)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < NR(conf6_names) && i < nde->n_conf6; i++)
		if (!strcmp(conf6_names[i], "mtu"))
			break;
	if (i == NR(conf6_names) || i == nde->n_conf6)
		return 0;
	return sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", "ipv6", nde->name,
			   "mtu") ?:
	       sysctl_write(path, nde->conf6[i]);
}

/* Set while the root task fills the nested namespaces: it writes as the tree sees ids. */
static bool filled_by_tree;

/* A link made (or the loopback found) with its settings, still down. */
static int make_link(int rtnl, const struct ns_id *ns, const NetDeviceEntry *nde)
{
	const struct net_state *st = ns->priv;
	int ret = 0;

	if (nde->type != ND_TYPE__LOOPBACK && opts_ext_netdev(nde->name)) {
		ret = move_netdev(st, nde);
	} else if (nde->type == ND_TYPE__VETH && ns != ns_root_own(NS_NET) &&
		   peer_in_tree(ns, nde)) {
		ret = move_tree_peer(ns, nde);
	} else if (nde->type == ND_TYPE__VETH) {
		ret = create_veth(rtnl, ns, nde);
		if (!ret && !peer_in_tree(ns, nde))
			ret = enslave_outer(st, opts_ext_veth(nde->name));
	} else if (nde->type == ND_TYPE__BRIDGE) {
		ret = create_bridge(rtnl, nde);
	} else if (nde->type == ND_TYPE__MACVLAN) {
		ret = create_macvlan(st, nde);
	} else if (nde->type == ND_TYPE__TUN) {
		/* The tasks' files attach to it later, by name (files-tun.c). */
		ret = tun_link_create(nde, filled_by_tree || !ns_root_own(NS_USER));
	}
	if (!ret)
		ret = sysctls_op(true, "ipv4", nde->name, conf4_names, nde->conf4,
				 nde->n_conf4 < NR(conf4_names) ? nde->n_conf4 : NR(conf4_names));
	if (!ret)
		ret = sysctls_op(true, "ipv6", nde->name, conf6_names, nde->conf6,
				 nde->n_conf6 < NR(conf6_names) ? nde->n_conf6 : NR(conf6_names));
	return ret;
}

/* Its MTU and flags (up), once its ports are in it if it is a bridge. */
static int raise_link(int rtnl, const NetDeviceEntry *nde)
{
	int ret = set_link(rtnl, nde);

	if (!ret && (nde->flags & IFF_UP))
		ret = rewrite_ipv6_mtu(nde);
	if (!ret)
		pr_info("link %s (index %u) restored\n", nde->name, nde->ifindex);
	return ret;
}

/* A list of the image's, no longer than the names this criu knows. */
#define CONF_OP(proto, dev, names, list, n)                                                        \
	sysctls_op(true, proto, dev, names, list, (n) < NR(names) ? (n) : NR(names))

/*
 * net.ipv4.ping_group_range holds gids, which the kernel reads as the writer's user
 * namespace sees them: the image's, as the tree sees them, go in as criu sees them (as
 * they are, written by the root task).
 */
static int ping_range_to_host(const SysctlEntry *e, SysctlEntry *host, char *buf, size_t size)
{
	const char *what = "net.ipv4.ping_group_range";
	unsigned int low, high;
	uint32_t host_low, host_high;
	int ret;

	*host = *e;
	if (!e->sarg)
		return 0;
	if (sscanf(e->sarg, "%u %u", &low, &high) != 2) {
		pr_err("netns image: %s \"%.32s\" is not two gids\n", what, e->sarg);
		return -EINVAL;
	}
	if (filled_by_tree)
		return 0;
	ret = userns_host_gid(low, &host_low, what) ?: userns_host_gid(high, &host_high, what);
	snprintf(buf, size, "%u\t%u", host_low, host_high);
	host->sarg = buf;
	return ret;
}

static int restore_netns_sysctls(const NetnsEntry *e)
{
	SysctlEntry ping_range, *ipv4[NR(ipv4_names)];
	char range[32];
	int ret;

	if (e->n_def_conf || e->n_all_conf) {
		pr_err("netns image: settings in CRIU's old format (def_conf): not supported\n");
		return -ENOTSUP;
	}
	ret = CONF_OP("ipv4", "all", conf4_names, e->all_conf4, e->n_all_conf4);
	if (!ret)
		ret = CONF_OP("ipv4", "default", conf4_names, e->def_conf4, e->n_def_conf4);
	if (!ret)
		ret = CONF_OP("ipv6", "all", conf6_names, e->all_conf6, e->n_all_conf6);
	if (!ret)
		ret = CONF_OP("ipv6", "default", conf6_names, e->def_conf6, e->n_def_conf6);
	if (!ret)
		ret = CONF_OP(NULL, NULL, unix_names, e->unix_conf, e->n_unix_conf);
	if (!ret && e->n_ipv4_sysctl) {
		ret = ping_range_to_host(e->ipv4_sysctl[0], &ping_range, range, sizeof(range));
		ipv4[0] = &ping_range;
	}
	if (!ret)
		ret = CONF_OP(NULL, NULL, ipv4_names, ipv4, e->n_ipv4_sysctl);
	return ret;
}

/* A raw image fed to a tool's stdin; an empty (or, for optional ones, missing) one skipped. */
static int restore_tool_input(enum cr_img_type type, const struct ns_id *ns, bool optional,
			      const char *const argv[])
{
	struct cr_img *img;
	int ret;

	if (optional && !img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = img->size ? tool_run(ns_net_tool(argv, img->fd, -1)) : 0;
	close_image(img);
	return ret;
}

/*
 * The restore tool of the part of an iptables image that header starts ("# Generated by
 * TOOL vX.Y (BACKEND) on DATE", as iptables-*-save print it): iptables-nft's names
 * nf_tables, iptables-legacy-save calls itself iptables-save; a part without one (an image
 * made by hand) goes to the system's iptables-restore.
 */
static const char *iptables_restore_tool(const char *header, size_t len, bool v6)
{
	static const char generated[] = "# Generated by ";

	if (len < sizeof(generated) - 1 || memcmp(header, generated, sizeof(generated) - 1))
		return v6 ? "ip6tables-restore" : "iptables-restore";
	if (memmem(header, len, "nf_tables", 9) || memmem(header, len, "-nft-", 5))
		return v6 ? "ip6tables-nft-restore" : "iptables-nft-restore";
	return v6 ? "ip6tables-legacy-restore" : "iptables-legacy-restore";
}

/* Lines [from, to) of an iptables image's part into fd, but the network lock's. */
static int write_ipt_lines(int fd, const char *from, const char *to)
{
	while (from < to) {
		const char *end = memchr(from, '\n', to - from);
		size_t len = end ? (size_t)(end - from) + 1 : (size_t)(to - from);

		if (!netlock_is_lock_rule(from, end ? len - 1 : len) &&
		    write(fd, from, len) != (ssize_t)len)
			return -errno;
		from += len;
	}
	return 0;
}

/* One part of an iptables image, without the network lock's lines, fed to its tool. */
static int restore_iptables_part(const char *part, size_t size, bool v6)
{
	const char *nl = memchr(part, '\n', size);
	size_t header_len = nl ? (size_t)(nl - part) : size;
	const char *const argv[] = { iptables_restore_tool(part, header_len, v6), "-w", NULL };
	int fd = memfd_create("iptables", MFD_CLOEXEC), ret = 0;

	if (fd < 0) {
		pr_perror("%s: cannot make a memfd for its input", argv[0]);
		return -errno;
	}
	if (write_ipt_lines(fd, part, part + size)) {
		pr_perror("%s: cannot pass its input", argv[0]);
		ret = -EIO;
	}
	if (!ret && lseek(fd, 0, SEEK_SET)) {
		pr_perror("%s: cannot pass its input", argv[0]);
		ret = -EIO;
	}
	ret = ret ?: tool_run(ns_net_tool(argv, fd, -1));
	close(fd);
	return ret;
}

/*
 * The next part of an iptables image from at (iptables-*-save print a "# Generated by"
 * line before each table), as [*part, return).
 */
static size_t next_ipt_part(const char *buf, size_t size, size_t at)
{
	static const char generated[] = "\n# Generated by ";
	const char *next = memmem(buf + at, size - at, generated, sizeof(generated) - 1);

	return next ? (size_t)(next - buf) + 1 : size;
}

static bool is_legacy_part(const char *part, size_t size, bool v6)
{
	const char *nl = memchr(part, '\n', size);

	return strstr(iptables_restore_tool(part, nl ? (size_t)(nl - part) : size, v6), "-legacy-");
}

/*
 * An iptables image (dump_iptables()), each part by its own restore tool: each loads (and
 * flushes first) its own backend's table only. The legacy ones in the reverse of their
 * order: the kernel lists a namespace's legacy tables (and iptables-legacy-save prints
 * them) newest first, so made in this order they are listed as dumped. The network lock's
 * lines an image of CRIU's may have (it saves the tables while they are locked) are left
 * out: the restore locks the namespace itself (net-lock.c).
 */
static int restore_iptables(enum cr_img_type type, const struct ns_id *ns, bool v6)
{
	size_t starts[64], nr = 0, size;
	struct cr_img *img;
	char *buf = NULL;
	int ret;

	if (!img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	size = img->size;
	buf = malloc(size + 1);
	ret = buf ? img_read_raw(img, buf, size) : -ENOMEM;
	if (ret)
		pr_err("%s: cannot read it: %s\n", img->name, strerror(-ret));
	for (size_t at = 0; !ret && at < size; at = next_ipt_part(buf, size, at)) {
		if (nr == sizeof(starts) / sizeof(starts[0])) {
			pr_err("%s: more than %zu tables\n", img->name, nr);
			ret = -E2BIG;
		}
		starts[nr++] = at;
	}
	for (size_t i = 0; !ret && i < nr; i++) {
		size_t len = next_ipt_part(buf, size, starts[i]) - starts[i];

		if (!is_legacy_part(buf + starts[i], len, v6))
			ret = restore_iptables_part(buf + starts[i], len, v6);
	}
	for (size_t i = nr; !ret && i-- > 0;) {
		size_t len = next_ipt_part(buf, size, starts[i]) - starts[i];

		if (is_legacy_part(buf + starts[i], len, v6))
			ret = restore_iptables_part(buf + starts[i], len, v6);
	}
	free(buf);
	close_image(img);
	return ret;
}

/*
 * A routes image fed to `ip route restore` made restorable first (CRIU's own dumps keep
 * what the kernel makes and a link without carrier's flags), through a memfd.
 */
static int restore_routes(enum cr_img_type type, const struct ns_id *ns, bool optional,
			  const char *const argv[])
{
	struct cr_img *img;
	char *buf = NULL;
	size_t kept;
	int ret, fd = -1;

	if (optional && !img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	buf = malloc(img->size + 1);
	ret = buf ? img_read_raw(img, buf, img->size) : -ENOMEM;
	if (ret)
		pr_err("%s: cannot read it: %s\n", img->name, strerror(-ret));
	if (!ret && img->size) {
		kept = routes_restorable(buf, img->size);
		fd = memfd_create("routes", MFD_CLOEXEC);
		if (fd < 0 || write(fd, buf, kept) != (ssize_t)kept || lseek(fd, 0, SEEK_SET)) {
			pr_perror("%s: cannot pass it on", img->name);
			ret = -EIO;
		}
		ret = ret ?: tool_run(ns_net_tool(argv, fd, -1));
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	close_image(img);
	return ret;
}

/* In the new namespace: addresses, routes, rules, iptables and nftables, as CRIU does. */
static int restore_tables(const struct ns_id *ns)
{
	static const char *const addr[] = {"ip", "addr", "restore", NULL};
	static const char *const route[] = {"ip", "route", "restore", NULL};
	static const char *const rule_flush[] = {"ip", "rule", "flush", NULL};
	static const char *const rule_local[] = {"ip", "rule", "delete", "table", "local", NULL};
	static const char *const rule[] = {"ip", "rule", "restore", NULL};
	int ret;

	ret = restore_tool_input(CR_IMG_IFADDR, ns, false, addr);
	if (!ret)
		ret = restore_routes(CR_IMG_ROUTE, ns, false, route);
	if (!ret)
		ret = restore_routes(CR_IMG_ROUTE6, ns, true, route);
	/* A new namespace has the kernel's default rules: the image has them too. */
	if (!ret && img_exists(CR_IMG_RULE, ns->id))
		ret = tool_run(ns_net_tool(rule_flush, -1, -1)) ?:
		      tool_run(ns_net_tool(rule_local, -1, -1));
	if (!ret)
		ret = restore_tool_input(CR_IMG_RULE, ns, true, rule);
	if (!ret)
		ret = restore_iptables(CR_IMG_IPTABLES, ns, false);
	if (!ret)
		ret = restore_iptables(CR_IMG_IP6TABLES, ns, true);
	/* After the iptables: an image of CRIU's may have their tables again (net-nft.c). */
	if (!ret)
		ret = nft_restore_ruleset(ns);
	return ret;
}

/*
 * In the new namespace, criu itself (its /proc/sys/net is then the namespace's, and the
 * tools it runs are born there): the images' state.
 */
static int fill_netns(const struct ns_id *ns)
{
	const struct net_state *st = ns->priv;
	int rtnl, ret;

	ret = restore_netns_sysctls(st->netns);
	if (ret)
		return ret;
	rtnl = rtnl_open();
	if (rtnl < 0)
		return rtnl;
	/*
	 * Every link first, its ports in each bridge, then up: a bridge up before its ports
	 * has a carrier a moment, and IPv6 gives it a link-local address it did not have.
	 */
	for (size_t i = 0; i < st->nr_links && !ret; i++)
		ret = make_link(rtnl, ns, st->links[i]);
	if (!ret)
		ret = set_masters(rtnl, st);
	for (size_t i = 0; i < st->nr_links && !ret; i++)
		ret = raise_link(rtnl, st->links[i]);
	close(rtnl);
	return ret ?: restore_tables(ns);
}

/* Before criu fills the namespace: its own, where the outer ends of veth links go. */
static int keep_criu_ns(struct net_state *st)
{
	st->criu_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (st->criu_ns < 0) {
		pr_perror("cannot open criu's own net namespace");
		return -errno;
	}
	st->criu_rtnl = rtnl_open();
	return st->criu_rtnl < 0 ? st->criu_rtnl : 0;
}

/* The tree's net namespaces at the service fds (netns_enter()), by index; 0: none. */
static uint32_t netns_sfd_ids[NETNS_SFD_NR];
static uint32_t cur_netns_id;

/* The root task: its current net namespace, id's, at the next service fd. */
static int install_netns_fd(uint32_t id)
{
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

	for (int i = 0; i < NETNS_SFD_NR; i++) {
		if (netns_sfd_ids[i])
			continue;
		fd = install_service_fd(NETNS_SFD + i, fd);
		if (fd < 0)
			return fd;
		netns_sfd_ids[i] = id;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	pr_err("net namespace %u: more than %d net namespaces in the tree\n", id, NETNS_SFD_NR);
	return -E2BIG;
}

/*
 * The root task, born into its namespaces and before it forks anything: the nested ones,
 * each a new namespace (owned by the root's user namespace, as the dumped ones were) filled
 * from its images, then back into the root's. Every one is at a service fd the tasks it
 * forks inherit, for those that live in them (netns_enter()).
 */
static int net_restore(const struct ns_id *root)
{
	const struct ns_id *ns = ns_tree_next(NS_NET, root);
	int root_fd, root_rtnl, ret;

	if (!ns)
		return 0;
	ret = install_netns_fd(root->id);
	root_fd = ret ? -1 : get_service_fd(NETNS_SFD);
	/* In the root's: the ends of veth links criu made there for the nested ones. */
	root_rtnl = ret ? -1 : rtnl_open();
	if (root_rtnl < 0)
		ret = ret ?: root_rtnl;
	for (; ns && !ret; ns = ns_tree_next(NS_NET, ns)) {
		struct net_state *st = ns->priv;

		st->criu_rtnl = root_rtnl;
		if (unshare(CLONE_NEWNET)) {
			pr_perror("nested net namespace %u: cannot create it", ns->id);
			ret = -errno;
			break;
		}
		filled_by_tree = true;
		ret = fill_netns(ns) ?: install_netns_fd(ns->id);
		filled_by_tree = false;
		if (!ret)
			pr_info("nested net namespace %u: restored\n", ns->id);
	}
	if (root_fd >= 0 && setns(root_fd, CLONE_NEWNET)) {
		pr_perror("cannot go back to net namespace %u", root->id);
		ret = ret ?: -errno;
	}
	if (root_rtnl >= 0)
		close(root_rtnl);
	cur_netns_id = root->id;
	return ret;
}

int netns_enter(uint32_t id)
{
	if (!cur_netns_id || !id || id == cur_netns_id)
		return 0;
	for (int i = 0; i < NETNS_SFD_NR; i++) {
		if (netns_sfd_ids[i] != id)
			continue;
		if (setns(get_service_fd(NETNS_SFD + i), CLONE_NEWNET)) {
			pr_perror("cannot enter net namespace %u", id);
			return -errno;
		}
		cur_netns_id = id;
		return 0;
	}
	pr_err("net namespace %u is not one of the tree's\n", id);
	return -ENOENT;
}

uint32_t netns_current(void)
{
	return cur_netns_id;
}

const NetDeviceEntry *net_find_link(uint32_t ns_id, const char *name)
{
	for (const struct ns_id *ns = ns_tree_next(NS_NET, NULL); ns; ns = ns_tree_next(NS_NET, ns)) {
		const struct net_state *st = ns->priv;

		if (!st || (ns_id ? ns->id != ns_id : ns != ns_root_own(NS_NET)))
			continue;
		for (size_t i = 0; i < st->nr_links; i++)
			if (!strcmp(st->links[i]->name, name))
				return st->links[i];
	}
	return NULL;
}

/*
 * Main process, right before it forks the root: criu moves into the namespace the root
 * is to be born in (a new one, filled from the images; a new empty one; or the one
 * --join-ns names), keeping its own to come back to.
 */
static int net_enter(struct ns_id *ns)
{
	struct net_state *st = ns->priv;
	int ret, fd;

	ret = keep_criu_ns(st);
	if (ret)
		return ret;
	if (opts.join_ns_net) {
		fd = open(opts.join_ns_net, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET)) {
			pr_perror("--join-ns net:%s: cannot join it", opts.join_ns_net);
			ret = -errno;
		}
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (unshare(CLONE_NEWNET)) {
		pr_perror("net namespace %u: cannot create it", ns->id);
		return -errno;
	}
	if (st->netns)
		ret = fill_netns(ns) ?: netlock_restore_lock();
	if (!ret)
		pr_info("net namespace %u: %s\n", ns->id, st->netns ? "restored" : "new and empty");
	return ret;
}

/*
 * A namespace made by criu would be owned by criu's user namespace, where the tree's root
 * has no capability: cloned with the root's user namespace, it is that one's. --join-ns
 * names one that exists: the root is still born into it (enter).
 */
static bool net_cloned(const struct ns_id *ns)
{
	(void)ns;
	return ns_root_own(NS_USER) && !opts.join_ns_net;
}

/* Locked until the tasks are restored (netlock_restore_unlock()), after its tables. */
static int fill_and_lock(const struct ns_id *ns)
{
	return fill_netns(ns) ?: netlock_restore_lock();
}

/*
 * Main process, the root cloned into the namespace with its user namespace (net_cloned())
 * and still waiting for GO, so nothing of the tree has used the network yet: criu, root
 * of the user namespace that owns the tree's, fills it from within and comes back.
 */
static int net_born(const struct ns_id *ns, pid_t root_host)
{
	struct net_state *st = ns->priv;
	int ret = 0;

	if (!net_cloned(ns))
		return 0;
	if (st->netns)
		ret = keep_criu_ns(st) ?: ns_run_in_root(root_host, ns, fill_and_lock);
	if (!ret)
		pr_info("net namespace %u: %s, owned by the tree's user namespace\n", ns->id,
			st->netns ? "restored" : "new and empty");
	return ret;
}

static int net_leave(struct ns_id *ns)
{
	struct net_state *st = ns->priv;

	if (st->criu_ns < 0)
		return 0;
	if (setns(st->criu_ns, CLONE_NEWNET)) {
		pr_perror("cannot go back to criu's own net namespace");
		return -errno;
	}
	return 0;
}

static void net_fini(struct ns_id *ns)
{
	struct net_state *st = ns->priv;

	if (!st)
		return;
	for (size_t i = 0; i < st->nr_links; i++)
		pb_free(NULL, st->links[i]);
	free(st->links);
	if (st->netns)
		pb_free(NULL, st->netns);
	if (st->criu_ns >= 0)
		close(st->criu_ns);
	if (st->criu_rtnl >= 0)
		close(st->criu_rtnl);
	free(st);
	ns->priv = NULL;
}

const struct ns_kind net_ns_kind = {
	.name = "net",
	.clone_flag = CLONE_NEWNET,
	.nested = true,
	.restore = net_restore,
	.dump = net_dump,
	.dump_check = net_dump_check,
	.collect = net_collect,
	.enter = net_enter,
	.leave = net_leave,
	.cloned = net_cloned,
	.born = net_born,
	.fini = net_fini,
};
