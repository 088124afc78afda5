/*
 * BPF maps (anon_inode:bpf-map, file_entry.bpf): the map's attributes, from the fd's fdinfo
 * and BPF_OBJ_GET_INFO_BY_FD, and its elements, read through criu's copy of the fd into
 * bpfmap-data.img once per map. Restored as a new map with the same attributes and name,
 * refilled, then frozen if it was. Hash, array, LRU and LPM trie maps, per-CPU ones too:
 * the other types hold what an element copy cannot bring back (programs, other maps,
 * sockets, ...) or give no way to read their elements but by taking them (queues, stacks).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "log.h"
#include "proc_parse.h"

#include "bpfmap-data.pb-c.h"

#define BPFMAP_LINK "anon_inode:bpf-map"

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

/* The kernel's names (BPF_MAP_TYPE_*), for messages. */
#define MAP_TYPE_NAME(t) [BPF_MAP_TYPE_##t] = #t
static const char *const map_type_names[] = {
	MAP_TYPE_NAME(HASH),
	MAP_TYPE_NAME(ARRAY),
	MAP_TYPE_NAME(PROG_ARRAY),
	MAP_TYPE_NAME(PERF_EVENT_ARRAY),
	MAP_TYPE_NAME(PERCPU_HASH),
	MAP_TYPE_NAME(PERCPU_ARRAY),
	MAP_TYPE_NAME(STACK_TRACE),
	MAP_TYPE_NAME(CGROUP_ARRAY),
	MAP_TYPE_NAME(LRU_HASH),
	MAP_TYPE_NAME(LRU_PERCPU_HASH),
	MAP_TYPE_NAME(LPM_TRIE),
	MAP_TYPE_NAME(ARRAY_OF_MAPS),
	MAP_TYPE_NAME(HASH_OF_MAPS),
	MAP_TYPE_NAME(DEVMAP),
	MAP_TYPE_NAME(SOCKMAP),
	MAP_TYPE_NAME(CPUMAP),
	MAP_TYPE_NAME(XSKMAP),
	MAP_TYPE_NAME(SOCKHASH),
	MAP_TYPE_NAME(CGROUP_STORAGE),
	MAP_TYPE_NAME(REUSEPORT_SOCKARRAY),
	MAP_TYPE_NAME(PERCPU_CGROUP_STORAGE),
	MAP_TYPE_NAME(QUEUE),
	MAP_TYPE_NAME(STACK),
	MAP_TYPE_NAME(SK_STORAGE),
	MAP_TYPE_NAME(DEVMAP_HASH),
	MAP_TYPE_NAME(STRUCT_OPS),
	MAP_TYPE_NAME(RINGBUF),
	MAP_TYPE_NAME(INODE_STORAGE),
	MAP_TYPE_NAME(TASK_STORAGE),
	MAP_TYPE_NAME(BLOOM_FILTER),
};

static const char *map_type_name(uint32_t type, char *buf, size_t len)
{
	if (type < sizeof(map_type_names) / sizeof(map_type_names[0]) && map_type_names[type])
		return map_type_names[type];
	snprintf(buf, len, "of type %u", type);
	return buf;
}

/*
 * The types whose whole state is their elements as user space reads and writes them, a
 * value per key, every key reached by BPF_MAP_GET_NEXT_KEY (an array's every index).
 */
static bool map_type_supported(uint32_t type)
{
	switch (type) {
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPF_MAP_TYPE_LRU_HASH:
	case BPF_MAP_TYPE_LRU_PERCPU_HASH:
	case BPF_MAP_TYPE_LPM_TRIE:
		return true;
	}
	return false;
}

static bool map_type_percpu(uint32_t type)
{
	return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static bool map_type_lru(uint32_t type)
{
	return type == BPF_MAP_TYPE_LRU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

/* The kernel's num_possible_cpus(): the CPUs /sys/devices/system/cpu/possible lists. */
static int possible_cpus(void)
{
	static int nr_cpus;
	unsigned int first, last;
	char buf[256], *item;
	ssize_t len;
	int fd, nr = 0;

	if (nr_cpus)
		return nr_cpus;
	fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("cannot open /sys/devices/system/cpu/possible");
		return -errno;
	}
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[len > 0 ? len : 0] = '\0';
	/* "0-3", "0,2-5", ... */
	for (item = strtok(buf, ",\n"); item; item = strtok(NULL, ",\n")) {
		int got = sscanf(item, "%u-%u", &first, &last);

		if (got == 1)
			last = first;
		if (got < 1 || last < first) {
			pr_err("/sys/devices/system/cpu/possible: cannot read \"%s\"\n", item);
			return -EINVAL;
		}
		nr += last - first + 1;
	}
	if (!nr) {
		pr_err("/sys/devices/system/cpu/possible lists no CPU\n");
		return -EINVAL;
	}
	nr_cpus = nr;
	return nr_cpus;
}

/*
 * The bytes of one element's value as user space reads and writes it: a per-CPU map's
 * holds a value for each possible CPU, each rounded up to 8 bytes (kernel/bpf/syscall.c).
 * The length, or -errno.
 */
static ssize_t map_value_len(const BpfmapFileEntry *bfe)
{
	int nr_cpus;

	if (!map_type_percpu(bfe->map_type))
		return bfe->value_size;
	nr_cpus = possible_cpus();
	if (nr_cpus < 0)
		return nr_cpus;
	return (ssize_t)((bfe->value_size + 7) & ~7u) * nr_cpus;
}

/* BPF_OBJ_GET_INFO_BY_FD of a map: 0 or -errno. */
static int map_info_of(int map_fd, struct bpf_map_info *info)
{
	union bpf_attr attr;

	memset(info, 0, sizeof(*info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = map_fd;
	attr.info.info_len = sizeof(*info);
	attr.info.info = (uintptr_t)info;
	return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) ? -errno : 0;
}

/* The key after key (NULL: the first) into next_key: 0, -ENOENT past the last, or -errno. */
static int map_next_key(int map_fd, const void *key, void *next_key)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map_fd;
	attr.key = (uintptr_t)key;
	attr.next_key = (uintptr_t)next_key;
	return sys_bpf(BPF_MAP_GET_NEXT_KEY, &attr) ? -errno : 0;
}

static bool bpfmap_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, BPFMAP_LINK);
}

/* ---------------------------------------------------------------- dump ---- */

/* The maps whose elements are in bpfmap-data.img: one record per map, not per fd. */
static uint32_t *dumped_map_ids;
static size_t nr_dumped_map_ids;

static bool map_data_dumped(uint32_t map_id)
{
	for (size_t i = 0; i < nr_dumped_map_ids; i++)
		if (dumped_map_ids[i] == map_id)
			return true;
	return false;
}

static int remember_map_data(uint32_t map_id)
{
	uint32_t *grown = realloc(dumped_map_ids, (nr_dumped_map_ids + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("BPF map %u: out of memory\n", map_id);
		return -ENOMEM;
	}
	dumped_map_ids = grown;
	dumped_map_ids[nr_dumped_map_ids++] = map_id;
	return 0;
}

static void bpfmap_dump_fini(void)
{
	free(dumped_map_ids);
	dumped_map_ids = NULL;
	nr_dumped_map_ids = 0;
}

/* What fdinfo shows of a map (kernel/bpf/syscall.c, bpf_map_show_fdinfo()). */
static int read_map_fdinfo(const struct fd_parms *p, BpfmapFileEntry *bfe)
{
	struct proc_fdinfo fi;
	int frozen = 0, ret;

	ret = parse_fd_fdinfo(p->pid, p->fd, &fi);
	if (!ret)
		ret = fdinfo_scan(&fi, "map_type:", 1, "%" SCNu32, &bfe->map_type);
	if (!ret)
		ret = fdinfo_scan(&fi, "key_size:", 1, "%" SCNu32, &bfe->key_size);
	if (!ret)
		ret = fdinfo_scan(&fi, "value_size:", 1, "%" SCNu32, &bfe->value_size);
	if (!ret)
		ret = fdinfo_scan(&fi, "max_entries:", 1, "%" SCNu32, &bfe->max_entries);
	if (!ret)
		ret = fdinfo_scan(&fi, "map_flags:", 1, "%" SCNx32, &bfe->map_flags);
	if (!ret)
		ret = fdinfo_scan(&fi, "map_extra:", 1, "%" SCNx64, &bfe->map_extra);
	if (!ret)
		ret = fdinfo_scan(&fi, "memlock:", 1, "%" SCNu64, &bfe->memlock);
	if (!ret)
		ret = fdinfo_scan(&fi, "map_id:", 1, "%" SCNu32, &bfe->map_id);
	if (!ret)
		ret = fdinfo_scan(&fi, "frozen:", 1, "%d", &frozen);
	bfe->has_map_extra = true;
	bfe->frozen = frozen;
	return ret;
}

/*
 * What a new map cannot be given back: refused with the reason, before anything is
 * written. BTF type information and an offload device are objects of their own, which
 * the images have no room for; a map user space may not read (BPF_F_WRONLY) or write
 * (BPF_F_RDONLY) cannot be copied out or refilled.
 */
static int check_map_dumpable(const struct fd_parms *p, const BpfmapFileEntry *bfe,
			      const struct bpf_map_info *info)
{
	const char *why = NULL;
	char buf[32];

	if (!map_type_supported(bfe->map_type))
		why = "its type is not one this criu dumps (hash, array, LRU and LPM trie maps "
		      "only, per-CPU ones too)";
	else if (info->btf_id)
		why = "it has BTF type information, which this criu does not restore";
	else if (info->ifindex)
		why = "it is offloaded to a device";
	else if (bfe->map_flags & BPF_F_WRONLY)
		why = "user space may not read it (BPF_F_WRONLY)";
	else if (bfe->map_flags & BPF_F_RDONLY)
		why = "user space may not refill it (BPF_F_RDONLY)";
	else if (map_type_lru(bfe->map_type) && (bfe->map_flags & BPF_F_NO_COMMON_LRU))
		why = "its per-CPU LRU lists would evict elements as one task refills it "
		      "(BPF_F_NO_COMMON_LRU)";
	if (!why)
		return 0;
	pr_err("fd %d of task %d: BPF map %u (%s, \"%s\") cannot be dumped: %s\n", p->fd, p->pid,
	       bfe->map_id, map_type_name(bfe->map_type, buf, sizeof(buf)), info->name, why);
	return -ENOTSUP;
}

static int read_map_info(const struct fd_parms *p, int map_fd, struct bpf_map_info *info)
{
	int ret = map_info_of(map_fd, info);

	if (ret)
		pr_err("fd %d of task %d: BPF_OBJ_GET_INFO_BY_FD: %s\n", p->fd, p->pid,
		       strerror(-ret));
	return ret;
}

/* A map's elements as bpfmap-data.img lays them out: all keys, then all values. */
struct map_elements {
	size_t value_len; /* map_value_len() */
	uint32_t count;
	uint32_t room; /* elements keys and values have room for */
	uint8_t *keys;
	uint8_t *values;
};

/*
 * Room for want elements, at most max_entries: doubled as they come (a hash map is often
 * sparse).
 */
static int grow_map_elements(const BpfmapFileEntry *bfe, struct map_elements *el, uint64_t want)
{
	uint64_t room = el->room ? el->room : 64;
	uint8_t *keys, *values;

	if (want > bfe->max_entries)
		want = bfe->max_entries;
	if (want <= el->room)
		return 0;
	while (room < want)
		room *= 2;
	if (room > bfe->max_entries)
		room = bfe->max_entries;
	keys = realloc(el->keys, (size_t)room * bfe->key_size);
	if (keys)
		el->keys = keys;
	values = keys ? realloc(el->values, room * el->value_len) : NULL;
	if (!values) {
		pr_err("BPF map %u: out of memory for %" PRIu64 " elements\n", bfe->map_id, room);
		return -ENOMEM;
	}
	el->values = values;
	el->room = room;
	return 0;
}

/*
 * The key after prev (NULL: the first) into key: 1, or 0 past the last. A map that has
 * more than max_entries keys changed while it was read (the walk restarted): the tree is
 * frozen, but a process outside it may change the map meanwhile.
 */
static int next_map_key(int map_fd, const BpfmapFileEntry *bfe, const struct map_elements *el,
			void *key)
{
	const void *prev = el->count ? el->keys + (size_t)(el->count - 1) * bfe->key_size : NULL;
	int ret = map_next_key(map_fd, prev, key);

	if (ret == -ENOENT)
		return 0;
	if (ret) {
		pr_err("BPF map %u: BPF_MAP_GET_NEXT_KEY: %s\n", bfe->map_id, strerror(-ret));
		return ret;
	}
	if (el->count == bfe->max_entries) {
		pr_err("BPF map %u: more than its %u elements: it changed while it was read\n",
		       bfe->map_id, bfe->max_entries);
		return -EAGAIN;
	}
	return 1;
}

/* Key after key from none (an array's every index), each with its value. */
static int read_map_elements_one_by_one(int map_fd, const BpfmapFileEntry *bfe,
					struct map_elements *el)
{
	uint8_t *next_key = malloc(bfe->key_size ? bfe->key_size : 1);
	union bpf_attr attr;
	int ret;

	if (!next_key) {
		pr_err("BPF map %u: out of memory\n", bfe->map_id);
		return -ENOMEM;
	}
	while ((ret = next_map_key(map_fd, bfe, el, next_key)) > 0) {
		ret = grow_map_elements(bfe, el, (uint64_t)el->count + 1);
		if (ret)
			break;
		memcpy(el->keys + (size_t)el->count * bfe->key_size, next_key, bfe->key_size);
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = map_fd;
		attr.key = (uintptr_t)next_key;
		attr.value = (uintptr_t)(el->values + el->count * el->value_len);
		if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr)) {
			ret = -errno;
			pr_perror("BPF map %u: BPF_MAP_LOOKUP_ELEM of element %u", bfe->map_id,
				  el->count);
			break;
		}
		el->count++;
	}
	free(next_key);
	return ret;
}

/* The kernel's ENOTSUPP: a command the map's type does not have. */
#ifndef ENOTSUPP
#define ENOTSUPP 524
#endif

static bool batch_unsupported(int err)
{
	return err == -ENOTSUPP || err == -EOPNOTSUPP || err == -EINVAL;
}

/* Elements asked of one BPF_MAP_LOOKUP_BATCH at first; doubled when a bucket needs more. */
#define BATCH_ELEMENTS 4096

/*
 * One BPF_MAP_LOOKUP_BATCH after the batch token in (NULL: from the start) into the room
 * left in el, the next token into out: 0, -ENOENT after the last element, or -errno.
 * el->count grows by what it read either way.
 */
static int lookup_batch(int map_fd, const BpfmapFileEntry *bfe, struct map_elements *el,
			const void *in, void *out)
{
	union bpf_attr attr;
	int ret;

	memset(&attr, 0, sizeof(attr));
	attr.batch.in_batch = (uintptr_t)in;
	attr.batch.out_batch = (uintptr_t)out;
	attr.batch.keys = (uintptr_t)(el->keys + (size_t)el->count * bfe->key_size);
	attr.batch.values = (uintptr_t)(el->values + el->count * el->value_len);
	attr.batch.count = el->room - el->count;
	attr.batch.map_fd = map_fd;
	ret = sys_bpf(BPF_MAP_LOOKUP_BATCH, &attr) ? -errno : 0;
	el->count += attr.batch.count;
	return ret;
}

/*
 * Whole buckets (hash maps) or runs of indices (arrays) at a time, in the order
 * BPF_MAP_GET_NEXT_KEY walks them: on a map of a million elements a few hundred system
 * calls instead of two million. The batch token is a bucket number (hash maps) or a key
 * (arrays). 1 when the kernel has no batch lookup for the map, 0, or -errno.
 */
static int read_map_elements_batched(int map_fd, const BpfmapFileEntry *bfe,
				     struct map_elements *el)
{
	size_t token_len = bfe->key_size > 8 ? bfe->key_size : 8;
	uint8_t *tokens = malloc(2 * token_len), *in = NULL, *out = tokens;
	uint64_t batch = BATCH_ELEMENTS;
	int ret;

	if (!tokens) {
		pr_err("BPF map %u: out of memory\n", bfe->map_id);
		return -ENOMEM;
	}
	for (;;) {
		ret = grow_map_elements(bfe, el, el->count + batch);
		if (ret)
			break;
		if (el->count == el->room) {
			/* max_entries read: one more key means the map changed meanwhile. */
			uint8_t *key = malloc(bfe->key_size);

			ret = key ? next_map_key(map_fd, bfe, el, key) : -ENOMEM;
			free(key);
			break;
		}
		ret = lookup_batch(map_fd, bfe, el, in, out);
		if (ret == -ENOENT) {
			ret = 0;
			break;
		}
		if (ret == -ENOSPC && el->room < bfe->max_entries) {
			batch *= 2; /* one bucket holds more than the room left */
			continue;
		}
		if (ret && !in && !el->count && batch_unsupported(ret)) {
			ret = 1;
			break;
		}
		if (ret) {
			pr_err("BPF map %u: BPF_MAP_LOOKUP_BATCH after %u elements: %s\n",
			       bfe->map_id, el->count, strerror(-ret));
			break;
		}
		in = out;
		out = out == tokens ? tokens + token_len : tokens;
	}
	free(tokens);
	return ret;
}

static int read_map_elements(int map_fd, const BpfmapFileEntry *bfe, struct map_elements *el)
{
	int ret = read_map_elements_batched(map_fd, bfe, el);

	if (ret != 1)
		return ret;
	pr_debug("BPF map %u: no batch lookup, one element at a time\n", bfe->map_id);
	return read_map_elements_one_by_one(map_fd, bfe, el);
}

static int write_map_elements(const BpfmapFileEntry *bfe, const struct map_elements *el)
{
	BpfmapDataEntry bde = BPFMAP_DATA_ENTRY__INIT;
	uint64_t keys_bytes = (uint64_t)el->count * bfe->key_size;
	uint64_t values_bytes = (uint64_t)el->count * el->value_len;
	struct cr_img *img;
	int ret;

	if (keys_bytes > UINT32_MAX || values_bytes > UINT32_MAX) {
		pr_err("BPF map %u: %u elements of %u + %zu bytes do not fit the image's sizes\n",
		       bfe->map_id, el->count, bfe->key_size, el->value_len);
		return -EFBIG;
	}
	img = files_side_image(CR_IMG_BPFMAP_DATA);
	if (!img)
		return -EIO;
	bde.map_id = bfe->map_id;
	bde.count = el->count;
	bde.keys_bytes = keys_bytes;
	bde.values_bytes = values_bytes;
	ret = pb_write_one(img, &bde);
	if (!ret)
		ret = img_write_raw(img, el->keys, keys_bytes);
	if (!ret)
		ret = img_write_raw(img, el->values, values_bytes);
	return ret;
}

/*
 * Through a description that may read the map: the task's own unless it is write-only
 * (then one more, read-only, by the map's id, which takes CAP_SYS_ADMIN as criu has).
 */
static int readable_map_fd(const struct fd_parms *p, int map_fd, uint32_t map_id)
{
	union bpf_attr attr;
	int fd;

	if ((p->flags & O_ACCMODE) != O_WRONLY)
		return dup(map_fd);
	memset(&attr, 0, sizeof(attr));
	attr.map_id = map_id;
	attr.open_flags = BPF_F_RDONLY;
	fd = sys_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
	if (fd < 0)
		pr_perror("BPF map %u: cannot open it for reading by its id", map_id);
	return fd < 0 ? -errno : fd;
}

static int dump_map_elements(const struct fd_parms *p, int map_fd, const BpfmapFileEntry *bfe)
{
	struct map_elements el = {0};
	ssize_t value_len;
	int read_fd, ret;

	if (map_data_dumped(bfe->map_id))
		return 0;
	value_len = map_value_len(bfe);
	if (value_len < 0)
		return value_len;
	el.value_len = value_len;
	read_fd = readable_map_fd(p, map_fd, bfe->map_id);
	if (read_fd < 0)
		return read_fd;
	ret = read_map_elements(read_fd, bfe, &el);
	close(read_fd);
	if (!ret)
		ret = write_map_elements(bfe, &el);
	if (!ret)
		ret = remember_map_data(bfe->map_id);
	if (!ret)
		pr_debug("BPF map %u: %u elements dumped\n", bfe->map_id, el.count);
	free(el.keys);
	free(el.values);
	return ret;
}

static int bpfmap_dump(const struct fd_parms *p, uint32_t id)
{
	BpfmapFileEntry bfe = BPFMAP_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	struct bpf_map_info info;
	int map_fd, ret;

	ret = read_map_fdinfo(p, &bfe);
	if (ret)
		return ret;
	map_fd = grab_task_fd(p);
	if (map_fd < 0)
		return map_fd;
	ret = read_map_info(p, map_fd, &info);
	if (!ret)
		ret = check_map_dumpable(p, &bfe, &info);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (!ret)
		ret = dump_map_elements(p, map_fd, &bfe);
	close(map_fd);
	if (ret)
		return ret;
	bfe.id = id;
	bfe.flags = p->flags;
	bfe.pos = p->pos;
	bfe.fown = &fown;
	bfe.map_name = info.name;
	bfe.ifindex = info.ifindex;
	fe.type = FD_TYPES__BPFMAP;
	fe.id = id;
	fe.bpf = &bfe;
	pr_debug("fd %d of task %d: BPF map %u \"%s\", type %u, %u/%u bytes, %u entries%s\n", p->fd,
		 p->pid, bfe.map_id, bfe.map_name, bfe.map_type, bfe.key_size, bfe.value_size,
		 bfe.max_entries, bfe.frozen ? ", frozen" : "");
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/*
 * One map of the images, with its elements. Collected in the main process before forking,
 * so each restored task has its own copy: restored_id is the map this task made.
 */
struct bpfmap_obj {
	uint32_t map_id; /* at dump */
	uint32_t count;
	uint8_t *keys;
	uint8_t *values;
	uint32_t keys_bytes, values_bytes;
	size_t value_len;     /* map_value_len(), set by collect */
	uint32_t restored_id; /* the new map's id, once made in this task; 0: not yet */
};

static struct bpfmap_obj *map_objs;
static size_t nr_map_objs;

static struct bpfmap_obj *find_map_obj(uint32_t map_id)
{
	for (size_t i = 0; i < nr_map_objs; i++)
		if (map_objs[i].map_id == map_id)
			return &map_objs[i];
	return NULL;
}

static int check_map_data(struct cr_img *img, const BpfmapDataEntry *bde)
{
	off_t left = img_bytes_left(img);

	if (left < 0 || (uint64_t)left < (uint64_t)bde->keys_bytes + bde->values_bytes) {
		pr_err("%s: BPF map %u claims %u + %u bytes of elements, %lld are left in the "
		       "image\n",
		       img->name, bde->map_id, bde->keys_bytes, bde->values_bytes, (long long)left);
		return -EINVAL;
	}
	return 0;
}

/*
 * A map's first record is its elements. A dumper may write one per description of the map
 * (this criu writes one per map): a later record of the same map is skipped.
 */
static int read_one_map_data(struct cr_img *img, const BpfmapDataEntry *bde)
{
	struct bpfmap_obj *grown, *obj;
	int ret = check_map_data(img, bde);

	if (ret)
		return ret;
	if (find_map_obj(bde->map_id)) {
		pr_debug("%s: BPF map %u: another record of its elements, skipped\n", img->name,
			 bde->map_id);
		/* check_map_data() found them in the image. */
		if (lseek(img->fd, (off_t)bde->keys_bytes + bde->values_bytes, SEEK_CUR) < 0) {
			pr_perror("%s: cannot skip BPF map %u's record", img->name, bde->map_id);
			return -errno;
		}
		return 0;
	}
	grown = realloc(map_objs, (nr_map_objs + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("%s: out of memory\n", img->name);
		return -ENOMEM;
	}
	map_objs = grown;
	obj = &map_objs[nr_map_objs];
	*obj = (struct bpfmap_obj){.map_id = bde->map_id,
				   .count = bde->count,
				   .keys_bytes = bde->keys_bytes,
				   .values_bytes = bde->values_bytes};
	obj->keys = malloc(bde->keys_bytes ? bde->keys_bytes : 1);
	obj->values = malloc(bde->values_bytes ? bde->values_bytes : 1);
	if (!obj->keys || !obj->values) {
		pr_err("%s: out of memory for BPF map %u\n", img->name, bde->map_id);
		ret = -ENOMEM;
	}
	if (!ret)
		ret = img_read_raw(img, obj->keys, bde->keys_bytes);
	if (!ret)
		ret = img_read_raw(img, obj->values, bde->values_bytes);
	if (ret) {
		free(obj->keys);
		free(obj->values);
		return ret;
	}
	nr_map_objs++;
	return 0;
}

/* The image exists only when some map was dumped. */
static int bpfmap_collect_images(void)
{
	BpfmapDataEntry *bde;
	struct cr_img *img;
	int ret;

	if (!img_exists(CR_IMG_BPFMAP_DATA, 0))
		return 0;
	img = open_image(CR_IMG_BPFMAP_DATA, O_RDONLY, 0);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, (void **)&bde)) > 0) {
		ret = read_one_map_data(img, bde);
		pb_free(img, bde);
		if (ret)
			break;
	}
	close_image(img);
	return ret;
}

static void bpfmap_collect_fini(void)
{
	for (size_t i = 0; i < nr_map_objs; i++) {
		free(map_objs[i].keys);
		free(map_objs[i].values);
	}
	free(map_objs);
	map_objs = NULL;
	nr_map_objs = 0;
}

/* What an entry decodes to: its map, by index in map_objs (fixed once collected). */
struct bpfmap_file {
	size_t obj;
};

/*
 * The elements must be count whole keys and values of the map's sizes (value_len:
 * map_value_len() of the map).
 */
static int check_map_entry(const struct file_desc *d, const BpfmapFileEntry *bfe,
			   const struct bpfmap_obj *obj, ssize_t value_len)
{
	char buf[32];

	if (!map_type_supported(bfe->map_type)) {
		pr_err("files.img: BPF map file %u is %s, which this criu does not restore\n",
		       d->id, map_type_name(bfe->map_type, buf, sizeof(buf)));
		return -ENOTSUP;
	}
	if (!obj) {
		pr_err("files.img: BPF map file %u: map %u has no elements in bpfmap-data.img\n",
		       d->id, bfe->map_id);
		return -EINVAL;
	}
	if (value_len < 0)
		return value_len;
	if ((uint64_t)obj->count * bfe->key_size != obj->keys_bytes ||
	    (uint64_t)obj->count * value_len != obj->values_bytes ||
	    obj->count > bfe->max_entries) {
		pr_err("bpfmap-data.img: BPF map %u: %u elements in %u + %u bytes do not fit its "
		       "%u-byte keys, %zd-byte values%s and %u entries\n",
		       bfe->map_id, obj->count, obj->keys_bytes, obj->values_bytes, bfe->key_size,
		       value_len,
		       map_type_percpu(bfe->map_type) ? " (one for each CPU this machine has)" : "",
		       bfe->max_entries);
		return -EINVAL;
	}
	if (strlen(bfe->map_name) >= BPF_OBJ_NAME_LEN) {
		pr_err("files.img: BPF map file %u: name \"%s\" is longer than %d characters\n",
		       d->id, bfe->map_name, BPF_OBJ_NAME_LEN - 1);
		return -EINVAL;
	}
	if (bfe->ifindex) {
		pr_err("files.img: BPF map file %u: offloaded to device %u, which this criu does "
		       "not restore\n",
		       d->id, bfe->ifindex);
		return -ENOTSUP;
	}
	return 0;
}

static int bpfmap_collect(struct file_desc *d)
{
	const BpfmapFileEntry *bfe = d->fe->bpf;
	struct bpfmap_file *file;
	struct bpfmap_obj *obj;
	ssize_t value_len;
	int ret;

	if (!bfe || bfe->id != d->id) {
		pr_err("files.img: BPF map file %u has no BPF map entry of its own\n", d->id);
		return -EINVAL;
	}
	obj = find_map_obj(bfe->map_id);
	value_len = map_value_len(bfe);
	ret = check_map_entry(d, bfe, obj, value_len);
	if (ret)
		return ret;
	file = malloc(sizeof(*file));
	if (!file) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	file->obj = obj - map_objs;
	obj->value_len = value_len;
	d->kind = file;
	return collect_owner(d, bfe->fown);
}

static int create_map(const struct file_desc *d, const BpfmapFileEntry *bfe)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = bfe->map_type;
	attr.key_size = bfe->key_size;
	attr.value_size = bfe->value_size;
	attr.max_entries = bfe->max_entries;
	/* BPF_F_NUMA_NODE's node is nowhere to read at dump: node 0. */
	attr.map_flags = bfe->map_flags;
	attr.map_extra = bfe->map_extra;
	strncpy(attr.map_name, bfe->map_name, sizeof(attr.map_name) - 1);
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0) {
		pr_perror("BPF map file %u: cannot create map \"%s\" (type %u, flags %#x)", d->id,
			  bfe->map_name, bfe->map_type, bfe->map_flags);
		return -errno;
	}
	return fd;
}

static int fill_map_one_by_one(const struct file_desc *d, int fd, const BpfmapFileEntry *bfe,
			       const struct bpfmap_obj *obj)
{
	union bpf_attr attr;

	for (uint32_t i = 0; i < obj->count; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = fd;
		attr.key = (uintptr_t)(obj->keys + (size_t)i * bfe->key_size);
		attr.value = (uintptr_t)(obj->values + i * obj->value_len);
		attr.flags = BPF_ANY;
		if (sys_bpf(BPF_MAP_UPDATE_ELEM, &attr)) {
			pr_perror("BPF map file %u: cannot restore element %u of %u", d->id, i,
				  obj->count);
			return -errno;
		}
	}
	return 0;
}

/*
 * BPF_MAP_UPDATE_BATCH, which updates element after element until one fails and says how
 * many it did. 1 when the kernel has no batch update for the map, 0, or -errno.
 */
static int fill_map_batched(const struct file_desc *d, int fd, const BpfmapFileEntry *bfe,
			    const struct bpfmap_obj *obj)
{
	uint32_t done = 0;
	union bpf_attr attr;
	int ret;

	while (done < obj->count) {
		memset(&attr, 0, sizeof(attr));
		attr.batch.keys = (uintptr_t)(obj->keys + (size_t)done * bfe->key_size);
		attr.batch.values = (uintptr_t)(obj->values + done * obj->value_len);
		attr.batch.count = obj->count - done;
		attr.batch.map_fd = fd;
		attr.batch.elem_flags = BPF_ANY;
		ret = sys_bpf(BPF_MAP_UPDATE_BATCH, &attr) ? -errno : 0;
		if (ret && !done && !attr.batch.count && batch_unsupported(ret))
			return 1;
		done += attr.batch.count;
		if (ret) {
			pr_err("BPF map file %u: cannot restore element %u of %u: %s\n", d->id,
			       done, obj->count, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int fill_map(const struct file_desc *d, int fd, const BpfmapFileEntry *bfe,
		    const struct bpfmap_obj *obj)
{
	int ret = fill_map_batched(d, fd, bfe, obj);

	if (ret != 1)
		return ret;
	pr_debug("BPF map file %u: no batch update, one element at a time\n", d->id);
	return fill_map_one_by_one(d, fd, bfe, obj);
}

/*
 * An LRU map keeps its free elements on per-CPU lists: an update on a CPU whose list is
 * empty takes one from another CPU's list, or evicts an element held there when that list
 * has no free one (kernel/bpf/bpf_lru_list.c). A task moved between CPUs while it refills
 * the map could so lose elements; on one CPU it does not. The task's affinity is given
 * back after. The kernel still evicts when it hands the CPU its last free elements and they
 * are fewer than 128 (it makes up the 128 by evicting): a map holding more elements than
 * the 128s its max_entries gives whole cannot come back whole, and the restore says so.
 */
static int pin_to_one_cpu(const struct file_desc *d, cpu_set_t *was)
{
	int cpu = sched_getcpu();
	cpu_set_t one;

	if (cpu < 0 || sched_getaffinity(0, sizeof(*was), was)) {
		pr_perror("BPF map file %u: cannot read the task's CPU and affinity", d->id);
		return -errno;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		pr_perror("BPF map file %u: cannot keep the task on CPU %d", d->id, cpu);
		return -errno;
	}
	return 0;
}

static int unpin(const struct file_desc *d, const cpu_set_t *was)
{
	if (!sched_setaffinity(0, sizeof(*was), was))
		return 0;
	pr_perror("BPF map file %u: cannot give the task its CPU affinity back", d->id);
	return -errno;
}

/* An LRU map holds every element put back: none was evicted meanwhile. */
static int check_nothing_evicted(const struct file_desc *d, int fd, const BpfmapFileEntry *bfe,
				 const struct bpfmap_obj *obj)
{
	uint8_t *key = malloc(bfe->key_size * 2), *next = key + bfe->key_size;
	uint32_t count = 0;
	int ret;

	if (!key) {
		pr_err("BPF map file %u: out of memory\n", d->id);
		return -ENOMEM;
	}
	for (ret = map_next_key(fd, NULL, next); !ret && count <= obj->count;
	     ret = map_next_key(fd, key, next)) {
		memcpy(key, next, bfe->key_size);
		count++;
	}
	free(key);
	if (ret && ret != -ENOENT) {
		pr_err("BPF map file %u: BPF_MAP_GET_NEXT_KEY: %s\n", d->id, strerror(-ret));
		return ret;
	}
	if (count == obj->count)
		return 0;
	pr_err("BPF map file %u: %u elements restored, the LRU map holds %u: the kernel evicted "
	       "some as they were put back\n",
	       d->id, obj->count, count);
	return -EAGAIN;
}

static int refill_lru_map(const struct file_desc *d, int fd, const BpfmapFileEntry *bfe,
			  const struct bpfmap_obj *obj)
{
	cpu_set_t was;
	int ret = pin_to_one_cpu(d, &was), unpin_ret;

	if (ret)
		return ret;
	ret = fill_map(d, fd, bfe, obj);
	unpin_ret = unpin(d, &was);
	if (!ret)
		ret = unpin_ret;
	if (!ret)
		ret = check_nothing_evicted(d, fd, bfe, obj);
	return ret;
}

static int freeze_map(const struct file_desc *d, int fd)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	if (sys_bpf(BPF_MAP_FREEZE, &attr)) {
		pr_perror("BPF map file %u: BPF_MAP_FREEZE", d->id);
		return -errno;
	}
	return 0;
}

static int map_id_of(const struct file_desc *d, int fd, uint32_t *id)
{
	struct bpf_map_info info;
	int ret = map_info_of(fd, &info);

	if (ret) {
		pr_err("BPF map file %u: BPF_OBJ_GET_INFO_BY_FD: %s\n", d->id, strerror(-ret));
		return ret;
	}
	*id = info.id;
	return 0;
}

/* The map made, filled and frozen as it was; an fd on it (O_RDWR) or -errno. */
static int make_map(const struct file_desc *d, const BpfmapFileEntry *bfe, struct bpfmap_obj *obj)
{
	int fd = create_map(d, bfe), ret;

	if (fd < 0)
		return fd;
	if (map_type_lru(bfe->map_type))
		ret = refill_lru_map(d, fd, bfe, obj);
	else
		ret = fill_map(d, fd, bfe, obj);
	if (!ret && bfe->frozen)
		ret = freeze_map(d, fd);
	if (!ret)
		ret = map_id_of(d, fd, &obj->restored_id);
	if (ret) {
		close(fd);
		return ret;
	}
	pr_debug("BPF map %u: made again as map %u with %u elements\n", obj->map_id,
		 obj->restored_id, obj->count);
	return fd;
}

/* The BPF_F_RDONLY / BPF_F_WRONLY that gives a new description an access mode. */
static uint32_t open_flags_of(uint32_t accmode)
{
	if (accmode == O_RDONLY)
		return BPF_F_RDONLY;
	if (accmode == O_WRONLY)
		return BPF_F_WRONLY;
	return 0;
}

/*
 * A new description of the map this task made for obj, with the access mode of the entry
 * (the one BPF_MAP_CREATE gives is O_RDWR): by the new map's id, which takes CAP_SYS_ADMIN,
 * as the restored task still has.
 */
static int open_made_map(const struct file_desc *d, const struct bpfmap_obj *obj, uint32_t accmode)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_id = obj->restored_id;
	attr.open_flags = open_flags_of(accmode);
	fd = sys_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
	if (fd < 0) {
		pr_perror("BPF map file %u: cannot open map %u again", d->id, obj->restored_id);
		return -errno;
	}
	pr_debug("BPF map file %u: another description of map %u (access mode %u)\n", d->id,
		 obj->restored_id, accmode);
	return fd;
}

/*
 * The first entry of a map this task opens makes it; the others (other descriptions of the
 * same map: object_key has one task open them all) open it again by its new id.
 */
static int bpfmap_open(const struct file_desc *d)
{
	const BpfmapFileEntry *bfe = d->fe->bpf;
	const struct bpfmap_file *file = d->kind;
	struct bpfmap_obj *obj = &map_objs[file->obj];
	uint32_t accmode = bfe->flags & O_ACCMODE;
	int made_fd = -1, fd;

	if (!obj->restored_id) {
		made_fd = make_map(d, bfe, obj);
		if (made_fd < 0)
			return made_fd;
	}
	if (made_fd >= 0 && accmode == O_RDWR) {
		fd = made_fd;
	} else {
		/* made_fd holds the new map until the description of the entry's mode does. */
		fd = open_made_map(d, obj, accmode);
		if (made_fd >= 0)
			close(made_fd);
		if (fd < 0)
			return fd;
	}
	return restore_status_flags(fd, bfe->flags, d);
}

/* Every description of one map reaches one map: made once, by one task. */
static uint64_t bpfmap_object_key(const struct file_desc *d)
{
	const struct bpfmap_file *file = d->kind;

	return file->obj + 1;
}

const struct fdtype_ops bpfmap_fdtype_ops = {
	.type = FD_TYPES__BPFMAP,
	.name = "BPF map",
	.owns = bpfmap_owns,
	.dump = bpfmap_dump,
	.dump_fini = bpfmap_dump_fini,
	.collect_images = bpfmap_collect_images,
	.collect = bpfmap_collect,
	.collect_fini = bpfmap_collect_fini,
	.open = bpfmap_open,
	.inheritable = true,
	.object_key = bpfmap_object_key,
};
