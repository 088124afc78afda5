/*
 * Network namespaces, the kind itself: its ops table and the steps of dump and restore. The
 * namespace's links are in net-links.c (netdev-ID.img), its sysctls in net-sysctl.c
 * (netns-ID.img), its addresses, routes, rules and iptables in net-tables.c (raw images as
 * CRIU keeps them; nftables in net-nft.c), rtnetlink in net-rtnl.c. Restore builds the
 * namespace in criu itself right before it forks the root, which is born into it (enter),
 * and goes back to its own after (leave): the outer end of a veth link is made in criu's
 * namespace. A root with a user namespace of its own is cloned into a new net namespace
 * with it instead, which the kernel makes the new user namespace's (its root administers
 * it, as in a rootless container): criu fills it from outside, before the root takes its
 * first step (born).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "net-rtnl.h"
#include "ns-net.h"
#include "servicefd.h"

#include "netdev.pb-c.h"

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
uint32_t net_tree_ns_of_nsid(const struct ns_id *ns, int32_t nsid)
{
	for (size_t i = 0; i < nr_nsid_maps; i++)
		if (nsid_maps[i].ns_id == ns->id && nsid_maps[i].nsid == nsid)
			return nsid_maps[i].peer_ns_id;
	return 0;
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
		ret = rtnl_get_nsid(rtnl, fd, &nsid);
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
	int ret;

	if (opts.empty_ns_net) {
		pr_info("net namespace %u: --empty-ns net, not dumped\n", ns->id);
		return 0;
	}
	ret = net_dump_links(ns);
	if (!ret)
		ret = net_dump_netns_entry(ns);
	if (!ret)
		ret = net_dump_tables(ns);
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

/* --------------------------------------------------------------- restore ---- */

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
	if (ns != ns_root_own(NS_NET) && (opts.join_ns.net || opts.empty_ns_net)) {
		pr_err("net namespace %u: nested net namespaces are not restored with %s\n",
		       ns->id, opts.join_ns.net ? "--join-ns net" : "--empty-ns net");
		return -ENOTSUP;
	}
	if (opts.join_ns.net || opts.empty_ns_net) {
		pr_info("net namespace %u: %s, its images are not restored\n", ns->id,
			opts.join_ns.net ? "--join-ns net" : "--empty-ns net");
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
	return ret ?: net_collect_links(ns, st) ?: net_check_nested_links(ns, st);
}

/* Set while the root task fills the nested namespaces: it writes as the tree sees ids. */
bool net_filled_by_tree;

/*
 * In the new namespace, criu itself (its /proc/sys/net is then the namespace's, and the
 * tools it runs are born there): the images' state.
 */
static int fill_netns(const struct ns_id *ns)
{
	const struct net_state *st = ns->priv;
	int rtnl, ret;

	ret = net_restore_netns_sysctls(st->netns);
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
		ret = net_make_link(rtnl, ns, st->links[i]);
	if (!ret)
		ret = net_set_masters(rtnl, st);
	for (size_t i = 0; i < st->nr_links && !ret; i++)
		ret = net_raise_link(rtnl, st->links[i]);
	close(rtnl);
	return ret ?: net_restore_tables(ns);
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
		net_filled_by_tree = true;
		ret = fill_netns(ns) ?: install_netns_fd(ns->id);
		net_filled_by_tree = false;
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
	if (opts.join_ns.net) {
		fd = open(opts.join_ns.net, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET)) {
			pr_perror("--join-ns net:%s: cannot join it", opts.join_ns.net);
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
	return ns_root_own(NS_USER) && !opts.join_ns.net;
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
