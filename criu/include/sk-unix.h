/* Unix sockets (sk-unix.c): what layers above tell the kind besides its fdtype_ops. */
#ifndef CR_SK_UNIX_H
#define CR_SK_UNIX_H

#include <stdint.h>

/*
 * The RPC service's end of the connection it serves (its inode): a dumped client's end
 * of it is dumped as CRIU's USK_SERVICE and restored holding the dump's answer.
 */
void unix_sk_set_service(uint32_t ino);

#endif
