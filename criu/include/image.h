/*
 * Image files in CRIU's format: a u32 magic pair (common magic, then the image type's
 * magic; inventory.img has only its own, stats-* the service magic first), then records
 * of u32 length + packed protobuf message. pages-ID.img is raw page data, no header.
 */
#ifndef CR_IMAGE_H
#define CR_IMAGE_H

#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <protobuf-c/protobuf-c.h>

#include "magic.h"

/* inventory_entry.img_version: images whose files start with the common magic. */
#define CRIU_IMAGES_VERSION 2u

enum cr_img_type {
	CR_IMG_INVENTORY,
	CR_IMG_PSTREE,
	CR_IMG_CORE, /* core-TID */
	CR_IMG_IDS, /* ids-PID */
	CR_IMG_MM, /* mm-PID */
	CR_IMG_MM_EXT, /* mm-ext-PID: our own VMA state (ext.proto) */
	CR_IMG_PAGEMAP, /* pagemap-PID */
	CR_IMG_SHMEM_PAGEMAP, /* pagemap-shmem-SHMID */
	CR_IMG_PAGES, /* pages-ID, raw */
	CR_IMG_FILES,
	CR_IMG_FDINFO, /* fdinfo-FILES_ID */
	CR_IMG_FS, /* fs-PID */
	CR_IMG_REMAP_FPATH,
	CR_IMG_GHOST_FILE, /* ghost-file-ID (hex) */
	CR_IMG_PIPES_DATA,
	CR_IMG_FIFO_DATA,
	CR_IMG_TTY_INFO,
	CR_IMG_TTY_DATA,
	CR_IMG_MEMFD_INODE,
	CR_IMG_FILE_LOCKS,
	CR_IMG_SK_QUEUES,
	CR_IMG_INETSK_EXT, /* inetsk-ext: our own, inet sockets' ancillary-data options */
	CR_IMG_SECCOMP,
	CR_IMG_UTSNS, /* utsns-NSID: namespace images are named by namespace id */
	CR_IMG_IPC_VAR, /* ipcns-var-NSID */
	CR_IMG_IPCNS_SHM, /* ipcns-shm-NSID */
	CR_IMG_IPCNS_MSG, /* ipcns-msg-NSID */
	CR_IMG_IPCNS_SEM, /* ipcns-sem-NSID */
	CR_IMG_IPCNS_MQ, /* ipcns-mq-NSID: our own, POSIX message queues (ext.proto) */
	CR_IMG_TIMENS, /* timens-NSID */
	CR_IMG_PIDNS, /* pidns-NSID */
	CR_IMG_PIDNS_NESTED, /* pidns-nested: our own, pids below the root's pid namespace */
	CR_IMG_USERNS, /* userns-NSID */
	CR_IMG_CGROUP,
	CR_IMG_NETNS, /* netns-NSID */
	CR_IMG_NETDEV, /* netdev-NSID */
	CR_IMG_IFADDR, /* ifaddr-NSID, raw: `ip addr save` */
	CR_IMG_ROUTE, /* route-NSID, raw: `ip route save` */
	CR_IMG_ROUTE6, /* route6-NSID, raw: `ip -6 route save` */
	CR_IMG_RULE, /* rule-NSID, raw: `ip rule save` */
	CR_IMG_IPTABLES, /* iptables-NSID, raw: iptables-save */
	CR_IMG_IP6TABLES, /* ip6tables-NSID, raw: ip6tables-save */
	CR_IMG_NFTABLES, /* nftables-NSID, raw: nft list ruleset (net-nft.c) */
	CR_IMG_MNTS, /* mountpoints-NSID */
	CR_IMG_BINFMT_MISC, /* binfmt-misc: the handlers of the tree's own binfmt_misc */
	CR_IMG_TMPFS_DEV, /* tmpfs-dev-SDEV.tar.gz, raw: a tmpfs's files (tar --gzip) */
	CR_IMG_TCP_STREAM, /* tcp-stream-INODE (hex) */
	CR_IMG_BPFMAP_DATA,
	CR_IMG_CPUINFO, /* cpuinfo (cpuinfo.c) */
	CR_IMG_STATS_DUMP,
	CR_IMG_STATS_RESTORE,
	CR_IMG_MAX,
};

struct cr_img_desc {
	const char *name; /* short upper-case name, as logs print it */
	const char *fmt; /* file name, with %lu / %lx for the id if per-object */
	uint32_t magic; /* the type's magic; 0 for raw images */
	uint32_t first_magic; /* IMG_COMMON_MAGIC, IMG_SERVICE_MAGIC, or 0: none */
	const ProtobufCMessageDescriptor *pb_desc; /* record type; NULL for raw images */
};

extern const struct cr_img_desc cr_img_descs[CR_IMG_MAX];

struct cr_img {
	int fd;
	enum cr_img_type type;
	char name[64];
	off_t size; /* when reading: the file's size, to bound every length in it */
};

/* The images directory, opened once by the CLI; all images are opened relative to it. */
extern int images_dir_fd;

/*
 * Open an image for writing (O_WRONLY: created, magic written) or reading (O_RDONLY:
 * magic checked). id fills the per-object part of the name. Returns NULL after logging
 * on error; a missing file when reading is an error too unless the caller checks with
 * img_exists() first.
 */
struct cr_img *open_image(enum cr_img_type type, int flags, unsigned long id);
/* The same, in directory dir_fd (a parent images directory). */
struct cr_img *open_image_at(int dir_fd, enum cr_img_type type, int flags, unsigned long id);

/* Pre-dump chains: the images directory and its parents, at most this many. */
#define IMG_CHAIN_MAX 16
/*
 * The images directory of a chain level: 0 the images directory, N+1 the one the
 * "parent" link of level N points to. A new fd the caller closes, or -errno (logged).
 */
int images_chain_dir(unsigned int level);
/*
 * --prev-images-dir: the "parent" link in the images directory names prev_dir (relative to
 * it, as CRIU makes it), which must be a directory. 0 or -errno (logged).
 */
int images_link_parent(const char *prev_dir);
bool img_exists(enum cr_img_type type, unsigned long id);
void close_image(struct cr_img *img);
/* The file name of an image, for messages. */
void img_name(enum cr_img_type type, unsigned long id, char *buf, size_t len);

/* Write one record. 0 or -errno. */
int pb_write_one(struct cr_img *img, const void *msg);
/*
 * Read one record of the image's type. Returns 1 with *msg set (free it with
 * pb_free()), 0 at a clean end of file, -errno on truncation/corruption (logged).
 */
int pb_read_one(struct cr_img *img, void **msg);
/* The same for a record of another type (pagemap_head, ghost_chunk_entry, ...). */
int pb_read_one_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg);
/* Read exactly one record; end of file is an error. 0 or -errno. */
int pb_read_one_required(struct cr_img *img, void **msg);
int pb_read_one_required_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg);
void pb_free(struct cr_img *img, void *msg);
/*
 * Every record of an image that exists only when the dump had something to put in it
 * (remap-fpath.img, tty-info.img, memfd.img, ...): collect(msg, arg) for each, in order.
 * collect returns 0 when done with msg (it is freed), 1 when it keeps msg (to free with
 * pb_free() later), or -errno to stop. A missing image has no records: 0.
 */
int pb_collect_optional_image(enum cr_img_type type, int (*collect)(void *msg, void *arg),
			      void *arg);
/* Raw bytes after a record (ghost contents, pipe data): full read/write or -errno. */
int img_write_raw(struct cr_img *img, const void *buf, size_t len);
int img_read_raw(struct cr_img *img, void *buf, size_t len);
/* Bytes left to read in an image opened for reading (for bounds checks), or -errno. */
off_t img_bytes_left(struct cr_img *img);

/*
 * Decode a record from a buffer, bounds-checked; the core of every reader (and what the
 * fuzz targets drive). Returns the unpacked message or NULL.
 */
void *pb_unpack_record(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len);

#endif
