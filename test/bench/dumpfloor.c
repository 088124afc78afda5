/*
 * Benchmark floor of a dump: the number of bytes a dump wrote, written sequentially like
 * dd, 1 MiB at a time from one buffer, into a new file left in the page cache as a dump's
 * images are; prints the seconds from open to close. Usage: dumpfloor FILE BYTES.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WRITE_CHUNK (1ul << 20)

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Writes size bytes, the buffer over and over, to fd; 0 or -errno (reported). */
static int write_all(int fd, const char *mem, size_t size, const char *path)
{
	size_t done = 0;

	while (done < size) {
		size_t left = size - done;
		ssize_t n = write(fd, mem, left < WRITE_CHUNK ? left : WRITE_CHUNK);

		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			fprintf(stderr, "dumpfloor: %s: write at %zu: %s\n", path, done, strerror(err));
			return -err;
		}
		done += n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t size;
	double start, elapsed;
	char *mem;
	int fd, ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s FILE BYTES\n", argv[0]);
		return 2;
	}
	size = strtoull(argv[2], NULL, 0);
	mem = malloc(WRITE_CHUNK);
	if (!mem) {
		fprintf(stderr, "dumpfloor: no memory for the buffer\n");
		return 1;
	}
	for (size_t i = 0; i < WRITE_CHUNK / sizeof(size_t); i++)
		((size_t *)mem)[i] = i + 1;
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "dumpfloor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	start = now_seconds();
	ret = write_all(fd, mem, size, argv[1]);
	/* Opening and closing are part of it, as a dump opens and closes its images. */
	close(fd);
	elapsed = now_seconds() - start;
	free(mem);
	if (ret)
		return 1;
	printf("%.3f\n", elapsed);
	return 0;
}
