/*
 * Fuzz target for --display-stats (stats.c): the first input byte picks stats-dump (even)
 * or stats-restore (odd), the rest is that file, decoded and printed as CRIU prints it.
 */
#include <stdint.h>

#include "fuzz.h"
#include "image.h"
#include "stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool dump = size && !(data[0] & 1);
	enum cr_img_type type = dump ? CR_IMG_STATS_DUMP : CR_IMG_STATS_RESTORE;
	char name[64];

	if (!size)
		return 0;
	img_name(type, 0, name, sizeof(name));
	fuzz_put_image(name, data + 1, size - 1);
	fuzz_fds_begin();
	if (dump)
		display_dump_stats();
	else
		display_restore_stats();
	fuzz_fds_end();
	fuzz_remove_image(name);
	return 0;
}
