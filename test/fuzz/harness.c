/*
 * The fuzz harness every target links: libFuzzer's init makes a scratch images dir under
 * $TMPDIR (removed at exit), points images_dir_fd at it and silences criu's log.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "image.h"
#include "log.h"

static char scratch_dir[PATH_MAX];
/*
 * The lowest free fd when the input started: a reader that leaks one moves it. (libFuzzer
 * itself opens fds between inputs, e.g. for its symbolizer, so it is taken per input.)
 */
static int lowest_free_fd;

static void die(const char *what)
{
	fprintf(stderr, "fuzz harness: %s: %s\n", what, strerror(errno));
	abort();
}

const char *fuzz_images_dir(void)
{
	return scratch_dir;
}

void fuzz_put_image(const char *name, const void *data, size_t len)
{
	int fd = openat(images_dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const char *p = data;

	if (fd < 0)
		die(name);
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			die(name);
		p += n;
		len -= n;
	}
	close(fd);
}

void fuzz_remove_image(const char *name)
{
	if (unlinkat(images_dir_fd, name, 0) && errno != ENOENT)
		die(name);
}

static int lowest_free(void)
{
	int fd = open("/dev/null", O_RDONLY);

	if (fd < 0)
		die("/dev/null");
	close(fd);
	return fd;
}

void fuzz_fds_begin(void)
{
	lowest_free_fd = lowest_free();
}

void fuzz_fds_end(void)
{
	int fd = lowest_free();

	if (fd != lowest_free_fd) {
		fprintf(stderr, "fuzz harness: the reader leaked a file descriptor (lowest free fd %d, was %d)\n",
			fd, lowest_free_fd);
		abort();
	}
}

static void remove_scratch_dir(void)
{
	DIR *dir = fdopendir(images_dir_fd);
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(images_dir_fd, de->d_name, 0);
	closedir(dir);
	rmdir(scratch_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	char resolved[PATH_MAX];
	int null_fd;

	(void)argc;
	(void)argv;
	snprintf(scratch_dir, sizeof(scratch_dir), "%s/criu-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch_dir))
		die(scratch_dir);
	/* The write guard compares absolute paths. */
	if (!realpath(scratch_dir, resolved))
		die(scratch_dir);
	strcpy(scratch_dir, resolved);
	images_dir_fd = open(scratch_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (images_dir_fd < 0)
		die(scratch_dir);
	atexit(remove_scratch_dir);

	/* Every level, so each message's format is exercised; none of it reaches the terminal. */
	log_init(-1, NULL, LOG_DEBUG);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0)
		die("/dev/null");
	log_set_task_fd(null_fd);
	return 0;
}
