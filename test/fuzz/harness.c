/*
 * The harness every target links: libFuzzer's init makes a scratch images dir (removed at
 * exit), points images_dir_fd at it and silences criu's log; helpers put inputs there.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
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

/* Put (or replace) a file in the scratch images dir. */
static void put_image(const char *name, const void *data, size_t len)
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

static void remove_image(const char *name)
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
		fprintf(stderr, "fuzz harness: the reader leaked a file descriptor "
			"(lowest free fd %d, was %d)\n", fd, lowest_free_fd);
		abort();
	}
}

static bool plain_image_name(const char *name, size_t len)
{
	if (!len || len >= 64 || !(isdigit((unsigned char)name[0]) || islower((unsigned char)name[0])))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)name[i]) && !islower((unsigned char)name[i]) &&
		    name[i] != '.' && name[i] != '-')
			return false;
	return true;
}

/* One file of a multi-image input: "NAME" or "NAME@SIZE". */
static void put_packed_file(const char *header, const char *data, size_t len)
{
	const char *at = strchr(header, '@');
	size_t name_len = at ? (size_t)(at - header) : strlen(header);
	char name[64], *end;
	unsigned long long size = 0;
	int fd;

	if (!plain_image_name(header, name_len))
		return;
	if (at) {
		errno = 0;
		size = strtoull(at + 1, &end, 10);
		if (errno || end == at + 1 || *end || size > FUZZ_MAX_FILE_SIZE)
			return;
	}
	memcpy(name, header, name_len);
	name[name_len] = '\0';
	put_image(name, data, len);
	if (size > len) {
		fd = openat(images_dir_fd, name, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || ftruncate(fd, size))
			die(name);
		close(fd);
	}
}

void fuzz_put_images(const void *data, size_t size)
{
	const char *p = memmem(data, size, FUZZ_FILE_MARK, FUZZ_FILE_MARK_LEN);
	const char *end = (const char *)data + size;

	while (p) {
		const char *header = p + FUZZ_FILE_MARK_LEN;
		const char *header_end = memchr(header, '\0', end - header);
		const char *next;

		if (!header_end)
			return;
		next = memmem(header_end + 1, end - header_end - 1, FUZZ_FILE_MARK, FUZZ_FILE_MARK_LEN);
		put_packed_file(header, header_end + 1, (next ? next : end) - header_end - 1);
		p = next;
	}
}

bool fuzz_image_type(const char *name, enum cr_img_type *type, unsigned long *id)
{
	char plain[64], again[64];
	size_t len = strcspn(name, "@");

	if (len >= sizeof(plain))
		return false;
	memcpy(plain, name, len);
	plain[len] = '\0';
	for (int t = 0; t < CR_IMG_MAX; t++) {
		const char *fmt = cr_img_descs[t].fmt, *conv = strchr(fmt, '%');

		*id = 0;
		if (conv && !strncmp(plain, fmt, conv - fmt))
			*id = strtoul(plain + (conv - fmt), NULL, conv[2] == 'x' ? 16 : 10);
		img_name(t, *id, again, sizeof(again));
		if (!strcmp(plain, again)) {
			*type = t;
			return true;
		}
	}
	return false;
}

/* A new open file description: a dup of images_dir_fd would share its position. */
static DIR *open_scratch_dir(void)
{
	int fd = openat(images_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);

	if (!dir)
		die(scratch_dir);
	return dir;
}

void fuzz_for_each_image(void (*fn)(enum cr_img_type type, unsigned long id))
{
	DIR *dir = open_scratch_dir();
	enum cr_img_type type;
	unsigned long id;
	struct dirent *de;

	while ((de = readdir(dir)))
		if (fuzz_image_type(de->d_name, &type, &id))
			fn(type, id);
	closedir(dir);
}

void fuzz_clear_images(void)
{
	DIR *dir = open_scratch_dir();
	struct dirent *de;

	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			remove_image(de->d_name);
	closedir(dir);
}

static void remove_scratch_dir(void)
{
	fuzz_clear_images();
	rmdir(scratch_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	char resolved[PATH_MAX];
	int null_fd;

	(void)argc;
	(void)argv;
	/* tmpfs: on a disk filesystem, writing each input's files costs ten times the run. */
	if (!tmp || !*tmp)
		tmp = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
	snprintf(scratch_dir, sizeof(scratch_dir), "%s/criu-fuzz-XXXXXX", tmp);
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

	/*
	 * Every level, so each message's format is exercised; to /dev/null, or to stderr with
	 * FUZZ_LOG=1 set (to see why an input fails, e.g. when replaying a reproducer).
	 */
	if (getenv("FUZZ_LOG"))
		return log_init(-1, "-", LOG_DEBUG);
	log_init(-1, NULL, LOG_DEBUG);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0)
		die("/dev/null");
	log_set_task_fd(null_fd);
	return 0;
}
