/*
 * libcriu against criu/criu: version and check requests, the errors a caller must be able
 * to tell apart, a zdtm test program dumped and restored through the library, once with
 * criu_restore() and once, dumped left running, with criu_restore_child(), and requests
 * to `criu service` by its address and on a socket of ours.
 *
 *   libcriu_test CRIU PROGRAM WORKDIR     (as root; PROGRAM: a test/bin zdtm program)
 *
 * One line per check ("ok NAME" or "FAIL NAME: why"); exits with the number of failures.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criu.h"
#include "verdict.h"

static const char *criu_bin, *program, *workdir;

/* Fresh global options aimed at the criu under test. */
static void init_opts(void)
{
	if (criu_init_opts() || criu_set_service_binary(criu_bin)) {
		printf("FAIL init: criu_init_opts\n");
		exit(100);
	}
	criu_set_log_level(CRIU_LOG_DEBUG);
}

/* ---- notifications ---------------------------------------------------------------------- */

/* The actions the callback saw, each followed by a space, after a leading one. */
static char actions[512];
static int notified_pid;

static void reset_actions(void)
{
	snprintf(actions, sizeof(actions), " ");
	notified_pid = 0;
}

static int record_action(char *action, criu_notify_arg_t na)
{
	size_t used = strlen(actions);

	snprintf(actions + used, sizeof(actions) - used, "%s ", action);
	if (criu_notify_pid(na))
		notified_pid = criu_notify_pid(na);
	return 0;
}

static bool saw_action(const char *action)
{
	char word[64];

	snprintf(word, sizeof(word), " %s ", action);
	return strstr(actions, word) != NULL;
}

/* ---- the test program --------------------------------------------------------------------- */

/*
 * Starts PROGRAM PIDFILE in a session of its own (a tree criu dumps without --shell-job),
 * its output in OUTPUT; returns its pid once it published PIDFILE (ready), -1 if it died.
 */
static pid_t start_program(const char *pidfile, const char *output)
{
	struct timespec tick = {0, 10 * 1000 * 1000};
	int status, i;
	pid_t pid;

	unlink(pidfile);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);

		if (in < 0 || out < 0 || setsid() < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(out, 2) < 0)
			_exit(126);
		close(in);
		close(out);
		execl(program, program, pidfile, (char *)NULL);
		_exit(127);
	}
	/* Readiness is the pidfile; 60 s is only a bound on a program that hangs. */
	for (i = 0; i < 6000; i++) {
		if (access(pidfile, F_OK) == 0)
			return pid;
		if (waitpid(pid, &status, WNOHANG) == pid)
			return -1;
		nanosleep(&tick, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* The last line the program wrote: its verdict, "PASS" when its state survived. */
static void last_line(const char *output, char *line, size_t size)
{
	char buf[256];
	FILE *f = fopen(output, "r");

	snprintf(line, size, "(no output)");
	if (!f)
		return;
	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		snprintf(line, size, "%s", buf);
	}
	fclose(f);
}

static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *end;
	int ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	/* "pid (comm) state ppid": comm may hold spaces, the last ')' ends it */
	if (fgets(buf, sizeof(buf), f) && (end = strrchr(buf, ')')))
		sscanf(end + 1, " %*c %d", &ppid);
	fclose(f);
	return ppid;
}

/*
 * The restored program, our child: asked to check itself (SIGTERM), it must exit 0 having
 * written PASS.
 */
static void check_restored(const char *name, pid_t pid, const char *output)
{
	char verdict[256];
	int status;

	if (parent_of(pid) != getpid()) {
		result(name, "restored pid %d has parent %d, not this test (%d)", pid,
		       parent_of(pid), getpid());
		kill(pid, SIGKILL);
		return;
	}
	kill(pid, SIGTERM);
	if (waitpid(pid, &status, 0) != pid) {
		result(name, "waitpid(%d): %s", pid, strerror(errno));
		return;
	}
	last_line(output, verdict, sizeof(verdict));
	if (!WIFEXITED(status) || WEXITSTATUS(status) || strcmp(verdict, "PASS"))
		result(name, "restored program ended with status %#x saying \"%s\"", status,
		       verdict);
	else
		result(name, NULL);
}

static int open_images(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", workdir, name);
	if (mkdir(path, 0700) && errno != EEXIST)
		return -1;
	return open(path, O_DIRECTORY);
}

/* ---- the checks -------------------------------------------------------------------------- */

static void check_version(void)
{
	int version;

	init_opts();
	version = criu_get_version();
	/* this criu implements CRIU 4.2's interface: 40200, or 40300 if it says it was built
	 * from a git tree (libcriu counts that as the next minor) */
	if (version < 40200)
		result("version", "criu_get_version() = %d, want >= 40200 (errno %d)", version,
		       errno);
	else if (criu_check_version(40200) != 1)
		result("version", "criu_check_version(40200) != 1 for version %d", version);
	else if (criu_check_version(version + 1) != 0)
		result("version", "criu_check_version(%d) != 0 for version %d", version + 1,
		       version);
	else
		result("version", NULL);
	printf("   criu_get_version() = %d\n", version);
}

static void check_check(void)
{
	int ret;

	init_opts();
	ret = criu_check();
	if (ret)
		result("check", "criu_check() = %d, errno %d", ret, errno);
	else
		result("check", NULL);
}

/*
 * A caller with stdin, stdout and stderr closed (a daemon): the socket pair then takes fds
 * 0 and 1, yet what criu prints must not reach the RPC socket. `criu check` prints.
 */
static void check_closed_stdio(void)
{
	int status, ret;
	pid_t pid;

	init_opts();
	pid = fork();
	if (pid == 0) {
		close(0);
		close(1);
		close(2);
		ret = criu_check();
		_exit(ret == 0 ? 0 : 100 - ret);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		result("closed-stdio", "fork/wait: %s", strerror(errno));
	else if (!WIFEXITED(status) || WEXITSTATUS(status))
		result("closed-stdio", "criu_check() with fds 0-2 closed returned %d (status %#x)",
		       WIFEXITED(status) ? 100 - WEXITSTATUS(status) : 0, status);
	else
		result("closed-stdio", NULL);
}

/* Errors the library itself reports, before or without criu's answer. */
static void check_local_errors(void)
{
	struct criu_feature_check features = {.mem_track = true};
	char missing[PATH_MAX];
	int ret;

	init_opts();
	criu_set_service_binary("/nonexistent/criu");
	errno = 0;
	ret = criu_check();
	if (ret != -ECONNREFUSED || errno != ENOENT)
		result("no-binary", "criu_check() = %d errno %d, want -ECONNREFUSED ENOENT", ret,
		       errno);
	else
		result("no-binary", NULL);

	snprintf(missing, sizeof(missing), "%s/no-such.socket", workdir);
	criu_set_service_address(missing);
	errno = 0;
	ret = criu_check();
	if (ret != -ECONNREFUSED || errno != ENOENT)
		result("no-service", "criu_check() = %d errno %d, want -ECONNREFUSED ENOENT", ret,
		       errno);
	else
		result("no-service", NULL);

	init_opts();
	ret = criu_feature_check(&features, sizeof(features) + 1);
	if (ret != -1)
		result("feature-size", "criu_feature_check(size + 1) = %d, want -1", ret);
	else
		result("feature-size", NULL);

	ret = criu_dump_iters(NULL);
	if (ret != -EINVAL)
		result("iters-no-pid", "criu_dump_iters() without pid = %d, want -EINVAL", ret);
	else
		result("iters-no-pid", NULL);
}

/* A pid no process has: /proc/sys/kernel/pid_max itself (pids stay below it). */
static void check_dump_no_process(void)
{
	int ret, img, pid_max = 0;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

	if (!f || fscanf(f, "%d", &pid_max) != 1) {
		result("dump-no-process", "cannot read pid_max");
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	img = open_images("no-process");
	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("dump.log");
	criu_set_pid(pid_max);
	errno = 0;
	ret = criu_dump();
	if (ret != -EBADE || errno != ESRCH)
		result("dump-no-process", "criu_dump() of pid %d = %d errno %d, want -EBADE ESRCH",
		       pid_max, ret, errno);
	else
		result("dump-no-process", NULL);
	close(img);
}

/* Dumped (killed by the dump), restored with criu_restore(), adopted by us (subreaper). */
static void check_dump_restore(void)
{
	char pidfile[PATH_MAX], output[PATH_MAX], core[64];
	int img, ret, status;
	pid_t pid;

	snprintf(pidfile, sizeof(pidfile), "%s/a.pid", workdir);
	snprintf(output, sizeof(output), "%s/a.out", workdir);
	pid = start_program(pidfile, output);
	if (pid < 0) {
		result("dump", "%s did not start", program);
		return;
	}
	img = open_images("a");
	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("dump.log");
	criu_set_pid(pid);
	criu_set_leave_running(false);
	criu_set_notify_cb(record_action);
	reset_actions();
	ret = criu_dump();
	if (ret) {
		result("dump", "criu_dump() = %d errno %d (%s/a/dump.log)", ret, errno, workdir);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(img);
		return;
	}
	/* the dump ends the tree: criu kills it */
	waitpid(pid, &status, 0);
	snprintf(core, sizeof(core), "core-%d.img", pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		result("dump", "the dumped program ended with status %#x, not SIGKILL", status);
	else if (faccessat(img, core, F_OK, 0))
		result("dump", "no %s in the images", core);
	else
		result("dump", NULL);
	printf("   dump notifications:%s\n", actions);
	if (!saw_action("pre-dump") || !saw_action("post-dump"))
		result("dump-notify", "callback saw \"%s\", want pre-dump and post-dump", actions);
	else
		result("dump-notify", NULL);

	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
		result("restore", "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("restore.log");
	criu_set_notify_cb(record_action);
	reset_actions();
	ret = criu_restore();
	if (ret != pid) {
		result("restore", "criu_restore() = %d errno %d, want pid %d (%s/a/restore.log)",
		       ret, errno, pid, workdir);
	} else {
		check_restored("restore", pid, output);
		printf("   restore notifications:%s\n", actions);
		if (!saw_action("pre-restore") || !saw_action("post-restore"))
			result("restore-notify",
			       "callback saw \"%s\", want pre-restore and "
			       "post-restore",
			       actions);
		else if (notified_pid && notified_pid != pid)
			result("restore-notify", "notified pid %d, restored %d", notified_pid, pid);
		else
			result("restore-notify", NULL);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
	close(img);
}

/*
 * Dumped left running; a restore then finds its pid taken (EEXIST). Once it is gone,
 * criu_restore_child() makes the restored program our own child (no subreaper now).
 */
static void check_restore_child(void)
{
	char pidfile[PATH_MAX], output[PATH_MAX];
	int img, ret;
	pid_t pid;

	snprintf(pidfile, sizeof(pidfile), "%s/b.pid", workdir);
	snprintf(output, sizeof(output), "%s/b.out", workdir);
	pid = start_program(pidfile, output);
	if (pid < 0) {
		result("dump-leave-running", "%s did not start", program);
		return;
	}
	img = open_images("b");
	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("dump.log");
	criu_set_pid(pid);
	criu_set_leave_running(true);
	ret = criu_dump();
	if (ret)
		result("dump-leave-running", "criu_dump() = %d errno %d", ret, errno);
	else if (waitpid(pid, NULL, WNOHANG) != 0 || kill(pid, 0))
		result("dump-leave-running", "pid %d did not survive its dump", pid);
	else
		result("dump-leave-running", NULL);

	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("restore-taken.log");
	errno = 0;
	ret = criu_restore();
	if (ret != -EBADE || errno != EEXIST)
		result("restore-pid-taken", "criu_restore() = %d errno %d, want -EBADE EEXIST", ret,
		       errno);
	else
		result("restore-pid-taken", NULL);
	if (ret > 0 && ret != pid) {
		kill(ret, SIGKILL);
		waitpid(ret, NULL, 0);
	}

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	init_opts();
	criu_set_images_dir_fd(img);
	criu_set_log_file("restore.log");
	ret = criu_restore_child();
	if (ret != pid)
		result("restore-child", "criu_restore_child() = %d errno %d, want pid %d", ret,
		       errno, pid);
	else
		check_restored("restore-child", pid, output);
	close(img);
}

/*
 * `criu service -d` (as our child: we are its subreaper) reached through its socket, with
 * an options object of our own: by address (CRIU_COMM_SK) and on a socket we connected
 * (CRIU_COMM_FD), which the library must leave open.
 */
static void check_service(void)
{
	char address[PATH_MAX], pidfile[PATH_MAX];
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	criu_opts *opts = NULL;
	int ret, status, version, sk, img, ready[2], pid_max = 0;
	ssize_t got;
	char byte;
	pid_t starter, service = 0;
	FILE *f;

	snprintf(address, sizeof(address), "%s/criu.sock", workdir);
	snprintf(pidfile, sizeof(pidfile), "%s/service.pid", workdir);
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	/* --status-fd: criu writes a byte there once it listens (and wrote the pidfile) */
	if (pipe(ready)) {
		result("service", "pipe: %s", strerror(errno));
		goto out;
	}
	starter = fork();
	if (starter == 0) {
		if (dup2(ready[1], 3) < 0)
			_exit(126);
		execl(criu_bin, criu_bin, "service", "-d", "--address", address, "--pidfile",
		      pidfile, "--status-fd", "3", "-W", workdir, "-o", "service.log", "-v4",
		      (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	got = starter > 0 ? read(ready[0], &byte, 1) : -1;
	close(ready[0]);
	/* -d: the first process exits once the daemon runs */
	if (starter > 0)
		waitpid(starter, &status, 0);
	f = got == 1 ? fopen(pidfile, "r") : NULL;
	if (!f) {
		result("service", "criu service -d did not start (%s/service.log)", workdir);
		goto out;
	}
	if (fscanf(f, "%d", &service) != 1)
		service = 0;
	fclose(f);

	if (criu_local_init_opts(&opts) || criu_local_set_service_address(opts, address)) {
		result("service", "criu_local_init_opts");
		goto out;
	}
	criu_local_set_log_level(opts, CRIU_LOG_DEBUG);
	version = criu_local_get_version(opts);
	ret = criu_local_check(opts);
	if (version < 40200 || ret)
		result("service", "through %s: version %d, check %d (errno %d)", address, version,
		       ret, errno);
	else
		result("service", NULL);

	f = fopen("/proc/sys/kernel/pid_max", "r");
	if (!f || fscanf(f, "%d", &pid_max) != 1)
		pid_max = 4194304;
	if (f)
		fclose(f);
	img = open_images("service-no-process");
	criu_local_set_images_dir_fd(opts, img);
	criu_local_set_log_file(opts, "dump.log");
	criu_local_set_pid(opts, pid_max);
	errno = 0;
	ret = criu_local_dump(opts);
	if (ret != -EBADE || errno != ESRCH)
		result("service-dump-no-process",
		       "criu_local_dump() = %d errno %d, want -EBADE ESRCH", ret, errno);
	else
		result("service-dump-no-process", NULL);
	close(img);

	sk = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	strcpy(addr.sun_path, address);
	if (sk < 0 || connect(sk, (struct sockaddr *)&addr, sizeof(addr))) {
		result("service-fd", "connect(%s): %s", address, strerror(errno));
	} else {
		criu_local_init_opts(&opts);
		criu_local_set_service_fd(opts, sk);
		ret = criu_local_get_version(opts);
		if (ret != version)
			result("service-fd", "criu_local_get_version() on our socket = %d errno %d",
			       ret, errno);
		else if (fcntl(sk, F_GETFD) < 0)
			result("service-fd", "the library closed the caller's socket");
		else
			result("service-fd", NULL);
	}
	if (sk >= 0)
		close(sk);
out:
	criu_local_free_opts(opts);
	if (service > 0) {
		kill(service, SIGKILL);
		waitpid(service, NULL, 0);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s CRIU PROGRAM WORKDIR\n", argv[0]);
		return 100;
	}
	criu_bin = argv[1];
	program = argv[2];
	workdir = argv[3];
	setvbuf(stdout, NULL, _IOLBF, 0);

	check_version();
	check_check();
	check_closed_stdio();
	check_local_errors();
	check_dump_no_process();
	check_dump_restore();
	check_restore_child();
	check_service();
	criu_free_opts();
	return failures;
}
