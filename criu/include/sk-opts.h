/*
 * Socket options of sk_opts_entry (images/sk-opts.proto), read on dump and set again on
 * restore, for the socket kinds (sk-unix.c).
 */
#ifndef CR_SK_OPTS_H
#define CR_SK_OPTS_H

#include <stdbool.h>

#include "sk-opts.pb-c.h"

struct fd_parms;
/*
 * Dump, for the socket kinds' owns(): whether p is a socket of family domain (SO_DOMAIN,
 * read on criu's copy of it).
 */
bool sk_is_family(const struct fd_parms *p, int domain);

/*
 * Dump: the options of socket fd into soe, refusing what the image cannot carry (a
 * filter, a bound device, options that change what a read returns) with one line that
 * starts with what. 0 or -errno.
 */
int sk_opts_dump(int fd, SkOptsEntry *soe, const char *what);
/* Restore, collect: whether every option soe holds is one sk_opts_restore() sets. */
int sk_opts_check(const SkOptsEntry *soe, const char *what);
/* Restore: set the options of soe on fd. 0 or -errno. */
int sk_opts_restore(int fd, const SkOptsEntry *soe, const char *what);
/*
 * Restore: the largest send buffer for fd, which is about to write a dumped queue into
 * its peer (each queued packet counts against its sender's buffer until it is read).
 */
int sk_opts_widen_sndbuf(int fd, const char *what);

#endif
