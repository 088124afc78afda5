/*
 * kfd-emu: the KFD EMULATOR daemon. Parses options, writes the fake topology, listens on a
 * Unix socket and serves each client connection on its own thread. It emulates the KFD
 * CRIU interface for tests on machines without a GPU; it is not a GPU driver.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"
#include "libkfdemu.h"

/* Render node minors as DRM numbers them: renderD128 is the first. */
#define EMU_RENDER_MINOR_BASE 128

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

struct emu_config {
	const char *socket_path;
	const char *topology_dir;
	const char *pidfile;
	int log_level;
	size_t send_chunk; /* test knob: cap on bytes per sendmsg of replies */
};

static struct emu_config config = {
	.socket_path = KFDEMU_DEFAULT_SOCKET,
	.topology_dir = "/run/kfd-emu/topology",
	.log_level = EMU_LOG_WARN,
};

/* One client connection, served by one thread: /dev/kfd of a process, or a render node. */
struct emu_conn {
	struct emu_conn *next;
	int sock;
	uint32_t pid;
	uint64_t sock_ino;	   /* the client's socket inode, from HELLO */
	bool hello_done;
	uint32_t kind;		   /* enum kfdemu_conn_kind */
	uint32_t render_minor;	   /* RENDER */
	struct emu_process *own;    /* KFD: the process this client opened */
	struct emu_process *target; /* KFD: what ops act on: own, or one ATTACHed to */
};

/* Lock order: conns_lock before emu_lock, never the other way round. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_conn *conns;
static unsigned int nr_conns;
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void emu_log(int level, const char *fmt, ...)
{
	static const char *const level_names[] = { "note", "error", "warning", "info", "debug" };
	struct timespec now;
	va_list ap;

	if (level > config.log_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&log_lock);
	fprintf(log_file, "[%5ld.%06ld] kfd-emu EMULATOR %s: ", (long)now.tv_sec,
		now.tv_nsec / 1000, level_names[level]);
	va_start(ap, fmt);
	vfprintf(log_file, fmt, ap);
	va_end(ap);
	fputc('\n', log_file);
	fflush(log_file);
	pthread_mutex_unlock(&log_lock);
}

static void log_from_wire(int level, const char *msg)
{
	emu_log(level, "wire: %s", msg);
}

/* ---- connections ---- */

static void conn_register(struct emu_conn *conn)
{
	pthread_mutex_lock(&conns_lock);
	conn->next = conns;
	conns = conn;
	nr_conns++;
	pthread_mutex_unlock(&conns_lock);
}

static void conn_unregister(struct emu_conn *conn)
{
	pthread_mutex_lock(&conns_lock);
	for (struct emu_conn **link = &conns; *link; link = &(*link)->next) {
		if (*link == conn) {
			*link = conn->next;
			nr_conns--;
			break;
		}
	}
	pthread_mutex_unlock(&conns_lock);
}

int emu_conn_find_render(uint64_t sock_ino, uint32_t *minor, uint32_t *pid)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&conns_lock);
	for (struct emu_conn *conn = conns; conn; conn = conn->next) {
		if (conn->hello_done && conn->kind == KFDEMU_CONN_RENDER &&
		    conn->sock_ino == sock_ino) {
			*minor = conn->render_minor;
			*pid = conn->pid;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&conns_lock);
	return ret;
}

static int peer_identity(int sock, uint32_t *pid, int *pidfd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		emu_err("SO_PEERCRED: %s", strerror(errno));
		return -errno;
	}
	*pid = cred.pid;
	/* The pidfd of the peer itself, not of whoever has its pid later (Linux 6.5+). */
	len = sizeof(*pidfd);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, pidfd, &len)) {
		*pidfd = syscall(SYS_pidfd_open, cred.pid, 0);
		if (*pidfd < 0)
			emu_warn("pid %u: no pidfd (%s): pid reuse goes undetected", cred.pid,
				 strerror(errno));
	}
	return 0;
}

static int hello_render(struct emu_conn *conn, const struct kfdemu_hello *hello,
			uint32_t *gpu_id)
{
	struct emu_gpu *gpu = emu_gpu_by_minor(hello->render_minor);

	if (!gpu) {
		emu_err("pid %u: no render node renderD%u here", conn->pid, hello->render_minor);
		return -ENODEV;
	}
	*gpu_id = gpu->gpu_id;
	return 0;
}

static int handle_hello(struct emu_conn *conn, const struct kfdemu_hello *hello,
			struct kfdemu_msg *reply)
{
	struct kfdemu_hello_reply *hello_reply;
	struct emu_process *own = NULL;
	uint32_t gpu_id = 0;
	int pidfd = -1;
	int ret;

	if (conn->hello_done) {
		emu_err("pid %u: second HELLO on one connection", conn->pid);
		return -EPROTO;
	}
	if (hello->client_version != KFDEMU_PROTO_VERSION) {
		emu_err("client speaks protocol %u, the emulator %u", hello->client_version,
			KFDEMU_PROTO_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (hello->kind != KFDEMU_CONN_KFD && hello->kind != KFDEMU_CONN_RENDER) {
		emu_err("HELLO for an unknown kind of file %u", hello->kind);
		return -EPROTO;
	}
	ret = peer_identity(conn->sock, &conn->pid, &pidfd);
	if (!ret && hello->kind == KFDEMU_CONN_RENDER) {
		ret = hello_render(conn, hello, &gpu_id);
		if (pidfd >= 0)
			close(pidfd);
	} else if (!ret) {
		ret = emu_process_open(conn->pid, pidfd, &own);
	}
	if (ret)
		return ret;
	hello_reply = calloc(1, sizeof(*hello_reply));
	if (!hello_reply) {
		if (own)
			emu_process_close(own, true);
		return -ENOMEM;
	}
	/* ATTACH and render node lookups from other connections read these under conns_lock. */
	pthread_mutex_lock(&conns_lock);
	conn->own = own;
	conn->target = own;
	conn->sock_ino = hello->sock_ino;
	conn->kind = hello->kind;
	conn->render_minor = hello->render_minor;
	conn->hello_done = true;
	pthread_mutex_unlock(&conns_lock);
	*hello_reply = (struct kfdemu_hello_reply){ .server_version = KFDEMU_PROTO_VERSION,
						    .nr_gpus = emu_nr_gpus, .pid = conn->pid,
						    .gpu_id = gpu_id };
	reply->payload = hello_reply;
	reply->payload_size = sizeof(*hello_reply);
	if (hello->kind == KFDEMU_CONN_RENDER)
		emu_info("pid %u: opened renderD%u (socket inode %llu)", conn->pid,
			 hello->render_minor, (unsigned long long)conn->sock_ino);
	else
		emu_info("pid %u: opened /dev/kfd (socket inode %llu)", conn->pid,
			 (unsigned long long)conn->sock_ino);
	return 0;
}

static int reply_with(struct kfdemu_msg *reply, const void *data, uint64_t size)
{
	reply->payload = malloc(size ? size : 1);
	if (!reply->payload)
		return -ENOMEM;
	memcpy(reply->payload, data, size);
	reply->payload_size = size;
	return 0;
}

static int reply_with_fd(struct kfdemu_msg *reply, int fd)
{
	reply->fds = malloc(sizeof(int));
	if (!reply->fds) {
		close(fd);
		return -ENOMEM;
	}
	reply->fds[0] = fd;
	reply->nr_fds = 1;
	return 0;
}

static int handle_get_gpus(struct kfdemu_msg *reply)
{
	struct kfdemu_gpu_info gpus[EMU_MAX_GPUS];

	emu_get_gpu_info(gpus);
	return reply_with(reply, gpus, emu_nr_gpus * sizeof(gpus[0]));
}

static int handle_alloc(struct emu_conn *conn, const struct kfdemu_msg *req,
			struct kfdemu_msg *reply)
{
	struct kfdemu_bo_info bo;
	int ret;

	memcpy(&bo, req->payload, sizeof(bo));
	ret = emu_alloc_bo(conn->target, &bo);
	return ret ? ret : reply_with(reply, &bo, sizeof(bo));
}

static int handle_export(struct emu_conn *conn, const struct kfdemu_msg *req,
			 struct kfdemu_msg *reply)
{
	const struct kfdemu_bo_ref *ref = req->payload;
	int fd, ret;

	ret = emu_export_bo(conn->target, ref->handle, &fd);
	return ret ? ret : reply_with_fd(reply, fd);
}

static int handle_run_kernel(struct emu_conn *conn, const struct kfdemu_msg *req,
			     struct kfdemu_msg *reply)
{
	struct kfdemu_kernel_result result = {};
	int ret;

	ret = emu_run_kernel(conn->target, req->payload, &result.value);
	return ret ? ret : reply_with(reply, &result, sizeof(result));
}

/* Find the process behind a client socket the checkpoint tool took from a task. */
static int find_process_by_socket(uint64_t sock_ino, struct emu_process **proc)
{
	int ret = -ESRCH;

	pthread_mutex_lock(&conns_lock);
	for (struct emu_conn *conn = conns; conn; conn = conn->next) {
		if (conn->sock_ino != sock_ino || !conn->own)
			continue;
		emu_process_get(conn->own);
		*proc = conn->own;
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&conns_lock);
	if (ret)
		emu_err("ATTACH: no /dev/kfd connection with socket inode %llu",
			(unsigned long long)sock_ino);
	return ret;
}

static int handle_attach(struct emu_conn *conn, const struct kfdemu_msg *req)
{
	const struct kfdemu_attach *attach = req->payload;
	struct emu_process *proc;
	int ret;

	if (attach->sock_ino)
		ret = find_process_by_socket(attach->sock_ino, &proc);
	else
		ret = emu_process_find(attach->pid, &proc);
	if (ret)
		return ret;
	if (conn->target != conn->own)
		emu_process_close(conn->target, false);
	conn->target = proc;
	emu_info("pid %u: attached to the process of pid %u", conn->pid, emu_process_pid(proc));
	return 0;
}

static int handle_get_mmap(struct emu_conn *conn, const struct kfdemu_msg *req,
			   struct kfdemu_msg *reply)
{
	const struct kfdemu_get_mmap *get = req->payload;
	int fd, ret;

	if (get->kind !=
	    (conn->kind == KFDEMU_CONN_RENDER ? KFDEMU_MMAP_RENDER : KFDEMU_MMAP_KFD)) {
		emu_err("pid %u: GET_MMAP of kind %u on a %s connection", conn->pid, get->kind,
			conn->kind == KFDEMU_CONN_RENDER ? "render node" : "/dev/kfd");
		return -EINVAL;
	}
	ret = conn->kind == KFDEMU_CONN_RENDER ? emu_render_mmap_fd(conn->sock_ino, &fd) :
						  emu_kfd_mmap_fd(conn->target, &fd);
	return ret ? ret : reply_with_fd(reply, fd);
}

static int handle_create_queue(struct emu_conn *conn, const struct kfdemu_msg *req,
			       struct kfdemu_msg *reply)
{
	struct kfdemu_queue_reply queue;
	int ret = emu_create_queue(conn->target, req->payload, &queue);

	return ret ? ret : reply_with(reply, &queue, sizeof(queue));
}

static int handle_create_event(struct emu_conn *conn, const struct kfdemu_msg *req,
			       struct kfdemu_msg *reply)
{
	struct kfdemu_event_reply event;
	int ret = emu_create_event(conn->target, req->payload, &event);

	return ret ? ret : reply_with(reply, &event, sizeof(event));
}

static int handle_event_op(struct emu_conn *conn, const struct kfdemu_msg *req)
{
	uint32_t id = ((const struct kfdemu_event_ref *)req->payload)->event_id;

	if (req->type == KFDEMU_MSG_DESTROY_EVENT)
		return emu_destroy_event(conn->target, id);
	if (req->type == KFDEMU_MSG_SET_EVENT)
		return emu_set_event(conn->target, id);
	return emu_reset_event(conn->target, id);
}

static int handle_wait_events(struct emu_conn *conn, const struct kfdemu_msg *req,
			      struct kfdemu_msg *reply)
{
	const struct kfdemu_wait_events *wait = req->payload;
	struct kfdemu_wait_reply result = {};
	int ret;

	ret = emu_wait_events(conn->target, wait, (const uint32_t *)(wait + 1), &result.result);
	return ret ? ret : reply_with(reply, &result, sizeof(result));
}

static int handle_svm(struct emu_conn *conn, const struct kfdemu_msg *req,
		      struct kfdemu_msg *reply)
{
	int ret = reply_with(reply, req->payload, req->payload_size);
	struct kfdemu_svm *svm = reply->payload;

	if (!ret)
		ret = emu_svm(conn->target, svm, (struct kfd_ioctl_svm_attribute *)(svm + 1));
	return ret;
}

static int handle_copy(const struct kfdemu_msg *req)
{
	return emu_copy(req->payload, req->fds[0], req->fds[1]);
}

static int handle_next_data(const struct kfdemu_msg *req, struct kfdemu_msg *reply)
{
	struct kfdemu_next_data next;
	int ret;

	memcpy(&next, req->payload, sizeof(next));
	ret = emu_next_data(req->fds[0], &next);
	return ret ? ret : reply_with(reply, &next, sizeof(next));
}

/* What an fd a checkpoint tool took from a task is: found by its socket or dma-buf inode. */
static int handle_identify(const struct kfdemu_msg *req, struct kfdemu_msg *reply)
{
	struct kfdemu_identity id = {};
	struct stat st;
	int ret = -ENOENT;

	if (fstat(req->fds[0], &st))
		return -errno;
	pthread_mutex_lock(&conns_lock);
	for (struct emu_conn *conn = conns; S_ISSOCK(st.st_mode) && conn; conn = conn->next) {
		if (!conn->hello_done || conn->sock_ino != st.st_ino)
			continue;
		id = (struct kfdemu_identity){ .kind = conn->kind == KFDEMU_CONN_RENDER ?
							       KFDEMU_FD_RENDER :
							       KFDEMU_FD_KFD,
					       .pid = conn->pid, .render_minor = conn->render_minor,
					       .sock_ino = conn->sock_ino };
		if (conn->kind == KFDEMU_CONN_RENDER)
			id.gpu_id = emu_gpu_by_minor(conn->render_minor)->gpu_id;
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&conns_lock);
	if (ret && S_ISREG(st.st_mode))
		ret = emu_identify_dmabuf(req->fds[0], &id);
	if (ret) {
		emu_info("IDENTIFY: the fd (inode %llu) is none of the emulator's",
			 (unsigned long long)st.st_ino);
		return ret;
	}
	return reply_with(reply, &id, sizeof(id));
}

static int handle_stats(struct kfdemu_msg *reply)
{
	struct kfdemu_stats stats = {};

	emu_get_stats(&stats);
	pthread_mutex_lock(&conns_lock);
	stats.nr_connections = nr_conns;
	pthread_mutex_unlock(&conns_lock);
	return reply_with(reply, &stats, sizeof(stats));
}

static int handle_criu_op(struct emu_conn *conn, const struct kfdemu_msg *req,
			  struct kfdemu_msg *reply)
{
	return emu_criu_op(conn->target, req->payload, req->payload_size, req->fds, req->nr_fds,
			   &reply->payload, &reply->payload_size, &reply->fds, &reply->nr_fds);
}

/* What each request carries: a fixed payload (or a header of a variable one), and fds. */
struct request_shape {
	uint64_t size;	    /* UINT64_MAX: no such request */
	bool variable;	    /* size is the header's; variable_size_ok() checks the rest */
	uint32_t nr_fds;    /* UINT32_MAX: any number */
	bool render_ok;	    /* may come on a render node connection */
};

static struct request_shape request_shape(uint16_t type)
{
	switch (type) {
	case KFDEMU_MSG_HELLO:
		return (struct request_shape){ sizeof(struct kfdemu_hello), false, 0, true };
	case KFDEMU_MSG_GET_GPUS:
		return (struct request_shape){ 0, false, 0, true };
	case KFDEMU_MSG_ALLOC_BO:
		return (struct request_shape){ sizeof(struct kfdemu_bo_info), false, 0, false };
	case KFDEMU_MSG_FREE_BO:
	case KFDEMU_MSG_EXPORT_BO:
		return (struct request_shape){ sizeof(struct kfdemu_bo_ref), false, 0, false };
	case KFDEMU_MSG_RUN_KERNEL:
		return (struct request_shape){ sizeof(struct kfdemu_kernel), false, 0, false };
	case KFDEMU_MSG_ATTACH:
		return (struct request_shape){ sizeof(struct kfdemu_attach), false, 0, false };
	case KFDEMU_MSG_CRIU_OP:
		return (struct request_shape){ sizeof(struct kfd_ioctl_criu_args), true, UINT32_MAX,
					       false };
	case KFDEMU_MSG_ACQUIRE_VM:
		return (struct request_shape){ sizeof(struct kfdemu_acquire_vm), false, 1, false };
	case KFDEMU_MSG_GET_MMAP:
		return (struct request_shape){ sizeof(struct kfdemu_get_mmap), false, 0, true };
	case KFDEMU_MSG_CREATE_QUEUE:
		return (struct request_shape){sizeof(struct kfdemu_create_queue), false, 0, false};
	case KFDEMU_MSG_DESTROY_QUEUE:
		return (struct request_shape){ sizeof(struct kfdemu_queue_ref), false, 0, false };
	case KFDEMU_MSG_CREATE_EVENT:
		return (struct request_shape){sizeof(struct kfdemu_create_event), false, 0, false};
	case KFDEMU_MSG_DESTROY_EVENT:
	case KFDEMU_MSG_SET_EVENT:
	case KFDEMU_MSG_RESET_EVENT:
		return (struct request_shape){ sizeof(struct kfdemu_event_ref), false, 0, false };
	case KFDEMU_MSG_WAIT_EVENTS:
		return (struct request_shape){ sizeof(struct kfdemu_wait_events), true, 0, false };
	case KFDEMU_MSG_SVM:
		return (struct request_shape){ sizeof(struct kfdemu_svm), true, 0, false };
	case KFDEMU_MSG_COPY:
		return (struct request_shape){ sizeof(struct kfdemu_copy), false, 2, true };
	case KFDEMU_MSG_NEXT_DATA:
		return (struct request_shape){ sizeof(struct kfdemu_next_data), false, 1, true };
	case KFDEMU_MSG_IDENTIFY:
		return (struct request_shape){ 0, false, 1, true };
	case KFDEMU_MSG_STATS:
		return (struct request_shape){ 0, false, 0, true };
	}
	return (struct request_shape){ .size = UINT64_MAX };
}

/* Variable requests: the whole size their header announces (CRIU_OP checks its own). */
static bool variable_size_ok(const struct kfdemu_msg *req)
{
	if (req->type == KFDEMU_MSG_WAIT_EVENTS) {
		const struct kfdemu_wait_events *wait = req->payload;

		return wait->nr_events && wait->nr_events <= KFDEMU_MAX_WAIT_EVENTS &&
		       req->payload_size == sizeof(*wait) + wait->nr_events * sizeof(uint32_t);
	}
	if (req->type == KFDEMU_MSG_SVM) {
		const struct kfdemu_svm *svm = req->payload;

		return svm->nattr <= KFDEMU_MAX_SVM_ATTRS &&
		       req->payload_size ==
			       sizeof(*svm) + svm->nattr * sizeof(struct kfd_ioctl_svm_attribute);
	}
	return true;
}

static int check_request(const struct emu_conn *conn, const struct kfdemu_msg *req)
{
	struct request_shape shape = request_shape(req->type);
	bool size_ok = shape.variable ? req->payload_size >= shape.size && variable_size_ok(req) :
					req->payload_size == shape.size;

	if (shape.size == UINT64_MAX || !size_ok ||
	    (shape.nr_fds != UINT32_MAX && req->nr_fds != shape.nr_fds)) {
		emu_err("pid %u: request type %u with %llu payload bytes and %u fds", conn->pid,
			req->type, (unsigned long long)req->payload_size, req->nr_fds);
		return -EPROTO;
	}
	if (req->type != KFDEMU_MSG_HELLO && !conn->hello_done) {
		emu_err("request type %u before HELLO", req->type);
		return -EPROTO;
	}
	if (conn->kind == KFDEMU_CONN_RENDER && !shape.render_ok) {
		emu_err("pid %u: request type %u on a render node: that is /dev/kfd's", conn->pid,
			req->type);
		return -EINVAL;
	}
	return 0;
}

static int dispatch(struct emu_conn *conn, const struct kfdemu_msg *req, struct kfdemu_msg *reply)
{
	int ret = check_request(conn, req);

	if (ret)
		return ret;
	switch (req->type) {
	case KFDEMU_MSG_HELLO:
		return handle_hello(conn, req->payload, reply);
	case KFDEMU_MSG_GET_GPUS:
		return handle_get_gpus(reply);
	case KFDEMU_MSG_ALLOC_BO:
		return handle_alloc(conn, req, reply);
	case KFDEMU_MSG_FREE_BO:
		return emu_free_bo(conn->target,
				   ((const struct kfdemu_bo_ref *)req->payload)->handle);
	case KFDEMU_MSG_EXPORT_BO:
		return handle_export(conn, req, reply);
	case KFDEMU_MSG_RUN_KERNEL:
		return handle_run_kernel(conn, req, reply);
	case KFDEMU_MSG_ATTACH:
		return handle_attach(conn, req);
	case KFDEMU_MSG_CRIU_OP:
		return handle_criu_op(conn, req, reply);
	case KFDEMU_MSG_ACQUIRE_VM:
		return emu_acquire_vm(conn->target,
				      ((const struct kfdemu_acquire_vm *)req->payload)->gpu_id,
				      req->fds[0]);
	case KFDEMU_MSG_GET_MMAP:
		return handle_get_mmap(conn, req, reply);
	case KFDEMU_MSG_CREATE_QUEUE:
		return handle_create_queue(conn, req, reply);
	case KFDEMU_MSG_DESTROY_QUEUE:
		return emu_destroy_queue(conn->target,
					 ((const struct kfdemu_queue_ref *)req->payload)->queue_id);
	case KFDEMU_MSG_CREATE_EVENT:
		return handle_create_event(conn, req, reply);
	case KFDEMU_MSG_DESTROY_EVENT:
	case KFDEMU_MSG_SET_EVENT:
	case KFDEMU_MSG_RESET_EVENT:
		return handle_event_op(conn, req);
	case KFDEMU_MSG_WAIT_EVENTS:
		return handle_wait_events(conn, req, reply);
	case KFDEMU_MSG_SVM:
		return handle_svm(conn, req, reply);
	case KFDEMU_MSG_COPY:
		return handle_copy(req);
	case KFDEMU_MSG_NEXT_DATA:
		return handle_next_data(req, reply);
	case KFDEMU_MSG_IDENTIFY:
		return handle_identify(req, reply);
	case KFDEMU_MSG_STATS:
		return handle_stats(reply);
	}
	return -EPROTO;
}

/*
 * Serve one request. Returns 0 to go on, or -errno to drop the connection: the peer left,
 * the stream can no longer be trusted (bad frame), or the reply could not be sent.
 */
static int serve_one(struct emu_conn *conn)
{
	struct kfdemu_msg req;
	struct kfdemu_msg reply = {};
	int ret, status;

	ret = kfdemu_wire_recv(conn->sock, &req);
	if (ret == -EPROTONOSUPPORT || ret == -EPROTO) {
		/* Tell the client why before dropping it; its stream is out of step now. */
		reply = (struct kfdemu_msg){ .type = req.type, .seq = req.seq, .status = ret,
					     .flags = KFDEMU_FRAME_REPLY };
		kfdemu_wire_send(conn->sock, &reply, config.send_chunk);
		return ret;
	}
	if (ret)
		return ret;

	status = dispatch(conn, &req, &reply);
	/* A refused request gets its status and nothing else. */
	if (status)
		kfdemu_msg_release(&reply);
	reply.status = status;
	reply.type = req.type;
	reply.seq = req.seq;
	reply.flags = KFDEMU_FRAME_REPLY;
	ret = kfdemu_wire_send(conn->sock, &reply, config.send_chunk);
	if (ret)
		emu_warn("pid %u: cannot send the reply to request %u: %s", conn->pid, req.type,
			 strerror(-ret));
	/* A protocol error leaves the stream unusable: the client got its answer, drop it. */
	if (!ret && reply.status == -EPROTO)
		ret = -EPROTO;
	kfdemu_msg_release(&reply);
	kfdemu_msg_release(&req);
	return ret;
}

static void conn_close(struct emu_conn *conn)
{
	conn_unregister(conn);
	if (conn->target && conn->target != conn->own)
		emu_process_close(conn->target, false);
	if (conn->own)
		emu_process_close(conn->own, true);
	close(conn->sock);
	free(conn);
}

static void *conn_thread(void *arg)
{
	struct emu_conn *conn = arg;
	int ret;

	do
		ret = serve_one(conn);
	while (!ret);
	if (ret == -ENOTCONN)
		emu_info("pid %u: disconnected", conn->pid);
	else
		emu_warn("pid %u: connection dropped: %s", conn->pid, strerror(-ret));
	conn_close(conn);
	return NULL;
}

static void accept_client(int listen_sock)
{
	struct emu_conn *conn;
	pthread_attr_t attr;
	pthread_t thread;
	int sock;

	sock = accept4(listen_sock, NULL, NULL, SOCK_CLOEXEC);
	if (sock < 0) {
		emu_warn("accept: %s", strerror(errno));
		return;
	}
	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		emu_err("no memory for a connection");
		close(sock);
		return;
	}
	conn->sock = sock;
	conn_register(conn);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, conn_thread, conn)) {
		emu_err("cannot start a connection thread");
		conn_close(conn);
	}
	pthread_attr_destroy(&attr);
}

/* ---- startup ---- */

static int listen_on(const char *path, int *listen_sock)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int sock;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		emu_err("socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		emu_err("socket: %s", strerror(errno));
		return -errno;
	}
	unlink(path);
	if (bind(sock, (struct sockaddr *)&addr, sizeof(addr)) || listen(sock, 64)) {
		int ret = -errno;

		emu_err("cannot listen on %s: %s", path, strerror(errno));
		close(sock);
		return ret;
	}
	*listen_sock = sock;
	return 0;
}

/* Written (atomically) only once the socket accepts connections: a readiness signal. */
static int write_pidfile(const char *path)
{
	char tmp_path[4096];
	FILE *file;

	snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", path);
	file = fopen(tmp_path, "w");
	if (!file || fprintf(file, "%d\n", getpid()) < 0 || fclose(file) ||
	    rename(tmp_path, path)) {
		emu_err("cannot write pid file %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Each BO holds a memfd and a checkpoint dups all of them: use the whole hard limit. */
static void raise_fd_limit(void)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
		limit.rlim_cur = limit.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &limit))
			emu_warn("cannot raise the fd limit: %s", strerror(errno));
	}
}

static int serve(int listen_sock, int signal_fd)
{
	struct pollfd pfds[2] = {
		{ .fd = listen_sock, .events = POLLIN },
		{ .fd = signal_fd, .events = POLLIN },
	};

	for (;;) {
		if (poll(pfds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			emu_err("poll: %s", strerror(errno));
			return -errno;
		}
		if (pfds[1].revents) {
			emu_info("signal received, shutting down");
			return 0;
		}
		if (pfds[0].revents)
			accept_client(listen_sock);
	}
}

static int block_signals(int *signal_fd)
{
	sigset_t mask;

	/* A client that vanishes makes send() fail with EPIPE; never die of SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	/* Blocked before any thread starts, so only the signalfd sees them. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	*signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (*signal_fd < 0) {
		emu_err("signalfd: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* ---- options ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: kfd-emu [options]\n"
		"KFD EMULATOR: emulates the AMD KFD checkpoint/restore interface over a Unix\n"
		"socket for tests without a GPU. It is an emulator, not a GPU driver.\n\n"
		"  -s, --socket PATH      listen here (default " KFDEMU_DEFAULT_SOCKET ")\n"
		"  -t, --topology DIR     write the fake KFD topology here\n"
		"                         (default /run/kfd-emu/topology)\n"
		"  -g, --gpu ID[:DEVID[:VRAM_MIB]]\n"
		"                         add an emulated GPU (hex or decimal gpu_id, PCI device\n"
		"                         id, VRAM size); repeatable; default: two GPUs\n"
		"  -p, --pidfile PATH     write the pid here once the socket is listening\n"
		"  -l, --log FILE         log here (default stderr)\n"
		"  -v, --verbose N        log level 0..4 as CRIU's -v (default 2)\n"
		"      --send-chunk BYTES test knob: send replies in pieces of at most BYTES\n"
		"  -h, --help\n");
}

static int add_gpu(const char *spec)
{
	struct emu_gpu *gpu = &emu_gpus[emu_nr_gpus];
	unsigned long long vram_mib = 16384;
	unsigned int device_id = 0x740f;
	unsigned int gpu_id;
	int fields;

	if (emu_nr_gpus == EMU_MAX_GPUS) {
		emu_err("at most %d emulated GPUs", EMU_MAX_GPUS);
		return -E2BIG;
	}
	fields = sscanf(spec, "%i:%i:%llu", (int *)&gpu_id, (int *)&device_id, &vram_mib);
	if (fields < 1 || !gpu_id || !vram_mib) {
		emu_err("bad --gpu %s: expected GPU_ID[:DEVICE_ID[:VRAM_MIB]]", spec);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < emu_nr_gpus; i++) {
		if (emu_gpus[i].gpu_id == gpu_id) {
			emu_err("gpu id %#x given twice", gpu_id);
			return -EINVAL;
		}
	}
	gpu->gpu_id = gpu_id;
	gpu->device_id = device_id;
	gpu->vram_size = vram_mib << 20;
	gpu->node_id = ++emu_nr_gpus;
	gpu->render_minor = EMU_RENDER_MINOR_BASE + gpu->node_id - 1;
	gpu->aperture_fd = -1;
	return 0;
}

static int parse_options(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "topology", required_argument, NULL, 't' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "log", required_argument, NULL, 'l' },
		{ "verbose", required_argument, NULL, 'v' },
		{ "send-chunk", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "s:t:g:p:l:v:h", long_options, NULL)) != -1) {
		switch (opt) {
		case 's':
			config.socket_path = optarg;
			break;
		case 't':
			config.topology_dir = optarg;
			break;
		case 'g':
			if (add_gpu(optarg))
				return -EINVAL;
			break;
		case 'p':
			config.pidfile = optarg;
			break;
		case 'l':
			log_file = fopen(optarg, "a");
			if (!log_file) {
				log_file = stderr;
				emu_err("cannot open log %s: %s", optarg, strerror(errno));
				return -errno;
			}
			break;
		case 'v':
			config.log_level = atoi(optarg);
			break;
		case 'C':
			config.send_chunk = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -EINVAL;
	}
	/* Two GPUs of one model by default: enough to exercise gpu id mapping. */
	if (!emu_nr_gpus && (add_gpu("0x1e0a") || add_gpu("0x2b4c")))
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	int listen_sock = -1, signal_fd = -1;
	int ret;

	log_file = stderr;
	kfdemu_set_log_fn(log_from_wire);
	if (parse_options(argc, argv))
		return 2;
	raise_fd_limit();
	if (block_signals(&signal_fd) || emu_device_init() ||
	    emu_write_topology(config.topology_dir) || listen_on(config.socket_path, &listen_sock))
		return 1;
	if (config.pidfile && write_pidfile(config.pidfile)) {
		unlink(config.socket_path);
		return 1;
	}
	emu_log(EMU_LOG_NOTE, "KFD EMULATOR (not a GPU) serving %u GPUs on %s", emu_nr_gpus, config.socket_path);
	ret = serve(listen_sock, signal_fd);
	unlink(config.socket_path);
	if (config.pidfile)
		unlink(config.pidfile);
	return ret ? 1 : 0;
}
