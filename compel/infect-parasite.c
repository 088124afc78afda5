/*
 * compel: the parasite blob (compel/parasite/) loaded into an infected task and run there,
 * serving commands on a socket pair (parasite-proto.h).
 *
 * Loading, with injected syscalls: a memfd made in the task is taken by criu
 * (pidfd_getfd), sized, mapped and filled here (blob, arguments, the signal frame the
 * parasite returns through if criu dies); the task maps it (code read-execute, the rest
 * read-write) and closes its fd. From then on the injected syscalls run the blob's own
 * syscall instruction and the task's code is put back at once. A socketpair made in the
 * task gives criu one end (pidfd_getfd), the other stays in the task for the parasite.
 * The parasite then runs on the blob's stack with every signal blocked (compel_infect()).
 */
#include <cpuid.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "compel.h"
#include "infect-priv.h"
#include "parasite-proto.h"

#define LOG_PREFIX "compel: "
#include "log.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

#define AREA_PAGE 4096UL
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
/* How often a wait for the parasite's answer looks whether the task still runs it. */
#define ANSWER_POLL_MS 100

extern const char parasite_blob[], parasite_blob_end[];

struct compel_parasite {
	unsigned long remote; /* the area in the task */
	unsigned long stack_top; /* in the task */
	char *local; /* the same memfd, mapped here */
	size_t size, code_size;
	struct parasite_args *args; /* in local */
	int sk; /* criu's end of the socket pair */
	bool running;
	bool stopped; /* the task stopped under the parasite by itself (a fault): no FINI */
};

static size_t page_align(size_t len)
{
	return (len + AREA_PAGE - 1) & ~(AREA_PAGE - 1);
}

static size_t align64(size_t len)
{
	return (len + 63) & ~63UL;
}

/* A syscall injected into the task that must succeed there. */
static int remote(struct compel_ctl *ctl, const char *what, long *result, long nr,
		  unsigned long a1, unsigned long a2, unsigned long a3, unsigned long a4,
		  unsigned long a5, unsigned long a6)
{
	int ret = compel_syscall(ctl, result, nr, a1, a2, a3, a4, a5, a6);

	if (ret)
		return ret;
	if (*result < 0 && *result > -4096) {
		pr_err("task %d: remote %s failed: %s\n", ctl->pid, what, strerror(-*result));
		return (int)*result;
	}
	return 0;
}

static int remote_close(struct compel_ctl *ctl, int fd)
{
	long ignored;

	return remote(ctl, "close", &ignored, __NR_close, fd, 0, 0, 0, 0, 0);
}

static int scratch_write(struct compel_ctl *ctl, const void *buf, size_t len)
{
	struct iovec local = { .iov_base = (void *)buf, .iov_len = len };
	struct iovec rmt = { .iov_base = (void *)ctl->scratch, .iov_len = len };

	if (process_vm_writev(ctl->pid, &local, 1, &rmt, 1, 0) != (ssize_t)len) {
		int err = errno;

		pr_err("task %d: cannot write its scratch page: %s\n", ctl->pid, strerror(err));
		return -err;
	}
	return 0;
}

/* The task's fd rfd, duplicated into criu. */
static int take_fd(struct compel_ctl *ctl, int rfd)
{
	int pidfd = syscall(SYS_pidfd_open, ctl->pid, 0), fd;

	if (pidfd < 0) {
		pr_perror("task %d: pidfd_open", ctl->pid);
		return -errno;
	}
	fd = syscall(SYS_pidfd_getfd, pidfd, rfd, 0);
	if (fd < 0)
		pr_perror("task %d: cannot take its fd %d", ctl->pid, rfd);
	close(pidfd);
	return fd < 0 ? -errno : fd;
}

/* A memfd of the task, taken by criu: *rfd in the task, the return value here. */
static int make_memfd(struct compel_ctl *ctl, long *rfd)
{
	static const char name[] = "criu-parasite";
	int ret = scratch_write(ctl, name, sizeof(name));

	if (ret)
		return ret;
	/* MFD_EXEC: where vm.memfd_noexec asks for it; kernels before 6.3 refuse the flag. */
	ret = compel_syscall(ctl, rfd, __NR_memfd_create, ctl->scratch, MFD_CLOEXEC | MFD_EXEC,
			     0, 0, 0, 0);
	if (!ret && *rfd == -EINVAL)
		ret = compel_syscall(ctl, rfd, __NR_memfd_create, ctl->scratch, MFD_CLOEXEC, 0, 0,
				     0, 0);
	if (ret)
		return ret;
	if (*rfd < 0) {
		pr_err("task %d: remote memfd_create failed: %s\n", ctl->pid, strerror(-*rfd));
		return (int)*rfd;
	}
	return take_fd(ctl, *rfd);
}

/*
 * The area: the blob's code (pages of its own), then the arguments, the signal frame and
 * its xstate (64-byte aligned for XRSTOR), the stack.
 */
struct area_layout {
	size_t code, frame, fpstate, stack_top, size;
};

static void lay_out(struct area_layout *l, size_t xstate_len)
{
	size_t blob_len = parasite_blob_end - parasite_blob;

	l->code = page_align(blob_len);
	l->frame = align64(l->code + sizeof(struct parasite_args));
	l->fpstate = align64(l->frame + sizeof(struct parasite_sigframe));
	l->stack_top = (l->fpstate + xstate_len + sizeof(uint32_t) + PARASITE_STACK_SIZE) & ~15UL;
	l->size = page_align(l->stack_top);
}

/*
 * The XSAVE area (standard format): the legacy part, its software bytes (which tell
 * rt_sigreturn the frame's extent and components; ptrace leaves them to us), the header.
 */
#define XSAVE_SW_BYTES_OFF 464
#define XSAVE_HEADER_OFF 512
#define XSAVE_HEADER_SIZE 64

struct xsave_sw_bytes {
	uint32_t magic1, extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size;
};

/*
 * How much of the xstate the frame holds: up to the end of the last component the task
 * has in use (XSTATE_BV), where CPUID leaf 0xd puts it. ptrace gives the size of every
 * component the kernel knows, AMX tile data too, which rt_sigreturn refuses (falling back
 * to the legacy state alone) from a task that never asked for AMX.
 */
static uint32_t frame_xstate_size(const char *xstate, size_t len)
{
	uint64_t in_use;
	uint32_t size = XSAVE_HEADER_OFF + XSAVE_HEADER_SIZE;

	memcpy(&in_use, xstate + XSAVE_HEADER_OFF, sizeof(in_use));
	for (unsigned int i = 2; i < 64; i++) {
		unsigned int eax, ebx, ecx, edx;

		if (!(in_use & (1ULL << i)))
			continue;
		__cpuid_count(0xd, i, eax, ebx, ecx, edx);
		if (ebx + eax > size)
			size = ebx + eax;
	}
	return size < len ? size : len;
}

/* XCR0: the components the kernel enabled (what XRSTOR restores from the frame). */
static uint64_t enabled_xfeatures(void)
{
	uint32_t lo, hi;

	asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

/*
 * The frame rt_sigreturn takes the task back through if criu dies: its registers as
 * compel_infect() saved them (restart fixed up), its signal mask and its xstate as ptrace
 * gives it (the signal frame's layout), with the software bytes a signal frame has. uc_stack is left zero: a
 * sigaltstack of size 0 is refused and rt_sigreturn ignores that, keeping the task's own.
 */
static void build_frame(struct compel_ctl *ctl, struct compel_parasite *p,
			const struct area_layout *l, const void *xstate, size_t xstate_len)
{
	struct parasite_sigframe *f = (void *)(p->local + l->frame);
	const struct user_regs_struct *r = &ctl->orig_regs;
	struct x86_sigcontext *mc = &f->uc.mcontext;
	char *fpstate = p->local + l->fpstate;
	uint32_t magic2 = FP_XSTATE_MAGIC2;
	struct xsave_sw_bytes sw;

	memset(f, 0, sizeof(*f));
	f->uc.uc_flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	mc->r8 = r->r8, mc->r9 = r->r9, mc->r10 = r->r10, mc->r11 = r->r11;
	mc->r12 = r->r12, mc->r13 = r->r13, mc->r14 = r->r14, mc->r15 = r->r15;
	mc->di = r->rdi, mc->si = r->rsi, mc->bp = r->rbp, mc->bx = r->rbx;
	mc->dx = r->rdx, mc->ax = r->rax, mc->cx = r->rcx, mc->sp = r->rsp;
	mc->ip = r->rip, mc->flags = r->eflags;
	mc->cs = r->cs, mc->ss = r->ss;
	mc->fpstate = p->remote + l->fpstate;
	f->uc.sigmask = ctl->orig_sigmask;
	memcpy(fpstate, xstate, xstate_len);
	memset(&sw, 0, sizeof(sw));
	sw.magic1 = FP_XSTATE_MAGIC1;
	sw.xfeatures = enabled_xfeatures();
	sw.xstate_size = frame_xstate_size(xstate, xstate_len);
	sw.extended_size = sw.xstate_size + sizeof(magic2);
	memcpy(fpstate + XSAVE_SW_BYTES_OFF, &sw, sizeof(sw));
	memcpy(fpstate + sw.xstate_size, &magic2, sizeof(magic2));
}

/* Maps the memfd in the task: code read-execute, the rest read-write. */
static int map_in_task(struct compel_ctl *ctl, struct compel_parasite *p, long rfd)
{
	long addr, res;
	int ret;

	ret = remote(ctl, "mmap", &addr, __NR_mmap, 0, p->size, PROT_READ | PROT_WRITE,
		     MAP_SHARED, rfd, 0);
	if (ret)
		return ret;
	p->remote = addr;
	ctl->parasite_area = addr;
	ctl->parasite_area_size = p->size;
	return remote(ctl, "mprotect", &res, __NR_mprotect, addr, p->code_size,
		      PROT_READ | PROT_EXEC, 0, 0, 0);
}

/* The socket pair: criu takes one end, the task keeps the other for the parasite. */
static int make_socket(struct compel_ctl *ctl, struct compel_parasite *p)
{
	int32_t fds[2];
	long res;
	int ret;

	ret = remote(ctl, "socketpair", &res, __NR_socketpair, AF_UNIX,
		     SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl->scratch, 0, 0);
	if (!ret)
		ret = compel_scratch_read(ctl, 0, fds, sizeof(fds));
	if (ret)
		return ret;
	p->args->sk = fds[1];
	p->sk = take_fd(ctl, fds[0]);
	ret = remote_close(ctl, fds[0]);
	return p->sk < 0 ? p->sk : ret;
}

/* The area, filled here and mapped in the task; afterwards syscalls run from the blob. */
static int load_blob(struct compel_ctl *ctl, struct compel_parasite *p)
{
	struct area_layout l;
	void *xstate = NULL;
	size_t xstate_len;
	long rfd = -1;
	int fd, ret;

	ret = compel_get_xstate(ctl->pid, &xstate, &xstate_len);
	if (ret)
		return ret;
	lay_out(&l, xstate_len);
	p->size = l.size;
	p->code_size = l.code;
	fd = make_memfd(ctl, &rfd);
	if (fd < 0) {
		ret = fd;
		goto out;
	}
	if (ftruncate(fd, p->size)) {
		ret = -errno;
		pr_perror("task %d: cannot size the parasite's memfd", ctl->pid);
		goto out;
	}
	p->local = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p->local == MAP_FAILED) {
		ret = -errno;
		p->local = NULL;
		pr_perror("cannot map the parasite of %d", ctl->pid);
		goto out;
	}
	memcpy(p->local, parasite_blob, parasite_blob_end - parasite_blob);
	p->args = (struct parasite_args *)(p->local + l.code);
	p->args->sk = -1;
	for (int i = 0; i < PARASITE_NR_SLOTS; i++)
		p->args->pipes[i] = -1;
	ret = map_in_task(ctl, p, rfd);
	if (ret)
		goto out;
	p->args->scratch = ctl->scratch;
	p->args->scratch_len = COMPEL_SCRATCH_SIZE;
	p->args->frame = p->remote + l.frame;
	build_frame(ctl, p, &l, xstate, xstate_len);
	p->stack_top = p->remote + l.stack_top;
out:
	if (rfd >= 0) {
		int closed = remote_close(ctl, rfd);

		ret = ret ?: closed;
	}
	if (fd >= 0)
		close(fd);
	free(xstate);
	return ret;
}

/* Injected syscalls from now on run the blob's instruction: the task's code goes back. */
static int move_syscall_into_blob(struct compel_ctl *ctl, struct compel_parasite *p)
{
	int ret = compel_restore_code(ctl);

	if (ret)
		return ret;
	ctl->code_written = false;
	ctl->syscall_ip = p->remote + PARASITE_SYSCALL_OFF;
	return 0;
}

static int start_running(struct compel_ctl *ctl, struct compel_parasite *p)
{
	struct user_regs_struct regs = ctl->orig_regs;
	int ret;

	regs.rip = p->remote + PARASITE_ENTRY_OFF;
	regs.rsp = p->stack_top;
	regs.rdi = p->remote + p->code_size;
	regs.orig_rax = -1UL; /* no restart of whatever syscall the task sat in */
	ret = compel_set_regs(ctl->pid, &regs);
	if (ret)
		return ret;
	if (ptrace(PTRACE_CONT, ctl->pid, NULL, NULL)) {
		pr_perror("cannot start the parasite in %d", ctl->pid);
		return -errno;
	}
	p->running = true;
	return 0;
}

int compel_parasite_start(struct compel_ctl *ctl)
{
	struct compel_parasite *p = calloc(1, sizeof(*p));
	int ret;

	if (!p) {
		pr_err("no memory for the parasite of %d\n", ctl->pid);
		return -ENOMEM;
	}
	p->sk = -1;
	ctl->parasite = p;
	ret = load_blob(ctl, p);
	if (!ret)
		ret = move_syscall_into_blob(ctl, p);
	if (!ret)
		ret = make_socket(ctl, p);
	if (!ret)
		ret = start_running(ctl, p);
	if (!ret)
		pr_debug("task %d: parasite running at %#lx\n", ctl->pid, p->remote);
	return ret;
}

struct parasite_args *compel_parasite_args(struct compel_ctl *ctl)
{
	return ctl->parasite->args;
}

int compel_parasite_send(struct compel_ctl *ctl, const struct parasite_cmd *cmd, const int *fds,
			 unsigned int nr_fds)
{
	struct iovec iov = { .iov_base = (void *)cmd, .iov_len = sizeof(*cmd) };
	char control[CMSG_SPACE(sizeof(int) * PARASITE_NR_SLOTS)] = { 0 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cmsg;

	if (nr_fds > PARASITE_NR_SLOTS)
		return -EINVAL;
	if (nr_fds) {
		msg.msg_control = control;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nr_fds);
	}
	if (sendmsg(ctl->parasite->sk, &msg, MSG_NOSIGNAL) != sizeof(*cmd)) {
		pr_perror("task %d: cannot send command %u to its parasite", ctl->pid, cmd->cmd);
		return -errno ?: -EIO;
	}
	return 0;
}

/* Whether the task stopped under the parasite (a fault in it): logged, and remembered. */
static bool parasite_stopped(struct compel_ctl *ctl)
{
	int status;

	if (waitpid(ctl->pid, &status, __WALL | WNOHANG) != ctl->pid)
		return false;
	if (WIFSTOPPED(status))
		pr_err("task %d stopped under its parasite (signal %d)\n", ctl->pid,
		       WSTOPSIG(status));
	else
		pr_err("task %d ended under its parasite (status %#x)\n", ctl->pid, status);
	ctl->parasite->stopped = true;
	ctl->parasite->running = false;
	return true;
}

int compel_parasite_recv(struct compel_ctl *ctl, struct parasite_answer *answer)
{
	struct compel_parasite *p = ctl->parasite;
	struct pollfd pfd = { .fd = p->sk, .events = POLLIN };
	ssize_t got;

	/* Mostly the answer is there already: poll only when it is not. */
	while ((got = recv(p->sk, answer, sizeof(*answer), MSG_DONTWAIT)) < 0 &&
	       (errno == EAGAIN || errno == EINTR)) {
		if (poll(&pfd, 1, ANSWER_POLL_MS) == 0 && parasite_stopped(ctl))
			return -EIO;
	}
	if (got != sizeof(*answer)) {
		pr_err("task %d: no answer from its parasite: %s\n", ctl->pid,
		       got < 0 ? strerror(errno) : "connection closed");
		parasite_stopped(ctl);
		return -EIO;
	}
	return 0;
}

/* FINI answered: the parasite waits in recvmsg(), where it is stopped. */
static int stop_parasite(struct compel_ctl *ctl, struct compel_parasite *p)
{
	struct parasite_cmd cmd = { .cmd = PARASITE_CMD_FINI };
	struct parasite_answer answer;
	int ret = compel_parasite_send(ctl, &cmd, NULL, 0);

	if (!ret)
		ret = compel_parasite_recv(ctl, &answer);
	if (p->stopped)
		return ret;
	/* Whatever the answer: the task must come back to criu. */
	p->running = false;
	return compel_interrupt(ctl->pid) ?: ret;
}

int compel_parasite_cure(struct compel_ctl *ctl)
{
	struct compel_parasite *p = ctl->parasite;
	int ret = 0, step;

	if (p->running)
		ret = stop_parasite(ctl, p);
	/* Mapped in the task: the fd numbers there are in the shared arguments. */
	if (p->args && ctl->parasite_area) {
		for (int i = 0; i < PARASITE_NR_SLOTS; i++)
			if (p->args->pipes[i] >= 0 && (step = remote_close(ctl, p->args->pipes[i])))
				ret = ret ?: step;
		if (p->args->sk >= 0 && (step = remote_close(ctl, p->args->sk)))
			ret = ret ?: step;
	}
	if (p->sk >= 0)
		close(p->sk);
	if (p->local)
		munmap(p->local, p->size);
	free(p);
	ctl->parasite = NULL;
	return ret;
}

/* The blob's area goes last: the syscall unmapping it is its own. */
int compel_parasite_unmap(struct compel_ctl *ctl)
{
	long res;

	return remote(ctl, "munmap", &res, __NR_munmap, ctl->parasite_area,
		      ctl->parasite_area_size, 0, 0, 0, 0);
}
