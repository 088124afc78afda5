/*
 * fdstore: parked descriptors live in the receive queue of one Unix datagram socket
 * connected to itself, one datagram (one byte + SCM_RIGHTS) per fd. Entry N is read by
 * peeking past the first N datagrams (SO_PEEK_OFF), so nothing is ever consumed and
 * every forked task that inherits the socket sees the same store.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "criu-plugin.h"
#include "servicefd.h"

#ifndef SO_PEEK_OFF
#define SO_PEEK_OFF 42
#endif

/*
 * Shared by criu and every task (MAP_SHARED, inherited across fork). The lock keeps ids
 * in queue order when several processes add, and makes "set the peek offset, then peek"
 * atomic: the offset belongs to the socket, which all processes share.
 */
struct fdstore_shared {
	pthread_mutex_t lock;
	int nr_fds;
};

static struct fdstore_shared *shared;

/* Each datagram carries exactly this one byte: the peek offset counts bytes. */
static const char fdstore_payload = 'F';

static int fdstore_lock(void)
{
	int ret = pthread_mutex_lock(&shared->lock);

	/* A task died holding it (killed mid-add): the counter is still consistent. */
	if (ret == EOWNERDEAD)
		ret = pthread_mutex_consistent(&shared->lock);
	if (ret)
		pr_err("fdstore: cannot take the lock: %s\n", strerror(ret));
	return -ret;
}

static void fdstore_unlock(void)
{
	pthread_mutex_unlock(&shared->lock);
}

static int init_shared_lock(void)
{
	pthread_mutexattr_t attr;
	int ret;

	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		ret = -errno;
		shared = NULL;
		pr_err("fdstore: cannot map its shared state: %s\n", strerror(-ret));
		return ret;
	}
	ret = pthread_mutexattr_init(&attr);
	if (!ret)
		ret = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	if (!ret)
		ret = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	if (!ret)
		ret = pthread_mutex_init(&shared->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (ret) {
		pr_err("fdstore: cannot set up its process-shared lock: %s\n", strerror(ret));
		munmap(shared, sizeof(*shared));
		shared = NULL;
		return -ret;
	}
	shared->nr_fds = 0;
	return 0;
}

/*
 * The queued datagrams are charged to the sender's send buffer, and the sender is the
 * receiver here: raise it so many fds fit. SO_SNDBUFFORCE needs CAP_NET_ADMIN; without
 * it the plain option is capped by net.core.wmem_max, which is still plenty.
 */
static void grow_send_buffer(int sk)
{
	int size = INT_MAX / 2; /* the kernel doubles it */

	if (setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) &&
	    setsockopt(sk, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)))
		pr_warn("fdstore: cannot grow the send buffer: %s\n", strerror(errno));
}

/*
 * A datagram socket connected to itself: what it sends lands in its own receive queue.
 * Autobind gives it a unique abstract address, so two criu runs never collide.
 */
static int create_self_connected_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	socklen_t addr_len = sizeof(sa_family_t);
	int sk, ret;

	/* Non-blocking: a full queue must fail fdstore_add(), not hang the restore. */
	sk = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sk < 0) {
		ret = -errno;
		pr_err("fdstore: cannot create its socket: %s\n", strerror(-ret));
		return ret;
	}
	if (bind(sk, (struct sockaddr *)&addr, addr_len) ||
	    (addr_len = sizeof(addr), getsockname(sk, (struct sockaddr *)&addr, &addr_len)) ||
	    connect(sk, (struct sockaddr *)&addr, addr_len)) {
		ret = -errno;
		pr_err("fdstore: cannot connect its socket to itself: %s\n", strerror(-ret));
		close(sk);
		return ret;
	}
	grow_send_buffer(sk);
	return sk;
}

int fdstore_init(void)
{
	int sk, ret;

	ret = init_shared_lock();
	if (ret)
		return ret;
	sk = create_self_connected_socket();
	if (sk >= 0)
		sk = install_service_fd(FDSTORE_SFD, sk);
	if (sk < 0) {
		munmap(shared, sizeof(*shared));
		shared = NULL;
		return sk;
	}
	pr_debug("fdstore: ready on fd %d\n", sk);
	return 0;
}

static int fdstore_sock(void)
{
	if (!shared) {
		pr_err("fdstore: not initialised (it exists during restore only)\n");
		return -ENXIO;
	}
	return get_service_fd(FDSTORE_SFD);
}

static int queue_fd(int sk, int fd)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)&fdstore_payload, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);

	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));

	if (sendmsg(sk, &msg, 0) != 1)
		return -errno;
	return 0;
}

int fdstore_add(int fd)
{
	int sk = fdstore_sock();
	int id, ret;

	if (sk < 0)
		return sk;
	ret = fdstore_lock();
	if (ret)
		return ret;
	ret = queue_fd(sk, fd);
	id = shared->nr_fds;
	if (!ret)
		shared->nr_fds++;
	fdstore_unlock();

	if (ret) {
		pr_err("fdstore: cannot park fd %d: %s\n", fd, strerror(-ret));
		return ret;
	}
	pr_debug("fdstore: fd %d parked as %d\n", fd, id);
	return id;
}

/* Copy of the fd in the datagram at byte offset id; the queue is left as it was. */
static int peek_fd(int sk, int id)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *cmsg;
	int fd;

	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &id, sizeof(id)))
		return -errno;
	if (recvmsg(sk, &msg, MSG_PEEK | MSG_DONTWAIT) != 1)
		return errno ? -errno : -EBADMSG;
	cmsg = CMSG_FIRSTHDR(&msg);
	if (!cmsg || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len != CMSG_LEN(sizeof(int)) ||
	    (msg.msg_flags & MSG_CTRUNC))
		return -EBADMSG;
	memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
	return fd;
}

int fdstore_get(int id)
{
	int sk = fdstore_sock();
	int fd, ret;

	if (sk < 0)
		return sk;
	ret = fdstore_lock();
	if (ret)
		return ret;
	if (id < 0 || id >= shared->nr_fds) {
		fd = -ENOENT;
	} else {
		errno = 0;
		fd = peek_fd(sk, id);
	}
	fdstore_unlock();

	if (fd < 0)
		pr_err("fdstore: cannot get entry %d: %s\n", id, strerror(-fd));
	return fd;
}
