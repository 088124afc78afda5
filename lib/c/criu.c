/*
 * libcriu's requests: reaching criu (a `criu swrk` child, `criu service`'s socket, or the
 * caller's socket), one CriuReq out, notifications answered, one CriuResp back, and the
 * answer turned into CRIU's libcriu return values and errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/* The tty master of the last "orphan-pts-master" notification (criu.h). */
static int orphan_pts_master_fd = -1;

int criu_get_orphan_pts_master_fd(void)
{
	return orphan_pts_master_fd;
}

/* One connection to criu, for one call. */
struct session {
	int sk;
	bool own_sk; /* not the caller's CRIU_COMM_FD socket: closed at the end */
	pid_t swrk;  /* criu swrk, our child, reaped at the end; 0 if none */
	int err;     /* the errno the call returns with */
};

/* fd in decimal, without stdio: the caller may have threads, and this runs after fork(). */
static void format_fd(char *buf, size_t size, int fd)
{
	char digits[16];
	size_t n = 0, i;

	do
		digits[n++] = '0' + fd % 10;
	while ((fd /= 10) && n < sizeof(digits));
	for (i = 0; i < n && i + 1 < size; i++)
		buf[i] = digits[n - 1 - i];
	buf[i] = 0;
}

/*
 * The child side of spawn_swrk(): exec `binary swrk FD`. Any failure is written to
 * status_fd (close-on-exec, so a successful exec writes nothing) before _exit().
 */
static void __attribute__((noreturn))
exec_swrk(const char *binary, int sk, int status_fd, bool detach)
{
	char fd_arg[16];
	sigset_t none;
	int err, fd;

	/* A self-dump dumps the caller's tree: criu must not be in it. A new session and a
	 * second fork make it no descendant of the caller (its parent exits at once). */
	if (detach) {
		pid_t pid;

		if (setsid() < 0)
			goto fail;
		pid = fork();
		if (pid < 0)
			goto fail;
		if (pid > 0)
			_exit(0);
	}

	/* A caller with stdin, stdout or stderr closed gave their numbers to our descriptors:
	 * ours move above 2 and /dev/null takes the slots, so that what criu prints goes
	 * nowhere rather than into the RPC socket or the status pipe. */
	if (status_fd <= STDERR_FILENO) {
		int moved = fcntl(status_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

		if (moved < 0)
			_exit(3);
		close(status_fd);
		status_fd = moved;
	}
	if (sk <= STDERR_FILENO) {
		int moved = fcntl(sk, F_DUPFD, STDERR_FILENO + 1);

		if (moved < 0)
			goto fail;
		close(sk);
		sk = moved;
	}
	for (fd = 0; fd <= STDERR_FILENO; fd++) {
		int null;

		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		null = open("/dev/null", O_RDWR); /* the lowest free number: fd itself */
		if (null < 0)
			goto fail;
		if (null != fd && (dup2(null, fd) < 0 || close(null)))
			goto fail;
	}

	/* The caller's blocked or ignored SIGCHLD would stop criu from reaping the tasks it
	 * forks; the rest of the mask is the caller's business, not criu's. */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) || signal(SIGCHLD, SIG_DFL) == SIG_ERR)
		goto fail;
	if (fcntl(sk, F_SETFD, 0) < 0) /* the one descriptor criu swrk must get */
		goto fail;
	format_fd(fd_arg, sizeof(fd_arg), sk);
	execlp(binary, binary, "swrk", fd_arg, (char *)NULL);
fail:
	err = errno;
	if (write(status_fd, &err, sizeof(err)) != sizeof(err))
		_exit(2);
	_exit(1);
}

/*
 * Starts `binary swrk FD` on one end of a socket pair and keeps the other: 0, or -errno
 * when the socket, the fork or the exec failed (criu's own failures come back as answers).
 */
static int spawn_swrk(const char *binary, bool detach, struct session *s)
{
	int sks[2], status[2], err = 0;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sks))
		return -errno;
	if (pipe2(status, O_CLOEXEC)) {
		err = errno;
		goto close_sks;
	}

	pid = fork();
	if (pid < 0) {
		err = errno;
		close(status[0]);
		close(status[1]);
		goto close_sks;
	}
	if (pid == 0) {
		close(sks[0]);
		close(status[0]);
		exec_swrk(binary, sks[1], status[1], detach);
	}
	close(sks[1]);
	close(status[1]);

	/* detach: pid is the intermediate child, gone as soon as it forked criu */
	if (detach)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	else
		s->swrk = pid;

	/* End of file: every copy of the write end is closed, criu runs. */
	do
		n = read(status[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(status[0]);
	if (n == 0) {
		s->sk = sks[0];
		s->own_sk = true;
		return 0;
	}
	if (n != sizeof(err))
		err = n < 0 ? errno : EIO;
	if (s->swrk) {
		while (waitpid(s->swrk, NULL, 0) < 0 && errno == EINTR)
			;
		s->swrk = 0;
	}
	close(sks[0]);
	return -err;

close_sks:
	close(sks[0]);
	close(sks[1]);
	return -err;
}

static int connect_service(const char *address, struct session *s)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int sk, err;

	if (strlen(address) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, address);
	sk = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sk < 0)
		return -errno;
	if (connect(sk, (struct sockaddr *)&addr, sizeof(addr))) {
		err = errno;
		close(sk);
		return -err;
	}
	s->sk = sk;
	s->own_sk = true;
	return 0;
}

/*
 * Reaches criu as opts say; detach for a self-dump (see exec_swrk()). 0, or -ECONNREFUSED
 * with s->err saying why.
 */
static int session_open(criu_opts *opts, enum criu_service_comm comm, const char *binary,
			bool detach, struct session *s)
{
	int ret;

	*s = (struct session){.sk = -1};
	switch (comm) {
	case CRIU_COMM_FD:
		if (opts->service_fd < 0) {
			ret = -EBADF; /* criu_set_service_comm(CRIU_COMM_FD) without an fd */
			break;
		}
		s->sk = opts->service_fd;
		return 0;
	case CRIU_COMM_SK:
		ret = connect_service(opts->service_address, s);
		break;
	case CRIU_COMM_BIN:
		ret = spawn_swrk(binary, detach, s);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret) {
		s->err = -ret;
		return -ECONNREFUSED;
	}
	return 0;
}

/* Closing our end ends criu swrk's session; then it exits and is reaped. */
static void session_close(struct session *s)
{
	if (s->own_sk)
		close(s->sk);
	if (s->swrk)
		while (waitpid(s->swrk, NULL, 0) < 0 && errno == EINTR)
			;
}

static int send_req(struct session *s, CriuReq *req)
{
	size_t len = criu_req__get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	ssize_t n;

	if (!buf) {
		s->err = ENOMEM;
		return -ECOMM;
	}
	criu_req__pack(req, buf);
	/* MSG_NOSIGNAL: a criu that died must not take the caller with it (SIGPIPE) */
	do
		n = send(s->sk, buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	free(buf);
	if (n < 0) {
		s->err = errno;
		return -ECOMM;
	}
	return 0;
}

/*
 * One message from criu: a CriuResp, with the descriptor that rides along an
 * "orphan-pts-master" notification (SCM_RIGHTS) kept for criu_get_orphan_pts_master_fd().
 */
static int recv_resp(struct session *s, CriuResp **resp)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {0};
	struct cmsghdr *cmsg;
	struct iovec iov;
	int fd = -1;
	ssize_t len;
	uint8_t *buf;

	/* SOCK_SEQPACKET: the peeked length is the whole message's */
	do
		len = recv(s->sk, NULL, 0, MSG_PEEK | MSG_TRUNC);
	while (len < 0 && errno == EINTR);
	if (len <= 0) {
		/* 0: criu closed the connection without an answer */
		s->err = len < 0 ? errno : ECONNRESET;
		return -ECOMM;
	}
	buf = malloc(len);
	if (!buf) {
		s->err = ENOMEM;
		return -ECOMM;
	}
	iov = (struct iovec){.iov_base = buf, .iov_len = len};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control.buf;
	msg.msg_controllen = sizeof(control.buf);
	do
		len = recvmsg(s->sk, &msg, 0);
	while (len < 0 && errno == EINTR);
	if (len <= 0) {
		s->err = len < 0 ? errno : ECONNRESET;
		free(buf);
		return -ECOMM;
	}
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg))
		if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cmsg), sizeof(fd));
	if (msg.msg_flags & MSG_CTRUNC) {
		/* more descriptors than criu ever sends: the kernel dropped the rest */
		if (fd >= 0)
			close(fd);
		free(buf);
		s->err = EBADMSG;
		return -ECOMM;
	}

	*resp = criu_resp__unpack(NULL, len, buf);
	free(buf);
	if (!*resp) {
		if (fd >= 0)
			close(fd);
		s->err = EBADMSG;
		return -ECOMM;
	}
	if (fd >= 0) {
		if ((*resp)->type == CRIU_REQ_TYPE__NOTIFY)
			orphan_pts_master_fd = fd; /* the caller's from now on */
		else
			close(fd);
	}
	return 0;
}

/*
 * Sends req and reads criu's answer into *resp, answering the notifications that come
 * before it. 0 with *resp set (its success field still to be looked at), or a negative
 * value: -ECOMM, -EINVAL (criu does not know the request), -EBADMSG (the answer is not
 * to req), or the notify callback's non-zero return (criu was told to stop).
 */
static int exchange(struct session *s, criu_opts *opts, CriuReq *req, CriuResp **resp)
{
	static char no_action[1];
	CriuNotify no_notify = CRIU_NOTIFY__INIT;
	int ret;

	*resp = NULL;
	ret = send_req(s, req);
	if (ret)
		return ret;

	for (;;) {
		CriuReq ack = CRIU_REQ__INIT;
		CriuNotify *notify;
		int cb_ret = 0;

		ret = recv_resp(s, resp);
		if (ret)
			return ret;
		if ((*resp)->type != CRIU_REQ_TYPE__NOTIFY)
			break;

		notify = (*resp)->notify ? (*resp)->notify : &no_notify;
		if (opts->notify)
			cb_ret = opts->notify(notify->script ? notify->script : no_action, notify);
		criu_resp__free_unpacked(*resp, NULL);
		*resp = NULL;

		ack.type = CRIU_REQ_TYPE__NOTIFY;
		ack.has_notify_success = true;
		ack.notify_success = cb_ret == 0;
		ret = send_req(s, &ack);
		/* A refusal ends the call: criu gives up on the request. */
		if (cb_ret)
			return cb_ret;
		if (ret)
			return ret;
	}

	if ((*resp)->has_cr_errno)
		s->err = (*resp)->cr_errno;
	if ((*resp)->type != req->type) {
		/* criu answers a request type it does not know with an EMPTY failure */
		bool unknown = (*resp)->type == CRIU_REQ_TYPE__EMPTY && !(*resp)->success;

		ret = unknown ? -EINVAL : -EBADMSG;
		criu_resp__free_unpacked(*resp, NULL);
		*resp = NULL;
	}
	return ret;
}

/*
 * One request on a connection of its own. detach: a dump of the caller itself.
 * *err: the errno to return with.
 */
static int request(criu_opts *opts, CriuReq *req, CriuResp **resp, int *err)
{
	bool detach =
		(req->type == CRIU_REQ_TYPE__DUMP || req->type == CRIU_REQ_TYPE__SINGLE_PRE_DUMP) &&
		req->opts && !req->opts->has_pid;
	struct session s;
	int ret;

	*resp = NULL;
	ret = session_open(opts, opts->comm, opts->service_binary, detach, &s);
	if (!ret) {
		ret = exchange(&s, opts, req, resp);
		session_close(&s);
	}
	*err = s.err;
	return ret;
}

/* The end of every call: the response freed, errno set. */
static int finish(int ret, CriuResp *resp, int err)
{
	if (resp)
		criu_resp__free_unpacked(resp, NULL);
	errno = err;
	return ret;
}

int criu_local_check(criu_opts *opts)
{
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp;
	int ret, err;

	req.type = CRIU_REQ_TYPE__CHECK;
	req.opts = opts->rpc;
	ret = request(opts, &req, &resp, &err);
	if (!ret)
		ret = resp->success ? 0 : -EBADE;
	return finish(ret, resp, err);
}

int criu_check(void)
{
	return criu_local_check(libcriu_global_opts);
}

static int dump(criu_opts *opts, CriuReqType type)
{
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp;
	int ret, err;

	req.type = type;
	req.opts = opts->rpc;
	ret = request(opts, &req, &resp, &err);
	if (!ret) {
		if (!resp->success)
			ret = -EBADE;
		else if (type == CRIU_REQ_TYPE__DUMP && resp->dump && resp->dump->has_restored &&
			 resp->dump->restored)
			ret = 1; /* a self-dump, and this is the restored caller */
	}
	return finish(ret, resp, err);
}

int criu_local_dump(criu_opts *opts)
{
	return dump(opts, CRIU_REQ_TYPE__DUMP);
}

int criu_dump(void)
{
	return criu_local_dump(libcriu_global_opts);
}

/* One pre-dump on a connection of its own (criu_dump_iters() keeps one for all). */
int criu_local_pre_dump(criu_opts *opts)
{
	return dump(opts, CRIU_REQ_TYPE__SINGLE_PRE_DUMP);
}

int criu_pre_dump(void)
{
	return criu_local_pre_dump(libcriu_global_opts);
}

/*
 * PRE_DUMP requests on one connection (criu keeps it open after a pre-dump for the next
 * request), then DUMP. Each request carries opts->rpc as more() left it.
 */
int criu_local_dump_iters(criu_opts *opts, int (*more)(criu_predump_info pi))
{
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp = NULL;
	struct session s;
	int ret;

	if (!opts->rpc->has_pid || !more)
		return finish(-EINVAL, NULL, 0);
	ret = session_open(opts, opts->comm, opts->service_binary, false, &s);
	if (ret)
		return finish(ret, NULL, s.err);

	req.opts = opts->rpc;
	for (;;) {
		req.type = CRIU_REQ_TYPE__PRE_DUMP;
		ret = exchange(&s, opts, &req, &resp);
		if (ret)
			goto out;
		if (!resp->success) {
			ret = -EBADE;
			goto out;
		}
		criu_resp__free_unpacked(resp, NULL);
		resp = NULL;

		ret = more(NULL);
		if (ret < 0)
			goto out;
		if (ret == 0)
			break;
	}
	req.type = CRIU_REQ_TYPE__DUMP;
	ret = exchange(&s, opts, &req, &resp);
	if (!ret && !resp->success)
		ret = -EBADE;
out:
	session_close(&s);
	return finish(ret, resp, s.err);
}

int criu_dump_iters(int (*more)(criu_predump_info pi))
{
	return criu_local_dump_iters(libcriu_global_opts, more);
}

static int restore(criu_opts *opts, enum criu_service_comm comm, bool sibling)
{
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp = NULL;
	struct session s;
	int ret;

	req.type = CRIU_REQ_TYPE__RESTORE;
	req.opts = opts->rpc;
	/* For this request only: the options object may serve a plain restore next. */
	opts->rpc->has_rst_sibling = sibling;
	opts->rpc->rst_sibling = sibling;

	ret = session_open(opts, comm, opts->service_binary, false, &s);
	if (!ret) {
		ret = exchange(&s, opts, &req, &resp);
		session_close(&s);
	}
	opts->rpc->has_rst_sibling = false;
	opts->rpc->rst_sibling = false;

	if (!ret) {
		if (!resp->success)
			ret = -EBADE;
		else if (!resp->restore)
			ret = -EBADMSG;
		else
			ret = resp->restore->pid;
	}
	return finish(ret, resp, s.err);
}

int criu_local_restore(criu_opts *opts)
{
	return restore(opts, opts->comm, false);
}

int criu_restore(void)
{
	return criu_local_restore(libcriu_global_opts);
}

/*
 * The restored root is to be the caller's child: only criu swrk, itself the caller's
 * child, can make it its sibling, so the binary is started whatever the mode.
 */
int criu_local_restore_child(criu_opts *opts)
{
	return restore(opts, CRIU_COMM_BIN, true);
}

int criu_restore_child(void)
{
	return criu_local_restore_child(libcriu_global_opts);
}

int criu_local_get_version(criu_opts *opts)
{
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp;
	int ret, err;

	req.type = CRIU_REQ_TYPE__VERSION;
	req.opts = opts->rpc;
	ret = request(opts, &req, &resp, &err);
	if (ret)
		return finish(ret, resp, err);
	if (!resp->success)
		return finish(-EBADE, resp, err);
	if (!resp->version)
		return finish(-EBADMSG, resp, err);

	ret = resp->version->major_number * 10000 + resp->version->minor_number * 100;
	if (resp->version->has_sublevel)
		ret += resp->version->sublevel;
	/* A criu built from a git tree is ahead of its release: counted as the next minor,
	 * as CRIU's libcriu and runc count it. */
	if (resp->version->gitid)
		ret = ret - ret % 100 + 100;
	return finish(ret, resp, err);
}

int criu_get_version(void)
{
	return criu_local_get_version(libcriu_global_opts);
}

int criu_local_check_version(criu_opts *opts, int minimum)
{
	int version = criu_local_get_version(opts);

	if (version < 0)
		return version;
	return version >= minimum;
}

int criu_check_version(int minimum)
{
	return criu_local_check_version(libcriu_global_opts, minimum);
}

int criu_local_feature_check(criu_opts *opts, struct criu_feature_check *features, size_t size)
{
	struct criu_feature_check asked = {0}, found = {0};
	CriuFeatures query = CRIU_FEATURES__INIT;
	CriuReq req = CRIU_REQ__INIT;
	CriuResp *resp;
	int ret, err;

	/* size: the caller's struct, which may be older and shorter, never longer */
	if (!features || size > sizeof(asked))
		return finish(-1, NULL, 0);
	memcpy(&asked, features, size);

	query.has_mem_track = asked.mem_track;
	query.mem_track = asked.mem_track;
	query.has_lazy_pages = asked.lazy_pages;
	query.lazy_pages = asked.lazy_pages;
	query.has_pidfd_store = asked.pidfd_store;
	query.pidfd_store = asked.pidfd_store;
	req.type = CRIU_REQ_TYPE__FEATURE_CHECK;
	req.opts = opts->rpc;
	req.features = &query;

	ret = request(opts, &req, &resp, &err);
	if (ret)
		return finish(ret, resp, err);
	if (!resp->success)
		return finish(-EBADE, resp, err);
	if (!resp->features)
		return finish(-EBADMSG, resp, err);

	found.mem_track = resp->features->has_mem_track && resp->features->mem_track;
	found.lazy_pages = resp->features->has_lazy_pages && resp->features->lazy_pages;
	found.pidfd_store = resp->features->has_pidfd_store && resp->features->pidfd_store;
	memcpy(features, &found, size);
	return finish(0, resp, err);
}

int criu_feature_check(struct criu_feature_check *features, size_t size)
{
	return criu_local_feature_check(libcriu_global_opts, features, size);
}
