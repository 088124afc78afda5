/*
 * eventfds come back with their counter (one above 32 bits, which eventfd() itself cannot
 * take), EFD_SEMAPHORE and O_NONBLOCK, and a description shared by two fds of the parent
 * and by a child stays one: what the restored child adds, the parent reads.
 * With ZDTM_EVENTFD_UPSTREAM set (cross tests) the test keeps to what upstream criu
 * keeps: the counter within 32 bits (its restore goes through eventfd()'s unsigned int),
 * and the EFD_SEMAPHORE eventfd is not checked (it records no such flag).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "zdtmtst.h"

#define COUNTER_FD   40 /* O_NONBLOCK, shared with DUP_FD and the child */
#define DUP_FD	     41
#define SEMAPHORE_FD 42 /* EFD_SEMAPHORE, blocking */
#define COUNTER	     (upstream ? 0x12345678ull : 0x1234567890ull)
#define SEM_COUNT    5
#define CHILD_ADDS   7

static bool upstream;

static void expect_field(int fd, const char *name, const char *want, const char *who)
{
	char value[64];

	fdinfo_field(fd, name, value, sizeof(value));
	if (strcmp(value, want))
		test_fail("%s: fd %d: %s is \"%s\", expected \"%s\"", who, fd, name, value, want);
}

static void expect_count(int fd, uint64_t want, const char *who)
{
	char hex[32];

	snprintf(hex, sizeof(hex), "%" PRIx64, want);
	expect_field(fd, "eventfd-count", hex, who);
}

static void expect_nonblock(int fd, bool want, const char *who)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		test_fail_errno("F_GETFL");
	if (!!(flags & O_NONBLOCK) != want || (flags & O_ACCMODE) != O_RDWR)
		test_fail("%s: fd %d has flags %#o", who, fd, flags);
}

static void add(int fd, uint64_t value, const char *who)
{
	if (write(fd, &value, sizeof(value)) != sizeof(value))
		test_fail("%s: cannot add %" PRIu64 " to fd %d: %s", who, value, fd,
			  strerror(errno));
}

static uint64_t take(int fd, const char *who)
{
	uint64_t value;

	read_exact(fd, &value, sizeof(value), who);
	return value;
}

static void __attribute__((noreturn)) child_main(void)
{
	test_barrier_done();
	test_wait_sigterm();

	expect_nonblock(COUNTER_FD, true, "child");
	expect_count(COUNTER_FD, COUNTER, "child");
	add(COUNTER_FD, CHILD_ADDS, "child");
	exit(0);
}

static void make_eventfd(unsigned int initval, int flags, uint64_t add_after, int at)
{
	int fd = eventfd(initval, flags);

	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("eventfd");
	close(fd);
	if (add_after)
		add(at, add_after, "setup");
}

int main(int argc, char **argv)
{
	uint64_t value;
	pid_t child;

	test_init(argc, argv);
	upstream = getenv("ZDTM_EVENTFD_UPSTREAM");
	make_eventfd(0, EFD_NONBLOCK, COUNTER, COUNTER_FD);
	if (dup2(COUNTER_FD, DUP_FD) != DUP_FD)
		test_fail_errno("dup2");
	make_eventfd(SEM_COUNT, EFD_SEMAPHORE, 0, SEMAPHORE_FD);
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
	expect_nonblock(DUP_FD, true, "parent");
	expect_count(DUP_FD, COUNTER + CHILD_ADDS, "parent, through the dup");
	value = take(COUNTER_FD, "parent: counter");
	if (value != COUNTER + CHILD_ADDS)
		test_fail("parent: read %#" PRIx64 ", expected %#llx", value, COUNTER + CHILD_ADDS);
	if (read(DUP_FD, &value, sizeof(value)) != -1 || errno != EAGAIN)
		test_fail("parent: the emptied counter did not say EAGAIN through the dup");
	if (upstream)
		test_pass();

	expect_nonblock(SEMAPHORE_FD, false, "parent");
	expect_field(SEMAPHORE_FD, "eventfd-semaphore", "1", "parent");
	expect_field(COUNTER_FD, "eventfd-semaphore", "0", "parent");
	expect_count(SEMAPHORE_FD, SEM_COUNT, "parent");
	value = take(SEMAPHORE_FD, "parent: semaphore");
	if (value != 1)
		test_fail("parent: a semaphore read gave %" PRIu64 ", expected 1", value);
	expect_count(SEMAPHORE_FD, SEM_COUNT - 1, "parent, after one semaphore read");
	test_pass();
}
