/*
 * stats-dump and stats-restore (images/stats.proto): what a dump or restore did and how
 * long it took. Written at the end of every successful run; --display-stats prints the
 * image just written.
 */
#ifndef CR_STATS_H
#define CR_STATS_H

#include <stdint.h>

/* Times in microseconds. */
struct dump_stats_info {
	uint64_t freezing_us; /* seizing the tree */
	uint64_t frozen_us; /* from the tree's seizure to its release */
	uint64_t memdump_us; /* collecting and writing memory */
	uint64_t memwrite_us; /* of which writing page data */
	uint64_t pages_scanned;
	uint64_t pages_written;
	uint64_t pages_in_parent;
	uint64_t pages_lazy; /* dump --lazy-pages: left in the tree */
	uint64_t shpages_scanned; /* shared memory objects' pages */
	uint64_t shpages_written;
};

struct restore_stats_info {
	uint64_t forking_us; /* from the start until every task is forked */
	uint64_t restore_us; /* from there until every task is parked, ready to go */
	uint64_t pages_restored;
};

/* 0 or -errno (logged). */
int write_dump_stats(const struct dump_stats_info *info);
int write_restore_stats(const struct restore_stats_info *info);

/* Print stats-dump / stats-restore of the images dir as CRIU does. 0 or -errno. */
int display_dump_stats(void);
int display_restore_stats(void);

#endif
