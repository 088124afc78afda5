#ifndef CR_LSM_H__
#define CR_LSM_H__

#include <sys/types.h>

#include "restorer-args.h"

#include "creds.pb-c.h"
#include "inventory.pb-c.h"

/* The LSM that labels tasks on this kernel (NO_LSM, SELINUX, APPARMOR); <0 for one unknown. */
int lsm_host_kind(Lsmtype *kind);
/* Dump: the task's labels into its creds (nothing where no LSM labels tasks). */
int lsm_dump_task(pid_t pid, CredsEntry *ce);
void lsm_free_creds(CredsEntry *ce);
/*
 * Restore, before anything is created: the images' LSM (inventory.img) and --lsm-profile,
 * which must name the LSM this kernel runs (one error line otherwise).
 */
int lsm_restore_prepare(Lsmtype dumped_kind);
/* Restore: the labels the restorer sets for a task (restorer-args.h), or one error line. */
int lsm_restore_labels(const CredsEntry *ce, const char *img, struct rst_creds *rc);

#endif
