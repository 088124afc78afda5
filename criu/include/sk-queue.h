/*
 * The data queued in sockets (sk-queues.img): one sk_packet_entry per packet, in queue
 * order, each followed by its bytes. A packet is a datagram or record for the types that
 * keep boundaries, a run of bytes for a stream.
 */
#ifndef CR_SK_QUEUE_H
#define CR_SK_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Dump: the receive queue of socket fd (criu's copy; file id) of the given type into
 * sk-queues.img, its files in flight dumped as files (files_dump_in_flight()). The queue
 * stays as it was, peek offset included. The number of packets, or -errno after one line
 * that starts with what.
 */
int sk_queue_dump(int fd, uint32_t id, int type, const char *what);

/* Restore, main process: read sk-queues.img, when the dump has one. 0 or -errno. */
int sk_queue_collect(void);
void sk_queue_fini(void);
/* Whether every packet is for a socket known() says exists; else one error line. */
int sk_queue_check_owners(bool (*known)(uint32_t id));
/* The number of packets queued for socket id. */
size_t sk_queue_packets(uint32_t id);
/* The n-th file in flight in the queue of socket id: its files.img id; false: none. */
bool sk_queue_right(uint32_t id, size_t n, uint32_t *right);
/*
 * Restore: send the packets queued for socket id, in order, from fd, which writes to it
 * (its peer, or a socket connected to it only for this), with their files in flight,
 * open at fd_of(their id). fd must not block. 0 or -errno.
 */
int sk_queue_restore(uint32_t id, int fd, int type, int (*fd_of)(uint32_t id),
		     const char *what);

#endif
