/*
 * Raw INET sockets (SOCK_RAW, IPv4 and IPv6): sk-inet.c dumps and restores them as its
 * other kinds; this file adds their own options (ip_opts.raw).
 */
#ifndef CR_SK_RAW_H
#define CR_SK_RAW_H

#include <stdbool.h>
#include <stdint.h>

#include "sk-inet.h"

/* Whether a raw socket of this protocol is one criu dumps (any protocol number). */
bool raw_sk_kind(uint32_t proto);
/* Dump: d's raw options (IP_HDRINCL, IP_NODEFRAG, the ICMP filters). 0 or -errno. */
int raw_sk_dump(int fd, struct inet_dump *d, const char *what);
/* Restore, collect: ie's raw options are ones this criu sets again. 0 or -EINVAL. */
int raw_sk_check(const InetSkEntry *ie, const char *what);
/* Restore: set ie's raw options on the new socket fd. 0 or -errno. */
int raw_sk_restore(int fd, const InetSkEntry *ie, const char *what);
/*
 * Dump: the peer of d, a raw socket getpeername() gave none (connected without a port),
 * from the kernel's table of raw sockets of the socket's net namespace; d stays
 * unconnected if it has none. 0 or -errno.
 */
int raw_sk_dump_peer(int fd, struct inet_dump *d, const char *what);
/* Dump, at its end (fdtype_ops.dump_fini): forget the tables of raw sockets read. */
void raw_sk_dump_fini(void);
/* check --feature net_diag_raw: raw sockets are dumped, peers too (their table is there). */
bool raw_sk_dumpable(void);

#endif
