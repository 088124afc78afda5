/*
 * --network-lock nftables (netlock-nft.c): CRIU's nftables lock of the TCP connections
 * whose peer is outside the tree, or of a tree's whole net namespace: a table
 * "inet CRIU-PID".
 */
#ifndef CR_NETLOCK_NFT_H
#define CR_NETLOCK_NFT_H

#include <stdbool.h>
#include <stdint.h>

#include "net-lock.h"

/* inventory_entry.network_lock_method, as CRIU numbers its methods. */
enum network_lock_method {
	NETWORK_LOCK_IPTABLES = 0,
	NETWORK_LOCK_NFTABLES = 1,
	NETWORK_LOCK_SKIP = 2,
};

/*
 * The nftables method of the network lock (net-lock.c's netlock_ops), CRIU's table "inet
 * CRIU-PID" (PID: the tree's root's as the images name it, the same at dump and restore;
 * CRIU's name where the root has no pid namespace of its own). A connection: an element of
 * its sets, the table made by the first and removed with the last (NETLOCK_DEL finding no
 * element: 1). A whole namespace: the table with chains that drop every packet not marked.
 */
extern const struct netlock_ops nftables_lock;

/*
 * Dump: whether a table of the tree's namespace (family as nft names it) is the lock's,
 * which no image keeps (net-nft.c saves the tables while the namespace is locked).
 */
bool netlock_nft_is_lock_table(const char *family, const char *name);

/* check --feature network_lock_nftables: the lock table made in a scratch net namespace. */
bool netlock_nft_usable(void);

#endif
