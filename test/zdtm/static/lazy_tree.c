/*
 * A tree whose every process has private memory a lazy restore leaves to the daemon: the
 * root, two children and a grandchild share a buffer inherited across fork (copy-on-write,
 * each having rewritten a part of it) and each has a buffer of its own. After restore each
 * process checks every word of both, then the root collects the children's verdicts.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define INHERITED_SIZE (32ul << 20)
#define OWN_SIZE (16ul << 20)
#define PART (1ul << 20)

static unsigned char *inherited;

/* Process nr (0 the root) rewrote its part of the inherited buffer and has its own one. */
static unsigned char *set_up(unsigned int nr)
{
	pattern_fill(inherited + nr * PART, PART, 50 + nr);
	return test_map_pattern(OWN_SIZE, 100 + nr);
}

static void check(unsigned int nr, const unsigned char *own, const char *who)
{
	unsigned int part;

	for (part = 0; part < INHERITED_SIZE / PART; part++)
		pattern_expect(inherited + part * PART, PART, part == nr ? 50 + nr : 5 + part,
			       who);
	pattern_expect(own, OWN_SIZE, 100 + nr, who);
}

static void __attribute__((noreturn)) run_process(unsigned int nr, const char *who,
						 unsigned int grandchild_nr)
{
	unsigned char *own;
	pid_t child = -1;

	/* Forked before this process rewrites its part: the grandchild differs in its own only. */
	if (grandchild_nr) {
		child = fork();
		if (child < 0)
			test_fail_errno("fork the grandchild");
		if (child == 0)
			run_process(grandchild_nr, "grandchild", 0);
	}
	own = set_up(nr);
	test_barrier_done();
	test_wait_sigterm();
	check(nr, own, who);
	if (child > 0)
		test_children_verdict(&child, 1, who);
	exit(0);
}

int main(int argc, char **argv)
{
	unsigned int part;
	unsigned char *own;
	pid_t children[2];

	test_init(argc, argv);
	inherited = test_map_pattern(INHERITED_SIZE, 0);
	for (part = 0; part < INHERITED_SIZE / PART; part++)
		pattern_fill(inherited + part * PART, PART, 5 + part);
	test_barrier_init();
	for (unsigned int i = 0; i < 2; i++) {
		children[i] = fork();
		if (children[i] < 0)
			test_fail_errno("fork");
		if (children[i] == 0)
			run_process(1 + i, i ? "second child" : "first child", i ? 0 : 3);
	}
	own = set_up(0);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();
	check(0, own, "root");
	test_children_verdict(children, 2, "root");
	test_pass();
}
