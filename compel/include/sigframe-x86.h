/*
 * The x86_64 signal frame's context as rt_sigreturn reads it (the uapi asm/sigcontext.h
 * and asm/ucontext.h layouts, in fixed-width types a freestanding blob can use).
 */
#ifndef COMPEL_SIGFRAME_X86_H
#define COMPEL_SIGFRAME_X86_H

#include <stdint.h>

#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4

struct x86_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t di, si, bp, bx, dx, ax, cx, sp, ip, flags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2;
	uint64_t fpstate;
	uint64_t reserved1[8];
};

struct x86_ucontext {
	uint64_t uc_flags;
	uint64_t uc_link;
	uint64_t ss_sp;
	int32_t ss_flags;
	uint32_t ss_pad;
	uint64_t ss_size;
	struct x86_sigcontext mcontext;
	uint64_t sigmask;
};

#endif
