/*
 * Shared anonymous memory held as a file: an fd opened through /proc/self/map_files (fd
 * 70, O_APPEND, offset OFF) and a private mapping of it made through that fd, with one
 * COW'ed page. After restore the fd, the shared mapping and the private mapping's other
 * pages are still one object ("/dev/zero (deleted)"), the COW'ed page keeps its own bytes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SHM_FD	 70
#define PAGE	 4096ul
#define NR_PAGES 8 /* page i holds seed 700 + i at dump */
#define OFF	 1000

static unsigned char *shared, *priv;

static void expect_fd_page(unsigned int page, uint64_t seed, const char *what)
{
	static unsigned char buf[PAGE];

	if (pread(SHM_FD, buf, PAGE, page * PAGE) != PAGE)
		test_fail_errno("pread");
	pattern_expect(buf, PAGE, seed, what);
}

static void setup(void)
{
	char path[96];
	int fd;

	shared = mmap(NULL, NR_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		test_fail_errno("mmap");
	for (unsigned int i = 0; i < NR_PAGES; i++)
		pattern_fill(shared + i * PAGE, PAGE, 700 + i);
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)shared,
		 (unsigned long)shared + NR_PAGES * PAGE);
	fd = open(path, O_RDWR);
	if (fd < 0 || dup2(fd, SHM_FD) != SHM_FD)
		test_fail_errno("open map_files");
	close(fd);
	priv = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, SHM_FD, 2 * PAGE);
	if (priv == MAP_FAILED)
		test_fail_errno("mmap private");
	pattern_fill(priv + PAGE, PAGE, 803); /* COW'ed: object page 3 keeps seed 703 */
	if (fcntl(SHM_FD, F_SETFL, O_APPEND) || lseek(SHM_FD, OFF, SEEK_SET) != OFF)
		test_fail_errno("F_SETFL or lseek");
}

int main(int argc, char **argv)
{
	char link[256], line[512];
	int fl;

	test_init(argc, argv);
	setup();
	fl = fcntl(SHM_FD, F_GETFL);
	test_ready();
	test_wait_sigterm();

	fd_link(SHM_FD, link, sizeof(link));
	if (strcmp(link, "/dev/zero (deleted)"))
		test_fail("fd %d links to %s", SHM_FD, link);
	if (fcntl(SHM_FD, F_GETFL) != fl || lseek(SHM_FD, 0, SEEK_CUR) != OFF)
		test_fail("fd %d: flags %#o offset %lld, expected %#o %d", SHM_FD,
			  fcntl(SHM_FD, F_GETFL), (long long)lseek(SHM_FD, 0, SEEK_CUR), fl, OFF);
	maps_line(priv, line, sizeof(line));
	if (!strstr(line, " rw-p ") || !strstr(line, "/dev/zero (deleted)"))
		test_fail("private mapping: %s", line);
	for (unsigned int i = 0; i < NR_PAGES; i++)
		expect_fd_page(i, 700 + i, "the object through the fd");
	pattern_expect(priv, PAGE, 702, "private page 0 (object page 2)");
	pattern_expect(priv + PAGE, PAGE, 803, "the COW'ed private page");
	pattern_fill(shared + 4 * PAGE, PAGE, 904);
	pattern_expect(priv + 2 * PAGE, PAGE, 904, "a private page that follows the object");
	expect_fd_page(4, 904, "what the shared mapping wrote, through the fd");
	test_pass();
}
