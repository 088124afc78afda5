/*
 * libcriu's options object: a CriuOpts message (images/rpc.proto) filled by the
 * criu_local_set_* / criu_local_add_* calls, and their twins without "local_" that act on
 * the global object. Every string is copied; criu_local_free_opts() frees the lot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

criu_opts *libcriu_global_opts;

/* Appends item to a repeated field given as (count, array): 0 or -ENOMEM. */
#define ARRAY_APPEND(count, array, item)                                                           \
	({                                                                                         \
		typeof(array) __grown = realloc(array, ((count) + 1) * sizeof(*(array)));          \
		int __ret = -ENOMEM;                                                               \
		if (__grown) {                                                                     \
			__grown[(count)++] = (item);                                               \
			(array) = __grown;                                                         \
			__ret = 0;                                                                 \
		}                                                                                  \
		__ret;                                                                             \
	})

static int replace_string(char **field, const char *val)
{
	char *copy;

	if (!val)
		return -EINVAL;
	copy = strdup(val);
	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

static int append_string(size_t *count, char ***array, const char *val)
{
	char *copy;

	if (!val)
		return -EINVAL;
	copy = strdup(val);
	if (!copy)
		return -ENOMEM;
	if (ARRAY_APPEND(*count, *array, copy)) {
		free(copy);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The options that are one field of CriuOpts each, generated in pairs: the local call,
 * and the global one on libcriu_global_opts. A flag or number also sets its has_ bit,
 * which is what makes protobuf-c send it (unset ones leave criu's default).
 */
#define FLAG_OPTION(name, field)                                                                   \
	void criu_local_set_##name(criu_opts *opts, bool val)                                      \
	{                                                                                          \
		opts->rpc->has_##field = true;                                                     \
		opts->rpc->field = val;                                                            \
	}                                                                                          \
	void criu_set_##name(bool val)                                                             \
	{                                                                                          \
		criu_local_set_##name(libcriu_global_opts, val);                                   \
	}

#define NUMBER_OPTION(name, field, type)                                                           \
	void criu_local_set_##name(criu_opts *opts, type val)                                      \
	{                                                                                          \
		opts->rpc->has_##field = true;                                                     \
		opts->rpc->field = val;                                                            \
	}                                                                                          \
	void criu_set_##name(type val)                                                             \
	{                                                                                          \
		criu_local_set_##name(libcriu_global_opts, val);                                   \
	}

/* A string option: a later call replaces the earlier value. */
#define STRING_OPTION(call, field)                                                                 \
	int criu_local_##call(criu_opts *opts, const char *val)                                    \
	{                                                                                          \
		return replace_string(&opts->rpc->field, val);                                     \
	}                                                                                          \
	int criu_##call(const char *val)                                                           \
	{                                                                                          \
		return criu_local_##call(libcriu_global_opts, val);                                \
	}

/* A repeated string option: each call adds one. */
#define STRING_LIST_OPTION(call, field)                                                            \
	int criu_local_##call(criu_opts *opts, const char *val)                                    \
	{                                                                                          \
		return append_string(&opts->rpc->n_##field, &opts->rpc->field, val);               \
	}                                                                                          \
	int criu_##call(const char *val)                                                           \
	{                                                                                          \
		return criu_local_##call(libcriu_global_opts, val);                                \
	}

FLAG_OPTION(leave_running, leave_running)
FLAG_OPTION(ext_unix_sk, ext_unix_sk)
FLAG_OPTION(tcp_established, tcp_established)
FLAG_OPTION(tcp_skip_in_flight, tcp_skip_in_flight)
FLAG_OPTION(tcp_close, tcp_close)
FLAG_OPTION(weak_sysctls, weak_sysctls)
FLAG_OPTION(evasive_devices, evasive_devices)
FLAG_OPTION(shell_job, shell_job)
FLAG_OPTION(skip_file_rwx_check, skip_file_rwx_check)
FLAG_OPTION(unprivileged, unprivileged)
FLAG_OPTION(orphan_pts_master, orphan_pts_master)
FLAG_OPTION(file_locks, file_locks)
FLAG_OPTION(track_mem, track_mem)
FLAG_OPTION(auto_dedup, auto_dedup)
FLAG_OPTION(force_irmap, force_irmap)
FLAG_OPTION(link_remap, link_remap)
FLAG_OPTION(manage_cgroups, manage_cgroups)
FLAG_OPTION(auto_ext_mnt, auto_ext_mnt)
FLAG_OPTION(ext_sharing, ext_sharing)
FLAG_OPTION(ext_masters, ext_masters)
FLAG_OPTION(mntns_compat_mode, mntns_compat_mode)

NUMBER_OPTION(pid, pid, int)
NUMBER_OPTION(work_dir_fd, work_dir_fd, int)
NUMBER_OPTION(log_level, log_level, int)
NUMBER_OPTION(cpu_cap, cpu_cap, unsigned int)
NUMBER_OPTION(timeout, timeout, unsigned int)
NUMBER_OPTION(ghost_limit, ghost_limit, unsigned int)
NUMBER_OPTION(pidfd_store_sk, pidfd_store_sk, int)
NUMBER_OPTION(empty_ns, empty_ns, int)

STRING_OPTION(set_parent_images, parent_img)
STRING_OPTION(set_log_file, log_file)
STRING_OPTION(set_root, root)
STRING_OPTION(set_freeze_cgroup, freeze_cgroup)
STRING_OPTION(set_lsm_profile, lsm_profile)
STRING_OPTION(set_lsm_mount_context, lsm_mount_context)
STRING_OPTION(set_config_file, config_file)
STRING_OPTION(add_cg_props, cgroup_props)
STRING_OPTION(add_cg_props_file, cgroup_props_file)
STRING_OPTION(add_cg_yard, cgroup_yard)

STRING_LIST_OPTION(add_enable_fs, enable_fs)
STRING_LIST_OPTION(add_skip_mnt, skip_mnt)
STRING_LIST_OPTION(add_irmap_path, irmap_scan_paths)
STRING_LIST_OPTION(add_external, external)
STRING_LIST_OPTION(add_cg_dump_controller, cgroup_dump_controller)

/* images_dir_fd is a required field of the schema: no has_ bit. */
void criu_local_set_images_dir_fd(criu_opts *opts, int fd)
{
	opts->rpc->images_dir_fd = fd;
}

void criu_set_images_dir_fd(int fd)
{
	criu_local_set_images_dir_fd(libcriu_global_opts, fd);
}

void criu_local_set_manage_cgroups_mode(criu_opts *opts, enum criu_cg_mode mode)
{
	/* enum criu_cg_mode and the schema's criu_cg_mode number the modes alike */
	opts->rpc->has_manage_cgroups_mode = true;
	opts->rpc->manage_cgroups_mode = (CriuCgMode)mode;
}

void criu_set_manage_cgroups_mode(enum criu_cg_mode mode)
{
	criu_local_set_manage_cgroups_mode(libcriu_global_opts, mode);
}

int criu_local_set_pre_dump_mode(criu_opts *opts, enum criu_pre_dump_mode mode)
{
	if (mode != CRIU_PRE_DUMP_SPLICE && mode != CRIU_PRE_DUMP_READ)
		return -1;
	opts->rpc->has_pre_dump_mode = true;
	opts->rpc->pre_dump_mode = (CriuPreDumpMode)mode;
	return 0;
}

int criu_set_pre_dump_mode(enum criu_pre_dump_mode mode)
{
	return criu_local_set_pre_dump_mode(libcriu_global_opts, mode);
}

int criu_local_set_network_lock(criu_opts *opts, enum criu_network_lock_method method)
{
	if (method != CRIU_NETWORK_LOCK_IPTABLES && method != CRIU_NETWORK_LOCK_NFTABLES &&
	    method != CRIU_NETWORK_LOCK_SKIP)
		return -1;
	opts->rpc->has_network_lock = true;
	opts->rpc->network_lock = (CriuNetworkLockMethod)method;
	return 0;
}

int criu_set_network_lock(enum criu_network_lock_method method)
{
	return criu_local_set_network_lock(libcriu_global_opts, method);
}

int criu_local_add_unix_sk(criu_opts *opts, unsigned int inode)
{
	UnixSk *sk;

	/* An inode makes no sense without --ext-unix-sk: it is turned on, unless the
	 * caller turned it off explicitly. */
	if (!opts->rpc->has_ext_unix_sk)
		criu_local_set_ext_unix_sk(opts, true);
	else if (!opts->rpc->ext_unix_sk)
		return -1;

	sk = malloc(sizeof(*sk));
	if (!sk)
		return -ENOMEM;
	unix_sk__init(sk);
	sk->inode = inode;
	if (ARRAY_APPEND(opts->rpc->n_unix_sk_ino, opts->rpc->unix_sk_ino, sk)) {
		free(sk);
		return -ENOMEM;
	}
	return 0;
}

int criu_add_unix_sk(unsigned int inode)
{
	return criu_local_add_unix_sk(libcriu_global_opts, inode);
}

int criu_local_set_exec_cmd(criu_opts *opts, int argc, char *argv[])
{
	char **copy;
	int i;

	if (argc < 0 || (argc && !argv))
		return -EINVAL;
	copy = calloc(argc ? argc : 1, sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	for (i = 0; i < argc; i++) {
		copy[i] = strdup(argv[i]);
		if (!copy[i]) {
			while (i--)
				free(copy[i]);
			free(copy);
			return -ENOMEM;
		}
	}
	for (i = 0; i < (int)opts->rpc->n_exec_cmd; i++)
		free(opts->rpc->exec_cmd[i]);
	free(opts->rpc->exec_cmd);
	opts->rpc->exec_cmd = copy;
	opts->rpc->n_exec_cmd = argc;
	return 0;
}

int criu_set_exec_cmd(int argc, char *argv[])
{
	return criu_local_set_exec_cmd(libcriu_global_opts, argc, argv);
}

int criu_local_add_ext_mount(criu_opts *opts, const char *key, const char *val)
{
	ExtMountMap *map;

	if (!key || !val)
		return -EINVAL;
	map = malloc(sizeof(*map));
	if (!map)
		return -ENOMEM;
	ext_mount_map__init(map);
	map->key = strdup(key);
	map->val = strdup(val);
	if (!map->key || !map->val || ARRAY_APPEND(opts->rpc->n_ext_mnt, opts->rpc->ext_mnt, map)) {
		ext_mount_map__free_unpacked(map, NULL);
		return -ENOMEM;
	}
	return 0;
}

int criu_add_ext_mount(const char *key, const char *val)
{
	return criu_local_add_ext_mount(libcriu_global_opts, key, val);
}

int criu_local_add_veth_pair(criu_opts *opts, const char *in, const char *out)
{
	CriuVethPair *pair;

	if (!in || !out)
		return -EINVAL;
	pair = malloc(sizeof(*pair));
	if (!pair)
		return -ENOMEM;
	criu_veth_pair__init(pair);
	pair->if_in = strdup(in);
	pair->if_out = strdup(out);
	if (!pair->if_in || !pair->if_out ||
	    ARRAY_APPEND(opts->rpc->n_veths, opts->rpc->veths, pair)) {
		criu_veth_pair__free_unpacked(pair, NULL);
		return -ENOMEM;
	}
	return 0;
}

int criu_add_veth_pair(const char *in, const char *out)
{
	return criu_local_add_veth_pair(libcriu_global_opts, in, out);
}

int criu_local_add_cg_root(criu_opts *opts, const char *ctrl, const char *path)
{
	CgroupRoot *root;

	if (!path)
		return -EINVAL;
	root = malloc(sizeof(*root));
	if (!root)
		return -ENOMEM;
	cgroup_root__init(root);
	root->ctrl = ctrl ? strdup(ctrl) : NULL;
	root->path = strdup(path);
	if ((ctrl && !root->ctrl) || !root->path ||
	    ARRAY_APPEND(opts->rpc->n_cg_root, opts->rpc->cg_root, root)) {
		cgroup_root__free_unpacked(root, NULL);
		return -ENOMEM;
	}
	return 0;
}

int criu_add_cg_root(const char *ctrl, const char *path)
{
	return criu_local_add_cg_root(libcriu_global_opts, ctrl, path);
}

int criu_local_add_inherit_fd(criu_opts *opts, int fd, const char *key)
{
	InheritFd *inherit;

	/* The fd number is the caller's: only criu swrk, the caller's child, has it. */
	if (opts->comm != CRIU_COMM_BIN || !key)
		return -1;
	inherit = malloc(sizeof(*inherit));
	if (!inherit)
		return -ENOMEM;
	inherit_fd__init(inherit);
	inherit->fd = fd;
	inherit->key = strdup(key);
	if (!inherit->key ||
	    ARRAY_APPEND(opts->rpc->n_inherit_fd, opts->rpc->inherit_fd, inherit)) {
		inherit_fd__free_unpacked(inherit, NULL);
		return -ENOMEM;
	}
	return 0;
}

int criu_add_inherit_fd(int fd, const char *key)
{
	return criu_local_add_inherit_fd(libcriu_global_opts, fd, key);
}

int criu_local_set_page_server_address_port(criu_opts *opts, const char *address, int port)
{
	CriuPageServerInfo *ps;

	ps = malloc(sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	criu_page_server_info__init(ps);
	if (address) {
		ps->address = strdup(address);
		if (!ps->address) {
			free(ps);
			return -ENOMEM;
		}
	}
	ps->has_port = true;
	ps->port = port;
	if (opts->rpc->ps)
		criu_page_server_info__free_unpacked(opts->rpc->ps, NULL);
	opts->rpc->ps = ps;
	return 0;
}

int criu_set_page_server_address_port(const char *address, int port)
{
	return criu_local_set_page_server_address_port(libcriu_global_opts, address, port);
}

int criu_local_join_ns_add(criu_opts *opts, const char *ns, const char *ns_file,
			   const char *extra_opt)
{
	JoinNamespace *join;

	if (!ns || !ns_file)
		return -1;
	join = malloc(sizeof(*join));
	if (!join)
		return -1;
	join_namespace__init(join);
	join->ns = strdup(ns);
	join->ns_file = strdup(ns_file);
	join->extra_opt = extra_opt ? strdup(extra_opt) : NULL;
	if (!join->ns || !join->ns_file || (extra_opt && !join->extra_opt) ||
	    ARRAY_APPEND(opts->rpc->n_join_ns, opts->rpc->join_ns, join)) {
		join_namespace__free_unpacked(join, NULL);
		return -1;
	}
	return 0;
}

int criu_join_ns_add(const char *ns, const char *ns_file, const char *extra_opt)
{
	return criu_local_join_ns_add(libcriu_global_opts, ns, ns_file, extra_opt);
}

void criu_local_set_notify_cb(criu_opts *opts, int (*cb)(char *action, criu_notify_arg_t na))
{
	opts->notify = cb;
	/* criu stops at its action-script points only for a caller that listens */
	opts->rpc->has_notify_scripts = true;
	opts->rpc->notify_scripts = cb != NULL;
}

void criu_set_notify_cb(int (*cb)(char *action, criu_notify_arg_t na))
{
	criu_local_set_notify_cb(libcriu_global_opts, cb);
}

int criu_notify_pid(criu_notify_arg_t na)
{
	return na && na->has_pid ? na->pid : 0;
}

/* ---- where requests go ---------------------------------------------------------------- */

int criu_local_set_service_address(criu_opts *opts, const char *path)
{
	int ret = replace_string(&opts->service_address, path ? path : CR_DEFAULT_SERVICE_ADDRESS);

	if (!ret)
		opts->comm = CRIU_COMM_SK;
	return ret;
}

int criu_set_service_address(const char *path)
{
	return criu_local_set_service_address(libcriu_global_opts, path);
}

void criu_local_set_service_fd(criu_opts *opts, int fd)
{
	opts->service_fd = fd;
	opts->comm = CRIU_COMM_FD;
}

void criu_set_service_fd(int fd)
{
	criu_local_set_service_fd(libcriu_global_opts, fd);
}

int criu_local_set_service_binary(criu_opts *opts, const char *path)
{
	int ret = replace_string(&opts->service_binary, path ? path : CR_DEFAULT_SERVICE_BIN);

	if (!ret)
		opts->comm = CRIU_COMM_BIN;
	return ret;
}

int criu_set_service_binary(const char *path)
{
	return criu_local_set_service_binary(libcriu_global_opts, path);
}

void criu_local_set_service_comm(criu_opts *opts, enum criu_service_comm comm)
{
	opts->comm = comm;
}

void criu_set_service_comm(enum criu_service_comm comm)
{
	criu_local_set_service_comm(libcriu_global_opts, comm);
}

/* ---- the object itself ---------------------------------------------------------------- */

void criu_local_free_opts(criu_opts *opts)
{
	if (!opts)
		return;
	/* Every part of rpc came from malloc(), as protobuf-c's own unpacking would have
	 * made it: its free walks the fields and releases them all. */
	if (opts->rpc)
		criu_opts__free_unpacked(opts->rpc, NULL);
	free(opts->service_address);
	free(opts->service_binary);
	free(opts);
}

int criu_local_init_opts(criu_opts **o)
{
	criu_opts *opts;

	criu_local_free_opts(*o);
	*o = NULL;

	opts = calloc(1, sizeof(*opts));
	if (!opts)
		return -1;
	opts->rpc = malloc(sizeof(*opts->rpc));
	opts->service_address = strdup(CR_DEFAULT_SERVICE_ADDRESS);
	opts->service_binary = strdup(CR_DEFAULT_SERVICE_BIN);
	if (!opts->rpc || !opts->service_address || !opts->service_binary) {
		free(opts->rpc);
		opts->rpc = NULL;
		criu_local_free_opts(opts);
		return -1;
	}
	criu_opts__init(opts->rpc); /* images_dir_fd -1, the schema's defaults */
	opts->comm = CRIU_COMM_BIN;
	opts->service_fd = -1;
	*o = opts;
	return 0;
}

int criu_init_opts(void)
{
	return criu_local_init_opts(&libcriu_global_opts);
}

void criu_free_opts(void)
{
	criu_local_free_opts(libcriu_global_opts);
	libcriu_global_opts = NULL;
}
