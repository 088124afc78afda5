/*
 * --action-script: user scripts run at fixed points of dump and restore, told where
 * they are by CRTOOLS_SCRIPT_ACTION, as CRIU runs them.
 */
#ifndef CR_ACTION_SCRIPTS_H
#define CR_ACTION_SCRIPTS_H

#include <sys/types.h>

/*
 * The points CRIU runs scripts (or sends RPC notifications) at, with CRIU's names
 * (action_script_name()).
 */
enum script_action {
	ACT_PRE_DUMP,	       /* before the tree is seized */
	ACT_NET_LOCK,	       /* dump: the tree's own net namespace is about to be locked */
	ACT_POST_DUMP,	       /* every image written, the tree still frozen */
	ACT_NET_UNLOCK,	       /* the tree's own net namespace was unlocked (dump or restore) */
	ACT_PRE_RESTORE,       /* before the images are read */
	ACT_SETUP_NS,	       /* the root forked, its namespaces made, nothing restored in them */
	ACT_POST_SETUP_NS,     /* right after setup-namespaces */
	ACT_POST_RESTORE,      /* every task restored and held before its own code */
	ACT_PRE_RESUME,	       /* just before the tasks are let go */
	ACT_POST_RESUME,       /* the tasks run */
	ACT_ORPHAN_PTS_MASTER, /* restore: a new pty's master, for the RPC client (tty.c) */
	ACT_STATUS_READY,      /* a daemon (page-server) is ready, where --status-fd is told */
	ACT_MAX,
};

/*
 * Runs every --action-script, in the order given, with CRTOOLS_SCRIPT_ACTION,
 * CRTOOLS_IMAGE_DIR (the images dir as criu holds it open) and, when init_pid is not 0,
 * CRTOOLS_INIT_PID (the root of the tree). 0 when each exited 0; else -1, logged once.
 * With a notifier set, the notifier is called instead (as CRIU's RPC replaces scripts).
 */
int run_action_scripts(enum script_action action, pid_t init_pid);

/*
 * A point that hands a descriptor on (orphan-pts-master): to the notifier only, as CRIU
 * passes it only over its RPC; without one, nothing is run. 0 or -1 (logged).
 */
int run_action_scripts_fd(enum script_action action, pid_t init_pid, int fd);

/* CRIU's name of a point ("post-dump"). */
const char *action_script_name(enum script_action action);

/*
 * A layer above (the RPC service) that hears of every point instead of the scripts:
 * fd is a descriptor to hand over with it, or -1. 0 to go on, else -1 (logged by it).
 */
typedef int (*action_notifier_t)(enum script_action action, pid_t init_pid, int fd);
void action_scripts_set_notifier(action_notifier_t notifier);

#endif
