/*
 * Benchmark subject: a tree of -p processes (the root forks the others), each holding N MiB
 * of private anonymous memory that its -t threads fill, every 8-byte word a non-zero value
 * derived from its index, then waits. On SIGTERM each process checks every word (each
 * thread its own slice), children report by exit status, and the root exits 0 (PASS) or
 * 1 (FAIL): a benchmark run also proves the restore of the whole tree was byte-exact.
 * With -d, SIGUSR1 makes the root change the first DIRTY_MIB of its memory, once (the
 * incremental dump's changes), and the check expects them.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Odd, so (i + 1) * WORD_MULT is never zero and differs for every word index. */
#define WORD_MULT 0x9e3779b97f4a7c15ull
#define MAX_PROCS 64
#define MAX_THREADS 64
/* -r: a pause longer than this between two of the stamp thread's 200 us sleeps is a restore. */
#define RESUME_GAP_NS (50ull * 1000 * 1000)
/* A child tells the root it is ready with this signal: real-time ones queue, none is lost. */
#define SIG_CHILD_READY SIGRTMIN

/* One thread's share of its process's memory; words[i] holds word_pattern(first_index + i). */
struct slice {
	uint64_t *words;
	size_t nr_words;
	uint64_t first_index;
	size_t first_bad; /* nr_words when every word matched */
};

static volatile sig_atomic_t terminate_requested, dirty_requested;
/* -d: on SIGUSR1 the first dirty_words words of the root's slice 0 get DIRTY_MARK xor'ed. */
#define DIRTY_MARK 0x5a5a5a5a5a5a5a5aull
static size_t dirty_words;
static bool dirtied;
/* Futex words: helper threads done filling; the main thread asks them to check. */
static uint32_t nr_filled, check_requested;

static void on_sigterm(int sig)
{
	(void)sig;
	terminate_requested = 1;
}

static void on_sigusr1(int sig)
{
	(void)sig;
	dirty_requested = 1;
}

static uint64_t word_pattern(uint64_t index)
{
	return (index + 1) * WORD_MULT;
}

static void fill_slice(struct slice *s)
{
	for (size_t i = 0; i < s->nr_words; i++)
		s->words[i] = word_pattern(s->first_index + i);
}

/* What word i of slice s holds: its pattern, marked if it was dirtied. */
static uint64_t word_expected(const struct slice *s, size_t i)
{
	bool marked = dirtied && s->first_index == 0 && i < dirty_words;

	return word_pattern(s->first_index + i) ^ (marked ? DIRTY_MARK : 0);
}

static void check_slice(struct slice *s)
{
	for (s->first_bad = 0; s->first_bad < s->nr_words; s->first_bad++)
		if (s->words[s->first_bad] != word_expected(s, s->first_bad))
			break;
}

/* -d on SIGUSR1: the first dirty_words words of slice 0 change, once. */
static void dirty_memory(struct slice *s)
{
	for (size_t i = 0; i < dirty_words && i < s->nr_words; i++)
		s->words[i] ^= DIRTY_MARK;
	dirtied = true;
	printf("holder %d: dirtied %zu MiB\n", getpid(), dirty_words * sizeof(uint64_t) >> 20);
}

static void futex_wait(uint32_t *word, uint32_t seen)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* A helper thread fills its slice, then sleeps in the kernel across dump and restore. */
static void *helper_thread(void *arg)
{
	struct slice *s = arg;

	fill_slice(s);
	__atomic_add_fetch(&nr_filled, 1, __ATOMIC_RELEASE);
	futex_wake_all(&nr_filled);
	while (!__atomic_load_n(&check_requested, __ATOMIC_ACQUIRE))
		futex_wait(&check_requested, 0);
	check_slice(s);
	return NULL;
}

/*
 * -r: prints the CLOCK_MONOTONIC time at which the holder runs its own code again after a
 * restore (the first wake-up after a long gap), for the benchmark's time-to-run.
 */
static void *resume_stamp_thread(void *arg)
{
	struct timespec pause = { 0, 200 * 1000 }, now;
	uint64_t last = 0, ns;

	(void)arg;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ns = now.tv_sec * 1000000000ull + now.tv_nsec;
		if (last && ns - last > RESUME_GAP_NS)
			printf("holder %d: resumed at %" PRIu64 " ns\n", getpid(), ns);
		last = ns;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/*
 * Map this process's memory and fill it, slice by slice, with nr_threads threads (the
 * caller's is slice 0). SIGTERM is blocked in the helpers: it must reach the main thread.
 */
static int fill_memory(struct slice *slices, pthread_t *helpers, int nr_threads,
		       size_t size_mib, int proc_nr)
{
	size_t nr_words = (size_mib << 20) / sizeof(uint64_t);
	uint64_t *words;
	uint32_t filled;
	int err;

	words = mmap(NULL, size_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (words == MAP_FAILED) {
		fprintf(stderr, "holder: cannot map %zu MiB: %s\n", size_mib, strerror(errno));
		return -errno;
	}
	for (int t = 0; t < nr_threads; t++) {
		size_t start = nr_words * t / nr_threads, end = nr_words * (t + 1) / nr_threads;

		slices[t] = (struct slice){ words + start, end - start,
					    (uint64_t)proc_nr * nr_words + start, 0 };
	}
	for (int t = 1; t < nr_threads; t++) {
		err = pthread_create(&helpers[t], NULL, helper_thread, &slices[t]);
		if (err) {
			fprintf(stderr, "holder: cannot create thread %d: %s\n", t, strerror(err));
			return -err;
		}
	}
	fill_slice(&slices[0]);
	while ((filled = __atomic_load_n(&nr_filled, __ATOMIC_ACQUIRE)) != (uint32_t)nr_threads - 1)
		futex_wait(&nr_filled, filled);
	return 0;
}

/* Every thread checks its slice; 0 when all match, else 1 after saying where. */
static int check_memory(struct slice *slices, pthread_t *helpers, int nr_threads)
{
	int verdict = 0;

	__atomic_store_n(&check_requested, 1, __ATOMIC_RELEASE);
	futex_wake_all(&check_requested);
	check_slice(&slices[0]);
	for (int t = 1; t < nr_threads; t++)
		pthread_join(helpers[t], NULL);
	for (int t = 0; t < nr_threads; t++) {
		struct slice *s = &slices[t];

		if (s->first_bad == s->nr_words)
			continue;
		printf("holder %d: FAIL: thread %d: word %zu is %#" PRIx64 ", expected %#" PRIx64
		       "\n", getpid(), t, s->first_bad, s->words[s->first_bad],
		       word_expected(s, s->first_bad));
		verdict = 1;
	}
	return verdict;
}

/* The root's children check themselves on SIGTERM; 0 when every one exited 0. */
static int children_verdict(const pid_t *children, int nr_children)
{
	int verdict = 0, status;

	for (int c = 0; c < nr_children; c++)
		kill(children[c], SIGTERM);
	for (int c = 0; c < nr_children; c++) {
		if (waitpid(children[c], &status, 0) != children[c] || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("holder %d: FAIL: child %d (status %#x)\n", getpid(), children[c],
			       status);
			verdict = 1;
		}
	}
	return verdict;
}

/* Each child sends SIG_CHILD_READY once filled; a SIGCHLD instead means one died. */
static int wait_children_ready(int nr_children)
{
	int nr_ready = 0, sig;
	sigset_t wait_set;

	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIG_CHILD_READY);
	sigaddset(&wait_set, SIGCHLD);
	while (nr_ready < nr_children) {
		sig = sigwaitinfo(&wait_set, NULL);
		if (sig == SIG_CHILD_READY) {
			nr_ready++;
		} else if (sig == SIGCHLD) {
			fprintf(stderr, "holder: a child died before it was ready\n");
			return -ECHILD;
		} else if (errno != EINTR) {
			perror("holder: sigwaitinfo");
			return -errno;
		}
	}
	return 0;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-p PROCS] [-t THREADS] [-d DIRTY_MIB] [-r] SIZE_MIB (MiB per process)\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigterm }, sa_usr1 = { .sa_handler = on_sigusr1 };
	int nr_procs = 1, nr_threads = 1, proc_nr = 0, opt, verdict;
	bool resume_stamp = false;
	pthread_t helpers[MAX_THREADS], stamp;
	struct slice slices[MAX_THREADS];
	pid_t children[MAX_PROCS];
	sigset_t blocked, waiting;
	size_t size_mib;

	while ((opt = getopt(argc, argv, "p:t:d:r")) != -1) {
		if (opt == 'p')
			nr_procs = atoi(optarg);
		else if (opt == 'r')
			resume_stamp = true;
		else if (opt == 't')
			nr_threads = atoi(optarg);
		else if (opt == 'd')
			dirty_words = (strtoul(optarg, NULL, 10) << 20) / sizeof(uint64_t);
		else
			usage(argv[0]);
	}
	if (optind != argc - 1 || (size_mib = strtoul(argv[optind], NULL, 10)) == 0 ||
	    nr_procs < 1 || nr_procs > MAX_PROCS || nr_threads < 1 || nr_threads > MAX_THREADS)
		usage(argv[0]);
	/* Only stdio: fds leaked by whoever started the benchmark are not what it measures. */
	if (close_range(3, ~0u, 0) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGUSR1, &sa_usr1, NULL)) {
		perror("holder: setup");
		return 2;
	}
	/*
	 * SIGTERM stays blocked except inside sigsuspend(), so it cannot slip in between the
	 * flag test and the wait; helper threads inherit the block and never take it. The
	 * root takes SIG_CHILD_READY and SIGCHLD only through sigwaitinfo().
	 */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGUSR1);
	sigaddset(&blocked, SIG_CHILD_READY);
	sigaddset(&blocked, SIGCHLD);
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	sigdelset(&waiting, SIGTERM);
	sigdelset(&waiting, SIGUSR1);
	/* stdout is a regular file (the driver polls it): unbuffered lines land in order. */
	setvbuf(stdout, NULL, _IONBF, 0);

	/* Fork before filling: children must not start with copies of the root's memory. */
	for (proc_nr = 1; proc_nr < nr_procs; proc_nr++) {
		children[proc_nr - 1] = fork();
		if (children[proc_nr - 1] < 0) {
			perror("holder: fork");
			return 2;
		}
		if (children[proc_nr - 1] == 0)
			break;
	}
	if (proc_nr == nr_procs)
		proc_nr = 0;

	if (fill_memory(slices, helpers, nr_threads, size_mib, proc_nr))
		return 2;
	if (proc_nr)
		kill(getppid(), SIG_CHILD_READY);
	else if (wait_children_ready(nr_procs - 1))
		return 2;
	else if (resume_stamp && pthread_create(&stamp, NULL, resume_stamp_thread, NULL))
		return 2;
	else
		printf("holder %d: ready, %d x %zu MiB, %d threads each\n", getpid(), nr_procs,
		       size_mib, nr_threads);

	while (!terminate_requested) {
		sigsuspend(&waiting);
		if (dirty_requested && !dirtied && !proc_nr)
			dirty_memory(&slices[0]);
	}

	verdict = check_memory(slices, helpers, nr_threads);
	if (proc_nr)
		return verdict;
	verdict |= children_verdict(children, nr_procs - 1);
	if (!verdict)
		printf("holder %d: PASS, %d x %zu MiB intact\n", getpid(), nr_procs, size_mib);
	return verdict;
}
