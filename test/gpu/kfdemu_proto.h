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
#define KFDEMU_PROTO_VERSION 2

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

/*
 * The emulated /dev/kfd mmap space of a process (GET_MMAP KFD): KFD encodes a type and a
 * gpu id in the offset (type << 62 | gpu_id << 46); a memfd cannot be mapped that far,
 * so the emulator uses the same layout scaled down: type << 36 | gpu_id << 20.
 */
#define KFDEMU_MMAP_TYPE_MMIO 0ULL
#define KFDEMU_MMAP_TYPE_EVENTS 2ULL
#define KFDEMU_MMAP_TYPE_DOORBELL 3ULL
#define KFDEMU_MMAP_OFFSET(type, gpu_id) ((uint64_t)(type) << 36 | (uint64_t)(gpu_id) << 20)
/* A process's doorbells on one GPU: 1024 doorbells of 8 bytes, as KFD's process slice. */
#define KFDEMU_DOORBELL_SLICE 8192ULL
#define KFDEMU_DOORBELLS_PER_SLICE 1024U
/* The events page: one 8-byte slot per signal event id (KFD_SIGNAL_EVENT_LIMIT). */
#define KFDEMU_EVENTS_PAGE_SIZE (KFD_SIGNAL_EVENT_LIMIT * 8ULL)
#define KFDEMU_EVENT_SLOT_UNSIGNALED UINT64_MAX
/* The MMIO_REMAP page and the BO KFD makes for it: one page. */
#define KFDEMU_MMIO_PAGE_SIZE 4096ULL

enum kfdemu_msg_type {
	KFDEMU_MSG_HELLO = 1,	 /* first message: version, what the connection is */
	KFDEMU_MSG_GET_GPUS,	 /* list the emulated GPUs */
	KFDEMU_MSG_ALLOC_BO,	 /* allocate a BO for the caller's process */
	KFDEMU_MSG_FREE_BO,	 /* free a BO by handle */
	KFDEMU_MSG_EXPORT_BO,	 /* export a VRAM/GTT BO: the reply carries its dma-buf */
	KFDEMU_MSG_RUN_KERNEL,	 /* run a "kernel" on a BO, synchronously */
	KFDEMU_MSG_ATTACH,	 /* make this connection act on another client's process */
	KFDEMU_MSG_CRIU_OP,	 /* AMDKFD_IOC_CRIU_OP: struct kfd_ioctl_criu_args + buckets */
	KFDEMU_MSG_ACQUIRE_VM,	 /* bind a GPU of the process to a render node (1 fd) */
	KFDEMU_MSG_GET_MMAP,	 /* the fd to mmap: a render node's or /dev/kfd's */
	KFDEMU_MSG_CREATE_QUEUE, /* a user-mode queue on a GPU */
	KFDEMU_MSG_DESTROY_QUEUE,
	KFDEMU_MSG_CREATE_EVENT,
	KFDEMU_MSG_DESTROY_EVENT,
	KFDEMU_MSG_SET_EVENT,
	KFDEMU_MSG_RESET_EVENT,
	KFDEMU_MSG_WAIT_EVENTS,
	KFDEMU_MSG_SVM,		/* set or get attributes of a shared virtual memory range */
	KFDEMU_MSG_COPY,	/* the copy engine: BO (dma-buf) <-> file (2 fds) */
	KFDEMU_MSG_NEXT_DATA,	/* the next range of a BO that holds data (1 fd: dma-buf) */
	KFDEMU_MSG_IDENTIFY,	/* what an fd is: KFD, render node, dma-buf (1 fd) */
	KFDEMU_MSG_STATS,	/* what the emulator holds: processes, BOs, queues, ... */
	KFDEMU_MSG_FDS = 0x100, /* continuation frame carrying one batch of a message's fds */
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

/* What a connection stands for: /dev/kfd of its process, or a render node of one GPU. */
enum kfdemu_conn_kind {
	KFDEMU_CONN_KFD = 0,
	KFDEMU_CONN_RENDER = 1,
};

/* HELLO request; the reply is a struct kfdemu_hello_reply. */
struct kfdemu_hello {
	uint32_t client_version;
	uint32_t kind;	   /* enum kfdemu_conn_kind */
	uint64_t sock_ino; /* inode of the client's own socket, as fstat() sees it */
	uint32_t render_minor; /* RENDER: the node's minor (drm_render_minor in the topology) */
	uint32_t pad;
};

struct kfdemu_hello_reply {
	uint32_t server_version;
	uint32_t nr_gpus;
	uint32_t pid; /* the client's pid as the emulator sees it (SO_PEERCRED) */
	uint32_t gpu_id; /* RENDER: the GPU behind the node */
};

/* GET_GPUS reply: an array of these, one per emulated GPU, in topology node order. */
struct kfdemu_gpu_info {
	uint32_t gpu_id;
	uint32_t node_id;   /* topology node index */
	uint32_t device_id; /* PCI device id written to the topology properties */
	uint32_t render_minor;
	uint64_t vram_size;
	uint64_t vram_used;
};

/* ACQUIRE_VM request (on the KFD connection), with the render node's fd attached. */
struct kfdemu_acquire_vm {
	uint32_t gpu_id;
	uint32_t pad;
};

/*
 * ALLOC_BO request and reply (the reply fills handle, va_addr and mmap_offset). Kinds as
 * KFD's: VRAM and GTT (memory of the GPU, mapped through the render node at mmap_offset,
 * exported as dma-bufs), USERPTR (the caller's own memory at user_addr), DOORBELL (the
 * process's doorbell slice, KFDEMU_DOORBELL_SLICE bytes) and MMIO_REMAP (one page); the
 * last two are mapped through /dev/kfd at mmap_offset and have no dma-buf.
 */
struct kfdemu_bo_info {
	uint64_t handle;      /* (gpu_id << 32) | per-process id, as KFD builds it */
	uint64_t va_addr;     /* GPU virtual address; 0 in a request: the emulator picks */
	uint64_t size;	      /* bytes, a multiple of the page size */
	uint64_t mmap_offset; /* reply: where to map it (render node or /dev/kfd) */
	uint64_t user_addr;   /* USERPTR: the CPU address of the caller's memory */
	uint32_t gpu_id;
	uint32_t alloc_flags; /* KFD_IOC_ALLOC_MEM_FLAGS_* */
};

/* FREE_BO and EXPORT_BO request; EXPORT_BO replies with no payload and one fd. */
struct kfdemu_bo_ref {
	uint64_t handle;
};

/* GET_MMAP request: the reply carries one fd to mmap() at the offsets the emulator gave. */
enum kfdemu_mmap_kind {
	KFDEMU_MMAP_RENDER = 0, /* on a render node connection: its GPU's BO space */
	KFDEMU_MMAP_KFD = 1,	/* on a KFD connection: the process's /dev/kfd space */
};

struct kfdemu_get_mmap {
	uint32_t kind;
	uint32_t pad;
};

enum kfdemu_kernel_op {
	KFDEMU_KERNEL_FILL = 1, /* every u32 of the range := arg */
	KFDEMU_KERNEL_ADD,	/* every u32 of the range += arg (wrapping) */
	KFDEMU_KERNEL_CHECKSUM, /* result := kfdemu_checksum() of the range */
	KFDEMU_KERNEL_NOP,	/* queues only: nothing, then completion */
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
 * A user-mode queue: a ring of 64-byte packets in the process's memory, a read pointer
 * the emulator writes and a write pointer the process writes (both u64 packet counts, in
 * BOs of the queue's GPU). The process writes packets, then the write pointer, then the
 * new write pointer to its doorbell (through its /dev/kfd mapping); the emulator's
 * engine then runs the packets in order, in 1 MiB steps, while the process is not
 * evicted (PROCESS_INFO .. UNPAUSE, RESTORE .. RESUME). Evicted mid-packet, a queue keeps
 * its progress in its MQD and control stack, which CHECKPOINT saves.
 */
#define KFDEMU_PACKET_SIZE 64
#define KFDEMU_PACKET_SIGNAL_EVENT 0x1 /* flags: signal event_id when the packet is done */

struct kfdemu_packet {
	uint16_t op;	/* enum kfdemu_kernel_op */
	uint16_t flags; /* KFDEMU_PACKET_* */
	uint32_t arg;
	uint64_t va;	 /* GPU VA of the range: a BO of the queue's GPU, or an SVM range */
	uint64_t length; /* bytes, multiple of 8 */
	uint64_t completion_va; /* 0, or the GPU VA of a u64 := completion_value when done */
	uint64_t completion_value;
	uint64_t result_va; /* CHECKSUM: the GPU VA of a u64 := the checksum */
	uint32_t event_id;
	uint32_t pad;
	uint64_t reserved;
};

struct kfdemu_create_queue {
	uint32_t gpu_id;
	uint32_t type; /* KFD_IOC_QUEUE_TYPE_COMPUTE or _COMPUTE_AQL */
	uint64_t ring_va;
	uint64_t ring_size; /* bytes, a power of two, >= 4 packets */
	uint64_t rptr_va;
	uint64_t wptr_va;
	uint64_t eop_va; /* end-of-pipe buffer, as KFD asks for one */
	uint64_t eop_size;
	uint64_t ctx_save_va; /* context save area: the control stack is saved there */
	uint64_t ctx_save_size;
	uint32_t priority;
	uint32_t percent;
};

struct kfdemu_queue_reply {
	uint32_t queue_id;
	uint32_t pad;
	uint64_t doorbell_offset; /* byte offset of its doorbell in the GPU's doorbell slice */
};

struct kfdemu_queue_ref {
	uint32_t queue_id;
	uint32_t pad;
};

/* CREATE_EVENT request (type: KFD_IOC_EVENT_*) and reply. */
struct kfdemu_create_event {
	uint32_t type;
	uint32_t auto_reset;
};

struct kfdemu_event_reply {
	uint32_t event_id;
	uint32_t slot_index;	    /* signal and debug events: its slot in the events page */
	uint64_t page_mmap_offset; /* signal and debug events: the events page in /dev/kfd */
};

/* DESTROY_EVENT, SET_EVENT, RESET_EVENT request. */
struct kfdemu_event_ref {
	uint32_t event_id;
	uint32_t pad;
};

/* WAIT_EVENTS request: this header, then nr_events u32 ids. */
#define KFDEMU_MAX_WAIT_EVENTS 64

struct kfdemu_wait_events {
	uint32_t nr_events;
	uint32_t wait_for_all;
	uint32_t timeout_ms;
	uint32_t pad;
};

enum kfdemu_wait_result {
	KFDEMU_WAIT_COMPLETE = 0,
	KFDEMU_WAIT_TIMEOUT = 1,
};

struct kfdemu_wait_reply {
	uint32_t result; /* enum kfdemu_wait_result */
	uint32_t pad;
};

/*
 * SVM request: this header, then nattr struct kfd_ioctl_svm_attribute. The reply: the
 * header, then the attributes (GET_ATTR: their values; SET_ATTR: as sent).
 */
#define KFDEMU_MAX_SVM_ATTRS 64

struct kfdemu_svm {
	uint64_t start;
	uint64_t size;
	uint32_t op; /* KFD_IOCTL_SVM_OP_* */
	uint32_t nattr;
};

/* COPY request, with two fds: the BO's dma-buf, then the file. */
enum kfdemu_copy_dir {
	KFDEMU_COPY_TO_BO = 0,
	KFDEMU_COPY_FROM_BO = 1,
};

struct kfdemu_copy {
	uint32_t dir;
	uint32_t pad;
	uint64_t bo_offset;
	uint64_t file_offset;
	uint64_t length;
};

/* NEXT_DATA request (with the dma-buf) and reply; -ENXIO when nothing follows. */
struct kfdemu_next_data {
	uint64_t from;
	uint64_t start; /* reply */
	uint64_t end;	/* reply */
};

/* IDENTIFY reply for the fd sent with the request. */
enum kfdemu_fd_kind {
	KFDEMU_FD_KFD = 0,
	KFDEMU_FD_RENDER = 1,
	KFDEMU_FD_DMABUF = 2,
};

struct kfdemu_identity {
	uint32_t kind; /* enum kfdemu_fd_kind */
	uint32_t pid;  /* the process behind it */
	uint32_t gpu_id;
	uint32_t render_minor;
	uint64_t sock_ino;
};

struct kfdemu_stats {
	uint32_t nr_processes; /* live processes, restored-not-resumed ones included */
	uint32_t nr_bos;
	uint32_t nr_queues;
	uint32_t nr_events;
	uint32_t nr_svm_ranges;
	uint32_t nr_connections;
	uint64_t vram_used;
};

/*
 * CRIU_OP request payload: struct kfd_ioctl_criu_args (its pointer fields are ignored),
 * then for RESTORE: num_devices device buckets, num_bos BO buckets, priv_data_size bytes,
 * and as fds the render nodes the device buckets' drm_fd name (a device bucket's drm_fd
 * is an index into them, or KFDEMU_INVALID_FD when the caller's fd was not open).
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
