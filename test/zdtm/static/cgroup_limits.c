/*
 * A task and its thread in cgroups of their own, in cgroup v1 hierarchies (cpu, memory,
 * pids, freezer) and in cgroup v2, with limits set and an empty cgroup below: after
 * restore /proc/self/cgroup (the task's and the thread's) names the same cgroups, and the
 * limits read back from the cgroup files are the ones set. ZDTM_CG_NAME names the top
 * cgroup (default zdtm_cg); ZDTM_CG_SHARES: the cpu.shares expected after restore (the
 * runner may change it between dump and restore to see whether restore sets it back).
 * ZDTM_CG_THREAD_APART: the thread lives in cpu's sub/empty alone (v1 moves a thread by
 * itself, through tasks), and must be back there.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CG "/sys/fs/cgroup"

struct limit {
	const char *hier, *file, *value;
};

/* Set in the task's cgroup, top/sub: what lies above the tree's cgroups is not its own. */
static const struct limit limits[] = {
	{"cpu", "cpu.shares", "512"},
	{"cpu", "cpu.cfs_quota_us", "50000"},
	{"memory", "memory.limit_in_bytes", "268435456"},
	{"memory", "memory.soft_limit_in_bytes", "134217728"},
	{"pids", "pids.max", "64"},
	{"unified", "cgroup.max.descendants", "3"},
	{"unified", "cgroup.max.depth", "2"},
};
static const char *const hiers[] = {"cpu", "memory", "pids", "freezer", "unified"};
#define NR_HIERS (sizeof(hiers) / sizeof(hiers[0]))

static const char *name;
static pid_t thread_tid;

static void cg_path(char *out, size_t size, const char *hier, const char *below)
{
	snprintf(out, size, CG "/%s/%s%s%s", hier, name, *below ? "/" : "", below);
}

static void write_str(const char *path, const char *value)
{
	write_file(path, value, strlen(value));
}

static void rmdir_quiet(const char *hier, const char *below)
{
	char path[256];

	cg_path(path, sizeof(path), hier, below);
	rmdir(path);
}

/* Leftovers of an earlier run that failed before it cleaned up. */
static void remove_dirs(void)
{
	for (size_t i = 0; i < NR_HIERS; i++) {
		rmdir_quiet(hiers[i], "sub/empty");
		rmdir_quiet(hiers[i], "sub");
		rmdir_quiet(hiers[i], "");
	}
}

static void make_dir(const char *hier, const char *below)
{
	char path[256];

	cg_path(path, sizeof(path), hier, below);
	if (mkdir(path, 0755) && errno != EEXIST)
		test_fail("mkdir %s: %s", path, strerror(errno));
}

static void *thread_main(void *arg)
{
	char path[256], tid[16];

	(void)arg;
	if (getenv("ZDTM_CG_THREAD_APART")) {
		cg_path(path, sizeof(path), "cpu", "sub/empty/tasks");
		snprintf(tid, sizeof(tid), "%ld", (long)syscall(SYS_gettid));
		write_str(path, tid);
	}
	thread_tid = syscall(SYS_gettid);
	for (;;)
		pause();
	return NULL;
}

/* "HIER:PATH" lines of a cgroup file: /NAME/sub (or below) of the hierarchy named hier. */
static void expect_member(const char *file, const char *hier, const char *below)
{
	char text[4096], want[256], *line;

	read_file(file, text, sizeof(text));
	if (!strcmp(hier, "unified"))
		snprintf(want, sizeof(want), "0::/%s/sub%s\n", name, below);
	else
		snprintf(want, sizeof(want), ":%s:/%s/sub%s\n", hier, name, below);
	line = strstr(text, want);
	if (!line)
		test_fail("%s does not hold %s (it reads:\n%s)", file, want, text);
}

static void expect_value(const char *hier, const char *below, const char *file, const char *want)
{
	char path[256], got[256];
	size_t len;

	cg_path(path, sizeof(path), hier, below);
	strncat(path, "/", sizeof(path) - strlen(path) - 1);
	strncat(path, file, sizeof(path) - strlen(path) - 1);
	len = read_file(path, got, sizeof(got));
	if (len && got[len - 1] == '\n')
		got[len - 1] = '\0';
	if (strcmp(got, want))
		test_fail("%s reads \"%s\", expected \"%s\"", path, got, want);
}

int main(int argc, char **argv)
{
	const char *shares = getenv("ZDTM_CG_SHARES");
	char path[256], task_cg[64];
	pthread_t thread;

	test_init(argc, argv);
	name = getenv("ZDTM_CG_NAME") ?: "zdtm_cg";
	remove_dirs();
	for (size_t i = 0; i < NR_HIERS; i++) {
		make_dir(hiers[i], "");
		make_dir(hiers[i], "sub");
		make_dir(hiers[i], "sub/empty");
	}
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		cg_path(path, sizeof(path), limits[i].hier, "sub");
		strncat(path, "/", sizeof(path) - strlen(path) - 1);
		strncat(path, limits[i].file, sizeof(path) - strlen(path) - 1);
		write_str(path, limits[i].value);
	}
	for (size_t i = 0; i < NR_HIERS; i++) {
		cg_path(path, sizeof(path), hiers[i], "sub/cgroup.procs");
		write_str(path, "0");
	}
	if (pthread_create(&thread, NULL, thread_main, NULL))
		test_fail("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);

	test_ready();
	test_wait_sigterm();

	snprintf(task_cg, sizeof(task_cg), "/proc/self/task/%d/cgroup", thread_tid);
	for (size_t i = 0; i < NR_HIERS; i++) {
		bool apart = getenv("ZDTM_CG_THREAD_APART") && !strcmp(hiers[i], "cpu");

		expect_member("/proc/self/cgroup", hiers[i], "");
		expect_member(task_cg, hiers[i], apart ? "/empty" : "");
		cg_path(path, sizeof(path), hiers[i], "sub/empty");
		if (access(path, F_OK))
			test_fail("the empty cgroup %s is gone", path);
	}
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		const char *want = limits[i].value;

		if (shares && !strcmp(limits[i].file, "cpu.shares"))
			want = shares;
		expect_value(limits[i].hier, "sub", limits[i].file, want);
	}

	/* Out of them again (the hierarchies' roots), and they go. */
	for (size_t i = 0; i < NR_HIERS; i++) {
		snprintf(path, sizeof(path), CG "/%s/cgroup.procs", hiers[i]);
		write_str(path, "0");
	}
	remove_dirs();
	test_pass();
}
