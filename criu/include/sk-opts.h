/*
 * Socket options of sk_opts_entry (images/sk-opts.proto), read on dump and set again on
 * restore, for the socket kinds (sk-unix.c).
 */
#ifndef CR_SK_OPTS_H
#define CR_SK_OPTS_H

#include "sk-opts.pb-c.h"

/*
 * Dump: the options of socket fd into soe, its filter and bound device (malloc'ed: free
 * them with sk_opts_free()), refusing what the image cannot carry (options that change
 * what a read returns) with one line that starts with what. 0 or -errno.
 */
int sk_opts_dump(int fd, SkOptsEntry *soe, const char *what);
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

#endif
