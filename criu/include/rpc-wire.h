/*
 * CRIU's RPC on the wire (images/rpc.proto): one criu_req or criu_resp per SOCK_SEQPACKET
 * packet, a descriptor beside a response with SCM_RIGHTS. The service (cr-service.c) and
 * the restore of a client's end of its connection (sk-unix.c) share it.
 */
#ifndef CR_RPC_WIRE_H
#define CR_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rpc.pb-c.h"

/*
 * One request, whole whatever its size. 0 with *req set (criu_req__free_unpacked());
 * 1 when the client closed the connection; -EBADMSG when the packet is no request (or
 * misses a required field); -errno when the socket fails. Not logged.
 */
int rpc_recv_req(int sk, CriuReq **req);
/* One response, with fd passed beside it unless -1. 0 or -errno (not logged). */
int rpc_send_resp(int sk, const CriuResp *resp, int fd);
/*
 * The answer a client that dumped itself reads once restored: DUMP, success, restored.
 * Its length in buf, or -ENOSPC.
 */
ssize_t rpc_pack_restored_answer(uint8_t *buf, size_t size);

#endif
