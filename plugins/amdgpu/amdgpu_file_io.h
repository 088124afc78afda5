/*
 * Whole reads and writes of a file at an offset, for the plugin's images and copies (and
 * the KFD emulator's copy engine, which builds this file too).
 */
#ifndef AMDGPU_FILE_IO_H
#define AMDGPU_FILE_IO_H

#include <stdbool.h>
#include <stdint.h>

/*
 * len bytes of a file at off, read into buf (read_file) or written from it, looping over
 * short transfers. -ENODATA when the file ends first: an image that was truncated.
 */
int amdgpu_file_io(int file_fd, void *buf, uint64_t len, uint64_t off, bool read_file);

#endif
