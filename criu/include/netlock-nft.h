/*
 * --network-lock nftables (netlock-nft.c): CRIU's nftables lock of the TCP connections
 * whose peer is outside the tree, a table "inet CRIU-PID" in criu's net namespace.
 */
#ifndef CR_NETLOCK_NFT_H
#define CR_NETLOCK_NFT_H

#include <stdbool.h>
#include <stdint.h>

/* inventory_entry.network_lock_method, as CRIU numbers its methods. */
enum network_lock_method {
	NETWORK_LOCK_IPTABLES = 0,
	NETWORK_LOCK_NFTABLES = 1,
	NETWORK_LOCK_SKIP = 2,
};

/*
 * One connection between self and peer (16 bytes each, IPv4 as v4-mapped IPv6), both
 * sides, main process: lock adds it to the lock table's set (the table made first where
 * there is none), unlock takes it out (and the table, once its sets are empty). The table
 * is named after the tree's root's pid as the images name it, the same at dump and
 * restore (CRIU's name where the root has no pid namespace of its own). 0 done; 1 unlock
 * found no such connection (not logged); -errno after one line.
 */
int netlock_nft_conn(bool lock, const uint8_t *self, uint16_t self_port, const uint8_t *peer,
		     uint16_t peer_port);

/*
 * A tree's own net namespace, whole, in net namespace ns_fd (-1: the caller's): the table
 * with chains that drop every packet not marked. Lock: 0 or -errno after one line. Unlock:
 * removes the table where it is (none: nothing to do), 0 or -errno after one line. The
 * same contract as the iptables lock's, which dispatches here by --network-lock.
 */
int netlock_nft_ns_lock(int ns_fd);
int netlock_nft_ns_unlock(int ns_fd);
/*
 * Dump: whether a table of the tree's namespace (family as nft names it) is the lock's,
 * which no image keeps (net-nft.c saves the tables while the namespace is locked).
 */
bool netlock_nft_is_lock_table(const char *family, const char *name);

/* check --feature network_lock_nftables: the lock table made in a scratch net namespace. */
bool netlock_nft_usable(void);

#endif
