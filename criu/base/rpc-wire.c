/*
 * CRIU's RPC messages on a SOCK_SEQPACKET socket: a packet is one message, read whole
 * (its size peeked first), and a descriptor may travel beside a response.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "criu-plugin.h" /* send_fds() */
#include "rpc-wire.h"

int rpc_recv_req(int sk, CriuReq **req)
{
	ssize_t len = recv(sk, NULL, 0, MSG_PEEK | MSG_TRUNC);
	uint8_t *buf;

	if (len < 0)
		return -errno;
	if (len == 0) {
		/* An empty packet cannot be told from EOF: either way nothing more comes. */
		recv(sk, NULL, 0, 0);
		return 1;
	}
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	len = recv(sk, buf, len, 0);
	if (len < 0) {
		len = -errno;
		free(buf);
		return len;
	}
	*req = criu_req__unpack(NULL, len, buf);
	free(buf);
	return *req ? 0 : -EBADMSG;
}

int rpc_send_resp(int sk, const CriuResp *resp, int fd)
{
	size_t len = criu_resp__get_packed_size(resp);
	uint8_t *buf = malloc(len ? len : 1);
	ssize_t sent;
	int ret;

	if (!buf)
		return -ENOMEM;
	criu_resp__pack(resp, buf);
	/* The descriptor rides on the response's own packet, as CRIU's clients read it. */
	if (fd >= 0) {
		ret = send_fds(sk, NULL, 0, &fd, 1, buf, len);
		free(buf);
		return ret;
	}
	sent = send(sk, buf, len, MSG_NOSIGNAL);
	free(buf);
	if (sent < 0)
		return -errno;
	return (size_t)sent == len ? 0 : -EMSGSIZE;
}

ssize_t rpc_pack_restored_answer(uint8_t *buf, size_t size)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuDumpResp dump = CRIU_DUMP_RESP__INIT;

	resp.type = CRIU_REQ_TYPE__DUMP;
	resp.success = true;
	dump.has_restored = true;
	dump.restored = true;
	resp.dump = &dump;
	if (criu_resp__get_packed_size(&resp) > size)
		return -ENOSPC;
	return criu_resp__pack(&resp, buf);
}
