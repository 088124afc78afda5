/*
 * --join-ns uts, ipc and time (ZDTM_JOIN_KIND names which): the root has a namespace of
 * that kind of its own at dump, with state of its own (a host name; a SysV segment; clocks
 * 30 days ahead). Before that it starts a helper outside the tree that holds another one
 * (its own host name, segment and clocks 5 days ahead) and writes the helper's pid to
 * ZDTM_JOIN_HELPER_FILE; the runner restores with --join-ns KIND:PID. After restore the
 * root lives in the helper's namespace (same inode) and sees the helper's state, none of
 * the dump's: nothing of the images was put in the joined namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define HELPER_HOST "zdtm-join-helper"
#define DUMPED_HOST "zdtm-join-dumped"
#define HELPER_KEY  0x4a4f4e48 /* a segment only the helper's namespace has */
#define DUMPED_KEY  0x4a4f4e44 /* one only the dumped namespace had */
#define HELPER_DAYS 5L
#define DUMPED_DAYS 30L

static const char *kind;
static pid_t helper;

static uint64_t ns_ino(pid_t pid)
{
	char path[64];
	struct stat st;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kind);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	if (stat(path, &st))
		test_fail("stat %s: %s", path, strerror(errno));
	return st.st_ino;
}

/* The monotonic offset, in seconds, of the caller's time namespace. */
static long monotonic_offset(void)
{
	char text[256], *line;
	long sec;

	read_file("/proc/self/timens_offsets", text, sizeof(text));
	line = strstr(text, "monotonic");
	if (!line || sscanf(line, "monotonic %ld", &sec) != 1)
		test_fail("timens_offsets: no monotonic line in \"%s\"", text);
	return sec;
}

/* The helper's namespace, its state, then a child of it that lives in them until killed. */
static void start_helper(const char *pid_file)
{
	int status;
	pid_t mid = fork();

	if (mid < 0)
		test_fail_errno("fork the helper");
	if (mid == 0) {
		char text[32];
		int len;

		if (!strcmp(kind, "time"))
			test_unshare_time(HELPER_DAYS * 86400, 0);
		else if (unshare(!strcmp(kind, "uts") ? CLONE_NEWUTS : CLONE_NEWIPC))
			test_fail_errno("unshare the helper's namespace");
		if (!strcmp(kind, "uts") && sethostname(HELPER_HOST, strlen(HELPER_HOST)))
			test_fail_errno("sethostname of the helper");
		if (!strcmp(kind, "ipc") && shmget(HELPER_KEY, 4096, IPC_CREAT | 0600) < 0)
			test_fail_errno("shmget of the helper");
		helper = fork();
		if (helper < 0)
			test_fail_errno("fork the helper itself");
		if (helper == 0) {
			/* Outside the tree (its parent is gone); the runner kills it at the end. */
			for (int i = 0; i < 3600; i++)
				sleep(1);
			_exit(0);
		}
		len = snprintf(text, sizeof(text), "%d", helper);
		write_file(pid_file, text, len);
		_exit(0);
	}
	if (waitpid(mid, &status, 0) != mid || !WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("the helper's parent failed (status %#x)", status);
}

static pid_t read_helper(const char *pid_file)
{
	char text[32] = "";

	read_file(pid_file, text, sizeof(text) - 1);
	return atoi(text);
}

int main(int argc, char **argv)
{
	const char *pid_file = getenv("ZDTM_JOIN_HELPER_FILE");
	uint64_t helper_ino;
	char host[128];

	test_init(argc, argv);
	kind = getenv("ZDTM_JOIN_KIND");
	if (!kind || !pid_file ||
	    (strcmp(kind, "uts") && strcmp(kind, "ipc") && strcmp(kind, "time")))
		test_fail("ZDTM_JOIN_KIND (uts, ipc, time) and ZDTM_JOIN_HELPER_FILE are needed");
	start_helper(pid_file);
	helper = read_helper(pid_file);
	helper_ino = ns_ino(helper);

	if (!strcmp(kind, "time")) {
		test_unshare_time(DUMPED_DAYS * 86400, 0);
		test_launch_root(0);
	} else {
		if (unshare(!strcmp(kind, "uts") ? CLONE_NEWUTS : CLONE_NEWIPC))
			test_fail_errno("unshare the tree's namespace");
		if (!strcmp(kind, "uts") && sethostname(DUMPED_HOST, strlen(DUMPED_HOST)))
			test_fail_errno("sethostname");
		if (!strcmp(kind, "ipc") && shmget(DUMPED_KEY, 4096, IPC_CREAT | 0600) < 0)
			test_fail_errno("shmget");
	}
	if (ns_ino(0) == helper_ino)
		test_fail("the tree is in the helper's %s namespace before the dump", kind);
	if (!strcmp(kind, "time") && monotonic_offset() != DUMPED_DAYS * 86400)
		test_fail("the tree's monotonic offset is %ld before the dump", monotonic_offset());
	test_ready();
	test_wait_sigterm();

	if (ns_ino(0) != helper_ino)
		test_fail("restored in %s namespace %llu, not the helper's %llu", kind,
			  (unsigned long long)ns_ino(0), (unsigned long long)helper_ino);
	if (!strcmp(kind, "uts")) {
		if (gethostname(host, sizeof(host)))
			test_fail_errno("gethostname");
		if (strcmp(host, HELPER_HOST))
			test_fail("host name \"%s\", not the helper's \"%s\"", host, HELPER_HOST);
	}
	if (!strcmp(kind, "ipc")) {
		if (shmget(HELPER_KEY, 0, 0) < 0)
			test_fail("the helper's segment is gone: %s", strerror(errno));
		if (shmget(DUMPED_KEY, 0, 0) >= 0 || errno != ENOENT)
			test_fail("the dumped segment was made in the joined namespace");
	}
	if (!strcmp(kind, "time") && monotonic_offset() != HELPER_DAYS * 86400)
		test_fail("monotonic offset %ld s, not the helper's %ld s", monotonic_offset(),
			  HELPER_DAYS * 86400);
	test_pass();
}
