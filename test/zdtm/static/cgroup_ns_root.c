/*
 * A container's cgroups: the root is the init of a pid namespace and of a cgroup
 * namespace of its own, rooted at cgroup /zdtm_cgns (cpu, pids and cgroup v2); its child
 * lives in /zdtm_cgns/inner. After restore the root reads "/" in /proc/self/cgroup and
 * the child "/inner", and the cgroups' files (criu's view, the whole hierarchy) list them
 * where they really are: the root in /zdtm_cgns, the child in /zdtm_cgns/inner.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define TOP "zdtm_cgns"

static const char *const hiers[] = {"cpu", "pids", "unified"};
#define NR_HIERS (sizeof(hiers) / sizeof(hiers[0]))

static void cg_file(char *out, size_t size, const char *hier, const char *below, const char *file)
{
	snprintf(out, size, "/sys/fs/cgroup/%s/" TOP "%s/%s", hier, below, file);
}

static void child_main(void)
{
	char path[256];

	for (size_t i = 0; i < NR_HIERS; i++) {
		cg_file(path, sizeof(path), hiers[i], "/inner", "cgroup.procs");
		write_file(path, "0", 1);
	}
	for (;;)
		pause();
}

/* Each of our hierarchies' lines of a cgroup file names path. */
static void expect_cgroup_file(const char *file, const char *path)
{
	char text[4096], want[256];

	read_file(file, text, sizeof(text));
	for (size_t i = 0; i < NR_HIERS; i++) {
		if (!strcmp(hiers[i], "unified"))
			snprintf(want, sizeof(want), "0::%s\n", path);
		else
			snprintf(want, sizeof(want), ":%s:%s\n", hiers[i], path);
		if (!strstr(text, want))
			test_fail("%s does not read %s (it reads:\n%s)", file, want, text);
	}
}

/* The cgroup's own list of its processes holds pid (as our pid namespace numbers it). */
static void expect_procs(const char *below, pid_t pid)
{
	char path[256], text[4096], want[32], line[34];

	snprintf(want, sizeof(want), "%d\n", pid);
	snprintf(line, sizeof(line), "\n%d\n", pid);
	for (size_t i = 0; i < NR_HIERS; i++) {
		cg_file(path, sizeof(path), hiers[i], below, "cgroup.procs");
		read_file(path, text, sizeof(text));
		if (strncmp(text, want, strlen(want)) && !strstr(text, line))
			test_fail("%s does not list %d: %s", path, pid, text);
	}
}

static void make_dirs(void)
{
	char path[256];

	for (size_t i = 0; i < NR_HIERS; i++) {
		cg_file(path, sizeof(path), hiers[i], "/inner", "");
		rmdir(path);
		cg_file(path, sizeof(path), hiers[i], "", "");
		rmdir(path);
		if (mkdir(path, 0755) && errno != EEXIST)
			test_fail("mkdir %s: %s", path, strerror(errno));
		cg_file(path, sizeof(path), hiers[i], "/inner", "");
		if (mkdir(path, 0755) && errno != EEXIST)
			test_fail("mkdir %s: %s", path, strerror(errno));
		cg_file(path, sizeof(path), hiers[i], "", "cgroup.procs");
		write_file(path, "0", 1);
	}
}

/*
 * The child's cgroup file: /proc is the host's (its pid namespace's numbers are not ours),
 * where /proc/self still is us and lists our child by the number it has there.
 */
static void child_cgroup_file(char *out, size_t size)
{
	char children[64];
	pid_t host_child;

	read_file("/proc/thread-self/children", children, sizeof(children));
	host_child = atoi(children);
	if (host_child <= 0)
		test_fail("no child in /proc/thread-self/children: \"%s\"", children);
	snprintf(out, size, "/proc/%d/cgroup", host_child);
}

int main(int argc, char **argv)
{
	char file[64];
	pid_t child;

	test_init(argc, argv);
	make_dirs();
	/* The namespace's root is the cgroup the launcher is in now: /zdtm_cgns. */
	test_launch_root(CLONE_NEWPID | CLONE_NEWCGROUP);
	child = test_fork(child_main);
	for (int i = 0; i < 1000; i++) {
		char text[4096];

		child_cgroup_file(file, sizeof(file));
		read_file(file, text, sizeof(text));
		if (strstr(text, "0::/inner\n"))
			break;
		usleep(1000);
	}

	test_ready();
	test_wait_sigterm();

	if (getpid() != 1)
		test_fail("pid %d, not the init of its pid namespace", getpid());
	expect_cgroup_file("/proc/self/cgroup", "/");
	child_cgroup_file(file, sizeof(file));
	expect_cgroup_file(file, "/inner");
	expect_procs("", 1);
	expect_procs("/inner", child);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	test_pass();
}
