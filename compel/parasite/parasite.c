/*
 * The parasite: runs in a dumped task's main thread (every signal blocked, on its own
 * stack in the blob's area) and serves criu's commands on a socket pair
 * (parasite-proto.h) until PARASITE_CMD_FINI. If criu goes away instead (its end of the
 * socket closes), it puts the task back by itself: closes its fds, unmaps compel's scratch
 * page and returns to the task's saved registers and signal mask through rt_sigreturn on
 * the frame criu built. Freestanding: raw syscalls only, no globals.
 */
#include <stddef.h>
#include <stdint.h>

#include "parasite-proto.h"
#include "syscalls.h"

#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define MSG_NOSIGNAL 0x4000 /* SIGPIPE would stay pending and kill the task later */
#define EINVAL 22
#define EPIPE 32
#define SIGKILL 9
#define SIGPIPE 13
#define SIGSTOP 19

#define sys_recvmsg(fd, msg, flags) sys_call(__NR_recvmsg, fd, msg, flags, 0, 0, 0)
#define sys_sendto(fd, buf, len, flags) sys_call(__NR_sendto, fd, buf, len, flags, 0, 0)
#define sys_vmsplice(fd, iov, nr, flags) sys_call(__NR_vmsplice, fd, iov, nr, flags, 0, 0)

struct kernel_iovec {
	void *base;
	size_t len;
};

struct kernel_msghdr {
	void *name;
	int namelen;
	struct kernel_iovec *iov;
	size_t iovlen;
	void *control;
	size_t controllen;
	unsigned int flags;
};

struct kernel_cmsghdr {
	size_t len;
	int level;
	int type;
	int fds[PARASITE_NR_SLOTS];
};

/* Closes fd (if open) and notes it, so that criu does not close it again. */
static void close_noted(int32_t *fd)
{
	if (*fd >= 0)
		sys_close(*fd);
	*fd = -1;
}

/* criu interrupts the parasite in its next recvmsg() and closes the socket itself. */
static int64_t fini(struct parasite_args *args)
{
	for (int i = 0; i < PARASITE_NR_SLOTS; i++)
		close_noted(&args->pipes[i]);
	return 0;
}

/* criu is gone: the task continues where it was stopped; the blob's area stays mapped. */
static void __attribute__((noreturn)) put_task_back(struct parasite_args *args)
{
	uint64_t sp = args->frame + offsetof(struct parasite_sigframe, uc);

	fini(args);
	close_noted(&args->sk);
	if (args->scratch)
		sys_munmap(args->scratch, args->scratch_len);
	/* criu died under a vmsplice(): the SIGPIPE that raised is ours, not the task's. */
	if (args->sigpipe) {
		uint64_t set = 1ULL << (SIGPIPE - 1);
		struct {
			long sec, nsec;
		} now = { 0, 0 };

		sys_rt_sigtimedwait(&set, 0, &now, sizeof(set));
	}
	asm volatile("movq %0, %%rsp\n\t"
		     "movl %1, %%eax\n\t"
		     "syscall" ::"r"(sp),
		     "i"(__NR_rt_sigreturn)
		     : "memory");
	__builtin_unreachable();
}

static int64_t take_pipes(struct parasite_args *args, const struct kernel_msghdr *msg,
			  const struct kernel_cmsghdr *cmsg)
{
	if (msg->controllen < sizeof(*cmsg) || cmsg->level != SOL_SOCKET ||
	    cmsg->type != SCM_RIGHTS || cmsg->len < sizeof(*cmsg))
		return -EINVAL;
	for (int i = 0; i < PARASITE_NR_SLOTS; i++) {
		close_noted(&args->pipes[i]);
		args->pipes[i] = cmsg->fds[i];
	}
	return 0;
}

/* The slot's runs into its pipe, which has room for them all: the bytes it took. */
static int64_t splice_slot(struct parasite_args *args, uint64_t slot, uint32_t nr)
{
	struct kernel_iovec *iov;
	int64_t done = 0;
	uint32_t i = 0;

	if (slot >= PARASITE_NR_SLOTS || nr > PARASITE_SLOT_IOVS || args->pipes[slot] < 0)
		return -EINVAL;
	iov = (struct kernel_iovec *)args->slots[slot];
	while (i < nr) {
		long got = sys_vmsplice(args->pipes[slot], &iov[i], nr - i, 0);

		if (got == -EPIPE)
			args->sigpipe = 1;
		if (got <= 0)
			return got < 0 ? got : done;
		done += got;
		/* A short vmsplice: go on from where it stopped. */
		for (; i < nr && (size_t)got >= iov[i].len; i++)
			got -= iov[i].len;
		if (got) {
			iov[i].base = (char *)iov[i].base + got;
			iov[i].len -= got;
		}
	}
	return done;
}

/* One rt_sigaction() per signal, in the task itself: 64 round trips less for criu. */
static int64_t read_sigactions(struct parasite_args *args)
{
	for (int sig = 1; sig <= PARASITE_NR_SIGNALS; sig++) {
		long ret;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		ret = sys_rt_sigaction(sig, 0, &args->sigactions[sig - 1], sizeof(uint64_t));
		if (ret)
			return ret;
	}
	return 0;
}

void __attribute__((noreturn)) parasite_main(struct parasite_args *args);

void __attribute__((used, noreturn)) parasite_main(struct parasite_args *args)
{
	for (;;) {
		struct parasite_cmd cmd;
		struct kernel_cmsghdr cmsg;
		struct kernel_iovec iov = { &cmd, sizeof(cmd) };
		struct kernel_msghdr msg = { .iov = &iov, .iovlen = 1, .control = &cmsg,
					     .controllen = sizeof(cmsg) };
		struct parasite_answer answer = { 0 };
		long got = sys_recvmsg(args->sk, &msg, 0);

		if (got != sizeof(cmd))
			put_task_back(args);
		answer.cmd = cmd.cmd;
		if (cmd.cmd == PARASITE_CMD_FINI)
			answer.ret = fini(args);
		else if (cmd.cmd == PARASITE_CMD_TAKE_PIPES)
			answer.ret = take_pipes(args, &msg, &cmsg);
		else if (cmd.cmd == PARASITE_CMD_VMSPLICE)
			answer.ret = splice_slot(args, cmd.arg, cmd.nr);
		else if (cmd.cmd == PARASITE_CMD_SIGACTIONS)
			answer.ret = read_sigactions(args);
		else
			answer.ret = -EINVAL;
		if (sys_sendto(args->sk, &answer, sizeof(answer), MSG_NOSIGNAL) != sizeof(answer))
			put_task_back(args);
	}
}
