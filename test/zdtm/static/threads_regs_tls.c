/*
 * Eight threads keep their own state: each is dumped inside hand-written code holding
 * its own values (read from its TLS through %fs) in 14 general registers, and after
 * restore checks those, its tid, TLS bytes, fs/gs base, blocked mask, sigaltstack, own
 * pending signal, tid address, robust list and rseq registration.
 */
#include <asm/prctl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NR_THREADS 8
#define NR_GPRS 14 /* rax rbx rcx rdx rsi rdi r8-r15: all but rsp and rbp */
#define TLS_BYTES 512
#define ALT_STACK_BASE (16 * 1024)

/* Read and written by the asm below by name (%fs-relative: local-exec TLS of the program). */
__thread uint64_t tls_expected_gpr[NR_GPRS], tls_seen_gpr[NR_GPRS];
static __thread unsigned char tls_pattern[TLS_BYTES];
/* Counted by each thread with its registers loaded; set once the runner's SIGTERM came. */
atomic_int threads_loaded;
volatile int threads_go;

struct thread_state {
	pid_t tid;
	unsigned long fs_base, gs_base;
	sigset_t blocked;
	stack_t altstack;
	void *tid_address;
	void *robust_head;
	size_t robust_len;
};

struct thread_slot {
	pthread_t handle;
	unsigned int idx;
	struct thread_state before, after;
	unsigned char altstack_mem[ALT_STACK_BASE + NR_THREADS * 4096];
	unsigned char gs_target[64];
	char failure[256];
};

static struct thread_slot slots[NR_THREADS];

static void slot_fail(struct thread_slot *slot, const char *fmt, ...)
{
	va_list ap;
	int len;

	if (slot->failure[0])
		return;
	len = snprintf(slot->failure, sizeof(slot->failure), "thread %u: ", slot->idx);
	va_start(ap, fmt);
	vsnprintf(slot->failure + len, sizeof(slot->failure) - len, fmt, ap);
	va_end(ap);
}

/* The signal only this thread queues for itself and blocks. */
static int own_signal(unsigned int idx)
{
	return SIGRTMIN + 2 + idx;
}

static int read_state(struct thread_slot *slot, struct thread_state *st)
{
	st->tid = gettid();
	if (syscall(SYS_arch_prctl, ARCH_GET_FS, &st->fs_base) ||
	    syscall(SYS_arch_prctl, ARCH_GET_GS, &st->gs_base) ||
	    pthread_sigmask(SIG_BLOCK, NULL, &st->blocked) || sigaltstack(NULL, &st->altstack) ||
	    prctl(PR_GET_TID_ADDRESS, &st->tid_address) ||
	    syscall(SYS_get_robust_list, 0, &st->robust_head, &st->robust_len)) {
		slot_fail(slot, "reading its state: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Everything that is per thread set to values no other thread has. */
static int set_up_thread(struct thread_slot *slot)
{
	unsigned int idx = slot->idx;
	stack_t altstack = { .ss_sp = slot->altstack_mem,
			     .ss_size = ALT_STACK_BASE + idx * 4096 };
	sigset_t block;

	for (unsigned int i = 0; i < NR_GPRS; i++)
		tls_expected_gpr[i] = 0x5a5a000000000000ull | (uint64_t)idx << 32 | i * 0x01010101u;
	pattern_fill(tls_pattern, TLS_BYTES, 1000 + idx);

	sigemptyset(&block);
	sigaddset(&block, own_signal(idx));
	sigaddset(&block, SIGUSR1 + (idx % 2) * (SIGUSR2 - SIGUSR1));
	sigaddset(&block, SIGRTMIN + 20 + idx);
	if (pthread_sigmask(SIG_BLOCK, &block, NULL) || sigaltstack(&altstack, NULL) ||
	    syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)slot->gs_target) ||
	    syscall(SYS_tgkill, getpid(), gettid(), own_signal(idx))) {
		slot_fail(slot, "setting up: %s", strerror(errno));
		return -1;
	}
	return read_state(slot, &slot->before);
}

/* Loads the registers, counts itself loaded, spins until released, stores them back. */
static void load_spin_store(void)
{
#define LOAD(reg, n) "mov %%fs:tls_expected_gpr@tpoff+" #n "*8, %%" reg "\n\t"
#define STORE(reg, n) "mov %%" reg ", %%fs:tls_seen_gpr@tpoff+" #n "*8\n\t"
	asm volatile(LOAD("rax", 0) LOAD("rbx", 1) LOAD("rcx", 2) LOAD("rdx", 3)
		     LOAD("rsi", 4) LOAD("rdi", 5) LOAD("r8", 6) LOAD("r9", 7)
		     LOAD("r10", 8) LOAD("r11", 9) LOAD("r12", 10) LOAD("r13", 11)
		     LOAD("r14", 12) LOAD("r15", 13)
		     "lock incl threads_loaded(%%rip)\n\t"
		     /* the dump lands somewhere in this loop */
		     "1: pause\n\t"
		     "cmpl $0, threads_go(%%rip)\n\t"
		     "je 1b\n\t"
		     STORE("rax", 0) STORE("rbx", 1) STORE("rcx", 2) STORE("rdx", 3)
		     STORE("rsi", 4) STORE("rdi", 5) STORE("r8", 6) STORE("r9", 7)
		     STORE("r10", 8) STORE("r11", 9) STORE("r12", 10) STORE("r13", 11)
		     STORE("r14", 12) STORE("r15", 13)
		     :
		     :
		     : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
		       "r12", "r13", "r14", "r15", "memory", "cc");
#undef LOAD
#undef STORE
}

static void check_signals(struct thread_slot *slot)
{
	sigset_t pending;

	if (sigpending(&pending)) {
		slot_fail(slot, "sigpending: %s", strerror(errno));
		return;
	}
	/* Its own queued signal, and none of the other threads' ones. */
	for (unsigned int i = 0; i < NR_THREADS; i++)
		if (sigismember(&pending, own_signal(i)) != (i == slot->idx))
			slot_fail(slot, "signal %d is %spending", own_signal(i),
				  i == slot->idx ? "not " : "");
	for (int sig = 1; sig <= 64; sig++) {
		int was = sigismember(&slot->before.blocked, sig);

		if (was != sigismember(&slot->after.blocked, sig))
			slot_fail(slot, "signal %d was %sblocked, is not any more", sig,
				  was ? "" : "not ");
	}
}

/*
 * Registering the area glibc registered again fails with EBUSY while it is registered
 * with that length: glibc registers 32 bytes but may report fewer in __rseq_size.
 */
static bool rseq_still_registered(void)
{
	void *area = (char *)__builtin_thread_pointer() + __rseq_offset;
	const unsigned int lens[] = { 32, __rseq_size };

	for (unsigned int i = 0; i < 2; i++) {
		if (!syscall(SYS_rseq, area, lens[i], 0, RSEQ_SIG))
			return false; /* it was not: this call registered it */
		if (errno == EBUSY)
			return true;
	}
	return false;
}

static void check_state(struct thread_slot *slot)
{
	struct thread_state *b = &slot->before, *a = &slot->after;
	ssize_t bad;

	for (unsigned int i = 0; i < NR_GPRS; i++)
		if (tls_seen_gpr[i] != tls_expected_gpr[i])
			slot_fail(slot, "register %u is %#llx, expected %#llx", i,
				  (unsigned long long)tls_seen_gpr[i],
				  (unsigned long long)tls_expected_gpr[i]);
	bad = pattern_check(tls_pattern, TLS_BYTES, 1000 + slot->idx);
	if (bad >= 0)
		slot_fail(slot, "TLS byte %zd differs", bad);
	if (read_state(slot, a))
		return;
	if (a->tid != b->tid)
		slot_fail(slot, "tid %d became %d", b->tid, a->tid);
	if (a->fs_base != b->fs_base || a->gs_base != b->gs_base)
		slot_fail(slot, "fs/gs base %#lx/%#lx became %#lx/%#lx", b->fs_base, b->gs_base,
			  a->fs_base, a->gs_base);
	if (a->altstack.ss_sp != b->altstack.ss_sp || a->altstack.ss_size != b->altstack.ss_size ||
	    a->altstack.ss_flags != b->altstack.ss_flags)
		slot_fail(slot, "sigaltstack %p+%zu became %p+%zu", b->altstack.ss_sp,
			  b->altstack.ss_size, a->altstack.ss_sp, a->altstack.ss_size);
	if (a->tid_address != b->tid_address)
		slot_fail(slot, "tid address %p became %p", b->tid_address, a->tid_address);
	if (a->robust_head != b->robust_head || a->robust_len != b->robust_len)
		slot_fail(slot, "robust list %p/%zu became %p/%zu", b->robust_head, b->robust_len,
			  a->robust_head, a->robust_len);
	check_signals(slot);
	if (__rseq_size && !rseq_still_registered())
		slot_fail(slot, "its rseq area is not registered any more");
}

static void *thread_main(void *arg)
{
	struct thread_slot *slot = arg;

	if (set_up_thread(slot)) {
		atomic_fetch_add(&threads_loaded, 1);
		return NULL;
	}
	load_spin_store();
	check_state(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	test_init(argc, argv);

	for (unsigned int i = 0; i < NR_THREADS; i++) {
		slots[i].idx = i;
		if (pthread_create(&slots[i].handle, NULL, thread_main, &slots[i]))
			test_fail("cannot create thread %u", i);
	}
	while (atomic_load(&threads_loaded) < NR_THREADS)
		usleep(1000);
	for (unsigned int i = 0; i < NR_THREADS; i++)
		if (slots[i].failure[0])
			test_fail("%s", slots[i].failure);

	test_ready();
	test_wait_sigterm();

	threads_go = 1;
	for (unsigned int i = 0; i < NR_THREADS; i++)
		pthread_join(slots[i].handle, NULL);
	for (unsigned int i = 0; i < NR_THREADS; i++)
		if (slots[i].failure[0])
			test_fail("%s", slots[i].failure);
	test_pass();
}
