/*
 * A session and a process group whose leaders exited: root (a subreaper) forks S; S calls
 * setsid(), forks G (leader of group G), X (moved into G) and Z (in S's group), reaps G and
 * exits. X forks Y in group G. X and Z come to the root. After restore every process finds
 * its pid, parent, session and group, and no process with S's or G's pid is left: session S
 * holds exactly X, Y and Z, as before the dump.
 * With ZDTM_TREE_PIDNS set the root is the init of a pid namespace of its own: the pids,
 * sessions and groups checked are those inside it ("NSpid:", "NSsid:", "NSpgid:" read from
 * /proc, which is the runner's), where restore must re-create the gone leaders' pids too.
 */
#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"


#define MAX_MEMBERS 8

struct ids {
	pid_t pid, ppid, sid, pgid;
};

/* Filled by S before the root takes its copy: which pids the tree had. */
struct tree_pids {
	pid_t s, g, x, z;
};

static struct tree_pids *shared_pids;
static pid_t root_pid;
/* S's end of the pipe G waits on: G exits once S closed it, so S's other children close it. */
static int group_hold_fd = -1;

static struct ids take_ids(void)
{
	return (struct ids){ getpid(), getppid(), getsid(0), getpgid(0) };
}

static void check_ids(const char *who, const struct ids *want)
{
	struct ids now = take_ids();

	if (memcmp(&now, want, sizeof(now)))
		test_fail("%s: pid/ppid/sid/pgid %d/%d/%d/%d, expected %d/%d/%d/%d", who, now.pid,
			  now.ppid, now.sid, now.pgid, want->pid, want->ppid, want->sid,
			  want->pgid);
}

/* Ids once setup is over, then the check after restore; a member's child is waited for. */
static void __attribute__((noreturn)) member_wait_and_check(const char *who, pid_t child)
{
	struct ids ids = take_ids();

	test_barrier_done();
	test_wait_sigterm();
	check_ids(who, &ids);
	if (child)
		test_children_verdict(&child, 1, who);
	exit(0);
}

static void __attribute__((noreturn)) run_y(void)
{
	member_wait_and_check("Y", 0);
}

/* X: moved into G's group by S, forks Y there, and waits until S is gone. */
static void __attribute__((noreturn)) run_x(pid_t group)
{
	pid_t y;

	munmap(shared_pids, sizeof(*shared_pids));
	close(group_hold_fd);
	while (getpgid(0) != group)
		sched_yield();
	y = fork();
	if (y < 0)
		test_fail_errno("fork Y");
	if (y == 0)
		run_y();
	while (getppid() != root_pid)
		sched_yield();
	member_wait_and_check("X", y);
}

static void __attribute__((noreturn)) run_z(void)
{
	munmap(shared_pids, sizeof(*shared_pids));
	close(group_hold_fd);
	while (getppid() != root_pid)
		sched_yield();
	member_wait_and_check("Z", 0);
}

/* G leads its group until S, having moved X in, closes the pipe. */
static pid_t fork_group_leader(void)
{
	int hold[2];
	pid_t g;
	char byte;

	if (pipe(hold))
		test_fail_errno("pipe");
	g = fork();
	if (g < 0)
		test_fail_errno("fork G");
	if (g == 0) {
		close(hold[1]);
		_exit(read(hold[0], &byte, 1) == 0 ? 0 : 1);
	}
	close(hold[0]);
	group_hold_fd = hold[1];
	if (setpgid(g, g))
		test_fail_errno("setpgid G");
	return g;
}

static void __attribute__((noreturn)) run_s(void)
{
	pid_t g, x, z;
	int status;

	if (setsid() < 0)
		test_fail_errno("setsid");
	g = fork_group_leader();
	x = fork();
	if (x < 0)
		test_fail_errno("fork X");
	if (x == 0)
		run_x(g);
	if (setpgid(x, g))
		test_fail_errno("setpgid X");
	z = fork();
	if (z < 0)
		test_fail_errno("fork Z");
	if (z == 0)
		run_z();
	close(group_hold_fd);
	if (waitpid(g, &status, 0) != g || status)
		test_fail("S: G did not exit cleanly (status %#x)", status);
	*shared_pids = (struct tree_pids){ getpid(), g, x, z };
	_exit(0);
}

static int cmp_pids(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

/* Our pid namespace's depth in /proc's: the entries of our own "NSpid:". */
static unsigned int own_depth;

/*
 * What process host_pid (as /proc names it) is in our pid namespace: its pid and session
 * there, the last numbers of "NSpid:" and "NSsid:". 0: gone, or not in our namespace.
 */
static pid_t inner_ids(const char *host_pid, pid_t *sid)
{
	char path[64], line[256];
	unsigned int depth = 0;
	pid_t pid = 0;
	FILE *f;

	if (!test_same_pidns(atoi(host_pid)))
		return 0;
	snprintf(path, sizeof(path), "/proc/%s/status", host_pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		bool is_pid = !strncmp(line, "NSpid:", 6), is_sid = !strncmp(line, "NSsid:", 6);
		char *pos = line + 6, *end;

		if (!is_pid && !is_sid)
			continue;
		for (unsigned int nr = 1;; nr++, pos = end) {
			long id = strtol(pos, &end, 10);

			if (end == pos)
				break;
			if (is_pid) {
				pid = id;
				depth = nr;
			} else {
				*sid = id;
			}
		}
	}
	fclose(f);
	return depth == own_depth ? pid : 0;
}

/* The pids (in our namespace) of the processes in session sid, sorted. */
static int session_members(pid_t sid, pid_t *members)
{
	struct dirent *de;
	int nr = 0;
	DIR *proc = opendir("/proc");

	if (!proc)
		test_fail_errno("opendir /proc");
	while ((de = readdir(proc))) {
		pid_t pid, pid_sid = 0;

		if (atoi(de->d_name) <= 0)
			continue;
		pid = inner_ids(de->d_name, &pid_sid);
		if (pid > 0 && pid_sid == sid) {
			if (nr == MAX_MEMBERS)
				test_fail("session %d has more than %d processes", sid,
					  MAX_MEMBERS);
			members[nr++] = pid;
		}
	}
	closedir(proc);
	qsort(members, nr, sizeof(*members), cmp_pids);
	return nr;
}

static void expect_gone(pid_t pid, const char *who)
{
	struct dirent *de;
	DIR *proc = opendir("/proc");
	pid_t sid;

	if (!proc)
		test_fail_errno("opendir /proc");
	while ((de = readdir(proc)))
		if (atoi(de->d_name) > 0 && inner_ids(de->d_name, &sid) == pid)
			test_fail("a process with %s's pid %d exists (a helper left behind?)", who,
				  pid);
	closedir(proc);
}

int main(int argc, char **argv)
{
	pid_t members[MAX_MEMBERS], members_now[MAX_MEMBERS], s;
	struct tree_pids pids;
	int nr, nr_now, status;
	struct ids ids;

	test_init(argc, argv);
	/* upstream criu dumps (and restores) a pid namespace whose init leads its session */
	if (getenv("ZDTM_TREE_PIDNS")) {
		test_launch_root(CLONE_NEWPID);
		if (setsid() < 0)
			test_fail_errno("init: setsid");
	}
	own_depth = ns_pid_levels();
	root_pid = getpid();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		test_fail_errno("PR_SET_CHILD_SUBREAPER");
	shared_pids = mmap(NULL, sizeof(*shared_pids), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_pids == MAP_FAILED)
		test_fail_errno("mmap");
	test_barrier_init();
	s = fork();
	if (s < 0)
		test_fail_errno("fork S");
	if (s == 0)
		run_s();
	if (waitpid(s, &status, 0) != s || status)
		test_fail("S did not exit cleanly (status %#x)", status);
	test_barrier_wait();
	pids = *shared_pids;
	munmap(shared_pids, sizeof(*shared_pids));
	nr = session_members(pids.s, members);
	if (nr != 3)
		test_fail("session %d holds %d processes before the dump, expected 3", pids.s, nr);
	ids = take_ids();
	test_ready();
	test_wait_sigterm();

	check_ids("root", &ids);
	expect_gone(pids.s, "S");
	expect_gone(pids.g, "G");
	nr_now = session_members(pids.s, members_now);
	if (nr_now != nr || memcmp(members, members_now, nr * sizeof(*members)))
		test_fail("session %d holds %d processes after restore, %d before", pids.s, nr_now,
			  nr);
	test_children_verdict(&pids.x, 1, "root");
	test_children_verdict(&pids.z, 1, "root");
	test_pass();
}
