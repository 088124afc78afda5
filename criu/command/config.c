/*
 * Options: one table of every option upstream CRIU accepts (name, short name, argument,
 * what it sets, or that it is refused), the getopt parse built from it, and the
 * configuration files CRIU reads (default.conf files, CRIU_CONFIG_FILE, --config).
 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_options.h"
#include "cr-check.h"
#include "crtools.h"
#include "log.h"
#include "version.h"

struct cr_option;
/* Applies one occurrence: on is false for the --no-NAME form. 0, or -1 after one line. */
typedef int (*opt_set_fn)(const struct cr_option *o, const char *arg, bool on);

struct cr_option {
	const char *name;
	const char *no_name; /* "no-NAME" where upstream has that form, else NULL */
	char short_name;
	int has_arg;	/* no_argument, required_argument, optional_argument */
	opt_set_fn set; /* NULL: refused */
	size_t off;	/* the field of struct cr_options that set() writes */
	const char *metavar;
	const char *help; /* for --help; refused options are listed by name */
};

/* One line per kind of entry. */
/* clang-format off */
#define FIELD(f) offsetof(struct cr_options, f)
#define FLAG(n, s, f, h) { n, "no-" n, s, no_argument, set_bool, FIELD(f), NULL, h }
#define SWITCH(n, s, f, h) { n, NULL, s, no_argument, set_bool, FIELD(f), NULL, h }
#define STRING(n, s, f, m, h) { n, NULL, s, required_argument, set_string, FIELD(f), m, h }
#define CALL(n, s, arg, fn, m, h) { n, NULL, s, arg, fn, 0, m, h }
#define REFUSED(n, s, arg) { n, NULL, s, arg, NULL, 0, NULL, NULL }
/* Refused; its --no-NAME form asks for what this criu does anyway, so it is accepted. */
#define REFUSED_FLAG(n, s) { n, "no-" n, s, no_argument, NULL, 0, NULL, NULL }
/* clang-format on */

static int set_bool(const struct cr_option *o, const char *arg, bool on);
static int set_string(const struct cr_option *o, const char *arg, bool on);
static int set_tree(const struct cr_option *o, const char *arg, bool on);
static int set_verbosity(const struct cr_option *o, const char *arg, bool on);
static int set_timeout(const struct cr_option *o, const char *arg, bool on);
static int set_status_fd(const struct cr_option *o, const char *arg, bool on);
static int set_port(const struct cr_option *o, const char *arg, bool on);
static int set_ghost_limit(const struct cr_option *o, const char *arg, bool on);
static int add_action_script(const struct cr_option *o, const char *arg, bool on);
static int add_inherit_fd(const struct cr_option *o, const char *arg, bool on);
static int add_irmap_scan_path(const struct cr_option *o, const char *arg, bool on);
static int set_external(const struct cr_option *o, const char *arg, bool on);
static int accept_external_masters(const struct cr_option *o, const char *arg, bool on);
static int set_veth_pair(const struct cr_option *o, const char *arg, bool on);
static int set_empty_ns(const struct cr_option *o, const char *arg, bool on);
static int set_join_ns(const struct cr_option *o, const char *arg, bool on);
static int set_network_lock(const struct cr_option *o, const char *arg, bool on);
static int set_root(const struct cr_option *o, const char *arg, bool on);
static int add_ext_mount_map(const struct cr_option *o, const char *arg, bool on);
static int set_feature(const struct cr_option *o, const char *arg, bool on);
static int set_check_all(const struct cr_option *o, const char *arg, bool on);
static int set_pre_dump_mode(const struct cr_option *o, const char *arg, bool on);
static int set_manage_cgroups(const struct cr_option *o, const char *arg, bool on);
static int add_cgroup_root(const struct cr_option *o, const char *arg, bool on);
static int set_cpu_cap(const struct cr_option *o, const char *arg, bool on);
static int set_lsm_profile(const struct cr_option *o, const char *arg, bool on);
static int add_skip_mnt(const struct cr_option *o, const char *arg, bool on);
static int add_enable_fs(const struct cr_option *o, const char *arg, bool on);
static int set_ext_unix_sk(const struct cr_option *o, const char *arg, bool on);
static int set_file_validation(const struct cr_option *o, const char *arg, bool on);
static int accept_sparse_ghosts(const struct cr_option *o, const char *arg, bool on);
static int set_config(const struct cr_option *o, const char *arg, bool on);
static int show_help(const struct cr_option *o, const char *arg, bool on);
static int show_version(const struct cr_option *o, const char *arg, bool on);

/*
 * Every option of upstream CRIU 4.2, spelled and taking its argument as there (short
 * names: upstream's "dSsRt:hD:o:v::x::Vr:jJ:lW:L:M:"). Why each refused one is refused:
 * Documentation/criu.8.txt.
 */
static const struct cr_option options[] = {
	/* the tree, the images, the log */
	CALL("tree", 't', required_argument, set_tree, "PID", "checkpoint the tree rooted at PID"),
	STRING("images-dir", 'D', imgs_dir, "DIR", "directory of the image files (default: .)"),
	STRING("work-dir", 'W', work_dir, "DIR", "directory for logs and a relative pidfile"),
	STRING("log-file", 'o', log_file, "FILE", "log file, relative to the work dir"),
	CALL("verbosity", 'v', optional_argument, set_verbosity, "[=N]",
	     "-v adds a level (-vvv: three), -vN or --verbosity=N sets it (0-4)"),
	FLAG("log-pid", 0, log_pid, "each restored task logs to FILE.PID"),
	FLAG("display-stats", 0, display_stats, "print the dump/restore statistics"),
	/* what becomes of the tree */
	SWITCH("leave-running", 'R', leave_running, "leave the tree running after dump"),
	SWITCH("leave-stopped", 's', leave_stopped, "leave the tree stopped after dump or restore"),
	FLAG("restore-detached", 'd', restore_detach, "do not wait for the restored tree"),
	FLAG("daemon", 0, restore_detach, "the same as --restore-detached"),
	FLAG("restore-sibling", 'S', restore_sibling, "restore the root as a sibling of criu"),
	STRING("pidfile", 0, pidfile, "FILE", "write the restored root's pid to FILE"),
	CALL("timeout", 0, required_argument, set_timeout, "N",
	     "seconds for seizing the tree (default 10) or restoring it (none)"),
	CALL("status-fd", 0, required_argument, set_status_fd, "FD",
	     "write \\0 to FD and close it once dump or restore succeeded"),
	FLAG("shell-job", 'j', shell_job, "the tree's stdio is a terminal"),
	CALL("action-script", 0, required_argument, add_action_script, "FILE",
	     "run FILE at each stage (repeatable)"),
	STRING("libdir", 'L', libdir, "DIR", "load plugins from DIR"),
	/* files */
	CALL("inherit-fd", 0, required_argument, add_inherit_fd, "fd[N]:KEY",
	     "restore the file KEY (pipe:[INODE] or a path) as criu's fd N"),
	FLAG("link-remap", 0, link_remap, "dump a file open under a removed name by linking it back"),
	FLAG("file-locks", 'l', file_locks, "dump the file locks the tree holds"),
	FLAG("skip-file-rwx-check", 0, skip_file_rwx_check,
	     "restore: a reopened file's rwx permission bits may differ from the dumped ones"),
	FLAG("evasive-devices", 0, evasive_devices,
	     "dump: a device file whose path names another device now is dumped by a path of "
	     "its own device"),
	FLAG("force-irmap", 0, force_irmap,
	     "dump a path for every watched inode (inotify, fanotify), found by scanning"),
	CALL("irmap-scan-path", 0, required_argument, add_irmap_scan_path, "DIR",
	     "--force-irmap: scan DIR first (repeatable)"),
	CALL("ghost-limit", 0, required_argument, set_ghost_limit, "SIZE",
	     "largest deleted file whose contents dump saves (default 1M)"),
	CALL("file-validation", 0, required_argument, set_file_validation, "filesize",
	     "a reopened file of another size fails the restore"),
	{ "ghost-fiemap", "no-ghost-fiemap", 0, no_argument, accept_sparse_ghosts, 0, NULL,
	  "save only the data of deleted files, not their holes (always done)" },
	CALL("external", 0, required_argument, set_external, "RES",
	     "veth[IN]:OUT[@BR], restore: the tree's veth link IN gets its peer OUT here (in "
	     "bridge BR); macvlan[IN]:OUT, restore: the tree's macvlan link IN on link OUT "
	     "here; netdev[IN]:OUT, restore: link OUT here becomes the tree's IN; mnt[]: an "
	     "external mount, dump mnt[MOUNTPOINT]:KEY, restore "
	     "mnt[KEY]:PATH; dump mnt[] (or mnt[]:m, mnt[]:s): those criu's mounts show"),
	CALL("ext-mount-map", 'M', required_argument, add_ext_mount_map, "KEY:VAL",
	     "the same as --external mnt[KEY]:VAL"),
	CALL("veth-pair", 0, required_argument, set_veth_pair, "IN=OUT[@BR]",
	     "the same as --external veth[IN]:OUT[@BR]"),
	CALL("empty-ns", 0, required_argument, set_empty_ns, "net",
	     "the tree's net namespace is not dumped; restore gives it a new empty one"),
	CALL("join-ns", 'J', required_argument, set_join_ns, "NS:{PATH|PID}",
	     "restore the tree into the existing NS namespace (net, uts, ipc, time) of PATH or "
	     "of task PID, whose state is kept"),
	CALL("network-lock", 0, required_argument, set_network_lock, "iptables|nftables|skip",
	     "iptables (default) or nftables: TCP connections to peers outside the tree are "
	     "locked until restored; skip: they are dumped unlocked"),
	/* sockets */
	FLAG("tcp-established", 0, tcp_established,
	     "dump established TCP connections (in repair mode, with their queues)"),
	FLAG("tcp-close", 0, tcp_close, "established TCP connections are restored closed"),
	FLAG("skip-in-flight", 0, tcp_skip_in_flight,
	     "dump: drop the connections a listening socket has not accepted yet"),
	CALL("root", 'r', required_argument, set_root, "DIR",
	     "restore: the directory a mount namespace's root mount is bound from"),
	/* memory */
	CALL("pre-dump-mode", 0, required_argument, set_pre_dump_mode, "splice|read",
	     "how pre-dump reads memory (both copy it with process_vm_readv)"),
	FLAG("track-mem", 0, track_mem,
	     "writes are always tracked after a pre-dump (accepted, changes nothing)"),
	STRING("prev-images-dir", 0, prev_images_dir, "DIR",
	       "the previous pre-dump's images, relative to -D: store only pages written since"),
	FLAG("auto-dedup", 0, auto_dedup,
	     "punch holes in the parent images for the pages this dump stores again"),
	FLAG("page-server", 0, use_page_server,
	     "dump: send the pages to the page server at --address:--port; lazy-pages: take "
	     "what a dump --lazy-pages there left"),
	STRING("address", 0, ps_address, "ADDR",
	       "the page server's address (page-server: listen there, default: all)"),
	CALL("port", 0, required_argument, set_port, "PORT", "the page server's TCP port"),
	REFUSED("ps-socket", 0, required_argument),
	SWITCH("lazy-pages", 0, lazy_pages,
	       "restore: leave private memory to the criu lazy-pages daemon; dump: leave it in "
	       "the frozen tree, served on --port"),
	REFUSED_FLAG("stream", 0),
	CALL("cpu-cap", 0, optional_argument, set_cpu_cap, "[=CAP[,CAP]]",
	     "fpu, cpu, ins, all or none (^CAP: not it): dump writes cpuinfo.img, restore "
	     "checks this CPU against it for these; without a value: all"),
	/* values this criu has exactly one of */
	CALL("ext-unix-sk", 'x', optional_argument, set_ext_unix_sk, NULL,
	     "dump datagram Unix sockets connected to one outside the tree"),
	/* cgroups */
	CALL("manage-cgroups", 0, optional_argument, set_manage_cgroups, "[=MODE]",
	     "cgroups: none, props, soft (default), full, strict or ignore"),
	CALL("cgroup-root", 0, required_argument, add_cgroup_root, "[CTRL:]PATH",
	     "the tree's root cgroup is PATH (in hierarchy CTRL; repeatable)"),
	STRING("cgroup-yard", 0, cgroup_yard, "DIR",
	       "the hierarchies are mounted in DIR (one directory each), not by criu"),
	STRING("freeze-cgroup", 0, freeze_cgroup, "PATH",
	       "dump: freeze the tree through the freezer cgroup PATH"),
	/* check */
	CALL("feature", 0, required_argument, set_feature, "NAME", "check: only this feature"),
	FLAG("extra", 0, check_extra, "check: also the extra features"),
	FLAG("experimental", 0, check_experimental, "check: also the experimental features"),
	CALL("all", 0, no_argument, set_check_all, NULL, "check: --extra and --experimental"),
	/* configuration */
	CALL("config", 0, required_argument, set_config, "FILE", "read options from FILE"),
	CALL("no-default-config", 0, no_argument, set_config, NULL,
	     "read neither /etc/criu/default.conf nor ~/.criu/default.conf"),
	CALL("help", 'h', no_argument, show_help, NULL, "print this text"),
	CALL("version", 'V', no_argument, show_version, NULL, "print the version"),
	/* refused: state this criu does not dump or restore (Documentation/criu.8.txt) */
	REFUSED("close", 0, required_argument),
	REFUSED("ms", 0, no_argument),
	REFUSED("exec-cmd", 0, no_argument),
	REFUSED("cgroup-props", 0, required_argument),
	REFUSED("cgroup-props-file", 0, required_argument),
	REFUSED("cgroup-dump-controller", 0, required_argument),
	CALL("skip-mnt", 0, required_argument, add_skip_mnt, "PATH",
	     "dump: leave the mount at PATH, and the mounts below it, out (repeatable)"),
	CALL("enable-fs", 0, required_argument, add_enable_fs, "FS[,FS]",
	     "dump: mounts of these filesystems (all: any) are mounted anew at restore, "
	     "their contents not saved"),
	CALL("enable-external-sharing", 0, no_argument, accept_external_masters, NULL,
	     "with --ext-mount-map auto: mounts sharing with criu's (restored so anyway)"),
	CALL("enable-external-masters", 0, no_argument, accept_external_masters, NULL,
	     "with --ext-mount-map auto: mounts receiving from outside (restored anyway)"),
	FLAG("mntns-compat-mode", 0, mntns_compat_mode,
	     "mounts are restored one way, with it or without (accepted, changes nothing)"),
	CALL("lsm-profile", 0, required_argument, set_lsm_profile, "TYPE:NAME",
	     "restore: label the tasks apparmor:PROFILE or selinux:CONTEXT instead of as "
	     "dumped; none: leave them unlabelled"),
	STRING("lsm-mount-context", 0, lsm_mount_context, "CTX",
	       "restore: a mount made anew whose options have context= gets context=CTX"),
	FLAG("weak-sysctls", 0, weak_sysctls,
	     "restore: a sysctl this kernel lacks is skipped with a warning, not a failure"),
	REFUSED_FLAG("unprivileged", 0),
	REFUSED_FLAG("allow-uprobes", 0),
	REFUSED_FLAG("deprecated", 0),
	REFUSED_FLAG("tls", 0),
	REFUSED("tls-cacert", 0, required_argument),
	REFUSED("tls-cacrl", 0, required_argument),
	REFUSED("tls-cert", 0, required_argument),
	REFUSED("tls-key", 0, required_argument),
	REFUSED("tls-no-cn-verify", 0, no_argument),
};

#define NR_OPTIONS (sizeof(options) / sizeof(options[0]))

/*
 * Why the refused options are refused, by subject: one line each in --help (criu(8),
 * REFUSED OPTIONS, says more). Names every refused option of the table once.
 */
struct refusal {
	const char *why;
	const char *const *names; /* NULL-terminated */
};

/* clang-format off */
#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })
static const struct refusal refusals[] = {
	{ "no page server socket from the caller, image streams or TLS",
	  NAMES("ps-socket", "stream", "tls",
		"tls-cacert", "tls-cacrl", "tls-cert", "tls-key", "tls-no-cn-verify") },
	{ "cgroups are dumped with CRIU's default properties, of every controller",
	  NAMES("cgroup-props", "cgroup-props-file", "cgroup-dump-controller") },
	{ "criu runs as root", NAMES("unprivileged") },
	{ "a task with a uprobes area is not dumped", NAMES("allow-uprobes") },
	{ "no deprecated features to turn on", NAMES("deprecated", "ms") },
	{ "not supported by this criu", NAMES("exec-cmd", "close") },
};
#undef NAMES
/* clang-format on */
/* getopt's val for a long option: 2 * index (+1 for --no-NAME), above any short name. */
#define LONG_VAL_BASE 256

/* The first error line of the parse, kept for the log file (parse_error_line()). */
static char error_line[512];

/* Where the words being parsed come from: NULL for the command line, else "FILE:LINE". */
static const char *parse_where;
/* The pass that only looks for --config and --no-default-config. */
static bool config_scan;

/*
 * One line on stderr, kept for the log: prefix ("Error: " or ""), where a configuration
 * file says it, the message.
 */
static void __attribute__((format(printf, 2, 3)))
say_error(const char *prefix, const char *fmt, ...)
{
	va_list args;
	int n;

	n = snprintf(error_line, sizeof(error_line), "%s%s%s", prefix, parse_where ?: "",
		     parse_where ? ": " : "");
	va_start(args, fmt);
	vsnprintf(error_line + n, sizeof(error_line) - n, fmt, args);
	va_end(args);
	fprintf(stderr, "%s\n", error_line);
}

#define opt_error(fmt, ...) say_error("Error: ", fmt, ##__VA_ARGS__)

/* The one line a refused option gets (its value too, where only some values are refused). */
static int refuse(const struct cr_option *o, const char *value)
{
	if (value)
		say_error("", "option --%s%c%s is not supported", o->name,
			  o->has_arg == optional_argument ? '=' : ' ', value);
	else
		say_error("", "option --%s is not supported", o->name);
	return -1;
}

const char *parse_error_line(void)
{
	return error_line;
}

static void *field(const struct cr_option *o)
{
	return (char *)&opts + o->off;
}

static int set_bool(const struct cr_option *o, const char *arg, bool on)
{
	(void)arg;
	*(bool *)field(o) = on;
	return 0;
}

static int set_string(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	*(char **)field(o) = (char *)arg;
	return 0;
}

/* A decimal number up to max, nothing else around it. */
static int parse_number(const struct cr_option *o, const char *arg, unsigned long max,
			unsigned long *val)
{
	char *end;

	errno = 0;
	*val = strtoul(arg, &end, 10);
	if (errno || !*arg || *end || arg[0] == '-' || arg[0] == '+' || *val > max) {
		opt_error("bad value '%s' for --%s", arg, o->name);
		return -1;
	}
	return 0;
}

static int set_tree(const struct cr_option *o, const char *arg, bool on)
{
	unsigned long pid;

	(void)on;
	if (parse_number(o, arg, INT_MAX, &pid))
		return -1;
	if (pid == 0) {
		opt_error("bad value '%s' for --%s", arg, o->name);
		return -1;
	}
	opts.tree_pid = pid;
	return 0;
}

/*
 * As upstream: without a value one level more; a value that starts with 'v' (-vvv is
 * -v with "vv") one more per letter; any other value is read like atoi(), so that
 * "-verbosity=0" (-v with "erbosity=0") means level 0, as CRIU's test driver relies on.
 * A negative level means everything, as it does for CRIU's unsigned level.
 */
static int set_verbosity(const struct cr_option *o, const char *arg, bool on)
{
	long level;

	(void)o;
	(void)on;
	if (!arg) {
		opts.loglevel++;
	} else if (arg[0] == 'v') {
		opts.loglevel += 1 + strlen(arg);
	} else {
		level = strtol(arg, NULL, 10);
		opts.loglevel = level < 0 || level > LOG_DEBUG ? LOG_DEBUG : level;
	}
	if (opts.loglevel > LOG_DEBUG)
		opts.loglevel = LOG_DEBUG;
	return 0;
}

static int set_timeout(const struct cr_option *o, const char *arg, bool on)
{
	unsigned long seconds;

	(void)on;
	if (parse_number(o, arg, INT_MAX / 1000, &seconds))
		return -1;
	opts.timeout = seconds;
	return 0;
}

static int set_status_fd(const struct cr_option *o, const char *arg, bool on)
{
	unsigned long fd;

	(void)on;
	if (parse_number(o, arg, INT_MAX, &fd))
		return -1;
	opts.status_fd = fd;
	return 0;
}

/* A TCP port, 1-65535: 0 would let the kernel pick one nobody is told of. */
static int set_port(const struct cr_option *o, const char *arg, bool on)
{
	unsigned long port;

	(void)on;
	if (parse_number(o, arg, 65535, &port))
		return -1;
	if (!port) {
		opt_error("bad value '%s' for --%s", arg, o->name);
		return -1;
	}
	opts.ps_port = port;
	return 0;
}

/* A size as upstream takes it: a number with an optional K, M or G (any case). */
static int set_ghost_limit(const struct cr_option *o, const char *arg, bool on)
{
	unsigned long long size;
	unsigned int shift = 0;
	char *end;

	(void)on;
	errno = 0;
	size = strtoull(arg, &end, 10);
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (errno || end == arg || *end || arg[0] == '-' || size > (UINT64_MAX >> shift)) {
		opt_error("bad size '%s' for --%s (a number, then K, M or G)", arg, o->name);
		return -1;
	}
	opts.ghost_limit = size << shift;
	return 0;
}

/* Appends a copy of item to a growing array of count elements of size bytes. */
static int append(void *array, unsigned int *count, const void *item, size_t size)
{
	void **arr = array;
	char *grown = realloc(*arr, (*count + 1) * size);

	if (!grown) {
		opt_error("out of memory");
		return -1;
	}
	memcpy(grown + *count * size, item, size);
	*arr = grown;
	(*count)++;
	return 0;
}

static int add_action_script(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)on;
	return append(&opts.action_scripts, &opts.nr_action_scripts, &arg, sizeof(arg));
}

static int add_irmap_scan_path(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)on;
	return append(&opts.irmap_scan_paths, &opts.nr_irmap_scan_paths, &arg, sizeof(arg));
}

/*
 * fd[N]:KEY. Restore looks KEY up among the pipes (pipe:[INODE], the inode dump saw) and
 * regular files (their path); other kinds of KEY are refused.
 */
static int add_inherit_fd(const struct cr_option *o, const char *arg, bool on)
{
	static const char *const refused[] = {"tty[", "socket:[", "file[", "/memfd:"};
	struct inherit_fd ifd = {0};
	unsigned long fd;
	char *end;

	(void)on;
	errno = 0;
	fd = strncmp(arg, "fd[", 3) ? ULONG_MAX : strtoul(arg + 3, &end, 10);
	if (fd > INT_MAX || errno || end == arg + 3 || strncmp(end, "]:", 2) || !end[2]) {
		opt_error("bad value '%s' for --%s (fd[N]:KEY)", arg, o->name);
		return -1;
	}
	ifd.fd = fd;
	ifd.key = end + 2;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!strncmp(ifd.key, refused[i], strlen(refused[i])))
			return refuse(o, arg);
	if (fcntl(ifd.fd, F_GETFD) < 0) {
		opt_error("--%s %s: fd %d is not open", o->name, arg, ifd.fd);
		return -1;
	}
	return append(&opts.inherit_fds, &opts.nr_inherit_fds, &ifd, sizeof(ifd));
}

/* INNER, then sep, then OUTER[@BRIDGE]: a veth link's outer end (restore names it so). */
static int add_ext_veth(const struct cr_option *o, const char *arg, const char *inner,
			const char *sep)
{
	struct ext_veth ext = {};
	const char *end = strstr(inner, sep);
	char *at;

	if (!end || end == inner || !end[strlen(sep)] || end - inner >= IFNAMSIZ) {
		opt_error("bad value '%s' for --%s (%s)", arg, o->name,
			  *sep == '=' ? "IN=OUT[@BRIDGE]" : "veth[IN]:OUT[@BRIDGE]");
		return -1;
	}
	ext.inner = strndup(inner, end - inner);
	ext.outer = strdup(end + strlen(sep));
	if (!ext.inner || !ext.outer) {
		opt_error("out of memory");
		return -1;
	}
	at = strchr(ext.outer, '@');
	if (at) {
		*at = '\0';
		ext.bridge = at + 1;
	}
	if (!*ext.outer || strlen(ext.outer) >= IFNAMSIZ || (ext.bridge && !*ext.bridge)) {
		opt_error("bad value '%s' for --%s: bad link or bridge name", arg, o->name);
		return -1;
	}
	return append(&opts.ext_veths, &opts.nr_ext_veths, &ext, sizeof(ext));
}

/* INNER]:OUTER of KIND[INNER]:OUTER: a link of the tree's and one of criu's (restore). */
static int add_ext_link(const struct cr_option *o, const char *arg, const char *kind,
			struct ext_link **list, unsigned int *nr)
{
	const char *inner = arg + strlen(kind) + 1, *end = strstr(inner, "]:");
	struct ext_link ext = {};

	if (!end || end == inner || end - inner >= IFNAMSIZ || !end[2] ||
	    strlen(end + 2) >= IFNAMSIZ) {
		opt_error("bad value '%s' for --%s (%s[IN]:OUT)", arg, o->name, kind);
		return -1;
	}
	ext.inner = strndup(inner, end - inner);
	ext.outer = strdup(end + 2);
	if (!ext.inner || !ext.outer) {
		opt_error("out of memory");
		return -1;
	}
	return append(list, nr, &ext, sizeof(ext));
}

/* One pair of an external mount: at dump MOUNTPOINT and KEY, at restore KEY and PATH. */
static int add_ext_mount(const struct cr_option *o, const char *arg, const char *first,
			 size_t first_len, const char *second)
{
	struct ext_mount em;

	/* An empty VALUE is taken, as CRIU takes it (LXC gives "console:"): no mount uses it. */
	if (!first_len) {
		opt_error("bad value '%s' for --%s (mnt[KEY]:VALUE, KEY not empty)", arg, o->name);
		return -1;
	}
	em.key = strndup(first, first_len);
	em.val = (char *)second;
	if (!em.key) {
		opt_error("out of memory");
		return -1;
	}
	return append(&opts.ext_mounts, &opts.nr_ext_mounts, &em, sizeof(em));
}

/*
 * veth[IN]:OUT[@BRIDGE] (restore: the outer end of the tree's veth link IN), macvlan[IN]:OUT
 * (restore: the lower link of the tree's macvlan link IN), netdev[IN]:OUT (restore: criu's
 * link OUT becomes the tree's IN) and mnt[A]:B, an external mount (ns-mnt.c). The other
 * kinds CRIU knows (tty, file, dev, unix, net, pid): refused. A key of no kind is kept by
 * CRIU for a lookup that never comes (LXC gives "console:"): taken, and nothing uses it.
 */
static int set_external(const struct cr_option *o, const char *arg, bool on)
{
	static const char *const refused[] = { "tty[", "file[", "dev[", "unix[", "net[", "pid[" };
	const char *close = strstr(arg, "]:");

	(void)on;
	if (!strncmp(arg, "veth[", 5))
		return add_ext_veth(o, arg, arg + 5, "]:");
	if (!strncmp(arg, "macvlan[", 8))
		return add_ext_link(o, arg, "macvlan", &opts.ext_macvlans, &opts.nr_ext_macvlans);
	if (!strncmp(arg, "netdev[", 7))
		return add_ext_link(o, arg, "netdev", &opts.ext_netdevs, &opts.nr_ext_netdevs);
	/*
	 * mnt[] and mnt[]:FLAGS: found at dump. m (mounts receiving from outside) and s (mounts
	 * sharing a peer group with criu's) change nothing: both are restored so anyway.
	 */
	if (!strcmp(arg, "mnt[]") ||
	    (!strncmp(arg, "mnt[]:", 6) && arg[6] && strspn(arg + 6, "sm") == strlen(arg + 6))) {
		opts.ext_mount_auto = true;
		return 0;
	}
	if (!strncmp(arg, "mnt[", 4) && close)
		return add_ext_mount(o, arg, arg + 4, close - (arg + 4), close + 2);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!strncmp(arg, refused[i], strlen(refused[i])))
			return refuse(o, arg);
	if (!strncmp(arg, "mnt[", 4) || !strncmp(arg, "veth[", 5)) {
		opt_error("bad value '%s' for --%s", arg, o->name);
		return -1;
	}
	return 0;
}

static int set_veth_pair(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	return add_ext_veth(o, arg, arg, "=");
}

/* Only the net namespace: the others this criu dumps have nothing to leave out. */
static int set_empty_ns(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (strcmp(arg, "net"))
		return refuse(o, arg);
	opts.empty_ns_net = true;
	return 0;
}

/*
 * CRIU's NS:PATH or NS:PID (then /proc/PID/ns/NS), with ",OPTIONS" that only a user
 * namespace takes (its uid and gid). As CRIU: pid and mount namespaces cannot be joined.
 */
static int set_join_ns(const struct cr_option *o, const char *arg, bool on)
{
	const char *colon = strchr(arg, ':'), *comma, *why = NULL;
	char **slot = NULL, *path;
	size_t kind_len, len;

	(void)o;
	(void)on;
	kind_len = colon ? (size_t)(colon - arg) : 0;
	if (!kind_len || !colon[1] || colon[1] == ',')
		why = "not NS:PATH nor NS:PID";
	else if (kind_len == 3 && !strncmp(arg, "net", 3))
		slot = &opts.join_ns.net;
	else if (kind_len == 3 && !strncmp(arg, "uts", 3))
		slot = &opts.join_ns.uts;
	else if (kind_len == 3 && !strncmp(arg, "ipc", 3))
		slot = &opts.join_ns.ipc;
	else if (kind_len == 4 && !strncmp(arg, "time", 4))
		slot = &opts.join_ns.time;
	else if (kind_len == 4 && !strncmp(arg, "user", 4))
		why = "joining a user namespace (and taking its uid,gid) is not supported by this "
		      "criu";
	else if (kind_len == 3 && !strncmp(arg, "pid", 3))
		why = "a pid namespace cannot be joined, as with CRIU";
	else if (kind_len == 3 && !strncmp(arg, "mnt", 3))
		why = "a mnt namespace cannot be joined, as with CRIU";
	else
		why = "no such namespace kind (net, uts, ipc, time)";
	comma = colon ? strchr(colon + 1, ',') : NULL;
	/* An empty OPTIONS is no option (RPC clients may send one). */
	if (!why && comma && comma[1])
		why = "options are a user namespace's only";
	if (why) {
		opt_error("--join-ns %s: %s", arg, why);
		return -1;
	}
	len = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);
	if (strspn(colon + 1, "0123456789") == len) {
		if (asprintf(&path, "/proc/%.*s/ns/%.*s", (int)len, colon + 1, (int)kind_len,
			     arg) < 0)
			return -1;
	} else {
		path = strndup(colon + 1, len);
		if (!path)
			return -1;
	}
	*slot = path;
	return 0;
}

/* KEY:VAL, CRIU's older spelling of --external mnt[KEY]:VAL; "auto" that of mnt[]. */
static int add_ext_mount_map(const struct cr_option *o, const char *arg, bool on)
{
	const char *colon = strchr(arg, ':');

	(void)on;
	if (!strcmp(arg, "auto")) {
		opts.ext_mount_auto = true;
		return 0;
	}
	if (!colon) {
		opt_error("bad value '%s' for --%s (KEY:VAL)", arg, o->name);
		return -1;
	}
	return add_ext_mount(o, arg, arg, colon - arg, colon + 1);
}

/* CRIU's older spelling of the m of --external mnt[]:m, which changes nothing here. */
static int accept_external_masters(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)arg;
	(void)on;
	return 0;
}

/* The directory restore binds a mount namespace's root mount from (ns-mnt.c). */
static int set_root(const struct cr_option *o, const char *arg, bool on)
{
	char *real = realpath(arg, NULL);

	(void)on;
	if (!real) {
		opt_error("--%s %s: %s", o->name, arg, strerror(errno));
		return -1;
	}
	free(opts.root);
	opts.root = real;
	return 0;
}

static int set_feature(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)on;
	if (!check_feature_known(arg)) {
		opt_error("unknown feature '%s' (criu --help lists them)", arg);
		return -1;
	}
	opts.check_feature = (char *)arg;
	return 0;
}

static int set_check_all(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)arg;
	(void)on;
	opts.check_extra = opts.check_experimental = true;
	return 0;
}

static int set_pre_dump_mode(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (strcmp(arg, "splice") && strcmp(arg, "read")) {
		opt_error("bad value '%s' for --%s (splice or read)", arg, o->name);
		return -1;
	}
	opts.pre_dump_read = !strcmp(arg, "read");
	return 0;
}

/*
 * iptables (the default) or nftables (netlock-nft.c) locks the TCP connections whose peer
 * is outside the tree (sk-tcp.c); skip dumps them unlocked.
 */
static int set_network_lock(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (strcmp(arg, "iptables") && strcmp(arg, "nftables") && strcmp(arg, "skip")) {
		opt_error("bad value '%s' for --%s (iptables, nftables or skip)", arg, o->name);
		return -1;
	}
	opts.network_lock_skip = !strcmp(arg, "skip");
	opts.network_lock_nft = !strcmp(arg, "nftables");
	return 0;
}

/* Upstream's modes; without a value, "soft" (also the default). */
static int set_manage_cgroups(const struct cr_option *o, const char *arg, bool on)
{
	static const struct {
		const char *name;
		enum cg_mode mode;
	} modes[] = {
		{ "none", CG_MODE_NONE }, { "props", CG_MODE_PROPS },	{ "soft", CG_MODE_SOFT },
		{ "full", CG_MODE_FULL }, { "strict", CG_MODE_STRICT }, { "ignore", CG_MODE_IGNORE },
	};

	(void)on;
	if (!arg) {
		opts.manage_cgroups = CG_MODE_SOFT;
		return 0;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (!strcmp(arg, modes[i].name)) {
			opts.manage_cgroups = modes[i].mode;
			return 0;
		}
	}
	opt_error("bad value '%s' for --%s (none, props, soft, full, strict or ignore)", arg,
		  o->name);
	return -1;
}

/* [CTRL:]PATH, PATH absolute: the root cgroup of hierarchy CTRL, or of every one. */
static int add_cgroup_root(const struct cr_option *o, const char *arg, bool on)
{
	struct cgroup_root_opt root = { 0 };
	const char *colon = strchr(arg, ':');
	const char *path = colon ? colon + 1 : arg;

	(void)on;
	if (path[0] != '/' || (colon && colon == arg)) {
		opt_error("bad value '%s' for --%s ([CTRL:]PATH, PATH absolute)", arg, o->name);
		return -1;
	}
	root.path = strdup(path);
	root.ctrl = colon ? strndup(arg, colon - arg) : NULL;
	if (!root.path || (colon && !root.ctrl)) {
		free(root.path);
		free(root.ctrl);
		opt_error("out of memory");
		return -1;
	}
	return append(&opts.cgroup_roots, &opts.nr_cgroup_roots, &root, sizeof(root));
}

/* Without a value: every external peer; with inodes, upstream's exceptions list: refused. */
static int set_ext_unix_sk(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (arg)
		return refuse(o, arg);
	opts.ext_unix_sk = true;
	return 0;
}

/*
 * As CRIU reads it: without a value every capability; else words of fpu, cpu, ins, all and
 * none, separated by commas, each after the default set (fpu, ins); ^ before a word
 * takes it away instead (^none: all). Any but none also asks for cpuinfo.img (IMAGE).
 */
static int set_cpu_cap(const struct cr_option *o, const char *arg, bool on)
{
	static const struct {
		const char *name;
		unsigned int bits;
	} caps[] = {
		{ "fpu", CPU_CAP_FPU }, { "cpu", CPU_CAP_CPU }, { "ins", CPU_CAP_INS },
		{ "all", CPU_CAP_ALL }, { "none", CPU_CAP_NONE },
	};
	bool negate = false;

	(void)on;
	if (!arg) {
		opts.cpu_cap = CPU_CAP_ALL | CPU_CAP_IMAGE;
		return 0;
	}
	for (const char *p = arg; *p;) {
		size_t i, len;

		if (*p == '^' || *p == ',') {
			negate = *p == '^' ? !negate : false;
			p++;
			continue;
		}
		for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
			if (!strncmp(p, caps[i].name, strlen(caps[i].name)))
				break;
		if (i == sizeof(caps) / sizeof(caps[0])) {
			opt_error("bad value '%s' for --%s (fpu, cpu, ins, all or none, with , "
				  "and ^)",
				  arg, o->name);
			return -1;
		}
		len = strlen(caps[i].name);
		if (caps[i].bits == CPU_CAP_NONE)
			opts.cpu_cap = negate ? CPU_CAP_ALL : CPU_CAP_NONE;
		else if (negate)
			opts.cpu_cap &= ~caps[i].bits;
		else
			opts.cpu_cap |= caps[i].bits;
		p += len;
	}
	if (opts.cpu_cap != CPU_CAP_NONE)
		opts.cpu_cap |= CPU_CAP_IMAGE;
	return 0;
}

/*
 * TYPE:NAME, TYPE apparmor, selinux or none (NAME then ignored, as CRIU does). Whether
 * this kernel has that LSM is for restore to say (lsm.c), before it creates anything.
 */
static int set_lsm_profile(const struct cr_option *o, const char *arg, bool on)
{
	const char *colon = strchr(arg, ':');

	(void)on;
	if (colon && !strncmp(arg, "none:", 5)) {
		opts.lsm_profile_kind = LSM_OPT_NONE;
		opts.lsm_profile = NULL;
		return 0;
	}
	if (!colon || !colon[1] ||
	    (strncmp(arg, "apparmor:", 9) && strncmp(arg, "selinux:", 8))) {
		opt_error("bad value '%s' for --%s (apparmor:PROFILE, selinux:CONTEXT or none:)",
			  arg, o->name);
		return -1;
	}
	opts.lsm_profile_kind = arg[0] == 'a' ? LSM_OPT_APPARMOR : LSM_OPT_SELINUX;
	opts.lsm_profile = (char *)colon + 1;
	return 0;
}

/* An absolute mount point, as the tree's mountinfo shows it (a trailing / dropped). */
static int add_skip_mnt(const struct cr_option *o, const char *arg, bool on)
{
	char *path;

	(void)on;
	if (arg[0] != '/') {
		opt_error("bad value '%s' for --%s (an absolute mount point)", arg, o->name);
		return -1;
	}
	path = strdup(arg);
	if (!path) {
		opt_error("out of memory");
		return -1;
	}
	for (size_t len = strlen(path); len > 1 && path[len - 1] == '/'; len--)
		path[len - 1] = '\0';
	return append(&opts.skip_mnts, &opts.nr_skip_mnts, &path, sizeof(path));
}

/* FS[,FS]: filesystem types as mountinfo names them; "all" for any. */
static int add_enable_fs(const struct cr_option *o, const char *arg, bool on)
{
	char *list = strdup(arg), *save, *fs;

	(void)on;
	if (!list) {
		opt_error("out of memory");
		return -1;
	}
	for (fs = strtok_r(list, ",", &save); fs; fs = strtok_r(NULL, ",", &save)) {
		if (!strcmp(fs, "all"))
			opts.enable_fs_all = true;
		else if (append(&opts.enable_fs, &opts.nr_enable_fs, &fs, sizeof(fs)))
			return -1;
	}
	if (!opts.enable_fs_all && !opts.nr_enable_fs) {
		opt_error("bad value '%s' for --%s (FS[,FS])", arg, o->name);
		return -1;
	}
	return 0;
}

/*
 * Upstream's --ghost-fiemap finds a deleted file's data with FIEMAP instead of reading it
 * all; here a ghost's data is always found with SEEK_DATA/SEEK_HOLE (files-reg.c), so its
 * holes are never read or saved: what the option asks for is what every dump does, with
 * or without --no-ghost-fiemap (which only forbids FIEMAP, which is never used).
 */
static int accept_sparse_ghosts(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)arg;
	(void)on;
	return 0;
}

/* filesize: a reopened file whose size changed fails the restore (else a warning). */
static int set_file_validation(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (strcmp(arg, "filesize") && strcmp(arg, "buildid")) {
		opt_error("bad value '%s' for --%s (filesize or buildid)", arg, o->name);
		return -1;
	}
	if (strcmp(arg, "filesize"))
		return refuse(o, arg);
	opts.file_validation_size = true;
	return 0;
}

/*
 * Taken by the first pass (config_scan), before any file is read; a configuration file
 * cannot name another one.
 */
static int set_config(const struct cr_option *o, const char *arg, bool on)
{
	(void)on;
	if (parse_where) {
		opt_error("--%s cannot be set in a configuration file", o->name);
		return -1;
	}
	if (!config_scan)
		return 0;
	if (arg)
		opts.config_file = (char *)arg;
	else
		opts.no_default_config = true;
	return 0;
}

static int show_help(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)arg;
	(void)on;
	print_usage();
	exit(0);
}

static int show_version(const struct cr_option *o, const char *arg, bool on)
{
	(void)o;
	(void)arg;
	(void)on;
	/* CRIU's format, its interface version first: runtimes parse it (LXC needs >= 2.0). */
	printf("Version: %s\nGitID: %s\n", CRIU_IFACE_VERSION, CRIU_VERSION);
	exit(0);
}

/* ---------------------------------------------------------------- getopt ---- */

static struct option long_opts[2 * NR_OPTIONS + 1];
static char short_opts[3 * NR_OPTIONS + 2];

static void build_getopt_tables(void)
{
	unsigned int n = 0;
	char *s = short_opts;

	if (long_opts[0].name)
		return;
	/* ':' first: a missing argument is told from an unknown option. */
	*s++ = ':';
	for (unsigned int i = 0; i < NR_OPTIONS; i++) {
		const struct cr_option *o = &options[i];

		long_opts[n++] = (struct option){o->name, o->has_arg, NULL, LONG_VAL_BASE + 2 * i};
		if (o->no_name)
			long_opts[n++] = (struct option){o->no_name, no_argument, NULL,
							 LONG_VAL_BASE + 2 * i + 1};
		if (!o->short_name)
			continue;
		*s++ = o->short_name;
		if (o->has_arg != no_argument)
			*s++ = ':';
		if (o->has_arg == optional_argument)
			*s++ = ':';
	}
}

static const struct cr_option *option_of_short(int c)
{
	for (unsigned int i = 0; i < NR_OPTIONS; i++)
		if (options[i].short_name == c)
			return &options[i];
	return NULL;
}

static int apply_option(const struct cr_option *o, const char *arg, bool on)
{
	/* The scan pass acts on --config alone (set_config knows the pass), the others on all else.
	 */
	if (o->set == set_config)
		return set_config(o, arg, on);
	if (config_scan)
		return 0;
	if (o->set)
		return o->set(o, arg, on);
	/* Refused; its --no- form asks for what this criu does. */
	return on ? refuse(o, NULL) : 0;
}

static void report_getopt_error(int c, char **argv)
{
	const struct cr_option *o = c == ':' ? option_of_short(optopt) : NULL;

	if (c == ':' && o)
		opt_error("option -%c (--%s) requires an argument", optopt, o->name);
	else if (c == ':')
		opt_error("option '%s' requires an argument", argv[optind - 1]);
	else if (optopt && optopt < LONG_VAL_BASE)
		opt_error("unknown option '-%c'", optopt);
	else
		opt_error("unknown or ambiguous option '%s'", argv[optind - 1]);
}

/*
 * One getopt pass over argv (argv[0] is skipped). Returns the index of the first
 * positional argument (getopt moves them to the end), or -1.
 */
static int getopt_pass(int argc, char **argv)
{
	int c;

	build_getopt_tables();
	optind = 0; /* glibc: start afresh, argv is another vector */
	opterr = 0;
	while ((c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
		const struct cr_option *o;
		bool on = true;

		if (c == '?' || c == ':') {
			if (config_scan)
				continue; /* the real pass says it */
			report_getopt_error(c, argv);
			return -1;
		}
		if (c >= LONG_VAL_BASE) {
			o = &options[(c - LONG_VAL_BASE) / 2];
			on = !((c - LONG_VAL_BASE) & 1);
		} else {
			o = option_of_short(c);
		}
		if (apply_option(o, optarg, on))
			return -1;
	}
	return optind;
}

/* --------------------------------------------------- configuration files ---- */

#define CONFIG_MAX_WORDS 64

/*
 * A value in double quotes, as upstream reads it: \" is a quote, nothing but blanks may
 * follow the closing one. Unquotes in place; returns the end of the value, or NULL.
 */
static char *unquote(char *p)
{
	char *out = p, *in = p + 1;

	for (; *in && *in != '"'; in++) {
		if (in[0] == '\\' && in[1] == '"')
			in++;
		*out++ = *in;
	}
	if (*in != '"')
		return NULL;
	*out = '\0';
	in++;
	in += strspn(in, " \t\r\n");
	return *in ? NULL : in;
}

/*
 * One line of a configuration file into argv words: '#' starts a comment; the first word
 * is an option's long name without dashes ("verbosity=4", "tree 123"); the words after
 * it are given as they are (a value, or further options); a value in double quotes may
 * hold blanks. Returns the number of words (0 for none), or -1.
 */
static int split_config_line(char *line, char **words)
{
	int n = 0;
	char *p = strchr(line, '#');

	if (p)
		*p = '\0';
	p = line;
	while (n < CONFIG_MAX_WORDS) {
		p += strspn(p, " \t\r\n");
		if (!*p)
			return n;
		words[n++] = p;
		if (n == 2 && *p == '"') {
			p = unquote(p);
			if (!p)
				return -1;
			continue;
		}
		p += strcspn(p, " \t\r\n");
		if (*p)
			*p++ = '\0';
	}
	return -1;
}

static int apply_config_line(char *line, const char *where)
{
	char *words[CONFIG_MAX_WORDS], *argv[CONFIG_MAX_WORDS + 2];
	char first[256];
	int n = split_config_line(line, words), pos;

	if (n <= 0) {
		if (n < 0)
			opt_error("%s: cannot read this line (see criu(8), CONFIGURATION FILES)",
				  where);
		return n;
	}
	if (snprintf(first, sizeof(first), "--%s", words[0]) >= (int)sizeof(first)) {
		opt_error("%s: '%s' is too long for an option name", where, words[0]);
		return -1;
	}
	argv[0] = "criu";
	argv[1] = first;
	memcpy(argv + 2, words + 1, (n - 1) * sizeof(*words));
	argv[n + 1] = NULL;
	parse_where = where;
	pos = getopt_pass(n + 1, argv);
	parse_where = NULL;
	if (pos >= 0 && pos <= n) {
		opt_error("%s: '%s' is not an option or the value of one", where, argv[pos]);
		return -1;
	}
	return pos < 0 ? -1 : 0;
}

/*
 * Applies a configuration file. Its option words stay referenced by opts, so the text is
 * kept for the whole run. A missing file is skipped when optional (the default files).
 */
static int read_config_file(const char *path, bool optional)
{
	char *line = NULL, where[PATH_MAX + 32];
	unsigned int lineno = 0;
	size_t cap = 0;
	int ret = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f) {
		if (optional && errno == ENOENT)
			return 0;
		opt_error("cannot read configuration file %s: %s", path, strerror(errno));
		return -1;
	}
	while (!ret && getline(&line, &cap, f) > 0) {
		snprintf(where, sizeof(where), "%s:%u", path, ++lineno);
		ret = apply_config_line(line, where);
		if (!ret) {
			line = NULL; /* words of it may be in opts now */
			cap = 0;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * As upstream reads them: the default files unless --no-default-config or --config,
 * then $CRIU_CONFIG_FILE (even with --no-default-config), then --config FILE (the last
 * one given); the command line comes after all of them and wins.
 */
static int read_config_files(void)
{
	const char *home = getenv("HOME"), *env = getenv("CRIU_CONFIG_FILE");
	char user[PATH_MAX];

	if (!opts.no_default_config && !opts.config_file) {
		if (read_config_file("/etc/criu/default.conf", true))
			return -1;
		if (home &&
		    snprintf(user, sizeof(user), "%s/.criu/default.conf", home) <
			    (int)sizeof(user) &&
		    read_config_file(user, true))
			return -1;
	}
	if (env && *env && read_config_file(env, false))
		return -1;
	return opts.config_file ? read_config_file(opts.config_file, false) : 0;
}

/*
 * The RPC service's way in (cr-service.c): one option by its long name (or its no-NAME
 * form), applied as the command line applies it, refusals included; "config" reads that
 * file at once (none there: nothing). arg must outlive the run, as argv does.
 */
int opts_apply(const char *long_name, const char *arg)
{
	const struct cr_option *o = NULL;
	bool on = true;

	for (unsigned int i = 0; i < NR_OPTIONS && !o; i++) {
		if (!strcmp(options[i].name, long_name))
			o = &options[i];
		else if (options[i].no_name && !strcmp(options[i].no_name, long_name))
			o = &options[i], on = false;
	}
	if (!o) {
		opt_error("unknown option '--%s'", long_name);
		return -1;
	}
	if (!arg && on && o->has_arg == required_argument) {
		opt_error("option --%s requires an argument", o->name);
		return -1;
	}
	/* The RPC's config_file: a missing one is skipped, as CRIU does (runc always names one). */
	if (o->set == set_config)
		return arg ? read_config_file(arg, true) : 0;
	return apply_option(o, on ? arg : NULL, on);
}

int parse_options(int argc, char **argv)
{
	config_scan = true;
	getopt_pass(argc, argv);
	config_scan = false;
	if (read_config_files())
		return -1;
	return getopt_pass(argc, argv);
}

/* ------------------------------------------------------------------ usage ---- */

static void print_option_help(const struct cr_option *o)
{
	char left[64];
	int n = 0;

	if (o->short_name)
		n = snprintf(left, sizeof(left), "-%c|", o->short_name);
	n += snprintf(left + n, sizeof(left) - n, "--%s%s", o->no_name ? "[no-]" : "", o->name);
	if (o->metavar)
		snprintf(left + n, sizeof(left) - n, "%s%s",
			 o->metavar[0] == '[' || o->metavar[0] == '=' ? "" : " ", o->metavar);
	printf("  %-28s %s\n", left, o->help);
}

/* Refused whatever its value: it has no help line of its own. */
static bool always_refused(const struct cr_option *o)
{
	return !o->set;
}

static const char *refusal_reason(const char *name)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
		for (const char *const *n = refusals[i].names; *n; n++)
			if (!strcmp(*n, name))
				return refusals[i].why;
	return "";
}

/* Words wrapped at 88 columns after an indent of two. */
static void print_wrapped(const char *const *words)
{
	unsigned int col = 2;

	printf(" ");
	for (; *words; words++) {
		if (col + strlen(*words) + 1 > 88) {
			printf("\n ");
			col = 2;
		}
		col += printf(" %s", *words);
	}
	printf("\n");
}

void print_usage(void)
{
	printf("Usage:\n"
	       "  criu dump -t PID [-D DIR] [<options>]\n"
	       "  criu restore [-D DIR] [<options>]\n"
	       "  criu check [--feature NAME] [--extra] [--experimental] [--all]\n"
	       "  criu show FILE\n"
	       "\n");
	print_commands();
	printf("\nOptions (--[no-]NAME: --no-NAME undoes --NAME):\n");
	for (unsigned int i = 0; i < NR_OPTIONS; i++)
		if (!always_refused(&options[i]))
			print_option_help(&options[i]);
	printf("Options are also read from /etc/criu/default.conf, ~/.criu/default.conf,\n"
	       "$CRIU_CONFIG_FILE and --config FILE: one per line, without the dashes.\n");
	printf("\nRefused with \"option --NAME is not supported\" (criu(8) says more):\n");
	for (unsigned int i = 0; i < NR_OPTIONS; i++)
		if (always_refused(&options[i]))
			printf("  --%-26s %s\n", options[i].name, refusal_reason(options[i].name));
	printf("Refused for some values: --external tty[], file[], dev[], unix[], net[], pid[],\n"
	       "--file-validation buildid, --ext-unix-sk with inodes,\n"
	       "--empty-ns but net, --join-ns but net, uts, ipc and time.\n"
	       "\nFeatures for check --feature:\n");
	print_wrapped(check_feature_names());
}
