/*
 * The network lock, --network-lock iptables (CRIU's, the default): iptables rules that keep
 * a dumped connection's packets off the wire from its dump to its restore (net-lock.c).
 */
#ifndef CR_NET_LOCK_H
#define CR_NET_LOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What criu's own packets carry (SO_MARK) to pass either lock: forged segments, probes. */
#define NET_LOCK_MARK 0xC114

enum netlock_op { NETLOCK_ADD, NETLOCK_DEL };

/*
 * A way to lock (--network-lock's value): what the pipelines below call, in criu's main
 * process (or its child that checks the feature).
 */
struct netlock_ops {
	const char *name; /* as --network-lock spells it, and in messages */
	/*
	 * One connection in criu's own net namespace, between self and peer (16 bytes each,
	 * IPv4 as v4-mapped IPv6), its segments both ways dropped unless marked (iptables: two
	 * rules of the filter table, INPUT and OUTPUT). 0 done; 1 NETLOCK_DEL found nothing;
	 * -errno. Not logged: the caller names the connection.
	 */
	int (*conn)(enum netlock_op op, const uint8_t *self, uint16_t self_port,
		    const uint8_t *peer, uint16_t peer_port);
	/*
	 * A tree's own net namespace, whole, both families: every packet dropped but the
	 * marked ones (iptables: CRIU's chain "CRIU" of the filter table, jumped to first
	 * from INPUT and OUTPUT). ns_fd: the namespace (-1: the caller's own). Lock: 0 or
	 * -errno after one line, a lock half made undone. Unlock: removes it where it is
	 * (none: nothing to do, 0), or -errno after one line.
	 */
	int (*ns_lock)(int ns_fd);
	int (*ns_unlock)(int ns_fd);
};

/*
 * Restore: the method the dump locked with, from its inventory; the lock restore removes is
 * that one, whatever --network-lock says.
 */
void netlock_use_dump_method(bool nft);
/* Whether the lock is nftables' (the dump's method at restore, else --network-lock's). */
bool netlock_is_nft(void);

/* The connection lock of the method --network-lock names (netlock_ops.conn). */
int netlock_conn(enum netlock_op op, const uint8_t *self, uint16_t self_port,
		 const uint8_t *peer, uint16_t peer_port);

/*
 * Dump, main process. Once the tree is seized and its namespaces collected, before any
 * socket is read: the tree's own net namespace locked (nothing where it has none, or with
 * --network-lock skip). Release, at the dump's end: unlocked unless the dump killed the
 * tree (its namespace's lock then waits for the restore). 0 or -errno after one line.
 */
int netlock_dump_tree(void);
void netlock_dump_release(bool killed);

/*
 * Restore, main process: lock the tree's new net namespace once criu filled it (the
 * caller is in it), and unlock it, in root_host's net namespace, once every task is
 * restored and before their connections leave repair mode (--join-ns too: the dump's lock
 * is there). 0 or -errno after one line.
 */
int netlock_restore_lock(void);
int netlock_restore_unlock(pid_t root_host);
/*
 * Restore failed: a namespace the tree was to join (--join-ns net) outlives it, and the
 * dump's lock there goes (a new namespace went with the tasks killed).
 */
void netlock_restore_failed(void);

/*
 * Whether the caller's net namespace's filter table of that family was made by the lock
 * (it had none in nftables before): the dump then saves none, as there was none.
 */
bool netlock_made_filter_table(bool v6);
/*
 * iptables-save output: whether a line is the namespace lock's own (its chain, its jumps),
 * which no image keeps (a dump saves the tables while they are locked).
 */
bool netlock_is_lock_rule(const char *line, size_t len);

/*
 * check --feature has_ipt_legacy: the tools the lock and the tables' dump and restore use
 * work, in a scratch net namespace.
 */
bool netlock_has_ipt_legacy(void);

#endif
