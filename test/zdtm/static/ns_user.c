/*
 * A tree in a user namespace of its own, as an unprivileged container runtime makes one:
 * the root is born into new user, pid, UTS and IPC namespaces (the user namespace owns the
 * others), ids 0-65535 inside mapped to 100000 on outside. The root becomes root inside
 * (uid 0, host uid 100000); a child takes other ids, supplementary groups and loses its
 * capabilities. After restore: the maps, every task's uids, gids, groups and capabilities
 * as the tree sees them, a SysV segment's owner (ids inside; not its creator's ids, which
 * no restore can set), the host name; and the capabilities still work (the root sets the
 * host name again, the child cannot).
 *
 * ZDTM_USERNS_UNMAPPED: the root also holds a deleted file open whose owner (uid 1234
 * outside) the namespace does not map, which no image can name: the dump is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zdtmtst.h"

#define HOSTNAME   "zdtm-userns"
/* Outside: the namespace maps neither. */
#define FILE_UID   1234
#define FILE_GID   4321
#define SHM_KEY	   0x7d000001
#define SHM_UID	   2345
#define SHM_GID	   5432
/* In the runner's scratch directory; owned by the namespace's root. */
#define OWNED_DIR "userns-dir"

/* The child's ids: real, effective, saved; and its supplementary groups. */
static const uid_t child_uids[3] = { 2000, 2001, 2002 };
static const gid_t child_gids[3] = { 1000, 1001, 1002 };
static const gid_t child_groups[] = { 5, 7, 3000 };
#define NR_CHILD_GROUPS (sizeof(child_groups) / sizeof(child_groups[0]))

struct caps {
	struct __user_cap_data_struct d[2];
};

static void get_caps(struct caps *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	if (syscall(SYS_capget, &h, c->d))
		test_fail_errno("capget");
}

static void expect_caps(const struct caps *want, const char *who)
{
	struct caps now;

	get_caps(&now);
	for (int i = 0; i < 2; i++)
		if (now.d[i].effective != want->d[i].effective ||
		    now.d[i].permitted != want->d[i].permitted ||
		    now.d[i].inheritable != want->d[i].inheritable)
			test_fail("%s: capability word %d eff/prm/inh %#x/%#x/%#x; expected "
				  "%#x/%#x/%#x",
				  who, i, now.d[i].effective, now.d[i].permitted,
				  now.d[i].inheritable, want->d[i].effective, want->d[i].permitted,
				  want->d[i].inheritable);
}

static void expect_map(const char *name)
{
	char path[64], text[256], want[64];
	unsigned int first, lower, count;

	snprintf(path, sizeof(path), "/proc/self/%s", name);
	read_file(path, text, sizeof(text));
	snprintf(want, sizeof(want), "%u %u %u", 0u, TEST_USERNS_HOST_ID, TEST_USERNS_IDS);
	/* the kernel pads the columns: compare the numbers */
	if (sscanf(text, "%u %u %u", &first, &lower, &count) != 3 || first ||
	    lower != TEST_USERNS_HOST_ID || count != TEST_USERNS_IDS || strchr(text, '\n') !=
	    strrchr(text, '\n'))
		test_fail("%s: \"%s\"; expected the one line \"%s\"", name, text, want);
}

static void expect_ids(const uid_t *uids, const gid_t *gids, const char *who)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;

	if (getresuid(&r, &e, &s) || getresgid(&rg, &eg, &sg))
		test_fail_errno("getresuid/getresgid");
	if (r != uids[0] || e != uids[1] || s != uids[2] || rg != gids[0] || eg != gids[1] ||
	    sg != gids[2])
		test_fail("%s: uids %u/%u/%u gids %u/%u/%u; expected %u/%u/%u and %u/%u/%u", who,
			  r, e, s, rg, eg, sg, uids[0], uids[1], uids[2], gids[0], gids[1],
			  gids[2]);
}

static void expect_groups(const gid_t *want, int n, const char *who)
{
	gid_t groups[16];
	int got = getgroups(16, groups);

	if (got != n)
		test_fail("%s: %d supplementary groups, expected %d", who, got, n);
	for (int i = 0; i < n; i++)
		if (groups[i] != want[i])
			test_fail("%s: group %d is %u, expected %u", who, i, groups[i], want[i]);
}

static void expect_hostname(const char *who)
{
	struct utsname names;

	if (uname(&names) || strcmp(names.nodename, HOSTNAME))
		test_fail("%s: host name \"%s\", expected \"%s\"", who, names.nodename, HOSTNAME);
}

/* Pipes: the child says it is set (byte), the root says the dump is over (byte). */
static int child_set[2], child_go[2];

static void child_main(void)
{
	struct caps none = { 0 };
	char byte;

	if (setgroups(NR_CHILD_GROUPS, child_groups) ||
	    setresgid(child_gids[0], child_gids[1], child_gids[2]) ||
	    setresuid(child_uids[0], child_uids[1], child_uids[2]))
		test_fail_errno("child: take its ids");
	expect_caps(&none, "child before the dump");
	if (write(child_set[1], "S", 1) != 1 || read(child_go[0], &byte, 1) != 1)
		test_fail_errno("child: sync");
	expect_map("uid_map");
	expect_map("gid_map");
	expect_ids(child_uids, child_gids, "child");
	expect_groups(child_groups, NR_CHILD_GROUPS, "child");
	expect_caps(&none, "child");
	expect_hostname("child");
	if (!sethostname("x", 1) || errno != EPERM)
		test_fail("child: sethostname without capabilities: %s", strerror(errno));
	exit(0);
}

/*
 * The launcher, still root outside: a file the namespace's root may read, owned by ids it
 * does not map, in the directory the root may write in (it deletes it: hold_ghost()).
 */
static void make_unmapped_file(void)
{
	const char *path = OWNED_DIR "/unmapped";
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);

	if (fd < 0 || fchown(fd, FILE_UID, FILE_GID) || close(fd))
		test_fail("%s: %s", path, strerror(errno));
}

/* In the root: that file, deleted, held open. */
static void hold_ghost(void)
{
	const char *path = OWNED_DIR "/unmapped";
	int fd = open(path, O_RDONLY);

	if (fd < 0 || unlink(path))
		test_fail("ghost %s: %s", path, strerror(errno));
}

static int make_shm(void)
{
	struct shmid_ds ds;
	int id = shmget(SHM_KEY, 4096, IPC_CREAT | IPC_EXCL | 0640);

	if (id < 0 || shmctl(id, IPC_STAT, &ds))
		test_fail_errno("shmget");
	ds.shm_perm.uid = SHM_UID;
	ds.shm_perm.gid = SHM_GID;
	if (shmctl(id, IPC_SET, &ds))
		test_fail_errno("IPC_SET");
	return id;
}

static void expect_shm(int id)
{
	struct shmid_ds ds;

	if (shmctl(id, IPC_STAT, &ds))
		test_fail("segment %d is gone: %s", id, strerror(errno));
	if (ds.shm_perm.uid != SHM_UID || ds.shm_perm.gid != SHM_GID ||
	    (ds.shm_perm.mode & 0777) != 0640 || ds.shm_perm.__key != SHM_KEY)
		test_fail("segment %d: owner %u:%u mode %#o key %#x; expected %u:%u 0640 %#x", id,
			  ds.shm_perm.uid, ds.shm_perm.gid, ds.shm_perm.mode & 0777,
			  ds.shm_perm.__key, SHM_UID, SHM_GID, SHM_KEY);
}

/* The launcher, still root outside: a directory the namespace's root may write in. */
static void make_owned_dir(void)
{
	if (mkdir(OWNED_DIR, 0700) || chown(OWNED_DIR, TEST_USERNS_HOST_ID, TEST_USERNS_HOST_ID))
		test_fail("%s: %s", OWNED_DIR, strerror(errno));
}

int main(int argc, char **argv)
{
	static const uid_t root_ids[3] = { 0, 0, 0 };
	unsigned int levels;
	struct caps root_caps;
	bool ghost = getenv("ZDTM_USERNS_UNMAPPED");
	int status, shm;
	pid_t child;
	char byte;

	test_init(argc, argv);
	if (ghost) {
		make_owned_dir();
		make_unmapped_file();
	}
	test_launch_root(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC);
	levels = ns_pid_levels();
	expect_ns_pid(1, levels, "init");
	/* root inside: ids 0 (100000 outside), every capability of the namespace kept */
	if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
		test_fail_errno("become root in the namespace");
	get_caps(&root_caps);
	if (setsid() != 1 || sethostname(HOSTNAME, strlen(HOSTNAME)))
		test_fail_errno("setsid or sethostname");
	if (ghost)
		hold_ghost();
	shm = make_shm();
	if (pipe(child_set) || pipe(child_go))
		test_fail_errno("pipes");
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0)
		child_main();
	if (read(child_set[0], &byte, 1) != 1)
		test_fail("the child did not get set");
	test_ready();
	test_wait_sigterm();

	expect_ns_pid(1, levels, "init");
	expect_map("uid_map");
	expect_map("gid_map");
	expect_ids(root_ids, root_ids, "root");
	expect_groups(NULL, 0, "root");
	expect_caps(&root_caps, "root");
	expect_hostname("root");
	expect_shm(shm);
	if (write(child_go[1], "G", 1) != 1 || waitpid(child, &status, 0) != child)
		test_fail_errno("the child");
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		test_fail("the child failed (wait status %#x)", status);
	/* the namespace's capabilities still work for its root */
	if (sethostname(HOSTNAME "2", strlen(HOSTNAME) + 1))
		test_fail_errno("root: sethostname after restore");
	test_pass();
}
