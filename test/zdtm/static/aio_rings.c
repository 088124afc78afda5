/*
 * AIO contexts (io_setup): a small one and one of two pages, each with requests done
 * before the dump, some reaped and some not, its head and tail wrapped around the ring
 * in the big one. After restore: each context's id is the same ring, the ring's nr, head
 * and tail as they were, the events not yet reaped come out of io_getevents() with their
 * data, object and result, and a request submitted then completes in the same ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

/* The ring's header at the context's address, as the kernel lays it out. */
struct ring_head {
	uint32_t id, nr, head, tail;
	uint32_t magic, compat_features, incompat_features, header_length;
};

struct ctx_state {
	aio_context_t ctx;
	uint32_t nr, head, tail;
	unsigned int pending; /* events done and not reaped */
	uint64_t next_data; /* iocb data of the first of them */
};

static char byte = 'x';

static long io_setup(unsigned int nr, aio_context_t *ctx)
{
	return syscall(SYS_io_setup, nr, ctx);
}

static long io_submit(aio_context_t ctx, struct iocb *cb)
{
	return syscall(SYS_io_submit, ctx, 1, &cb);
}

static long io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev)
{
	struct timespec no_wait = { 0, 0 };

	return syscall(SYS_io_getevents, ctx, min, max, ev, &no_wait);
}

/* A one-byte write to fd; completes at once. */
static void submit(aio_context_t ctx, int fd, uint64_t data, const char *what)
{
	struct iocb cb = { .aio_data = data, .aio_lio_opcode = IOCB_CMD_PWRITE, .aio_fildes = fd,
			   .aio_buf = (uintptr_t)&byte, .aio_nbytes = 1 };

	if (io_submit(ctx, &cb) != 1)
		test_fail("%s: io_submit of request %llu: %s", what, (unsigned long long)data,
			  strerror(errno));
}

static void reap_one(aio_context_t ctx, uint64_t data, const char *what)
{
	struct io_event ev;

	if (io_getevents(ctx, 1, 1, &ev) != 1)
		test_fail("%s: no event for request %llu: %s", what, (unsigned long long)data,
			  strerror(errno));
	if (ev.data != data || ev.res != 1)
		test_fail("%s: event data %llu res %lld, expected request %llu done with 1", what,
			  (unsigned long long)ev.data, (long long)ev.res, (unsigned long long)data);
}

/* done requests in all, every one but the last pending ones reaped at once. */
static void setup_ctx(struct ctx_state *s, unsigned int nr_req, unsigned int done,
		      unsigned int pending, int fd, const char *what)
{
	const struct ring_head *ring;
	unsigned int i;

	if (io_setup(nr_req, &s->ctx))
		test_fail("%s: io_setup(%u): %s", what, nr_req, strerror(errno));
	for (i = 0; i < done; i++) {
		submit(s->ctx, fd, i, what);
		if (i < done - pending)
			reap_one(s->ctx, i, what);
	}
	ring = (const struct ring_head *)s->ctx;
	s->nr = ring->nr;
	s->head = ring->head;
	s->tail = ring->tail;
	s->pending = pending;
	s->next_data = done - pending;
	if ((s->tail + s->nr - s->head) % s->nr != pending)
		test_fail("%s: head %u tail %u of %u with %u pending", what, s->head, s->tail, s->nr,
			  pending);
}

static void expect_ctx(const struct ctx_state *s, int fd, const char *what)
{
	const struct ring_head *ring = (const struct ring_head *)s->ctx;
	unsigned int i;

	if (ring->nr != s->nr || ring->head != s->head || ring->tail != s->tail)
		test_fail("%s: ring nr %u head %u tail %u, expected %u %u %u", what, ring->nr,
			  ring->head, ring->tail, s->nr, s->head, s->tail);
	for (i = 0; i < s->pending; i++)
		reap_one(s->ctx, s->next_data + i, what);
	submit(s->ctx, fd, 1000, what);
	reap_one(s->ctx, 1000, what);
	if (ring->tail != (s->tail + 1) % s->nr)
		test_fail("%s: tail %u after one more request, expected %u", what, ring->tail,
			  (s->tail + 1) % s->nr);
}

int main(int argc, char **argv)
{
	struct ctx_state small, big;
	int fd;

	test_init(argc, argv);
	fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		test_fail_errno("open /dev/null");
	setup_ctx(&small, 1, 3, 1, fd, "small context");
	/* 64 requests: a ring of two pages (255 events); 300 done wrap it around. */
	setup_ctx(&big, 64, 300, 5, fd, "big context");

	test_ready();
	test_wait_sigterm();

	expect_ctx(&small, fd, "small context");
	expect_ctx(&big, fd, "big context");
	test_pass();
}
