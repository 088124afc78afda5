/*
 * BPF maps come back with their attributes and every element, byte for byte. ZDTM_BPF_MAP
 * names the type: "hash" or "array" (restored), or "percpu" (a dump that fails on a per-CPU
 * array, which it cannot dump, and leaves both maps of the process as they were).
 *
 * Restored: a frozen map, still refusing updates; a map held by two fds (dup), by a child
 * over fork and by a read-only description of its own (BPF_MAP_GET_FD_BY_ID): one map
 * after restore, an update through one reaching the others.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define FROZEN_FD   60
#define SHARED_FD   61
#define SHARED_DUP  62
#define SHARED_RO   63
#define PERCPU_FD   64
#define VALUE_SIZE  40 /* not a multiple of 8: sizes are kept as given */
#define MAX_ENTRIES 64

struct map_kind {
	uint32_t type;
	uint32_t key_size;
	uint32_t frozen_flags, shared_flags;
};

static const struct map_kind hash_kind = { BPF_MAP_TYPE_HASH, 12, BPF_F_NO_PREALLOC, 0 };
static const struct map_kind array_kind = { BPF_MAP_TYPE_ARRAY, 4, BPF_F_RDONLY_PROG,
					    BPF_F_NUMA_NODE };
static const struct map_kind *kind;

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static void map_create_at(uint32_t type, uint32_t key_size, uint32_t flags, const char *name,
			  int at)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = type;
	attr.key_size = key_size;
	attr.value_size = VALUE_SIZE;
	attr.max_entries = MAX_ENTRIES;
	attr.map_flags = flags;
	strncpy(attr.map_name, name, sizeof(attr.map_name) - 1);
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("BPF_MAP_CREATE");
	close(fd);
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
	if (kind->type == BPF_MAP_TYPE_ARRAY) {
		memcpy(key, &i, sizeof(i));
	} else {
		uint32_t words[3] = { i * 2654435761u, seed, ~i };

		memcpy(key, words, sizeof(words));
	}
	for (int b = 0; b < VALUE_SIZE; b++)
		value[b] = (uint8_t)(seed * 31 + i * 7 + b * 13 + 1);
}

/* Elements 0..count-1 of seed, but every third index of an array left as it is (zero). */
static bool element_set(uint32_t i, uint32_t count)
{
	return i < count && (kind->type != BPF_MAP_TYPE_ARRAY || i % 3);
}

static void map_fill(int fd, uint32_t seed, uint32_t count)
{
	uint8_t key[16], value[VALUE_SIZE];

	for (uint32_t i = 0; i < count; i++) {
		if (!element_set(i, count))
			continue;
		element(seed, i, key, value);
		if (map_update(fd, key, value))
			test_fail("map seeded %u: update of element %u: %s", seed, i, strerror(errno));
	}
}

/*
 * Every element the map holds is one of seed's first count (or extra, when not NULL), with
 * its value, and each of those is there: an array's unset indices read zero.
 */
static void expect_contents(int fd, const char *what, uint32_t seed, uint32_t count,
			    const uint8_t *extra_key, const uint8_t *extra_value)
{
	uint8_t key[16], prev[16], value[VALUE_SIZE], want_key[16], want[VALUE_SIZE];
	uint32_t found = 0, want_count = 0;
	bool first = true;

	for (uint32_t i = 0; i < MAX_ENTRIES; i++)
		want_count += kind->type == BPF_MAP_TYPE_ARRAY || element_set(i, count);
	want_count += kind->type != BPF_MAP_TYPE_ARRAY && extra_key;
	while (!map_next_key(fd, first ? NULL : prev, key)) {
		bool known = false;

		first = false;
		memcpy(prev, key, sizeof(key));
		if (map_lookup(fd, key, value))
			test_fail("%s: lookup of element %u: %s", what, found, strerror(errno));
		if (extra_key && !memcmp(key, extra_key, kind->key_size)) {
			memcpy(want, extra_value, VALUE_SIZE);
			known = true;
		}
		for (uint32_t i = 0; !known && i < MAX_ENTRIES; i++) {
			element(seed, i, want_key, want);
			if (memcmp(key, want_key, kind->key_size))
				continue;
			if (!element_set(i, count))
				memset(want, 0, VALUE_SIZE);
			known = kind->type == BPF_MAP_TYPE_ARRAY || element_set(i, count);
		}
		if (!known)
			test_fail("%s: element %u has a key that was never added", what, found);
		if (memcmp(value, want, VALUE_SIZE))
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

/* After restore: writes the id of the map it holds into it, through its inherited fd. */
static void child_main(void)
{
	uint8_t key[16], value[VALUE_SIZE];

	test_barrier_done();
	test_wait_sigterm();
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
	uint8_t key[16], value[VALUE_SIZE];
	int ret;

	element(1, 1, key, value);
	ret = map_update(fd, key, value);
	if (ret != -EPERM)
		test_fail("%s: an update gave %d, expected EPERM", what, ret);
}

static void run_restored(void)
{
	uint8_t key[16], value[VALUE_SIZE], got[VALUE_SIZE];
	struct bpf_map_info frozen_info, shared_info;
	char frozen[16];
	pid_t child;

	map_create_at(kind->type, kind->key_size, kind->frozen_flags, "zdtm_frozen", FROZEN_FD);
	map_fill(FROZEN_FD, 1, 37);
	freeze(FROZEN_FD);
	map_create_at(kind->type, kind->key_size, kind->shared_flags, "zdtm_shared", SHARED_FD);
	map_fill(SHARED_FD, 2, 20);
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

	test_children_verdict(&child, 1, "the child holding the shared map");
	child_element(key, value, map_id(SHARED_FD));
	if (map_lookup(SHARED_RO, key, got) || memcmp(got, value, VALUE_SIZE))
		test_fail("the child's update of the shared map is not seen through the "
			  "read-only fd, or names another map");
	expect_contents(SHARED_DUP, "the shared map after the child's update", 2, 20, key,
			value);
	test_pass();
}

/* The dump fails on the per-CPU map; the hash map, dumped before it, is untouched. */
static void run_dump_fails(void)
{
	uint8_t key[16], value[VALUE_SIZE];
	uint32_t index = 5;
	uint8_t per_cpu[VALUE_SIZE * 1024], got[VALUE_SIZE * 1024];
	int nr_cpus = sysconf(_SC_NPROCESSORS_CONF);

	kind = &hash_kind;
	map_create_at(kind->type, kind->key_size, 0, "zdtm_plain", SHARED_FD);
	map_fill(SHARED_FD, 3, 30);
	map_create_at(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 0, "zdtm_percpu", PERCPU_FD);
	if (nr_cpus < 1 || nr_cpus > 1024)
		test_fail("%d CPUs", nr_cpus);
	/* Each CPU's value rounded up to 8 bytes (kernel/bpf/syscall.c). */
	for (size_t b = 0; b < sizeof(per_cpu); b++)
		per_cpu[b] = (uint8_t)(b * 7 + 3);
	if (map_update(PERCPU_FD, &index, per_cpu))
		test_fail_errno("per-CPU map update");

	test_ready();
	test_wait_sigterm();

	expect_contents(SHARED_FD, "the hash map", 3, 30, NULL, NULL);
	if (map_lookup(PERCPU_FD, &index, got) || memcmp(got, per_cpu, (size_t)nr_cpus * VALUE_SIZE))
		test_fail("the per-CPU map's element changed");
	element(3, 40, key, value);
	if (map_update(SHARED_FD, key, value) || map_lookup(SHARED_FD, key, got) ||
	    memcmp(got, value, VALUE_SIZE))
		test_fail("the hash map takes no update after the failed dump: %s",
			  strerror(errno));
	test_pass();
}

int main(int argc, char **argv)
{
	const char *which = getenv("ZDTM_BPF_MAP");

	test_init(argc, argv);
	if (!which)
		test_fail("ZDTM_BPF_MAP is not set");
	if (!strcmp(which, "percpu"))
		run_dump_fails();
	kind = !strcmp(which, "array") ? &array_kind : &hash_kind;
	run_restored();
}
