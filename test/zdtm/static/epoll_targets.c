/*
 * An epoll comes back watching the same files under the same fd numbers with the same
 * events and data: level- and edge-triggered, a fired EPOLLONESHOT still disabled for
 * the events it had, an epoll nested in another. A registration whose fd was dup'ed
 * elsewhere and closed comes back under the fd that holds the file (CRIU's images name
 * watched files by their fd alone).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "zdtmtst.h"

#define LT_READ	     20 /* readable, level-triggered */
#define ET_WRITE     23 /* writable, edge-triggered */
#define ONESHOT_READ 24 /* fired once before the dump: disabled */
#define MOVED_READ   26 /* registered as 26, then moved to 28 */
#define MOVED_TO     28
#define EPFD	     30
#define OUTER_EPFD   31

#define LT_DATA 0x1111222233334444ULL
#define MAX_TFD 8

struct watch {
	int tfd;
	unsigned int events;
	unsigned long long data;
};

static void epoll_at(int fd, int flags)
{
	int epfd = epoll_create1(flags);

	if (epfd < 0 || dup3(epfd, fd, flags & EPOLL_CLOEXEC) != fd || close(epfd))
		test_fail_errno("epoll_create1 and dup3");
}

static void watch(int epfd, int fd, unsigned int events, unsigned long long data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev))
		test_fail_errno("EPOLL_CTL_ADD");
}

/* The registrations as /proc/self/fdinfo/EPFD lists them. */
static size_t read_watches(int epfd, struct watch *w)
{
	char path[64], buf[4096], *line;
	size_t nr = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	read_file(path, buf, sizeof(buf));
	for (line = strstr(buf, "tfd:"); line && nr < MAX_TFD; line = strstr(line + 1, "tfd:")) {
		if (sscanf(line, "tfd: %d events: %x data: %llx", &w[nr].tfd, &w[nr].events,
			   &w[nr].data) != 3)
			test_fail("cannot parse %s: %.60s", path, line);
		nr++;
	}
	return nr;
}

/*
 * The kernel adds EPOLLERR|EPOLLHUP to each registration: a fired one-shot watch (its
 * flags alone) comes back with those two.
 */
static bool same_watch(const struct watch *before, const struct watch *after)
{
	unsigned int events = before->events;
	int tfd = before->tfd == MOVED_READ ? MOVED_TO : before->tfd;

	if (events == EPOLLONESHOT)
		events |= EPOLLERR | EPOLLHUP;
	return tfd == after->tfd && events == after->events && before->data == after->data;
}

static void expect_same_watches(int epfd, const struct watch *before, size_t nr_before)
{
	struct watch after[MAX_TFD];
	size_t nr = read_watches(epfd, after);

	if (nr != nr_before)
		test_fail("epoll %d watches %zu files, %zu before", epfd, nr, nr_before);
	for (size_t i = 0; i < nr; i++) {
		size_t j = 0;

		while (j < nr && !same_watch(&before[j], &after[i]))
			j++;
		if (j == nr)
			test_fail("epoll %d: fd %d events %#x data %#llx was not watched so before",
				  epfd, after[i].tfd, after[i].events, after[i].data);
	}
}

/* Ready events of epfd now, by data; fails on an event outside allowed. */
static unsigned int ready_mask(int epfd, const unsigned long long *allowed, size_t nr_allowed)
{
	struct epoll_event evs[MAX_TFD];
	unsigned int mask = 0;
	int n = epoll_wait(epfd, evs, MAX_TFD, 0);

	if (n < 0)
		test_fail_errno("epoll_wait");
	for (int i = 0; i < n; i++) {
		size_t k = 0;

		while (k < nr_allowed && allowed[k] != evs[i].data.u64)
			k++;
		if (k == nr_allowed)
			test_fail("epoll %d reported data %#llx (events %#x), not expected", epfd,
				  (unsigned long long)evs[i].data.u64, evs[i].events);
		mask |= 1u << k;
	}
	return mask;
}

static void setup(void)
{
	char byte = 'x';

	pipe_at(LT_READ, LT_READ + 1);
	pipe_at(ET_WRITE - 1, ET_WRITE);
	pipe_at(ONESHOT_READ, ONESHOT_READ + 1);
	pipe_at(MOVED_READ, MOVED_READ + 1);
	epoll_at(EPFD, 0);
	epoll_at(OUTER_EPFD, EPOLL_CLOEXEC);
	watch(EPFD, LT_READ, EPOLLIN, LT_DATA);
	watch(EPFD, ET_WRITE, EPOLLOUT | EPOLLET, ET_WRITE);
	watch(EPFD, ONESHOT_READ, EPOLLIN | EPOLLONESHOT, ONESHOT_READ);
	watch(EPFD, MOVED_READ, EPOLLIN | EPOLLRDHUP, MOVED_READ);
	if (dup2(MOVED_READ, MOVED_TO) != MOVED_TO || close(MOVED_READ))
		test_fail_errno("moving the watched fd");
	watch(OUTER_EPFD, EPFD, EPOLLIN, EPFD);
	if (write(LT_READ + 1, &byte, 1) != 1 || write(ONESHOT_READ + 1, &byte, 1) != 1 ||
	    write(MOVED_READ + 1, &byte, 1) != 1)
		test_fail_errno("write");
}

int main(int argc, char **argv)
{
	const unsigned long long allowed[] = { LT_DATA, ET_WRITE, ONESHOT_READ, MOVED_READ };
	struct watch inner[MAX_TFD], outer[MAX_TFD];
	struct epoll_event rearm = { .events = EPOLLIN, .data.u64 = ONESHOT_READ };
	size_t nr_inner, nr_outer;
	unsigned int mask;

	test_init(argc, argv);
	setup();
	/* Everything fires once: the one-shot watch is disabled from here on. */
	mask = ready_mask(EPFD, allowed, 4);
	if (mask != 0xf)
		test_fail("before the dump: ready set %#x, expected 0xf", mask);
	nr_inner = read_watches(EPFD, inner);
	nr_outer = read_watches(OUTER_EPFD, outer);
	test_ready();
	test_wait_sigterm();

	expect_same_watches(EPFD, inner, nr_inner);
	expect_same_watches(OUTER_EPFD, outer, nr_outer);
	if (fcntl(EPFD, F_GETFD) != 0 || fcntl(OUTER_EPFD, F_GETFD) != FD_CLOEXEC)
		test_fail("fd flags of the epolls: %d and %d", fcntl(EPFD, F_GETFD),
			  fcntl(OUTER_EPFD, F_GETFD));
	if (ready_mask(OUTER_EPFD, (const unsigned long long[]){ EPFD }, 1) != 1)
		test_fail("the outer epoll does not see the inner one ready");
	/*
	 * Level-triggered readiness is there again; an edge already reported may be
	 * reported once more (a new registration reports what is ready), a disabled
	 * one-shot watch never is.
	 */
	mask = ready_mask(EPFD, allowed, 4);
	if ((mask & ~0x2u) != 0x9)
		test_fail("after restore: ready set %#x, expected 0x9 (0x2 allowed)", mask);
	if (epoll_ctl(EPFD, EPOLL_CTL_MOD, ONESHOT_READ, &rearm))
		test_fail("EPOLL_CTL_MOD of the one-shot fd: %s", strerror(errno));
	if (!(ready_mask(EPFD, allowed, 4) & 0x4))
		test_fail("the one-shot watch re-armed does not report its readable pipe");
	if (epoll_ctl(EPFD, EPOLL_CTL_DEL, MOVED_TO, NULL))
		test_fail("fd %d is not watched: %s", MOVED_TO, strerror(errno));
	test_pass();
}
