/*
 * The one runner of external tools (tool.h): the iproute2 and iptables tools of the net
 * namespaces' dump and restore, nft, and the network lock's iptables or nft all go through
 * tool_run(), so that stdio, namespaces, ids and failures are handled in one place.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "tool.h"

bool tool_installed(const char *name)
{
	const char *path =
		getenv("PATH") ?: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	char file[PATH_MAX];

	while (*path) {
		size_t len = strcspn(path, ":");

		snprintf(file, sizeof(file), "%.*s/%s", (int)len, path, name);
		if (len && !access(file, X_OK))
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

static const char *tool_name(const struct tool_run *run)
{
	return run->argv ? run->argv[0] : run->name;
}

/* A memfd (at offset 0) holding data, for the tool's stdin: no pipe buffer to outgrow. */
static int input_memfd(const struct tool_run *run)
{
	size_t len = strlen(run->input);
	int fd = memfd_create("tool-input", MFD_CLOEXEC);

	if (fd < 0 || write(fd, run->input, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET)) {
		pr_perror("%s: cannot pass its input", tool_name(run));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	return fd;
}

static void __attribute__((noreturn)) tool_child(const struct tool_run *run, int in_fd, int out_fd)
{
	int null_fd = open("/dev/null", O_RDWR), log_fd = log_get_fd();
	int words_fd = run->quiet || log_fd < 0 ? null_fd : log_fd;

	if (run->net_ns_fd >= 0 && setns(run->net_ns_fd, CLONE_NEWNET))
		_exit(126);
	/* execve() keeps the capabilities of a user namespace's own root only (uid 0 there). */
	if (run->as_ns_root && getuid() != 0 && (setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		_exit(126);
	if (!run->argv)
		_exit(run->child_fn(run->child_arg));
	dup2(in_fd >= 0 ? in_fd : null_fd, STDIN_FILENO);
	dup2(out_fd >= 0 ? out_fd : words_fd, STDOUT_FILENO);
	dup2(words_fd, STDERR_FILENO);
	execvp(run->argv[0], (char *const *)run->argv);
	_exit(127);
}

/* The child's exit status, -EINTR (killed by a signal), or -ECHILD after one line. */
static int wait_tool(const struct tool_run *run, pid_t pid)
{
	const char *const *argv = run->argv;
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			pr_perror("waiting for %s", tool_name(run));
			return -ECHILD;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (run->must_succeed) {
		pr_err("`%s %s %s %s` failed (%s %d)%s\n", tool_name(run),
		       argv && argv[1] ? argv[1] : "", argv && argv[1] && argv[2] ? argv[2] : "",
		       argv && argv[1] && argv[2] && argv[3] ? argv[3] : "",
		       WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		       WIFEXITED(status) && WEXITSTATUS(status) == 127 ? ": is it installed?" : "");
		return -EIO;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -EINTR;
}

/* *run->output from what the tool wrote to out_fd: 0, or -EIO after one line. */
static int collect_output(const struct tool_run *run, int out_fd)
{
	struct stat st;
	char *out;

	if (fstat(out_fd, &st) || !(out = malloc(st.st_size + 1))) {
		pr_perror("cannot read what %s printed", tool_name(run));
		return -EIO;
	}
	if (pread(out_fd, out, st.st_size, 0) != st.st_size) {
		pr_perror("cannot read what %s printed", tool_name(run));
		free(out);
		return -EIO;
	}
	out[st.st_size] = '\0';
	*run->output = out;
	if (run->output_len)
		*run->output_len = st.st_size;
	return 0;
}

int tool_run(struct tool_run opts)
{
	const struct tool_run *run = &opts;
	int in_fd = run->in_fd, out_fd = run->out_fd, input_fd = -1, ret;
	pid_t pid;

	if (run->output) {
		*run->output = NULL;
		out_fd = memfd_create("tool-output", MFD_CLOEXEC);
		if (out_fd < 0) {
			ret = -errno;
			pr_perror("cannot make a memfd for %s", tool_name(run));
			return ret;
		}
	}
	if (in_fd < 0 && run->input) {
		in_fd = input_fd = input_memfd(run);
		if (input_fd < 0) {
			ret = input_fd;
			goto out;
		}
	}
	pid = fork();
	if (pid == 0)
		tool_child(run, in_fd, out_fd);
	if (pid < 0) {
		ret = -errno;
		pr_perror("cannot fork for %s", tool_name(run));
		goto out;
	}
	ret = wait_tool(run, pid);
	if (!ret && run->output)
		ret = collect_output(run, out_fd);
out:
	if (input_fd >= 0)
		close(input_fd);
	if (run->output)
		close(out_fd);
	return ret;
}
