/*
 * Image files in CRIU's format: the magic pair, then records of
 * u32 length + packed protobuf message. Readers check every length against what the
 * file really holds, so a truncated or corrupt image is an error, never a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "log.h"

#include "inventory.pb-c.h"
#include "pstree.pb-c.h"
#include "core.pb-c.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"
#include "fdinfo.pb-c.h"
#include "fs.pb-c.h"
#include "ghost-file.pb-c.h"
#include "remap-file-path.pb-c.h"
#include "pipe.pb-c.h"
#include "tty.pb-c.h"
#include "stats.pb-c.h"
#include "ext.pb-c.h"
#include "memfd.pb-c.h"
#include "file-lock.pb-c.h"
#include "sk-packet.pb-c.h"
#include "cpuinfo.pb-c.h"
#include "seccomp.pb-c.h"
#include "utsns.pb-c.h"
#include "mnt.pb-c.h"
#include "binfmt-misc.pb-c.h"
#include "ipc-var.pb-c.h"
#include "ipc-shm.pb-c.h"
#include "ipc-msg.pb-c.h"
#include "ipc-sem.pb-c.h"
#include "timens.pb-c.h"
#include "pidns.pb-c.h"
#include "userns.pb-c.h"
#include "cgroup.pb-c.h"
#include "netdev.pb-c.h"
#include "tcp-stream.pb-c.h"
#include "bpfmap-data.pb-c.h"

#define MAX_RECORD_SIZE (64u << 20) /* no sane record is bigger; a bigger length is corruption */

int images_dir_fd = -1;

#define PB_IMG(nm, file, mg, desc) { nm, file, mg, IMG_COMMON_MAGIC, &desc }
const struct cr_img_desc cr_img_descs[CR_IMG_MAX] = {
	[CR_IMG_INVENTORY] = { "INVENTORY", "inventory.img", INVENTORY_MAGIC, 0,
			       &inventory_entry__descriptor },
	[CR_IMG_PSTREE] = PB_IMG("PSTREE", "pstree.img", PSTREE_MAGIC, pstree_entry__descriptor),
	[CR_IMG_CORE] = PB_IMG("CORE", "core-%lu.img", CORE_MAGIC, core_entry__descriptor),
	[CR_IMG_IDS] = PB_IMG("IDS", "ids-%lu.img", IDS_MAGIC, task_kobj_ids_entry__descriptor),
	[CR_IMG_MM] = PB_IMG("MM", "mm-%lu.img", MM_MAGIC, mm_entry__descriptor),
	[CR_IMG_MM_EXT] = PB_IMG("MM_EXT", "mm-ext-%lu.img", MM_EXT_MAGIC, cr_mm_ext_entry__descriptor),
	[CR_IMG_PAGEMAP] = PB_IMG("PAGEMAP", "pagemap-%lu.img", PAGEMAP_MAGIC, pagemap_entry__descriptor),
	[CR_IMG_SHMEM_PAGEMAP] = PB_IMG("SHMEM_PAGEMAP", "pagemap-shmem-%lu.img", PAGEMAP_MAGIC,
					pagemap_entry__descriptor),
	[CR_IMG_PAGES] = { "PAGES", "pages-%lu.img", 0, 0, NULL },
	[CR_IMG_FILES] = PB_IMG("FILES", "files.img", FILES_MAGIC, file_entry__descriptor),
	[CR_IMG_FDINFO] = PB_IMG("FDINFO", "fdinfo-%lu.img", FDINFO_MAGIC, fdinfo_entry__descriptor),
	[CR_IMG_FS] = PB_IMG("FS", "fs-%lu.img", FS_MAGIC, fs_entry__descriptor),
	[CR_IMG_REMAP_FPATH] = PB_IMG("REMAP_FPATH", "remap-fpath.img", REMAP_FPATH_MAGIC,
				      remap_file_path_entry__descriptor),
	[CR_IMG_GHOST_FILE] = PB_IMG("GHOST_FILE", "ghost-file-%lx.img", GHOST_FILE_MAGIC,
				     ghost_file_entry__descriptor),
	[CR_IMG_PIPES_DATA] = PB_IMG("PIPES_DATA", "pipes-data.img", PIPES_DATA_MAGIC,
				     pipe_data_entry__descriptor),
	[CR_IMG_FIFO_DATA] = PB_IMG("FIFO_DATA", "fifo-data.img", FIFO_DATA_MAGIC,
				    pipe_data_entry__descriptor),
	[CR_IMG_TTY_INFO] = PB_IMG("TTY_INFO", "tty-info.img", TTY_INFO_MAGIC, tty_info_entry__descriptor),
	[CR_IMG_TTY_DATA] = PB_IMG("TTY_DATA", "tty-data.img", TTY_DATA_MAGIC, tty_data_entry__descriptor),
	[CR_IMG_MEMFD_INODE] = PB_IMG("MEMFD_INODE", "memfd.img", MEMFD_INODE_MAGIC,
				      memfd_inode_entry__descriptor),
	[CR_IMG_FILE_LOCKS] = PB_IMG("FILE_LOCKS", "filelocks.img", FILE_LOCKS_MAGIC,
				     file_lock_entry__descriptor),
	[CR_IMG_SK_QUEUES] = PB_IMG("SK_QUEUES", "sk-queues.img", SK_QUEUES_MAGIC,
				    sk_packet_entry__descriptor),
	[CR_IMG_INETSK_EXT] = PB_IMG("INETSK_EXT", "inetsk-ext.img", INETSK_EXT_MAGIC,
				     cr_inet_sk_ext_entry__descriptor),
	[CR_IMG_SECCOMP] = PB_IMG("SECCOMP", "seccomp.img", SECCOMP_MAGIC, seccomp_entry__descriptor),
	[CR_IMG_CPUINFO] = PB_IMG("CPUINFO", "cpuinfo.img", CPUINFO_MAGIC, cpuinfo_entry__descriptor),
	[CR_IMG_UTSNS] = PB_IMG("UTSNS", "utsns-%lu.img", UTSNS_MAGIC, utsns_entry__descriptor),
	[CR_IMG_IPC_VAR] = PB_IMG("IPC_VAR", "ipcns-var-%lu.img", IPC_VAR_MAGIC,
				  ipc_var_entry__descriptor),
	[CR_IMG_IPCNS_SHM] = PB_IMG("IPCNS_SHM", "ipcns-shm-%lu.img", IPCNS_SHM_MAGIC,
				    ipc_shm_entry__descriptor),
	[CR_IMG_IPCNS_MSG] = PB_IMG("IPCNS_MSG", "ipcns-msg-%lu.img", IPCNS_MSG_MAGIC,
				    ipc_msg_entry__descriptor),
	[CR_IMG_IPCNS_SEM] = PB_IMG("IPCNS_SEM", "ipcns-sem-%lu.img", IPCNS_SEM_MAGIC,
				    ipc_sem_entry__descriptor),
	[CR_IMG_IPCNS_MQ] = PB_IMG("IPCNS_MQ", "ipcns-mq-%lu.img", IPCNS_MQ_MAGIC,
				   cr_posix_mq_entry__descriptor),
	[CR_IMG_TIMENS] = PB_IMG("TIMENS", "timens-%lu.img", TIMENS_MAGIC, timens_entry__descriptor),
	[CR_IMG_PIDNS] = PB_IMG("PIDNS", "pidns-%lu.img", PIDNS_MAGIC, pidns_entry__descriptor),
	[CR_IMG_PIDNS_NESTED] = PB_IMG("PIDNS_NESTED", "pidns-nested.img", PIDNS_NESTED_MAGIC,
				       cr_nested_pid_entry__descriptor),
	[CR_IMG_USERNS] = PB_IMG("USERNS", "userns-%lu.img", USERNS_MAGIC, userns_entry__descriptor),
	[CR_IMG_CGROUP] = PB_IMG("CGROUP", "cgroup.img", CGROUP_MAGIC, cgroup_entry__descriptor),
	[CR_IMG_NETNS] = PB_IMG("NETNS", "netns-%lu.img", NETNS_MAGIC, netns_entry__descriptor),
	[CR_IMG_NETDEV] = PB_IMG("NETDEV", "netdev-%lu.img", NETDEV_MAGIC, net_device_entry__descriptor),
	[CR_IMG_IFADDR] = { "IFADDR", "ifaddr-%lu.img", 0, 0, NULL },
	[CR_IMG_ROUTE] = { "ROUTE", "route-%lu.img", 0, 0, NULL },
	[CR_IMG_ROUTE6] = { "ROUTE6", "route6-%lu.img", 0, 0, NULL },
	[CR_IMG_RULE] = { "RULE", "rule-%lu.img", 0, 0, NULL },
	[CR_IMG_IPTABLES] = { "IPTABLES", "iptables-%lu.img", 0, 0, NULL },
	[CR_IMG_IP6TABLES] = { "IP6TABLES", "ip6tables-%lu.img", 0, 0, NULL },
	[CR_IMG_NFTABLES] = { "NFTABLES", "nftables-%lu.img", 0, 0, NULL },
	[CR_IMG_MNTS] = PB_IMG("MNTS", "mountpoints-%lu.img", MNTS_MAGIC, mnt_entry__descriptor),
	[CR_IMG_BINFMT_MISC] = PB_IMG("BINFMT_MISC", "binfmt-misc.img", BINFMT_MISC_MAGIC,
				      binfmt_misc_entry__descriptor),
	[CR_IMG_TMPFS_DEV] = { "TMPFS_DEV", "tmpfs-dev-%lu.tar.gz.img", 0, 0, NULL },
	[CR_IMG_TCP_STREAM] = PB_IMG("TCP_STREAM", "tcp-stream-%lx.img", TCP_STREAM_MAGIC,
				     tcp_stream_entry__descriptor),
	[CR_IMG_BPFMAP_DATA] = PB_IMG("BPFMAP_DATA", "bpfmap-data.img", BPFMAP_DATA_MAGIC,
				      bpfmap_data_entry__descriptor),
	[CR_IMG_STATS_DUMP] = { "STATS", "stats-dump", STATS_MAGIC, IMG_SERVICE_MAGIC,
				&stats_entry__descriptor },
	[CR_IMG_STATS_RESTORE] = { "STATS", "stats-restore", STATS_MAGIC, IMG_SERVICE_MAGIC,
				   &stats_entry__descriptor },
};

void img_name(enum cr_img_type type, unsigned long id, char *buf, size_t len)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(buf, len, cr_img_descs[type].fmt, id);
#pragma GCC diagnostic pop
}

bool img_exists(enum cr_img_type type, unsigned long id)
{
	char name[64];

	img_name(type, id, name, sizeof(name));
	return faccessat(images_dir_fd, name, F_OK, 0) == 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Returns bytes read (less than len only at end of file) or -errno. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

/* The magic pair (or the one magic) that starts an image; raw images have none. */
static size_t img_magics(enum cr_img_type type, uint32_t magics[2])
{
	const struct cr_img_desc *d = &cr_img_descs[type];
	size_t n = 0;

	if (d->first_magic)
		magics[n++] = d->first_magic;
	if (d->magic)
		magics[n++] = d->magic;
	return n;
}

static int write_header(struct cr_img *img)
{
	uint32_t magics[2];
	size_t n = img_magics(img->type, magics);
	int ret = write_full(img->fd, magics, n * sizeof(magics[0]));

	if (ret)
		pr_err("%s: cannot write image magic: %s\n", img->name, strerror(-ret));
	return ret;
}

static int check_header(struct cr_img *img)
{
	uint32_t want[2], got[2];
	size_t n = img_magics(img->type, want);
	ssize_t r = read_full(img->fd, got, n * sizeof(got[0]));

	if (r < 0) {
		pr_err("%s: cannot read image magic: %s\n", img->name, strerror(-r));
		return r;
	}
	if ((size_t)r != n * sizeof(got[0])) {
		pr_err("%s: truncated image (no complete magic)\n", img->name);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i]) {
			pr_err("%s: not a %s image (magic %#x, expected %#x)\n", img->name,
			       cr_img_descs[img->type].name, got[i], want[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * The images directories up a pre-dump chain: level 0 is images_dir_fd, level N+1 what
 * the "parent" link of level N names (relative to level N, as CRIU makes it). Opened
 * afresh each time: a restored task closes the fds criu does not tell it about.
 */
int images_chain_dir(unsigned int level)
{
	unsigned int i;
	int fd;

	if (level >= IMG_CHAIN_MAX) {
		pr_err("images: more than %d parent images directories\n", IMG_CHAIN_MAX - 1);
		return -ELOOP;
	}
	fd = fcntl(images_dir_fd, F_DUPFD_CLOEXEC, 0);
	for (i = 1; i <= level && fd >= 0; i++) {
		int parent_fd = openat(fd, "parent", O_DIRECTORY | O_PATH | O_CLOEXEC);

		close(fd);
		fd = parent_fd;
	}
	if (fd < 0) {
		int err = errno;

		pr_perror("images: cannot open the parent images directory (level %u, \"parent\" link)",
			  i - 1);
		return -err;
	}
	return fd;
}

int images_link_parent(const char *prev_dir)
{
	int fd;

	if (unlinkat(images_dir_fd, "parent", 0) && errno != ENOENT) {
		pr_perror("cannot remove the old parent link");
		return -errno;
	}
	if (symlinkat(prev_dir, images_dir_fd, "parent")) {
		pr_perror("cannot link the parent images %s", prev_dir);
		return -errno;
	}
	fd = images_chain_dir(1);
	if (fd < 0) {
		pr_err("--prev-images-dir %s: not a directory of images (relative to -D)\n",
		       prev_dir);
		return fd;
	}
	close(fd);
	return 0;
}

struct cr_img *open_image(enum cr_img_type type, int flags, unsigned long id)
{
	return open_image_at(images_dir_fd, type, flags, id);
}

struct cr_img *open_image_at(int dir_fd, enum cr_img_type type, int flags, unsigned long id)
{
	struct cr_img *img = calloc(1, sizeof(*img));
	int ret;

	if (!img) {
		pr_err("out of memory\n");
		return NULL;
	}
	img->type = type;
	img_name(type, id, img->name, sizeof(img->name));

	if ((flags & O_ACCMODE) == O_RDONLY)
		img->fd = openat(dir_fd, img->name, O_RDONLY | O_CLOEXEC);
	else
		img->fd = openat(dir_fd, img->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (img->fd < 0) {
		pr_perror("cannot open image %s", img->name);
		free(img);
		return NULL;
	}

	if ((flags & O_ACCMODE) == O_RDONLY) {
		struct stat st;

		if (fstat(img->fd, &st)) {
			pr_perror("cannot stat image %s", img->name);
			close_image(img);
			return NULL;
		}
		img->size = st.st_size;
		ret = check_header(img);
	} else {
		ret = write_header(img);
	}
	if (ret) {
		close_image(img);
		return NULL;
	}
	return img;
}

void close_image(struct cr_img *img)
{
	if (!img)
		return;
	if (img->fd >= 0)
		close(img->fd);
	free(img);
}

int pb_write_one(struct cr_img *img, const void *msg)
{
	const ProtobufCMessage *m = msg;
	size_t len = protobuf_c_message_get_packed_size(m);
	uint32_t len32 = len;
	uint8_t stackbuf[1024], *buf = stackbuf;
	int ret;

	if (len > sizeof(stackbuf)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	protobuf_c_message_pack(m, buf);
	ret = write_full(img->fd, &len32, sizeof(len32));
	if (!ret)
		ret = write_full(img->fd, buf, len);
	if (buf != stackbuf)
		free(buf);
	if (ret)
		pr_err("%s: cannot write record: %s\n", img->name, strerror(-ret));
	return ret;
}

void *pb_unpack_record(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len)
{
	return protobuf_c_message_unpack(desc, NULL, len, buf);
}

off_t img_bytes_left(struct cr_img *img)
{
	off_t pos = lseek(img->fd, 0, SEEK_CUR);

	if (pos < 0)
		return -errno;
	return pos > img->size ? 0 : img->size - pos;
}

static int read_record(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg)
{
	uint32_t len;
	ssize_t n;
	void *buf;

	n = read_full(img->fd, &len, sizeof(len));
	if (n == 0)
		return 0;
	if (n != sizeof(len)) {
		pr_err("%s: truncated record length\n", img->name);
		return n < 0 ? n : -EINVAL;
	}
	if (len > MAX_RECORD_SIZE || (img->size && len > img_bytes_left(img))) {
		pr_err("%s: corrupt or truncated record (length %u, %lld bytes left)\n", img->name, len,
		       (long long)img_bytes_left(img));
		return -EINVAL;
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	n = read_full(img->fd, buf, len);
	if (n != (ssize_t)len) {
		pr_err("%s: truncated record (%zd of %u bytes)\n", img->name, n, len);
		free(buf);
		return n < 0 ? n : -EINVAL;
	}
	*msg = pb_unpack_record(desc, buf, len);
	free(buf);
	if (!*msg) {
		pr_err("%s: corrupt record (cannot decode %s)\n", img->name, desc->name);
		return -EINVAL;
	}
	return 1;
}

int pb_read_one_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg)
{
	return read_record(img, desc, msg);
}

int pb_read_one(struct cr_img *img, void **msg)
{
	return read_record(img, cr_img_descs[img->type].pb_desc, msg);
}

int pb_read_one_required_as(struct cr_img *img, const ProtobufCMessageDescriptor *desc, void **msg)
{
	int ret = read_record(img, desc, msg);

	if (ret == 0) {
		pr_err("%s: image is empty or truncated\n", img->name);
		return -EINVAL;
	}
	return ret < 0 ? ret : 0;
}

int pb_read_one_required(struct cr_img *img, void **msg)
{
	return pb_read_one_required_as(img, cr_img_descs[img->type].pb_desc, msg);
}

int pb_collect_optional_image(enum cr_img_type type, int (*collect)(void *msg, void *arg),
			      void *arg)
{
	struct cr_img *img;
	void *msg;
	int ret;

	if (!img_exists(type, 0))
		return 0;
	img = open_image(type, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, &msg)) > 0) {
		ret = collect(msg, arg);
		if (ret <= 0)
			pb_free(img, msg);
		if (ret < 0)
			break;
	}
	close_image(img);
	return ret;
}

void pb_free(struct cr_img *img, void *msg)
{
	(void)img;
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

int img_write_raw(struct cr_img *img, const void *buf, size_t len)
{
	int ret = write_full(img->fd, buf, len);

	if (ret)
		pr_err("%s: cannot write %zu bytes: %s\n", img->name, len, strerror(-ret));
	return ret;
}

int img_read_raw(struct cr_img *img, void *buf, size_t len)
{
	ssize_t n = read_full(img->fd, buf, len);

	if (n != (ssize_t)len) {
		pr_err("%s: truncated image (%zd of %zu bytes)\n", img->name, n, len);
		return n < 0 ? n : -EINVAL;
	}
	return 0;
}
