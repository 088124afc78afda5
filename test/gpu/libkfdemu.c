/*
 * libkfdemu: the KFD EMULATOR's wire layer (framing, short reads and writes, fd batches)
 * and its client calls. The daemon links the wire layer too, so both ends frame messages
 * with one piece of code. Emulator only: no GPU is involved anywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libkfdemu.h"

struct kfdemu_conn {
	int sock;
	uint32_t next_seq;
	uint32_t pid;
	uint32_t kind;	 /* enum kfdemu_conn_kind */
	uint32_t gpu_id; /* a render node's GPU */
	/* One request in flight per connection: replies carry no routing beyond seq. */
	pthread_mutex_t lock;
};

/* ---- logging ---- */

static void default_log(int level, const char *msg)
{
	if (level <= 2)
		fprintf(stderr, "libkfdemu (EMULATOR): %s\n", msg);
}

static kfdemu_log_fn log_fn = default_log;

void kfdemu_set_log_fn(kfdemu_log_fn fn)
{
	log_fn = fn ? fn : default_log;
}

void kfdemu_log(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(level, msg);
}

#define lib_err(fmt, ...) kfdemu_log(1, fmt, ##__VA_ARGS__)
#define lib_warn(fmt, ...) kfdemu_log(2, fmt, ##__VA_ARGS__)
#define lib_debug(fmt, ...) kfdemu_log(4, fmt, ##__VA_ARGS__)

/* ---- wire layer: sending ---- */

static void put_fds_in_cmsg(struct msghdr *mh, char *cbuf, const int *fds, uint32_t nr_fds)
{
	struct cmsghdr *cmsg;

	mh->msg_control = cbuf;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
	cmsg = CMSG_FIRSTHDR(mh);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
	memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nr_fds);
}

/*
 * Send len bytes, looping over short sends. The fds, if any, ride on the first sendmsg
 * that the kernel accepts bytes from: a stream socket attaches them to that first skb.
 */
static int send_bytes(int sock, const void *buf, size_t len, const int *fds, uint32_t nr_fds,
		      size_t max_chunk)
{
	char cbuf[CMSG_SPACE(sizeof(int) * KFDEMU_FDS_PER_BATCH)];
	const char *pos = buf;

	while (len > 0) {
		struct iovec iov = { .iov_base = (void *)pos, .iov_len = len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t sent;

		if (max_chunk && iov.iov_len > max_chunk)
			iov.iov_len = max_chunk;
		if (nr_fds)
			put_fds_in_cmsg(&mh, cbuf, fds, nr_fds);
		sent = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		nr_fds = 0;
		pos += sent;
		len -= sent;
	}
	return 0;
}

static void fill_frame(struct kfdemu_frame *frame, const struct kfdemu_msg *msg, uint16_t type,
		       uint64_t payload_size, uint32_t nr_fds)
{
	memset(frame, 0, sizeof(*frame));
	frame->magic = KFDEMU_MAGIC;
	frame->version = KFDEMU_PROTO_VERSION;
	frame->type = type;
	frame->seq = msg->seq;
	frame->status = msg->status;
	frame->payload_size = payload_size;
	frame->nr_fds = nr_fds;
	frame->flags = msg->flags;
}

int kfdemu_wire_send(int sock, const struct kfdemu_msg *msg, size_t max_chunk)
{
	struct kfdemu_frame frame;
	uint32_t sent_fds = 0;
	int ret;

	fill_frame(&frame, msg, msg->type, msg->payload_size, msg->nr_fds);
	ret = send_bytes(sock, &frame, sizeof(frame), NULL, 0, max_chunk);
	if (!ret && msg->payload_size)
		ret = send_bytes(sock, msg->payload, msg->payload_size, NULL, 0, max_chunk);
	while (!ret && sent_fds < msg->nr_fds) {
		uint32_t batch = msg->nr_fds - sent_fds;

		if (batch > KFDEMU_FDS_PER_BATCH)
			batch = KFDEMU_FDS_PER_BATCH;
		fill_frame(&frame, msg, KFDEMU_MSG_FDS, 0, batch);
		ret = send_bytes(sock, &frame, sizeof(frame), msg->fds + sent_fds, batch,
				 max_chunk);
		sent_fds += batch;
	}
	return ret;
}

/* ---- wire layer: receiving ---- */

struct fd_collector {
	int *fds;
	uint32_t nr_fds;
	uint32_t capacity;
	bool lost_fds; /* the kernel truncated ancillary data: descriptors were dropped */
};

static void collector_close_all(struct fd_collector *col)
{
	for (uint32_t i = 0; i < col->nr_fds; i++)
		close(col->fds[i]);
	free(col->fds);
	col->fds = NULL;
	col->nr_fds = col->capacity = 0;
}

static int collector_add(struct fd_collector *col, const int *fds, uint32_t nr_fds)
{
	if (col->nr_fds + nr_fds > col->capacity) {
		uint32_t capacity = (col->nr_fds + nr_fds) * 2;
		int *grown = realloc(col->fds, capacity * sizeof(int));

		if (!grown) {
			for (uint32_t i = 0; i < nr_fds; i++)
				close(fds[i]);
			return -ENOMEM;
		}
		col->fds = grown;
		col->capacity = capacity;
	}
	memcpy(col->fds + col->nr_fds, fds, nr_fds * sizeof(int));
	col->nr_fds += nr_fds;
	return 0;
}

static int collect_cmsg_fds(struct msghdr *mh, struct fd_collector *col)
{
	struct cmsghdr *cmsg;
	int ret = 0;

	if (mh->msg_flags & MSG_CTRUNC)
		col->lost_fds = true;
	for (cmsg = CMSG_FIRSTHDR(mh); cmsg; cmsg = CMSG_NXTHDR(mh, cmsg)) {
		uint32_t nr_fds;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		nr_fds = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (collector_add(col, (int *)CMSG_DATA(cmsg), nr_fds))
			ret = -ENOMEM;
	}
	return ret;
}

/*
 * Read exactly len bytes, looping over short reads; descriptors that arrive on the way are
 * collected. *started tells whether any byte of the current message was read, to tell a
 * clean close between messages from a peer that died in the middle of one.
 */
static int recv_bytes(int sock, void *buf, size_t len, struct fd_collector *col, bool *started)
{
	char cbuf[CMSG_SPACE(sizeof(int) * KFDEMU_FDS_PER_BATCH)];
	char *pos = buf;

	while (len > 0) {
		struct iovec iov = { .iov_base = pos, .iov_len = len };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		ssize_t got;
		int ret;

		got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECONNRESET && !*started ? -ENOTCONN : -errno;
		}
		ret = collect_cmsg_fds(&mh, col);
		if (ret)
			return ret;
		if (got == 0)
			return *started ? -ECONNRESET : -ENOTCONN;
		*started = true;
		pos += got;
		len -= got;
	}
	return 0;
}

static int check_frame(const struct kfdemu_frame *frame)
{
	if (frame->magic != KFDEMU_MAGIC) {
		lib_err("bad frame magic %#x (expected %#x)", frame->magic, KFDEMU_MAGIC);
		return -EPROTO;
	}
	if (frame->version != KFDEMU_PROTO_VERSION) {
		lib_err("peer speaks protocol version %u, this side %u", frame->version,
			KFDEMU_PROTO_VERSION);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

static int check_main_frame(const struct kfdemu_frame *frame)
{
	int ret = check_frame(frame);

	if (ret)
		return ret;
	if (frame->type == KFDEMU_MSG_FDS || frame->payload_size > KFDEMU_MAX_PAYLOAD ||
	    frame->nr_fds > KFDEMU_MAX_FDS_PER_MSG) {
		lib_err("bad frame: type %u, %llu payload bytes, %u fds", frame->type,
			(unsigned long long)frame->payload_size, frame->nr_fds);
		return -EPROTO;
	}
	return 0;
}

static int check_batch_frame(const struct kfdemu_frame *batch, const struct kfdemu_frame *main,
			     uint32_t fds_expected, const struct fd_collector *col)
{
	int ret = check_frame(batch);

	if (ret)
		return ret;
	if (batch->type != KFDEMU_MSG_FDS || batch->seq != main->seq || batch->payload_size ||
	    !batch->nr_fds || batch->nr_fds > KFDEMU_FDS_PER_BATCH ||
	    batch->nr_fds > main->nr_fds - fds_expected) {
		lib_err("bad fd batch frame for message seq %u: type %u seq %u, %u fds", main->seq,
			batch->type, batch->seq, batch->nr_fds);
		return -EPROTO;
	}
	if (col->lost_fds || col->nr_fds != fds_expected + batch->nr_fds) {
		lib_err("message seq %u: %u fds arrived, %u announced%s", main->seq, col->nr_fds,
			fds_expected + batch->nr_fds, col->lost_fds ? " (ancillary data truncated)" : "");
		return -EPROTO;
	}
	return 0;
}

static int recv_fd_batches(int sock, const struct kfdemu_frame *main, struct fd_collector *col)
{
	uint32_t fds_expected = 0;
	bool started = true;

	while (fds_expected < main->nr_fds) {
		struct kfdemu_frame batch;
		int ret;

		ret = recv_bytes(sock, &batch, sizeof(batch), col, &started);
		if (!ret)
			ret = check_batch_frame(&batch, main, fds_expected, col);
		if (ret)
			return ret;
		fds_expected += batch.nr_fds;
	}
	return 0;
}

static int recv_payload(int sock, const struct kfdemu_frame *frame, struct kfdemu_msg *msg,
			struct fd_collector *col)
{
	bool started = true;

	if (!frame->payload_size)
		return 0;
	msg->payload = malloc(frame->payload_size);
	if (!msg->payload) {
		lib_err("no memory for a %llu-byte payload", (unsigned long long)frame->payload_size);
		return -ENOMEM;
	}
	msg->payload_size = frame->payload_size;
	return recv_bytes(sock, msg->payload, frame->payload_size, col, &started);
}

int kfdemu_wire_recv(int sock, struct kfdemu_msg *msg)
{
	struct fd_collector col = {};
	struct kfdemu_frame frame;
	bool started = false;
	int ret;

	memset(msg, 0, sizeof(*msg));
	ret = recv_bytes(sock, &frame, sizeof(frame), &col, &started);
	if (!ret) {
		ret = check_main_frame(&frame);
		msg->type = frame.type;
		msg->seq = frame.seq;
		msg->status = frame.status;
		msg->flags = frame.flags;
	}
	if (!ret)
		ret = recv_payload(sock, &frame, msg, &col);
	if (!ret)
		ret = recv_fd_batches(sock, &frame, &col);
	if (!ret && (col.lost_fds || col.nr_fds != frame.nr_fds)) {
		lib_err("message seq %u: %u fds arrived, %u announced", frame.seq, col.nr_fds,
			frame.nr_fds);
		ret = -EPROTO;
	}
	if (ret == -ECONNRESET)
		lib_warn("peer went away in the middle of a message");
	if (ret) {
		collector_close_all(&col);
		free(msg->payload);
		msg->payload = NULL;
		msg->payload_size = 0;
		return ret;
	}
	msg->fds = col.fds;
	msg->nr_fds = col.nr_fds;
	return 0;
}

void kfdemu_msg_release(struct kfdemu_msg *msg)
{
	for (uint32_t i = 0; i < msg->nr_fds; i++)
		if (msg->fds[i] >= 0)
			close(msg->fds[i]);
	free(msg->fds);
	free(msg->payload);
	memset(msg, 0, sizeof(*msg));
}

/* ---- client calls ---- */

static const char *const msg_names[] = {
	[KFDEMU_MSG_HELLO] = "HELLO",		  [KFDEMU_MSG_GET_GPUS] = "GET_GPUS",
	[KFDEMU_MSG_ALLOC_BO] = "ALLOC_BO",	  [KFDEMU_MSG_FREE_BO] = "FREE_BO",
	[KFDEMU_MSG_EXPORT_BO] = "EXPORT_BO",	  [KFDEMU_MSG_RUN_KERNEL] = "RUN_KERNEL",
	[KFDEMU_MSG_ATTACH] = "ATTACH",		  [KFDEMU_MSG_CRIU_OP] = "CRIU_OP",
	[KFDEMU_MSG_ACQUIRE_VM] = "ACQUIRE_VM",	  [KFDEMU_MSG_GET_MMAP] = "GET_MMAP",
	[KFDEMU_MSG_CREATE_QUEUE] = "CREATE_QUEUE", [KFDEMU_MSG_DESTROY_QUEUE] = "DESTROY_QUEUE",
	[KFDEMU_MSG_CREATE_EVENT] = "CREATE_EVENT", [KFDEMU_MSG_DESTROY_EVENT] = "DESTROY_EVENT",
	[KFDEMU_MSG_SET_EVENT] = "SET_EVENT",	  [KFDEMU_MSG_RESET_EVENT] = "RESET_EVENT",
	[KFDEMU_MSG_WAIT_EVENTS] = "WAIT_EVENTS",  [KFDEMU_MSG_SVM] = "SVM",
	[KFDEMU_MSG_COPY] = "COPY",		  [KFDEMU_MSG_NEXT_DATA] = "NEXT_DATA",
	[KFDEMU_MSG_IDENTIFY] = "IDENTIFY",	  [KFDEMU_MSG_STATS] = "STATS",
};

static const char *msg_type_name(uint16_t type)
{
	return type < sizeof(msg_names) / sizeof(msg_names[0]) && msg_names[type] ? msg_names[type]
										  : "unknown";
}

/*
 * Send one request (with fds, the caller's, sent as copies), wait for its reply. A reply
 * with status < 0 is the emulator refusing the request (it logged why): returned as is.
 * Transport failures are logged here.
 */
static int conn_call_fds(struct kfdemu_conn *conn, uint16_t type, const void *req,
			 uint64_t req_size, const int *fds, uint32_t nr_fds,
			 struct kfdemu_msg *reply)
{
	struct kfdemu_msg request = {.type = type,
				     .payload = (void *)req,
				     .payload_size = req_size,
				     .fds = (int *)fds,
				     .nr_fds = nr_fds};
	int ret;

	pthread_mutex_lock(&conn->lock);
	request.seq = conn->next_seq++;
	ret = kfdemu_wire_send(conn->sock, &request, 0);
	if (ret)
		lib_err("%s: cannot send request: %s", msg_type_name(type), strerror(-ret));
	else {
		ret = kfdemu_wire_recv(conn->sock, reply);
		if (ret)
			lib_err("%s: no reply from the emulator: %s", msg_type_name(type),
				strerror(-ret));
	}
	pthread_mutex_unlock(&conn->lock);
	if (ret)
		return ret;

	if (reply->type != type || reply->seq != request.seq ||
	    !(reply->flags & KFDEMU_FRAME_REPLY)) {
		lib_err("%s: reply does not match (type %u seq %u flags %#x, sent seq %u)",
			msg_type_name(type), reply->type, reply->seq, reply->flags, request.seq);
		kfdemu_msg_release(reply);
		return -EPROTO;
	}
	if (reply->status < 0) {
		lib_debug("%s: the emulator refused: %s", msg_type_name(type), strerror(-reply->status));
		ret = reply->status;
		kfdemu_msg_release(reply);
	}
	return ret;
}

static int conn_call(struct kfdemu_conn *conn, uint16_t type, const void *req, uint64_t req_size,
		     struct kfdemu_msg *reply)
{
	return conn_call_fds(conn, type, req, req_size, NULL, 0, reply);
}

static int reply_expect(struct kfdemu_msg *reply, const char *what, uint64_t payload_size,
			uint32_t nr_fds)
{
	if (reply->payload_size == payload_size && reply->nr_fds == nr_fds)
		return 0;
	lib_err("%s: reply has %llu bytes and %u fds, expected %llu and %u", what,
		(unsigned long long)reply->payload_size, reply->nr_fds,
		(unsigned long long)payload_size, nr_fds);
	kfdemu_msg_release(reply);
	return -EPROTO;
}

/* A request whose reply is out_size bytes copied to out (NULL, 0: none) and no fd. */
static int simple_call(struct kfdemu_conn *conn, uint16_t type, const void *req,
		       uint64_t req_size, const int *fds, uint32_t nr_fds, void *out,
		       uint64_t out_size)
{
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call_fds(conn, type, req, req_size, fds, nr_fds, &reply);
	if (!ret)
		ret = reply_expect(&reply, msg_type_name(type), out_size, 0);
	if (ret)
		return ret;
	if (out_size)
		memcpy(out, reply.payload, out_size);
	kfdemu_msg_release(&reply);
	return 0;
}

/* A request whose reply is one fd and no payload. */
static int fd_call(struct kfdemu_conn *conn, uint16_t type, const void *req, uint64_t req_size,
		   int *fd)
{
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, type, req, req_size, &reply);
	if (!ret)
		ret = reply_expect(&reply, msg_type_name(type), 0, 1);
	if (ret)
		return ret;
	*fd = reply.fds[0];
	reply.fds[0] = -1;
	kfdemu_msg_release(&reply);
	return 0;
}

static const char *socket_path_or_default(const char *socket_path)
{
	if (!socket_path)
		socket_path = getenv(KFDEMU_SOCKET_ENV);
	return socket_path ? socket_path : KFDEMU_DEFAULT_SOCKET;
}

static int connect_socket(const char *socket_path, int *sock_out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int sock;

	if (strlen(socket_path) >= sizeof(addr.sun_path)) {
		lib_err("socket path too long: %s", socket_path);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, socket_path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		lib_err("socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(sock, (struct sockaddr *)&addr, sizeof(addr))) {
		int ret = -errno;

		lib_err("cannot connect to the KFD emulator at %s: %s", socket_path, strerror(errno));
		close(sock);
		return ret;
	}
	*sock_out = sock;
	return 0;
}

static int say_hello(struct kfdemu_conn *conn, uint32_t kind, uint32_t render_minor)
{
	struct kfdemu_hello hello = { .client_version = KFDEMU_PROTO_VERSION, .kind = kind,
				      .render_minor = render_minor };
	struct kfdemu_hello_reply hello_reply;
	struct stat st;
	int ret;

	if (fstat(conn->sock, &st)) {
		lib_err("fstat of the emulator socket: %s", strerror(errno));
		return -errno;
	}
	hello.sock_ino = st.st_ino;
	ret = simple_call(conn, KFDEMU_MSG_HELLO, &hello, sizeof(hello), NULL, 0, &hello_reply,
			  sizeof(hello_reply));
	if (ret)
		return ret;
	conn->pid = hello_reply.pid;
	conn->gpu_id = hello_reply.gpu_id;
	conn->kind = kind;
	return 0;
}

static int open_conn(const char *socket_path, uint32_t kind, uint32_t render_minor,
		     struct kfdemu_conn **conn_out)
{
	struct kfdemu_conn *conn;
	int ret;

	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return -ENOMEM;
	pthread_mutex_init(&conn->lock, NULL);
	conn->next_seq = 1;
	ret = connect_socket(socket_path_or_default(socket_path), &conn->sock);
	if (ret) {
		free(conn);
		return ret;
	}
	ret = say_hello(conn, kind, render_minor);
	if (ret) {
		kfdemu_close(conn);
		return ret;
	}
	*conn_out = conn;
	return 0;
}

int kfdemu_connect(const char *socket_path, struct kfdemu_conn **conn)
{
	return open_conn(socket_path, KFDEMU_CONN_KFD, 0, conn);
}

int kfdemu_open_render(const char *socket_path, uint32_t render_minor, struct kfdemu_conn **conn)
{
	return open_conn(socket_path, KFDEMU_CONN_RENDER, render_minor, conn);
}

int kfdemu_conn_wrap(int sock, uint32_t kind, struct kfdemu_conn **conn_out)
{
	struct kfdemu_conn *conn = calloc(1, sizeof(*conn));

	if (!conn)
		return -ENOMEM;
	pthread_mutex_init(&conn->lock, NULL);
	conn->next_seq = 1;
	conn->sock = sock;
	conn->kind = kind;
	*conn_out = conn;
	return 0;
}

void kfdemu_close(struct kfdemu_conn *conn)
{
	if (!conn)
		return;
	close(conn->sock);
	pthread_mutex_destroy(&conn->lock);
	free(conn);
}

int kfdemu_conn_fd(const struct kfdemu_conn *conn)
{
	return conn->sock;
}

uint32_t kfdemu_conn_pid(const struct kfdemu_conn *conn)
{
	return conn->pid;
}

uint32_t kfdemu_conn_gpu_id(const struct kfdemu_conn *conn)
{
	return conn->gpu_id;
}

int kfdemu_get_gpus(struct kfdemu_conn *conn, struct kfdemu_gpu_info *gpus, uint32_t *nr_gpus)
{
	struct kfdemu_msg reply;
	uint32_t nr_reported;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_GET_GPUS, NULL, 0, &reply);
	if (ret)
		return ret;
	nr_reported = reply.payload_size / sizeof(*gpus);
	ret = reply_expect(&reply, "GET_GPUS", nr_reported * sizeof(*gpus), 0);
	if (ret)
		return ret;
	memcpy(gpus, reply.payload,
	       (nr_reported < *nr_gpus ? nr_reported : *nr_gpus) * sizeof(*gpus));
	*nr_gpus = nr_reported;
	kfdemu_msg_release(&reply);
	return 0;
}

int kfdemu_acquire_vm(struct kfdemu_conn *conn, uint32_t gpu_id, int render_fd)
{
	struct kfdemu_acquire_vm request = { .gpu_id = gpu_id };

	return simple_call(conn, KFDEMU_MSG_ACQUIRE_VM, &request, sizeof(request), &render_fd, 1,
			   NULL, 0);
}

int kfdemu_alloc(struct kfdemu_conn *conn, struct kfdemu_bo_info *bo)
{
	return simple_call(conn, KFDEMU_MSG_ALLOC_BO, bo, sizeof(*bo), NULL, 0, bo, sizeof(*bo));
}

int kfdemu_alloc_bo(struct kfdemu_conn *conn, uint32_t gpu_id, uint32_t alloc_flags,
		    uint64_t size, uint64_t va_addr, struct kfdemu_bo_info *bo)
{
	*bo = (struct kfdemu_bo_info){ .gpu_id = gpu_id, .alloc_flags = alloc_flags, .size = size,
				       .va_addr = va_addr };
	return kfdemu_alloc(conn, bo);
}

int kfdemu_free_bo(struct kfdemu_conn *conn, uint64_t handle)
{
	struct kfdemu_bo_ref request = { .handle = handle };

	return simple_call(conn, KFDEMU_MSG_FREE_BO, &request, sizeof(request), NULL, 0, NULL, 0);
}

int kfdemu_export_bo(struct kfdemu_conn *conn, uint64_t handle, int *fd)
{
	struct kfdemu_bo_ref request = { .handle = handle };

	return fd_call(conn, KFDEMU_MSG_EXPORT_BO, &request, sizeof(request), fd);
}

int kfdemu_get_mmap_fd(struct kfdemu_conn *conn, int *fd)
{
	struct kfdemu_get_mmap request = {
		.kind = conn->kind == KFDEMU_CONN_RENDER ? KFDEMU_MMAP_RENDER : KFDEMU_MMAP_KFD
	};

	return fd_call(conn, KFDEMU_MSG_GET_MMAP, &request, sizeof(request), fd);
}

int kfdemu_mmap(struct kfdemu_conn *conn, uint64_t offset, uint64_t size, void **addr)
{
	void *mapping;
	int fd, ret;

	ret = kfdemu_get_mmap_fd(conn, &fd);
	if (ret)
		return ret;
	mapping = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
	if (mapping == MAP_FAILED) {
		ret = -errno;
		lib_err("cannot map %llu bytes at offset %#llx: %s", (unsigned long long)size,
			(unsigned long long)offset, strerror(errno));
	} else
		*addr = mapping;
	close(fd);
	return ret;
}

int kfdemu_map_bo(struct kfdemu_conn *conn, const struct kfdemu_bo_info *bo, void **addr)
{
	return kfdemu_mmap(conn, bo->mmap_offset, bo->size, addr);
}

int kfdemu_run_kernel(struct kfdemu_conn *conn, const struct kfdemu_kernel *kernel,
		      uint64_t *result)
{
	struct kfdemu_kernel_result kernel_result;
	int ret;

	ret = simple_call(conn, KFDEMU_MSG_RUN_KERNEL, kernel, sizeof(*kernel), NULL, 0,
			  &kernel_result, sizeof(kernel_result));
	if (!ret && result)
		*result = kernel_result.value;
	return ret;
}

static int run_simple_kernel(struct kfdemu_conn *conn, uint32_t op, uint64_t handle,
			     uint64_t offset, uint64_t length, uint32_t arg, uint64_t *result)
{
	struct kfdemu_kernel kernel = {
		.op = op, .arg = arg, .handle = handle, .offset = offset, .length = length
	};

	return kfdemu_run_kernel(conn, &kernel, result);
}

int kfdemu_bo_fill(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset, uint64_t length,
		   uint32_t pattern)
{
	return run_simple_kernel(conn, KFDEMU_KERNEL_FILL, handle, offset, length, pattern, NULL);
}

int kfdemu_bo_add(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset, uint64_t length,
		  uint32_t addend)
{
	return run_simple_kernel(conn, KFDEMU_KERNEL_ADD, handle, offset, length, addend, NULL);
}

int kfdemu_bo_checksum(struct kfdemu_conn *conn, uint64_t handle, uint64_t offset,
		       uint64_t length, uint64_t *checksum)
{
	return run_simple_kernel(conn, KFDEMU_KERNEL_CHECKSUM, handle, offset, length, 0, checksum);
}

/* MurmurHash3's 64-bit finaliser: a bijection that maps 0 to 0. */
static uint64_t mix64(uint64_t word)
{
	word ^= word >> 33;
	word *= 0xff51afd7ed558ccdULL;
	word ^= word >> 33;
	word *= 0xc4ceb9fe1a85ec53ULL;
	word ^= word >> 33;
	return word;
}

uint64_t kfdemu_checksum(const void *buf, uint64_t len, uint64_t start_offset)
{
	const uint64_t *words = buf;
	uint64_t first_index = start_offset / 8;
	uint64_t sum = 0;

	for (uint64_t i = 0; i < len / 8; i++)
		if (words[i])
			sum += mix64(words[i]) * (2 * (first_index + i) + 1);
	return sum;
}

int kfdemu_attach(struct kfdemu_conn *conn, uint32_t pid, uint64_t sock_ino)
{
	struct kfdemu_attach request = { .pid = pid, .sock_ino = sock_ino };

	return simple_call(conn, KFDEMU_MSG_ATTACH, &request, sizeof(request), NULL, 0, NULL, 0);
}

int kfdemu_create_queue(struct kfdemu_conn *conn, const struct kfdemu_create_queue *queue,
			struct kfdemu_queue_reply *reply)
{
	return simple_call(conn, KFDEMU_MSG_CREATE_QUEUE, queue, sizeof(*queue), NULL, 0, reply,
			   sizeof(*reply));
}

int kfdemu_destroy_queue(struct kfdemu_conn *conn, uint32_t queue_id)
{
	struct kfdemu_queue_ref request = { .queue_id = queue_id };

	return simple_call(conn, KFDEMU_MSG_DESTROY_QUEUE, &request, sizeof(request), NULL, 0,
			   NULL, 0);
}

int kfdemu_create_event(struct kfdemu_conn *conn, uint32_t type, bool auto_reset,
			struct kfdemu_event_reply *event)
{
	struct kfdemu_create_event request = { .type = type, .auto_reset = auto_reset };

	return simple_call(conn, KFDEMU_MSG_CREATE_EVENT, &request, sizeof(request), NULL, 0,
			   event, sizeof(*event));
}

static int event_call(struct kfdemu_conn *conn, uint16_t type, uint32_t event_id)
{
	struct kfdemu_event_ref request = { .event_id = event_id };

	return simple_call(conn, type, &request, sizeof(request), NULL, 0, NULL, 0);
}

int kfdemu_destroy_event(struct kfdemu_conn *conn, uint32_t event_id)
{
	return event_call(conn, KFDEMU_MSG_DESTROY_EVENT, event_id);
}

int kfdemu_set_event(struct kfdemu_conn *conn, uint32_t event_id)
{
	return event_call(conn, KFDEMU_MSG_SET_EVENT, event_id);
}

int kfdemu_reset_event(struct kfdemu_conn *conn, uint32_t event_id)
{
	return event_call(conn, KFDEMU_MSG_RESET_EVENT, event_id);
}

int kfdemu_wait_events(struct kfdemu_conn *conn, const uint32_t *ids, uint32_t nr_ids,
		       bool wait_for_all, uint32_t timeout_ms, uint32_t *result)
{
	struct {
		struct kfdemu_wait_events hdr;
		uint32_t ids[KFDEMU_MAX_WAIT_EVENTS];
	} request = { .hdr = { .nr_events = nr_ids, .wait_for_all = wait_for_all,
			       .timeout_ms = timeout_ms } };
	struct kfdemu_wait_reply reply;
	int ret;

	if (!nr_ids || nr_ids > KFDEMU_MAX_WAIT_EVENTS)
		return -EINVAL;
	memcpy(request.ids, ids, nr_ids * sizeof(*ids));
	ret = simple_call(conn, KFDEMU_MSG_WAIT_EVENTS, &request,
			  sizeof(request.hdr) + nr_ids * sizeof(*ids), NULL, 0, &reply,
			  sizeof(reply));
	if (!ret)
		*result = reply.result;
	return ret;
}

int kfdemu_svm(struct kfdemu_conn *conn, uint32_t op, uint64_t start, uint64_t size,
	       struct kfd_ioctl_svm_attribute *attrs, uint32_t nattr)
{
	struct {
		struct kfdemu_svm hdr;
		struct kfd_ioctl_svm_attribute attrs[KFDEMU_MAX_SVM_ATTRS];
	} request = { .hdr = { .start = start, .size = size, .op = op, .nattr = nattr } }, reply;
	uint64_t size_out = sizeof(request.hdr) + nattr * sizeof(*attrs);
	int ret;

	if (nattr > KFDEMU_MAX_SVM_ATTRS)
		return -EINVAL;
	memcpy(request.attrs, attrs, nattr * sizeof(*attrs));
	ret = simple_call(conn, KFDEMU_MSG_SVM, &request, size_out, NULL, 0, &reply, size_out);
	if (!ret)
		memcpy(attrs, reply.attrs, nattr * sizeof(*attrs));
	return ret;
}

int kfdemu_copy(struct kfdemu_conn *conn, uint32_t dir, int dmabuf_fd, uint64_t bo_offset,
		int file_fd, uint64_t file_offset, uint64_t length)
{
	struct kfdemu_copy request = { .dir = dir, .bo_offset = bo_offset,
				       .file_offset = file_offset, .length = length };
	int fds[2] = { dmabuf_fd, file_fd };

	return simple_call(conn, KFDEMU_MSG_COPY, &request, sizeof(request), fds, 2, NULL, 0);
}

int kfdemu_next_data(struct kfdemu_conn *conn, int dmabuf_fd, uint64_t from, uint64_t *start,
		     uint64_t *end)
{
	struct kfdemu_next_data request = { .from = from };
	int ret;

	ret = simple_call(conn, KFDEMU_MSG_NEXT_DATA, &request, sizeof(request), &dmabuf_fd, 1,
			  &request, sizeof(request));
	if (!ret) {
		*start = request.start;
		*end = request.end;
	}
	return ret;
}

int kfdemu_identify(struct kfdemu_conn *conn, int fd, struct kfdemu_identity *id)
{
	return simple_call(conn, KFDEMU_MSG_IDENTIFY, NULL, 0, &fd, 1, id, sizeof(*id));
}

int kfdemu_stats(struct kfdemu_conn *conn, struct kfdemu_stats *stats)
{
	return simple_call(conn, KFDEMU_MSG_STATS, NULL, 0, NULL, 0, stats, sizeof(*stats));
}

/* ---- a process's whole device ---- */

int kfdemu_device_open(const char *socket_path, struct kfdemu_device *dev)
{
	uint32_t nr_gpus = KFDEMU_MAX_GPUS;
	int ret;

	memset(dev, 0, sizeof(*dev));
	ret = kfdemu_connect(socket_path, &dev->kfd);
	if (!ret)
		ret = kfdemu_get_gpus(dev->kfd, dev->gpus, &nr_gpus);
	if (!ret && nr_gpus > KFDEMU_MAX_GPUS)
		ret = -E2BIG;
	for (uint32_t i = 0; !ret && i < nr_gpus; i++) {
		ret = kfdemu_open_render(socket_path, dev->gpus[i].render_minor, &dev->render[i]);
		if (!ret)
			ret = kfdemu_acquire_vm(dev->kfd, dev->gpus[i].gpu_id,
						kfdemu_conn_fd(dev->render[i]));
		if (ret)
			lib_err("gpu %#x: cannot open renderD%u and acquire its VM: %s",
				dev->gpus[i].gpu_id, dev->gpus[i].render_minor, strerror(-ret));
		dev->nr_gpus = i + 1;
	}
	if (ret)
		kfdemu_device_close(dev);
	return ret;
}

void kfdemu_device_close(struct kfdemu_device *dev)
{
	for (uint32_t i = 0; i < dev->nr_gpus; i++)
		kfdemu_close(dev->render[i]);
	kfdemu_close(dev->kfd);
	memset(dev, 0, sizeof(*dev));
}

int kfdemu_device_map_bo(struct kfdemu_device *dev, const struct kfdemu_bo_info *bo, void **addr)
{
	const uint32_t render_kinds = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT;

	if (!(bo->alloc_flags & render_kinds))
		return kfdemu_map_bo(dev->kfd, bo, addr);
	for (uint32_t i = 0; i < dev->nr_gpus; i++)
		if (dev->gpus[i].gpu_id == bo->gpu_id)
			return kfdemu_map_bo(dev->render[i], bo, addr);
	lib_err("BO %#llx: no render node of gpu %#x", (unsigned long long)bo->handle, bo->gpu_id);
	return -ENODEV;
}

/* ---- the CRIU op ---- */

static int check_criu_pointers(const struct kfd_ioctl_criu_args *args)
{
	bool uses_arrays = args->op == KFD_CRIU_OP_CHECKPOINT || args->op == KFD_CRIU_OP_RESTORE;

	if (!uses_arrays)
		return 0;
	/* The ioctl would fault on these: keep the same answer. */
	if ((args->num_devices && !args->devices) || (args->num_bos && !args->bos) ||
	    (args->priv_data_size && !args->priv_data))
		return -EFAULT;
	return 0;
}

static uint64_t criu_arrays_size(const struct kfd_ioctl_criu_args *args)
{
	return args->num_devices * sizeof(struct kfd_criu_device_bucket) +
	       args->num_bos * sizeof(struct kfd_criu_bo_bucket) + args->priv_data_size;
}

/*
 * RESTORE's device buckets name render nodes by fd, as the ioctl's caller does: those
 * fds go along and the buckets name them by index; an fd the caller does not have open
 * goes as KFDEMU_INVALID_FD, for the emulator to refuse as KFD would.
 */
static void pass_drm_fds(struct kfd_criu_device_bucket *devices, uint32_t num_devices, int *fds,
			 uint32_t *nr_fds)
{
	*nr_fds = 0;
	for (uint32_t i = 0; i < num_devices; i++) {
		int fd = (int)devices[i].drm_fd;

		if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
			devices[i].drm_fd = KFDEMU_INVALID_FD;
			continue;
		}
		fds[*nr_fds] = fd;
		devices[i].drm_fd = (*nr_fds)++;
	}
}

static int build_criu_request(const struct kfd_ioctl_criu_args *args, void **req, uint64_t *size,
			      int *fds, uint32_t *nr_fds)
{
	uint64_t arrays_size = args->op == KFD_CRIU_OP_RESTORE ? criu_arrays_size(args) : 0;
	char *pos;

	*nr_fds = 0;
	if (arrays_size > KFDEMU_MAX_PAYLOAD || args->num_devices > KFDEMU_FDS_PER_BATCH)
		return -E2BIG;
	*size = sizeof(*args) + arrays_size;
	*req = calloc(1, *size);
	if (!*req)
		return -ENOMEM;
	memcpy(*req, args, sizeof(*args));
	if (!arrays_size)
		return 0;
	pos = (char *)*req + sizeof(*args);
	memcpy(pos, (void *)(uintptr_t)args->devices,
	       args->num_devices * sizeof(struct kfd_criu_device_bucket));
	pass_drm_fds((void *)pos, args->num_devices, fds, nr_fds);
	pos += args->num_devices * sizeof(struct kfd_criu_device_bucket);
	memcpy(pos, (void *)(uintptr_t)args->bos,
	       args->num_bos * sizeof(struct kfd_criu_bo_bucket));
	pos += args->num_bos * sizeof(struct kfd_criu_bo_bucket);
	memcpy(pos, (void *)(uintptr_t)args->priv_data, args->priv_data_size);
	return 0;
}

/*
 * Each bucket's dmabuf_fd arrives as an index into reply->fds. All indices are checked
 * before any fd is handed out, so a bad reply leaves the caller holding nothing.
 */
static int take_bucket_fds(struct kfdemu_msg *reply, struct kfd_criu_bo_bucket *bos,
			   uint32_t num_bos)
{
	bool *taken = calloc(reply->nr_fds + 1, sizeof(bool));
	int ret = 0;

	if (!taken)
		return -ENOMEM;
	for (uint32_t i = 0; i < num_bos && !ret; i++) {
		uint32_t index = bos[i].dmabuf_fd;

		if (index == KFDEMU_INVALID_FD)
			continue;
		if (index >= reply->nr_fds || taken[index]) {
			lib_err("CRIU_OP: BO bucket %u names fd #%u of %u (or twice)", i, index,
				reply->nr_fds);
			ret = -EPROTO;
		} else
			taken[index] = true;
	}
	free(taken);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < num_bos; i++) {
		uint32_t index = bos[i].dmabuf_fd;

		if (index == KFDEMU_INVALID_FD)
			continue;
		bos[i].dmabuf_fd = reply->fds[index];
		reply->fds[index] = -1;
	}
	return 0;
}

static uint64_t criu_reply_size(const struct kfd_ioctl_criu_args *requested)
{
	if (requested->op == KFD_CRIU_OP_CHECKPOINT)
		return sizeof(*requested) + criu_arrays_size(requested);
	if (requested->op == KFD_CRIU_OP_RESTORE)
		return sizeof(*requested) + requested->num_bos * sizeof(struct kfd_criu_bo_bucket);
	return sizeof(*requested);
}

/* A CHECKPOINT reply must fill exactly the arrays the caller sized with PROCESS_INFO. */
static int check_criu_reply(const struct kfd_ioctl_criu_args *requested,
			    const struct kfdemu_msg *reply)
{
	const struct kfd_ioctl_criu_args *reply_args = reply->payload;
	uint64_t expected = criu_reply_size(requested);

	if (reply->payload_size != expected) {
		lib_err("CRIU_OP %u: reply has %llu bytes, expected %llu", requested->op,
			(unsigned long long)reply->payload_size, (unsigned long long)expected);
		return -EPROTO;
	}
	if (requested->op == KFD_CRIU_OP_CHECKPOINT &&
	    (reply_args->num_devices != requested->num_devices ||
	     reply_args->num_bos != requested->num_bos ||
	     reply_args->priv_data_size != requested->priv_data_size)) {
		lib_err("CRIU_OP CHECKPOINT: reply changed the array sizes");
		return -EPROTO;
	}
	if (requested->op == KFD_CRIU_OP_RESTORE && reply_args->num_bos != requested->num_bos) {
		lib_err("CRIU_OP RESTORE: reply has %u BOs, sent %u", reply_args->num_bos,
			requested->num_bos);
		return -EPROTO;
	}
	return 0;
}

static void copy_criu_reply(struct kfd_ioctl_criu_args *args, const struct kfdemu_msg *reply)
{
	const struct kfd_ioctl_criu_args *reply_args = reply->payload;
	const char *pos = (const char *)reply->payload + sizeof(*args);
	uint32_t op = args->op;

	/* As the ioctl does: counts come back, the caller's pointers stay. */
	args->num_devices = reply_args->num_devices;
	args->num_bos = reply_args->num_bos;
	args->num_objects = reply_args->num_objects;
	args->priv_data_size = reply_args->priv_data_size;
	args->pid = reply_args->pid;

	if (op == KFD_CRIU_OP_CHECKPOINT) {
		memcpy((void *)(uintptr_t)args->devices, pos,
		       args->num_devices * sizeof(struct kfd_criu_device_bucket));
		pos += args->num_devices * sizeof(struct kfd_criu_device_bucket);
	}
	if (op == KFD_CRIU_OP_CHECKPOINT || op == KFD_CRIU_OP_RESTORE) {
		memcpy((void *)(uintptr_t)args->bos, pos,
		       args->num_bos * sizeof(struct kfd_criu_bo_bucket));
		pos += args->num_bos * sizeof(struct kfd_criu_bo_bucket);
	}
	if (op == KFD_CRIU_OP_CHECKPOINT)
		memcpy((void *)(uintptr_t)args->priv_data, pos, args->priv_data_size);
}

static bool criu_op_returns_bos(uint32_t op)
{
	return op == KFD_CRIU_OP_CHECKPOINT || op == KFD_CRIU_OP_RESTORE;
}

int kfdemu_criu_op(struct kfdemu_conn *conn, struct kfd_ioctl_criu_args *args)
{
	int drm_fds[KFDEMU_FDS_PER_BATCH];
	struct kfdemu_msg reply;
	uint32_t nr_drm_fds;
	uint64_t req_size;
	void *req;
	int ret;

	ret = check_criu_pointers(args);
	if (!ret)
		ret = build_criu_request(args, &req, &req_size, drm_fds, &nr_drm_fds);
	if (ret) {
		lib_err("CRIU_OP %u: bad arguments: %s", args->op, strerror(-ret));
		return ret;
	}
	ret = conn_call_fds(conn, KFDEMU_MSG_CRIU_OP, req, req_size, drm_fds, nr_drm_fds, &reply);
	free(req);
	if (ret)
		return ret;
	ret = check_criu_reply(args, &reply);
	if (!ret && criu_op_returns_bos(args->op)) {
		struct kfd_criu_bo_bucket *bos = (void *)(uintptr_t)args->bos;

		copy_criu_reply(args, &reply);
		ret = take_bucket_fds(&reply, bos, args->num_bos);
		/* The buckets hold fd indices, not fds: do not let the caller close those. */
		for (uint32_t i = 0; ret && i < args->num_bos; i++)
			bos[i].dmabuf_fd = KFDEMU_INVALID_FD;
	} else if (!ret)
		copy_criu_reply(args, &reply);
	kfdemu_msg_release(&reply);
	return ret;
}
