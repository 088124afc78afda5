/*
 * An epoll held by no task, in flight in a Unix socket's queue (sent twice, then closed):
 * it watches an eventfd and a pipe the task holds. After restore both messages still
 * carry it, the two copies are one epoll, and it reports the eventfd's and the pipe's
 * readiness with each registration's events and data, under the dumped fd numbers.
 */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SK_SEND 40
#define SK_RECV 41
#define EFD 42
#define PIPE_R 43
#define PIPE_W 44
#define EFD_DATA 0x1122334455667788ull
#define PIPE_DATA 0x99aabbccddeeff00ull

static void place(int fd, int at)
{
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("dup2");
	close(fd);
}

static void watch(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		test_fail_errno("epoll_ctl");
}

/*
 * The registrations, as fdinfo prints them: "tfd: N events: E data: D", where the kernel
 * has added EPOLLERR and EPOLLHUP to the events.
 */
static void expect_registration(int ep, int tfd, uint32_t events, uint64_t data)
{
	char path[64], line[256], want[96];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	snprintf(want, sizeof(want), "tfd: %8d events: %8x data: %16llx", tfd,
		 events | EPOLLERR | EPOLLHUP,
		 (unsigned long long)data);
	f = fopen(path, "r");
	if (!f)
		test_fail_errno("fdinfo");
	while (fgets(line, sizeof(line), f))
		found += !strncmp(line, want, strlen(want));
	fclose(f);
	if (found != 1)
		test_fail("epoll in flight: no registration '%s' (%d)", want, found);
}

int main(int argc, char **argv)
{
	int sk[2], p[2], ep, got[2], again[2];
	struct epoll_event evs[4];
	struct stat st1, st2;
	uint64_t one = 1;
	int n;

	test_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || pipe(p))
		test_fail_errno("socketpair, pipe");
	place(sk[0], SK_SEND);
	place(sk[1], SK_RECV);
	place(eventfd(0, EFD_NONBLOCK), EFD);
	place(p[0], PIPE_R);
	place(p[1], PIPE_W);
	ep = epoll_create1(0);
	if (ep < 0)
		test_fail_errno("epoll_create1");
	watch(ep, EFD, EPOLLIN | EPOLLET, EFD_DATA);
	watch(ep, PIPE_R, EPOLLIN | EPOLLRDHUP, PIPE_DATA);
	test_send_fds(SK_SEND, &ep, 1, "first");
	test_send_fds(SK_SEND, &ep, 1, "second");
	close(ep);

	test_ready();
	test_wait_sigterm();

	if (test_recv_fds(SK_RECV, got, "first") != 1 || test_recv_fds(SK_RECV, again, "second") != 1)
		test_fail("one epoll per message");
	if (fstat(got[0], &st1) || fstat(again[0], &st2) || st1.st_ino != st2.st_ino)
		test_fail("the two copies in flight are no longer one epoll");
	expect_registration(got[0], EFD, EPOLLIN | EPOLLET, EFD_DATA);
	expect_registration(got[0], PIPE_R, EPOLLIN | EPOLLRDHUP, PIPE_DATA);
	if (epoll_wait(got[0], evs, 4, 0) != 0)
		test_fail("the epoll reports readiness nothing caused");
	if (write(EFD, &one, sizeof(one)) != sizeof(one) || write(PIPE_W, "x", 1) != 1)
		test_fail_errno("write");
	n = epoll_wait(again[0], evs, 4, 0);
	if (n != 2 || evs[0].data.u64 + evs[1].data.u64 != EFD_DATA + PIPE_DATA)
		test_fail("epoll_wait gave %d events after writing to both", n);
	test_pass();
}
