/*
 * Wire protocol of the KFD EMULATOR (test/gpu/kfd-emu): frame layout, message types and
 * payloads shared by the daemon and libkfdemu. It is an emulator, not a GPU driver; the
 * protocol is documented in test/gpu/README.md.
 */
#ifndef KFDEMU_PROTO_H
#define KFDEMU_PROTO_H

#include <stdint.h>
#include <stddef.h>
#include <linux/kfd_ioctl.h>

#define KFDEMU_MAGIC 0x4544464bU /* "KFDE" read as a little-endian u32 */
#define KFDEMU_PROTO_VERSION 1

/*
 * The kernel passes at most SCM_MAX_FD (253) descriptors in one message; anything above
 * is refused with EINVAL, so fds travel in batches well under it.
 */
#define KFDEMU_FDS_PER_BATCH 200

/* Upper bounds a receiver enforces before allocating anything for a frame. */
#define KFDEMU_MAX_PAYLOAD (64ULL << 20)
#define KFDEMU_MAX_FDS_PER_MSG 65536

#define KFDEMU_DEFAULT_SOCKET "/run/kfd-emu.sock"
#define KFDEMU_SOCKET_ENV "KFDEMU_SOCKET"

/* What KFD stores in a bucket's dmabuf_fd when a BO has no dma-buf. */
#define KFDEMU_INVALID_FD 0xffffffffU

enum kfdemu_msg_type {
	KFDEMU_MSG_HELLO = 1,	  /* first message on a connection: version and client socket */
	KFDEMU_MSG_GET_GPUS,	  /* list the emulated GPUs */
	KFDEMU_MSG_ALLOC_BO,	  /* allocate a VRAM or GTT BO for the caller's process */
	KFDEMU_MSG_FREE_BO,	  /* free a BO by handle */
	KFDEMU_MSG_EXPORT_BO,	  /* export a BO: the reply carries its memfd (the dma-buf stand-in) */
	KFDEMU_MSG_RUN_KERNEL,	  /* run a "kernel" on a BO inside the emulator */
	KFDEMU_MSG_ATTACH,	  /* make this connection act on another client's process */
	KFDEMU_MSG_CRIU_OP,	  /* AMDKFD_IOC_CRIU_OP: struct kfd_ioctl_criu_args + buckets */
	KFDEMU_MSG_FDS = 0x100,	  /* continuation frame carrying one batch of a message's fds */
};

#define KFDEMU_FRAME_REPLY 0x1

/*
 * Every message starts with this frame; payload_size bytes follow, then, if nr_fds > 0,
 * KFDEMU_MSG_FDS frames (no payload) whose nr_fds add up to the message's nr_fds, each
 * with its batch attached as SCM_RIGHTS. Both ends run on one host: native byte order.
 */
struct kfdemu_frame {
	uint32_t magic;
	uint16_t version;
	uint16_t type;	       /* enum kfdemu_msg_type */
	uint32_t seq;	       /* chosen by the client, echoed in the reply */
	int32_t status;	       /* reply: 0 or -errno; request: 0 */
	uint64_t payload_size; /* 64-bit: bucket arrays of many BOs can be large */
	uint32_t nr_fds;       /* fds belonging to this message (or to this batch) */
	uint32_t flags;	       /* KFDEMU_FRAME_REPLY on replies */
};

/* HELLO request; the reply is a struct kfdemu_hello_reply. */
struct kfdemu_hello {
	uint32_t client_version;
	uint32_t pad;
	uint64_t sock_ino; /* inode of the client's own socket, as fstat() sees it */
};

struct kfdemu_hello_reply {
	uint32_t server_version;
	uint32_t nr_gpus;
	uint32_t pid; /* the client's pid as the emulator sees it (SO_PEERCRED) */
	uint32_t pad;
};

/* GET_GPUS reply: an array of these, one per emulated GPU, in topology node order. */
struct kfdemu_gpu_info {
	uint32_t gpu_id;
	uint32_t node_id;   /* topology node index */
	uint32_t device_id; /* PCI device id written to the topology properties */
	uint32_t pad;
	uint64_t vram_size;
	uint64_t vram_used;
};

/* ALLOC_BO request and reply (the reply fills handle, va_addr and mmap_offset). */
struct kfdemu_bo_info {
	uint64_t handle;      /* (gpu_id << 32) | per-process id, as KFD builds it */
	uint64_t va_addr;     /* GPU virtual address; 0 in a request: the emulator picks */
	uint64_t size;	      /* bytes, a multiple of the page size */
	uint64_t mmap_offset; /* fake mmap offset, unique in the emulator; names the memfd */
	uint32_t gpu_id;
	uint32_t alloc_flags; /* KFD_IOC_ALLOC_MEM_FLAGS_VRAM or _GTT (+ attribute bits) */
};

/* FREE_BO and EXPORT_BO request; EXPORT_BO replies with no payload and one fd. */
struct kfdemu_bo_ref {
	uint64_t handle;
};

enum kfdemu_kernel_op {
	KFDEMU_KERNEL_FILL = 1, /* every u32 of the range := arg */
	KFDEMU_KERNEL_ADD,	/* every u32 of the range += arg (wrapping) */
	KFDEMU_KERNEL_CHECKSUM, /* result := kfdemu_checksum() of the range */
};

/* RUN_KERNEL request; the reply is a struct kfdemu_kernel_result. */
struct kfdemu_kernel {
	uint32_t op; /* enum kfdemu_kernel_op */
	uint32_t arg;
	uint64_t handle;
	uint64_t offset; /* range inside the BO; both multiples of 8 */
	uint64_t length;
};

struct kfdemu_kernel_result {
	uint64_t value; /* the checksum for CHECKSUM, 0 otherwise */
};

/* ATTACH request: by the client socket inode if sock_ino != 0, else by pid. */
struct kfdemu_attach {
	uint32_t pid;
	uint32_t pad;
	uint64_t sock_ino;
};

/*
 * CRIU_OP request payload: struct kfd_ioctl_criu_args (its pointer fields are ignored),
 * then for RESTORE: num_devices device buckets, num_bos BO buckets, priv_data_size bytes.
 * Reply payload: the updated args, then for CHECKPOINT: devices, BOs, priv data; for
 * RESTORE: the BO buckets. In replies a bucket's dmabuf_fd is an index into the fds
 * carried by the message (or KFDEMU_INVALID_FD); libkfdemu turns it into a local fd.
 */

/*
 * One message as the wire layer sees it. On receive, payload is malloc()ed and fds[] holds
 * received descriptors; kfdemu_msg_release() frees both (closing fds still >= 0).
 */
struct kfdemu_msg {
	uint16_t type;
	uint32_t seq;
	int32_t status;
	uint32_t flags;
	void *payload;
	uint64_t payload_size;
	int *fds;
	uint32_t nr_fds;
};

/*
 * Send one message: frame + payload, then fds in batches of KFDEMU_FDS_PER_BATCH. Handles
 * short sends; max_chunk (0 = unlimited) caps the bytes per sendmsg, a test knob.
 */
int kfdemu_wire_send(int sock, const struct kfdemu_msg *msg, size_t max_chunk);

/*
 * Receive one whole message (looping over short reads). Returns 0, -ENOTCONN when the
 * peer closed cleanly between messages, -ECONNRESET when it vanished mid-message,
 * -EPROTO on a malformed frame, or another -errno.
 */
int kfdemu_wire_recv(int sock, struct kfdemu_msg *msg);

void kfdemu_msg_release(struct kfdemu_msg *msg);

#endif
