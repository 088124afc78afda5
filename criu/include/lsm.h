#ifndef CR_LSM_H__
#define CR_LSM_H__

#include <sys/types.h>

#include "creds.pb-c.h"
#include "inventory.pb-c.h"

/* The LSM that labels tasks on this kernel (NO_LSM, SELINUX, APPARMOR); <0 for one unknown. */
int lsm_host_kind(Lsmtype *kind);
/* Dump: the task's labels into its creds (nothing where no LSM labels tasks). */
int lsm_dump_task(pid_t pid, CredsEntry *ce);
void lsm_free_creds(CredsEntry *ce);
/* Restore: 0 if a task restored by this criu gets the labels the image recorded. */
int lsm_check_restorable(const CredsEntry *ce, const char *img);

#endif
