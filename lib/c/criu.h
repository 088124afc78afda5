/*
 * libcriu: drive criu from C. Every call builds one RPC request (images/rpc.proto) from an
 * options object and sends it to a criu process: one started for the call (`criu swrk`),
 * a running `criu service`, or a socket the caller connected. Names, signatures and
 * return values are CRIU's libcriu's, so programs written for it build and run unchanged.
 */
#ifndef __CRIU_LIB_H__
#define __CRIU_LIB_H__

#include <stdbool.h>
#include <stddef.h>

#include "version.h"
#include "rpc.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels for criu_set_log_level(), criu's -v0 .. -v4. */
#define CRIU_LOG_UNSET (-1)
#define CRIU_LOG_MSG   (0)
#define CRIU_LOG_ERROR (1)
#define CRIU_LOG_WARN  (2)
#define CRIU_LOG_INFO  (3)
#define CRIU_LOG_DEBUG (4)

/*
 * How a request reaches criu. CRIU_COMM_BIN (the default) forks and execs
 * `BINARY swrk FD` for each request, BINARY being "criu" (looked up in PATH) unless
 * criu_set_service_binary() said otherwise; CRIU_COMM_SK connects to the Unix socket of
 * `criu service` (default ./criu_service.socket); CRIU_COMM_FD uses a SOCK_SEQPACKET
 * socket the caller already connected to criu, and leaves it open.
 */
enum criu_service_comm { CRIU_COMM_SK, CRIU_COMM_FD, CRIU_COMM_BIN };

/* --manage-cgroups modes; the numbers are the RPC schema's. */
enum criu_cg_mode {
	CRIU_CG_MODE_IGNORE,
	CRIU_CG_MODE_NONE,
	CRIU_CG_MODE_PROPS,
	CRIU_CG_MODE_SOFT,
	CRIU_CG_MODE_FULL,
	CRIU_CG_MODE_STRICT,
	CRIU_CG_MODE_DEFAULT,
};

/* --network-lock methods. */
enum criu_network_lock_method {
	CRIU_NETWORK_LOCK_IPTABLES = 1,
	CRIU_NETWORK_LOCK_NFTABLES = 2,
	CRIU_NETWORK_LOCK_SKIP = 3,
};

/* --pre-dump-mode: pages moved with vmsplice() or read with process_vm_readv(). */
enum criu_pre_dump_mode { CRIU_PRE_DUMP_SPLICE = 1, CRIU_PRE_DUMP_READ = 2 };

/*
 * The global options object. criu_init_opts() must come first: it (re)sets every option
 * to its default, freeing what an earlier call set up. Returns 0, or -1 when out of
 * memory. criu_free_opts() releases it.
 */
int criu_init_opts(void);
void criu_free_opts(void);

/*
 * Where requests go (see enum criu_service_comm). Each of the three also selects its
 * mode; criu_set_service_comm() switches the mode alone (older libcriu had the
 * caller pick it this way). A NULL path restores the default. Return 0 or -ENOMEM.
 */
int criu_set_service_address(const char *path);
void criu_set_service_fd(int fd);
int criu_set_service_binary(const char *path);
void criu_set_service_comm(enum criu_service_comm comm);

/*
 * Options of the requests, each the twin of criu's command-line option of the same name.
 * Those returning int return 0, or a negative errno (-ENOMEM), or -1 for a value they
 * refuse. Strings are copied.
 */
void criu_set_pid(int pid);	     /* the tree to dump; unset: the caller itself */
void criu_set_images_dir_fd(int fd); /* the caller's descriptor; needed by dump and restore */
int criu_set_parent_images(const char *path); /* relative to the images directory */
void criu_set_work_dir_fd(int fd);
void criu_set_leave_running(bool leave_running);
void criu_set_ext_unix_sk(bool ext_unix_sk);
int criu_add_unix_sk(unsigned int inode); /* also sets ext_unix_sk; -1 if it was set false */
void criu_set_tcp_established(bool tcp_established);
void criu_set_tcp_skip_in_flight(bool tcp_skip_in_flight);
void criu_set_tcp_close(bool tcp_close);
void criu_set_weak_sysctls(bool val);
void criu_set_evasive_devices(bool evasive_devices);
void criu_set_shell_job(bool shell_job);
void criu_set_skip_file_rwx_check(bool skip_file_rwx_check);
void criu_set_unprivileged(bool unprivileged);
void criu_set_orphan_pts_master(bool orphan_pts_master);
void criu_set_file_locks(bool file_locks);
void criu_set_track_mem(bool track_mem);
void criu_set_auto_dedup(bool auto_dedup);
void criu_set_force_irmap(bool force_irmap);
void criu_set_link_remap(bool link_remap);
void criu_set_log_level(int log_level);
int criu_set_log_file(const char *log_file); /* a name in the work directory */
void criu_set_cpu_cap(unsigned int cap);
int criu_set_root(const char *root);
void criu_set_manage_cgroups(bool manage);
void criu_set_manage_cgroups_mode(enum criu_cg_mode mode);
int criu_set_freeze_cgroup(const char *name);
int criu_set_lsm_profile(const char *name);
int criu_set_lsm_mount_context(const char *name);
void criu_set_timeout(unsigned int timeout);
void criu_set_auto_ext_mnt(bool val);
void criu_set_ext_sharing(bool val);
void criu_set_ext_masters(bool val);
int criu_set_exec_cmd(int argc, char *argv[]);
int criu_add_ext_mount(const char *key, const char *val);
int criu_add_veth_pair(const char *in, const char *out);
int criu_add_cg_root(const char *ctrl, const char *path); /* ctrl may be NULL */
int criu_add_enable_fs(const char *fs);
int criu_add_skip_mnt(const char *mnt);
void criu_set_ghost_limit(unsigned int limit);
int criu_add_irmap_path(const char *path);
int criu_add_cg_props(const char *stream);
int criu_add_cg_props_file(const char *path);
int criu_add_cg_dump_controller(const char *name);
int criu_add_cg_yard(const char *path);
/* fd is the caller's (criu swrk inherits it): only with CRIU_COMM_BIN, else -1. */
int criu_add_inherit_fd(int fd, const char *key);
int criu_add_external(const char *key);
int criu_set_page_server_address_port(const char *address, int port);
int criu_set_pre_dump_mode(enum criu_pre_dump_mode mode);
void criu_set_pidfd_store_sk(int sk);
int criu_set_network_lock(enum criu_network_lock_method method);
int criu_join_ns_add(const char *ns, const char *ns_file, const char *extra_opt);
void criu_set_mntns_compat_mode(bool val);
int criu_set_config_file(const char *path);
void criu_set_empty_ns(int namespaces); /* CLONE_NEW* flags */

/*
 * Notifications: with a callback set, criu stops at each of its action-script points
 * ("pre-dump", "post-dump", "network-lock", "pre-restore", "setup-namespaces",
 * "post-restore", "pre-resume", "post-resume", "orphan-pts-master", ...) and waits for the
 * callback's answer. It returns 0 to let criu go on; anything else fails the request, and
 * the call returns that value. na is only valid during the callback.
 */
typedef CriuNotify *criu_notify_arg_t;
void criu_set_notify_cb(int (*cb)(char *action, criu_notify_arg_t na));

/* The pid of the tree's root the notification is about; 0 when it carries none. */
int criu_notify_pid(criu_notify_arg_t na);

/*
 * The master side of the tty criu passed with the "orphan-pts-master" notification (an fd
 * of the caller's now, the caller closes it); -1 until one came. Valid from that callback on.
 */
int criu_get_orphan_pts_master_fd(void);

/*
 * The requests. Return values (errno as it is on return):
 *   0             success (criu_dump(): dumped; 1: the caller, self-dumped, was restored)
 *   > 0           criu_restore(), criu_restore_child(): the restored root's pid
 *   -EBADE        criu answered that the request failed; errno is the cause criu
 *                 reported (ESRCH: no such process, EEXIST: pid taken, ...), 0 if none
 *   -ECONNREFUSED no criu to talk to (socket, connect, fork or exec failed; errno why)
 *   -ECOMM        the request or the answer did not get through (errno why)
 *   -EINVAL       criu does not know this request (or a call's arguments are unusable)
 *   -EBADMSG      criu answered with another request's response
 */
int criu_check(void);
int criu_dump(void);
int criu_pre_dump(void);
int criu_restore(void);
/*
 * Restores the tree as a child of the caller: criu swrk runs as the caller's child and
 * makes the restored root its sibling. So criu swrk is started whatever the mode: the
 * binary criu_set_service_binary() named, else "criu" from PATH. The caller reaps the
 * restored root.
 */
int criu_restore_child(void);

/*
 * Iterative dump: pre-dumps, calling more() after each, on one criu swrk session; when
 * more() returns 0 the final dump follows, when negative the dump is abandoned and that
 * value returned. more() may change options (images directory, parent images) for the
 * next round. Needs criu_set_pid() (no self-dump) and a callback, else -EINVAL.
 */
typedef void *criu_predump_info;
int criu_dump_iters(int (*more)(criu_predump_info pi));

/*
 * criu's version, as major * 10000 + minor * 100 + sublevel, with minor raised by one
 * (sublevel dropped) when criu says it was built from a git tree (a gitid). Negative on
 * error, as the requests above.
 */
int criu_get_version(void);

/* 1 if criu_get_version() >= minimum, 0 if it is older, negative on error. */
int criu_check_version(int minimum);

/*
 * Feature check: set the members to ask about to true; on success (0) each is true when
 * criu and the kernel have it, false otherwise. size is the caller's sizeof(), so that a
 * program built with an older (shorter) struct still works; a larger size is refused (-1).
 */
struct criu_feature_check {
	bool mem_track;
	bool lazy_pages;
	bool pidfd_store;
};

int criu_feature_check(struct criu_feature_check *features, size_t size);

/*
 * The same calls on an options object of the caller's own (several in use at once, one
 * per thread, ...). criu_local_init_opts() takes a pointer that is NULL or holds an
 * object from an earlier call (which it frees).
 */
typedef struct criu_opts criu_opts;

int criu_local_init_opts(criu_opts **opts);
void criu_local_free_opts(criu_opts *opts);

int criu_local_set_service_address(criu_opts *opts, const char *path);
void criu_local_set_service_fd(criu_opts *opts, int fd);
int criu_local_set_service_binary(criu_opts *opts, const char *path);
void criu_local_set_service_comm(criu_opts *opts, enum criu_service_comm comm);

void criu_local_set_pid(criu_opts *opts, int pid);
void criu_local_set_images_dir_fd(criu_opts *opts, int fd);
int criu_local_set_parent_images(criu_opts *opts, const char *path);
void criu_local_set_work_dir_fd(criu_opts *opts, int fd);
void criu_local_set_leave_running(criu_opts *opts, bool leave_running);
void criu_local_set_ext_unix_sk(criu_opts *opts, bool ext_unix_sk);
int criu_local_add_unix_sk(criu_opts *opts, unsigned int inode);
void criu_local_set_tcp_established(criu_opts *opts, bool tcp_established);
void criu_local_set_tcp_skip_in_flight(criu_opts *opts, bool tcp_skip_in_flight);
void criu_local_set_tcp_close(criu_opts *opts, bool tcp_close);
void criu_local_set_weak_sysctls(criu_opts *opts, bool val);
void criu_local_set_evasive_devices(criu_opts *opts, bool evasive_devices);
void criu_local_set_shell_job(criu_opts *opts, bool shell_job);
void criu_local_set_skip_file_rwx_check(criu_opts *opts, bool skip_file_rwx_check);
void criu_local_set_unprivileged(criu_opts *opts, bool unprivileged);
void criu_local_set_orphan_pts_master(criu_opts *opts, bool orphan_pts_master);
void criu_local_set_file_locks(criu_opts *opts, bool file_locks);
void criu_local_set_track_mem(criu_opts *opts, bool track_mem);
void criu_local_set_auto_dedup(criu_opts *opts, bool auto_dedup);
void criu_local_set_force_irmap(criu_opts *opts, bool force_irmap);
void criu_local_set_link_remap(criu_opts *opts, bool link_remap);
void criu_local_set_log_level(criu_opts *opts, int log_level);
int criu_local_set_log_file(criu_opts *opts, const char *log_file);
void criu_local_set_cpu_cap(criu_opts *opts, unsigned int cap);
int criu_local_set_root(criu_opts *opts, const char *root);
void criu_local_set_manage_cgroups(criu_opts *opts, bool manage);
void criu_local_set_manage_cgroups_mode(criu_opts *opts, enum criu_cg_mode mode);
int criu_local_set_freeze_cgroup(criu_opts *opts, const char *name);
int criu_local_set_lsm_profile(criu_opts *opts, const char *name);
int criu_local_set_lsm_mount_context(criu_opts *opts, const char *name);
void criu_local_set_timeout(criu_opts *opts, unsigned int timeout);
void criu_local_set_auto_ext_mnt(criu_opts *opts, bool val);
void criu_local_set_ext_sharing(criu_opts *opts, bool val);
void criu_local_set_ext_masters(criu_opts *opts, bool val);
int criu_local_set_exec_cmd(criu_opts *opts, int argc, char *argv[]);
int criu_local_add_ext_mount(criu_opts *opts, const char *key, const char *val);
int criu_local_add_veth_pair(criu_opts *opts, const char *in, const char *out);
int criu_local_add_cg_root(criu_opts *opts, const char *ctrl, const char *path);
int criu_local_add_enable_fs(criu_opts *opts, const char *fs);
int criu_local_add_skip_mnt(criu_opts *opts, const char *mnt);
void criu_local_set_ghost_limit(criu_opts *opts, unsigned int limit);
int criu_local_add_irmap_path(criu_opts *opts, const char *path);
int criu_local_add_cg_props(criu_opts *opts, const char *stream);
int criu_local_add_cg_props_file(criu_opts *opts, const char *path);
int criu_local_add_cg_dump_controller(criu_opts *opts, const char *name);
int criu_local_add_cg_yard(criu_opts *opts, const char *path);
int criu_local_add_inherit_fd(criu_opts *opts, int fd, const char *key);
int criu_local_add_external(criu_opts *opts, const char *key);
int criu_local_set_page_server_address_port(criu_opts *opts, const char *address, int port);
int criu_local_set_pre_dump_mode(criu_opts *opts, enum criu_pre_dump_mode mode);
void criu_local_set_pidfd_store_sk(criu_opts *opts, int sk);
int criu_local_set_network_lock(criu_opts *opts, enum criu_network_lock_method method);
int criu_local_join_ns_add(criu_opts *opts, const char *ns, const char *ns_file,
			   const char *extra_opt);
void criu_local_set_mntns_compat_mode(criu_opts *opts, bool val);
int criu_local_set_config_file(criu_opts *opts, const char *path);
void criu_local_set_empty_ns(criu_opts *opts, int namespaces);

void criu_local_set_notify_cb(criu_opts *opts, int (*cb)(char *action, criu_notify_arg_t na));

int criu_local_check(criu_opts *opts);
int criu_local_dump(criu_opts *opts);
int criu_local_pre_dump(criu_opts *opts);
int criu_local_restore(criu_opts *opts);
int criu_local_restore_child(criu_opts *opts);
int criu_local_dump_iters(criu_opts *opts, int (*more)(criu_predump_info pi));

int criu_local_get_version(criu_opts *opts);
int criu_local_check_version(criu_opts *opts, int minimum);
int criu_local_feature_check(criu_opts *opts, struct criu_feature_check *features, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* __CRIU_LIB_H__ */
