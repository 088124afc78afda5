/*
 * A task's stored pages through pipes (page-splice.h). Entries and pages are queued into
 * the batch being filled: its iovecs go straight into the parasite's shared arguments
 * (one slot per pipe), its ops list what leaves when the batch is done, in order: pagemap
 * entries and chunks of pipe bytes. A full batch is sent to the parasite, and the one sent
 * before it is taken back and written out while the parasite vmsplices the new one: one
 * copy of each page (into the page cache or the socket), none through criu's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compel.h"
#include "log.h"
#include "mem.h"
#include "page-splice.h"
#include "page-xfer.h"
#include "parasite-proto.h"

#ifndef PAGE_SIZE
#define PAGE_SIZE 4096UL
#endif

/*
 * Each pipe holds a batch: one pipe slot per page, so an 8 MiB pipe takes 2048 pages
 * (and references them only: no memory of its own). Fewer, bigger batches, fewer round
 * trips to the parasite. Without CAP_SYS_RESOURCE a pipe grows to fs.pipe-max-size only
 * (1 MiB by default), which is taken then; the 64 KiB a pipe starts with would cost a
 * round trip per 16 pages.
 */
#define SPLICE_PIPE_BYTES (8UL << 20)
#define PIPE_MAX_SIZE_PATH "/proc/sys/fs/pipe-max-size"

static int pipe_max_size(void)
{
	char buf[32] = "";
	int fd = open(PIPE_MAX_SIZE_PATH, O_RDONLY | O_CLOEXEC), size = -1;

	if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0)
		size = atoi(buf);
	if (fd >= 0)
		close(fd);
	return size;
}

/* What leaves when a batch is done: a pagemap entry (flags != 0) or bytes of the pipe. */
struct splice_op {
	uint64_t vaddr, nr_pages;
	uint32_t flags;
	size_t bytes;
};

struct splice_batch {
	struct splice_op *ops;
	unsigned int nr_ops, cap_ops;
	unsigned int nr_iovs; /* in the parasite's slot of the same index */
	size_t bytes;
	bool sent; /* to the parasite, its answer not taken yet */
};

struct page_splice {
	struct compel_ctl *ctl;
	struct page_xfer *xfer;
	struct parasite_args *args;
	int rd[PARASITE_NR_SLOTS]; /* criu's ends of the pipes */
	size_t pipe_bytes;
	struct splice_batch batch[PARASITE_NR_SLOTS];
	unsigned int cur; /* the batch being filled */
};

static int make_pipe(struct page_splice *ps, unsigned int i, int *wr)
{
	int fds[2], size;

	if (pipe2(fds, O_CLOEXEC)) {
		pr_perror("cannot make a pipe for pages");
		return -errno;
	}
	ps->rd[i] = fds[0];
	*wr = fds[1];
	size = fcntl(fds[1], F_SETPIPE_SZ, SPLICE_PIPE_BYTES);
	if (size < 0 && errno == EPERM)
		size = fcntl(fds[1], F_SETPIPE_SZ, pipe_max_size());
	if (size < 0)
		size = fcntl(fds[1], F_GETPIPE_SZ);
	if (size < 0) {
		pr_perror("cannot size a pipe for pages");
		return -errno;
	}
	if (!ps->pipe_bytes || (size_t)size < ps->pipe_bytes)
		ps->pipe_bytes = size;
	pr_debug("a pipe of %d bytes for pages\n", size);
	return 0;
}

/* The pipes' write ends go to the parasite; criu keeps only the read ends. */
static int hand_pipes(struct page_splice *ps)
{
	struct parasite_cmd cmd = { .cmd = PARASITE_CMD_TAKE_PIPES };
	int wr[PARASITE_NR_SLOTS] = { -1, -1 }, ret = 0;
	struct parasite_answer answer;
	unsigned int i;

	for (i = 0; i < PARASITE_NR_SLOTS && !ret; i++)
		ret = make_pipe(ps, i, &wr[i]);
	if (!ret)
		ret = compel_parasite_send(ps->ctl, &cmd, wr, PARASITE_NR_SLOTS);
	if (!ret)
		ret = compel_parasite_recv(ps->ctl, &answer);
	if (!ret && answer.ret) {
		pr_err("the parasite did not take the pipes: %s\n", strerror(-answer.ret));
		ret = -EIO;
	}
	for (i = 0; i < PARASITE_NR_SLOTS; i++)
		if (wr[i] >= 0)
			close(wr[i]);
	return ret;
}

int page_splice_open(struct page_splice **out, struct compel_ctl *ctl, struct page_xfer *xfer)
{
	struct page_splice *ps = calloc(1, sizeof(*ps));
	int ret;

	*out = NULL;
	if (!ps) {
		pr_err("no memory for the page pipes\n");
		return -ENOMEM;
	}
	ps->ctl = ctl;
	ps->xfer = xfer;
	ps->args = compel_parasite_args(ctl);
	for (unsigned int i = 0; i < PARASITE_NR_SLOTS; i++)
		ps->rd[i] = -1;
	ret = hand_pipes(ps);
	if (ret) {
		page_splice_close(ps);
		return ret;
	}
	*out = ps;
	return 0;
}

static int add_op(struct splice_batch *b, const struct splice_op *op)
{
	if (b->nr_ops == b->cap_ops) {
		unsigned int cap = b->cap_ops ? 2 * b->cap_ops : 64;
		struct splice_op *grown = realloc(b->ops, cap * sizeof(*grown));

		if (!grown) {
			pr_err("no memory for the page batch\n");
			return -ENOMEM;
		}
		b->ops = grown;
		b->cap_ops = cap;
	}
	b->ops[b->nr_ops++] = *op;
	return 0;
}

/* The batch's entries and pages out to the target, in order; the batch is empty again. */
static int write_batch(struct page_splice *ps, unsigned int slot)
{
	struct splice_batch *b = &ps->batch[slot];
	int ret = 0;

	if (b->sent) {
		struct parasite_answer answer;

		b->sent = false;
		ret = compel_parasite_recv(ps->ctl, &answer);
		if (!ret && answer.ret != (int64_t)b->bytes) {
			pr_err("the parasite took %lld of %zu bytes of pages: %s\n",
			       (long long)answer.ret, b->bytes,
			       answer.ret < 0 ? strerror(-answer.ret) : "short");
			ret = -EIO;
		}
	}
	for (unsigned int i = 0; i < b->nr_ops && !ret; i++) {
		const struct splice_op *op = &b->ops[i];

		if (op->flags)
			ret = page_xfer_entry(ps->xfer, op->vaddr, op->nr_pages, op->flags);
		else
			ret = page_xfer_splice(ps->xfer, ps->rd[slot], op->bytes);
	}
	b->nr_ops = b->nr_iovs = 0;
	b->bytes = 0;
	return ret;
}

/* The batch being filled goes to the parasite; the one before it is written meanwhile. */
static int dispatch(struct page_splice *ps)
{
	struct splice_batch *b = &ps->batch[ps->cur];
	int ret = 0;

	if (b->bytes) {
		struct parasite_cmd cmd = { .cmd = PARASITE_CMD_VMSPLICE, .nr = b->nr_iovs,
					    .arg = ps->cur };

		ret = compel_parasite_send(ps->ctl, &cmd, NULL, 0);
		b->sent = !ret;
	}
	ps->cur = (ps->cur + 1) % PARASITE_NR_SLOTS;
	return ret ?: write_batch(ps, ps->cur);
}

static int queue_pages(struct page_splice *ps, uint64_t addr, size_t len)
{
	while (len) {
		struct splice_batch *b = &ps->batch[ps->cur];
		struct parasite_iov *iov;
		size_t take = ps->pipe_bytes - b->bytes;
		int ret;

		if (!take || b->nr_iovs == PARASITE_SLOT_IOVS) {
			ret = dispatch(ps);
			if (ret)
				return ret;
			continue;
		}
		if (take > len)
			take = len;
		iov = &ps->args->slots[ps->cur][b->nr_iovs++];
		iov->base = addr;
		iov->len = take;
		if (b->nr_ops && !b->ops[b->nr_ops - 1].flags) {
			b->ops[b->nr_ops - 1].bytes += take;
		} else {
			struct splice_op op = { .bytes = take };

			ret = add_op(b, &op);
			if (ret)
				return ret;
		}
		b->bytes += take;
		addr += take;
		len -= take;
	}
	return 0;
}

int page_splice_entry(struct page_splice *ps, uint64_t vaddr, uint64_t nr_pages, uint32_t flags)
{
	struct splice_op op = { .vaddr = vaddr, .nr_pages = nr_pages, .flags = flags };
	int ret = add_op(&ps->batch[ps->cur], &op);

	if (ret || !(flags & PE_PRESENT))
		return ret;
	return queue_pages(ps, vaddr, nr_pages * PAGE_SIZE);
}

int page_splice_drain(struct page_splice *ps)
{
	int ret = dispatch(ps);

	/* dispatch() wrote the batch before; the one it sent is the last. */
	return ret ?: write_batch(ps, (ps->cur + PARASITE_NR_SLOTS - 1) % PARASITE_NR_SLOTS);
}

void page_splice_close(struct page_splice *ps)
{
	if (!ps)
		return;
	for (unsigned int i = 0; i < PARASITE_NR_SLOTS; i++) {
		struct splice_batch *b = &ps->batch[i];
		struct parasite_answer answer;

		/* Its answer first: a read end closed under vmsplice() would raise SIGPIPE. */
		if (b->sent)
			compel_parasite_recv(ps->ctl, &answer);
		free(b->ops);
		if (ps->rd[i] >= 0)
			close(ps->rd[i]);
	}
	free(ps);
}
