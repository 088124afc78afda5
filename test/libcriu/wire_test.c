/*
 * libcriu on the wire, against a fake criu (a thread on the other end of a socket pair the
 * library gets as CRIU_COMM_FD): every option lands in its field of the request, the
 * notifications are acked (and the fd of "orphan-pts-master" kept), and each kind of
 * answer becomes the return value and errno CRIU's libcriu gives. No criu is run.
 *
 *   wire_test     (one line per check, "ok NAME" or "FAIL NAME: why"; exit: failures)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "criu.h"
#include "verdict.h"


/* ---- the fake criu -------------------------------------------------------------------- */

/* What the fake criu does with one request; filled by the test before the call. */
struct script {
	int nr_answers;
	CriuResp *answers[4]; /* sent in turn, an ack awaited between two */
	int pass_fd;	      /* sent with answers[0] (SCM_RIGHTS) if >= 0 */
	bool hang_up;	      /* close the connection instead of answering */
	CriuReq *request;     /* what came */
	bool acks[4];	      /* the notify_success of each ack */
	int nr_acks;
};

/* The socket pair: the library's end (its CRIU_COMM_FD socket) and the fake criu's. */
static int lib_end = -1, criu_end = -1;
static struct script *script;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn = PTHREAD_COND_INITIALIZER;
static bool done;

static CriuReq *recv_req(int sk)
{
	uint8_t buf[65536];
	ssize_t n = recv(sk, buf, sizeof(buf), 0);

	return n > 0 ? criu_req__unpack(NULL, n, buf) : NULL;
}

static void send_resp(int sk, CriuResp *resp, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	uint8_t buf[4096];
	struct iovec iov = {buf, criu_resp__pack(resp, buf)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *cmsg;

		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &fd, sizeof(fd));
	}
	if (sendmsg(sk, &msg, 0) < 0)
		perror("fake criu: sendmsg");
}

/* Serves one script per request, in step with the test (run_script()). */
static void *fake_criu(void *arg)
{
	(void)arg;
	for (;;) {
		struct script *s;
		int i;

		pthread_mutex_lock(&lock);
		while (!script && !done)
			pthread_cond_wait(&turn, &lock);
		s = script;
		pthread_mutex_unlock(&lock);
		if (!s)
			return NULL;

		s->request = recv_req(criu_end);
		if (s->hang_up) {
			close(criu_end);
			criu_end = -1;
		} else {
			for (i = 0; i < s->nr_answers; i++) {
				CriuReq *ack;

				send_resp(criu_end, s->answers[i], i == 0 ? s->pass_fd : -1);
				if (s->answers[i]->type != CRIU_REQ_TYPE__NOTIFY)
					break;
				ack = recv_req(criu_end);
				if (!ack || ack->type != CRIU_REQ_TYPE__NOTIFY)
					break;
				s->acks[s->nr_acks++] =
					ack->has_notify_success && ack->notify_success;
				criu_req__free_unpacked(ack, NULL);
				if (!s->acks[s->nr_acks - 1])
					break; /* refused: criu gives up, as the real one */
			}
		}
		pthread_mutex_lock(&lock);
		script = NULL;
		pthread_cond_broadcast(&turn);
		pthread_mutex_unlock(&lock);
	}
}

/* Hands s to the fake criu; the library call follows, then finish_script(). */
static void run_script(struct script *s)
{
	pthread_mutex_lock(&lock);
	script = s;
	pthread_cond_broadcast(&turn);
	pthread_mutex_unlock(&lock);
}

static void finish_script(void)
{
	pthread_mutex_lock(&lock);
	while (script)
		pthread_cond_wait(&turn, &lock);
	pthread_mutex_unlock(&lock);
}

static CriuResp *answer(CriuReqType type, bool success)
{
	CriuResp *resp = calloc(1, sizeof(*resp));

	criu_resp__init(resp);
	resp->type = type;
	resp->success = success;
	return resp;
}

static CriuResp *notification(const char *action, int pid)
{
	CriuResp *resp = answer(CRIU_REQ_TYPE__NOTIFY, true);

	resp->notify = calloc(1, sizeof(*resp->notify));
	criu_notify__init(resp->notify);
	resp->notify->script = strdup(action);
	resp->notify->has_pid = pid != 0;
	resp->notify->pid = pid;
	return resp;
}

static void free_script(struct script *s)
{
	int i;

	for (i = 0; i < s->nr_answers; i++)
		criu_resp__free_unpacked(s->answers[i], NULL);
	if (s->request)
		criu_req__free_unpacked(s->request, NULL);
	memset(s, 0, sizeof(*s));
	s->pass_fd = -1;
}

/* ---- the checks ------------------------------------------------------------------------ */

#define EXPECT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			result("options", "%s", #cond);                                            \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* Every setter of the global object, then the request it sends, field by field. */
static void check_options(void)
{
	struct script s = {.pass_fd = -1};
	char *argv[] = {"sh", "-c", "true"};
	CriuOpts *o;
	int ret;

	criu_init_opts();
	criu_set_service_fd(lib_end);
	criu_set_pid(4321);
	criu_set_images_dir_fd(17);
	criu_set_parent_images("../parent");
	criu_set_work_dir_fd(18);
	criu_set_leave_running(true);
	criu_set_ext_unix_sk(true);
	criu_add_unix_sk(777);
	criu_set_tcp_established(true);
	criu_set_tcp_skip_in_flight(true);
	criu_set_tcp_close(false);
	criu_set_weak_sysctls(true);
	criu_set_evasive_devices(true);
	criu_set_shell_job(true);
	criu_set_skip_file_rwx_check(true);
	criu_set_unprivileged(true);
	criu_set_orphan_pts_master(true);
	criu_set_file_locks(true);
	criu_set_track_mem(true);
	criu_set_auto_dedup(true);
	criu_set_force_irmap(true);
	criu_set_link_remap(true);
	criu_set_log_level(CRIU_LOG_INFO);
	criu_set_log_file("x.log");
	criu_set_cpu_cap(5);
	criu_set_root("/root-dir");
	criu_set_manage_cgroups(true);
	criu_set_manage_cgroups_mode(CRIU_CG_MODE_SOFT);
	criu_set_freeze_cgroup("/freezer/x");
	criu_set_lsm_profile("apparmor:p");
	criu_set_lsm_mount_context("ctx");
	criu_set_timeout(9);
	criu_set_auto_ext_mnt(true);
	criu_set_ext_sharing(true);
	criu_set_ext_masters(false);
	criu_set_exec_cmd(3, argv);
	criu_add_ext_mount("/mnt/a", "a");
	criu_add_veth_pair("in0", "out0");
	criu_add_cg_root(NULL, "/cg");
	criu_add_cg_root("cpu", "/cgcpu");
	criu_add_enable_fs("nfs");
	criu_add_skip_mnt("/skip");
	criu_set_ghost_limit(1234);
	criu_add_irmap_path("/irmap");
	criu_add_cg_props("props");
	criu_add_cg_props_file("/props.yaml");
	criu_add_cg_dump_controller("memory");
	criu_add_cg_yard("/yard");
	criu_add_external("mnt[a]:b");
	criu_add_external("tty[1:2]:t");
	criu_set_page_server_address_port("127.0.0.1", 2222);
	criu_set_pre_dump_mode(CRIU_PRE_DUMP_READ);
	criu_set_pidfd_store_sk(19);
	criu_set_network_lock(CRIU_NETWORK_LOCK_NFTABLES);
	criu_join_ns_add("net", "/proc/1/ns/net", NULL);
	criu_join_ns_add("uts", "/proc/1/ns/uts", "extra");
	criu_set_mntns_compat_mode(true);
	criu_set_config_file("/criu.conf");
	criu_set_empty_ns(0x40000000);
	/* refused values leave the option as it was */
	if (criu_set_pre_dump_mode(7) != -1 || criu_set_network_lock(9) != -1 ||
	    criu_join_ns_add(NULL, "f", NULL) != -1 || criu_add_inherit_fd(3, "k") != -1) {
		result("options", "a refused value was taken");
		return;
	}

	s.nr_answers = 1;
	s.answers[0] = answer(CRIU_REQ_TYPE__CHECK, true);
	run_script(&s);
	ret = criu_check();
	finish_script();
	if (ret || !s.request || !s.request->opts) {
		result("options", "criu_check() = %d, request %p", ret, (void *)s.request);
		free_script(&s);
		return;
	}
	o = s.request->opts;
	EXPECT(s.request->type == CRIU_REQ_TYPE__CHECK);
	EXPECT(o->has_pid && o->pid == 4321);
	EXPECT(o->images_dir_fd == 17);
	EXPECT(!strcmp(o->parent_img, "../parent"));
	EXPECT(o->has_work_dir_fd && o->work_dir_fd == 18);
	EXPECT(o->has_leave_running && o->leave_running);
	EXPECT(o->has_ext_unix_sk && o->ext_unix_sk);
	EXPECT(o->n_unix_sk_ino == 1 && o->unix_sk_ino[0]->inode == 777);
	EXPECT(o->has_tcp_established && o->tcp_established);
	EXPECT(o->has_tcp_skip_in_flight && o->tcp_skip_in_flight);
	EXPECT(o->has_tcp_close && !o->tcp_close);
	EXPECT(o->has_weak_sysctls && o->weak_sysctls);
	EXPECT(o->has_evasive_devices && o->evasive_devices);
	EXPECT(o->has_shell_job && o->shell_job);
	EXPECT(o->has_skip_file_rwx_check && o->skip_file_rwx_check);
	EXPECT(o->has_unprivileged && o->unprivileged);
	EXPECT(o->has_orphan_pts_master && o->orphan_pts_master);
	EXPECT(o->has_file_locks && o->file_locks);
	EXPECT(o->has_track_mem && o->track_mem);
	EXPECT(o->has_auto_dedup && o->auto_dedup);
	EXPECT(o->has_force_irmap && o->force_irmap);
	EXPECT(o->has_link_remap && o->link_remap);
	EXPECT(o->has_log_level && o->log_level == CRIU_LOG_INFO);
	EXPECT(!strcmp(o->log_file, "x.log"));
	EXPECT(o->has_cpu_cap && o->cpu_cap == 5);
	EXPECT(!strcmp(o->root, "/root-dir"));
	EXPECT(o->has_manage_cgroups && o->manage_cgroups);
	EXPECT(o->has_manage_cgroups_mode && o->manage_cgroups_mode == CRIU_CG_MODE__SOFT);
	EXPECT(!strcmp(o->freeze_cgroup, "/freezer/x"));
	EXPECT(!strcmp(o->lsm_profile, "apparmor:p"));
	EXPECT(!strcmp(o->lsm_mount_context, "ctx"));
	EXPECT(o->has_timeout && o->timeout == 9);
	EXPECT(o->has_auto_ext_mnt && o->auto_ext_mnt);
	EXPECT(o->has_ext_sharing && o->ext_sharing);
	EXPECT(o->has_ext_masters && !o->ext_masters);
	EXPECT(o->n_exec_cmd == 3 && !strcmp(o->exec_cmd[2], "true"));
	EXPECT(o->n_ext_mnt == 1 && !strcmp(o->ext_mnt[0]->key, "/mnt/a") &&
	       !strcmp(o->ext_mnt[0]->val, "a"));
	EXPECT(o->n_veths == 1 && !strcmp(o->veths[0]->if_in, "in0") &&
	       !strcmp(o->veths[0]->if_out, "out0"));
	EXPECT(o->n_cg_root == 2 && !o->cg_root[0]->ctrl && !strcmp(o->cg_root[0]->path, "/cg") &&
	       !strcmp(o->cg_root[1]->ctrl, "cpu"));
	EXPECT(o->n_enable_fs == 1 && !strcmp(o->enable_fs[0], "nfs"));
	EXPECT(o->n_skip_mnt == 1 && !strcmp(o->skip_mnt[0], "/skip"));
	EXPECT(o->has_ghost_limit && o->ghost_limit == 1234);
	EXPECT(o->n_irmap_scan_paths == 1 && !strcmp(o->irmap_scan_paths[0], "/irmap"));
	EXPECT(!strcmp(o->cgroup_props, "props"));
	EXPECT(!strcmp(o->cgroup_props_file, "/props.yaml"));
	EXPECT(o->n_cgroup_dump_controller == 1 && !strcmp(o->cgroup_dump_controller[0], "memory"));
	EXPECT(!strcmp(o->cgroup_yard, "/yard"));
	EXPECT(o->n_external == 2 && !strcmp(o->external[1], "tty[1:2]:t"));
	EXPECT(o->ps && !strcmp(o->ps->address, "127.0.0.1") && o->ps->has_port &&
	       o->ps->port == 2222);
	EXPECT(o->has_pre_dump_mode && o->pre_dump_mode == CRIU_PRE_DUMP_MODE__VM_READ);
	EXPECT(o->has_pidfd_store_sk && o->pidfd_store_sk == 19);
	EXPECT(o->has_network_lock && o->network_lock == CRIU_NETWORK_LOCK_METHOD__NFTABLES);
	EXPECT(o->n_join_ns == 2 && !strcmp(o->join_ns[0]->ns, "net") &&
	       !o->join_ns[0]->extra_opt && !strcmp(o->join_ns[1]->extra_opt, "extra"));
	EXPECT(o->has_mntns_compat_mode && o->mntns_compat_mode);
	EXPECT(!strcmp(o->config_file, "/criu.conf"));
	EXPECT(o->has_empty_ns && o->empty_ns == 0x40000000);
	EXPECT(!o->has_rst_sibling && !o->has_notify_scripts && o->n_inherit_fd == 0);
	result("options", NULL);
	free_script(&s);
}

/* An options object with nothing set sends the schema's defaults only. */
static void check_defaults(void)
{
	struct script s = {.pass_fd = -1};
	criu_opts *opts = NULL;
	CriuOpts *o;
	int ret;

	criu_local_init_opts(&opts);
	criu_local_set_service_fd(opts, lib_end);
	s.nr_answers = 1;
	s.answers[0] = answer(CRIU_REQ_TYPE__DUMP, true);
	run_script(&s);
	ret = criu_local_dump(opts);
	finish_script();
	o = s.request ? s.request->opts : NULL;
	if (ret || !o)
		result("defaults", "criu_local_dump() = %d", ret);
	else if (o->images_dir_fd != -1 || o->has_pid || o->has_leave_running || o->has_log_level ||
		 o->log_file || o->n_external)
		result("defaults", "a fresh object sent options");
	else
		result("defaults", NULL);
	criu_local_free_opts(opts);
	free_script(&s);
}

static char seen[256];
static int seen_pid, refuse_at_post_dump;

static int notified(char *action, criu_notify_arg_t na)
{
	size_t used = strlen(seen);

	snprintf(seen + used, sizeof(seen) - used, "%s,", action);
	if (criu_notify_pid(na))
		seen_pid = criu_notify_pid(na);
	if (refuse_at_post_dump && !strcmp(action, "post-dump"))
		return refuse_at_post_dump;
	return 0;
}

/* Two notifications acked, the fd of the second kept, then "restored" (a self-dump). */
static void check_notify(void)
{
	struct script s = {.pass_fd = -1};
	struct stat passed, kept;
	int pipe_fds[2], ret, fd;

	if (pipe(pipe_fds))
		return;
	criu_init_opts();
	criu_set_service_fd(lib_end);
	criu_set_notify_cb(notified);
	s.nr_answers = 3;
	s.answers[0] = notification("orphan-pts-master", 0);
	s.pass_fd = pipe_fds[0];
	s.answers[1] = notification("post-dump", 555);
	s.answers[2] = answer(CRIU_REQ_TYPE__DUMP, true);
	s.answers[2]->dump = calloc(1, sizeof(*s.answers[2]->dump));
	criu_dump_resp__init(s.answers[2]->dump);
	s.answers[2]->dump->has_restored = true;
	s.answers[2]->dump->restored = true;
	seen[0] = 0;
	run_script(&s);
	ret = criu_dump();
	finish_script();
	fd = criu_get_orphan_pts_master_fd();
	if (ret != 1)
		result("notify", "criu_dump() = %d, want 1 (restored)", ret);
	else if (strcmp(seen, "orphan-pts-master,post-dump,") || seen_pid != 555)
		result("notify", "callback saw \"%s\" pid %d", seen, seen_pid);
	else if (s.nr_acks != 2 || !s.acks[0] || !s.acks[1])
		result("notify", "%d acks, want 2 successes", s.nr_acks);
	else if (!s.request->opts->has_notify_scripts || !s.request->opts->notify_scripts)
		result("notify", "the request did not ask for notifications");
	else if (fd < 0 || fstat(fd, &kept) || fstat(pipe_fds[0], &passed) ||
		 kept.st_ino != passed.st_ino || fd == pipe_fds[0])
		result("notify", "orphan-pts-master fd %d is not the one criu passed", fd);
	else
		result("notify", NULL);
	if (fd >= 0 && fd != pipe_fds[0])
		close(fd);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	free_script(&s);

	/* the callback's refusal is acked as a failure and is what the call returns */
	refuse_at_post_dump = -77;
	seen[0] = 0;
	s.nr_answers = 2;
	s.answers[0] = notification("post-dump", 0);
	s.answers[1] = answer(CRIU_REQ_TYPE__DUMP, false);
	run_script(&s);
	ret = criu_dump();
	finish_script();
	refuse_at_post_dump = 0;
	if (ret != -77 || s.nr_acks != 1 || s.acks[0])
		result("notify-refused", "criu_dump() = %d with %d acks, want -77 and one failure",
		       ret, s.nr_acks);
	else
		result("notify-refused", NULL);
	free_script(&s);
}

/* One answer to one request: what the call returns, and errno. */
static void check_answer(const char *name, CriuResp *resp, int (*call)(void), int want_ret,
			 int want_errno)
{
	struct script s = {.pass_fd = -1, .nr_answers = 1, .answers = {resp}};
	int ret;

	criu_init_opts();
	criu_set_service_fd(lib_end);
	run_script(&s);
	errno = 12345;
	ret = call();
	finish_script();
	if (ret != want_ret || errno != want_errno)
		result(name, "returned %d errno %d, want %d errno %d", ret, errno, want_ret,
		       want_errno);
	else
		result(name, NULL);
	free_script(&s);
}

static void check_answers(void)
{
	CriuResp *resp;

	resp = answer(CRIU_REQ_TYPE__DUMP, false);
	resp->has_cr_errno = true;
	resp->cr_errno = ESRCH;
	check_answer("failed", resp, criu_dump, -EBADE, ESRCH);
	check_answer("failed-no-errno", answer(CRIU_REQ_TYPE__RESTORE, false), criu_restore, -EBADE,
		     0);
	check_answer("unknown-request", answer(CRIU_REQ_TYPE__EMPTY, false), criu_check, -EINVAL,
		     0);
	check_answer("other-answer", answer(CRIU_REQ_TYPE__RESTORE, true), criu_dump, -EBADMSG, 0);

	resp = answer(CRIU_REQ_TYPE__RESTORE, true);
	resp->restore = calloc(1, sizeof(*resp->restore));
	criu_restore_resp__init(resp->restore);
	resp->restore->pid = 4242;
	check_answer("restore-pid", resp, criu_restore, 4242, 0);

	resp = answer(CRIU_REQ_TYPE__VERSION, true);
	resp->version = calloc(1, sizeof(*resp->version));
	criu_version__init(resp->version);
	resp->version->major_number = 4;
	resp->version->minor_number = 2;
	resp->version->has_sublevel = true;
	resp->version->sublevel = 1;
	check_answer("version", resp, criu_get_version, 40201, 0);
	resp = answer(CRIU_REQ_TYPE__VERSION, true);
	resp->version = calloc(1, sizeof(*resp->version));
	criu_version__init(resp->version);
	resp->version->major_number = 4;
	resp->version->minor_number = 2;
	resp->version->has_sublevel = true;
	resp->version->sublevel = 1;
	resp->version->gitid = strdup("0.1-g1234");
	check_answer("version-git", resp, criu_get_version, 40300, 0);
}

static void check_feature_check(void)
{
	struct criu_feature_check features = {.mem_track = true};
	struct script s = {.pass_fd = -1, .nr_answers = 1};
	CriuFeatures *asked;
	int ret;

	s.answers[0] = answer(CRIU_REQ_TYPE__FEATURE_CHECK, true);
	s.answers[0]->features = calloc(1, sizeof(*s.answers[0]->features));
	criu_features__init(s.answers[0]->features);
	s.answers[0]->features->has_mem_track = true;
	s.answers[0]->features->mem_track = true;
	s.answers[0]->features->has_pidfd_store = true;
	s.answers[0]->features->pidfd_store = false;
	criu_init_opts();
	criu_set_service_fd(lib_end);
	run_script(&s);
	ret = criu_feature_check(&features, sizeof(features));
	finish_script();
	asked = s.request ? s.request->features : NULL;
	if (ret)
		result("feature-check", "criu_feature_check() = %d", ret);
	else if (!asked || !asked->has_mem_track || !asked->mem_track || asked->has_lazy_pages ||
		 asked->has_pidfd_store)
		result("feature-check", "the request did not ask for mem_track alone");
	else if (!features.mem_track || features.lazy_pages || features.pidfd_store)
		result("feature-check", "answer read as %d %d %d, want 1 0 0", features.mem_track,
		       features.lazy_pages, features.pidfd_store);
	else
		result("feature-check", NULL);
	free_script(&s);
}

/* The mode chosen alone: an fd mode without an fd is refused before anything is sent. */
static void check_comm(void)
{
	int ret;

	criu_init_opts();
	criu_set_service_comm(CRIU_COMM_FD);
	errno = 0;
	ret = criu_check();
	if (ret != -ECONNREFUSED || errno != EBADF)
		result("comm-fd-unset", "criu_check() = %d errno %d, want -ECONNREFUSED EBADF", ret,
		       errno);
	else
		result("comm-fd-unset", NULL);
}

/* criu went away mid-request: -ECOMM, and the caller is still alive (no SIGPIPE). */
static void check_hang_up(void)
{
	struct script s = {.pass_fd = -1, .hang_up = true};
	int ret;

	criu_init_opts();
	criu_set_service_fd(lib_end);
	run_script(&s);
	errno = 0;
	ret = criu_check();
	finish_script();
	if (ret != -ECOMM || errno != ECONNRESET)
		result("hang-up", "criu_check() = %d errno %d, want -ECOMM ECONNRESET", ret, errno);
	else
		result("hang-up", NULL);
	free_script(&s);

	errno = 0;
	ret = criu_check(); /* the peer is closed: sending fails with EPIPE, not SIGPIPE */
	if (ret != -ECOMM || errno != EPIPE)
		result("hang-up-send", "criu_check() = %d errno %d, want -ECOMM EPIPE", ret, errno);
	else
		result("hang-up-send", NULL);
}

int main(void)
{
	pthread_t thread;
	int sks[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sks) ||
	    pthread_create(&thread, NULL, fake_criu, NULL)) {
		perror("wire_test: setup");
		return 100;
	}
	lib_end = sks[0];
	criu_end = sks[1];
	check_options();
	check_defaults();
	check_notify();
	check_answers();
	check_feature_check();
	check_comm();
	check_hang_up(); /* last: the fake criu closes its end */
	pthread_mutex_lock(&lock);
	done = true;
	pthread_cond_broadcast(&turn);
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	close(lib_end);
	criu_free_opts();
	return failures;
}
