/*
 * A big private buffer restored lazily is word for word what was dumped: read at once
 * after the restore (racing the lazy-pages daemon's background copy), and again at the
 * end. ZDTM_LAZY_MIB sets its size (default 256 MiB).
 */
#include <stdlib.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	const char *mib = getenv("ZDTM_LAZY_MIB");
	size_t size = (mib ? strtoul(mib, NULL, 10) : 256) << 20;
	unsigned char *buf;

	test_init(argc, argv);
	buf = test_map_pattern(size, 7);

	test_ready();
	if (test_wait_lazy_restore(buf + size - 1))
		pattern_expect(buf, size, 7, "buffer read while its pages came in");
	test_wait_sigterm();
	pattern_expect(buf, size, 7, "buffer");
	test_pass();
}
