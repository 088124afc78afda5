#ifndef CRIU_LOGINUID_H
#define CRIU_LOGINUID_H

#include <stdbool.h>

#include "task-image.h"

/* check --feature loginuid: criu can write its own /proc/self/loginuid back. */
bool kerndat_has_loginuid(void);
/*
 * Restore, criu's main process, before the root is forked: where a task's dumped loginuid
 * is not criu's, criu's own is unset, for every task to inherit and set to its own
 * (loginuid_restore()). 0 or -errno, after one line.
 */
int loginuid_restore_prepare(void);
/* Restore, in the task, once its children are forked: its dumped loginuid. */
int loginuid_restore(const struct task_image *ti);

#endif
