/*
 * A MAP_SHARED mapping of a regular file keeps its contents, and after restore it is
 * still the file: a store through the mapping is read back with pread().
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MAP_SIZE (256 * 1024)

static void expect_file_pattern(uint64_t seed, const char *what)
{
	static unsigned char file_data[MAP_SIZE];
	int fd = open("shared.data", O_RDONLY);

	if (fd < 0)
		test_fail_errno("open shared.data");
	if (pread(fd, file_data, MAP_SIZE, 0) != MAP_SIZE)
		test_fail_errno("read shared.data");
	close(fd);
	pattern_expect(file_data, MAP_SIZE, seed, what);
}

int main(int argc, char **argv)
{
	static unsigned char zeroes[MAP_SIZE];
	unsigned char *map;
	int fd;

	test_init(argc, argv);

	write_file("shared.data", zeroes, MAP_SIZE);
	fd = open("shared.data", O_RDWR);
	if (fd < 0)
		test_fail_errno("open shared.data");
	map = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		test_fail_errno("mmap");
	close(fd);
	pattern_fill(map, MAP_SIZE, 40);
	expect_file_pattern(40, "file before dump");

	test_ready();
	test_wait_sigterm();

	pattern_expect(map, MAP_SIZE, 40, "mapping after restore");
	expect_file_pattern(40, "file after restore");
	pattern_fill(map, MAP_SIZE, 41);
	expect_file_pattern(41, "file after a store through the restored mapping");
	test_pass();
}
