/* Kernel features the pipelines probe at run time (criu check reports them too). */
#ifndef CR_KERNDAT_H
#define CR_KERNDAT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>

/*
 * Sets a timerfd's unread expirations; there with CONFIG_CHECKPOINT_RESTORE. From
 * linux/timerfd.h, which clashes with glibc's sys/timerfd.h.
 */
#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

/* Is clone3() with set_tid available (restore with original pids)? */
bool kerndat_has_clone3_set_tid(void);

/*
 * A feature probe that changes a net namespace: probe() runs in a child, in a scratch net
 * namespace of its own, so that neither criu nor its namespace keeps anything of it.
 * Whether the child ran and probe() said yes.
 */
bool probe_in_scratch_netns(bool (*probe)(void));

#endif
