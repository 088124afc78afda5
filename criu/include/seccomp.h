/*
 * Seccomp: each thread's mode (strict or filter) and its filters, in CRIU's format:
 * seccomp.img holds every thread's chain, the newest filter first, and a thread's
 * seccomp_filter names its oldest filter, whose prev names the next newer one, and so
 * on to the newest (which has no prev).
 */
#ifndef CR_SECCOMP_H
#define CR_SECCOMP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.pb-c.h"

/*
 * Dump, the thread seized and stopped: its mode from /proc, its filters with
 * PTRACE_SECCOMP_GET_FILTER and their flags with PTRACE_SECCOMP_GET_METADATA into the
 * table seccomp_dump_write() writes. 0 or -errno after one line.
 */
int seccomp_dump_thread(pid_t tid, ThreadCoreEntry *tc);
/* Dump, after every task: seccomp.img, when some thread has filters. 0 or -errno. */
int seccomp_dump_write(void);
void seccomp_dump_fini(void);

/* Restore: one filter of seccomp.img, decoded. */
struct seccomp_filter_image {
	const uint8_t *prog; /* struct sock_filter[len / 8] */
	uint32_t len;
	uint32_t flags; /* SECCOMP_FILTER_FLAG_* to install it with */
};

/* Restore, main process, before the tasks' images: seccomp.img, if there is one. */
int seccomp_collect(void);
void seccomp_collect_fini(void);
/*
 * A thread's mode and seccomp_filter from its core: *chain (malloc'ed) gets the filter
 * indices oldest first, *nr how many. 0 or -errno after one line naming img.
 */
int seccomp_thread_chain(bool has_mode, SeccompMode mode, bool has_filter, uint32_t filter,
			 uint32_t **chain, uint32_t *nr, const char *img);
const struct seccomp_filter_image *seccomp_filter_at(uint32_t idx);

struct task_image;
struct rst_args;
struct rst_thread;
/* Bytes the restorer region needs for the task's filters (seccomp_fill_region()). */
size_t seccomp_region_size(const struct task_image *ti);
/*
 * In the task, filling its region: the filters of every thread at dst (at dst_addr in
 * the task), each thread's part of threads[], the shared prefix and the capabilities
 * kept until the filters are in (rst_creds.keep_caps) in args.
 */
void seccomp_fill_region(const struct task_image *ti, void *dst, uint64_t dst_addr,
			 struct rst_args *args, struct rst_thread *threads);

#endif
