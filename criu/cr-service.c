/*
 * CRIU's RPC service (images/rpc.proto): `criu swrk FD` serves the client at the other end
 * of an inherited SOCK_SEQPACKET socket, `criu service` accepts clients on a listening
 * socket and serves each connection in a process of its own. A request's options go
 * through the command line's table (opts_apply()): a client may ask for exactly what the
 * command line may, and is refused with the same line.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cr-check.h"
#include "cr-service.h"
#include "cpuinfo.h"
#include "cr-check.h"
#include "cr_options.h"
#include "daemon.h"
#include "crtools.h"
#include "daemon.h"
#include "image.h"
#include "log.h"
#include "net-lock.h"
#include "page-server.h"
#include "rpc-wire.h"
#include "sk-unix.h"
#include "version.h"

/* CRIU's default address of `criu service`. */
#define DEFAULT_SERVICE_ADDRESS "/var/run/criu_service.socket"
/* CRIU's log file of a request that names none, in its work directory. */
#define DEFAULT_RPC_LOG "criu.log"

/* The connection this process serves. */
static struct {
	int sk;
	pid_t pid;    /* the client, as SO_PEERCRED names it: a dump without pid dumps it */
	bool swrk;    /* criu swrk: the client's child, its descriptors inherited */
	int cr_errno; /* the errno the answer carries (0: none) */
} client = {.sk = -1};

/* What a request needs of the images and work directories and of the log. */
enum req_kind {
	RK_DUMP,    /* dump and pre-dump: the images directory needed, the log in the work dir */
	RK_RESTORE, /* the same; evasive_devices is no option here */
	RK_PAGE_SERVER, /* the same: the pages go to the images directory */
	RK_CHECK,	/* no directory needed; a log only where the client names one */
};

static void set_errno(int err)
{
	if (!client.cr_errno)
		client.cr_errno = err;
}

/* The request's errno: the service's own, else what the pipeline said (log_set_errno()). */
static int request_errno(void)
{
	return client.cr_errno ?: log_get_errno();
}

/* The failure part of an answer: the first error line of the request and its errno. */
static void fill_error(CriuResp *resp)
{
	const char *msg = log_first_error();

	if (!*msg)
		msg = parse_error_line();
	if (*msg)
		resp->cr_errmsg = (char *)msg;
	if (request_errno()) {
		resp->has_cr_errno = true;
		resp->cr_errno = request_errno();
	}
}

static int send_resp(CriuResp *resp)
{
	int ret = rpc_send_resp(client.sk, resp, -1);

	if (ret)
		pr_warn("cannot send the answer to the client: %s\n", strerror(-ret));
	return ret;
}

/* An answer that carries only success or the failure. */
static int answer(CriuReqType type, bool success)
{
	CriuResp resp = CRIU_RESP__INIT;

	resp.type = type;
	resp.success = success;
	if (!success)
		fill_error(&resp);
	return send_resp(&resp);
}

/* A request refused before it started: the reason logged and answered as type. -1. */
static int refuse_request(CriuReqType type, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int refuse_request(CriuReqType type, int err, const char *fmt, ...)
{
	char line[512];
	va_list args;

	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	set_errno(err);
	pr_err("%s", line);
	answer(type, false);
	return -1;
}

/* ------------------------------------------------------------ options ---- */

/* The request's options as the command line would spell them, logged once the log is open. */
static char applied[4096];

static int apply(const char *name, const char *arg)
{
	size_t len = strlen(applied);

	snprintf(applied + len, sizeof(applied) - len, " --%s%s%s", name, arg ? " " : "",
		 arg ?: "");
	if (opts_apply(name, arg)) {
		set_errno(EBADRQC);
		return -1;
	}
	return 0;
}

/* cpu_cap holds CRIU's CPU_CAP_* bits: given as the words --cpu-cap takes, exactly them. */
static int apply_cpu_cap(uint32_t bits)
{
	char words[32] = "none";

	if (bits & CPU_CAP_FPU)
		strcat(words, ",fpu");
	if (bits & CPU_CAP_CPU)
		strcat(words, ",cpu");
	if (bits & CPU_CAP_INS)
		strcat(words, ",ins");
	return apply("cpu-cap", words);
}

static int applyf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int applyf(const char *name, const char *fmt, ...)
{
	va_list args;
	char *arg;
	int n;

	va_start(args, fmt);
	n = vasprintf(&arg, fmt, args);
	va_end(args);
	if (n < 0) {
		pr_err("out of memory\n");
		return -1;
	}
	/* Kept: the options refer to their arguments for the whole run, as to argv. */
	return apply(name, arg);
}

/*
 * A bool field the client set, of an option with a --no-NAME form: true is --NAME, false
 * --no-NAME (a configuration file may have said --NAME).
 */
static int apply_flag(protobuf_c_boolean has, protobuf_c_boolean val, const char *name)
{
	char no[64];

	if (!has)
		return 0;
	if (val)
		return apply(name, NULL);
	snprintf(no, sizeof(no), "no-%s", name);
	return apply(no, NULL);
}

/* The same for an option without a --no-NAME form: false is its default. */
static int apply_switch(protobuf_c_boolean has, protobuf_c_boolean val, const char *name)
{
	return has && val ? apply(name, NULL) : 0;
}

/* A descriptor of the client's, reached through /proc (as CRIU reaches it). */
static char *client_fd_path(int fd)
{
	char *path;

	if (asprintf(&path, "/proc/%d/fd/%d", client.pid, fd) < 0)
		return NULL;
	return path;
}

/*
 * A directory of the client's by the name it has in criu's mount namespace, where that
 * name is the same directory: restored tasks reach the work directory by name (the
 * lazy-pages socket), and /proc/PID/ of the client is not theirs to see. Else /proc's.
 */
static char *client_dir_path(int fd)
{
	char *proc = client_fd_path(fd), real[PATH_MAX];
	struct stat by_fd, by_name;
	ssize_t n;

	if (!proc)
		return NULL;
	n = readlink(proc, real, sizeof(real) - 1);
	if (n <= 0 || stat(proc, &by_fd))
		return proc;
	real[n] = '\0';
	if (real[0] != '/' || stat(real, &by_name) || by_name.st_dev != by_fd.st_dev ||
	    by_name.st_ino != by_fd.st_ino)
		return proc;
	free(proc);
	return strdup(real);
}

static const char *cg_mode_name(CriuCgMode mode)
{
	switch (mode) {
	case CRIU_CG_MODE__IGNORE:
		return "ignore";
	case CRIU_CG_MODE__CG_NONE:
		return "none";
	case CRIU_CG_MODE__PROPS:
		return "props";
	case CRIU_CG_MODE__SOFT:
	case CRIU_CG_MODE__DEFAULT: /* CRIU's default mode is soft, as this criu's */
		return "soft";
	case CRIU_CG_MODE__FULL:
		return "full";
	case CRIU_CG_MODE__STRICT:
		return "strict";
	default:
		return NULL;
	}
}

/*
 * The flags of CriuOpts, each the twin of a command-line option. evasive_devices changes
 * only what a dump accepts (a device path naming another inode of the same device number),
 * so on a restore, where runc always sets it, it is no option at all, as with CRIU.
 */
static int apply_flags(const CriuOpts *o, enum req_kind kind)
{
	bool evasive = o->has_evasive_devices && kind != RK_RESTORE;

	return apply_switch(o->has_leave_running, o->leave_running, "leave-running") ?:
	       apply_switch(o->has_leave_stopped, o->leave_stopped, "leave-stopped") ?:
	       apply_switch(o->has_ext_unix_sk, o->ext_unix_sk, "ext-unix-sk") ?:
	       apply_flag(o->has_tcp_established, o->tcp_established, "tcp-established") ?:
	       apply_flag(o->has_tcp_close, o->tcp_close, "tcp-close") ?:
	       apply_flag(o->has_tcp_skip_in_flight, o->tcp_skip_in_flight, "skip-in-flight") ?:
	       apply_flag(evasive, o->evasive_devices, "evasive-devices") ?:
	       apply_flag(o->has_shell_job, o->shell_job, "shell-job") ?:
	       apply_flag(o->has_file_locks, o->file_locks, "file-locks") ?:
	       apply_flag(o->has_track_mem, o->track_mem, "track-mem") ?:
	       apply_flag(o->has_auto_dedup, o->auto_dedup, "auto-dedup") ?:
	       apply_flag(o->has_link_remap, o->link_remap, "link-remap") ?:
	       apply_flag(o->has_force_irmap, o->force_irmap, "force-irmap") ?:
	       apply_flag(o->has_weak_sysctls, o->weak_sysctls, "weak-sysctls") ?:
	       apply_flag(o->has_mntns_compat_mode, o->mntns_compat_mode, "mntns-compat-mode") ?:
	       apply_flag(o->has_skip_file_rwx_check, o->skip_file_rwx_check,
			  "skip-file-rwx-check") ?:
	       apply_flag(o->has_unprivileged, o->unprivileged, "unprivileged") ?:
	       apply_flag(o->has_display_stats, o->display_stats, "display-stats") ?:
	       apply_flag(o->has_tls, o->tls, "tls") ?:
	       apply_switch(o->has_tls_no_cn_verify, o->tls_no_cn_verify, "tls-no-cn-verify") ?:
	       apply_switch(o->has_lazy_pages, o->lazy_pages, "lazy-pages") ?:
	       apply_switch(o->has_ext_sharing, o->ext_sharing, "enable-external-sharing") ?:
	       apply_switch(o->has_ext_masters, o->ext_masters, "enable-external-masters");
}

static int apply_strings(const char *name, char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (apply(name, list[i]))
			return -1;
	return 0;
}

/* The lists and values of CriuOpts. */
static int apply_values(const CriuOpts *o)
{
	size_t i;

	if (o->root && apply("root", o->root))
		return -1;
	if (o->parent_img && apply("prev-images-dir", o->parent_img))
		return -1;
	if (o->freeze_cgroup && apply("freeze-cgroup", o->freeze_cgroup))
		return -1;
	if (o->cgroup_yard && apply("cgroup-yard", o->cgroup_yard))
		return -1;
	if (o->cgroup_props && apply("cgroup-props", o->cgroup_props))
		return -1;
	if (o->cgroup_props_file && apply("cgroup-props-file", o->cgroup_props_file))
		return -1;
	if (o->lsm_profile && apply("lsm-profile", o->lsm_profile))
		return -1;
	if (o->lsm_mount_context && apply("lsm-mount-context", o->lsm_mount_context))
		return -1;
	if ((o->tls_cacert && apply("tls-cacert", o->tls_cacert)) ||
	    (o->tls_cacrl && apply("tls-cacrl", o->tls_cacrl)) ||
	    (o->tls_cert && apply("tls-cert", o->tls_cert)) ||
	    (o->tls_key && apply("tls-key", o->tls_key)))
		return -1;
	if (o->has_timeout && applyf("timeout", "%u", o->timeout))
		return -1;
	if (o->has_ghost_limit && applyf("ghost-limit", "%u", o->ghost_limit))
		return -1;
	if (o->has_auto_ext_mnt && o->auto_ext_mnt && apply("ext-mount-map", "auto"))
		return -1;
	if (o->has_cpu_cap && apply_cpu_cap(o->cpu_cap))
		return -1;
	if (o->n_exec_cmd && apply("exec-cmd", NULL))
		return -1;
	for (i = 0; i < o->n_unix_sk_ino; i++)
		if (applyf("ext-unix-sk", "%u", o->unix_sk_ino[i]->inode))
			return -1;
	for (i = 0; i < o->n_veths; i++)
		if (applyf("veth-pair", "%s=%s", o->veths[i]->if_in, o->veths[i]->if_out))
			return -1;
	for (i = 0; i < o->n_ext_mnt; i++)
		if (applyf("ext-mount-map", "%s:%s", o->ext_mnt[i]->key, o->ext_mnt[i]->val))
			return -1;
	for (i = 0; i < o->n_join_ns; i++) {
		const JoinNamespace *j = o->join_ns[i];

		if (applyf("join-ns", "%s:%s%s%s", j->ns, j->ns_file, j->extra_opt ? "," : "",
			   j->extra_opt ?: ""))
			return -1;
	}
	for (i = 0; i < o->n_cg_root; i++) {
		const CgroupRoot *r = o->cg_root[i];
		/* An empty controller (runc sends one) is every controller, as none is. */
		bool ctrl = r->ctrl && *r->ctrl;

		if (applyf("cgroup-root", "%s%s%s", ctrl ? r->ctrl : "", ctrl ? ":" : "", r->path))
			return -1;
	}
	if (apply_strings("external", o->external, o->n_external) ||
	    apply_strings("skip-mnt", o->skip_mnt, o->n_skip_mnt) ||
	    apply_strings("enable-fs", o->enable_fs, o->n_enable_fs) ||
	    apply_strings("irmap-scan-path", o->irmap_scan_paths, o->n_irmap_scan_paths) ||
	    apply_strings("cgroup-dump-controller", o->cgroup_dump_controller,
			  o->n_cgroup_dump_controller))
		return -1;
	if (o->has_empty_ns && o->empty_ns) {
		if (o->empty_ns & ~CLONE_NEWNET)
			return applyf("empty-ns", "%#x", o->empty_ns);
		if (apply("empty-ns", "net"))
			return -1;
	}
	if (o->has_manage_cgroups && apply("manage-cgroups", o->manage_cgroups ? "soft" : "ignore"))
		return -1;
	if (o->has_manage_cgroups_mode) {
		const char *mode = cg_mode_name(o->manage_cgroups_mode);

		if (mode ? apply("manage-cgroups", mode)
			 : applyf("manage-cgroups", "%d", o->manage_cgroups_mode))
			return -1;
	}
	if (o->has_pre_dump_mode &&
	    apply("pre-dump-mode", o->pre_dump_mode == CRIU_PRE_DUMP_MODE__VM_READ  ? "read"
				   : o->pre_dump_mode == CRIU_PRE_DUMP_MODE__SPLICE ? "splice"
										    : "?"))
		return -1;
	if (o->has_network_lock) {
		static const char *const methods[] = {
			[CRIU_NETWORK_LOCK_METHOD__IPTABLES] = "iptables",
			[CRIU_NETWORK_LOCK_METHOD__NFTABLES] = "nftables",
			[CRIU_NETWORK_LOCK_METHOD__SKIP] = "skip",
		};
		unsigned int m = o->network_lock;

		if (apply("network-lock", m < sizeof(methods) / sizeof(methods[0]) && methods[m]
						  ? methods[m]
						  : "?"))
			return -1;
	}
	return 0;
}

/* Options that only the RPC has, or that name the client's descriptors. */
static int apply_client_only(const CriuOpts *o)
{
	if (o->has_rst_sibling && o->rst_sibling && !client.swrk) {
		pr_err("rst_sibling: the tree would be the service's sibling, not the client's: "
		       "only criu swrk restores as its client's child\n");
		return -1;
	}
	if (apply_flag(o->has_rst_sibling, o->rst_sibling, "restore-sibling"))
		return -1;
	if (o->n_inherit_fd && !client.swrk) {
		pr_err("inherit_fd names descriptors of the client, which only criu swrk "
		       "inherits\n");
		return -1;
	}
	for (size_t i = 0; i < o->n_inherit_fd; i++)
		if (applyf("inherit-fd", "fd[%d]:%s", o->inherit_fd[i]->fd, o->inherit_fd[i]->key))
			return -1;
	if (o->has_pidfd_store_sk) {
		pr_err("pidfd_store_sk is not supported: dumps do not keep pidfds between "
		       "pre-dumps\n");
		return -1;
	}
	if (o->has_status_fd) {
		char *path = client_fd_path(o->status_fd);
		int fd = path ? open(path, O_WRONLY | O_CLOEXEC) : -1;

		if (fd < 0) {
			pr_perror("status_fd %d: cannot open %s", o->status_fd, path ?: "");
			free(path);
			return -1;
		}
		free(path);
		opts.status_fd = fd;
	}
	/* RPC only (no command-line option, as with CRIU): a new pty for the client (tty.c). */
	if (o->has_orphan_pts_master)
		opts.orphan_pts_master = o->orphan_pts_master;
	return 0;
}

/* The page server's address and port, and whether a dump sends its pages there. */
static int apply_page_server(const CriuOpts *o, enum req_kind kind)
{
	const CriuPageServerInfo *ps = o->ps;

	if (!ps)
		return 0;
	if (ps->has_fd && apply("ps-socket", NULL))
		return -1;
	if (ps->address && apply("address", ps->address))
		return -1;
	/* A page server the client starts may leave the port to the kernel (page-server.c). */
	if (ps->has_port && ps->port && applyf("port", "%d", ps->port))
		return -1;
	if (kind == RK_DUMP && !opts.lazy_pages)
		return apply("page-server", NULL);
	return 0;
}

static int notify_client(enum script_action action, pid_t init_pid, int fd);

/*
 * Every option of the request but its directories and log, then the configuration file it
 * names, which overrides them as CRIU's does.
 */
static int apply_request(const CriuOpts *o, enum req_kind kind)
{
	char *imgs = NULL, *work = NULL;

	if (o->images_dir_fd != -1)
		imgs = client_dir_path(o->images_dir_fd);
	else if (o->images_dir)
		imgs = o->images_dir;
	if (imgs && apply("images-dir", imgs))
		return -1;
	if (o->has_work_dir_fd) {
		work = client_dir_path(o->work_dir_fd);
		if (!work || apply("work-dir", work))
			return -1;
	}
	if (o->log_file && strchr(o->log_file, '/')) {
		set_errno(EBADRQC);
		/* CRIU's words: clients look for them. */
		pr_err("No subdirs are allowed in log_file name (%s): use work_dir_fd\n",
		       o->log_file);
		return -1;
	}
	if (o->log_file && apply("log-file", o->log_file))
		return -1;
	if (o->has_log_to_stderr && o->log_to_stderr && apply("log-file", "-"))
		return -1;
	if (applyf("verbosity", "%d", o->log_level))
		return -1;
	if (o->has_pid && o->pid && applyf("tree", "%d", o->pid))
		return -1;
	if (apply_flags(o, kind) || apply_values(o) || apply_page_server(o, kind) ||
	    apply_client_only(o)) {
		set_errno(EBADRQC);
		return -1;
	}
	if (o->config_file && apply("config", o->config_file))
		return -1;
	if (o->notify_scripts)
		action_scripts_set_notifier(notify_client);
	if (!opts.imgs_dir && kind != RK_CHECK) {
		set_errno(EBADRQC);
		pr_err("the request names no images directory (images_dir_fd or images_dir)\n");
		return -1;
	}
	if (!opts.log_file && kind != RK_CHECK)
		opts.log_file = DEFAULT_RPC_LOG;
	return 0;
}

/* The images and work directories of the request, then its log there. */
static int open_request_dirs(enum req_kind kind)
{
	const char *work = opts.work_dir ?: opts.imgs_dir;
	int work_fd = -1, ret;

	if (opts.imgs_dir) {
		images_dir_fd = open(opts.imgs_dir, O_DIRECTORY | O_PATH | O_CLOEXEC);
		if (images_dir_fd < 0) {
			pr_perror("cannot open the images directory %s", opts.imgs_dir);
			return -1;
		}
	}
	if (work && (opts.log_file || kind != RK_CHECK)) {
		work_fd = open(work, O_DIRECTORY | O_PATH | O_CLOEXEC);
		if (work_fd < 0) {
			pr_perror("cannot open the work directory %s", work);
			return -1;
		}
	} else if (opts.log_file && strcmp(opts.log_file, "-")) {
		pr_err("the log file %s needs the images or the work directory\n", opts.log_file);
		return -1;
	}
	ret = log_init(work_fd, opts.log_file, opts.loglevel);
	if (work_fd >= 0)
		close(work_fd);
	if (ret) {
		pr_err("cannot open the log file %s: %s\n", opts.log_file, strerror(-ret));
		return -1;
	}
	return 0;
}

static int setup_request(const CriuOpts *o, enum req_kind kind)
{
	static const CriuOpts none = CRIU_OPTS__INIT;
	struct stat st;

	/* CRIU's CHECK goes without options. */
	if (!o && kind == RK_CHECK)
		o = &none;
	if (!o) {
		set_errno(EBADRQC);
		pr_err("the request has no options (criu_req.opts)\n");
		return -1;
	}
	applied[0] = '\0';
	if (apply_request(o, kind) || open_request_dirs(kind))
		return -1;
	pr_info("request from pid %d, as options:%s\n", client.pid, applied);
	/* A client dumping itself holds the other end of this socket (sk-unix.h). */
	if (!fstat(client.sk, &st))
		unix_sk_set_service(st.st_ino);
	return 0;
}

/* ------------------------------------------------------------- notify ---- */

/*
 * At each point of dump and restore (action-scripts.h), with notify_scripts: a NOTIFY
 * answer naming the point (with the restored root at setup-namespaces and post-restore,
 * as CRIU sends it), and the client's NOTIFY request, its ack, awaited.
 */
static int notify_client(enum script_action action, pid_t init_pid, int fd)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuNotify cn = CRIU_NOTIFY__INIT;
	const char *name = action_script_name(action);
	CriuReq *ack = NULL;
	int ret;

	cn.script = (char *)name;
	if (init_pid && (action == ACT_SETUP_NS || action == ACT_POST_RESTORE)) {
		cn.has_pid = true;
		cn.pid = init_pid;
	}
	resp.type = CRIU_REQ_TYPE__NOTIFY;
	resp.success = true;
	resp.notify = &cn;
	pr_info("notify the client: %s\n", name);
	ret = rpc_send_resp(client.sk, &resp, fd);
	if (!ret)
		ret = rpc_recv_req(client.sk, &ack);
	if (ret) {
		pr_err("notify %s: the client is gone: %s\n", name,
		       ret > 0 ? "connection closed" : strerror(-ret));
		return -1;
	}
	ret = ack->type == CRIU_REQ_TYPE__NOTIFY && ack->notify_success ? 0 : -1;
	if (ret)
		pr_err("notify %s: the client answered with a failure\n", name);
	criu_req__free_unpacked(ack, NULL);
	return ret;
}

/* ----------------------------------------------------- work in a child ---- */

/*
 * What a request run in a child (check, pre-dump, the page server, a feature check) tells
 * the connection's process: its result, its errno and first error line, and what the
 * request answers with (the page server's pid and port, the features).
 */
struct child_result {
	int ok;
	int cr_errno;
	pid_t pid;
	int port;
	bool features[3];
	char errmsg[512];
};

static int result_fd = -1;

static void send_result(struct child_result *r)
{
	if (result_fd < 0)
		return;
	r->cr_errno = r->cr_errno ?: request_errno();
	if (!r->ok)
		snprintf(r->errmsg, sizeof(r->errmsg), "%s",
			 *log_first_error() ? log_first_error() : parse_error_line());
	if (write(result_fd, r, sizeof(*r)) != sizeof(*r))
		pr_warn("cannot report to the service: %s\n", strerror(errno));
	close(result_fd);
	result_fd = -1;
}

/*
 * Runs fn(arg) in a child; its result read back. wait: the child is waited for (else
 * it goes on, a child of this process: the page server of PAGE_SERVER_CHLD). Returns
 * whether the request succeeded; *r holds what the child said.
 */
static bool run_in_child(int (*fn)(void *arg, struct child_result *r), void *arg, bool wait,
			 struct child_result *r)
{
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	memset(r, 0, sizeof(*r));
	if (pipe2(fds, O_CLOEXEC)) {
		pr_perror("cannot make a pipe for the request's child");
		return false;
	}
	pid = fork();
	if (pid < 0) {
		pr_perror("cannot fork the request's child");
		close(fds[0]);
		close(fds[1]);
		return false;
	}
	if (pid == 0) {
		close(fds[0]);
		result_fd = fds[1];
		r->ok = fn(arg, r) == 0;
		send_result(r);
		exit(r->ok ? 0 : 1);
	}
	close(fds[1]);
	n = read(fds[0], r, sizeof(*r));
	close(fds[0]);
	if (wait)
		waitpid(pid, &status, 0);
	if (n != sizeof(*r)) {
		memset(r, 0, sizeof(*r));
		snprintf(r->errmsg, sizeof(r->errmsg), "the request's process %d died", pid);
		return false;
	}
	return r->ok;
}

/* An answer from what a child said. */
static void fill_child_error(CriuResp *resp, struct child_result *r)
{
	if (r->errmsg[0])
		resp->cr_errmsg = r->errmsg;
	if (r->cr_errno) {
		resp->has_cr_errno = true;
		resp->cr_errno = r->cr_errno;
	}
}

static int answer_child(CriuReqType type, bool ok, struct child_result *r)
{
	CriuResp resp = CRIU_RESP__INIT;

	resp.type = type;
	resp.success = ok;
	if (!ok)
		fill_child_error(&resp, r);
	return send_resp(&resp);
}

/* Output on the client's stdout (swrk inherits it) would not be the client's. */
static void quiet_stdio(bool err_too)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0)
		return;
	dup2(null, STDOUT_FILENO);
	if (err_too)
		dup2(null, STDERR_FILENO);
	close(null);
}

/* ------------------------------------------------------- the requests ---- */

/* Whether criu is pid or one of its descendants: dumping it would freeze criu itself. */
static bool criu_in_tree(pid_t pid)
{
	pid_t p = getpid();

	while (p > 1) {
		char path[64], buf[512], *close_paren;
		FILE *f;
		int ppid;

		if (p == pid)
			return true;
		snprintf(path, sizeof(path), "/proc/%d/stat", p);
		f = fopen(path, "r");
		if (!f)
			return false;
		if (!fgets(buf, sizeof(buf), f)) {
			fclose(f);
			return false;
		}
		fclose(f);
		close_paren = strrchr(buf, ')');
		if (!close_paren || sscanf(close_paren + 2, "%*c %d", &ppid) != 1)
			return false;
		p = ppid;
	}
	return false;
}

/* What `criu dump` and `criu pre-dump` check before touching the tree. */
static int check_dump(const char *command)
{
	pid_t pid = opts.tree_pid;

	if (opts.lazy_pages && strcmp(command, "dump")) {
		pr_err("%s: lazy_pages is for dump only\n", command);
		set_errno(EBADRQC);
		return -1;
	}
	if (opts.lazy_pages && !opts.ps_port) {
		pr_err("%s: lazy_pages needs ps.port to serve the pages on\n", command);
		set_errno(EBADRQC);
		return -1;
	}
	if (opts.use_page_server && (!opts.ps_address || !opts.ps_port)) {
		pr_err("%s: ps needs the page server's address and port\n", command);
		set_errno(EBADRQC);
		return -1;
	}
	if (kill(pid, 0) && errno == ESRCH) {
		set_errno(ESRCH);
		pr_err("%s: no process with pid %d\n", command, pid);
		return -1;
	}
	if (criu_in_tree(pid)) {
		set_errno(EBADRQC);
		/* CRIU's words: clients look for them. */
		pr_err("The criu itself is within dumped tree: %s of pid %d, an ancestor of "
		       "criu (pid %d)\n",
		       command, pid, getpid());
		return -1;
	}
	return 0;
}

/* DUMP, in this process: the connection serves nothing after it. */
static int serve_dump(CriuReq *req)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuDumpResp dr = CRIU_DUMP_RESP__INIT;
	bool self = !(req->opts && req->opts->has_pid && req->opts->pid);
	int ret = -1;

	if (setup_request(req->opts, RK_DUMP))
		goto out;
	if (!opts.tree_pid)
		opts.tree_pid = client.pid;
	if (check_dump("dump"))
		goto out;
	pr_info("dump of pid %d for the RPC client %d\n", opts.tree_pid, client.pid);
	ret = cr_dump_tasks(opts.tree_pid);
	if (!ret)
		report_status_ready();
out:
	pr_info("dump %s\n", ret ? "failed" : "done");
	/* A client that dumped itself and was killed hears the answer once restored. */
	if (!ret && self && !opts.leave_running && !opts.leave_stopped)
		return 0;
	resp.type = CRIU_REQ_TYPE__DUMP;
	resp.success = !ret;
	dr.has_restored = true;
	dr.restored = false;
	resp.dump = &dr;
	if (ret)
		fill_error(&resp);
	return send_resp(&resp) || ret ? -1 : 0;
}

/* RESTORE, in this process, detached: the tree is its child (or the client's, rst_sibling). */
static int serve_restore(CriuReq *req)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuRestoreResp rr = CRIU_RESTORE_RESP__INIT;
	int ret = -1;

	if (!setup_request(req->opts, RK_RESTORE)) {
		opts.restore_detach = true;
		ret = cr_restore_tasks();
		if (ret)
			netlock_restore_failed();
		else
			report_status_ready();
	}
	pr_info("restore %s\n", ret ? "failed" : "done");
	resp.type = CRIU_REQ_TYPE__RESTORE;
	resp.success = !ret;
	rr.pid = ret ? -1 : cr_restore_root_pid();
	resp.restore = &rr;
	if (ret)
		fill_error(&resp);
	return send_resp(&resp) || ret ? -1 : 0;
}

static int check_child(void *arg, struct child_result *r)
{
	struct check_request creq = {0};

	(void)r;
	if (setup_request(arg, RK_CHECK))
		return -1;
	quiet_stdio(false);
	return cr_check(&creq);
}

static int serve_check(CriuReq *req)
{
	struct child_result r;
	bool ok = run_in_child(check_child, req->opts, true, &r);

	return answer_child(CRIU_REQ_TYPE__CHECK, ok, &r) || !ok ? -1 : 0;
}

static int pre_dump_child(void *arg, struct child_result *r)
{
	(void)r;
	if (setup_request(arg, RK_DUMP))
		return -1;
	if (!opts.tree_pid)
		opts.tree_pid = client.pid;
	if (check_dump("pre-dump"))
		return -1;
	return cr_pre_dump_tasks(opts.tree_pid);
}

static int serve_pre_dump(CriuReq *req, CriuReqType type)
{
	struct child_result r;
	bool ok = run_in_child(pre_dump_child, req->opts, true, &r);

	return answer_child(type, ok, &r) || !ok ? -1 : 0;
}

/*
 * PRE_DUMP: the client may send more PRE_DUMPs on the connection, then the DUMP that
 * ends the series (CRIU's sequence, whatever keep_open says).
 */
static int serve_pre_dump_series(CriuReq *req)
{
	int ret;

	for (;;) {
		ret = serve_pre_dump(req, CRIU_REQ_TYPE__PRE_DUMP);
		criu_req__free_unpacked(req, NULL);
		if (ret)
			return ret;
		ret = rpc_recv_req(client.sk, &req);
		if (ret)
			return ret > 0 ? 0 : -1;
		if (req->type != CRIU_REQ_TYPE__PRE_DUMP)
			break;
	}
	if (req->type != CRIU_REQ_TYPE__DUMP) {
		ret = refuse_request(
			CRIU_REQ_TYPE__EMPTY, EBADRQC,
			"after PRE_DUMP only PRE_DUMP or DUMP may come, not %s\n",
			protobuf_c_enum_descriptor_get_value(&criu_req_type__descriptor, req->type)
				? protobuf_c_enum_descriptor_get_value(&criu_req_type__descriptor,
								       req->type)
					  ->name
				: "an unknown type");
		criu_req__free_unpacked(req, NULL);
		return ret;
	}
	ret = serve_dump(req);
	criu_req__free_unpacked(req, NULL);
	return ret;
}

/* The page server's own report, once it listens: its pid and port (action-scripts.h). */
static int page_server_ready(enum script_action action, pid_t init_pid, int fd)
{
	struct child_result r = {.ok = 1, .pid = getpid(), .port = opts.ps_port};

	(void)init_pid;
	(void)fd;
	if (action == ACT_STATUS_READY)
		send_result(&r);
	return 0;
}

static int page_server_child(void *arg, struct child_result *r)
{
	CriuReq *req = arg;

	(void)r;
	if (setup_request(req->opts, RK_PAGE_SERVER))
		return -1;
	/*
	 * No notifications from the page server: the client waits for this answer; nor does
	 * the server keep the connection, whose end the client must see when it is served.
	 */
	action_scripts_set_notifier(page_server_ready);
	close(client.sk);
	client.sk = -1;
	/* PAGE_SERVER: a daemon (daemonize() forks, setsid); _CHLD: this child serves. */
	opts.restore_detach = req->type == CRIU_REQ_TYPE__PAGE_SERVER;
	opts.pidfile = NULL;
	return cr_page_server();
}

static int serve_page_server(CriuReq *req)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuPageServerInfo ps = CRIU_PAGE_SERVER_INFO__INIT;
	struct child_result r;
	bool daemon = req->type == CRIU_REQ_TYPE__PAGE_SERVER;
	bool ok = run_in_child(page_server_child, req, daemon, &r);

	resp.type = req->type;
	resp.success = ok;
	if (ok) {
		ps.has_pid = ps.has_port = true;
		ps.pid = r.pid;
		ps.port = r.port;
		resp.ps = &ps;
	} else {
		fill_child_error(&resp, &r);
	}
	return send_resp(&resp) || !ok ? -1 : 0;
}

static int feature_child(void *arg, struct child_result *r)
{
	static const char *const names[] = {"mem_dirty_track", "uffd-noncoop", NULL};
	const CriuFeatures *want = arg;
	bool asked[] = {want->has_mem_track && want->mem_track,
			want->has_lazy_pages && want->lazy_pages};

	quiet_stdio(true);
	log_init(-1, NULL, LOG_ERROR);
	for (int i = 0; names[i]; i++) {
		struct check_request creq = {.feature = names[i]};

		r->features[i] = asked[i] && cr_check(&creq) == 0;
	}
	/* pidfd_store: pidfds kept between pre-dumps (pidfd_store_sk), which is refused. */
	r->features[2] = false;
	return 0;
}

static int serve_feature_check(CriuReq *req)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuFeatures feat = CRIU_FEATURES__INIT;
	CriuFeatures none = CRIU_FEATURES__INIT;
	struct child_result r;
	bool ok = run_in_child(feature_child, req->features ?: &none, true, &r);

	feat.has_mem_track = feat.has_lazy_pages = feat.has_pidfd_store = true;
	feat.mem_track = r.features[0];
	feat.lazy_pages = r.features[1];
	feat.pidfd_store = r.features[2];
	resp.type = CRIU_REQ_TYPE__FEATURE_CHECK;
	resp.success = ok;
	if (ok)
		resp.features = &feat;
	else
		fill_child_error(&resp, &r);
	return send_resp(&resp) || !ok ? -1 : 0;
}

static int serve_version(void)
{
	CriuResp resp = CRIU_RESP__INIT;
	CriuVersion v = CRIU_VERSION__INIT;

	v.major_number = CRIU_IFACE_MAJOR;
	v.minor_number = CRIU_IFACE_MINOR;
	/* This criu's own version, where CRIU puts its git describe. */
	v.gitid = (char *)CRIU_VERSION;
	resp.type = CRIU_REQ_TYPE__VERSION;
	resp.success = true;
	resp.version = &v;
	return send_resp(&resp);
}

/* WAIT_PID: a child of this process (a PAGE_SERVER_CHLD's page server). */
static int serve_wait_pid(CriuReq *req)
{
	CriuResp resp = CRIU_RESP__INIT;
	int status;

	resp.type = CRIU_REQ_TYPE__WAIT_PID;
	if (waitpid(req->pid, &status, 0) < 0) {
		set_errno(errno);
		pr_perror("WAIT_PID %u", req->pid);
		fill_error(&resp);
	} else {
		resp.success = true;
		resp.has_status = true;
		resp.status = status;
	}
	return send_resp(&resp) || !resp.success ? -1 : 0;
}

/*
 * CPUINFO_DUMP: cpuinfo.img into the request's images directory; CPUINFO_CHECK: this CPU
 * against it, for the request's cpu_cap (none: all, as `criu cpuinfo check`).
 */
static int cpuinfo_child(void *arg, struct child_result *r)
{
	const CriuReq *req = arg;
	bool dump = req->type == CRIU_REQ_TYPE__CPUINFO_DUMP;

	(void)r;
	if (setup_request(req->opts, dump ? RK_PAGE_SERVER : RK_RESTORE))
		return -1;
	if (dump)
		return cpuinfo_dump() ? -1 : 0;
	return cpuinfo_check((opts.cpu_cap & CPU_CAP_ALL) ?: CPU_CAP_ALL) ? -1 : 0;
}

static int serve_cpuinfo(CriuReq *req)
{
	struct child_result r;
	bool ok = run_in_child(cpuinfo_child, req, true, &r);

	return answer_child(req->type, ok, &r) || !ok ? -1 : 0;
}

/*
 * keep_open, as CRIU allows it: after requests that leave this process as it was (they
 * fork, or only answer). A dump or restore changes it for good: the connection ends.
 */
static bool may_keep_open(CriuReqType type)
{
	switch (type) {
	case CRIU_REQ_TYPE__PAGE_SERVER:
	case CRIU_REQ_TYPE__PAGE_SERVER_CHLD:
	case CRIU_REQ_TYPE__CPUINFO_DUMP:
	case CRIU_REQ_TYPE__CPUINFO_CHECK:
	case CRIU_REQ_TYPE__FEATURE_CHECK:
	case CRIU_REQ_TYPE__VERSION:
	case CRIU_REQ_TYPE__WAIT_PID:
		return true;
	default:
		return false;
	}
}

static const char *type_name(int type)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&criu_req_type__descriptor, type);

	return v ? v->name : "unknown";
}

/* One request; 0 when it succeeded, whatever the client then does. */
static int serve_one(CriuReq *req, bool *owned)
{
	pr_info("request %s (%d) from pid %d%s\n", type_name(req->type), req->type, client.pid,
		req->keep_open ? ", keep_open" : "");
	switch (req->type) {
	case CRIU_REQ_TYPE__DUMP:
		return serve_dump(req);
	case CRIU_REQ_TYPE__RESTORE:
		return serve_restore(req);
	case CRIU_REQ_TYPE__CHECK:
		return serve_check(req);
	case CRIU_REQ_TYPE__PRE_DUMP:
		*owned = false; /* the series frees each request */
		return serve_pre_dump_series(req);
	case CRIU_REQ_TYPE__SINGLE_PRE_DUMP:
		return serve_pre_dump(req, CRIU_REQ_TYPE__SINGLE_PRE_DUMP);
	case CRIU_REQ_TYPE__PAGE_SERVER:
	case CRIU_REQ_TYPE__PAGE_SERVER_CHLD:
		return serve_page_server(req);
	case CRIU_REQ_TYPE__FEATURE_CHECK:
		return serve_feature_check(req);
	case CRIU_REQ_TYPE__VERSION:
		return serve_version();
	case CRIU_REQ_TYPE__WAIT_PID:
		return serve_wait_pid(req);
	case CRIU_REQ_TYPE__CPUINFO_DUMP:
	case CRIU_REQ_TYPE__CPUINFO_CHECK:
		return serve_cpuinfo(req);
	default:
		/* EMPTY, NOTIFY out of turn, or a type this criu does not know: CRIU's EMPTY. */
		return refuse_request(CRIU_REQ_TYPE__EMPTY, EBADRQC, "invalid request type %s\n",
				      type_name(req->type));
	}
}

/*
 * The requests of one connection, until one without keep_open (or a failure). 0 when
 * every request succeeded.
 */
static int serve_connection(int sk, bool swrk)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int ret;

	client.sk = sk;
	client.swrk = swrk;
	client.pid = getsockopt(sk, SOL_SOCKET, SO_PEERCRED, &cred, &len) ? 0 : cred.pid;
	for (;;) {
		CriuReq *req = NULL;
		bool owned = true, keep;

		ret = rpc_recv_req(sk, &req);
		if (ret > 0) {
			pr_info("the client closed the connection\n");
			return 0;
		}
		if (ret == -EBADMSG)
			return refuse_request(CRIU_REQ_TYPE__EMPTY, EBADMSG,
					      "%s: the packet is no criu_req (malformed or "
					      "truncated)\n",
					      "bad request");
		if (ret) {
			pr_err("cannot read a request: %s\n", strerror(-ret));
			return -1;
		}
		keep = req->keep_open;
		if (keep && !may_keep_open(req->type)) {
			ret = refuse_request(req->type, EBADRQC,
					     "keep_open is not allowed with %s: the connection "
					     "ends after it\n",
					     type_name(req->type));
			criu_req__free_unpacked(req, NULL);
			return ret;
		}
		ret = serve_one(req, &owned);
		if (owned)
			criu_req__free_unpacked(req, NULL);
		if (ret || !keep)
			return ret;
		/* The next request starts afresh: its errors are its own. */
		log_forget_errors();
		client.cr_errno = 0;
	}
}

/* ------------------------------------------------------- the commands ---- */

int cr_swrk(const char *fd_arg)
{
	char *end;
	long fd = strtol(fd_arg, &end, 10);
	int type;
	socklen_t len = sizeof(type);

	if (*end || end == fd_arg || fd < 0 || fd > INT_MAX ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET) {
		fprintf(stderr, "Error: swrk %s: not a SOCK_SEQPACKET socket's descriptor\n",
			fd_arg);
		return 1;
	}
	/* Scripts and restored tasks do not get the connection. */
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	/* The log of the requests is theirs; until one opens it, errors go to stderr. */
	log_init(-1, NULL, opts.loglevel);
	return serve_connection(fd, true) ? 1 : 0;
}

static void reap_workers(int sig)
{
	int saved = errno;

	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

/*
 * The service's own options are not a request's: a worker starts from the options the
 * command line and configuration files gave, less those of the service itself.
 */
static void forget_service_options(void)
{
	opts.ps_address = NULL;
	opts.work_dir = NULL;
	opts.imgs_dir = NULL;
	opts.log_file = NULL;
	opts.pidfile = NULL;
	opts.status_fd = -1;
	opts.restore_detach = false;
	opts.loglevel = DEFAULT_LOGLEVEL;
}

/* One connection in a process of its own: nothing of it reaches the next one. */
static void start_worker(int listen_sk, int sk)
{
	pid_t pid = fork();

	if (pid < 0) {
		pr_perror("cannot fork a worker for the connection");
		return;
	}
	if (pid == 0) {
		signal(SIGCHLD, SIG_DFL);
		close(listen_sk);
		log_fini();
		log_forget_errors();
		forget_service_options();
		log_init(-1, NULL, opts.loglevel);
		exit(serve_connection(sk, false) ? 1 : 0);
	}
	pr_info("connection served by worker %d\n", pid);
}

static int bind_service(const char *address)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int sk;

	if (strlen(address) >= sizeof(addr.sun_path)) {
		pr_err("--address %s: too long for a socket's name\n", address);
		return -1;
	}
	strcpy(addr.sun_path, address);
	sk = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sk < 0) {
		pr_perror("cannot make the service socket");
		return -1;
	}
	unlink(address);
	/* Anyone may connect, as to CRIU's; the request is checked, not the caller. */
	if (bind(sk, (struct sockaddr *)&addr, sizeof(addr)) || chmod(address, 0666) ||
	    listen(sk, 16)) {
		pr_perror("cannot listen on %s", address);
		close(sk);
		return -1;
	}
	pr_info("the service listens on %s\n", address);
	return sk;
}

int cr_service(void)
{
	const char *address = opts.ps_address ?: DEFAULT_SERVICE_ADDRESS;
	struct sigaction sa = {.sa_handler = reap_workers, .sa_flags = SA_RESTART};
	int sk;

	/* -W: the address, the log and the pidfile are relative to it. */
	if (opts.work_dir && chdir(opts.work_dir)) {
		fprintf(stderr, "Error: cannot enter the work directory %s: %s\n", opts.work_dir,
			strerror(errno));
		return 1;
	}
	if (log_init(AT_FDCWD, opts.log_file, opts.loglevel))
		return 1;
	sk = bind_service(address);
	if (sk < 0)
		return 1;
	if (daemonize()) {
		close(sk);
		return 1;
	}
	if (opts.restore_detach)
		quiet_stdio(true);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	report_status_ready();
	for (;;) {
		int conn = accept4(sk, NULL, NULL, SOCK_CLOEXEC);

		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			pr_perror("the service cannot accept a connection");
			close(sk);
			return 1;
		}
		start_worker(sk, conn);
		close(conn);
	}
}
