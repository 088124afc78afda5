/*
 * Files opened before fork stay one open file description in parent and child: a write
 * by the restored child moves the parent's offset, and an O_APPEND description appended
 * to by the child leaves the parent's offset at the new end of file.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RW_FD	  50 /* O_RDWR, offset DUMP_POS at dump */
#define APPEND_FD 51 /* O_WRONLY | O_APPEND */
#define FILE_SIZE 8192
#define DUMP_POS  1000
#define CHILD_LEN 4096 /* the child writes this much at RW_FD after restore, seed 32 */
#define APPENDED  500  /* and appends this much at APPEND_FD, seed 33 */

static void expect_offset(int fd, off_t want, const char *what)
{
	off_t pos = lseek(fd, 0, SEEK_CUR);

	if (pos != want)
		test_fail("%s: offset is %lld, expected %lld", what, (long long)pos,
			  (long long)want);
}

static void __attribute__((noreturn)) child_main(void)
{
	static unsigned char buf[CHILD_LEN];

	test_barrier_done();
	test_wait_sigterm();

	expect_offset(RW_FD, DUMP_POS, "child: read-write fd after restore");
	expect_offset(APPEND_FD, FILE_SIZE, "child: append fd after restore");
	pattern_fill(buf, CHILD_LEN, 32);
	if (write(RW_FD, buf, CHILD_LEN) != CHILD_LEN)
		test_fail_errno("child: write");
	pattern_fill(buf, APPENDED, 33);
	if (write(APPEND_FD, buf, APPENDED) != APPENDED)
		test_fail_errno("child: append");
	exit(0);
}


int main(int argc, char **argv)
{
	static unsigned char data[FILE_SIZE + APPENDED];
	pid_t child;

	test_init(argc, argv);
	pattern_fill(data, FILE_SIZE, 31);
	write_file("tree-shared-offset.data", data, FILE_SIZE);
	open_fd_at("tree-shared-offset.data", O_RDWR, RW_FD);
	open_fd_at("tree-shared-offset.data", O_WRONLY | O_APPEND, APPEND_FD);
	if (lseek(RW_FD, DUMP_POS, SEEK_SET) != DUMP_POS ||
	    lseek(APPEND_FD, 0, SEEK_END) != FILE_SIZE)
		test_fail_errno("lseek");
	test_barrier_init();
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();

	test_children_verdict(&child, 1, "parent");
	expect_offset(RW_FD, DUMP_POS + CHILD_LEN, "parent: read-write fd after the child wrote");
	expect_offset(APPEND_FD, FILE_SIZE + APPENDED,
		      "parent: append fd after the child appended");
	if (pread(RW_FD, data, sizeof(data), 0) != sizeof(data))
		test_fail_errno("parent: pread");
	pattern_expect(data + DUMP_POS, CHILD_LEN, 32, "what the child wrote at the shared offset");
	pattern_expect(data + FILE_SIZE, APPENDED, 33, "what the child appended");
	test_pass();
}
