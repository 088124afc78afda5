/*
 * Benchmark subject: holds N MiB of private anonymous memory, every 8-byte word set to a
 * non-zero value derived from its index, then waits. On SIGTERM it checks every word and
 * exits 0 (PASS) or 1 (FAIL), so a benchmark run also proves the restore was byte-exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Odd, so (i + 1) * WORD_MULT is never zero and differs for every word index. */
#define WORD_MULT 0x9e3779b97f4a7c15ull

static volatile sig_atomic_t terminate_requested;

static void on_sigterm(int sig)
{
	(void)sig;
	terminate_requested = 1;
}

static uint64_t word_pattern(size_t index)
{
	return (index + 1) * WORD_MULT;
}

static void fill_memory(uint64_t *words, size_t nr_words)
{
	for (size_t i = 0; i < nr_words; i++)
		words[i] = word_pattern(i);
}

/* Index of the first word that differs from the pattern, or nr_words if all match. */
static size_t first_bad_word(const uint64_t *words, size_t nr_words)
{
	for (size_t i = 0; i < nr_words; i++)
		if (words[i] != word_pattern(i))
			return i;
	return nr_words;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigterm };
	size_t size_mib, nr_words, bad;
	uint64_t *words;

	if (argc != 2 || (size_mib = strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: %s SIZE_MIB\n", argv[0]);
		return 2;
	}
	/* Only stdio: fds leaked by whoever started the benchmark are not what it measures. */
	if (close_range(3, ~0u, 0) || sigaction(SIGTERM, &sa, NULL)) {
		perror("holder: setup");
		return 2;
	}
	nr_words = (size_mib << 20) / sizeof(*words);
	words = mmap(NULL, size_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (words == MAP_FAILED) {
		fprintf(stderr, "holder: cannot map %zu MiB: %s\n", size_mib, strerror(errno));
		return 2;
	}
	fill_memory(words, nr_words);
	/* stdout is a regular file (the driver polls it): unbuffered lines land in order. */
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("holder %d: ready, %zu MiB at %p\n", getpid(), size_mib, (void *)words);

	while (!terminate_requested)
		pause();

	bad = first_bad_word(words, nr_words);
	if (bad != nr_words) {
		printf("holder %d: FAIL: word %zu (byte %#zx) is %#" PRIx64 ", expected %#" PRIx64
		       "\n", getpid(), bad, bad * sizeof(*words), words[bad], word_pattern(bad));
		return 1;
	}
	printf("holder %d: PASS, %zu MiB intact\n", getpid(), size_mib);
	return 0;
}
