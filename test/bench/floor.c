/*
 * Benchmark floor: read page images into fresh anonymous memory with preadv from one
 * thread, as a restorer that does nothing cleverer would; prints the seconds it took.
 * Usage: floor FILE... (each a pages-ID.img; its first page is the image header).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGES_HDR_SIZE 4096 /* PAGES_IMG_HDR_SIZE of criu/include/image.h */
/*
 * Pieces of 4 MiB, as criu's restorer reads: the floor then differs from a restore only in
 * how the work is spread, not in the size of each read.
 */
#define READ_CHUNK (4ul << 20)

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Read the page data of one image into a fresh mapping, adding the time from mmap to the
 * last byte to *seconds (unmapping is teardown no restore pays). 0 or -errno (reported).
 */
static int read_pages_image(const char *path, double *seconds)
{
	struct stat st;
	size_t data_size, done = 0;
	double start;
	char *mem;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		fprintf(stderr, "floor: %s: %s\n", path, strerror(-ret));
		goto out;
	}
	if (st.st_size <= PAGES_HDR_SIZE)
		goto out;
	data_size = st.st_size - PAGES_HDR_SIZE;
	start = now_seconds();
	mem = mmap(NULL, data_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		ret = -errno;
		fprintf(stderr, "floor: cannot map %zu bytes: %s\n", data_size, strerror(-ret));
		goto out;
	}
	while (done < data_size) {
		size_t left = data_size - done;
		struct iovec iov = { mem + done, left < READ_CHUNK ? left : READ_CHUNK };
		ssize_t n = preadv(fd, &iov, 1, PAGES_HDR_SIZE + done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			fprintf(stderr, "floor: %s: read at %zu: %s\n", path, done, strerror(-ret));
			break;
		}
		done += n;
	}
	*seconds += now_seconds() - start;
	munmap(mem, data_size);
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	double elapsed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PAGES_IMAGE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (read_pages_image(argv[i], &elapsed))
			return 1;
	printf("%.3f\n", elapsed);
	return 0;
}
