/*
 * Passing descriptors over Unix sockets (SCM_RIGHTS) in batches the kernel accepts, each
 * message carrying its batch's share of a per-fd payload. Part of the plugin API
 * (send_fds/recv_fds in criu-plugin.h); usable by criu itself too.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "criu-plugin.h"

/* Control buffer for one batch, aligned as a cmsghdr must be. */
union scm_control {
	char buf[CMSG_SPACE(sizeof(int) * CR_SCM_MAX_FD)];
	struct cmsghdr align;
};

static void close_fds(int *fds, int nr_fds)
{
	int i;

	for (i = 0; i < nr_fds; i++)
		close(fds[i]);
}

/* Only a stream socket may legitimately move a message in several pieces. */
static int socket_is_stream(int sock, bool *is_stream)
{
	int type;
	socklen_t len = sizeof(type);

	if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len))
		return -errno;
	*is_stream = type == SOCK_STREAM;
	return 0;
}

/* The rest of a stream message after a short sendmsg (the fds went with its first byte). */
static int send_rest(int sock, const char *buf, size_t len)
{
	while (len) {
		ssize_t sent = send(sock, buf, len, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent <= 0)
			return sent < 0 ? -errno : -EPIPE;
		buf += sent;
		len -= sent;
	}
	return 0;
}

static int send_batch(int sock, struct sockaddr_un *saddr, int saddr_len, int *fds, int nr_fds, char *data,
		      size_t data_len)
{
	union scm_control control = { 0 };
	char dummy = 0;
	struct iovec iov = { .iov_base = data ? data : &dummy, .iov_len = data ? data_len : 1 };
	struct msghdr msg = {
		.msg_name = saddr,
		.msg_namelen = saddr ? saddr_len : 0,
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds),
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	ssize_t sent;

	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
	memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nr_fds);

	/* MSG_NOSIGNAL: a peer that died is an error to report, not a SIGPIPE that kills us. */
	do
		sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return -errno;
	return send_rest(sock, (char *)iov.iov_base + sent, iov.iov_len - sent);
}

int send_fds(int sock, struct sockaddr_un *saddr, int saddr_len, int *fds, int nr_fds, void *data,
	     unsigned int ch_size)
{
	int sent_fds, batch, ret;

	for (sent_fds = 0; sent_fds < nr_fds; sent_fds += batch) {
		batch = nr_fds - sent_fds < CR_SCM_MAX_FD ? nr_fds - sent_fds : CR_SCM_MAX_FD;
		ret = send_batch(sock, saddr, saddr_len, fds + sent_fds, batch,
				 data && ch_size ? (char *)data + (size_t)sent_fds * ch_size : NULL, (size_t)batch * ch_size);
		if (ret) {
			pr_err("send_fds: socket %d: sending fds %d..%d of %d failed: %s\n", sock, sent_fds,
			       sent_fds + batch - 1, nr_fds, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* The fds of a received message; exactly nr_fds or -EBADMSG (and none kept). */
static int take_fds(struct msghdr *msg, int *fds, int nr_fds)
{
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg);
	int nr_got = 0;

	if (cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
		nr_got = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	if (nr_got > 0)
		memcpy(fds, CMSG_DATA(cmsg), sizeof(int) * (nr_got < nr_fds ? nr_got : nr_fds));
	if (nr_got != nr_fds || (msg->msg_flags & MSG_CTRUNC)) {
		close_fds(fds, nr_got < nr_fds ? nr_got : nr_fds);
		return -EBADMSG;
	}
	return 0;
}

static int recv_rest(int sock, char *buf, size_t len)
{
	while (len) {
		ssize_t got = recv(sock, buf, len, MSG_WAITALL);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		buf += got;
		len -= got;
	}
	return 0;
}

static int recv_batch(int sock, bool is_stream, int *fds, int nr_fds, char *data, size_t data_len)
{
	union scm_control control;
	char dummy = 0;
	struct iovec iov = { .iov_base = data ? data : &dummy, .iov_len = data ? data_len : 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds),
	};
	ssize_t got;
	int ret;

	do
		got = recvmsg(sock, &msg, 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if (got == 0)
		return -ECONNRESET; /* the peer went away */
	ret = take_fds(&msg, fds, nr_fds);
	if (ret)
		return ret;
	if ((size_t)got == iov.iov_len && !(msg.msg_flags & MSG_TRUNC))
		return 0;
	/* A datagram that does not match the expected size is a framing error. */
	if (is_stream)
		ret = recv_rest(sock, (char *)iov.iov_base + got, iov.iov_len - got);
	else
		ret = -EBADMSG;
	if (ret)
		close_fds(fds, nr_fds);
	return ret;
}

int recv_fds(int sock, int *fds, int nr_fds, void *data, unsigned int ch_size)
{
	int got_fds, batch, ret;
	bool is_stream = false;

	ret = socket_is_stream(sock, &is_stream);
	if (ret) {
		pr_err("recv_fds: socket %d: %s\n", sock, strerror(-ret));
		return ret;
	}
	for (got_fds = 0; got_fds < nr_fds; got_fds += batch) {
		batch = nr_fds - got_fds < CR_SCM_MAX_FD ? nr_fds - got_fds : CR_SCM_MAX_FD;
		ret = recv_batch(sock, is_stream, fds + got_fds, batch,
				 data && ch_size ? (char *)data + (size_t)got_fds * ch_size : NULL, (size_t)batch * ch_size);
		if (ret) {
			pr_err("recv_fds: socket %d: receiving fds %d..%d of %d failed: %s\n", sock, got_fds,
			       got_fds + batch - 1, nr_fds, strerror(-ret));
			close_fds(fds, got_fds);
			return ret;
		}
	}
	return 0;
}
