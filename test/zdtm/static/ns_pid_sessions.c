/*
 * Sessions across a pid namespace's tree that fork order alone cannot give back: the root is
 * the namespace's init, leading a session of its own. L leads a session; its child M forks O
 * and exits, so the init adopts O, which stays in L's session. L's child P forks E and only
 * then calls setsid(): E stays in L's session under a parent leading another. Z leads a
 * session, forks W and exits without being reaped: W, adopted by the init, is in the session
 * of a zombie. After restore every process has its pid, parent, session and group back, and
 * "NSsid:" and "NSpgid:" of each name its leaders at every pid namespace level ("NSpid:" of
 * the leader). With ZDTM_SESSIONS_SUBREAPER set the root is no init but a subreaper, which
 * adopts O and W the same way.
 */
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MAX_LEVELS  8
#define ZOMBIE_CODE 3

/* The tree's pids inside the namespace, filled by whoever forks each. */
struct tree_pids {
	pid_t l, m, o, p, e, z, w;
};

static struct tree_pids *pids;
static unsigned int levels;
/* Who adopts orphans: the init (1), or with ZDTM_SESSIONS_SUBREAPER the root, a subreaper. */
static pid_t root_pid = 1;

struct ids {
	pid_t pid, ppid, sid, pgid;
};

static struct ids take_ids(void)
{
	return (struct ids){ getpid(), getppid(), getsid(0), getpgid(0) };
}

/* Set up: wait for the check, find the same ids as before the dump, check the child. */
static void __attribute__((noreturn)) member_main(const char *who, pid_t child)
{
	struct ids before = take_ids(), now;

	test_barrier_done();
	test_wait_sigterm();
	now = take_ids();
	if (memcmp(&before, &now, sizeof(now)))
		test_fail("%s: pid/ppid/sid/pgid %d/%d/%d/%d, expected %d/%d/%d/%d", who, now.pid,
			  now.ppid, now.sid, now.pgid, before.pid, before.ppid, before.sid,
			  before.pgid);
	if (child)
		test_children_verdict(&child, 1, who);
	exit(0);
}

static void run_o(void)
{
	while (getppid() != root_pid)
		sched_yield();
	member_main("O", 0);
}

static void run_m(void)
{
	pids->o = test_fork(run_o);
	test_barrier_done();
	_exit(0);
}

static void run_e(void)
{
	member_main("E", 0);
}

/* setsid() once E is forked: E stays in L's session. */
static void run_p(void)
{
	pids->e = test_fork(run_e);
	if (setsid() < 0)
		test_fail_errno("P: setsid");
	member_main("P", pids->e);
}

static void run_l(void)
{
	int status;

	if (setsid() < 0)
		test_fail_errno("L: setsid");
	pids->m = test_fork(run_m);
	if (waitpid(pids->m, &status, 0) != pids->m || status)
		test_fail("L: M did not exit cleanly (status %#x)", status);
	pids->p = test_fork(run_p);
	member_main("L", pids->p);
}

static void run_w(void)
{
	while (getppid() != root_pid)
		sched_yield();
	member_main("W", 0);
}

static void run_z(void)
{
	if (setsid() < 0)
		test_fail_errno("Z: setsid");
	pids->w = test_fork(run_w);
	test_barrier_done();
	_exit(ZOMBIE_CODE);
}

/* "KEY:" of a /proc/PID/status text: its numbers, how many. */
static unsigned int status_ids(const char *text, const char *key, pid_t *ids)
{
	const char *pos = strstr(text, key);
	unsigned int nr = 0;
	char *end;

	if (!pos)
		test_fail("no %s in a status file", key);
	for (pos += strlen(key);; pos = end) {
		long id = strtol(pos, &end, 10);

		if (end == pos || nr == MAX_LEVELS)
			return nr;
		ids[nr++] = id;
	}
}

/* Every level of a process of our namespace, found by its pid inside. */
struct levels {
	pid_t pid[MAX_LEVELS], sid[MAX_LEVELS], pgid[MAX_LEVELS];
};

static void find_levels(pid_t inner, struct levels *out)
{
	char path[64], text[4096];
	struct dirent *de;
	DIR *proc = opendir("/proc");
	bool found = false;

	if (!proc)
		test_fail_errno("opendir /proc");
	while (!found && (de = readdir(proc))) {
		FILE *f;
		size_t len;
		pid_t host = atoi(de->d_name);

		if (host <= 0 || !test_same_pidns(host))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/status", host);
		f = fopen(path, "r");
		if (!f)
			continue;
		len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[len] = '\0';
		if (status_ids(text, "\nNSpid:", out->pid) != levels ||
		    out->pid[levels - 1] != inner)
			continue;
		if (status_ids(text, "\nNSsid:", out->sid) != levels ||
		    status_ids(text, "\nNSpgid:", out->pgid) != levels)
			test_fail("%d: NSsid or NSpgid not %u levels deep", inner, levels);
		found = true;
	}
	closedir(proc);
	if (!found)
		test_fail("no process is %d in our pid namespace", inner);
}

/* who's session and group are led by sid_leader and pgid_leader, at every level. */
static void expect_leaders(const char *who, pid_t pid, pid_t sid_leader, pid_t pgid_leader)
{
	struct levels member, sid, pgid;

	find_levels(pid, &member);
	find_levels(sid_leader, &sid);
	find_levels(pgid_leader, &pgid);
	for (unsigned int i = 0; i < levels; i++)
		if (member.sid[i] != sid.pid[i] || member.pgid[i] != pgid.pid[i])
			test_fail("%s: level %u: session %d, group %d; its leaders are %d and %d",
				  who, i, member.sid[i], member.pgid[i], sid.pid[i], pgid.pid[i]);
}

int main(int argc, char **argv)
{
	pid_t children[3];
	siginfo_t info;
	int status;

	test_init(argc, argv);
	if (getenv("ZDTM_SESSIONS_SUBREAPER")) {
		root_pid = getpid();
		if (prctl(PR_SET_CHILD_SUBREAPER, 1))
			test_fail_errno("PR_SET_CHILD_SUBREAPER");
	} else {
		test_launch_root(CLONE_NEWPID);
		/* upstream criu dumps (and restores) a pid namespace whose init leads its session */
		if (setsid() < 0)
			test_fail_errno("init: setsid");
	}
	levels = ns_pid_levels();
	if (levels > MAX_LEVELS)
		test_fail("%u pid namespace levels", levels);
	pids = mmap(NULL, sizeof(*pids), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pids == MAP_FAILED)
		test_fail_errno("mmap");
	test_barrier_init();
	pids->l = test_fork(run_l);
	pids->z = test_fork(run_z);
	test_barrier_wait();
	if (waitid(P_PID, pids->z, &info, WEXITED | WNOWAIT))
		test_fail_errno("waitid for Z");
	test_ready();
	test_wait_sigterm();

	expect_leaders("O", pids->o, pids->l, pids->l);
	expect_leaders("P", pids->p, pids->p, pids->p);
	expect_leaders("E", pids->e, pids->l, pids->l);
	expect_leaders("W", pids->w, pids->z, pids->z);
	/* L checks P, which checks E */
	children[0] = pids->o;
	children[1] = pids->w;
	children[2] = pids->l;
	test_children_verdict(children, 3, "init");
	if (waitpid(pids->z, &status, 0) != pids->z || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != ZOMBIE_CODE)
		test_fail("Z: wait status %#x, expected exit %d", status, ZOMBIE_CODE);
	test_pass();
}
