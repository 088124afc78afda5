/*
 * What the cow_* tests share: copy-on-write memory a tree inherits across fork, measured
 * by the kernel's own numbers (Pss in /proc/PID/smaps, PFNs in /proc/PID/pagemap), and
 * children that are reaped whatever happens.
 *
 * A private page the parent and its children still share after fork has one PFN in all
 * of them and counts 1/n in each one's Pss; a restore that gives each task its own copy
 * multiplies the tree's Pss by about n. Each test measures before it reports ready and
 * again after restore, and fails when the tree's Pss of its COW memory grew by more than
 * COW_PSS_MAX_RATIO, or when a page that must be shared has two PFNs.
 *
 * Header only (static functions): the suite's Makefile builds one .c per test.
 */
#ifndef COW_SHARE_H
#define COW_SHARE_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define COW_PAGE	  4096ul
#define COW_PSS_MAX_RATIO 1.05
#define COW_MAX_CHILDREN  16

/* ---- children: forked, judged, and reaped even when the test fails ---- */

static pid_t cow_children[COW_MAX_CHILDREN];
static int cow_nr_children;
static pid_t cow_owner; /* the process whose children the list holds */

/* At exit (test_fail() included): SIGKILL and reap every child not reaped yet. */
static inline void cow_reap_children(void)
{
	if (getpid() != cow_owner)
		return;
	for (int i = 0; i < cow_nr_children; i++) {
		if (cow_children[i] <= 0)
			continue;
		kill(cow_children[i], SIGKILL);
		while (waitpid(cow_children[i], NULL, 0) < 0 && errno == EINTR)
			;
		cow_children[i] = 0;
	}
}

/*
 * fork(): the child runs child_main(arg), which must not return, with an empty list of
 * its own; the parent records the child (for cow_children_verdict() and the reaping at
 * exit) and gets its pid.
 */
static inline pid_t cow_fork(void (*child_main)(int arg), int arg)
{
	pid_t child;

	if (cow_owner != getpid()) {
		cow_owner = getpid();
		cow_nr_children = 0;
		if (atexit(cow_reap_children))
			test_fail("atexit");
	}
	if (cow_nr_children == COW_MAX_CHILDREN)
		test_fail("more than %d children", COW_MAX_CHILDREN);
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		cow_owner = getpid();
		cow_nr_children = 0;
		child_main(arg);
		test_fail("child_main returned");
	}
	cow_children[cow_nr_children++] = child;
	return child;
}

/*
 * SIGTERM every child at once (they check themselves side by side), reap them all, then
 * fail naming who if one did not exit 0.
 */
static inline void cow_children_verdict(const char *who)
{
	int failed = 0, bad_status = 0;
	pid_t bad = 0;

	for (int i = 0; i < cow_nr_children; i++)
		if (kill(cow_children[i], SIGTERM))
			test_fail("%s: SIGTERM to child %d: %s", who, cow_children[i],
				  strerror(errno));
	for (int i = 0; i < cow_nr_children; i++) {
		int status;

		while (waitpid(cow_children[i], &status, 0) < 0)
			if (errno != EINTR)
				test_fail("%s: waitpid(%d): %s", who, cow_children[i],
					  strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			failed++;
			bad = cow_children[i];
			bad_status = status;
		}
		cow_children[i] = 0;
	}
	cow_nr_children = 0;
	if (failed)
		test_fail("%s: %d child(ren) failed, child %d with wait status %#x", who, failed,
			  bad, bad_status);
}

/* ---- memory ---- */

/*
 * len bytes of private anonymous memory, a VMA of its own: a PROT_NONE page on each side
 * keeps it from merging with a neighbour (its Pss in smaps is its own). MADV_NOHUGEPAGE:
 * khugepaged may collapse a range of a task into a huge page of its own whenever it scans
 * (a timing), which would end the sharing of the pages in it.
 */
static inline unsigned char *cow_map(size_t len)
{
	unsigned char *p =
		mmap(NULL, len + 2 * COW_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		test_fail_errno("mmap");
	p += COW_PAGE;
	if (mprotect(p, len, PROT_READ | PROT_WRITE))
		test_fail_errno("mprotect");
	if (madvise(p, len, MADV_NOHUGEPAGE))
		test_fail_errno("madvise(MADV_NOHUGEPAGE)");
	return p;
}

/* Page by page: page i gets pattern seed(i). */
static inline void cow_fill_pages(unsigned char *p, size_t pages, uint64_t (*seed)(size_t page))
{
	for (size_t i = 0; i < pages; i++)
		pattern_fill(p + i * COW_PAGE, COW_PAGE, seed(i));
}

/* Every word of every page: page i must hold pattern seed(i), or the test fails. */
static inline void cow_expect_pages(const unsigned char *p, size_t pages,
				    uint64_t (*seed)(size_t page), const char *who)
{
	for (size_t i = 0; i < pages; i++) {
		ssize_t bad = pattern_check(p + i * COW_PAGE, COW_PAGE, seed(i));

		if (bad >= 0)
			test_fail("%s: page %zu, byte %zd differs (at %p)", who, i, bad,
				  p + i * COW_PAGE + bad);
	}
}

/* ---- Pss ---- */

static char cow_smaps_buf[4 << 20] __attribute__((unused));

/*
 * The Pss (kB) of process pid's VMAs that overlap [addr, addr + len), summed from
 * /proc/PID/smaps; a VMA that reaches past the range counts whole (cow_map() gives each
 * region a VMA of its own).
 */
static inline long cow_pss_kb(pid_t pid, const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	char path[64], *line = cow_smaps_buf;
	bool inside = false;
	long sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	read_file(path, cow_smaps_buf, sizeof(cow_smaps_buf));
	while (line && *line) {
		uintptr_t start, end;
		long kb;

		/* A VMA's first line starts "start-end "; field names never scan as two numbers. */
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2)
			inside = start < hi && end > lo;
		else if (inside && sscanf(line, "Pss: %ld kB", &kb) == 1)
			sum += kb;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return sum;
}

/* The Pss (kB) of [addr, addr + len) summed over the processes pids. */
static inline long cow_tree_pss_kb(const pid_t *pids, int nr, const void *addr, size_t len)
{
	long sum = 0;

	for (int i = 0; i < nr; i++)
		sum += cow_pss_kb(pids[i], addr, len);
	return sum;
}

/* The Pss (kB) of all of process pid (/proc/PID/smaps_rollup). */
static inline long cow_rollup_pss_kb(pid_t pid)
{
	char path[64], *pss;
	long kb;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	read_file(path, cow_smaps_buf, sizeof(cow_smaps_buf));
	pss = strstr(cow_smaps_buf, "\nPss:");
	if (!pss || sscanf(pss, "\nPss: %ld kB", &kb) != 1)
		test_fail("no Pss in %s", path);
	return kb;
}

/*
 * The sharing checks do not fail at once: after restore a test measures first (its
 * children still alive), checks every word of memory (its children too, then reaped), and
 * only then fails on sharing, so that its verdict says which of the two was lost.
 */
static int cow_nr_broken;
static char cow_first_broken[512];

static inline void cow_note_broken(const char *what)
{
	if (!cow_nr_broken++)
		snprintf(cow_first_broken, sizeof(cow_first_broken), "%s", what);
}

/* Fails the test (naming when) if a sharing check failed. */
static inline void cow_sharing_verdict(const char *when)
{
	if (cow_nr_broken)
		test_fail("%s: copy-on-write sharing lost (%d check(s) failed; first: %s)", when,
			  cow_nr_broken, cow_first_broken);
}

/*
 * Prints what was measured (the runner keeps the test's output); after more than
 * COW_PSS_MAX_RATIO times the Pss before the dump, the sharing is lost.
 */
static inline void cow_check_pss(long before_kb, long after_kb, const char *what)
{
	double ratio = before_kb > 0 ? (double)after_kb / before_kb : 0;
	char msg[256];

	printf("%s: Pss before dump %ld kB, after restore %ld kB, ratio %.3f\n", what, before_kb,
	       after_kb, ratio);
	fflush(stdout);
	if (before_kb > 0 && ratio <= COW_PSS_MAX_RATIO)
		return;
	snprintf(msg, sizeof(msg), "%s: Pss after restore %.3f times the Pss before dump", what,
		 ratio);
	cow_note_broken(msg);
}

/* ---- PFNs ---- */

#define COW_PM_PRESENT (1ull << 63)
#define COW_PM_PFN     ((1ull << 55) - 1)

/*
 * The PFNs of process pid's pages [addr, addr + pages * COW_PAGE) into pfn[] (0: not
 * present). Root reads real PFNs.
 */
static inline void cow_pfns(pid_t pid, const void *addr, size_t pages, uint64_t *pfn)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		test_fail_errno(path);
	if (pread(fd, pfn, pages * 8, (uintptr_t)addr / COW_PAGE * 8) != (ssize_t)(pages * 8))
		test_fail_errno("read pagemap");
	close(fd);
	for (size_t i = 0; i < pages; i++) {
		if (!(pfn[i] & COW_PM_PRESENT))
			pfn[i] = 0;
		else if (!(pfn[i] &= COW_PM_PFN))
			test_fail("pagemap shows no PFNs (not root?)");
	}
}

enum cow_rule { COW_ANY, COW_SAME, COW_DIFFERENT };

/*
 * Page by page between processes a and b: rule(page) COW_SAME (one present page, the same
 * PFN in both), COW_DIFFERENT (two present pages) or COW_ANY. Pages that break their rule
 * lose the sharing (cow_sharing_verdict()); the first is printed; returns how many.
 * The pages are at addr in a, at addr_b in b.
 */
static inline size_t cow_check_pfns_at(pid_t a, const void *addr, pid_t b, const void *addr_b,
				       size_t pages, enum cow_rule (*rule)(size_t page),
				       const char *when)
{
	uint64_t *pa = malloc(pages * 8), *pb = malloc(pages * 8);
	size_t broken = 0, first = 0;

	if (!pa || !pb)
		test_fail("malloc for pagemap");
	cow_pfns(a, addr, pages, pa);
	cow_pfns(b, addr_b, pages, pb);
	for (size_t i = 0; i < pages; i++) {
		enum cow_rule r = rule(i);
		bool same = pa[i] && pa[i] == pb[i];

		if ((r == COW_SAME && !same) || (r == COW_DIFFERENT && (!pa[i] || !pb[i] || same)))
			if (!broken++)
				first = i;
	}
	if (broken) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s: %zu pages with the wrong PFN between %d and %d",
			 when, broken, a, b);
		cow_note_broken(msg);
		printf("%s: %zu pages of %zu at %p break their sharing rule between %d and %d; "
		       "first page %zu (%s expected; PFNs %#" PRIx64 " and %#" PRIx64 ")\n",
		       when, broken, pages, addr, a, b, first,
		       rule(first) == COW_SAME ? "shared" : "distinct", pa[first], pb[first]);
	}
	fflush(stdout);
	free(pa);
	free(pb);
	return broken;
}

/* cow_check_pfns_at() with the pages at the same address in both. */
static inline size_t cow_check_pfns(pid_t a, pid_t b, const void *addr, size_t pages,
				    enum cow_rule (*rule)(size_t page), const char *when)
{
	return cow_check_pfns_at(a, addr, b, addr, pages, rule, when);
}

#endif
