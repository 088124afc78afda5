/*
 * What every fuzz target shares (harness.c): a scratch images directory that
 * images_dir_fd points at, criu's log sent to /dev/null, and the after-input checks.
 */
#ifndef CR_FUZZ_H
#define CR_FUZZ_H

#include <stdbool.h>
#include <stddef.h>

#include "image.h"

/* The scratch images dir's absolute path (what images_dir_fd is open on). */
const char *fuzz_images_dir(void);
/*
 * Every target's input is a sequence of image files, each introduced by FUZZ_FILE_MARK and
 * its name ('\0'-terminated), its contents running to the next mark; a file's name gives
 * its image type (so a corpus stays valid when enum cr_img_type changes). A name may end
 * in "@SIZE" (decimal, at most FUZZ_MAX_FILE_SIZE): the file is then extended with zeros
 * to SIZE bytes, so page images, whose contents no collect function reads, cost the input
 * nothing. Names that are not plain file names ([a-z0-9.-], under 64 bytes) are skipped.
 * pack-images.sh makes such inputs from a dump.
 */
#define FUZZ_FILE_MARK "\0CRFUZZ\0"
#define FUZZ_FILE_MARK_LEN 8
#define FUZZ_MAX_FILE_SIZE (64u << 20)
/* Put the files of such an input into the scratch images dir. */
void fuzz_put_images(const void *data, size_t size);
/* The image type and id whose file is called name ("NAME@SIZE" too); false if none. */
bool fuzz_image_type(const char *name, enum cr_img_type *type, unsigned long *id);
/* fn(type, id) for each file of the scratch images dir that is an image. */
void fuzz_for_each_image(void (*fn)(enum cr_img_type type, unsigned long id));
/* Empty the scratch images dir. */
void fuzz_clear_images(void);

/* Call around each input: the end aborts when the reader left a file descriptor open. */
void fuzz_fds_begin(void);
void fuzz_fds_end(void);

#endif
