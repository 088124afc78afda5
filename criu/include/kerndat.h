/* Kernel features criu relies on, probed once (criu check). */
#ifndef CR_KERNDAT_H
#define CR_KERNDAT_H

#include <stdbool.h>

/* Is clone3() with set_tid available (restore with original pids)? */
bool kerndat_has_clone3_set_tid(void);

#endif
