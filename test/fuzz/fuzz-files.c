/*
 * Fuzz target for restore's decoding of the files, as the restore reads them before
 * forking: pstree_read(), files_collect() (files.img, fdinfo-*.img and the kinds' own
 * images), file_locks_collect() (filelocks.img), then the _fini()s, pstree_free().
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "cr_options.h"
#include "file-lock.h"
#include "files.h"
#include "fuzz.h"
#include "kinds.h"
#include "pstree.h"

/*
 * A terminal's entry is collected only for a shell job, on the terminal criu's stdio is
 * on: stdin becomes a pty of our own, so that part runs whatever the fuzzer's stdin is.
 */
static void become_shell_job(void)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), slave = -1;

	opts.shell_job = true;
	if (master >= 0 && !grantpt(master) && !unlockpt(master))
		slave = open(ptsname(master), O_RDWR | O_NOCTTY);
	if (slave >= 0 && slave != STDIN_FILENO) {
		dup2(slave, STDIN_FILENO);
		close(slave);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool shell_job;

	if (!shell_job) {
		become_shell_job();
		register_kinds(); /* as criu's main() does */
		shell_job = true;
	}
	fuzz_put_images(data, size);
	fuzz_fds_begin();
	if (!pstree_read()) {
		if (!files_collect())
			file_locks_collect();
		file_locks_collect_fini();
		files_collect_fini();
		pstree_free();
	}
	fuzz_fds_end();
	fuzz_clear_images();
	return 0;
}
