/*
 * Socket options of sk_opts_entry (images/sk-opts.proto), read on dump and set again on
 * restore, for the socket kinds (sk-unix.c).
 */
#ifndef CR_SK_OPTS_H
#define CR_SK_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "sk-opts.pb-c.h"

struct fd_parms;
/*
 * Dump, for the socket kinds' owns(): whether p is a socket of family domain (SO_DOMAIN,
 * read on criu's copy of it).
 */
bool sk_is_family(const struct fd_parms *p, int domain);
/* The SO_DOMAIN of the socket p is on, -1 if it is none. */
int sk_family(const struct fd_parms *p);

/*
 * Dump: the options of socket fd into soe, its filter and bound device (malloc'ed: free
 * them with sk_opts_free()), refusing what the image cannot carry (options that change
 * what a read returns) with one line that starts with what. 0 or -errno.
 */
int sk_opts_dump(int fd, SkOptsEntry *soe, const char *what);
/*
 * The same for an inet socket, whose kind keeps SO_TIMESTAMP, SO_TIMESTAMPNS and
 * SO_RXQ_OVFL itself (inetsk-ext.img): not refused here.
 */
int sk_opts_dump_inet(int fd, SkOptsEntry *soe, const char *what);
/*
 * Dump: options of a family's own level (SOL_NETLINK, SOL_PACKET) the image has no field
 * for, which must each be off, as a new socket has them: one that is on is refused with a
 * line naming it. An option the kernel does not know is off. 0 or -ENOTSUP.
 */
struct sk_opt_name {
	int opt;
	const char *name;
};
int sk_opts_check_off(int fd, int level, const struct sk_opt_name *opts, size_t nr,
		      const char *what);
/* Dump, TCP: the keepalive timings (TCP_KEEP*) of fd, when soe has keepalive on. */
int sk_opts_dump_tcp(int fd, SkOptsEntry *soe, const char *what);
/* Frees what sk_opts_dump() allocated in soe. */
void sk_opts_free(SkOptsEntry *soe);
/* Restore, collect: whether every option soe holds is one sk_opts_restore() sets. */
int sk_opts_check(const SkOptsEntry *soe, const char *what);
/* The same for a TCP socket, which may have keepalive timings. */
int sk_opts_check_tcp(const SkOptsEntry *soe, const char *what);
/* Restore: set the options of soe on fd. 0 or -errno. */
int sk_opts_restore(int fd, const SkOptsEntry *soe, const char *what);
/*
 * Restore: the largest send buffer for fd, which is about to write a dumped queue into
 * its peer (each queued packet counts against its sender's buffer until it is read).
 */
int sk_opts_widen_sndbuf(int fd, const char *what);
/* The same for the receive buffer, for a receive queue written in repair mode. */
int sk_opts_widen_rcvbuf(int fd, const char *what);

#endif
