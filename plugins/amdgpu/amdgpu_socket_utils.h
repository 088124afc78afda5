/*
 * The parallel restore protocol between a restored task and criu's BO worker: one framed,
 * versioned command per task (header, one entry per BO, then the BOs' fds as SCM_RIGHTS
 * in bounded batches), over a Unix stream socket. Sizes and offsets are 64-bit; every
 * transfer loops over partial sends/receives; receivers never block without a timeout
 * and an abort fd.
 */
#ifndef AMDGPU_SOCKET_UTILS_H
#define AMDGPU_SOCKET_UTILS_H

#include <stdint.h>

#define AMDGPU_CMD_MAGIC 0x43504741U /* "AGPC" as a little-endian u32 */
#define AMDGPU_CMD_VERSION 1
#define AMDGPU_CMD_RESTORE_BOS 1

/* The kernel refuses more than SCM_MAX_FD (253) fds in one message: stay well below. */
#define AMDGPU_FDS_PER_BATCH 128
/* Bounds a receiver enforces before it allocates anything. */
#define AMDGPU_CMD_MAX_BOS (1U << 20)

struct amdgpu_cmd_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t pid;	  /* the task whose BOs these are */
	uint32_t file_id; /* its KFD file's id: names amdgpu-kfd-ID.img / amdgpu-pages-ID.img */
	uint32_t nr_bos;  /* entries that follow, and fds after them, in the same order */
	uint32_t pad;
	uint64_t payload_size; /* nr_bos * sizeof(struct amdgpu_cmd_bo) */
};

struct amdgpu_cmd_bo {
	uint32_t bo_index; /* in the image's BO list */
	uint32_t gpu_id;   /* user gpu id: the worker runs one thread per GPU */
	uint64_t size;
	uint64_t image_offset; /* where its first extent starts in amdgpu-pages-ID.img */
	uint64_t data_bytes;   /* bytes of contents stored for it */
};

/* Each fd batch travels as this frame with the batch attached. */
struct amdgpu_fd_batch {
	uint32_t magic;
	uint32_t index; /* batch number, from 0 */
	uint32_t nr_fds;
	uint32_t pad;
};

/* Send len bytes, looping over partial sends (MSG_NOSIGNAL: a dead peer is -EPIPE). */
int amdgpu_sk_send_all(int sk, const void *buf, uint64_t len);
/*
 * Receive exactly len bytes. Waits at most timeout_ms for each piece and gives up at once
 * when abort_fd (-1: none) becomes readable. -ECONNRESET when the peer went away.
 */
int amdgpu_sk_recv_all(int sk, void *buf, uint64_t len, int abort_fd, int timeout_ms);

/* A whole command: header, entries, fds. */
int amdgpu_cmd_send(int sk, const struct amdgpu_cmd_hdr *hdr, const struct amdgpu_cmd_bo *bos,
		    const int *fds);
/*
 * Receive and check a whole command. On success *bos and *fds are malloc()ed, hdr->nr_bos
 * long; the caller frees them and closes the fds. On failure nothing is left open.
 */
int amdgpu_cmd_recv(int sk, struct amdgpu_cmd_hdr *hdr, struct amdgpu_cmd_bo **bos, int **fds,
		    int abort_fd, int timeout_ms);

#endif
