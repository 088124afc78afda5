/*
 * Registers survive: the dump happens while hand-written code spins with known values
 * in 14 general registers, ymm0-15, all eight x87 registers (with a non-default
 * control word) and a non-default MXCSR; after restore the same code stores them.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "zdtmtst.h"

#define NR_GPRS 14 /* rax rbx rcx rdx rsi rdi r8-r15: all but rsp and rbp */
#define GPR_NAMES "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", \
		  "r12", "r13", "r14", "r15"

/* Read by name from the asm below, hence global */
uint64_t regs_expected_gpr[NR_GPRS], regs_seen_gpr[NR_GPRS];
unsigned char regs_expected_ymm[16][32], regs_seen_ymm[16][32];
long double regs_expected_x87[8], regs_seen_x87[8];
/* round toward zero and flush-to-zero: not what a fresh process has (0x1f80) */
uint32_t regs_expected_mxcsr = 0xff80, regs_seen_mxcsr, regs_default_mxcsr = 0x1f80;
/* round toward zero, extended precision: not the default 0x037f */
uint16_t regs_expected_fpucw = 0x0f7f, regs_seen_fpucw;
const char *regs_ready_tmp, *regs_ready_final;
int64_t regs_rename_result;

#define LOAD_YMM(n) "vmovdqu regs_expected_ymm+" #n "*32(%%rip), %%ymm" #n "\n\t"
#define STORE_YMM(n) "vmovdqu %%ymm" #n ", regs_seen_ymm+" #n "*32(%%rip)\n\t"
#define LOAD_GPR(reg, n) "mov regs_expected_gpr+" #n "*8(%%rip), %%" reg "\n\t"
#define STORE_GPR(reg, n) "mov %%" reg ", regs_seen_gpr+" #n "*8(%%rip)\n\t"
#define LOAD_X87(n) "fldt regs_expected_x87+" #n "*16(%%rip)\n\t"
/* st(0) is the last one loaded: pop in reverse so seen[n] pairs with expected[n] */
#define STORE_X87(n) "fstpt regs_seen_x87+" #n "*16(%%rip)\n\t"

static void load_spin_store(void)
{
	asm volatile(
		LOAD_YMM(0) LOAD_YMM(1) LOAD_YMM(2) LOAD_YMM(3) LOAD_YMM(4) LOAD_YMM(5)
		LOAD_YMM(6) LOAD_YMM(7) LOAD_YMM(8) LOAD_YMM(9) LOAD_YMM(10) LOAD_YMM(11)
		LOAD_YMM(12) LOAD_YMM(13) LOAD_YMM(14) LOAD_YMM(15)
		"ldmxcsr regs_expected_mxcsr(%%rip)\n\t"
		"fninit\n\t"
		"fldcw regs_expected_fpucw(%%rip)\n\t"
		LOAD_X87(0) LOAD_X87(1) LOAD_X87(2) LOAD_X87(3)
		LOAD_X87(4) LOAD_X87(5) LOAD_X87(6) LOAD_X87(7)
		/* tell the runner we are ready: rename(2) keeps all but rax, rcx, r11 */
		"mov $82, %%eax\n\t"
		"mov regs_ready_tmp(%%rip), %%rdi\n\t"
		"mov regs_ready_final(%%rip), %%rsi\n\t"
		"syscall\n\t"
		"mov %%rax, regs_rename_result(%%rip)\n\t"
		LOAD_GPR("rax", 0) LOAD_GPR("rbx", 1) LOAD_GPR("rcx", 2) LOAD_GPR("rdx", 3)
		LOAD_GPR("rsi", 4) LOAD_GPR("rdi", 5) LOAD_GPR("r8", 6) LOAD_GPR("r9", 7)
		LOAD_GPR("r10", 8) LOAD_GPR("r11", 9) LOAD_GPR("r12", 10) LOAD_GPR("r13", 11)
		LOAD_GPR("r14", 12) LOAD_GPR("r15", 13)
		/* the dump and the SIGTERM both land somewhere in this loop */
		"1: pause\n\t"
		"cmpl $0, test_sigterm_received(%%rip)\n\t"
		"je 1b\n\t"
		STORE_GPR("rax", 0) STORE_GPR("rbx", 1) STORE_GPR("rcx", 2) STORE_GPR("rdx", 3)
		STORE_GPR("rsi", 4) STORE_GPR("rdi", 5) STORE_GPR("r8", 6) STORE_GPR("r9", 7)
		STORE_GPR("r10", 8) STORE_GPR("r11", 9) STORE_GPR("r12", 10) STORE_GPR("r13", 11)
		STORE_GPR("r14", 12) STORE_GPR("r15", 13)
		STORE_YMM(0) STORE_YMM(1) STORE_YMM(2) STORE_YMM(3) STORE_YMM(4) STORE_YMM(5)
		STORE_YMM(6) STORE_YMM(7) STORE_YMM(8) STORE_YMM(9) STORE_YMM(10) STORE_YMM(11)
		STORE_YMM(12) STORE_YMM(13) STORE_YMM(14) STORE_YMM(15)
		"stmxcsr regs_seen_mxcsr(%%rip)\n\t"
		"fnstcw regs_seen_fpucw(%%rip)\n\t"
		STORE_X87(7) STORE_X87(6) STORE_X87(5) STORE_X87(4)
		STORE_X87(3) STORE_X87(2) STORE_X87(1) STORE_X87(0)
		/* back to the state the C code around us assumes */
		"ldmxcsr regs_default_mxcsr(%%rip)\n\t"
		"fninit\n\t"
		"vzeroupper\n\t"
		:
		:
		: "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
		  "r13", "r14", "r15", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
		  "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
		  "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)", "memory",
		  "cc");
}

static void fill_expected(void)
{
	pattern_fill(regs_expected_gpr, sizeof(regs_expected_gpr), 90);
	pattern_fill(regs_expected_ymm, sizeof(regs_expected_ymm), 91);
	for (int i = 0; i < 8; i++)
		regs_expected_x87[i] = (i + 1) * 1.0000000000000000001L / 3.0L + i * 1e300L;
}

static void compare_seen(void)
{
	static const char *const gpr_names[NR_GPRS] = { GPR_NAMES };

	if (regs_rename_result)
		test_fail("rename of the pidfile failed: %ld", (long)regs_rename_result);
	for (int i = 0; i < NR_GPRS; i++)
		if (regs_seen_gpr[i] != regs_expected_gpr[i])
			test_fail("%s = %#lx, expected %#lx", gpr_names[i],
				  (unsigned long)regs_seen_gpr[i],
				  (unsigned long)regs_expected_gpr[i]);
	for (int i = 0; i < 16; i++)
		for (int byte = 0; byte < 32; byte++)
			if (regs_seen_ymm[i][byte] != regs_expected_ymm[i][byte])
				test_fail("ymm%d byte %d = %#x, expected %#x (%s half)", i, byte,
					  regs_seen_ymm[i][byte], regs_expected_ymm[i][byte],
					  byte < 16 ? "xmm" : "upper");
	for (int i = 0; i < 8; i++)
		if (memcmp(&regs_seen_x87[i], &regs_expected_x87[i], 10))
			test_fail("x87 register %d differs: %La, expected %La", i,
				  regs_seen_x87[i], regs_expected_x87[i]);
	if (regs_seen_mxcsr != regs_expected_mxcsr)
		test_fail("MXCSR = %#x, expected %#x", regs_seen_mxcsr, regs_expected_mxcsr);
	if (regs_seen_fpucw != regs_expected_fpucw)
		test_fail("x87 control word = %#x, expected %#x", regs_seen_fpucw,
			  regs_expected_fpucw);
}

int main(int argc, char **argv)
{
	sigset_t term_set;

	test_init(argc, argv);
	fill_expected();
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
