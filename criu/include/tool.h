/*
 * The one runner of external tools (ip, iptables, nft, ...; tool.c): criu forks, the child
 * enters the net namespace asked for, gets its stdio wired and runs the tool; criu waits.
 */
#ifndef CR_TOOL_H
#define CR_TOOL_H

#include <stdbool.h>
#include <stddef.h>

struct tool_run {
	/* The tool and its words (argv[0] looked up in PATH), NULL-terminated. */
	const char *const *argv;
	/*
	 * Instead of a tool (argv NULL): a function the child runs in net_ns_fd, stdio left
	 * as they are, its return the child's exit status; name says what it does in errors.
	 */
	int (*child_fn)(void *arg);
	void *child_arg;
	const char *name;
	/* The child setns()es there first (exit status 126 if it cannot); -1: criu's own. */
	int net_ns_fd;
	/* stdin: in_fd; -1: input (a string) if any, else /dev/null. */
	int in_fd;
	const char *input;
	/* stdout: out_fd; -1: collected into *output if asked, else the log (see quiet). */
	int out_fd;
	/* Set after a zero exit status: the whole stdout, NUL-terminated (free it), its length. */
	char **output;
	size_t *output_len;
	/* The tool's words (stderr, and stdout not sent elsewhere) to /dev/null, not the log. */
	bool quiet;
	/* A non-zero exit status is an error: one line with the command line, and -EIO. */
	bool must_succeed;
	/*
	 * Run as uid 0 when criu is not: the root task filling a nested user namespace runs
	 * criu's ids, which that namespace may not map.
	 */
	bool as_ns_root;
};

/*
 * Runs opts (taken by value: callers build it in place) and waits. The child's exit status
 * (127: the tool is not installed), -EINTR: killed by a signal, or -errno.
 */
int tool_run(struct tool_run opts);

/* Whether PATH has an executable named name (a tool criu may run). */
bool tool_installed(const char *name);

#endif
