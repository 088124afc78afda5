/*
 * The write guard: in the fuzz build, criu's objects call these instead of the libc calls
 * that can change the filesystem (guard.syms renames them). A reader that writes outside
 * the scratch images dir aborts there, so libFuzzer keeps the input as a crash.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "image.h"

static bool has_dotdot(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")); p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return true;
	return false;
}

/* Whether dirfd/path names something inside the scratch images dir. */
static bool in_images_dir(int dirfd, const char *path)
{
	const char *dir = fuzz_images_dir();
	size_t len = strlen(dir);

	if (has_dotdot(path))
		return false;
	if (path[0] == '/')
		return !strncmp(path, dir, len) && (path[len] == '/' || path[len] == '\0');
	return dirfd == images_dir_fd;
}

static void check_write(const char *call, int dirfd, const char *path)
{
	if (in_images_dir(dirfd, path))
		return;
	fprintf(stderr, "fuzz guard: %s(\"%s\") writes outside the images dir %s\n", call, path,
		fuzz_images_dir());
	abort();
}

/* O_TMPFILE includes O_DIRECTORY: a directory opened to read is no write. */
static bool flags_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) ||
	       (flags & O_TMPFILE) == O_TMPFILE;
}

/* The mode argument exists only when O_CREAT or O_TMPFILE asks for one. */
static mode_t open_mode(int flags, va_list args)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(args, mode_t) : 0;
}

int fuzz_guard_open(const char *path, int flags, ...)
{
	va_list args;
	mode_t mode;

	va_start(args, flags);
	mode = open_mode(flags, args);
	va_end(args);
	if (flags_write(flags))
		check_write("open", AT_FDCWD, path);
	return open(path, flags, mode);
}

int fuzz_guard_openat(int dirfd, const char *path, int flags, ...)
{
	va_list args;
	mode_t mode;

	va_start(args, flags);
	mode = open_mode(flags, args);
	va_end(args);
	if (flags_write(flags))
		check_write("openat", dirfd, path);
	return openat(dirfd, path, flags, mode);
}

FILE *fuzz_guard_fopen(const char *path, const char *mode)
{
	if (strpbrk(mode, "wa+"))
		check_write("fopen", AT_FDCWD, path);
	return fopen(path, mode);
}

int fuzz_guard_mkdir(const char *path, mode_t mode)
{
	check_write("mkdir", AT_FDCWD, path);
	return mkdir(path, mode);
}

int fuzz_guard_rename(const char *from, const char *to)
{
	check_write("rename", AT_FDCWD, from);
	check_write("rename", AT_FDCWD, to);
	return rename(from, to);
}

int fuzz_guard_unlink(const char *path)
{
	check_write("unlink", AT_FDCWD, path);
	return unlink(path);
}

int fuzz_guard_unlinkat(int dirfd, const char *path, int flags)
{
	check_write("unlinkat", dirfd, path);
	return unlinkat(dirfd, path, flags);
}
