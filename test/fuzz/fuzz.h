/*
 * What every fuzz target shares (harness.c): a scratch images directory that
 * images_dir_fd points at, criu's log sent to /dev/null, and the after-input checks.
 */
#ifndef CR_FUZZ_H
#define CR_FUZZ_H

#include <stddef.h>

/* The scratch images dir's absolute path (what images_dir_fd is open on). */
const char *fuzz_images_dir(void);
/* Put (or replace) a file in the scratch images dir. Aborts if it cannot: the harness is broken. */
void fuzz_put_image(const char *name, const void *data, size_t len);
/* Remove a file from the scratch images dir, if there. */
void fuzz_remove_image(const char *name);
/* Call around each input: the end aborts when the reader left a file descriptor open. */
void fuzz_fds_begin(void);
void fuzz_fds_end(void);

#endif
