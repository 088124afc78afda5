/*
 * The net namespace kind's own files (ns-net.c, net-links.c, net-sysctl.c, net-tables.c):
 * the state restore keeps per namespace and the steps the kind calls in the others.
 */
#ifndef CR_NS_NET_H
#define CR_NS_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "namespaces.h"

#include "netdev.pb-c.h"

/* Restore: what collect() read, and what enter() (or born()) keeps for the fill. */
struct net_state {
	NetnsEntry *netns; /* NULL: --empty-ns net or --join-ns net (nothing to restore) */
	NetDeviceEntry **links;
	size_t nr_links;
	int criu_ns;   /* criu's own network namespace: leave() and the outer veth ends */
	int criu_rtnl; /* rtnetlink in criu's namespace: an outer end into its bridge */
};

/* Set while the root task fills the nested namespaces: it writes as the tree sees ids. */
extern bool net_filled_by_tree;

/* ns-net.c, dump: the tree's namespace that nsid names in ns, or 0 (one outside the tree). */
uint32_t net_tree_ns_of_nsid(const struct ns_id *ns, int32_t nsid);

/* net-links.c. Dump, in a child joined to ns: every link into netdev-ID.img. */
int net_dump_links(const struct ns_id *ns);
/* Restore, collect: netdev-ID.img's links into st, checked for what restore can make. */
int net_collect_links(struct ns_id *ns, struct net_state *st);
/* A nested namespace's links may not reach outside it, but to the root's. */
int net_check_nested_links(const struct ns_id *ns, const struct net_state *st);
/* In the new namespace: a link made (or the loopback found) with its settings, still down. */
int net_make_link(int rtnl, const struct ns_id *ns, const NetDeviceEntry *nde);
/* Once every link exists: each port into its bridge (IFLA_MASTER). */
int net_set_masters(int rtnl, const struct net_state *st);
/* Its MTU and flags (up), once its ports are in it if it is a bridge. */
int net_raise_link(int rtnl, const NetDeviceEntry *nde);

/* net-sysctl.c. Dump: the link's net/ipv4 and net/ipv6 conf settings into nde. */
int net_link_sysctls_read(NetDeviceEntry *nde);
/* Their values, once nde is written. */
void net_link_sysctls_free(NetDeviceEntry *nde);
/* Restore: the image's settings of the link, as far as this criu knows their names. */
int net_link_sysctls_write(const NetDeviceEntry *nde);
/* Restore: the image's net.ipv6.conf mtu again, once the link is up. */
int net_link_rewrite_ipv6_mtu(const NetDeviceEntry *nde);
/* Dump, in a child joined to ns: the namespace-wide settings into netns-ID.img. */
int net_dump_netns_entry(const struct ns_id *ns);
/* Restore, in the new namespace: netns-ID.img's settings. */
int net_restore_netns_sysctls(const NetnsEntry *e);

/* net-tables.c. Dump, in a child joined to ns: addresses, routes, rules, iptables, nft. */
int net_dump_tables(const struct ns_id *ns);
/* Restore, in the new namespace, after its links: the same, as CRIU does. */
int net_restore_tables(const struct ns_id *ns);

#endif
