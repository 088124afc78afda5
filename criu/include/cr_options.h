/*
 * Options of one criu run, as parsed from configuration files and the command line
 * (config.c). Every option upstream CRIU knows is parsed; those this criu cannot honour
 * are refused there, so what is here is what the pipelines act on.
 */
#ifndef CR_OPTIONS_H
#define CR_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* --inherit-fd fd[N]:KEY: restore opens nothing for the file KEY names, it takes fd N. */
struct inherit_fd {
	int fd;	   /* criu's descriptor, as given */
	char *key; /* pipe:[INODE] or a path */
};

/* --manage-cgroups: CRIU's modes (its RPC's criu_cg_mode numbers, but DEFAULT). */
enum cg_mode {
	CG_MODE_IGNORE = 0, /* cgroups are neither dumped nor restored */
	CG_MODE_NONE = 1,   /* restore: the cgroups must exist, no property is set */
	CG_MODE_PROPS = 2,  /* restore: the cgroups must exist, their properties are set */
	CG_MODE_SOFT = 3,   /* restore: missing cgroups are created with their properties */
	CG_MODE_FULL = 4,   /* restore: every cgroup gets its properties, created or not */
	CG_MODE_STRICT = 5, /* restore: every cgroup must be created: none may exist */
};

/* --cgroup-root [CTRL:]PATH: CTRL NULL for every hierarchy. */
struct cgroup_root_opt {
	char *ctrl;
	char *path;
};

/* --external veth[INNER]:OUTER[@BRIDGE] (--veth-pair INNER=OUTER[@BRIDGE]). */
struct ext_veth {
	char *inner;  /* the link in the tree's net namespace, by its dumped name */
	char *outer;  /* its peer, created in criu's */
	char *bridge; /* NULL, or the bridge of criu's the outer end joins */
};

/*
 * --external macvlan[INNER]:OUTER (restore: the tree's macvlan link INNER on criu's link
 * OUTER) and netdev[INNER]:OUTER (restore: criu's link OUTER moved into the tree's
 * namespace as its link INNER).
 */
struct ext_link {
	char *inner; /* the link in the tree's net namespace, by its dumped name */
	char *outer; /* a link of criu's namespace */
};

/* --external mnt[A]:B (or -M A:B): dump, MOUNTPOINT and KEY; restore, KEY and PATH. */
struct ext_mount {
	char *key;
	char *val;
};

/* --lsm-profile TYPE:NAME: which TYPE (not given: the dumped labels are set). */
enum lsm_opt {
	LSM_OPT_IMAGE = 0, /* not given */
	LSM_OPT_NONE,	   /* none: no label is set */
	LSM_OPT_APPARMOR,
	LSM_OPT_SELINUX,
};

/* --cpu-cap: CRIU's bits (cpuinfo.img is written at dump and checked at restore with IMAGE). */
#define CPU_CAP_NONE	0u
#define CPU_CAP_FPU	(1u << 0) /* the FPU (xsave) features and size must be there */
#define CPU_CAP_CPU	(1u << 1) /* every CPUID feature bit must be the same */
#define CPU_CAP_INS	(1u << 2) /* the instruction-set feature bits must be there */
#define CPU_CAP_IMAGE	(1u << 3) /* write cpuinfo.img at dump, check it at restore */
#define CPU_CAP_ALL	(CPU_CAP_FPU | CPU_CAP_CPU | CPU_CAP_INS)
#define CPU_CAP_DEFAULT (CPU_CAP_FPU | CPU_CAP_INS)

struct cr_options {
	pid_t tree_pid;	      /* -t */
	char *imgs_dir;	      /* -D */
	char *work_dir;	      /* -W */
	char *log_file;	      /* -o */
	int loglevel;	      /* -v */
	bool log_pid;	      /* each restored task logs to LOG.PID */
	bool shell_job;	      /* -j */
	bool leave_running;   /* -R */
	bool leave_stopped;   /* -s: after dump or restore the tree is left stopped */
	bool restore_detach;  /* -d */
	bool restore_sibling; /* -S */
	char *pidfile;
	int timeout;  /* seconds; 0: none; -1: not given (dump: 10, restore: none) */
	char *libdir; /* -L */
	bool display_stats;
	int status_fd;	       /* -1: none */
	char **action_scripts; /* --action-script, in the order given */
	unsigned int nr_action_scripts;
	struct inherit_fd *inherit_fds;
	unsigned int nr_inherit_fds;
	bool link_remap; /* a file whose name was removed, other links left, is linked back */
	bool file_locks; /* dump the file locks the tree holds (restore takes them regardless) */
	bool tcp_established; /* established TCP connections are dumped (sk-tcp.c) */
	bool tcp_close;	      /* restore: established TCP connections come back closed */
	bool tcp_skip_in_flight; /* dump: connections not accepted yet are dropped */
	bool network_lock_skip; /* --network-lock skip: TCP peers outside the tree allowed */
	bool network_lock_nft;	/* --network-lock nftables (netlock-nft.c), else iptables */
	bool ext_unix_sk; /* -x: unix sockets may have peers outside the tree (sk-unix.c) */
	bool force_irmap; /* every watched inode gets a path in the images (irmap.h) */
	char **irmap_scan_paths; /* --irmap-scan-path, where irmap looks first */
	unsigned int nr_irmap_scan_paths;
	bool file_validation_size; /* --file-validation filesize: a size change fails restore */
	uint64_t ghost_limit;	   /* bytes of a deleted file's contents a dump may save */
	char *check_feature;	   /* check --feature */
	bool check_extra;	   /* check --extra (--all) */
	bool check_experimental;   /* check --experimental (--all) */
	bool pre_dump_read;	   /* --pre-dump-mode read (for pre-dump) */
	bool track_mem;		   /* --track-mem */
	bool mntns_compat_mode;	   /* --mntns-compat-mode */
	char *prev_images_dir;	   /* --prev-images-dir, relative to -D */
	bool auto_dedup;	   /* --auto-dedup */
	bool lazy_pages;	   /* restore: private memory comes from `criu lazy-pages` (uffd.h) */
	bool use_page_server;	   /* dump: pages go to the page server (page-server.h) */
	char *ps_address;	   /* --address of the page server; NULL: page-server listens on all */
	unsigned int ps_port;	   /* --port of the page server; 0: not given */
	bool no_default_config;
	char *config_file; /* --config */
	enum cg_mode manage_cgroups; /* default soft, as upstream */
	struct cgroup_root_opt *cgroup_roots; /* --cgroup-root, in the order given */
	unsigned int nr_cgroup_roots;
	char *cgroup_yard;   /* hierarchies mounted there, not by criu */
	char *freeze_cgroup; /* dump freezes the tree through this freezer cgroup */
	struct ext_veth *ext_veths;
	unsigned int nr_ext_veths;
	struct ext_link *ext_macvlans;
	unsigned int nr_ext_macvlans;
	struct ext_link *ext_netdevs;
	unsigned int nr_ext_netdevs;
	bool empty_ns_net; /* --empty-ns net: the tree's net namespace is neither dumped nor filled */
	/*
	 * --join-ns KIND:PATH (or KIND:PID, kept as /proc/PID/ns/KIND): the tree is restored
	 * into that existing namespace of the kind, whose state the images do not replace.
	 */
	struct {
		char *net, *uts, *ipc, *time;
	} join_ns;
	char *root;	   /* -r, real path; NULL: not given */
	struct ext_mount *ext_mounts;
	unsigned int nr_ext_mounts;
	bool orphan_pts_master; /* RPC only: a pty slave without its master comes back on a new
				 * pty, whose master goes to the client (tty.c) */
	bool ext_mount_auto; /* --external mnt[] (mnt[]:m, mnt[]:s): external mounts found at dump */
	char **skip_mnts;    /* --skip-mnt: dump leaves these mount points (and those below) out */
	unsigned int nr_skip_mnts;
	char **enable_fs; /* --enable-fs: dump records mounts of these types as mounted anew */
	unsigned int nr_enable_fs;
	bool enable_fs_all;	  /* --enable-fs all */
	char *lsm_mount_context;  /* --lsm-mount-context: context= of the mounts made anew */
	bool skip_file_rwx_check; /* restore: a reopened file's rwx bits may differ */
	bool weak_sysctls;    /* restore: a sysctl the kernel lacks is skipped, with a warning */
	bool evasive_devices; /* dump: a device file may be reopened by another path */
	enum lsm_opt lsm_profile_kind; /* --lsm-profile TYPE:NAME: TYPE */
	char *lsm_profile;	       /* NAME (NULL for none:) */
	unsigned int cpu_cap;	       /* --cpu-cap: CPU_CAP_* */
};

extern struct cr_options opts;

/* Upstream's default for --ghost-limit: 1 MiB. */
#define DEFAULT_GHOST_LIMIT (1ULL << 20)
/* Upstream's default for --timeout on dump: seconds to seize the tree. */
#define DEFAULT_DUMP_TIMEOUT 10

/*
 * Reads the configuration files and the command line into opts. Returns the index in
 * argv of the first positional argument (the command), or -1 after one error line on
 * stderr. -h and -V print and exit(0).
 */
int parse_options(int argc, char **argv);
/*
 * Applies one option by its long name ("tcp-established", "no-shell-job", "external"), as
 * the command line would, refusals included; arg NULL for none. 0, or -1 after one error
 * line (parse_error_line()). "config" reads that configuration file, if there is one.
 */
int opts_apply(const char *long_name, const char *arg);
/* The --external veth[] given for the link inner, or NULL. */
const struct ext_veth *opts_ext_veth(const char *inner);
/* The --external macvlan[] (netdev[]) given for the link inner, or NULL. */
const struct ext_link *opts_ext_macvlan(const char *inner);
const struct ext_link *opts_ext_netdev(const char *inner);
/* Whether --skip-mnt names this mount point (as the tree's mountinfo shows it). */
bool opts_skip_mnt(const char *mountpoint);
/* Whether --enable-fs names this filesystem type (or all). */
bool opts_fs_enabled(const char *fstype);
/* The error line parse_options() printed last ("" when none), for the log file. */
const char *parse_error_line(void);
/* The usage text of criu --help, options from the table. */
void print_usage(void);

#endif
