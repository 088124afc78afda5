/*
 * The page server, both ends of CRIU's protocol (page-server.h): the dump's connection
 * and its final flush, and `criu page-server`, which stores one dump's pagemaps and
 * pages through the same page_xfer a local dump writes them with.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cr_options.h"
#include "daemon.h"
#include "log.h"
#include "mem.h"
#include "page-server.h"
#include "page-xfer.h"

#define PAGE_SIZE 4096UL

/* The most pages one command may carry: 64 GiB, far beyond any run CRIU sends. */
#define PS_MAX_RUN_PAGES (1ULL << 24)

int ps_send(int sk, const void *buf, size_t len)
{
	while (len) {
		ssize_t n = send(sk, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf = (const char *)buf + n;
		len -= n;
	}
	return 0;
}

int ps_recv(int sk, void *buf, size_t len)
{
	while (len) {
		ssize_t n = recv(sk, buf, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		buf = (char *)buf + n;
		len -= n;
	}
	return 0;
}

const char *page_server_name(void)
{
	static char name[300];

	snprintf(name, sizeof(name), "%s:%u", opts.ps_address ?: "*", opts.ps_port);
	return name;
}

/* The addresses of --address:--port; passive: to listen on (every one without --address). */
static struct addrinfo *ps_addresses(bool passive)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) };
	struct addrinfo *res;
	char port[8];
	int ret;

	snprintf(port, sizeof(port), "%u", opts.ps_port);
	ret = getaddrinfo(opts.ps_address, port, &hints, &res);
	if (ret) {
		pr_err("page server %s: %s\n", page_server_name(), gai_strerror(ret));
		return NULL;
	}
	return res;
}

/* ------------------------------------------------------------ the dump's end ---- */

int page_server_connect(void)
{
	struct addrinfo *res = ps_addresses(false), *ai;
	int sk = -1, err = ENOENT;

	if (!res)
		return -EINVAL;
	for (ai = res; ai && sk < 0; ai = ai->ai_next) {
		sk = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (sk >= 0 && connect(sk, ai->ai_addr, ai->ai_addrlen)) {
			err = errno;
			close(sk);
			sk = -1;
		}
	}
	freeaddrinfo(res);
	if (sk < 0) {
		pr_err("cannot connect to the page server %s: %s\n", page_server_name(),
		       strerror(err));
		return -err;
	}
	pr_info("connected to the page server %s\n", page_server_name());
	return sk;
}

int page_server_finish(int sk)
{
	struct ps_iov pi = { .cmd = PS_IOV_FLUSH };
	int32_t status = -1;
	int ret = ps_send(sk, &pi, sizeof(pi));

	if (!ret)
		ret = ps_recv(sk, &status, sizeof(status));
	if (ret) {
		pr_err("page server %s: no answer to the final flush: %s\n", page_server_name(),
		       ret == -EPIPE ? "the server closed the connection" : strerror(-ret));
		return ret;
	}
	if (status) {
		pr_err("page server %s: could not store the pages (status %d; see its log)\n",
		       page_server_name(), status);
		return -EIO;
	}
	pr_info("the page server %s has stored every page\n", page_server_name());
	return 0;
}

/* ---------------------------------------------------------- the server's end ---- */

/* One dump's session: the pagemap being stored (open) and its id on the wire. */
struct ps_session {
	int sk;
	struct page_xfer xfer;
	bool open;
	uint64_t dst_id;
	uint32_t next_pages_id; /* numbered from 1, as a local dump numbers them */
	bool has_parent; /* --prev-images-dir holds the pagemap being stored: PE_PARENT runs go */
	bool flushed; /* PS_IOV_FLUSH answered: only the end of the session may follow */
};

/*
 * The image kind dst_id names. Older CRIUs put their own image numbers there: the legacy
 * values are those CRIU's server still takes for pagemap (10, 11, 16, 17) and shmem
 * pagemap (27, 28, 29, 32, 33, 34).
 */
static int ps_image_type(uint64_t dst_id, enum cr_img_type *type)
{
	switch (dst_id & PS_TYPE_MASK) {
	case PS_TYPE_PID:
	case 10:
	case 11:
	case 16:
	case 17:
		*type = CR_IMG_PAGEMAP;
		return 0;
	case PS_TYPE_SHMEM:
	case 27:
	case 28:
	case 29:
	case 32:
	case 33:
	case 34:
		*type = CR_IMG_SHMEM_PAGEMAP;
		return 0;
	}
	pr_err("page server: unknown pagemap kind %llu in destination %#llx\n",
	       (unsigned long long)(dst_id & PS_TYPE_MASK), (unsigned long long)dst_id);
	return -EINVAL;
}

/*
 * Whether the parent images (--prev-images-dir, the "parent" link) hold the pagemap that
 * dst_id names: what OPEN2 and PARENT answer, as CRIU's server does.
 */
static bool ps_parent_has(uint64_t dst_id)
{
	enum cr_img_type type;
	char name[64];
	bool has;
	int dir_fd;

	if (!opts.prev_images_dir || ps_image_type(dst_id, &type))
		return false;
	dir_fd = images_chain_dir(1);
	if (dir_fd < 0)
		return false;
	img_name(type, dst_id >> PS_TYPE_BITS, name, sizeof(name));
	has = !faccessat(dir_fd, name, F_OK, 0);
	close(dir_fd);
	return has;
}

/* The pagemap being stored is complete: its pages are written. */
static int ps_close_pagemap(struct ps_session *s)
{
	int ret = 0;

	if (s->open)
		ret = page_xfer_flush(&s->xfer);
	page_xfer_close(&s->xfer);
	s->open = false;
	return ret;
}

static int ps_open_pagemap(struct ps_session *s, uint64_t dst_id)
{
	enum cr_img_type type;
	int ret = ps_close_pagemap(s);

	if (!ret)
		ret = ps_image_type(dst_id, &type);
	if (ret)
		return ret;
	s->open = true;
	s->dst_id = dst_id;
	s->has_parent = ps_parent_has(dst_id);
	pr_info("page server: pagemap %s %llu\n", type == CR_IMG_PAGEMAP ? "of task" : "shmem",
		(unsigned long long)(dst_id >> PS_TYPE_BITS));
	return page_xfer_open(&s->xfer, -1, type, dst_id >> PS_TYPE_BITS, s->next_pages_id++, 0);
}

static ssize_t fill_from_socket(void *arg, char *buf, size_t len)
{
	int ret = ps_recv(*(int *)arg, buf, len);

	if (ret)
		pr_err("page server: cannot receive pages: %s\n",
		       ret == -EPIPE ? "the dump closed the connection" : strerror(-ret));
	return ret ? ret : (ssize_t)len;
}

/*
 * A run of pages: stored pages (PE_PRESENT, maybe also PE_LAZY: CRIU marks private
 * anonymous pages so), or, where the parent images hold the pagemap, a run they hold
 * (PE_PARENT, no data). Runs left out of the images (PE_LAZY alone) are refused: those
 * are served by the dump itself (dump --lazy-pages).
 */
static int ps_add(struct ps_session *s, const struct ps_iov *pi, uint32_t flags)
{
	bool in_parent = flags == PE_PARENT;
	int ret = 0;

	if (!(flags & PE_PRESENT) && !in_parent) {
		pr_err("page server: run at %llx has flags %#x: only stored pages and runs of the "
		       "parent images are supported (no lazy pages)\n",
		       (unsigned long long)pi->vaddr, flags);
		return -ENOTSUP;
	}
	if (flags & ~(PE_PRESENT | PE_LAZY | PE_PARENT) ||
	    ((flags & PE_PRESENT) && (flags & PE_PARENT))) {
		pr_err("page server: run at %llx has flags %#x, which no dump sends\n",
		       (unsigned long long)pi->vaddr, flags);
		return -EINVAL;
	}
	if (!pi->nr_pages || pi->nr_pages > PS_MAX_RUN_PAGES || pi->vaddr % PAGE_SIZE) {
		pr_err("page server: bad run of %llu pages at %llx\n",
		       (unsigned long long)pi->nr_pages, (unsigned long long)pi->vaddr);
		return -EINVAL;
	}
	/* CRIU's older dumps send runs without opening their pagemap first. */
	if (!s->open || s->dst_id != pi->dst_id)
		ret = ps_open_pagemap(s, pi->dst_id);
	if (!ret && in_parent && !s->has_parent) {
		pr_err("page server: run at %llx is in the parent images, which do not hold "
		       "pagemap %#llx (start the server with --prev-images-dir)\n",
		       (unsigned long long)pi->vaddr, (unsigned long long)pi->dst_id);
		return -EINVAL;
	}
	if (!ret)
		ret = page_xfer_entry(&s->xfer, pi->vaddr, pi->nr_pages, flags);
	if (!ret && in_parent)
		return 0;
	/* The pages, straight from the socket into the writer's ring. */
	if (!ret)
		ret = page_xfer_fill(&s->xfer, pi->nr_pages * PAGE_SIZE, fill_from_socket, &s->sk);
	return ret;
}

/* PS_IOV_FLUSH: everything received is written, and the dump is told so. */
static int ps_flush(struct ps_session *s)
{
	int ret = ps_close_pagemap(s);
	int32_t status = ret ? -1 : 0;
	int sent = ps_send(s->sk, &status, sizeof(status));

	if (sent)
		pr_err("page server: cannot answer the final flush: %s\n", strerror(-sent));
	s->flushed = true;
	return ret ? ret : sent;
}

/* One command. 1: the session is over (FLUSH_N_CLOSE), 0: go on, -errno (logged). */
static int ps_serve_one(struct ps_session *s, const struct ps_iov *pi)
{
	uint32_t cmd = pi->cmd & PS_CMD_MASK, flags = pi->cmd >> PS_CMD_BITS;
	char has_parent;
	int32_t parent_int;
	int ret;

	switch (cmd) {
	case PS_IOV_OPEN:
		return ps_open_pagemap(s, pi->dst_id);
	case PS_IOV_OPEN2:
		ret = ps_open_pagemap(s, pi->dst_id);
		has_parent = s->has_parent;
		return ret ? ret : ps_send(s->sk, &has_parent, 1);
	case PS_IOV_PARENT:
		parent_int = ps_parent_has(pi->dst_id);
		return ps_send(s->sk, &parent_int, sizeof(parent_int));
	case PS_IOV_ADD:
		return ps_add(s, pi, PE_PRESENT);
	case PS_IOV_HOLE:
		return ps_add(s, pi, PE_PARENT);
	case PS_IOV_ADD_F:
		return ps_add(s, pi, flags);
	case PS_IOV_FLUSH:
		return ps_flush(s);
	case PS_IOV_FLUSH_N_CLOSE:
		ret = ps_flush(s);
		return ret ? ret : 1;
	}
	pr_err("page server: command %#x is not supported (lazy pages are not served)\n",
	       pi->cmd);
	return -ENOTSUP;
}

/*
 * Commands until the dump ends the session: after PS_IOV_FLUSH, at EOF (CRIU's dump
 * closes the connection), or with PS_IOV_FLUSH_N_CLOSE. EOF before the flush: the dump
 * failed or died, and what was stored is not a dump's memory.
 */
static int ps_serve(struct ps_session *s)
{
	for (;;) {
		struct ps_iov pi;
		ssize_t n = recv(s->sk, &pi, sizeof(pi), MSG_WAITALL);
		int ret;

		if (n == 0 && s->flushed)
			return 0;
		if (n == 0) {
			pr_err("page server: the dump closed the connection before sending every "
			       "page\n");
			return -EPIPE;
		}
		if (n != sizeof(pi)) {
			pr_err("page server: cannot receive a command: %s\n",
			       n < 0 ? strerror(errno) : "the connection broke off");
			return n < 0 ? -errno : -EPIPE;
		}
		if (s->flushed) {
			pr_err("page server: command %#x after the final flush\n", pi.cmd);
			return -EINVAL;
		}
		ret = ps_serve_one(s, &pi);
		if (ret)
			return ret > 0 ? 0 : ret;
	}
}

int page_server_listen(void)
{
	struct addrinfo *res = ps_addresses(true), *ai;
	int sk = -1, err = ENOENT, one = 1;

	if (!res)
		return -1;
	for (ai = res; ai && sk < 0; ai = ai->ai_next) {
		sk = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (sk < 0) {
			err = errno;
			continue;
		}
		setsockopt(sk, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(sk, ai->ai_addr, ai->ai_addrlen) || listen(sk, 1)) {
			err = errno;
			close(sk);
			sk = -1;
		}
	}
	freeaddrinfo(res);
	/* Port 0 (the RPC's page server without one): the kernel's choice, told to the client. */
	if (sk >= 0 && !opts.ps_port) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		if (!getsockname(sk, (struct sockaddr *)&ss, &len))
			opts.ps_port = ntohs(ss.ss_family == AF_INET6
						     ? ((struct sockaddr_in6 *)&ss)->sin6_port
						     : ((struct sockaddr_in *)&ss)->sin_port);
	}
	if (sk < 0)
		pr_err("page server: cannot listen on %s: %s\n", page_server_name(), strerror(err));
	else
		pr_info("page server: listening on %s\n", page_server_name());
	return sk;
}

int cr_page_server(void)
{
	struct ps_session s = { .sk = -1, .next_pages_id = 1 };
	int listen_sk = page_server_listen(), ret = -1, one = 1;

	if (listen_sk < 0)
		return -1;
	/* --prev-images-dir: PE_PARENT runs name what the parent images hold. */
	if (opts.prev_images_dir && images_link_parent(opts.prev_images_dir))
		goto out;
	if (daemonize())
		goto out;
	/* --status-fd (and CRIU's status-ready point): the dump may connect now. */
	report_status_ready();
	if (run_action_scripts(ACT_STATUS_READY, 0))
		goto out;
	/* --lazy-pages: the other way round, the images' pages go to a lazy-pages daemon. */
	if (opts.lazy_pages) {
		ret = page_server_serve_images(listen_sk);
		goto out;
	}
	s.sk = accept4(listen_sk, NULL, NULL, SOCK_CLOEXEC);
	if (s.sk < 0) {
		pr_perror("page server: accept");
		goto out;
	}
	/* One dump per server, as CRIU's: nobody else gets in while it is served. */
	close(listen_sk);
	listen_sk = -1;
	/* The answers (OPEN2, FLUSH) are waited for: they must not sit in Nagle's queue. */
	setsockopt(s.sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = ps_serve(&s);
	if (ps_close_pagemap(&s) && !ret)
		ret = -EIO;
	if (!ret)
		pr_info("page server: session over, %u pagemaps stored\n", s.next_pages_id - 1);
out:
	if (s.sk >= 0)
		close(s.sk);
	if (listen_sk >= 0)
		close(listen_sk);
	return ret ? -1 : 0;
}
