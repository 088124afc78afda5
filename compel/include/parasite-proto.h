/*
 * What criu (compel/infect-parasite.c) and the parasite blob (compel/parasite/) share: the
 * layout of the area the blob lives in, its arguments, and the commands on their socket.
 * Freestanding: the blob includes it too.
 */
#ifndef COMPEL_PARASITE_PROTO_H
#define COMPEL_PARASITE_PROTO_H

#include <stdint.h>

#include "sigframe-x86.h"

/*
 * Offsets in the blob's code: a syscall instruction compel's injected syscalls run while
 * the blob is mapped (the task's own code is put back as soon as it is), and the entry
 * (rdi: the arguments, rsp: the top of the blob's stack, 16-byte aligned).
 */
#define PARASITE_SYSCALL_OFF 0
#define PARASITE_ENTRY_OFF 8
#define PARASITE_STACK_SIZE (16u << 10)

/* vmsplice batches: two slots, criu fills one while the parasite splices the other. */
#define PARASITE_NR_SLOTS 2
#define PARASITE_SLOT_IOVS 1024 /* UIO_MAXIOV: one vmsplice() per batch */

/* The frame the parasite rt_sigreturns through if criu dies. */
struct parasite_sigframe {
	uint64_t pretcode; /* rt_sigreturn takes the frame at sp - 8: sp points past this */
	struct x86_ucontext uc;
};

struct parasite_iov {
	uint64_t base, len;
};

#define PARASITE_NR_SIGNALS 64

/* The kernel's struct sigaction as rt_sigaction() reads it on x86_64. */
struct parasite_sigaction {
	uint64_t handler, flags, restorer, mask;
};

/* At the start of the blob's writable part; criu writes it before the blob runs. */
struct parasite_args {
	/*
	 * The task's fds the parasite uses: its end of the socket pair, the pipes' write
	 * ends. The parasite sets each to -1 once closed; criu closes what is left.
	 */
	int32_t sk;
	int32_t pipes[PARASITE_NR_SLOTS];
	uint32_t sigpipe; /* the parasite raised SIGPIPE (a pipe's reader went away) */
	/* Put back if criu goes away: the scratch page compel maps, and the task itself. */
	uint64_t scratch, scratch_len;
	uint64_t frame; /* the parasite_sigframe's address in the task */
	struct parasite_iov slots[PARASITE_NR_SLOTS][PARASITE_SLOT_IOVS];
	/* PARASITE_CMD_SIGACTIONS: signal n's at n - 1 (SIGKILL's and SIGSTOP's left alone). */
	struct parasite_sigaction sigactions[PARASITE_NR_SIGNALS];
};

enum parasite_cmd_nr {
	/* The pipes' write ends come with it (SCM_RIGHTS, PARASITE_NR_SLOTS of them). */
	PARASITE_CMD_TAKE_PIPES = 1,
	/* arg: a slot; nr: its iovecs, vmspliced into the slot's pipe. Answer: bytes. */
	PARASITE_CMD_VMSPLICE,
	/* Every signal's disposition into the arguments' sigactions. Answer: 0 or -errno. */
	PARASITE_CMD_SIGACTIONS,
	/*
	 * The parasite closes the pipes and answers, then waits for a next command, where
	 * criu interrupts it (PTRACE_INTERRUPT: no signal, no trap that would reset a
	 * disposition) and puts the task back.
	 */
	PARASITE_CMD_FINI,
};

struct parasite_cmd {
	uint32_t cmd;
	uint32_t nr;
	uint64_t arg;
};

struct parasite_answer {
	uint32_t cmd;
	uint32_t pad;
	int64_t ret; /* >= 0, or -errno */
};

#endif
