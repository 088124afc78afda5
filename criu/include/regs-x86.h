/*
 * x86_64 registers between the layouts the kernel uses (user_regs_struct, the
 * NT_X86_XSTATE buffer, struct user_desc) and core_entry.thread_info, field by field.
 * Both directions live here, so a round trip can be checked in one place.
 */
#ifndef CR_REGS_X86_H
#define CR_REGS_X86_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "restorer-args.h"
#include "core-x86.pb-c.h"

struct user_regs_struct; /* <sys/user.h> */
struct user_desc; /* <asm/ldt.h> */

/* ---- general purpose registers ---- */

/* re is initialised and filled (mode NATIVE). */
void gpregs_to_image(const struct user_regs_struct *regs, UserX86RegsEntry *re);
/* A 64-bit thread's registers for the restorer; -EINVAL (logged, naming who) for compat ones. */
int gpregs_from_image(const UserX86RegsEntry *re, struct rst_gpregs *regs, const char *who);

/* ---- FPU and extended state ---- */

/*
 * One thread's fpregs image and the arrays its repeated fields point into: the legacy
 * FXSAVE area, then each XSAVE component this CPU has (xsave_to_image() says which).
 */
struct x86_fpregs_image {
	UserX86FpregsEntry fpregs;
	UserX86XsaveEntry xsave;
	uint32_t st_space[32], xmm_space[64], padding[24];
	uint32_t ymmh_space[64], pkru[2];
	uint64_t bndreg_state[8], bndcsr_state[2];
	uint64_t opmask_reg[8], zmm_upper[64], hi16_zmm[128];
};

/*
 * Split an NT_X86_XSTATE buffer (standard format, len bytes) into fields. A component in
 * use that the image has no field for (AMX tiles, ...) is refused: -ENOTSUP, logged
 * naming who. 0 or -errno.
 */
int xsave_to_image(const void *buf, size_t len, struct x86_fpregs_image *img, const char *who);

/*
 * The kernel's size of the standard-format XSAVE buffer on this machine (what a signal
 * frame carries and NT_X86_XSTATE gives), and the features it covers (XCR0 without
 * the dynamically enabled AMX tile data).
 */
size_t xsave_user_size(void);
uint64_t xsave_user_features(void);

/*
 * Rebuild a standard-format XSAVE buffer of len (xsave_user_size()) bytes from fields.
 * Components absent from the image stay zero (their initial state) and out of
 * XSTATE_BV. State this CPU cannot hold, or arrays of the wrong length, are refused
 * (-EINVAL, logged naming who). The software-reserved bytes (464..511) are the image's
 * padding; the caller describes the frame there. 0 or -errno.
 */
int xsave_from_image(const UserX86FpregsEntry *fp, void *buf, size_t len, const char *who);

/*
 * Whether the fields of img give back buf (len bytes) exactly: every byte the kernel
 * restores is in the image. -EIO (logged, naming the first byte that differs) if not.
 */
int xsave_check_round_trip(const void *buf, size_t len, const struct x86_fpregs_image *img,
			   const char *who);

/* ---- TLS descriptors in the GDT (set_thread_area) ---- */

#define X86_GDT_TLS_FIRST 12
#define X86_GDT_TLS_NUM 3

struct x86_tls_image {
	UserDescT desc[X86_GDT_TLS_NUM];
	UserDescT *ptrs[X86_GDT_TLS_NUM];
};

/* The X86_GDT_TLS_NUM slots (X86_GDT_TLS_FIRST on) as get_thread_area() gave them. */
void tls_to_image(const struct user_desc *descs, struct x86_tls_image *img);
/*
 * The restorer does not set GDT slots (64-bit code uses fs_base): a slot in use is
 * refused with -ENOTSUP, logged naming who.
 */
int tls_check_unused(const ThreadInfoX86 *ti, const char *who);

#endif
