/*
 * Whole reads and writes of a file at an offset (amdgpu_file_io.h). No dependency beyond
 * libc: the plugin and the KFD emulator's copy engine (test/gpu) both build it.
 */
#include <errno.h>
#include <unistd.h>

#include "amdgpu_file_io.h"

int amdgpu_file_io(int file_fd, void *buf, uint64_t len, uint64_t off, bool read_file)
{
	while (len) {
		ssize_t done =
			read_file ? pread(file_fd, buf, len, off) : pwrite(file_fd, buf, len, off);

		if (done < 0 && errno == EINTR)
			continue;
		if (done < 0)
			return -errno;
		/* A short image: it was truncated. */
		if (done == 0)
			return -ENODATA;
		buf = (char *)buf + done;
		len -= done;
		off += done;
	}
	return 0;
}
