/*
 * Time namespaces: CLOCK_MONOTONIC and CLOCK_BOOTTIME as a root with a time namespace of
 * its own read them at dump (timens-ID.img, as CRIU writes it). Restore gives the new
 * namespace offsets that make both clocks go on from there: to the tree, no time passed
 * between dump and restore.
 *
 * The offsets of a time namespace can only be set before a process enters it, and clone()
 * has no flag for one: criu unshares it (it becomes criu's time_for_children), writes the
 * offsets, forks the root into it, then goes back to its own for the children it forks
 * later (ns_enter_before_root(), ns_leave_after_root()).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"

#include "timens.pb-c.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define NSEC_PER_SEC 1000000000LL
/* The kernel keeps a namespace's clocks within KTIME_SEC_MAX / 2 seconds. */
#define TIMENS_SEC_MAX 4611686018ULL

/* What restore keeps of one: the clocks as dumped, and criu's own namespace meanwhile. */
struct time_ns {
	struct timespec monotonic, boottime;
	int criu_ns_fd; /* criu's time namespace while it has unshared another; -1 */
};

/* In a child joined to the namespace: its clocks. */
static int time_dump(const struct ns_id *ns)
{
	TimensEntry e = TIMENS_ENTRY__INIT;
	Timespec mono = TIMESPEC__INIT, boot = TIMESPEC__INIT;
	struct timespec ts;
	struct cr_img *img;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	mono.tv_sec = ts.tv_sec;
	mono.tv_nsec = ts.tv_nsec;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	boot.tv_sec = ts.tv_sec;
	boot.tv_nsec = ts.tv_nsec;
	e.monotonic = &mono;
	e.boottime = &boot;
	img = open_image(CR_IMG_TIMENS, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &e);
	close_image(img);
	pr_info("time namespace %u: monotonic %llu.%09llu, boottime %llu.%09llu\n", ns->id,
		(unsigned long long)mono.tv_sec, (unsigned long long)mono.tv_nsec,
		(unsigned long long)boot.tv_sec, (unsigned long long)boot.tv_nsec);
	return ret;
}

static int take_clock(const char *img_name, const char *clock, const Timespec *t,
		      struct timespec *out)
{
	if (t->tv_nsec >= NSEC_PER_SEC || t->tv_sec > TIMENS_SEC_MAX) {
		pr_err("%s: %s %llu.%llu is not a time a clock can show\n", img_name, clock,
		       (unsigned long long)t->tv_sec, (unsigned long long)t->tv_nsec);
		return -EINVAL;
	}
	out->tv_sec = t->tv_sec;
	out->tv_nsec = t->tv_nsec;
	return 0;
}

static int time_collect(struct ns_id *ns)
{
	struct time_ns *tns;
	struct cr_img *img;
	TimensEntry *e;
	int ret;

	img = open_image(CR_IMG_TIMENS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&e);
	if (ret) {
		close_image(img);
		return ret;
	}
	tns = calloc(1, sizeof(*tns));
	if (!tns) {
		pr_err("no memory for time namespace %u\n", ns->id);
		ret = -ENOMEM;
	}
	if (!ret)
		ret = take_clock(img->name, "monotonic", e->monotonic, &tns->monotonic)
			      ?: take_clock(img->name, "boottime", e->boottime, &tns->boottime);
	pb_free(img, e);
	close_image(img);
	if (ret) {
		free(tns);
		return ret;
	}
	tns->criu_ns_fd = -1;
	ns->priv = tns;
	return 0;
}

/* The offsets the new namespace has now: its parent's (criu's), which it started with. */
static int read_offsets(struct timespec *mono_off, struct timespec *boot_off)
{
	char line[128], name[32];
	long long sec;
	long nsec;
	int found = 0;
	FILE *f;

	f = fopen("/proc/self/timens_offsets", "re");
	if (!f) {
		pr_perror("cannot open /proc/self/timens_offsets");
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%31s %lld %ld", name, &sec, &nsec) != 3)
			continue;
		if (!strcmp(name, "monotonic")) {
			*mono_off = (struct timespec){sec, nsec};
			found |= 1;
		} else if (!strcmp(name, "boottime")) {
			*boot_off = (struct timespec){sec, nsec};
			found |= 2;
		}
	}
	fclose(f);
	if (found != 3) {
		pr_err("/proc/self/timens_offsets: no monotonic and boottime offsets\n");
		return -EINVAL;
	}
	return 0;
}

/* dumped - (now - current offset): what the clock must be moved by to read dumped now. */
static struct timespec offset_for(clockid_t clock, const struct timespec *dumped,
				  const struct timespec *cur_off)
{
	struct timespec now;
	long long nsec, sec;

	clock_gettime(clock, &now);
	nsec = (dumped->tv_sec - now.tv_sec + cur_off->tv_sec) * NSEC_PER_SEC +
	       (dumped->tv_nsec - now.tv_nsec + cur_off->tv_nsec);
	sec = nsec / NSEC_PER_SEC;
	/* Seconds rounded down: the kernel wants nanoseconds in 0..999999999. */
	nsec %= NSEC_PER_SEC;
	if (nsec < 0) {
		nsec += NSEC_PER_SEC;
		sec--;
	}
	return (struct timespec){ sec, nsec };
}

static int write_offsets(const struct ns_id *ns, const struct time_ns *tns)
{
	struct timespec mono_off, boot_off, mono, boot;
	char text[128];
	int fd, len, ret;

	ret = read_offsets(&mono_off, &boot_off);
	if (ret)
		return ret;
	mono = offset_for(CLOCK_MONOTONIC, &tns->monotonic, &mono_off);
	boot = offset_for(CLOCK_BOOTTIME, &tns->boottime, &boot_off);
	len = snprintf(text, sizeof(text), "monotonic %lld %ld\nboottime %lld %ld\n",
		       (long long)mono.tv_sec, mono.tv_nsec, (long long)boot.tv_sec, boot.tv_nsec);
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, len) != len) {
		pr_perror("time namespace %u: cannot set its offsets (monotonic %lld.%09ld, "
			  "boottime %lld.%09ld)",
			  ns->id, (long long)mono.tv_sec, mono.tv_nsec, (long long)boot.tv_sec,
			  boot.tv_nsec);
		ret = -errno;
	}
	if (fd >= 0)
		close(fd);
	if (!ret)
		pr_info("time namespace %u: offsets monotonic %lld.%09ld, boottime %lld.%09ld\n",
			ns->id, (long long)mono.tv_sec, mono.tv_nsec, (long long)boot.tv_sec,
			boot.tv_nsec);
	return ret;
}

static int time_enter(struct ns_id *ns)
{
	struct time_ns *tns = ns->priv;

	tns->criu_ns_fd = open("/proc/self/ns/time", O_RDONLY | O_CLOEXEC);
	if (tns->criu_ns_fd < 0) {
		pr_perror("cannot open criu's time namespace");
		return -errno;
	}
	if (unshare(CLONE_NEWTIME)) {
		pr_perror("time namespace %u: cannot create it (unshare)", ns->id);
		return -errno;
	}
	/* Right before the fork: the clocks the tree starts from are read here. */
	return write_offsets(ns, tns);
}

static int time_leave(struct ns_id *ns)
{
	struct time_ns *tns = ns->priv;
	int ret = 0;

	if (tns->criu_ns_fd < 0)
		return 0;
	if (setns(tns->criu_ns_fd, CLONE_NEWTIME)) {
		pr_perror("cannot go back to criu's time namespace");
		ret = -errno;
	}
	close(tns->criu_ns_fd);
	tns->criu_ns_fd = -1;
	return ret;
}

static void time_fini(struct ns_id *ns)
{
	struct time_ns *tns = ns->priv;

	if (tns && tns->criu_ns_fd >= 0)
		close(tns->criu_ns_fd);
	free(tns);
	ns->priv = NULL;
}

const struct ns_kind time_ns_kind = {
	.name = "time",
	.clone_flag = CLONE_NEWTIME,
	.dump = time_dump,
	.collect = time_collect,
	.enter = time_enter,
	.leave = time_leave,
	.fini = time_fini,
};
