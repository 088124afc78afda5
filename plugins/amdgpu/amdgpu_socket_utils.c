/*
 * Socket utilities of the parallel restore protocol (amdgpu_socket_utils.h): loops over
 * partial transfers, fd batches with SCM_RIGHTS, and receives that time out or abort
 * instead of hanging when the peer stalls or criu gives up.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_socket_utils.h"

int amdgpu_sk_send_all(int sk, const void *buf, uint64_t len)
{
	while (len) {
		ssize_t sent = send(sk, buf, len, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0)
			return -errno;
		buf = (const char *)buf + sent;
		len -= sent;
	}
	return 0;
}

/* 0 when sk is readable; -ECANCELED when abort_fd is; -ETIMEDOUT. */
static int wait_readable(int sk, int abort_fd, int timeout_ms)
{
	struct pollfd pfds[2] = { { .fd = sk, .events = POLLIN }, { .fd = abort_fd, .events = POLLIN } };
	int ret;

	do {
		ret = poll(pfds, abort_fd >= 0 ? 2 : 1, timeout_ms);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	/* Data already queued is still taken: only a wait for more is cut short. */
	if (pfds[0].revents)
		return 0;
	return -ECANCELED;
}

int amdgpu_sk_recv_all(int sk, void *buf, uint64_t len, int abort_fd, int timeout_ms)
{
	while (len) {
		ssize_t got;
		int ret = wait_readable(sk, abort_fd, timeout_ms);

		if (ret)
			return ret;
		got = recv(sk, buf, len, MSG_DONTWAIT);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -ECONNRESET;
		buf = (char *)buf + got;
		len -= got;
	}
	return 0;
}

static int send_fd_batch(int sk, uint32_t index, const int *fds, uint32_t nr_fds)
{
	struct amdgpu_fd_batch batch = { .magic = AMDGPU_CMD_MAGIC, .index = index, .nr_fds = nr_fds };
	char cbuf[CMSG_SPACE(sizeof(int) * AMDGPU_FDS_PER_BATCH)];
	struct iovec iov = { .iov_base = &batch, .iov_len = sizeof(batch) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf };
	struct cmsghdr *cmsg;
	ssize_t sent;

	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
	cmsg = CMSG_FIRSTHDR(&mh);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
	memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nr_fds);
	do {
		sent = sendmsg(sk, &mh, MSG_NOSIGNAL);
	} while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return -errno;
	/* The fds went with the first byte; the rest of the frame is plain data. */
	return amdgpu_sk_send_all(sk, (char *)&batch + sent, sizeof(batch) - sent);
}

int amdgpu_cmd_send(int sk, const struct amdgpu_cmd_hdr *hdr, const struct amdgpu_cmd_bo *bos,
		    const int *fds)
{
	uint32_t done, index = 0;
	int ret;

	ret = amdgpu_sk_send_all(sk, hdr, sizeof(*hdr));
	if (!ret)
		ret = amdgpu_sk_send_all(sk, bos, hdr->payload_size);
	for (done = 0; !ret && done < hdr->nr_bos; index++) {
		uint32_t nr = hdr->nr_bos - done < AMDGPU_FDS_PER_BATCH ? hdr->nr_bos - done
									: AMDGPU_FDS_PER_BATCH;

		ret = send_fd_batch(sk, index, fds + done, nr);
		done += nr;
	}
	if (ret)
		pr_err("task %u: cannot send the BO restore command to criu: %s\n", hdr->pid,
		       strerror(-ret));
	return ret;
}

static void close_fds(int *fds, uint32_t nr)
{
	uint32_t i;

	for (i = 0; i < nr; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Every fd that arrived goes into fds[] (so it gets closed), even in a bad batch. */
static int take_cmsg_fds(struct msghdr *mh, int *fds, uint32_t room, uint32_t *nr_got)
{
	struct cmsghdr *cmsg;
	int ret = 0;

	for (cmsg = CMSG_FIRSTHDR(mh); cmsg; cmsg = CMSG_NXTHDR(mh, cmsg)) {
		uint32_t nr, i;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		nr = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nr; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
			if (*nr_got < room)
				fds[(*nr_got)++] = fd;
			else {
				close(fd);
				ret = -EPROTO;
			}
		}
	}
	return ret;
}

static int recv_fd_batch(int sk, uint32_t index, int *fds, uint32_t nr_expected, int abort_fd,
			 int timeout_ms)
{
	char cbuf[CMSG_SPACE(sizeof(int) * AMDGPU_FDS_PER_BATCH)];
	struct amdgpu_fd_batch batch;
	struct iovec iov = { .iov_base = &batch, .iov_len = sizeof(batch) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	uint32_t nr_got = 0;
	ssize_t got;
	int ret;

	ret = wait_readable(sk, abort_fd, timeout_ms);
	if (ret)
		return ret;
	do {
		got = recvmsg(sk, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	} while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if (got == 0)
		return -ECONNRESET;
	ret = take_cmsg_fds(&mh, fds, nr_expected, &nr_got);
	if (!ret && (mh.msg_flags & MSG_CTRUNC))
		ret = -EPROTO;
	if (!ret)
		ret = amdgpu_sk_recv_all(sk, (char *)&batch + got, sizeof(batch) - got, abort_fd,
					 timeout_ms);
	if (!ret && (batch.magic != AMDGPU_CMD_MAGIC || batch.index != index ||
		     batch.nr_fds != nr_expected || nr_got != nr_expected))
		ret = -EPROTO;
	if (ret)
		close_fds(fds, nr_got);
	return ret;
}

static int check_hdr(const struct amdgpu_cmd_hdr *hdr)
{
	if (hdr->magic != AMDGPU_CMD_MAGIC)
		return -EPROTO;
	if (hdr->version != AMDGPU_CMD_VERSION)
		return -EPROTONOSUPPORT;
	if (hdr->type != AMDGPU_CMD_RESTORE_BOS || hdr->nr_bos > AMDGPU_CMD_MAX_BOS ||
	    hdr->payload_size != (uint64_t)hdr->nr_bos * sizeof(struct amdgpu_cmd_bo))
		return -EPROTO;
	return 0;
}

static int recv_all_fds(int sk, int *fds, uint32_t nr_fds, int abort_fd, int timeout_ms)
{
	uint32_t done = 0, index = 0;
	int ret = 0;

	while (!ret && done < nr_fds) {
		uint32_t nr = nr_fds - done < AMDGPU_FDS_PER_BATCH ? nr_fds - done : AMDGPU_FDS_PER_BATCH;

		ret = recv_fd_batch(sk, index++, fds + done, nr, abort_fd, timeout_ms);
		if (!ret)
			done += nr;
	}
	if (ret)
		close_fds(fds, done);
	return ret;
}

int amdgpu_cmd_recv(int sk, struct amdgpu_cmd_hdr *hdr, struct amdgpu_cmd_bo **bos_out,
		    int **fds_out, int abort_fd, int timeout_ms)
{
	struct amdgpu_cmd_bo *bos = NULL;
	int *fds = NULL;
	uint32_t i;
	int ret;

	ret = amdgpu_sk_recv_all(sk, hdr, sizeof(*hdr), abort_fd, timeout_ms);
	if (!ret)
		ret = check_hdr(hdr);
	if (!ret) {
		bos = malloc(hdr->payload_size ? hdr->payload_size : 1);
		fds = malloc(sizeof(int) * (hdr->nr_bos ? hdr->nr_bos : 1));
		if (!bos || !fds)
			ret = -ENOMEM;
	}
	if (!ret) {
		for (i = 0; i < hdr->nr_bos; i++)
			fds[i] = -1;
		ret = amdgpu_sk_recv_all(sk, bos, hdr->payload_size, abort_fd, timeout_ms);
	}
	if (!ret)
		ret = recv_all_fds(sk, fds, hdr->nr_bos, abort_fd, timeout_ms);
	if (ret) {
		free(bos);
		free(fds);
		return ret;
	}
	*bos_out = bos;
	*fds_out = fds;
	return 0;
}
