/*
 * The net namespace's links (netdev-ID.img): each dumped from its RTM_GETLINK answer, and
 * made again in the new namespace (loopback, veth, bridge, macvlan, tun), moved, raised.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-rtnl.h"
#include "ns-net.h"
#include "tun.h"

#include "macvlan.pb-c.h"
#include "netdev.pb-c.h"

/* The kernel's longest link-layer address (MAX_ADDR_LEN of linux/netdevice.h). */
#define LINK_ADDR_MAX 32

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
		nde->peer_nsid =
			net_tree_ns_of_nsid(ns, *(int32_t *)RTA_DATA(tb[IFLA_LINK_NETNSID]));
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
	ret = net_link_sysctls_read(&nde);
	if (!ret)
		ret = pb_write_one(img, &nde);
	if (!ret)
		pr_info("net namespace %u: link %s (index %u, %s), MTU %u, flags %#x\n", ns->id,
			nde.name, nde.ifindex, link_kind_name(nde.type), nde.mtu, nde.flags);
	net_link_sysctls_free(&nde);
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
int net_dump_links(const struct ns_id *ns)
{
	struct link_dump ld = {ns, open_image(CR_IMG_NETDEV, O_WRONLY, ns->id)};
	int ret;

	if (!ld.img)
		return -EIO;
	ret = rtnl_dump(ns, RTM_GETLINK, AF_UNSPEC, dump_link_cb, &ld);
	close_image(ld.img);
	return ret;
}

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

int net_collect_links(struct ns_id *ns, struct net_state *st)
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
			pr_err("%s: link %s is of type %d: only the loopback, bridges, tun/tap, "
			       "veth "
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
int net_check_nested_links(const struct ns_id *ns, const struct net_state *st)
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
int net_set_masters(int rtnl, const struct net_state *st)
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

/* A link made (or the loopback found) with its settings, still down. */
int net_make_link(int rtnl, const struct ns_id *ns, const NetDeviceEntry *nde)
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
		ret = tun_link_create(nde, net_filled_by_tree || !ns_root_own(NS_USER));
	}
	return ret ?: net_link_sysctls_write(nde);
}

/* Its MTU and flags (up), once its ports are in it if it is a bridge. */
int net_raise_link(int rtnl, const NetDeviceEntry *nde)
{
	int ret = set_link(rtnl, nde);

	if (!ret && (nde->flags & IFF_UP))
		ret = net_link_rewrite_ipv6_mtu(nde);
	if (!ret)
		pr_info("link %s (index %u) restored\n", nde->name, nde->ifindex);
	return ret;
}
