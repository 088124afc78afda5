/*
 * The command line: options spelled as CRIU spells them, then one of the
 * commands dump, restore, check, show. Bad usage gets one line on stderr.
 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_options.h"
#include "crtools.h"
#include "image.h"
#include "kerndat.h"
#include "log.h"
#include "version.h"

struct cr_options opts = {
	.loglevel = DEFAULT_LOGLEVEL,
};

enum {
	OPT_RESTORE_SIBLING = 1000,
	OPT_PIDFILE,
	OPT_TIMEOUT,
	OPT_NO_DEFAULT_CONFIG,
	OPT_DISPLAY_STATS,
	OPT_FEATURE,
	OPT_VERBOSITY,
};

static const struct option long_opts[] = {
	{ "tree", required_argument, NULL, 't' },
	{ "images-dir", required_argument, NULL, 'D' },
	{ "work-dir", required_argument, NULL, 'W' },
	{ "log-file", required_argument, NULL, 'o' },
	{ "verbosity", optional_argument, NULL, OPT_VERBOSITY },
	{ "shell-job", no_argument, NULL, 'j' },
	{ "leave-running", no_argument, NULL, 'R' },
	{ "restore-detached", no_argument, NULL, 'd' },
	{ "restore-sibling", no_argument, NULL, OPT_RESTORE_SIBLING },
	{ "pidfile", required_argument, NULL, OPT_PIDFILE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "no-default-config", no_argument, NULL, OPT_NO_DEFAULT_CONFIG },
	{ "libdir", required_argument, NULL, 'L' },
	{ "display-stats", no_argument, NULL, OPT_DISPLAY_STATS },
	{ "feature", required_argument, NULL, OPT_FEATURE },
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{},
};

static const char short_opts[] = ":t:D:W:o:v::jRdL:Vh";

static void usage(void)
{
	printf("Usage:\n"
	       "  criu dump -t PID -D DIR [options]\n"
	       "  criu restore -D DIR [options]\n"
	       "  criu check [--feature NAME]\n"
	       "  criu show FILE\n"
	       "\n"
	       "Options:\n"
	       "  -t|--tree PID           checkpoint the process tree rooted at PID\n"
	       "  -D|--images-dir DIR     directory for the image files\n"
	       "  -W|--work-dir DIR       directory for logs and pidfile (default: the images dir)\n"
	       "  -o|--log-file FILE      log file name, relative to the work dir\n"
	       "  -v[v...] | --verbosity=N  log level 0..4 (default 2: warnings)\n"
	       "  -j|--shell-job          the process is a shell job: stdio on criu's terminal\n"
	       "  -R|--leave-running      leave the process running after dump\n"
	       "  -d|--restore-detached   do not wait for the restored tree\n"
	       "  --restore-sibling       restore the root task as a sibling of criu\n"
	       "  --pidfile FILE          write the restored root's pid to FILE\n"
	       "  --timeout N             give up on a stage after N seconds\n"
	       "  -L|--libdir DIR         load plugins from DIR\n"
	       "  --display-stats         print timing statistics\n"
	       "  --no-default-config     read no configuration file (none is read anyway)\n"
	       "  -V|--version            print the version\n");
}

static int parse_uint(const char *what, const char *arg, unsigned long max, unsigned long *val)
{
	char *end;

	errno = 0;
	*val = strtoul(arg, &end, 10);
	if (errno || !*arg || *end || arg[0] == '-' || *val > max) {
		fprintf(stderr, "Error: bad %s '%s'\n", what, arg);
		return -1;
	}
	return 0;
}

/* -v alone adds one level; -vvv adds three; -v4 (or --verbosity=4) sets it. */
static int parse_verbosity(const char *arg, bool bare_v)
{
	unsigned long level;

	if (!arg) {
		opts.loglevel = bare_v ? opts.loglevel + 1 : LOG_DEBUG;
		return 0;
	}
	if (bare_v && arg[strspn(arg, "v")] == '\0') {
		opts.loglevel += 1 + strlen(arg);
		return 0;
	}
	if (parse_uint("verbosity", arg, LOG_DEBUG, &level))
		return -1;
	opts.loglevel = level;
	return 0;
}

static int parse_options(int argc, char **argv)
{
	unsigned long val;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			if (parse_uint("pid", optarg, INT_MAX, &val) || val == 0) {
				if (val == 0)
					fprintf(stderr, "Error: bad pid '%s'\n", optarg);
				return -1;
			}
			opts.tree_pid = val;
			break;
		case 'D':
			opts.imgs_dir = optarg;
			break;
		case 'W':
			opts.work_dir = optarg;
			break;
		case 'o':
			opts.log_file = optarg;
			break;
		case 'v':
			if (parse_verbosity(optarg, true))
				return -1;
			break;
		case OPT_VERBOSITY:
			if (parse_verbosity(optarg, false))
				return -1;
			break;
		case 'j':
			opts.shell_job = true;
			break;
		case 'R':
			opts.leave_running = true;
			break;
		case 'd':
			opts.restore_detach = true;
			break;
		case OPT_RESTORE_SIBLING:
			opts.restore_sibling = true;
			break;
		case OPT_PIDFILE:
			opts.pidfile = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_uint("timeout", optarg, INT_MAX, &val))
				return -1;
			opts.timeout = val;
			break;
		case OPT_NO_DEFAULT_CONFIG:
			/* We read no configuration files at all, so there is nothing to disable. */
			break;
		case 'L':
			opts.libdir = optarg;
			break;
		case OPT_DISPLAY_STATS:
			opts.display_stats = true;
			break;
		case OPT_FEATURE:
			opts.check_feature = optarg;
			break;
		case 'V':
			printf("Version: %s\n", CRIU_VERSION);
			exit(0);
		case 'h':
			usage();
			exit(0);
		case ':':
			fprintf(stderr, "Error: option '%s' requires an argument\n", argv[optind - 1]);
			return -1;
		default:
			if (optopt)
				fprintf(stderr, "Error: unknown option '-%c'\n", optopt);
			else
				fprintf(stderr, "Error: unknown option '%s'\n", argv[optind - 1]);
			return -1;
		}
	}
	if (opts.loglevel > LOG_DEBUG)
		opts.loglevel = LOG_DEBUG;
	return 0;
}

/* Opens the images dir (and the work dir for logs/pidfile), then the log. */
static int open_dirs_and_log(bool create_images_dir)
{
	const char *imgs = opts.imgs_dir ? opts.imgs_dir : ".";
	int work_fd;

	if (create_images_dir && mkdir(imgs, 0700) && errno != EEXIST) {
		fprintf(stderr, "Error: cannot create images directory %s: %s\n", imgs, strerror(errno));
		return -1;
	}
	images_dir_fd = open(imgs, O_DIRECTORY | O_PATH | O_CLOEXEC);
	if (images_dir_fd < 0) {
		fprintf(stderr, "Error: cannot open images directory %s: %s\n", imgs, strerror(errno));
		return -1;
	}
	if (!opts.work_dir)
		opts.work_dir = (char *)imgs;
	work_fd = open(opts.work_dir, O_DIRECTORY | O_PATH | O_CLOEXEC);
	if (work_fd < 0) {
		fprintf(stderr, "Error: cannot open work directory %s: %s\n", opts.work_dir, strerror(errno));
		return -1;
	}
	if (log_init(work_fd, opts.log_file, opts.loglevel))
		return -1;
	/* --pidfile is relative to the work dir, like the log. */
	if (opts.pidfile && opts.pidfile[0] != '/' && fchdir(work_fd) == 0) {
		char *abs = realpath(".", NULL);

		if (abs && asprintf(&opts.pidfile, "%s/%s", abs, opts.pidfile) < 0)
			opts.pidfile = NULL;
		free(abs);
	}
	close(work_fd);
	return 0;
}

/*
 * `criu show FILE` is a shortcut for `crit show FILE`: the crit beside this binary in the
 * source tree (crit/crit), else the one installed beside it (../bin/crit), else crit in PATH.
 * Returns only on failure.
 */
static int exec_crit_show(const char *file)
{
	static const char *const beside[] = { "../crit/crit", "../bin/crit" };
	char self[PATH_MAX], crit[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		*strrchr(self, '/') = '\0';
		for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
			snprintf(crit, sizeof(crit), "%s/%s", self, beside[i]);
			if (access(crit, X_OK) == 0)
				execl(crit, "crit", "show", file, (char *)NULL);
		}
	}
	execlp("crit", "crit", "show", file, (char *)NULL);
	fprintf(stderr, "Error: cannot run crit to show %s: %s\n", file, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	const char *cmd;
	int ret;

	if (parse_options(argc, argv))
		return 1;
	if (optind >= argc) {
		fprintf(stderr, "Error: no command given (dump, restore, check, show); see criu --help\n");
		return 1;
	}
	cmd = argv[optind];

	if (!strcmp(cmd, "show")) {
		if (optind + 1 >= argc) {
			fprintf(stderr, "Error: show needs an image file\n");
			return 1;
		}
		return exec_crit_show(argv[optind + 1]);
	}
	if (!strcmp(cmd, "check")) {
		log_init(-1, NULL, opts.loglevel);
		return cr_check(opts.check_feature) ? 1 : 0;
	}
	if (!strcmp(cmd, "dump")) {
		if (!opts.tree_pid) {
			fprintf(stderr, "Error: dump needs a process: -t PID\n");
			return 1;
		}
		if (kill(opts.tree_pid, 0) && errno == ESRCH) {
			fprintf(stderr, "Error: no process with pid %d\n", opts.tree_pid);
			return 1;
		}
		if (open_dirs_and_log(true))
			return 1;
		ret = cr_dump_tasks(opts.tree_pid);
		if (ret)
			pr_info("Dumping FAILED.\n");
		else
			pr_info("Dumping finished successfully\n");
	} else if (!strcmp(cmd, "restore")) {
		if (!opts.imgs_dir) {
			fprintf(stderr, "Error: restore needs an images directory: -D DIR\n");
			return 1;
		}
		if (open_dirs_and_log(false))
			return 1;
		ret = cr_restore_tasks();
		/* Without -d, ret is the restored root's exit status, as with CRIU. */
		if (ret < 0)
			pr_info("Restoring FAILED.\n");
	} else {
		fprintf(stderr, "Error: unknown command '%s' (dump, restore, check, show)\n", cmd);
		return 1;
	}
	log_fini();
	return ret < 0 ? 1 : ret;
}
