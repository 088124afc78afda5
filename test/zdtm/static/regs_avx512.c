/*
 * The AVX-512 part of the xstate survives: the dump happens while hand-written code
 * spins with known values in zmm0-31 and the opmask registers k0-7; after restore the
 * same code stores them. (The runner runs this only on CPUs with avx512f and avx512bw.)
 */
#include <signal.h>
#include <stdint.h>

#include "zdtmtst.h"

/* Read by name from the asm below, hence global */
unsigned char regs_expected_zmm[32][64], regs_seen_zmm[32][64];
uint64_t regs_expected_k[8], regs_seen_k[8];
const char *regs_ready_tmp, *regs_ready_final;
int64_t regs_rename_result;

#define LOAD_ZMM(n) "vmovdqu64 regs_expected_zmm+" #n "*64(%%rip), %%zmm" #n "\n\t"
#define STORE_ZMM(n) "vmovdqu64 %%zmm" #n ", regs_seen_zmm+" #n "*64(%%rip)\n\t"
#define LOAD_K(n) "kmovq regs_expected_k+" #n "*8(%%rip), %%k" #n "\n\t"
#define STORE_K(n) "kmovq %%k" #n ", regs_seen_k+" #n "*8(%%rip)\n\t"
#define ZMM_8(op, a, b, c, d, e, f, g, h) op(a) op(b) op(c) op(d) op(e) op(f) op(g) op(h)

__attribute__((target("avx512f,avx512bw"))) static void load_spin_store(void)
{
	asm volatile(
		ZMM_8(LOAD_ZMM, 0, 1, 2, 3, 4, 5, 6, 7) ZMM_8(LOAD_ZMM, 8, 9, 10, 11, 12, 13, 14, 15)
		ZMM_8(LOAD_ZMM, 16, 17, 18, 19, 20, 21, 22, 23)
		ZMM_8(LOAD_ZMM, 24, 25, 26, 27, 28, 29, 30, 31)
		ZMM_8(LOAD_K, 0, 1, 2, 3, 4, 5, 6, 7)
		/* tell the runner we are ready: rename(2) keeps vector and mask registers */
		"mov $82, %%eax\n\t"
		"mov regs_ready_tmp(%%rip), %%rdi\n\t"
		"mov regs_ready_final(%%rip), %%rsi\n\t"
		"syscall\n\t"
		"mov %%rax, regs_rename_result(%%rip)\n\t"
		/* the dump and the SIGTERM both land somewhere in this loop */
		"1: pause\n\t"
		"cmpl $0, test_sigterm_received(%%rip)\n\t"
		"je 1b\n\t"
		ZMM_8(STORE_ZMM, 0, 1, 2, 3, 4, 5, 6, 7) ZMM_8(STORE_ZMM, 8, 9, 10, 11, 12, 13, 14, 15)
		ZMM_8(STORE_ZMM, 16, 17, 18, 19, 20, 21, 22, 23)
		ZMM_8(STORE_ZMM, 24, 25, 26, 27, 28, 29, 30, 31)
		ZMM_8(STORE_K, 0, 1, 2, 3, 4, 5, 6, 7)
		"vzeroupper\n\t"
		:
		:
		: "rax", "rcx", "rdx", "rsi", "rdi", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
		  "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
		  "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",
		  "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "memory", "cc");
}

static void compare_seen(void)
{
	if (regs_rename_result)
		test_fail("rename of the pidfile failed: %ld", (long)regs_rename_result);
	for (int i = 0; i < 32; i++)
		for (int byte = 0; byte < 64; byte++)
			if (regs_seen_zmm[i][byte] != regs_expected_zmm[i][byte])
				test_fail("zmm%d byte %d = %#x, expected %#x", i, byte,
					  regs_seen_zmm[i][byte], regs_expected_zmm[i][byte]);
	for (int i = 0; i < 8; i++)
		if (regs_seen_k[i] != regs_expected_k[i])
			test_fail("k%d = %#lx, expected %#lx", i, (unsigned long)regs_seen_k[i],
				  (unsigned long)regs_expected_k[i]);
}

int main(int argc, char **argv)
{
	sigset_t term_set;

	test_init(argc, argv);
	pattern_fill(regs_expected_zmm, sizeof(regs_expected_zmm), 95);
	pattern_fill(regs_expected_k, sizeof(regs_expected_k), 96);
	test_ready_prepare(&regs_ready_tmp, &regs_ready_final);

	/* the handler only sets test_sigterm_received; sigreturn gives back every register */
	sigemptyset(&term_set);
	sigaddset(&term_set, SIGTERM);
	if (sigprocmask(SIG_UNBLOCK, &term_set, NULL))
		test_fail_errno("unblock SIGTERM");
	load_spin_store();

	compare_seen();
	test_pass();
}
