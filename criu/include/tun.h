/*
 * tun/tap devices (files-tun.c): the link side that net-links.c calls for links of kind "tun",
 * and the feature probes of `criu check`.
 */
#ifndef CR_TUN_H
#define CR_TUN_H

#include <stdbool.h>
#include <linux/rtnetlink.h>

#include "namespaces.h"

#include "netdev.pb-c.h"

/*
 * Dump, in the child joined to ns (net-links.c), once the tasks' fds are dumped: the settings
 * of tun link name (info_data: its IFLA_INFO_DATA, may be NULL) into tle. vnethdr and
 * sndbuf come from a file of the tree attached to it, or, for a persistent device no file
 * holds, from a queue attached for the time of the read. 0 or -errno after one line.
 */
int tun_link_dump(const struct ns_id *ns, struct rtattr *info_data, const char *name,
		  TunLinkEntry *tle);
/*
 * Restore, in the net namespace being filled (criu, or the root task for a nested one):
 * the device of nde with its index, flags, MAC, owner, group, vnethdr and sndbuf, left
 * persistent until the first restored file attached to it drops that (a device dumped
 * without IFF_PERSIST). tree_ids: the image's owner and group are set as they are (the
 * caller sees ids as the tree does), else as criu sees them. 0 or -errno after one line.
 */
int tun_link_create(const NetDeviceEntry *nde, bool tree_ids);

/* `criu check --feature tun`: /dev/net/tun opens. */
bool tun_has_dev(void);
/*
 * `criu check --feature tun_ns`: a device made in a new net namespace, and the namespace of
 * a tun file read back (SIOCGSKNS), which the dump needs to say where a file's device is.
 */
bool tun_has_netns(void);

#endif
