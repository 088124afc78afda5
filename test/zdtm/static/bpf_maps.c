/*
 * BPF maps come back with their attributes and every element, byte for byte. ZDTM_BPF_MAP
 * names the type: "hash", "array", "percpu_hash", "percpu_array", "lru_hash",
 * "lru_percpu_hash" or "lpm_trie" (restored), or "queue" or "btf" (a dump that fails on a
 * queue map, or a hash map with BTF type information, which it cannot dump, and leaves both
 * maps of the process as they were).
 *
 * Restored: a frozen map, still refusing updates; a map held by two fds (dup), by a child
 * over fork and by a read-only description of its own (BPF_MAP_GET_FD_BY_ID): one map
 * after restore, an update through one reaching the others; a map of 20000 elements (the
 * dump reads it in several batches). With ZDTM_BPF_MAP_IN_FLIGHT, a map that no fd holds,
 * in flight in a Unix socket's queue (SCM_RIGHTS).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FROZEN_FD    60
#define SHARED_FD    61
#define SHARED_DUP   62
#define SHARED_RO    63
#define REFUSED_FD   64 /* the map the dump refuses */
#define CHILD_RO     65 /* the child's own read-only description of the shared map */
#define FLIGHT_SK    66 /* and 67: the socketpair the in-flight map is queued in */
#define FLIGHT_MAP   68 /* the in-flight map before it is sent */
#define MANY_FD	     69 /* a map of MANY_ENTRIES elements: read and refilled in batches */
#define MANY_ENTRIES 20000
#define VALUE_SIZE   36 /* not a multiple of 8: a per-CPU value is rounded up to 40 per CPU */
#define MAX_CPUS     256
#define VALUE_MAX    (40 * MAX_CPUS)
#define MAX_ENTRIES  64

struct map_kind {
	const char *name;
	uint32_t type;
	uint32_t key_size;
	uint32_t frozen_flags, shared_flags;
	bool array, percpu;
};

/* The kernel refuses BPF_F_NUMA_NODE on per-CPU maps, BPF_F_NO_PREALLOC on arrays and LRUs. */
static const struct map_kind kinds[] = {
	{"hash", BPF_MAP_TYPE_HASH, 12, BPF_F_NO_PREALLOC, 0, false, false},
	{"array", BPF_MAP_TYPE_ARRAY, 4, BPF_F_RDONLY_PROG, BPF_F_NUMA_NODE, true, false},
	{"percpu_hash", BPF_MAP_TYPE_PERCPU_HASH, 12, BPF_F_NO_PREALLOC, 0, false, true},
	{"percpu_array", BPF_MAP_TYPE_PERCPU_ARRAY, 4, BPF_F_RDONLY_PROG, 0, true, true},
	{"lru_hash", BPF_MAP_TYPE_LRU_HASH, 12, 0, BPF_F_NUMA_NODE, false, false},
	{"lru_percpu_hash", BPF_MAP_TYPE_LRU_PERCPU_HASH, 12, 0, 0, false, true},
	/* Keys of up to 64-bit prefixes (struct bpf_lpm_trie_key: prefixlen, then the data). */
	{"lpm_trie", BPF_MAP_TYPE_LPM_TRIE, 12, BPF_F_NO_PREALLOC, BPF_F_NO_PREALLOC, false, false},
};
static const struct map_kind *kind;
/* The bytes of a value as user space reads it: a per-CPU map's holds one for each CPU. */
static size_t value_len = VALUE_SIZE;

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static void map_create_sized_at(uint32_t type, uint32_t key_size, uint32_t max_entries,
				uint32_t flags, const char *name, int at)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = type;
	attr.key_size = key_size;
	attr.value_size = VALUE_SIZE;
	attr.max_entries = max_entries;
	attr.map_flags = flags;
	strncpy(attr.map_name, name, sizeof(attr.map_name) - 1);
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("BPF_MAP_CREATE");
	close(fd);
}

static void map_create_at(uint32_t type, uint32_t key_size, uint32_t flags, const char *name,
			  int at)
{
	map_create_sized_at(type, key_size, MAX_ENTRIES, flags, name, at);
}

static int map_update(int fd, const void *key, const void *value)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	attr.key = (uintptr_t)key;
	attr.value = (uintptr_t)value;
	attr.flags = BPF_ANY;
	return sys_bpf(BPF_MAP_UPDATE_ELEM, &attr) ? -errno : 0;
}

static int map_lookup(int fd, const void *key, void *value)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	attr.key = (uintptr_t)key;
	attr.value = (uintptr_t)value;
	return sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr) ? -errno : 0;
}

static int map_next_key(int fd, const void *key, void *next)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	attr.key = (uintptr_t)key;
	attr.next_key = (uintptr_t)next;
	return sys_bpf(BPF_MAP_GET_NEXT_KEY, &attr) ? -errno : 0;
}

static void map_info(int fd, struct bpf_map_info *info)
{
	union bpf_attr attr;

	memset(info, 0, sizeof(*info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = fd;
	attr.info.info_len = sizeof(*info);
	attr.info.info = (uintptr_t)info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr))
		test_fail_errno("BPF_OBJ_GET_INFO_BY_FD");
}

/*
 * Element i of a map seeded with seed: a key (an index for arrays, spread-out bytes for
 * hashes) and a value of bytes that differ per map, element and offset.
 */
static void element(uint32_t seed, uint32_t i, uint8_t *key, uint8_t *value)
{
	if (kind->array) {
		memcpy(key, &i, sizeof(i));
	} else {
		uint32_t words[3] = {i * 2654435761u, seed, ~i};

		/* Prefixes of 64, 56 and 48 bits: each key's first 32 bits differ. */
		if (kind->type == BPF_MAP_TYPE_LPM_TRIE)
			words[0] = 64 - (i % 3) * 8;
		memcpy(key, words, sizeof(words));
	}
	for (size_t b = 0; b < value_len; b++)
		value[b] = (uint8_t)(seed * 31 + i * 7 + b * 13 + 1);
}

/* Elements 0..count-1 of seed, but every third index of an array left as it is (zero). */
static bool element_set(uint32_t i, uint32_t count)
{
	return i < count && (!kind->array || i % 3);
}

static void map_fill(int fd, uint32_t seed, uint32_t count)
{
	uint8_t key[16], value[VALUE_MAX];

	for (uint32_t i = 0; i < count; i++) {
		if (!element_set(i, count))
			continue;
		element(seed, i, key, value);
		if (map_update(fd, key, value))
			test_fail("map seeded %u: update of element %u: %s", seed, i,
				  strerror(errno));
	}
}

/*
 * Every element the map holds is one of seed's first count (or extra, when not NULL), with
 * its value, and each of those is there: an array's unset indices read zero.
 */
static void expect_contents(int fd, const char *what, uint32_t seed, uint32_t count,
			    const uint8_t *extra_key, const uint8_t *extra_value)
{
	uint8_t key[16], prev[16], value[VALUE_MAX], want_key[16], want[VALUE_MAX];
	uint32_t found = 0, want_count = 0;
	bool first = true;

	for (uint32_t i = 0; i < MAX_ENTRIES; i++)
		want_count += kind->array || element_set(i, count);
	want_count += !kind->array && extra_key;
	while (!map_next_key(fd, first ? NULL : prev, key)) {
		bool known = false;

		first = false;
		memcpy(prev, key, sizeof(key));
		if (map_lookup(fd, key, value))
			test_fail("%s: lookup of element %u: %s", what, found, strerror(errno));
		if (extra_key && !memcmp(key, extra_key, kind->key_size)) {
			memcpy(want, extra_value, value_len);
			known = true;
		}
		for (uint32_t i = 0; !known && i < MAX_ENTRIES; i++) {
			element(seed, i, want_key, want);
			if (memcmp(key, want_key, kind->key_size))
				continue;
			if (!element_set(i, count))
				memset(want, 0, value_len);
			known = kind->array || element_set(i, count);
		}
		if (!known)
			test_fail("%s: element %u has a key that was never added", what, found);
		if (memcmp(value, want, value_len))
			test_fail("%s: element %u has another value than was stored", what, found);
		found++;
	}
	if (errno != ENOENT)
		test_fail_errno("BPF_MAP_GET_NEXT_KEY");
	if (found != want_count)
		test_fail("%s: %u elements, expected %u", what, found, want_count);
}

static void expect_same_attrs(const struct bpf_map_info *before, int fd, const char *what)
{
	struct bpf_map_info now;

	map_info(fd, &now);
	if (now.type != before->type || now.key_size != before->key_size ||
	    now.value_size != before->value_size || now.max_entries != before->max_entries ||
	    now.map_flags != before->map_flags || strcmp(now.name, before->name))
		test_fail("%s: type %u, sizes %u/%u, %u entries, flags %#x, name \"%s\"; expected "
			  "%u, %u/%u, %u, %#x, \"%s\"",
			  what, now.type, now.key_size, now.value_size, now.max_entries,
			  now.map_flags, now.name, before->type, before->key_size,
			  before->value_size, before->max_entries, before->map_flags, before->name);
}

static uint32_t map_id(int fd)
{
	struct bpf_map_info info;

	map_info(fd, &info);
	return info.id;
}

/* The child's element of the shared map: the last index, or a key of its own. */
static void child_element(uint8_t *key, uint8_t *value, uint32_t id)
{
	element(99, MAX_ENTRIES - 1, key, value);
	memcpy(value, &id, sizeof(id));
}

static void read_only_at(int fd, int at);

/*
 * Holds the shared map through its inherited fds and a read-only description of its own,
 * which only it holds; after restore, writes the id of the map it holds into it, through
 * its inherited fd.
 */
static void child_main(void)
{
	uint8_t key[16], value[VALUE_MAX];

	read_only_at(SHARED_FD, CHILD_RO);
	test_barrier_done();
	test_wait_sigterm();
	if (map_id(CHILD_RO) != map_id(SHARED_FD) ||
	    (fcntl(CHILD_RO, F_GETFL) & O_ACCMODE) != O_RDONLY)
		test_fail("child: its read-only fd is on map %u (flags %#x), the shared map is %u",
			  map_id(CHILD_RO), fcntl(CHILD_RO, F_GETFL), map_id(SHARED_FD));
	child_element(key, value, map_id(SHARED_FD));
	if (map_update(SHARED_FD, key, value))
		test_fail("child: update of the shared map: %s", strerror(errno));
	exit(0);
}

static void read_only_at(int fd, int at)
{
	union bpf_attr attr;
	int ro;

	memset(&attr, 0, sizeof(attr));
	attr.map_id = map_id(fd);
	attr.open_flags = BPF_F_RDONLY;
	ro = sys_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
	if (ro < 0 || dup2(ro, at) != at)
		test_fail_errno("BPF_MAP_GET_FD_BY_ID");
	close(ro);
}

static void freeze(int fd)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	if (sys_bpf(BPF_MAP_FREEZE, &attr))
		test_fail_errno("BPF_MAP_FREEZE");
}

static void expect_update_refused(int fd, const char *what)
{
	uint8_t key[16], value[VALUE_MAX];
	int ret;

	element(1, 1, key, value);
	ret = map_update(fd, key, value);
	if (ret != -EPERM)
		test_fail("%s: an update gave %d, expected EPERM", what, ret);
}

/* Element i of the big map: every key's first 32 bits differ (an LPM trie's data too). */
static void many_element(uint32_t i, uint8_t *key, uint8_t *value)
{
	uint32_t words[3] = {i * 2654435761u, i, 0x5eed};

	if (kind->array) {
		memcpy(key, &i, sizeof(i));
	} else {
		if (kind->type == BPF_MAP_TYPE_LPM_TRIE)
			words[0] = 64;
		memcpy(key, words, sizeof(words));
	}
	for (size_t b = 0; b < value_len; b++)
		value[b] = (uint8_t)(i * 3 + b * 5);
}

/*
 * An LRU map hands a CPU its free elements 128 at a time and, when fewer than 128 are
 * left, evicts elements to make up the 128 (kernel/bpf/bpf_lru_list.c): the map is sized
 * so that the last 128 come whole, and no element is evicted, here or when criu refills it.
 */
static void fill_many(void)
{
	bool lru =
		kind->type == BPF_MAP_TYPE_LRU_HASH || kind->type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	uint8_t key[16], value[VALUE_MAX];

	map_create_sized_at(kind->type, kind->key_size, MANY_ENTRIES + (lru ? 128 : 0),
			    kind->shared_flags, "zdtm_many", MANY_FD);
	for (uint32_t i = 0; i < MANY_ENTRIES; i++) {
		many_element(i, key, value);
		if (map_update(MANY_FD, key, value))
			test_fail("the big map: update of element %u: %s", i, strerror(errno));
	}
}

/* Every element of the big map is there with its value, and no other. */
static void expect_many(void)
{
	uint8_t key[16], next[16], value[VALUE_MAX], got[VALUE_MAX];
	uint32_t count = 0;

	for (uint32_t i = 0; i < MANY_ENTRIES; i++) {
		many_element(i, key, value);
		if (map_lookup(MANY_FD, key, got) || memcmp(got, value, value_len))
			test_fail("the big map: element %u is gone or changed", i);
	}
	for (int ret = map_next_key(MANY_FD, NULL, next); !ret;
	     ret = map_next_key(MANY_FD, key, next)) {
		memcpy(key, next, sizeof(key));
		count++;
	}
	if (count != MANY_ENTRIES)
		test_fail("the big map holds %u elements, expected %u", count, MANY_ENTRIES);
}

/* A map filled with seed 5, sent through the socketpair at FLIGHT_SK and closed. */
static void queue_map_in_flight(struct bpf_map_info *info)
{
	int sk[2], map_fd = FLIGHT_MAP;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || dup2(sk[0], FLIGHT_SK) != FLIGHT_SK ||
	    dup2(sk[1], FLIGHT_SK + 1) != FLIGHT_SK + 1)
		test_fail_errno("socketpair");
	close(sk[0]);
	close(sk[1]);
	map_create_at(kind->type, kind->key_size, kind->shared_flags, "zdtm_flight", FLIGHT_MAP);
	map_fill(FLIGHT_MAP, 5, 11);
	map_info(FLIGHT_MAP, info);
	test_send_fds(FLIGHT_SK, &map_fd, 1, "map");
	close(map_fd);
}

static void expect_map_in_flight(const struct bpf_map_info *info)
{
	int map_fd;

	if (test_recv_fds(FLIGHT_SK + 1, &map_fd, "map") != 1)
		test_fail("no map came out of the socket's queue");
	expect_same_attrs(info, map_fd, "the map in flight");
	expect_contents(map_fd, "the map in flight", 5, 11, NULL, NULL);
	close(map_fd);
}

static void run_restored(void)
{
	uint8_t key[16], value[VALUE_MAX], got[VALUE_MAX];
	struct bpf_map_info frozen_info, shared_info, flight_info;
	bool in_flight = getenv("ZDTM_BPF_MAP_IN_FLIGHT");
	cpu_set_t cpus, one;
	char frozen[16];
	pid_t child;

	/*
	 * An LRU map's update on a CPU whose free list is empty may evict an element it holds
	 * (criu refills such maps on one CPU for the same reason): the maps are filled on one.
	 */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_getaffinity(0, sizeof(cpus), &cpus) || sched_setaffinity(0, sizeof(one), &one))
		test_fail_errno("sched_setaffinity");
	map_create_at(kind->type, kind->key_size, kind->frozen_flags, "zdtm_frozen", FROZEN_FD);
	map_fill(FROZEN_FD, 1, 37);
	freeze(FROZEN_FD);
	map_create_at(kind->type, kind->key_size, kind->shared_flags, "zdtm_shared", SHARED_FD);
	map_fill(SHARED_FD, 2, 20);
	fill_many();
	if (in_flight)
		queue_map_in_flight(&flight_info);
	if (sched_setaffinity(0, sizeof(cpus), &cpus))
		test_fail_errno("sched_setaffinity");
	if (dup2(SHARED_FD, SHARED_DUP) != SHARED_DUP)
		test_fail_errno("dup2");
	if (fcntl(SHARED_FD, F_SETFL, O_NONBLOCK))
		test_fail_errno("F_SETFL");
	read_only_at(SHARED_FD, SHARED_RO);
	map_info(FROZEN_FD, &frozen_info);
	map_info(SHARED_FD, &shared_info);
	child = test_fork_child(child_main);

	test_ready();
	test_wait_sigterm();

	expect_same_attrs(&frozen_info, FROZEN_FD, "the frozen map");
	expect_same_attrs(&shared_info, SHARED_FD, "the shared map");
	expect_contents(FROZEN_FD, "the frozen map", 1, 37, NULL, NULL);
	fdinfo_field(FROZEN_FD, "frozen", frozen, sizeof(frozen));
	if (strcmp(frozen, "1"))
		test_fail("the frozen map's fdinfo says frozen: %s", frozen);
	expect_update_refused(FROZEN_FD, "the frozen map");
	expect_contents(SHARED_FD, "the shared map", 2, 20, NULL, NULL);
	if (map_id(SHARED_DUP) != map_id(SHARED_FD) || map_id(SHARED_RO) != map_id(SHARED_FD) ||
	    map_id(FROZEN_FD) == map_id(SHARED_FD))
		test_fail("map ids: frozen %u, shared %u, its dup %u, its read-only fd %u",
			  map_id(FROZEN_FD), map_id(SHARED_FD), map_id(SHARED_DUP),
			  map_id(SHARED_RO));
	if ((fcntl(SHARED_FD, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != (O_RDWR | O_NONBLOCK) ||
	    (fcntl(SHARED_RO, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != O_RDONLY)
		test_fail("file status flags %#x and %#x, expected O_RDWR|O_NONBLOCK and O_RDONLY",
			  fcntl(SHARED_FD, F_GETFL), fcntl(SHARED_RO, F_GETFL));
	expect_update_refused(SHARED_RO, "the shared map's read-only fd");
	expect_many();
	if (in_flight)
		expect_map_in_flight(&flight_info);

	test_children_verdict(&child, 1, "the child holding the shared map");
	child_element(key, value, map_id(SHARED_FD));
	if (map_lookup(SHARED_RO, key, got) || memcmp(got, value, value_len))
		test_fail("the child's update of the shared map is not seen through the "
			  "read-only fd, or names another map");
	expect_contents(SHARED_DUP, "the shared map after the child's update", 2, 20, key, value);
	test_pass();
}

static int queue_op(int cmd, int fd, void *value)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = fd;
	attr.value = (uintptr_t)value;
	return sys_bpf(cmd, &attr) ? -errno : 0;
}

static void make_queue_map(void)
{
	uint8_t key[16], value[VALUE_MAX];

	map_create_at(BPF_MAP_TYPE_QUEUE, 0, 0, "zdtm_queue", REFUSED_FD);
	for (uint32_t i = 0; i < 5; i++) {
		element(4, i, key, value);
		if (queue_op(BPF_MAP_UPDATE_ELEM, REFUSED_FD, value))
			test_fail_errno("push onto the queue map");
	}
}

static void expect_queue_map(void)
{
	uint8_t key[16], value[VALUE_MAX], got[VALUE_MAX];

	for (uint32_t i = 0; i < 5; i++) {
		element(4, i, key, value);
		if (queue_op(BPF_MAP_LOOKUP_AND_DELETE_ELEM, REFUSED_FD, got) ||
		    memcmp(got, value, VALUE_SIZE))
			test_fail("value %u of the queue map is gone or changed", i);
	}
	if (queue_op(BPF_MAP_LOOKUP_AND_DELETE_ELEM, REFUSED_FD, got) != -ENOENT)
		test_fail("the queue map holds more than its 5 values");
}

/* BTF of one type, a 32-bit signed "int" (id 1): the header, the type, the strings. */
static const struct {
	struct btf_header hdr;
	uint32_t type[4];
	char strings[5];
} __attribute__((packed)) int_btf = {
	.hdr = {.magic = BTF_MAGIC,
		.version = 1,
		.hdr_len = sizeof(struct btf_header),
		.type_len = sizeof(int_btf.type),
		.str_off = sizeof(int_btf.type),
		.str_len = sizeof(int_btf.strings)},
	/* name "int", BTF_KIND_INT of 4 bytes, signed, 32 bits from bit 0 */
	.type = {1, BTF_KIND_INT << 24, 4, (BTF_INT_SIGNED << 24) | 32},
	.strings = "\0int",
};

/* A hash map of int keys and values, typed by int_btf: key 7 holds 9. */
static void make_btf_map(void)
{
	int32_t key = 7, value = 9;
	union bpf_attr attr;
	int btf_fd, fd;

	memset(&attr, 0, sizeof(attr));
	attr.btf = (uintptr_t)&int_btf;
	attr.btf_size = sizeof(int_btf);
	btf_fd = sys_bpf(BPF_BTF_LOAD, &attr);
	if (btf_fd < 0)
		test_fail_errno("BPF_BTF_LOAD");
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_HASH;
	attr.key_size = sizeof(key);
	attr.value_size = sizeof(value);
	attr.max_entries = 4;
	attr.btf_fd = btf_fd;
	attr.btf_key_type_id = 1;
	attr.btf_value_type_id = 1;
	strcpy(attr.map_name, "zdtm_btf");
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0 || dup2(fd, REFUSED_FD) != REFUSED_FD)
		test_fail_errno("BPF_MAP_CREATE with BTF");
	close(fd);
	close(btf_fd);
	if (map_update(REFUSED_FD, &key, &value))
		test_fail_errno("update of the BTF map");
}

static void expect_btf_map(void)
{
	int32_t key = 7, value;
	struct bpf_map_info info;

	map_info(REFUSED_FD, &info);
	if (!info.btf_id || map_lookup(REFUSED_FD, &key, &value) || value != 9)
		test_fail("the BTF map lost its BTF (id %u) or its element", info.btf_id);
}

/*
 * The dump fails on the queue map or the BTF one; the hash map, dumped before it, is
 * untouched.
 */
static void run_dump_fails(bool btf)
{
	uint8_t key[16], value[VALUE_MAX], got[VALUE_MAX];

	map_create_at(kind->type, kind->key_size, 0, "zdtm_plain", SHARED_FD);
	map_fill(SHARED_FD, 3, 30);
	if (btf)
		make_btf_map();
	else
		make_queue_map();

	test_ready();
	test_wait_sigterm();

	expect_contents(SHARED_FD, "the hash map", 3, 30, NULL, NULL);
	if (btf)
		expect_btf_map();
	else
		expect_queue_map();
	element(3, 40, key, value);
	if (map_update(SHARED_FD, key, value) || map_lookup(SHARED_FD, key, got) ||
	    memcmp(got, value, VALUE_SIZE))
		test_fail("the hash map takes no update after the failed dump: %s",
			  strerror(errno));
	test_pass();
}

static const struct map_kind *kind_named(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	test_fail("ZDTM_BPF_MAP=%s is no map kind of this test", name);
}

/* The kernel's num_possible_cpus(), as /sys/devices/system/cpu/possible lists them. */
static int possible_cpus(void)
{
	unsigned int first, last;
	char buf[256], *item;
	int nr = 0;

	read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf));
	for (item = strtok(buf, ",\n"); item; item = strtok(NULL, ",\n")) {
		int got = sscanf(item, "%u-%u", &first, &last);

		if (got < 1)
			test_fail("/sys/devices/system/cpu/possible: \"%s\"", item);
		nr += (got == 1 ? first : last) - first + 1;
	}
	return nr;
}

int main(int argc, char **argv)
{
	const char *which = getenv("ZDTM_BPF_MAP") ?: "";
	bool refused = !strcmp(which, "queue") || !strcmp(which, "btf");

	test_init(argc, argv);
	kind = kind_named(refused ? "hash" : which);
	if (kind->percpu) {
		int nr_cpus = possible_cpus();

		if (nr_cpus < 1 || nr_cpus > MAX_CPUS)
			test_fail("%d possible CPUs: the test has room for 1 to %d", nr_cpus,
				  MAX_CPUS);
		value_len = (size_t)((VALUE_SIZE + 7) & ~7) * nr_cpus;
	}
	if (refused)
		run_dump_fails(!strcmp(which, "btf"));
	run_restored();
}
