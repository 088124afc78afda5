/*
 * Memory that changes between pre-dumps and the final dump comes back word for word:
 * an area never written again (its pages named in the parent images), pages rewritten
 * after each pre-dump, an area unmapped, a new one mapped, one grown, and a page freed
 * with MADV_DONTNEED. Each SIGUSR1 from the runner applies the next step of changes and
 * writes its number to $ZDTM_STEP_FILE; after restore no write tracker fd is left.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zdtmtst.h"

#define PAGE 4096UL
#define KEPT_PAGES 1024 /* 4 MiB never written after the first pre-dump */
#define REWRITTEN_PAGES 64
#define GONE_PAGES 16
#define NEW_PAGES 8
#define GROWN_PAGES 16

static volatile sig_atomic_t steps_asked;
static char *kept, *rewritten, *gone, *fresh, *grown;
static size_t grown_pages = GROWN_PAGES;
static int steps_done;

static void on_sigusr1(int sig)
{
	(void)sig;
	steps_asked++;
}

static char *map_pages(size_t nr)
{
	char *p = mmap(NULL, nr * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		test_fail_errno("mmap");
	return p;
}

/* Step 1: rewrite pages 0-15, unmap an area, map a new one, grow another, free a page. */
static void step_one(void)
{
	char *moved;

	pattern_fill(rewritten, 16 * PAGE, 21);
	fresh = map_pages(NEW_PAGES);
	pattern_fill(fresh, 3 * PAGE, 31);
	pattern_fill(fresh + 3 * PAGE, PAGE, 34);
	pattern_fill(fresh + 4 * PAGE, (NEW_PAGES - 4) * PAGE, 33);
	moved = mremap(grown, GROWN_PAGES * PAGE, 2 * GROWN_PAGES * PAGE, MREMAP_MAYMOVE);
	if (moved == MAP_FAILED)
		test_fail_errno("mremap");
	grown = moved;
	grown_pages = 2 * GROWN_PAGES;
	pattern_fill(grown + GROWN_PAGES * PAGE, GROWN_PAGES * PAGE, 41);
	if (madvise(rewritten + 40 * PAGE, PAGE, MADV_DONTNEED))
		test_fail_errno("madvise(MADV_DONTNEED)");
	/* Last: nothing mapped since may take its place. */
	if (munmap(gone, GONE_PAGES * PAGE))
		test_fail_errno("munmap");
}

/* Step 2: rewrite pages 32-39 and a page of the new area. */
static void step_two(void)
{
	pattern_fill(rewritten + 32 * PAGE, 8 * PAGE, 22);
	pattern_fill(fresh + 3 * PAGE, PAGE, 32);
}

static void report_step(void)
{
	const char *path = getenv("ZDTM_STEP_FILE");
	char tmp[4096], text[16];

	if (!path)
		test_fail("ZDTM_STEP_FILE is not set");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(text, sizeof(text), "%d", steps_done);
	write_file(tmp, text, strlen(text));
	if (rename(tmp, path))
		test_fail_errno("rename the step file");
}

static void check_no_tracker(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;
	char link[256];

	if (!dir)
		test_fail_errno("opendir /proc/self/fd");
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		fd_link(atoi(de->d_name), link, sizeof(link));
		if (strstr(link, "userfaultfd"))
			test_fail("fd %s is a userfaultfd after restore", de->d_name);
	}
	closedir(dir);
}

static void check_memory(void)
{
	static const unsigned char zero[PAGE];

	pattern_expect(kept, KEPT_PAGES * PAGE, 11, "area never written again");
	pattern_expect(rewritten, 16 * PAGE, 21, "pages rewritten after the first pre-dump");
	pattern_expect(rewritten + 16 * PAGE, 16 * PAGE, 12 + 16, "untouched rewritten pages");
	pattern_expect(rewritten + 32 * PAGE, 8 * PAGE, 22, "pages rewritten after the second");
	if (memcmp(rewritten + 40 * PAGE, zero, PAGE))
		test_fail("the page freed with MADV_DONTNEED is not zero");
	pattern_expect(rewritten + 41 * PAGE, (REWRITTEN_PAGES - 41) * PAGE, 13,
		       "last untouched pages");
	pattern_expect(fresh, 3 * PAGE, 31, "new area");
	pattern_expect(fresh + 3 * PAGE, PAGE, 32, "new area's rewritten page");
	pattern_expect(fresh + 4 * PAGE, (NEW_PAGES - 4) * PAGE, 33, "new area's tail");
	pattern_expect(grown, GROWN_PAGES * PAGE, 51, "grown area");
	pattern_expect(grown + GROWN_PAGES * PAGE, GROWN_PAGES * PAGE, 41, "grown area's new part");
	if (mmap(gone, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) !=
	    gone)
		test_fail("the unmapped area is mapped again after restore");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	kept = map_pages(KEPT_PAGES);
	rewritten = map_pages(REWRITTEN_PAGES);
	gone = map_pages(GONE_PAGES);
	grown = map_pages(GROWN_PAGES);
	pattern_fill(kept, KEPT_PAGES * PAGE, 11);
	pattern_fill(rewritten, 16 * PAGE, 12);
	pattern_fill(rewritten + 16 * PAGE, 16 * PAGE, 12 + 16);
	pattern_fill(rewritten + 32 * PAGE, 8 * PAGE, 14);
	pattern_fill(rewritten + 40 * PAGE, PAGE, 15);
	pattern_fill(rewritten + 41 * PAGE, (REWRITTEN_PAGES - 41) * PAGE, 13);
	pattern_fill(gone, GONE_PAGES * PAGE, 16);
	pattern_fill(grown, GROWN_PAGES * PAGE, 51);
	if (signal(SIGUSR1, on_sigusr1) == SIG_ERR)
		test_fail_errno("signal(SIGUSR1)");

	test_ready();
	/* The steps run here, not in the handler: the runner waits for each one's report. */
	while (steps_done < 2) {
		while (steps_asked == steps_done)
			usleep(1000);
		if (++steps_done == 1)
			step_one();
		else
			step_two();
		report_step();
	}
	test_wait_sigterm();

	check_memory();
	check_no_tracker();
	test_pass();
}
