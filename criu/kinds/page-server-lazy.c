/*
 * The lazy source's end of the page server protocol (page-server.h): a lazy-pages daemon
 * asks for pages (PS_IOV_GET), possibly several requests ahead, and each is answered in
 * order with PS_IOV_ADD_F/PE_PRESENT and the pages, as CRIU's source answers. The pages of
 * one answer are read while a sender thread is still sending the ones before, so the
 * reading (a copy out of the tasks) and the sending (a copy into the socket) overlap.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "page-server.h"

#define PAGE_SIZE 4096UL

/* The most pages one answer carries; a daemon asking for more gets them in several. */
#define PS_LAZY_MAX_PAGES 512
/* Answers read and waiting for the sender, or being sent. */
#define PS_LAZY_SLOTS 3

struct lazy_answer {
	struct ps_iov iov;
	uint8_t *pages; /* PS_LAZY_MAX_PAGES pages */
};

/* The answers in flight: a ring, nr_queued of them from head on. */
struct lazy_sender {
	int sk;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct lazy_answer slots[PS_LAZY_SLOTS];
	unsigned int head, nr_queued;
	bool stop;
	int err; /* the sender's error (-errno): it stopped sending */
};

static void *sender_main(void *arg)
{
	struct lazy_sender *s = arg;
	struct lazy_answer *a;
	int ret;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->nr_queued && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->nr_queued)
			break;
		a = &s->slots[s->head];
		pthread_mutex_unlock(&s->lock);

		ret = ps_send(s->sk, &a->iov, sizeof(a->iov));
		if (!ret)
			ret = ps_send(s->sk, a->pages, a->iov.nr_pages * PAGE_SIZE);

		pthread_mutex_lock(&s->lock);
		s->head = (s->head + 1) % PS_LAZY_SLOTS;
		s->nr_queued--;
		if (ret) {
			s->err = ret;
			s->nr_queued = 0;
		}
		pthread_cond_broadcast(&s->cond);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* A slot to read the next answer into, once one is free; NULL if the sender failed. */
static struct lazy_answer *free_slot(struct lazy_sender *s)
{
	struct lazy_answer *a = NULL;

	pthread_mutex_lock(&s->lock);
	while (s->nr_queued == PS_LAZY_SLOTS && !s->err)
		pthread_cond_wait(&s->cond, &s->lock);
	if (!s->err)
		a = &s->slots[(s->head + s->nr_queued) % PS_LAZY_SLOTS];
	pthread_mutex_unlock(&s->lock);
	return a;
}

static void queue_answer(struct lazy_sender *s)
{
	pthread_mutex_lock(&s->lock);
	s->nr_queued++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Every answer sent: 0, or the sender's error. */
static int wait_sent(struct lazy_sender *s)
{
	int err;

	pthread_mutex_lock(&s->lock);
	while (s->nr_queued && !s->err)
		pthread_cond_wait(&s->cond, &s->lock);
	err = s->err;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static int sender_failed(struct lazy_sender *s)
{
	pr_err("lazy source: cannot send pages to the lazy-pages daemon: %s\n", strerror(-s->err));
	return s->err;
}

/* PS_IOV_GET: CRIU's answer, PS_IOV_ADD_F/PE_PRESENT with the run cut to what follows. */
static int answer_get(struct lazy_sender *s, struct ps_iov *pi, ps_lazy_get_fn get, void *arg)
{
	uint64_t nr = pi->nr_pages < PS_LAZY_MAX_PAGES ? pi->nr_pages : PS_LAZY_MAX_PAGES;
	struct lazy_answer *a;
	int ret;

	if (!nr) {
		pr_err("lazy source: a request for no pages at %#llx\n",
		       (unsigned long long)pi->vaddr);
		return -EINVAL;
	}
	a = free_slot(s);
	if (!a)
		return sender_failed(s);
	ret = get(arg, pi->dst_id, pi->vaddr, &nr, a->pages);
	if (ret)
		return ret;
	a->iov = *pi;
	a->iov.cmd = PE_PRESENT << PS_CMD_BITS | PS_IOV_ADD_F;
	a->iov.nr_pages = nr;
	queue_answer(s);
	return 0;
}

/* Every answer sent, then the daemon's end answered with a status. */
static int answer_flush(struct lazy_sender *s)
{
	int32_t status = 0;
	int ret = wait_sent(s);

	if (ret)
		return sender_failed(s);
	ret = ps_send(s->sk, &status, sizeof(status));
	if (ret)
		pr_err("lazy source: cannot answer the daemon's end: %s\n", strerror(-ret));
	return ret;
}

/* Requests until the daemon says it has everything (PS_IOV_FLUSH or FLUSH_N_CLOSE). */
static int lazy_session(struct lazy_sender *s, ps_lazy_get_fn get, void *arg)
{
	struct ps_iov pi;
	int ret;

	for (;;) {
		ret = ps_recv(s->sk, &pi, sizeof(pi));
		if (ret) {
			pr_err("lazy source: the lazy-pages daemon went away before it had every "
			       "page: %s\n",
			       ret == -EPIPE ? "it closed the connection" : strerror(-ret));
			return ret;
		}
		switch (pi.cmd) {
		case PS_IOV_GET:
			ret = answer_get(s, &pi, get, arg);
			if (ret)
				return ret;
			continue;
		case PS_IOV_FLUSH:
		case PS_IOV_FLUSH_N_CLOSE:
			return answer_flush(s);
		}
		pr_err("lazy source: command %#x is not one a lazy-pages daemon sends\n", pi.cmd);
		return -EINVAL;
	}
}

static int serve_connection(int sk, ps_lazy_get_fn get, void *arg)
{
	struct lazy_sender s = { .sk = sk };
	uint8_t *pages = malloc(PS_LAZY_SLOTS * PS_LAZY_MAX_PAGES * PAGE_SIZE);
	pthread_t sender;
	int ret;

	if (!pages) {
		pr_err("lazy source: no memory for the pages buffers\n");
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < PS_LAZY_SLOTS; i++)
		s.slots[i].pages = pages + i * PS_LAZY_MAX_PAGES * PAGE_SIZE;
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	ret = -pthread_create(&sender, NULL, sender_main, &s);
	if (ret) {
		pr_err("lazy source: cannot start the sender thread: %s\n", strerror(-ret));
		free(pages);
		return ret;
	}
	ret = lazy_session(&s, get, arg);
	pthread_mutex_lock(&s.lock);
	s.stop = true;
	s.nr_queued = 0; /* after a failure: nothing more is sent */
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	pthread_join(sender, NULL);
	free(pages);
	return ret;
}

int page_server_serve_lazy(int listen_sk, ps_lazy_get_fn get, void *arg)
{
	int sk, ret, one = 1;

	sk = accept4(listen_sk, NULL, NULL, SOCK_CLOEXEC);
	if (sk < 0) {
		ret = -errno;
		pr_perror("lazy source: accept");
		return ret;
	}
	/* One daemon, as CRIU's: nobody else gets in while it is served. */
	setsockopt(sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pr_info("lazy source: the lazy-pages daemon connected\n");
	ret = serve_connection(sk, get, arg);
	if (!ret)
		pr_info("lazy source: the lazy-pages daemon has every page\n");
	close(sk);
	return ret;
}
