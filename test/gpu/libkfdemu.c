/*
 * libkfdemu: the KFD EMULATOR's wire layer (framing, short reads and writes, fd batches)
 * and its client calls. The daemon links the wire layer too, so both ends frame messages
 * with one piece of code. Emulator only: no GPU is involved anywhere.
 */
#include <errno.h>
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
		ret = send_bytes(sock, &frame, sizeof(frame), msg->fds + sent_fds, batch, max_chunk);
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

static const char *msg_type_name(uint16_t type)
{
	switch (type) {
	case KFDEMU_MSG_HELLO:
		return "HELLO";
	case KFDEMU_MSG_GET_GPUS:
		return "GET_GPUS";
	case KFDEMU_MSG_ALLOC_BO:
		return "ALLOC_BO";
	case KFDEMU_MSG_FREE_BO:
		return "FREE_BO";
	case KFDEMU_MSG_EXPORT_BO:
		return "EXPORT_BO";
	case KFDEMU_MSG_RUN_KERNEL:
		return "RUN_KERNEL";
	case KFDEMU_MSG_ATTACH:
		return "ATTACH";
	case KFDEMU_MSG_CRIU_OP:
		return "CRIU_OP";
	}
	return "unknown";
}

/*
 * Send one request, wait for its reply. A reply with status < 0 is the emulator refusing
 * the request (it logged why): returned as is. Transport failures are logged here.
 */
static int conn_call(struct kfdemu_conn *conn, uint16_t type, const void *req, uint64_t req_size,
		     struct kfdemu_msg *reply)
{
	struct kfdemu_msg request = {
		.type = type, .payload = (void *)req, .payload_size = req_size
	};
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

	if (reply->type != type || reply->seq != request.seq || !(reply->flags & KFDEMU_FRAME_REPLY)) {
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

static int say_hello(struct kfdemu_conn *conn)
{
	struct kfdemu_hello hello = { .client_version = KFDEMU_PROTO_VERSION };
	struct kfdemu_hello_reply *hello_reply;
	struct kfdemu_msg reply;
	struct stat st;
	int ret;

	if (fstat(conn->sock, &st)) {
		lib_err("fstat of the emulator socket: %s", strerror(errno));
		return -errno;
	}
	hello.sock_ino = st.st_ino;
	ret = conn_call(conn, KFDEMU_MSG_HELLO, &hello, sizeof(hello), &reply);
	if (!ret)
		ret = reply_expect(&reply, "HELLO", sizeof(*hello_reply), 0);
	if (ret)
		return ret;
	hello_reply = reply.payload;
	conn->pid = hello_reply->pid;
	kfdemu_msg_release(&reply);
	return 0;
}

int kfdemu_connect(const char *socket_path, struct kfdemu_conn **conn_out)
{
	struct kfdemu_conn *conn;
	int ret;

	if (!socket_path)
		socket_path = getenv(KFDEMU_SOCKET_ENV);
	if (!socket_path)
		socket_path = KFDEMU_DEFAULT_SOCKET;
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return -ENOMEM;
	pthread_mutex_init(&conn->lock, NULL);
	conn->next_seq = 1;
	ret = connect_socket(socket_path, &conn->sock);
	if (ret) {
		free(conn);
		return ret;
	}
	ret = say_hello(conn);
	if (ret) {
		kfdemu_close(conn);
		return ret;
	}
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
	memcpy(gpus, reply.payload, (nr_reported < *nr_gpus ? nr_reported : *nr_gpus) * sizeof(*gpus));
	*nr_gpus = nr_reported;
	kfdemu_msg_release(&reply);
	return 0;
}

int kfdemu_alloc_bo(struct kfdemu_conn *conn, uint32_t gpu_id, uint32_t alloc_flags,
		    uint64_t size, uint64_t va_addr, struct kfdemu_bo_info *bo)
{
	struct kfdemu_bo_info request = {
		.gpu_id = gpu_id, .alloc_flags = alloc_flags, .size = size, .va_addr = va_addr
	};
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_ALLOC_BO, &request, sizeof(request), &reply);
	if (!ret)
		ret = reply_expect(&reply, "ALLOC_BO", sizeof(*bo), 0);
	if (ret)
		return ret;
	memcpy(bo, reply.payload, sizeof(*bo));
	kfdemu_msg_release(&reply);
	return 0;
}

int kfdemu_free_bo(struct kfdemu_conn *conn, uint64_t handle)
{
	struct kfdemu_bo_ref request = { .handle = handle };
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_FREE_BO, &request, sizeof(request), &reply);
	if (!ret)
		ret = reply_expect(&reply, "FREE_BO", 0, 0);
	if (!ret)
		kfdemu_msg_release(&reply);
	return ret;
}

int kfdemu_export_bo(struct kfdemu_conn *conn, uint64_t handle, int *fd)
{
	struct kfdemu_bo_ref request = { .handle = handle };
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_EXPORT_BO, &request, sizeof(request), &reply);
	if (!ret)
		ret = reply_expect(&reply, "EXPORT_BO", 0, 1);
	if (ret)
		return ret;
	*fd = reply.fds[0];
	reply.fds[0] = -1;
	kfdemu_msg_release(&reply);
	return 0;
}

int kfdemu_map_bo(struct kfdemu_conn *conn, const struct kfdemu_bo_info *bo, void **addr)
{
	void *mapping;
	int bo_fd;
	int ret;

	ret = kfdemu_export_bo(conn, bo->handle, &bo_fd);
	if (ret)
		return ret;
	mapping = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, bo_fd, 0);
	if (mapping == MAP_FAILED) {
		ret = -errno;
		lib_err("cannot map BO %#llx (%llu bytes): %s", (unsigned long long)bo->handle,
			(unsigned long long)bo->size, strerror(errno));
	} else
		*addr = mapping;
	close(bo_fd);
	return ret;
}

int kfdemu_run_kernel(struct kfdemu_conn *conn, const struct kfdemu_kernel *kernel,
		      uint64_t *result)
{
	struct kfdemu_kernel_result *kernel_result;
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_RUN_KERNEL, kernel, sizeof(*kernel), &reply);
	if (!ret)
		ret = reply_expect(&reply, "RUN_KERNEL", sizeof(*kernel_result), 0);
	if (ret)
		return ret;
	kernel_result = reply.payload;
	if (result)
		*result = kernel_result->value;
	kfdemu_msg_release(&reply);
	return 0;
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
	struct kfdemu_msg reply;
	int ret;

	ret = conn_call(conn, KFDEMU_MSG_ATTACH, &request, sizeof(request), &reply);
	if (!ret)
		ret = reply_expect(&reply, "ATTACH", 0, 0);
	if (!ret)
		kfdemu_msg_release(&reply);
	return ret;
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

static int build_criu_request(const struct kfd_ioctl_criu_args *args, void **req, uint64_t *size)
{
	uint64_t arrays_size = args->op == KFD_CRIU_OP_RESTORE ? criu_arrays_size(args) : 0;
	char *pos;

	if (arrays_size > KFDEMU_MAX_PAYLOAD)
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
	pos += args->num_devices * sizeof(struct kfd_criu_device_bucket);
	memcpy(pos, (void *)(uintptr_t)args->bos, args->num_bos * sizeof(struct kfd_criu_bo_bucket));
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
	struct kfdemu_msg reply;
	uint64_t req_size;
	void *req;
	int ret;

	ret = check_criu_pointers(args);
	if (!ret)
		ret = build_criu_request(args, &req, &req_size);
	if (ret) {
		lib_err("CRIU_OP %u: bad arguments: %s", args->op, strerror(-ret));
		return ret;
	}
	ret = conn_call(conn, KFDEMU_MSG_CRIU_OP, req, req_size, &reply);
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
