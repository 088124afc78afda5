/*
 * Freestanding helpers for the restorer blob (no libc): memory primitives the compiler
 * may call on its own, and logging to criu's log fd in the host's line format.
 */
#ifndef CR_PIE_LIB_H
#define CR_PIE_LIB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

void *memcpy(void *dst, const void *src, size_t len);
void *memset(void *dst, int byte, size_t len);

/* Log levels, as criu/include/log.h numbers them. */
#define RST_LOG_ERROR 1
#define RST_LOG_WARN 2
#define RST_LOG_INFO 3
#define RST_LOG_DEBUG 4

/*
 * Writes one line to log_fd when level <= loglevel. Formats: %d %u %ld %lu %x %lx %s %%
 * (l = 64 bit); enough for addresses, sizes and errnos.
 */
void rst_log(int log_fd, int loglevel, int pid, int level, const char *fmt, ...);

#endif
