/*
 * Anonymous memory named with prctl(PR_SET_VMA_ANON_NAME) keeps its names: two adjacent
 * private regions that differ only by name stay two lines, a shared region keeps its
 * "[anon_shmem:NAME]", and /proc/self/maps after restore equals the one before line for
 * line (shared memory's inode aside: the kernel picks it); contents are checked too.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "zdtmtst.h"

#define PAGE_SIZE 4096ul
#define PRIVATE_PAGES 4 /* the first half named ALPHA, the second BETA */
#define SHARED_PAGES 2

#define ALPHA "alpha region"
#define BETA "beta-region.2"
#define SHARED "shared_one"

static char maps_before[256 * 1024];
static char maps_after[256 * 1024];

static void name_range(void *addr, size_t len, const char *name)
{
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name))
		test_fail("prctl(PR_SET_VMA_ANON_NAME, %s): %s%s", name, strerror(errno),
			  errno == EINVAL ? " (kernel without CONFIG_ANON_VMA_NAME?)" : "");
}

static void expect_maps_name(const void *addr, const char *path, const char *when)
{
	char line[512];

	maps_line(addr, line, sizeof(line));
	if (!strstr(line, path))
		test_fail("%s: the VMA at %p is '%s', not named %s", when, addr, line, path);
}

/* The path column: what follows the inode and its padding. */
static const char *line_path(const char *line, size_t len)
{
	const char *pos = line, *end = line + len;
	int field;

	for (field = 0; field < 5 && pos < end; field++) {
		pos = memchr(pos, ' ', end - pos);
		if (!pos)
			return end;
		while (pos < end && *pos == ' ')
			pos++;
	}
	return pos;
}

/* Whether two lines agree; on shared memory lines the inode is the kernel's choice. */
static int lines_equal(const char *before, size_t len_before, const char *after, size_t len_after)
{
	const char *path_before, *path_after;
	size_t head;

	if (len_before == len_after && !memcmp(before, after, len_before))
		return 1;
	path_before = line_path(before, len_before);
	path_after = line_path(after, len_after);
	if (strncmp(path_before, "[anon_shmem:", 12) && strncmp(path_before, "/dev/zero", 9))
		return 0;
	/* "start-end perms offset dev:dev " */
	head = strlen("0000000000000000-0000000000000000 rw-s 00000000 00:00 ");
	return len_before - (path_before - before) == len_after - (path_after - after) &&
	       !memcmp(path_before, path_after, len_before - (path_before - before)) &&
	       !strncmp(before, after, head);
}

static void compare_maps(void)
{
	char *before = maps_before, *after = maps_after;
	int line_no = 1;

	while (*before || *after) {
		size_t len_before = strcspn(before, "\n"), len_after = strcspn(after, "\n");

		if (!lines_equal(before, len_before, after, len_after))
			test_fail("line %d differs: '%.*s' -> '%.*s'", line_no, (int)len_before,
				  before, (int)len_after, after);
		before += len_before + (before[len_before] == '\n');
		after += len_after + (after[len_after] == '\n');
		line_no++;
	}
}

int main(int argc, char **argv)
{
	size_t half = PRIVATE_PAGES / 2 * PAGE_SIZE;
	char *private, *shared;

	test_init(argc, argv);

	private = mmap(NULL, PRIVATE_PAGES * PAGE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	shared = mmap(NULL, SHARED_PAGES * PAGE_SIZE, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (private == MAP_FAILED || shared == MAP_FAILED)
		test_fail_errno("mmap");
	name_range(private, half, ALPHA);
	name_range(private + half, half, BETA);
	name_range(shared, SHARED_PAGES * PAGE_SIZE, SHARED);
	pattern_fill(private, PRIVATE_PAGES * PAGE_SIZE, 51);
	pattern_fill(shared, SHARED_PAGES * PAGE_SIZE, 52);
	expect_maps_name(private, "[anon:" ALPHA "]", "before dump");
	expect_maps_name(private + half, "[anon:" BETA "]", "before dump");
	expect_maps_name(shared, "[anon_shmem:" SHARED "]", "before dump");
	read_file("/proc/self/maps", maps_before, sizeof(maps_before));

	test_ready();
	test_wait_sigterm();

	read_file("/proc/self/maps", maps_after, sizeof(maps_after));
	expect_maps_name(private, "[anon:" ALPHA "]", "after restore");
	expect_maps_name(private + half, "[anon:" BETA "]", "after restore");
	expect_maps_name(shared, "[anon_shmem:" SHARED "]", "after restore");
	compare_maps();
	pattern_expect(private, PRIVATE_PAGES * PAGE_SIZE, 51, "named private memory");
	pattern_expect(shared, SHARED_PAGES * PAGE_SIZE, 52, "named shared memory");
	test_pass();
}
