/*
 * stats-dump and stats-restore: written from what the pipelines measured, printed back
 * from the files for --display-stats, so what is shown is what was stored. They live in
 * the work directory (-W, the images directory without it), where CRIU puts them: runc
 * and podman read them there (podman's checkpoint archive takes work/stats-dump).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>

#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "stats.h"
#include "stats.pb-c.h"

/* stats_entry holds times as u32 microseconds. */
static uint32_t usec32(uint64_t us)
{
	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* The stats file of kind type in the work directory, opened with flags. */
static struct cr_img *open_stats(enum cr_img_type type, int flags)
{
	struct cr_img *img;
	int dir;

	if (!opts.work_dir)
		return open_image(type, flags, 0);
	dir = open(opts.work_dir, O_DIRECTORY | O_PATH | O_CLOEXEC);
	if (dir < 0) {
		pr_perror("cannot open the work directory %s", opts.work_dir);
		return NULL;
	}
	img = open_image_at(dir, type, flags, 0);
	close(dir);
	return img;
}

static int write_stats(enum cr_img_type type, const StatsEntry *se)
{
	struct cr_img *img = open_stats(type, O_WRONLY);
	int ret;

	if (!img)
		return -EIO;
	ret = pb_write_one(img, se);
	close_image(img);
	return ret;
}

int write_dump_stats(const struct dump_stats_info *info)
{
	DumpStatsEntry ds = DUMP_STATS_ENTRY__INIT;
	StatsEntry se = STATS_ENTRY__INIT;

	ds.freezing_time = usec32(info->freezing_us);
	ds.frozen_time = usec32(info->frozen_us);
	ds.memdump_time = usec32(info->memdump_us);
	ds.memwrite_time = usec32(info->memwrite_us);
	ds.pages_scanned = info->pages_scanned;
	ds.pages_skipped_parent = info->pages_in_parent;
	ds.pages_written = info->pages_written;
	ds.pages_lazy = info->pages_lazy;
	ds.has_shpages_scanned = ds.has_shpages_skipped_parent = ds.has_shpages_written = true;
	ds.shpages_scanned = info->shpages_scanned;
	ds.shpages_skipped_parent = 0;
	ds.shpages_written = info->shpages_written;
	se.dump = &ds;
	return write_stats(CR_IMG_STATS_DUMP, &se);
}

int write_restore_stats(const struct restore_stats_info *info)
{
	RestoreStatsEntry rs = RESTORE_STATS_ENTRY__INIT;
	StatsEntry se = STATS_ENTRY__INIT;

	rs.pages_compared = 0;
	rs.pages_skipped_cow = 0;
	rs.forking_time = usec32(info->forking_us);
	rs.restore_time = usec32(info->restore_us);
	rs.has_pages_restored = true;
	rs.pages_restored = info->pages_restored;
	se.restore = &rs;
	return write_stats(CR_IMG_STATS_RESTORE, &se);
}

static int read_stats(enum cr_img_type type, StatsEntry **se)
{
	struct cr_img *img = open_stats(type, O_RDONLY);
	int ret;

	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)se);
	close_image(img);
	return ret;
}

static void print_pages(const char *what, uint64_t nr)
{
	pr_msg("%s: %" PRIu64 " (0x%" PRIx64 ")\n", what, nr, nr);
}

int display_dump_stats(void)
{
	const DumpStatsEntry *ds;
	StatsEntry *se;
	int ret;

	ret = read_stats(CR_IMG_STATS_DUMP, &se);
	if (ret)
		return ret;
	ds = se->dump;
	if (!ds) {
		pr_err("stats-dump holds no dump stats\n");
		pb_free(NULL, se);
		return -EINVAL;
	}
	pr_msg("Displaying dump stats:\n");
	pr_msg("Freezing time: %u us\n", ds->freezing_time);
	pr_msg("Frozen time: %u us\n", ds->frozen_time);
	pr_msg("Memory dump time: %u us\n", ds->memdump_time);
	pr_msg("Memory write time: %u us\n", ds->memwrite_time);
	print_pages("Memory pages scanned", ds->pages_scanned);
	print_pages("Memory pages skipped from parent", ds->pages_skipped_parent);
	print_pages("Memory pages written", ds->pages_written);
	print_pages("Lazy memory pages", ds->pages_lazy);
	if (ds->has_shpages_scanned)
		print_pages("Shared memory pages scanned", ds->shpages_scanned);
	if (ds->has_shpages_written)
		print_pages("Shared memory pages written", ds->shpages_written);
	pb_free(NULL, se);
	return 0;
}

int display_restore_stats(void)
{
	const RestoreStatsEntry *rs;
	StatsEntry *se;
	int ret;

	ret = read_stats(CR_IMG_STATS_RESTORE, &se);
	if (ret)
		return ret;
	rs = se->restore;
	if (!rs) {
		pr_err("stats-restore holds no restore stats\n");
		pb_free(NULL, se);
		return -EINVAL;
	}
	pr_msg("Displaying restore stats:\n");
	print_pages("Pages compared", rs->pages_compared);
	print_pages("Pages skipped COW", rs->pages_skipped_cow);
	if (rs->has_pages_restored)
		print_pages("Pages restored", rs->pages_restored);
	pr_msg("Restore time: %u us\n", rs->restore_time);
	pr_msg("Forking time: %u us\n", rs->forking_time);
	pb_free(NULL, se);
	return 0;
}
