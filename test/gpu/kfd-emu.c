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
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"
#include "libkfdemu.h"

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

/* One client connection, served by one thread. */
struct emu_conn {
	struct emu_conn *next;
	int sock;
	uint32_t pid;
	uint64_t sock_ino;	   /* the client's socket inode, from HELLO */
	struct emu_process *own;    /* the process this client opened */
	struct emu_process *target; /* what ops act on: own, or one ATTACHed to */
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_conn *conns;
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
	pthread_mutex_unlock(&conns_lock);
}

static void conn_unregister(struct emu_conn *conn)
{
	pthread_mutex_lock(&conns_lock);
	for (struct emu_conn **link = &conns; *link; link = &(*link)->next) {
		if (*link == conn) {
			*link = conn->next;
			break;
		}
	}
	pthread_mutex_unlock(&conns_lock);
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

static int handle_hello(struct emu_conn *conn, const struct kfdemu_msg *req,
			struct kfdemu_msg *reply)
{
	const struct kfdemu_hello *hello = req->payload;
	struct kfdemu_hello_reply *hello_reply;
	struct emu_process *own;
	int pidfd;
	int ret;

	if (conn->own) {
		emu_err("pid %u: second HELLO on one connection", conn->pid);
		return -EPROTO;
	}
	if (hello->client_version != KFDEMU_PROTO_VERSION) {
		emu_err("client speaks protocol %u, the emulator %u", hello->client_version,
			KFDEMU_PROTO_VERSION);
		return -EPROTONOSUPPORT;
	}
	ret = peer_identity(conn->sock, &conn->pid, &pidfd);
	if (!ret)
		ret = emu_process_open(conn->pid, pidfd, &own);
	if (ret)
		return ret;
	/* ATTACH from other connections reads these under conns_lock. */
	pthread_mutex_lock(&conns_lock);
	conn->own = own;
	conn->target = own;
	conn->sock_ino = hello->sock_ino;
	pthread_mutex_unlock(&conns_lock);
	hello_reply = calloc(1, sizeof(*hello_reply));
	if (!hello_reply)
		return -ENOMEM;
	hello_reply->server_version = KFDEMU_PROTO_VERSION;
	hello_reply->nr_gpus = emu_nr_gpus;
	hello_reply->pid = conn->pid;
	reply->payload = hello_reply;
	reply->payload_size = sizeof(*hello_reply);
	emu_info("pid %u: connected (socket inode %llu)", conn->pid,
		 (unsigned long long)conn->sock_ino);
	return 0;
}

static int handle_get_gpus(struct kfdemu_msg *reply)
{
	struct kfdemu_gpu_info *gpus = calloc(emu_nr_gpus, sizeof(*gpus));

	if (!gpus)
		return -ENOMEM;
	emu_get_gpu_info(gpus);
	reply->payload = gpus;
	reply->payload_size = emu_nr_gpus * sizeof(*gpus);
	return 0;
}

static int handle_alloc(struct emu_conn *conn, const struct kfdemu_msg *req,
			struct kfdemu_msg *reply)
{
	struct kfdemu_bo_info *bo = malloc(sizeof(*bo));
	int ret;

	if (!bo)
		return -ENOMEM;
	memcpy(bo, req->payload, sizeof(*bo));
	ret = emu_alloc_bo(conn->target, bo);
	if (ret) {
		free(bo);
		return ret;
	}
	reply->payload = bo;
	reply->payload_size = sizeof(*bo);
	return 0;
}

static int handle_export(struct emu_conn *conn, const struct kfdemu_msg *req,
			 struct kfdemu_msg *reply)
{
	const struct kfdemu_bo_ref *ref = req->payload;
	int *fds = malloc(sizeof(int));
	int ret;

	if (!fds)
		return -ENOMEM;
	ret = emu_export_bo(conn->target, ref->handle, fds);
	if (ret) {
		free(fds);
		return ret;
	}
	reply->fds = fds;
	reply->nr_fds = 1;
	return 0;
}

static int handle_run_kernel(struct emu_conn *conn, const struct kfdemu_msg *req,
			     struct kfdemu_msg *reply)
{
	struct kfdemu_kernel_result *result = calloc(1, sizeof(*result));
	int ret;

	if (!result)
		return -ENOMEM;
	ret = emu_run_kernel(conn->target, req->payload, &result->value);
	if (ret) {
		free(result);
		return ret;
	}
	reply->payload = result;
	reply->payload_size = sizeof(*result);
	return 0;
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
		emu_err("ATTACH: no client connection with socket inode %llu",
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

static int handle_criu_op(struct emu_conn *conn, const struct kfdemu_msg *req,
			  struct kfdemu_msg *reply)
{
	return emu_criu_op(conn->target, req->payload, req->payload_size, &reply->payload,
			   &reply->payload_size, &reply->fds, &reply->nr_fds);
}

/* Fixed-size requests: the payload must be exactly the request struct. */
static uint64_t request_size(uint16_t type)
{
	switch (type) {
	case KFDEMU_MSG_HELLO:
		return sizeof(struct kfdemu_hello);
	case KFDEMU_MSG_GET_GPUS:
		return 0;
	case KFDEMU_MSG_ALLOC_BO:
		return sizeof(struct kfdemu_bo_info);
	case KFDEMU_MSG_FREE_BO:
	case KFDEMU_MSG_EXPORT_BO:
		return sizeof(struct kfdemu_bo_ref);
	case KFDEMU_MSG_RUN_KERNEL:
		return sizeof(struct kfdemu_kernel);
	case KFDEMU_MSG_ATTACH:
		return sizeof(struct kfdemu_attach);
	}
	return UINT64_MAX;
}

static int check_request(const struct emu_conn *conn, const struct kfdemu_msg *req)
{
	uint64_t expected = request_size(req->type);

	if (req->nr_fds) {
		emu_err("pid %u: request type %u carries %u fds; none are expected", conn->pid,
			req->type, req->nr_fds);
		return -EPROTO;
	}
	if (req->type != KFDEMU_MSG_HELLO && !conn->own) {
		emu_err("request type %u before HELLO", req->type);
		return -EPROTO;
	}
	if (req->type == KFDEMU_MSG_CRIU_OP)
		return 0;
	if (expected == UINT64_MAX || req->payload_size != expected) {
		emu_err("pid %u: request type %u with %llu payload bytes", conn->pid, req->type,
			(unsigned long long)req->payload_size);
		return -EPROTO;
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
		return handle_hello(conn, req, reply);
	case KFDEMU_MSG_GET_GPUS:
		return handle_get_gpus(reply);
	case KFDEMU_MSG_ALLOC_BO:
		return handle_alloc(conn, req, reply);
	case KFDEMU_MSG_FREE_BO:
		return emu_free_bo(conn->target, ((const struct kfdemu_bo_ref *)req->payload)->handle);
	case KFDEMU_MSG_EXPORT_BO:
		return handle_export(conn, req, reply);
	case KFDEMU_MSG_RUN_KERNEL:
		return handle_run_kernel(conn, req, reply);
	case KFDEMU_MSG_ATTACH:
		return handle_attach(conn, req);
	case KFDEMU_MSG_CRIU_OP:
		return handle_criu_op(conn, req, reply);
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
	int ret;

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

	reply.status = dispatch(conn, &req, &reply);
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
	if (block_signals(&signal_fd) || emu_write_topology(config.topology_dir) ||
	    listen_on(config.socket_path, &listen_sock))
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
