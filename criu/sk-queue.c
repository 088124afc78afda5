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

/*
 * What came with a peeked packet: files in flight (which MSG_PEEK has just installed in
 * criu: closed here) are refused; credentials say a record was there (see peek_queue()).
 */
static int check_control(struct msghdr *msg, bool *has_creds, const char *what)
{
	bool rights = false;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
			*has_creds = true;
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t nr = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < nr; i++)
				close(((int *)CMSG_DATA(c))[i]);
			rights = true;
		}
	}
	if (rights || (msg->msg_flags & MSG_CTRUNC)) {
		pr_err("%s: its queue holds files in flight (SCM_RIGHTS), which is not supported\n",
		       what);
		return -ENOTSUP;
	}
	return 0;
}

static int write_packet(uint32_t id, const uint8_t *buf, size_t len)
{
	SkPacketEntry pe = SK_PACKET_ENTRY__INIT;
	struct cr_img *img = files_side_image(CR_IMG_SK_QUEUES);
	int ret;

	if (!img)
		return -EIO;
	pe.id_for = id;
	pe.length = len;
	ret = pb_write_one(img, &pe);
	return ret ? ret : img_write_raw(img, buf, len);
}

/*
 * One packet at the peek offset into *buf (grown to fit a record: MSG_TRUNC makes the
 * kernel report a record's whole length; the offset moved only by what was copied and
 * is set back before the retry). *len: its length; *end: the queue has no more.
 */
static int peek_packet(int fd, int type, size_t off, uint8_t **buf, size_t *cap, size_t *len,
		       bool *end, const char *what)
{
	char control[CMSG_SPACE(sizeof(int) * SCM_MAX_FD) + CMSG_SPACE(sizeof(struct ucred))];
	int flags = MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC;
	bool records = keeps_boundaries(type), has_creds = false;
	struct iovec iov = { .iov_base = *buf, .iov_len = *cap };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(fd, &msg, flags | (records ? MSG_TRUNC : 0));
	int ret;

	if (n < 0 && errno == EAGAIN) {
		*end = true;
		return 0;
	}
	if (n < 0) {
		pr_perror("%s: cannot peek at its queue", what);
		return -errno;
	}
	ret = check_control(&msg, &has_creds, what);
	if (ret)
		return ret;
	if (records && (size_t)n > *cap) {
		uint8_t *grown = realloc(*buf, n);
		int back = off;

		if (!grown) {
			pr_err("%s: out of memory for a %zd-byte record\n", what, n);
			return -ENOMEM;
		}
		*buf = grown;
		*cap = n;
		if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &back, sizeof(back))) {
			pr_perror("%s: cannot set its peek offset back to %d", what, back);
			return -errno;
		}
		return peek_packet(fd, type, off, buf, cap, len, end, what);
	}
	/* A record of any length, even 0, brings credentials; the end of a queue none. */
	*end = records ? !has_creds : n == 0;
	*len = n;
	return 0;
}

static int peek_queue(int fd, uint32_t id, int type, const char *what)
{
	size_t cap = STREAM_CHUNK, off = 0, nr = 0;
	uint8_t *buf = malloc(cap);
	bool end = false;
	int ret = 0;

	if (!buf) {
		pr_err("%s: out of memory for its queue\n", what);
		return -ENOMEM;
	}
	while (!ret) {
		size_t len = 0;

		ret = peek_packet(fd, type, off, &buf, &cap, &len, &end, what);
		if (ret || end)
			break;
		ret = write_packet(id, buf, len);
		off += len;
		nr++;
	}
	free(buf);
	if (!ret)
		pr_debug("%s: %zu packets, %zu bytes queued\n", what, nr, off);
	return ret;
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
	if (set_int_opt(fd, SO_PEEK_OFF, -1, "SO_PEEK_OFF", what) && !ret)
		ret = -EIO;
	if (keeps_boundaries(type) && !passcred &&
	    set_int_opt(fd, SO_PASSCRED, 0, "SO_PASSCRED", what) && !ret)
		ret = -EIO;
	return ret;
}

/* ------------------------------------------------------------- restore ---- */

struct sk_packet {
	uint32_t id_for;
	uint32_t len;
	uint8_t *data;
};

static struct sk_packet *packets;
static size_t nr_packets;

static int check_packet(struct cr_img *img, const SkPacketEntry *pe)
{
	off_t left = img_bytes_left(img);

	if (pe->n_scm) {
		pr_err("%s: a packet for socket %u carries ancillary data (files in flight), "
		       "which is not supported\n",
		       img->name, pe->id_for);
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
	struct sk_packet *grown;
	int ret = check_packet(img, pe);

	if (ret)
		return ret;
	grown = realloc(packets, (nr_packets + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("%s: out of memory\n", img->name);
		return -ENOMEM;
	}
	packets = grown;
	packets[nr_packets] = (struct sk_packet){ .id_for = pe->id_for, .len = pe->length };
	packets[nr_packets].data = malloc(pe->length ? pe->length : 1);
	if (!packets[nr_packets].data) {
		pr_err("%s: out of memory for a %u-byte packet\n", img->name, pe->length);
		return -ENOMEM;
	}
	ret = img_read_raw(img, packets[nr_packets].data, pe->length);
	if (ret) {
		free(packets[nr_packets].data);
		return ret;
	}
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
	for (size_t i = 0; i < nr_packets; i++)
		free(packets[i].data);
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

/* A record goes in one send(); a stream's bytes in as many as it takes. */
static int send_packet(int fd, const struct sk_packet *p, int type, const char *what)
{
	size_t done = 0;

	do {
		ssize_t n = send(fd, p->data + done, p->len - done, MSG_DONTWAIT | MSG_NOSIGNAL);

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

int sk_queue_restore(uint32_t id, int fd, int type, const char *what)
{
	size_t nr = 0;

	for (size_t i = 0; i < nr_packets; i++) {
		int ret;

		if (packets[i].id_for != id)
			continue;
		ret = send_packet(fd, &packets[i], type, what);
		if (ret)
			return ret;
		nr++;
	}
	if (nr)
		pr_debug("%s: %zu packets queued again\n", what, nr);
	return 0;
}
