/*
 * A tree with a child that exec'ed: the parent maps 8 MiB of private anonymous memory at
 * a fixed address (far from where the kernel places mappings), fills it and forks two
 * children. The first keeps the memory copy-on-write and rewrites a page in 8; the
 * second execs this program again ("exec-child ADDR FD"), whose new image maps memory
 * of its own at that same address with other contents, then closes FD to say it is set
 * up. The exec'ed child waits for SIGTERM with sigwaitinfo() (the blocked SIGTERM stays
 * blocked across exec; its handler does not).
 *
 * After restore each process checks every word at that address; the parent checks the
 * sharing with the first child (Pss of the region over the tree at most 1.05 times, one
 * PFN for the pages it did not rewrite) and that the exec'ed child's pages are its own
 * (other PFNs: nothing of the parent's put in its place).
 */
#include "cow_share.h"

#define REGION (8ul << 20)
#define PAGES  (REGION / COW_PAGE)
#define ADDR   ((void *)0x600000000000ul)

enum { PARENT, COW_CHILD, EXEC_CHILD };

static unsigned char *region;
static int me = PARENT;
static int ready_pipe[2];

static uint64_t seed_of(size_t p)
{
	if (me == EXEC_CHILD)
		return 7ull << 40 | p;
	return me == COW_CHILD && p % 8 == 3 ? 3ull << 32 | p : p;
}

static enum cow_rule cow_child_rule(size_t p)
{
	return p % 8 == 3 ? COW_DIFFERENT : COW_SAME;
}

static enum cow_rule exec_child_rule(size_t p)
{
	(void)p;
	return COW_DIFFERENT;
}

static void __attribute__((noreturn)) cow_child_main(int unused)
{
	(void)unused;
	me = COW_CHILD;
	for (size_t p = 3; p < PAGES; p += 8)
		pattern_fill(region + p * COW_PAGE, COW_PAGE, seed_of(p));
	test_barrier_done();
	test_wait_sigterm();
	cow_expect_pages(region, PAGES, seed_of, "child sharing the memory");
	exit(0);
}

static char *self_exe;

static void __attribute__((noreturn)) exec_child_main(int unused)
{
	char addr[32], fd[16];

	(void)unused;
	close(ready_pipe[0]);
	test_barrier_done();
	snprintf(addr, sizeof(addr), "%p", (void *)region);
	snprintf(fd, sizeof(fd), "%d", ready_pipe[1]);
	execl(self_exe, self_exe, "exec-child", addr, fd, (char *)NULL);
	test_fail_errno("execl");
}

/* The new image of the exec'ed child: own memory at the parent's address. */
static int __attribute__((noreturn)) exec_child(char **argv)
{
	sigset_t term;
	int fd = atoi(argv[3]);

	me = EXEC_CHILD;
	region = (unsigned char *)strtoul(argv[2], NULL, 16);
	if (mmap(region, REGION, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != region)
		test_fail_errno("exec'ed child: mmap at the parent's address");
	if (madvise(region, REGION, MADV_NOHUGEPAGE))
		test_fail_errno("madvise(MADV_NOHUGEPAGE)");
	cow_fill_pages(region, PAGES, seed_of);
	close(fd);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	while (sigwaitinfo(&term, NULL) < 0)
		if (errno != EINTR)
			test_fail_errno("sigwaitinfo");
	cow_expect_pages(region, PAGES, seed_of, "exec'ed child");
	exit(0);
}

static pid_t tree[3];

static void check_pfns(const char *when)
{
	cow_check_pfns(tree[PARENT], tree[COW_CHILD], region, PAGES, cow_child_rule, when);
	cow_check_pfns(tree[PARENT], tree[EXEC_CHILD], region, PAGES, exec_child_rule, when);
}

static void wait_exec_child(void)
{
	char byte;

	close(ready_pipe[1]);
	while (read(ready_pipe[0], &byte, 1) != 0)
		if (errno != EINTR)
			test_fail("the exec'ed child did not set up");
	close(ready_pipe[0]);
}

int main(int argc, char **argv)
{
	long before;

	if (argc == 4 && !strcmp(argv[1], "exec-child"))
		exec_child(argv);
	test_init(argc, argv);
	self_exe = realpath("/proc/self/exe", NULL);
	if (!self_exe)
		test_fail_errno("realpath /proc/self/exe");
	region = mmap(ADDR, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (region != ADDR)
		test_fail_errno("mmap at a fixed address");
	if (madvise(region, REGION, MADV_NOHUGEPAGE)) /* as cow_map() does */
		test_fail_errno("madvise(MADV_NOHUGEPAGE)");
	cow_fill_pages(region, PAGES, seed_of);
	test_barrier_init();
	tree[PARENT] = getpid();
	tree[COW_CHILD] = cow_fork(cow_child_main, 0);
	/* After that fork: only the exec'ed child has the write end the parent waits on. */
	if (pipe(ready_pipe))
		test_fail_errno("pipe");
	tree[EXEC_CHILD] = cow_fork(exec_child_main, 0);
	test_barrier_wait();
	wait_exec_child();

	before = cow_tree_pss_kb(tree, 3, region, REGION);
	check_pfns("before dump");
	cow_sharing_verdict("before dump");
	test_ready();
	test_wait_sigterm();

	cow_check_pss(before, cow_tree_pss_kb(tree, 3, region, REGION),
		      "region at the same address");
	check_pfns("after restore");
	cow_children_verdict("parent");
	cow_expect_pages(region, PAGES, seed_of, "parent");
	cow_sharing_verdict("after restore");
	test_pass();
}
