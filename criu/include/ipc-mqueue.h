#ifndef CR_IPC_MQUEUE_H
#define CR_IPC_MQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "ext.pb-c.h"

/*
 * POSIX message queues of an IPC namespace (ipc-mqueue.c). Dump: in a process that has
 * joined the namespace (and the tree's user namespace), which it leaves with a mount
 * namespace of its own. Restore: collect in the main process, restore in the root task,
 * in the new namespace. 0 or -errno after one line naming the queue.
 */
int posix_mq_dump(uint32_t ns_id);
int posix_mq_collect(uint32_t ns_id, CrPosixMqEntry ***mqs, size_t *nr);
int posix_mq_restore(CrPosixMqEntry *const *mqs, size_t nr);
void posix_mq_free(CrPosixMqEntry **mqs, size_t nr);

#endif
