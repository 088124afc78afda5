/*
 * --action-script: user scripts run at fixed points of dump and restore, told where
 * they are by CRTOOLS_SCRIPT_ACTION, as CRIU runs them.
 */
#ifndef CR_ACTION_SCRIPTS_H
#define CR_ACTION_SCRIPTS_H

#include <sys/types.h>

/*
 * The points this criu runs scripts at. CRIU's others (network-lock, network-unlock,
 * post-setup-namespaces, orphan-pts-master) belong to state this criu does not lock or
 * restore (the network during a dump, orphaned ptys) and are never run.
 */
enum script_action {
	ACT_PRE_DUMP,	  /* before the tree is seized */
	ACT_POST_DUMP,	  /* every image written, the tree still frozen */
	ACT_PRE_RESTORE,  /* before the images are read */
	ACT_SETUP_NS,	  /* the root forked into a net namespace of its own (--empty-ns net) */
	ACT_POST_RESTORE, /* every task restored and held before its own code */
	ACT_PRE_RESUME,	  /* just before the tasks are let go */
	ACT_POST_RESUME,  /* the tasks run */
};

/*
 * Runs every --action-script, in the order given, with CRTOOLS_SCRIPT_ACTION,
 * CRTOOLS_IMAGE_DIR (the images dir as criu holds it open) and, when init_pid is not 0,
 * CRTOOLS_INIT_PID (the root of the tree). 0 when each exited 0; else -1, logged once.
 */
int run_action_scripts(enum script_action action, pid_t init_pid);

#endif
