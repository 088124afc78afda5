/*
 * Benchmark subject for the restore of memory shared copy-on-write: a parent fills SIZE_MIB
 * of private anonymous memory, every 8-byte word a non-zero value derived from its index,
 * then forks CHILDREN children that share it. Each child reads all of it (checks every
 * word); with -w PERCENT it first rewrites PERCENT of every 100 pages with values of its
 * own, so those pages become its private copies. Once every child is ready the parent
 * prints "ready". On SIGTERM each process checks every word of what it should see,
 * children report by exit status, and the parent exits 0 (PASS) or 1 (FAIL): a benchmark
 * round also proves the restore was byte-exact in every process.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Odd, so (i + 1) * WORD_MULT is never zero and differs for every word index. */
#define WORD_MULT 0x9e3779b97f4a7c15ull
#define MAX_CHILDREN 64
#define PAGE_WORDS (4096 / sizeof(uint64_t))
/* A child tells the parent it is ready with this signal: real-time ones queue, none is lost. */
#define SIG_CHILD_READY SIGRTMIN

static volatile sig_atomic_t terminate_requested;
static uint64_t *words;
static size_t nr_words;
static unsigned int rewrite_percent;
static int child_nr; /* 0: the parent; 1..CHILDREN: a child */

static void on_sigterm(int sig)
{
	(void)sig;
	terminate_requested = 1;
}

/* Whether word i is on a page that child_nr rewrote (never for the parent). */
static int rewritten(size_t i)
{
	return child_nr && (i / PAGE_WORDS) % 100 < rewrite_percent;
}

/* What word i holds in this process: its pattern, xor'ed with the child's mark if rewritten. */
static uint64_t word_expected(size_t i)
{
	uint64_t pattern = (i + 1) * WORD_MULT;

	return rewritten(i) ? pattern ^ ((uint64_t)child_nr * 0x0101010101010101ull) : pattern;
}

/* 0 when every word holds what it should, else 1 after saying where. */
static int check_memory(void)
{
	for (size_t i = 0; i < nr_words; i++) {
		if (words[i] == word_expected(i))
			continue;
		printf("cowtree %d: FAIL: word %zu is %#" PRIx64 ", expected %#" PRIx64 "\n",
		       getpid(), i, words[i], word_expected(i));
		return 1;
	}
	return 0;
}

static void rewrite_pages(void)
{
	for (size_t i = 0; i < nr_words; i++)
		if (rewritten(i))
			words[i] = word_expected(i);
}

/* The children check themselves on SIGTERM; 0 when every one exited 0. */
static int children_verdict(const pid_t *children, int nr_children)
{
	int verdict = 0, status;

	for (int c = 0; c < nr_children; c++)
		kill(children[c], SIGTERM);
	for (int c = 0; c < nr_children; c++) {
		if (waitpid(children[c], &status, 0) != children[c] || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("cowtree %d: FAIL: child %d (status %#x)\n", getpid(), children[c],
			       status);
			verdict = 1;
		}
	}
	return verdict;
}

/* Each child sends SIG_CHILD_READY once it has read its memory; SIGCHLD means one died. */
static int wait_children_ready(int nr_children)
{
	sigset_t wait_set;
	int nr_ready = 0;

	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIG_CHILD_READY);
	sigaddset(&wait_set, SIGCHLD);
	while (nr_ready < nr_children) {
		int sig = sigwaitinfo(&wait_set, NULL);

		if (sig == SIG_CHILD_READY) {
			nr_ready++;
		} else if (sig == SIGCHLD) {
			fprintf(stderr, "cowtree: a child died before it was ready\n");
			return -ECHILD;
		} else if (errno != EINTR) {
			perror("cowtree: sigwaitinfo");
			return -errno;
		}
	}
	return 0;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-w PERCENT] CHILDREN SIZE_MIB\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigterm };
	pid_t children[MAX_CHILDREN];
	sigset_t blocked, waiting;
	int nr_children, opt, verdict;
	size_t size_mib;

	while ((opt = getopt(argc, argv, "w:")) != -1) {
		if (opt != 'w')
			usage(argv[0]);
		rewrite_percent = strtoul(optarg, NULL, 10);
	}
	if (optind != argc - 2)
		usage(argv[0]);
	nr_children = atoi(argv[optind]);
	size_mib = strtoul(argv[optind + 1], NULL, 10);
	if (nr_children < 1 || nr_children > MAX_CHILDREN || size_mib == 0 || rewrite_percent > 100)
		usage(argv[0]);
	/* Only stdio: fds leaked by whoever started the benchmark are not what it measures. */
	if (close_range(3, ~0u, 0) || sigaction(SIGTERM, &sa, NULL)) {
		perror("cowtree: setup");
		return 2;
	}
	/* SIGTERM is taken only inside sigsuspend(), the others only through sigwaitinfo(). */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIG_CHILD_READY);
	sigaddset(&blocked, SIGCHLD);
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	sigdelset(&waiting, SIGTERM);
	/* stdout is a regular file (the driver polls it): unbuffered lines land in order. */
	setvbuf(stdout, NULL, _IONBF, 0);

	nr_words = (size_mib << 20) / sizeof(uint64_t);
	words = mmap(NULL, size_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (words == MAP_FAILED) {
		fprintf(stderr, "cowtree: cannot map %zu MiB: %s\n", size_mib, strerror(errno));
		return 2;
	}
	for (size_t i = 0; i < nr_words; i++)
		words[i] = word_expected(i);

	/* Fork after filling: the children share the parent's pages until they write. */
	for (int c = 0; c < nr_children; c++) {
		children[c] = fork();
		if (children[c] < 0) {
			perror("cowtree: fork");
			return 2;
		}
		if (children[c] == 0) {
			child_nr = c + 1;
			break;
		}
	}
	if (child_nr) {
		rewrite_pages();
		if (check_memory())
			return 1;
		kill(getppid(), SIG_CHILD_READY);
	} else if (wait_children_ready(nr_children)) {
		return 2;
	} else {
		printf("cowtree %d: ready, %d children share %zu MiB, each rewrote %u%%\n",
		       getpid(), nr_children, size_mib, rewrite_percent);
	}

	while (!terminate_requested)
		sigsuspend(&waiting);

	verdict = check_memory();
	if (child_nr)
		return verdict;
	verdict |= children_verdict(children, nr_children);
	if (!verdict)
		printf("cowtree %d: PASS, %d children, %zu MiB intact\n", getpid(), nr_children,
		       size_mib);
	return verdict;
}
