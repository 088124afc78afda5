/*
 * timerfds (anon_inode:[timerfd], file_entry.tfd): the clock, the time left and the
 * interval, the settime flags, the expirations not read yet and the file status flags,
 * read from the fd's fdinfo. Restore creates a timer on the same clock and arms it for
 * the time left, counted from the moment it is opened: the time the task spent dumped
 * does not count, as in CRIU.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "kerndat.h"
#include "log.h"
#include "proc_parse.h"

#include "timerfd.pb-c.h"

#define TIMERFD_LINK "anon_inode:[timerfd]"
#define NSEC_PER_SEC 1000000000ull

static bool timerfd_owns(const struct fd_parms *p)
{
	return !strcmp(p->link, TIMERFD_LINK);
}

/*
 * No time left, an interval and expirations not read: a periodic timer the kernel stopped
 * on its last expiration until someone reads it (see read_running_timerfd()).
 */
static bool stopped_periodic(const TimerfdEntry *tfe)
{
	return !tfe->vsec && !tfe->vnsec && (tfe->isec || tfe->insec) && tfe->ticks;
}

/* ---------------------------------------------------------------- dump ---- */

/* One read of fdinfo: the ticks and the time left are the kernel's at one moment. */
static int read_timerfd_state(const struct fd_parms *p, TimerfdEntry *tfe)
{
	struct proc_fdinfo fi;
	int ret;

	ret = parse_fd_fdinfo(p->pid, p->fd, &fi);
	if (!ret)
		ret = fdinfo_scan(&fi, "clockid:", 1, "%" SCNu32, &tfe->clockid);
	if (!ret)
		ret = fdinfo_scan(&fi, "ticks:", 1, "%" SCNu64, &tfe->ticks);
	if (!ret)
		ret = fdinfo_scan(&fi, "settime flags:", 1, "%" SCNo32, &tfe->settime_flags);
	if (!ret)
		ret = fdinfo_scan(&fi, "it_value:", 2, " (%" SCNu64 ", %" SCNu64 ")", &tfe->vsec,
				  &tfe->vnsec);
	if (!ret)
		ret = fdinfo_scan(&fi, "it_interval:", 2, " (%" SCNu64 ", %" SCNu64 ")", &tfe->isec,
				  &tfe->insec);
	return ret;
}

/*
 * A periodic timer that expired and was not read yet is not running: fdinfo shows no time
 * left until something reads it or asks its time, which counts the periods missed since
 * and starts it again. criu asks (timerfd_gettime() on its own copy of the description),
 * which the task cannot tell from its own next read. If it expires again before fdinfo is
 * read, it is asked again; a timer still stopped then (an interval of microseconds) is
 * dumped as fdinfo shows it, as upstream criu dumps every such timer (see arm_timer()).
 */
#define TIMERFD_STATE_TRIES 3

static int read_running_timerfd(const struct fd_parms *p, TimerfdEntry *tfe)
{
	struct itimerspec its;
	int lfd, ret = 0;

	lfd = grab_task_fd(p);
	if (lfd < 0)
		return lfd;
	for (int try = 0; try < TIMERFD_STATE_TRIES && !ret; try++) {
		if (timerfd_gettime(lfd, &its)) {
			pr_perror("fd %d of task %d: timerfd_gettime", p->fd, p->pid);
			ret = -errno;
			break;
		}
		ret = read_timerfd_state(p, tfe);
		if (!ret && !stopped_periodic(tfe))
			break;
	}
	close(lfd);
	return ret;
}

static int timerfd_dump(const struct fd_parms *p, uint32_t id)
{
	TimerfdEntry tfe = TIMERFD_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	int ret;

	ret = read_running_timerfd(p, &tfe);
	if (!ret)
		ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	tfe.id = id;
	tfe.flags = p->flags;
	tfe.fown = &fown;
	fe.type = FD_TYPES__TIMERFD;
	fe.id = id;
	fe.tfd = &tfe;
	pr_debug("fd %d of task %d: timerfd, clock %u, %llu.%09llu s left, interval "
		 "%llu.%09llu s, %llu unread, settime flags %#x\n",
		 p->fd, p->pid, tfe.clockid, (unsigned long long)tfe.vsec,
		 (unsigned long long)tfe.vnsec, (unsigned long long)tfe.isec,
		 (unsigned long long)tfe.insec, (unsigned long long)tfe.ticks, tfe.settime_flags);
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

static bool timerfd_clock_ok(uint32_t clockid)
{
	return clockid == CLOCK_REALTIME || clockid == CLOCK_MONOTONIC ||
	       clockid == CLOCK_BOOTTIME || clockid == CLOCK_REALTIME_ALARM ||
	       clockid == CLOCK_BOOTTIME_ALARM;
}

/*
 * The kernel keeps timer values in signed 64-bit nanoseconds: what does not fit is no time
 * it could have shown, and the bound keeps now + time left from overflowing.
 */
static bool timespec_ok(uint64_t sec, uint64_t nsec)
{
	return sec <= INT64_MAX / NSEC_PER_SEC && nsec < NSEC_PER_SEC;
}

/* d->kind stays NULL: open() reads the entry itself. */
static int timerfd_collect(struct file_desc *d)
{
	const TimerfdEntry *tfe = d->fe->tfd;

	if (!tfe || tfe->id != d->id) {
		pr_err("files.img: timerfd file %u has no timerfd entry of its own\n", d->id);
		return -EINVAL;
	}
	if (!timerfd_clock_ok(tfe->clockid)) {
		pr_err("files.img: timerfd file %u: clock %u is not one a timerfd can use\n", d->id,
		       tfe->clockid);
		return -EINVAL;
	}
	if (tfe->settime_flags & ~(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)) {
		pr_err("files.img: timerfd file %u: unknown settime flags %#x\n", d->id,
		       tfe->settime_flags);
		return -EINVAL;
	}
	if (!timespec_ok(tfe->vsec, tfe->vnsec) || !timespec_ok(tfe->isec, tfe->insec)) {
		pr_err("files.img: timerfd file %u: time left %llu s %llu ns or interval %llu s "
		       "%llu ns is not a time\n",
		       d->id, (unsigned long long)tfe->vsec, (unsigned long long)tfe->vnsec,
		       (unsigned long long)tfe->isec, (unsigned long long)tfe->insec);
		return -EINVAL;
	}
	return collect_owner(d, tfe->fown);
}

/*
 * With TFD_TIMER_ABSTIME the deadline is now plus the time left, on the timer's clock.
 * No time left with an interval and unread expirations is a periodic timer stopped on an
 * expiration nobody read (stopped_periodic()): it expires again one interval after its
 * restore. (A timer disarmed with an interval and then given expirations by
 * TFD_IOC_SET_TICKS looks the same and comes back running.) Another disarmed timer is set
 * too when it has settime flags or an interval: it keeps both (fdinfo and
 * timerfd_gettime() show them, and TFD_TIMER_CANCEL_ON_SET still acts).
 */
static int arm_timer(int fd, const TimerfdEntry *tfe, uint32_t id)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = tfe->vsec, .tv_nsec = tfe->vnsec },
		.it_interval = { .tv_sec = tfe->isec, .tv_nsec = tfe->insec },
	};
	bool armed = tfe->vsec || tfe->vnsec;
	struct timespec now;

	if (stopped_periodic(tfe)) {
		its.it_value = its.it_interval;
		armed = true;
	}
	if (!armed && !tfe->settime_flags && !tfe->isec && !tfe->insec)
		return 0;
	if (armed && (tfe->settime_flags & TFD_TIMER_ABSTIME)) {
		if (clock_gettime(tfe->clockid, &now)) {
			pr_perror("timerfd file %u: cannot read clock %u", id, tfe->clockid);
			return -errno;
		}
		its.it_value.tv_sec += now.tv_sec;
		its.it_value.tv_nsec += now.tv_nsec;
		if (its.it_value.tv_nsec >= (long)NSEC_PER_SEC) {
			its.it_value.tv_sec++;
			its.it_value.tv_nsec -= NSEC_PER_SEC;
		}
	}
	if (timerfd_settime(fd, tfe->settime_flags, &its, NULL)) {
		pr_perror("timerfd file %u: cannot arm it (%llu.%09llu s left, settime flags %#x)",
			  id, (unsigned long long)tfe->vsec, (unsigned long long)tfe->vnsec,
			  tfe->settime_flags);
		return -errno;
	}
	return 0;
}

/*
 * After arming, which clears the count. An expiration between the two (a timer due within
 * microseconds of its restore) is overwritten: the kernel can set the count, not add to it.
 */
static int set_ticks(int fd, const TimerfdEntry *tfe, uint32_t id)
{
	uint64_t ticks = tfe->ticks;
	int err;

	if (!ticks)
		return 0;
	if (!ioctl(fd, TFD_IOC_SET_TICKS, &ticks))
		return 0;
	err = errno;
	pr_err("timerfd file %u: cannot restore its %llu unread expirations: %s\n", id,
	       (unsigned long long)ticks,
	       err == ENOTTY ? "the kernel lacks TFD_IOC_SET_TICKS (CONFIG_CHECKPOINT_RESTORE)"
			     : strerror(err));
	return -err;
}

static int timerfd_open(const struct file_desc *d)
{
	const TimerfdEntry *tfe = d->fe->tfd;
	int fd, ret;

	fd = timerfd_create(tfe->clockid, TFD_CLOEXEC);
	if (fd < 0) {
		pr_perror("timerfd file %u: cannot create a timer on clock %u", d->id,
			  tfe->clockid);
		return -errno;
	}
	ret = arm_timer(fd, tfe, d->id);
	if (!ret)
		ret = set_ticks(fd, tfe, d->id);
	if (ret) {
		close(fd);
		return ret;
	}
	return restore_status_flags(fd, tfe->flags, d);
}

const struct fdtype_ops timerfd_fdtype_ops = {
	.type = FD_TYPES__TIMERFD,
	.name = "timerfd",
	.owns = timerfd_owns,
	.dump = timerfd_dump,
	.collect = timerfd_collect,
	.open = timerfd_open,
	.inheritable = true,
};
