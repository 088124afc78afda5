/*
 * Kernel feature probes behind `criu check [--feature NAME]`: each probe asks the
 * kernel the way the pipelines will use the feature, with no side effects.
 */
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crtools.h"
#include "kerndat.h"
#include "log.h"

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif

struct feature {
	const char *name;
	bool (*probe)(void);
	const char *missing; /* what the user loses without it */
};

/*
 * clone3 with a set_tid array of a bogus size fails with EINVAL where set_tid is
 * understood; kernels before 5.5 answer E2BIG (struct too big) or ENOSYS.
 */
bool kerndat_has_clone3_set_tid(void)
{
	static int probed = -1; /* asked once per run; forked tasks inherit the answer */
	struct clone_args args = { .set_tid_size = 1 };
	pid_t tid = 0;

	if (probed >= 0)
		return probed;
	args.set_tid = (unsigned long)&tid;
	args.exit_signal = SIGCHLD;
	/* tid 0 is invalid: the kernel rejects the call before creating anything. */
	probed = syscall(SYS_clone3, &args, sizeof(args)) < 0 && errno == EINVAL;
	return probed;
}

static bool has_ptrace_rseq(void)
{
	/* An invalid pid gives ESRCH for a known request, EIO for an unknown one. */
	return ptrace(PTRACE_GET_RSEQ_CONFIGURATION, 0, 0, 0) < 0 && errno == ESRCH;
}

static bool has_prctl_mm_map(void)
{
	unsigned int size = 0;

	return prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, (unsigned long)&size, 0, 0) == 0 && size;
}

static bool has_mremap_vdso(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	bool vdso = false;

	if (!maps)
		return false;
	while (fgets(line, sizeof(line), maps))
		vdso |= strstr(line, "[vdso]") != NULL;
	fclose(maps);
	return vdso;
}

static bool has_memfd(void)
{
	int fd = memfd_create("criu-check", MFD_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool has_process_vm_readv(void)
{
	char src = 1, dst = 0;
	struct iovec l = { &dst, 1 }, r = { &src, 1 };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1 && dst == 1;
}

static bool has_map_fixed_noreplace(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *q;

	if (p == MAP_FAILED)
		return false;
	/* A kernel that knows the flag refuses to replace the existing page. */
	q = mmap(p, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	munmap(p, 4096);
	return q == MAP_FAILED && errno == EEXIST;
}

static const struct feature features[] = {
	{ "clone3_set_tid", kerndat_has_clone3_set_tid, "restore with original pids" },
	{ "ptrace_rseq", has_ptrace_rseq, "rseq registration dump" },
	{ "prctl_mm_map", has_prctl_mm_map, "mm fields restore" },
	{ "vdso", has_mremap_vdso, "vdso restore" },
	{ "memfd", has_memfd, "emulated GPU buffers" },
	{ "process_vm_readv", has_process_vm_readv, "memory dump" },
	{ "map_fixed_noreplace", has_map_fixed_noreplace, "overlap checks on restore" },
};

int cr_check(const char *feature)
{
	bool all_ok = true, found = false;
	size_t i;

	for (i = 0; i < sizeof(features) / sizeof(features[0]); i++) {
		const struct feature *f = &features[i];

		if (feature && strcmp(feature, f->name))
			continue;
		found = true;
		if (f->probe()) {
			if (feature)
				printf("%s is supported\n", f->name);
			continue;
		}
		all_ok = false;
		fprintf(stderr, "Error: %s is not supported by this kernel (needed for %s)\n", f->name,
			f->missing);
	}
	if (!found) {
		fprintf(stderr, "Error: unknown feature '%s'; known:", feature);
		for (i = 0; i < sizeof(features) / sizeof(features[0]); i++)
			fprintf(stderr, " %s", features[i].name);
		fprintf(stderr, "\n");
		return -1;
	}
	if (all_ok && !feature)
		printf("Looks good.\n");
	return all_ok ? 0 : -1;
}
