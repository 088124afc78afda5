/*
 * flock-hold FILE: takes flock(LOCK_EX) on FILE, writes its pid to FILE.held, and waits for
 * ever holding it. Built static by the runtime tests for their busybox containers (busybox
 * has no flock), to check that a lock is held across a checkpoint and restore.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char path[4096];
	FILE *f;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: flock-hold FILE\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		perror(argv[1]);
		return 1;
	}
	snprintf(path, sizeof(path), "%s.held", argv[1]);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) {
		perror(path);
		return 1;
	}
	for (;;)
		pause();
}
