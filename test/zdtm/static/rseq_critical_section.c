/*
 * Threads that spend nearly all their time inside an rseq critical section (glibc's
 * registration of each thread), so the dump stops them in one. A section checks, just
 * before its commit, that the kernel still has it as the thread's section (struct rseq's
 * rseq_cs): a thread taken out of it goes to its abort handler, never on with rseq_cs
 * cleared. After restore every thread goes on committing and aborting, none ever sees its
 * section cleared under it, and the counters add up.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/rseq.h>
#include <time.h>

#include "zdtmtst.h"

#define NR_THREADS 2
#define SPINS	   200000 /* inside the section, before the commit */

struct worker {
	pthread_t thread;
	uint64_t commits; /* the section's own counter: its commit adds one */
	uint64_t aborts, broken;
};

static atomic_int stop;

static struct rseq *own_rseq(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* 1: committed; 0: aborted (the kernel moved the thread out); -1: rseq_cs lost inside. */
static int one_section(struct worker *w, struct rseq *rs)
{
	/* clang-format off */
	asm goto(".pushsection __rseq_cs, \"aw\"\n\t"
		 ".balign 32\n\t"
		 "3: .long 0, 0\n\t"
		 ".quad 1f, (2f - 1f), 4f\n\t"
		 ".popsection\n\t"
		 "leaq 3b(%%rip), %%rax\n\t"
		 "movq %%rax, %[cs]\n\t"
		 "1:\n\t"
		 "movl %[spins], %%ecx\n\t"
		 "5: decl %%ecx\n\t"
		 "jnz 5b\n\t"
		 "leaq 3b(%%rip), %%rax\n\t"
		 "cmpq %%rax, %[cs]\n\t"
		 "jne %l[lost]\n\t"
		 "incq %[commits]\n\t"
		 "2:\n\t"
		 ".pushsection __rseq_failure, \"ax\"\n\t"
		 ".long 0x53053053\n\t" /* RSEQ_SIG, which glibc registered */
		 "4: jmp %l[aborted]\n\t"
		 ".popsection\n\t"
		 :
		 : [cs] "m"(rs->rseq_cs), [commits] "m"(w->commits), [spins] "i"(SPINS)
		 : "rax", "rcx", "memory", "cc"
		 : aborted, lost);
	/* clang-format on */
	return 1;
aborted:
	return 0;
lost:
	return -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rseq *rs = own_rseq();

	while (!atomic_load(&stop)) {
		int r = one_section(w, rs);

		if (r == 0)
			w->aborts++;
		else if (r < 0)
			w->broken++;
	}
	return NULL;
}

static void run_for_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	struct worker workers[NR_THREADS] = {};
	uint64_t before[NR_THREADS];
	int i;

	test_init(argc, argv);
	if (!__rseq_size)
		test_fail("glibc registered no rseq area (glibc.pthread.rseq=0?)");
	for (i = 0; i < NR_THREADS; i++)
		if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]))
			test_fail("pthread_create %d", i);
	run_for_ms(100);

	test_ready();
	test_wait_sigterm();

	for (i = 0; i < NR_THREADS; i++)
		before[i] = __atomic_load_n(&workers[i].commits, __ATOMIC_RELAXED);
	run_for_ms(200);
	atomic_store(&stop, 1);
	for (i = 0; i < NR_THREADS; i++) {
		pthread_join(workers[i].thread, NULL);
		if (workers[i].broken)
			test_fail("thread %d: %llu sections found their rseq_cs cleared inside them", i,
				  (unsigned long long)workers[i].broken);
		if (workers[i].commits == before[i])
			test_fail("thread %d: no section committed after restore", i);
	}
	test_pass();
}
