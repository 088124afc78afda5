/*
 * --action-script: each script runs in a child of criu through /bin/sh -c, with the
 * environment CRIU gives it, its output in the log, and criu waits for it. A script
 * that fails fails the dump or restore at that point. The RPC service replaces the
 * scripts with its notifier (action_scripts_set_notifier()).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cr_options.h"
#include "image.h"
#include "log.h"

static const char *const action_names[ACT_MAX] = {
	[ACT_PRE_DUMP] = "pre-dump",
	[ACT_NET_LOCK] = "network-lock",
	[ACT_POST_DUMP] = "post-dump",
	[ACT_NET_UNLOCK] = "network-unlock",
	[ACT_PRE_RESTORE] = "pre-restore",
	[ACT_SETUP_NS] = "setup-namespaces",
	[ACT_POST_SETUP_NS] = "post-setup-namespaces",
	[ACT_POST_RESTORE] = "post-restore",
	[ACT_PRE_RESUME] = "pre-resume",
	[ACT_POST_RESUME] = "post-resume",
	[ACT_ORPHAN_PTS_MASTER] = "orphan-pts-master",
	[ACT_STATUS_READY] = "status-ready",
};

static action_notifier_t notifier;

const char *action_script_name(enum script_action action)
{
	return action_names[action];
}

void action_scripts_set_notifier(action_notifier_t fn)
{
	notifier = fn;
}

/* In the child: the environment, stdio on the log, signals as a fresh program has them. */
static void __attribute__((noreturn))
exec_script(const char *script, const char *action, const char *image_dir, pid_t init_pid)
{
	int log_fd = log_get_fd(), null_fd = open("/dev/null", O_RDONLY);
	char pid_text[16];
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setenv("CRTOOLS_SCRIPT_ACTION", action, 1);
	setenv("CRTOOLS_IMAGE_DIR", image_dir, 1);
	if (init_pid) {
		snprintf(pid_text, sizeof(pid_text), "%d", init_pid);
		setenv("CRTOOLS_INIT_PID", pid_text, 1);
	} else {
		unsetenv("CRTOOLS_INIT_PID");
	}
	if (null_fd >= 0)
		dup2(null_fd, STDIN_FILENO);
	if (log_fd >= 0) {
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
	}
	execl("/bin/sh", "sh", "-c", script, (char *)NULL);
	_exit(127);
}

static int run_one_script(const char *script, enum script_action action, pid_t init_pid)
{
	char image_dir[64];
	int status;
	pid_t pid;

	/* Held open by criu for the whole run: the script reaches it through criu's fd. */
	snprintf(image_dir, sizeof(image_dir), "/proc/%d/fd/%d", getpid(), images_dir_fd);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		pr_perror("cannot start action script %s", script);
		return -1;
	}
	if (pid == 0)
		exec_script(script, action_names[action], image_dir, init_pid);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("waiting for action script %s", script);
			return -1;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		pr_err("action script %s failed at %s: exit status %d\n", script,
		       action_names[action], WEXITSTATUS(status));
	else
		pr_err("action script %s failed at %s: killed by signal %d\n", script,
		       action_names[action], WTERMSIG(status));
	return -1;
}

int run_action_scripts_fd(enum script_action action, pid_t init_pid, int fd)
{
	return notifier ? notifier(action, init_pid, fd) : 0;
}

int run_action_scripts(enum script_action action, pid_t init_pid)
{
	if (notifier)
		return notifier(action, init_pid, -1);
	for (unsigned int i = 0; i < opts.nr_action_scripts; i++) {
		pr_info("action script %s: %s\n", opts.action_scripts[i], action_names[action]);
		if (run_one_script(opts.action_scripts[i], action, init_pid))
			return -1;
	}
	return 0;
}
