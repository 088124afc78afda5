/*
 * Socket receive queues. Dump copies a queue without consuming it: MSG_PEEK from a peek
 * offset (SO_PEEK_OFF) that walks the queue packet after packet, restored afterwards.
 * Restore sends the packets again from a socket that writes to the one they were queued
 * in, so they arrive in order with their boundaries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "sk-queue.h"

#include "sk-packet.pb-c.h"

/* The kernel's SCM_MAX_FD: the most files one message carries. */
#define SCM_MAX_FD 253
#define STREAM_CHUNK (64u << 10)

/* ---------------------------------------------------------------- dump ---- */

static bool keeps_boundaries(int type)
{
	return type == SOCK_DGRAM || type == SOCK_SEQPACKET;
}

/* One packet as peeked: its bytes, and the files in flight with it as fds of criu's. */
struct peeked {
	uint8_t *buf;
	size_t cap, len;
	int fds[SCM_MAX_FD];
	size_t nr_fds;
	bool end; /* nothing was there: the queue has no more */
};

static void close_fds(struct peeked *pk, size_t from)
{
	for (size_t i = from; i < pk->nr_fds; i++)
		close(pk->fds[i]);
	pk->nr_fds = 0;
}

/*
 * What came with a peeked packet: files in flight, which MSG_PEEK installed in criu (taken
 * into pk); credentials, which say a record was there (see sk_queue_dump()).
 */
static int take_control(struct msghdr *msg, struct peeked *pk, bool *has_creds,
			const char *what)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t nr = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS)
			*has_creds = true;
		for (size_t i = 0; c->cmsg_type == SCM_RIGHTS && i < nr; i++)
			if (pk->nr_fds < SCM_MAX_FD)
				memcpy(&pk->fds[pk->nr_fds++], CMSG_DATA(c) + i * sizeof(int),
				       sizeof(int));
	}
	if (msg->msg_flags & MSG_CTRUNC) {
		pr_err("%s: more ancillary data queued than one message can bring\n", what);
		close_fds(pk, 0);
		return -E2BIG;
	}
	return 0;
}

/* The files in flight become files of the dump: their ids go in the packet's entry. */
static int write_packet(uint32_t id, struct peeked *pk, const char *what)
{
	SkPacketEntry pe = SK_PACKET_ENTRY__INIT;
	ScmEntry scm = SCM_ENTRY__INIT, *scms[1] = { &scm };
	struct cr_img *img = files_side_image(CR_IMG_SK_QUEUES);
	uint32_t rights[SCM_MAX_FD];
	int ret = img ? 0 : -EIO;

	for (size_t i = 0; i < pk->nr_fds && !ret; i++) {
		ret = files_dump_in_flight(pk->fds[i], &rights[i]);
		if (ret)
			close_fds(pk, i + 1);
	}
	if (ret)
		return ret;
	if (pk->nr_fds) {
		pr_debug("%s: %zu files in flight with a packet\n", what, pk->nr_fds);
		scm.type = SCM_RIGHTS;
		scm.n_rights = pk->nr_fds;
		scm.rights = rights;
		pe.n_scm = 1;
		pe.scm = scms;
		pk->nr_fds = 0;
	}
	pe.id_for = id;
	pe.length = pk->len;
	ret = pb_write_one(img, &pe);
	return ret ? ret : img_write_raw(img, pk->buf, pk->len);
}

/*
 * The packet at the peek offset into pk (its buffer grown to fit a record: MSG_TRUNC makes
 * the kernel report a record's whole length; the offset moved only by what was copied
 * and is set back before the retry).
 */
static int peek_packet(int fd, int type, size_t off, struct peeked *pk, const char *what)
{
	char control[CMSG_SPACE(sizeof(int) * SCM_MAX_FD) + CMSG_SPACE(sizeof(struct ucred))];
	int flags = MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC;
	bool records = keeps_boundaries(type), has_creds = false;
	struct iovec iov = { .iov_base = pk->buf, .iov_len = pk->cap };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(fd, &msg, flags | (records ? MSG_TRUNC : 0));
	int ret;

	if (n < 0 && errno == EAGAIN) {
		pk->end = true;
		return 0;
	}
	if (n < 0) {
		pr_perror("%s: cannot peek at its queue", what);
		return -errno;
	}
	ret = take_control(&msg, pk, &has_creds, what);
	if (ret)
		return ret;
	if (records && (size_t)n > pk->cap) {
		uint8_t *grown = realloc(pk->buf, n);
		int back = off;

		close_fds(pk, 0);
		if (!grown) {
			pr_err("%s: out of memory for a %zd-byte record\n", what, n);
			return -ENOMEM;
		}
		pk->buf = grown;
		pk->cap = n;
		if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &back, sizeof(back))) {
			pr_perror("%s: cannot set its peek offset back to %d", what, back);
			return -errno;
		}
		return peek_packet(fd, type, off, pk, what);
	}
	/* A record of any length, even 0, brings credentials; the end of a queue none. */
	pk->end = records ? !has_creds : n == 0 && !pk->nr_fds;
	pk->len = n;
	return 0;
}

static int peek_queue(int fd, uint32_t id, int type, const char *what)
{
	struct peeked pk = { .cap = STREAM_CHUNK };
	size_t off = 0, nr = 0;
	int ret = 0;

	pk.buf = malloc(pk.cap);
	if (!pk.buf) {
		pr_err("%s: out of memory for its queue\n", what);
		return -ENOMEM;
	}
	while (!ret) {
		ret = peek_packet(fd, type, off, &pk, what);
		if (ret || pk.end)
			break;
		ret = write_packet(id, &pk, what);
		off += pk.len;
		nr++;
	}
	close_fds(&pk, 0);
	free(pk.buf);
	if (ret)
		return ret;
	pr_debug("%s: %zu packets, %zu bytes queued\n", what, nr, off);
	return nr;
}

static int set_int_opt(int fd, int name, int val, const char *opt, const char *what)
{
	if (setsockopt(fd, SOL_SOCKET, name, &val, sizeof(val))) {
		pr_perror("%s: cannot set %s to %d", what, opt, val);
		return -errno;
	}
	return 0;
}

static int get_int_opt(int fd, int name, int *val, const char *opt, const char *what)
{
	socklen_t len = sizeof(*val);

	if (getsockopt(fd, SOL_SOCKET, name, val, &len)) {
		pr_perror("%s: cannot read %s", what, opt);
		return -errno;
	}
	return 0;
}

/*
 * An urgent byte (MSG_OOB) sits apart from the stream with its mark: a peek of it
 * succeeds only when there is one.
 */
static int check_no_urgent_byte(int fd, const char *what)
{
	char c;

	if (recv(fd, &c, 1, MSG_OOB | MSG_PEEK | MSG_DONTWAIT) == 1) {
		pr_err("%s: an urgent byte (MSG_OOB) is queued, which is not supported\n", what);
		return -ENOTSUP;
	}
	return 0;
}

/*
 * The task's own peek offset has no field in the image: one that is set is refused, and
 * the offset criu uses is set back to "none" (-1) afterwards. SO_PASSCRED is turned on
 * for records: with it every record, even an empty one, comes with credentials, which
 * tells an empty record from the end of a seqpacket queue shut down for reading (both
 * read 0).
 */
int sk_queue_dump(int fd, uint32_t id, int type, const char *what)
{
	int peek_off, passcred, ret;

	ret = get_int_opt(fd, SO_PEEK_OFF, &peek_off, "SO_PEEK_OFF", what);
	if (!ret && peek_off >= 0) {
		pr_err("%s: SO_PEEK_OFF is set (%d), which is not supported\n", what, peek_off);
		return -ENOTSUP;
	}
	if (!ret && type == SOCK_STREAM)
		ret = check_no_urgent_byte(fd, what);
	if (!ret)
		ret = get_int_opt(fd, SO_PASSCRED, &passcred, "SO_PASSCRED", what);
	if (ret)
		return ret;
	if (keeps_boundaries(type) && !passcred)
		ret = set_int_opt(fd, SO_PASSCRED, 1, "SO_PASSCRED", what);
	if (!ret)
		ret = set_int_opt(fd, SO_PEEK_OFF, 0, "SO_PEEK_OFF", what);
	if (!ret)
		ret = peek_queue(fd, id, type, what);
	/* Whatever happened, the socket must be left as the task had it. */
	if (set_int_opt(fd, SO_PEEK_OFF, -1, "SO_PEEK_OFF", what) && ret >= 0)
		ret = -EIO;
	if (keeps_boundaries(type) && !passcred &&
	    set_int_opt(fd, SO_PASSCRED, 0, "SO_PASSCRED", what) && ret >= 0)
		ret = -EIO;
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

struct sk_packet {
	uint32_t id_for;
	uint32_t len;
	uint8_t *data;
	uint32_t *rights; /* files.img ids of the files in flight with it */
	size_t nr_rights;
};

static struct sk_packet *packets;
static size_t nr_packets;

static int check_packet(struct cr_img *img, const SkPacketEntry *pe)
{
	off_t left = img_bytes_left(img);

	if (pe->n_scm > 1 || (pe->n_scm && (pe->scm[0]->type != SCM_RIGHTS ||
					    !pe->scm[0]->n_rights ||
					    pe->scm[0]->n_rights > SCM_MAX_FD))) {
		pr_err("%s: a packet for socket %u carries ancillary data other than files in "
		       "flight (SCM_RIGHTS, 1 to %d of them), which is not supported\n",
		       img->name, pe->id_for, SCM_MAX_FD);
		return -ENOTSUP;
	}
	if (left < 0 || (uint64_t)left < pe->length) {
		pr_err("%s: a packet for socket %u claims %u bytes, %lld are left in the image\n",
		       img->name, pe->id_for, pe->length, (long long)left);
		return -EINVAL;
	}
	return 0;
}

static int read_packet(struct cr_img *img, const SkPacketEntry *pe)
{
	struct sk_packet *grown, *p;
	int ret = check_packet(img, pe);

	if (ret)
		return ret;
	grown = realloc(packets, (nr_packets + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("%s: out of memory\n", img->name);
		return -ENOMEM;
	}
	packets = grown;
	p = &packets[nr_packets];
	*p = (struct sk_packet){ .id_for = pe->id_for, .len = pe->length };
	p->data = malloc(pe->length ? pe->length : 1);
	if (pe->n_scm) {
		p->nr_rights = pe->scm[0]->n_rights;
		p->rights = malloc(p->nr_rights * sizeof(*p->rights));
	}
	if (!p->data || (pe->n_scm && !p->rights)) {
		pr_err("%s: out of memory for a %u-byte packet\n", img->name, pe->length);
		ret = -ENOMEM;
	}
	if (!ret)
		ret = img_read_raw(img, p->data, pe->length);
	if (ret) {
		free(p->data);
		free(p->rights);
		return ret;
	}
	if (p->nr_rights)
		memcpy(p->rights, pe->scm[0]->rights, p->nr_rights * sizeof(*p->rights));
	nr_packets++;
	return 0;
}

int sk_queue_collect(void)
{
	SkPacketEntry *pe;
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_SK_QUEUES, 0))
		return 0;
	img = open_image(CR_IMG_SK_QUEUES, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&pe)) > 0) {
		ret = read_packet(img, pe);
		pb_free(img, pe);
		if (ret)
			break;
	}
	close_image(img);
	return ret;
}

void sk_queue_fini(void)
{
	for (size_t i = 0; i < nr_packets; i++) {
		free(packets[i].data);
		free(packets[i].rights);
	}
	free(packets);
	packets = NULL;
	nr_packets = 0;
}

int sk_queue_check_owners(bool (*known)(uint32_t id))
{
	for (size_t i = 0; i < nr_packets; i++) {
		if (!known(packets[i].id_for)) {
			pr_err("sk-queues.img: packet %zu is for file %u, which is no socket of "
			       "files.img\n",
			       i, packets[i].id_for);
			return -EINVAL;
		}
	}
	return 0;
}

size_t sk_queue_packets(uint32_t id)
{
	size_t nr = 0;

	for (size_t i = 0; i < nr_packets; i++)
		nr += packets[i].id_for == id;
	return nr;
}

bool sk_queue_right(uint32_t id, size_t n, uint32_t *right)
{
	for (size_t i = 0; i < nr_packets; i++) {
		if (packets[i].id_for != id)
			continue;
		if (n < packets[i].nr_rights) {
			*right = packets[i].rights[n];
			return true;
		}
		n -= packets[i].nr_rights;
	}
	return false;
}

/* The first send() of a packet: its files in flight go with it, from fd_of(id). */
static ssize_t send_first(int fd, const struct sk_packet *p, int (*fd_of)(uint32_t id))
{
	char control[CMSG_SPACE(sizeof(int) * SCM_MAX_FD)] = { 0 };
	struct iovec iov = { .iov_base = p->data, .iov_len = p->len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (p->nr_rights) {
		msg.msg_control = control;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * p->nr_rights);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * p->nr_rights);
		for (size_t i = 0; i < p->nr_rights; i++) {
			int file_fd = fd_of(p->rights[i]);

			if (file_fd < 0) {
				errno = -file_fd;
				return -1;
			}
			memcpy(CMSG_DATA(c) + i * sizeof(int), &file_fd, sizeof(int));
		}
	}
	return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* A record goes in one send(); a stream's bytes in as many as it takes. */
static int send_packet(int fd, const struct sk_packet *p, int type, int (*fd_of)(uint32_t id),
		       const char *what)
{
	size_t done = 0;

	do {
		ssize_t n = done ? send(fd, p->data + done, p->len - done,
					MSG_DONTWAIT | MSG_NOSIGNAL)
				 : send_first(fd, p, fd_of);

		if (n < 0) {
			bool qlen = errno == EAGAIN && type == SOCK_DGRAM;

			pr_perror("%s: cannot queue %u bytes again (%zu sent)%s", what, p->len,
				  done,
				  qlen ? " (more datagrams than net.unix.max_dgram_qlen lets a "
					 "socket that is not its peer queue?)"
				       : "");
			return -errno;
		}
		done += n;
	} while (done < p->len && !keeps_boundaries(type));
	if (done != p->len) {
		pr_err("%s: a %u-byte record was sent as %zu bytes\n", what, p->len, done);
		return -EIO;
	}
	return 0;
}

int sk_queue_restore(uint32_t id, int fd, int type, int (*fd_of)(uint32_t id),
		     const char *what)
{
	size_t nr = 0;

	for (size_t i = 0; i < nr_packets; i++) {
		int ret;

		if (packets[i].id_for != id)
			continue;
		ret = send_packet(fd, &packets[i], type, fd_of, what);
		if (ret)
			return ret;
		nr++;
	}
	if (nr)
		pr_debug("%s: %zu packets queued again\n", what, nr);
	return 0;
}
