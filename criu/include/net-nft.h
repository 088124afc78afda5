/*
 * nftables of a tree's net namespaces (net-nft.c): CRIU's nftables-NSID.img, the text
 * `nft list ruleset` prints, less the tables iptables-nft's tools save (net-tables.c's
 * iptables images).
 */
#ifndef CR_NET_NFT_H
#define CR_NET_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_id;

/*
 * Dump, in a child joined to net namespace ns: its nftables tables into nftables-NSID.img
 * (none where it has none to save; nft is needed only where it has). 0 or -errno, after
 * one line.
 */
int nft_dump_ruleset(const struct ns_id *ns);
/*
 * Restore, criu in the new net namespace ns, after its iptables: the image loaded with
 * `nft -f` in one transaction (a missing or empty image loads nothing). 0 or -errno, after
 * one line; a ruleset that does not load leaves none of it.
 */
int nft_restore_ruleset(const struct ns_id *ns);
/*
 * Whether net namespace ns_fd (-1: the caller's) has nftables table name of family
 * (NFPROTO_*), as the kernel lists them: 1 yes, 0 no, -errno after one line.
 */
int nft_has_table(int ns_fd, uint8_t family, const char *name);
/* check --feature nftables: nft lists and loads a ruleset in a scratch net namespace. */
bool nft_usable(void);

#endif
