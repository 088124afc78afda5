/*
 * The commands: dump, restore, check, show; CRIU's others are refused by name. Options
 * (config.c) come from configuration files and the command line. Bad usage gets one
 * line on stderr and exit status 1.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr-service.h"
#include "cr_options.h"
#include "cpuinfo.h"
#include "cr-check.h"
#include "crtools.h"
#include "daemon.h"
#include "dedup.h"
#include "image.h"
#include "kinds.h"
#include "kerndat.h"
#include "log.h"
#include "net-lock.h"
#include "page-server.h"
#include "uffd.h"

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
static int exec_crit_show(char **args)
{
	const char *file = args[0];
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

/*
 * --page-server on dump and pre-dump: the server's address and port. With
 * --prev-images-dir the dump reads what its parent holds from the parent's pagemaps here
 * (a pre-dump --page-server keeps them), and the server must have the same parent images
 * (page-server --prev-images-dir).
 */
static int check_page_server_dump(const char *command)
{
	if (opts.auto_dedup) {
		fprintf(stderr, "Error: %s --page-server --auto-dedup is not supported: the "
				"parent images the holes would go in are the server's\n",
			command);
		return -1;
	}
	if (!opts.ps_address || !opts.ps_port) {
		fprintf(stderr, "Error: %s --page-server needs the server's --address and --port\n",
			command);
		return -1;
	}
	return 0;
}

/*
 * dump --lazy-pages: the private pages stay in the frozen tree, served on --port to a
 * criu lazy-pages --page-server. They go nowhere else: not to a page server, not split
 * between a parent's images and the tree.
 */
static int check_lazy_dump(const char *command)
{
	const char *why = NULL;

	if (strcmp(command, "dump"))
		why = "a pre-dump stores pages; only dump leaves them in the tree";
	else if (opts.use_page_server)
		why = "the pages stay in the tree, they are sent to no page server";
	else if (opts.prev_images_dir)
		why = "the pages stay in the tree, none are taken from parent images";
	else if (!opts.ps_port)
		why = "it needs --port to serve the pages on";
	if (!why)
		return 0;
	fprintf(stderr, "Error: %s --lazy-pages: %s\n", command, why);
	return -1;
}

/* dump and pre-dump: a -t PID that exists, the images dir and the log. 0 or -1 (said). */
static int open_dump(const char *command)
{
	if (opts.lazy_pages && check_lazy_dump(command))
		return -1;
	if (!opts.tree_pid) {
		fprintf(stderr, "Error: %s needs a process: -t PID\n", command);
		return -1;
	}
	if (opts.use_page_server && check_page_server_dump(command))
		return -1;
	if (kill(opts.tree_pid, 0) && errno == ESRCH) {
		fprintf(stderr, "Error: no process with pid %d\n", opts.tree_pid);
		return -1;
	}
	return open_dirs_and_log(true);
}

static int run_dump(char **args)
{
	int ret;

	(void)args;
	if (open_dump("dump"))
		return 1;
	ret = cr_dump_tasks(opts.tree_pid);
	if (ret) {
		pr_info("Dumping FAILED.\n");
	} else {
		pr_info("Dumping finished successfully\n");
		report_status_ready();
	}
	log_fini();
	return ret ? 1 : 0;
}

static int run_restore(char **args)
{
	int ret;

	(void)args;
	if (open_dirs_and_log(false))
		return 1;
	ret = cr_restore_tasks();
	/* Without -d, ret is the restored root's exit status, as with CRIU. */
	if (ret < 0) {
		netlock_restore_failed();
		pr_info("Restoring FAILED.\n");
	}
	log_fini();
	return ret < 0 ? 1 : ret;
}

static int run_lazy_pages(char **args)
{
	int ret;

	(void)args;
	if (opts.use_page_server && !opts.ps_port) {
		fprintf(stderr, "Error: lazy-pages --page-server needs the dump's --port (and "
				"--address)\n");
		return 1;
	}
	if (open_dirs_and_log(false))
		return 1;
	ret = cr_lazy_pages();
	log_fini();
	return ret ? 1 : 0;
}

/* One dump's pages, received over TCP into DIR (page-server.h). */
static int run_page_server(char **args)
{
	int ret;

	(void)args;
	if (!opts.ps_port) {
		fprintf(stderr, "Error: page-server needs --port\n");
		return 1;
	}
	if (opts.lazy_pages && opts.prev_images_dir) {
		fprintf(stderr, "Error: page-server --lazy-pages serves the images in -D, whose "
				"parent link they have: --prev-images-dir is for storing a dump\n");
		return 1;
	}
	/* --lazy-pages reads the images of -D, as restore does; else it writes a dump's. */
	if (open_dirs_and_log(!opts.lazy_pages))
		return 1;
	ret = cr_page_server();
	log_fini();
	return ret ? 1 : 0;
}

static int run_check(char **args)
{
	struct check_request req = {
		.feature = opts.check_feature,
		.extra = opts.check_extra,
		.experimental = opts.check_experimental,
	};
	int ret;

	(void)args;
	if (opts.log_file ? open_dirs_and_log(false) : log_init(-1, NULL, opts.loglevel))
		return 1;
	ret = cr_check(&req);
	log_fini();
	return ret ? 1 : 0;
}

/* Pages of the tree, which runs on; its writes are tracked for the next dump (mem-track.h). */
static int run_pre_dump(char **args)
{
	int ret;

	(void)args;
	if (open_dump("pre-dump"))
		return 1;
	ret = cr_pre_dump_tasks(opts.tree_pid);
	if (ret)
		pr_info("Pre-dumping FAILED.\n");
	else
		pr_info("Pre-dumping finished successfully\n");
	log_fini();
	return ret ? 1 : 0;
}

/* Holes in the parent images for the pages the dump in -D stores again (dedup.h). */
static int run_dedup(char **args)
{
	int ret;

	(void)args;
	if (open_dirs_and_log(false))
		return 1;
	ret = cr_dedup();
	if (ret)
		pr_info("Deduplication FAILED.\n");
	log_fini();
	return ret ? 1 : 0;
}

static int run_swrk(char **args)
{
	return cr_swrk(args[0]);
}

static int run_service(char **args)
{
	(void)args;
	return cr_service();
}

/*
 * cpuinfo dump: cpuinfo.img of this CPU into -D; cpuinfo check: this CPU against it, for
 * what --cpu-cap asks (as CRIU: none asks for all).
 */
static int run_cpuinfo(char **args)
{
	int ret;

	if (strcmp(args[0], "dump") && strcmp(args[0], "check")) {
		fprintf(stderr, "Error: cpuinfo needs dump or check, not '%s'\n", args[0]);
		return 1;
	}
	if (open_dirs_and_log(!strcmp(args[0], "dump")))
		return 1;
	if (!strcmp(args[0], "dump"))
		ret = cpuinfo_dump();
	else
		ret = cpuinfo_check((opts.cpu_cap & CPU_CAP_ALL) ?: CPU_CAP_ALL);
	log_fini();
	return ret ? 1 : 0;
}

struct command {
	const char *name;
	int (*run)(char **args); /* NULL: refused */
	const char *arg; /* the one word that follows the command ("FILE"), or NULL */
	const char *help; /* one line of --help */
};

/* CRIU's commands, with show (`crit show`); the rest of CRIU's are refused by name. */
static const struct command commands[] = {
	{"dump", run_dump, NULL, "checkpoint the process tree rooted at PID into DIR"},
	{"restore", run_restore, NULL, "restore the process tree saved in DIR"},
	{"check", run_check, NULL, "check that this kernel has what dump and restore need"},
	{"show", exec_crit_show, "FILE", "print an image file as JSON (runs crit show FILE)"},
	{"pre-dump", run_pre_dump, NULL,
	 "save the tree's memory, leave it running and track its writes for the next dump"},
	{"page-server", run_page_server, NULL,
	 "receive the pages of one dump --page-server into DIR (--port, --address)"},
	{"service", run_service, NULL,
	 "serve CRIU's RPC on --address (default /var/run/criu_service.socket)"},
	{"swrk", run_swrk, "FD", "serve CRIU's RPC on the inherited socket FD (runc, libcriu)"},
	{"dedup", run_dedup, NULL,
	 "punch the pages the dump in DIR stores again out of its parent images"},
	{"lazy-pages", run_lazy_pages, NULL, "serve the pages of a restore --lazy-pages from DIR"},
	{"cpuinfo", run_cpuinfo, "dump|check",
	 "write cpuinfo.img of this CPU into DIR, or check this CPU against it (--cpu-cap)"},
	{"exec", NULL, NULL, "not supported"},
};

#define NR_COMMANDS (sizeof(commands) / sizeof(commands[0]))

void print_commands(void)
{
	printf("Commands:\n");
	for (size_t i = 0; i < NR_COMMANDS; i++)
		printf("  %-14s %s\n", commands[i].name, commands[i].help);
}

/*
 * A run refused for its options still leaves its log (-o) with the reason, as a run that
 * fails later does: test drivers read the log. Only into a directory that exists.
 */
static void log_parse_error(void)
{
	const char *dir = opts.work_dir ?: opts.imgs_dir ?: ".";
	char path[PATH_MAX];
	FILE *log;

	if (!opts.log_file || !strcmp(opts.log_file, "-") || !*parse_error_line())
		return;
	if (opts.log_file[0] == '/')
		snprintf(path, sizeof(path), "%s", opts.log_file);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, opts.log_file);
	log = fopen(path, "w");
	if (!log)
		return;
	fprintf(log, "%s\n", parse_error_line());
	fclose(log);
}

int main(int argc, char **argv)
{
	const struct command *cmd = NULL;
	int first, nr_args;

	register_kinds();
	first = parse_options(argc, argv);
	if (first < 0) {
		log_parse_error();
		return 1;
	}
	if (first >= argc) {
		fprintf(stderr, "Error: no command given (dump, restore, check, show); see criu --help\n");
		return 1;
	}
	for (size_t i = 0; i < NR_COMMANDS; i++)
		if (!strcmp(argv[first], commands[i].name))
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "Error: unknown command '%s' (dump, restore, check, show)\n",
			argv[first]);
		return 1;
	}
	if (!cmd->run) {
		fprintf(stderr, "command %s is not supported\n", cmd->name);
		return 1;
	}
	nr_args = cmd->arg ? 1 : 0;
	if (first + 1 + nr_args < argc) {
		fprintf(stderr, "Error: excessive parameter '%s' for command %s\n",
			argv[first + 1 + nr_args], cmd->name);
		return 1;
	}
	if (first + 1 + nr_args > argc) {
		fprintf(stderr, "Error: %s needs %s: criu %s %s\n", cmd->name, cmd->arg, cmd->name,
			cmd->arg);
		return 1;
	}
	if (prepare_status_fd())
		return 1;
	return cmd->run(argv + first + 1);
}
