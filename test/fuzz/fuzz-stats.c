/*
 * Fuzz target for --display-stats (stats.c): stats-dump and stats-restore of the input
 * decoded and printed as CRIU prints them.
 */
#include <stdint.h>

#include "fuzz.h"
#include "image.h"
#include "stats.h"

static void display_stats(enum cr_img_type type, unsigned long id)
{
	(void)id;
	if (type == CR_IMG_STATS_DUMP)
		display_dump_stats();
	else if (type == CR_IMG_STATS_RESTORE)
		display_restore_stats();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_put_images(data, size);
	fuzz_fds_begin();
	fuzz_for_each_image(display_stats);
	fuzz_fds_end();
	fuzz_clear_images();
	return 0;
}
