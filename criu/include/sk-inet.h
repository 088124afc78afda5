/*
 * INET and INET6 sockets (sk-inet.c) and their established TCP connections, restored in
 * repair mode (sk-tcp.c): what the two files share.
 */
#ifndef CR_SK_INET_H
#define CR_SK_INET_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "files.h"
#include "ext.pb-c.h"
#include "sk-inet.pb-c.h"
#include "tcp-stream.pb-c.h"

/* How many options sk-inet.c's cmsg_opts[] lists. */
#define INET_NR_CMSG_OPTS 30

/* Dump: one socket's entry as it is filled. */
struct inet_dump {
	InetSkEntry ie;
	SkOptsEntry opts;
	IpOptsEntry ip_opts;
	TcpOptsEntry tcp_opts;
	IpOptsRawEntry raw;	      /* ip_opts.raw of a raw socket */
	uint32_t icmp_filter[8]; /* raw.icmpv_filter: ICMP_FILTER, ICMPV6_FILTER */
	FownEntry fown;
	uint32_t src[4], dst[4];
	char ifname[IFNAMSIZ + 1]; /* ie.ifname: a link-local bind's interface */
	bool connected;
	uint32_t pending; /* listening: connections not accepted yet */
	/* The values of sk-inet.c's cmsg_opts[] (for inetsk-ext.img), 0 where off. */
	int cmsg_vals[INET_NR_CMSG_OPTS];
	char what[96];
};

/* Restore: one collected entry. */
struct inet_sk {
	uint32_t id;
	const InetSkEntry *ie;
	struct tcp_stream *stream; /* an established connection's, or NULL */
	const CrInetSkExtEntry *ext; /* its inetsk-ext.img entry, or NULL */
	char what[64];
};

/* ---- sk-inet.c, for sk-tcp.c ---- */

/* The local (peer false) or peer address of ie as a sockaddr; its length. */
socklen_t inet_sk_addr(const InetSkEntry *ie, bool peer, struct sockaddr_storage *ss);
/* Whether the dumped socket had a local address: bound, or given one by connect(). */
bool inet_sk_bound(const InetSkEntry *ie);
/* A new socket of sk's kind with what must precede bind() set; the fd or -errno. */
int inet_sk_new(const struct inet_sk *sk);
/* Bind fd to sk's dumped address (SO_REUSEADDR on unless in repair mode). 0 or -errno. */
int inet_sk_bind(int fd, const struct inet_sk *sk, bool repair);
/* Options, shutdown and file flags of sk on fd; fd, or -errno with fd closed. */
int inet_sk_finish(int fd, const struct inet_sk *sk, const struct file_desc *d);

/* ---- sk-tcp.c ---- */

/*
 * Dump: whether the state of d, a TCP socket neither closed nor listening, can be dumped:
 * established with --tcp-established (or --tcp-close, which dumps it as closed). 0 or
 * -errno after one error line.
 */
int tcp_dump_check_state(const struct inet_dump *d);
/*
 * Dump: the established connection of d, through fd, criu's copy of the socket: locked
 * (the network lock, unless the tree's net namespace is locked whole or --network-lock
 * skip) and in repair mode until tcp_dump_release(). With --tcp-close, d is made a closed
 * socket instead. 0 or -errno.
 */
int tcp_dump_stream(int fd, struct inet_dump *d);
/*
 * fdtype_ops.dump_check: once every fd is dumped, every stream read at one point and
 * written into tcp-stream-INODE.img.
 */
int tcp_dump_check(void);
/*
 * Dump, main process, once the dump's outcome is known and before the tree is released:
 * killed is whether the tree will be killed. Sockets of a tree that runs on leave repair
 * mode; those of a killed one keep it, so their closing sends nothing to their peers.
 */
void tcp_dump_release(bool killed);
/* Restore, collect: whether state is a TCP state restore gives back. */
bool tcp_state_restorable(uint32_t state);
/*
 * Restore, collect: whether ie is a connection restored from its stream image: established
 * or closing, or closed with a peer where the images have its stream.
 */
bool tcp_restores_stream(const InetSkEntry *ie);
/*
 * Restore, open(): the shutdown (SK_SHUTDOWN__*) the task sets on sk itself; a closing
 * connection's FINs are put back by criu once the tree is restored.
 */
uint32_t tcp_task_shutdown(const struct inet_sk *sk);
/* check --feature tcp_half_closed: TCP repair mode, which closing connections need. */
bool tcp_has_half_closed(void);
/* Restore, collect: read and check sk's tcp-stream image. 0 or -errno. */
int tcp_collect_stream(struct inet_sk *sk);
/* Restore, main process, before forking: the table the tasks fill in. 0 or -errno. */
int tcp_collect_done(void);
void tcp_collect_fini(void);
/* Restore, open(): the established connection sk, in repair mode; the fd or -errno. */
int tcp_open_stream(const struct inet_sk *sk, const struct file_desc *d);
/* Restore, in the task that holds sk first, its fds placed: where sk is (pid: the images'). */
int tcp_note_repaired(const struct inet_sk *sk, int fd, pid_t pid);
/*
 * Restore, main process, once every task is restored and before any runs, in two steps
 * around the unlock of the tree's net namespace (netlock_restore_unlock()): every restored
 * connection taken by criu and its FINs given back (still locked), then every one out of
 * repair mode (unlocked). 0 or -errno (the restore fails).
 */
int tcp_restore_fins(void);
int tcp_restore_unlock(void);
/* Restore: the dump was made with --tcp-close, so connections come back closed. */
void tcp_restore_as_dumped_closed(void);

#endif
