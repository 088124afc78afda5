/*
 * Demo subject for make demo: fills SIZE_MIB of memory with a known pattern, then every
 * 0.5 s counts one tick, checks the whole pattern and prints counter, checksum and verdict
 * to stdout (the demo's log file). SIGTERM stops it after one last check.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORD_MULT 0x9e3779b97f4a7c15ull /* odd: (i + 1) * WORD_MULT is never zero */

static volatile sig_atomic_t stop_requested;

static void on_sigterm(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t word_pattern(size_t index)
{
	return (index + 1) * WORD_MULT;
}

/* A rotate-XOR hash of all words: one number that stays the same while memory does. */
static uint64_t check_memory(const uint64_t *words, size_t nr_words, size_t *nr_bad)
{
	uint64_t checksum = 0;

	*nr_bad = 0;
	for (size_t i = 0; i < nr_words; i++) {
		checksum = (checksum << 7 | checksum >> 57) ^ words[i];
		if (words[i] != word_pattern(i))
			(*nr_bad)++;
	}
	return checksum;
}

static void print_tick(unsigned long tick, const uint64_t *words, size_t nr_words)
{
	char clock_str[16];
	time_t now = time(NULL);
	size_t nr_bad;
	uint64_t checksum = check_memory(words, nr_words, &nr_bad);

	strftime(clock_str, sizeof(clock_str), "%H:%M:%S", localtime(&now));
	if (nr_bad)
		printf("[%s] pid %d  counter %lu  checksum %016" PRIx64 "  memory BAD (%zu words)\n",
		       clock_str, getpid(), tick, checksum, nr_bad);
	else
		printf("[%s] pid %d  counter %lu  checksum %016" PRIx64 "  memory OK\n", clock_str,
		       getpid(), tick, checksum);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigterm };
	struct timespec half_second = { 0, 500 * 1000 * 1000 };
	unsigned long tick = 0;
	size_t size_mib, nr_words;
	uint64_t *words;

	if (argc != 2 || (size_mib = strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: %s SIZE_MIB\n", argv[0]);
		return 2;
	}
	/*
	 * Its own session, and no fds but stdio: whatever the caller leaked (a pipe from a
	 * terminal multiplexer, say) would be state criu has to dump too.
	 */
	if (setsid() < 0 || close_range(3, ~0u, 0) || sigaction(SIGTERM, &sa, NULL)) {
		fprintf(stderr, "counter: setup failed: %s\n", strerror(errno));
		return 2;
	}
	nr_words = (size_mib << 20) / sizeof(*words);
	words = mmap(NULL, size_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (words == MAP_FAILED) {
		fprintf(stderr, "counter: cannot map %zu MiB: %s\n", size_mib, strerror(errno));
		return 2;
	}
	for (size_t i = 0; i < nr_words; i++)
		words[i] = word_pattern(i);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("counter: pid %d holds %zu MiB with a known pattern\n", getpid(), size_mib);

	while (!stop_requested) {
		print_tick(++tick, words, nr_words);
		/* A signal or a checkpoint may cut the sleep short: the next tick just comes early. */
		nanosleep(&half_second, NULL);
	}
	print_tick(tick, words, nr_words);
	printf("counter: stopped by SIGTERM at counter %lu\n", tick);
	return 0;
}
