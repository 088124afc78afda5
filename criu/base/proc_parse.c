/*
 * Parsers of /proc/PID files for the dump: stat, status, limits, auxv, personality,
 * comm, timers, smaps. Each returns 0 or -errno and logs what it could not parse.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "proc_parse.h"
#include "log.h"

static FILE *open_proc_file(pid_t pid, const char *name)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "re");
	if (!f) {
		int err = errno;

		pr_perror("cannot open %s", path);
		/* Callers return -errno: keep the fopen() error past the logging. */
		errno = err;
	}
	return f;
}

/* Read a small /proc file whole, NUL-terminated. Returns its length or -errno. */
static ssize_t read_proc_file(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[64];
	size_t len = 0;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (err == ENOENT)
			pr_err("no process with pid %d\n", pid);
		else
			pr_err("cannot open %s: %s\n", path, strerror(err));
		return -err;
	}
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0) {
			err = errno;
			pr_err("cannot read %s: %s\n", path, strerror(err));
			close(fd);
			return -err;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

int parse_pid_stat(pid_t pid, struct proc_pid_stat *st)
{
	char buf[4096];
	unsigned long skip;
	char *after_comm;
	ssize_t len;
	int n;

	len = read_proc_file(pid, "stat", buf, sizeof(buf));
	if (len < 0)
		return len;
	/* comm (field 2) may hold spaces and parentheses: the fields resume after the last ')'. */
	after_comm = strrchr(buf, ')');
	if (!after_comm) {
		pr_err("/proc/%d/stat: no comm field\n", pid);
		return -EINVAL;
	}
	memset(st, 0, sizeof(*st));
	n = sscanf(after_comm + 2,
		   "%c %d %d %d "	/* 3-6 */
		   "%*d %*d %u "	/* 7-9 */
		   "%*u %*u %*u %*u "	/* 10-13 */
		   "%*u %*u %*d %*d "	/* 14-17 */
		   "%*d %*d %*d %*d "	/* 18-21 */
		   "%*u %*u %*d %*u "	/* 22-25 */
		   "%lu %lu %lu "	/* 26-28 */
		   "%lu %lu %lu %lu %lu "	/* 29-33 */
		   "%lu %lu %lu %*d %*d "	/* 34-38 */
		   "%*u %*u %*u %*u %*d "	/* 39-43 */
		   "%*d %lu %lu %lu "	/* 44-47 */
		   "%lu %lu %lu %lu %d",	/* 48-52 */
		   &st->state, &st->ppid, &st->pgid, &st->sid, &st->flags,
		   &st->start_code, &st->end_code, &st->start_stack,
		   &skip, &skip, &skip, &skip, &skip, &skip, &skip, &skip,
		   &st->start_data, &st->end_data, &st->start_brk,
		   &st->arg_start, &st->arg_end, &st->env_start, &st->env_end, &st->exit_code);
	if (n != 24) {
		pr_err("/proc/%d/stat: parsed %d of 24 fields\n", pid, n);
		return -EINVAL;
	}
	return 0;
}

static int parse_groups(const char *list, struct proc_pid_status *st)
{
	const char *p = list;
	char *end;

	for (;;) {
		unsigned long gid = strtoul(p, &end, 10);
		uint32_t *grown;

		if (end == p)
			return 0;
		p = end;
		if (st->nr_groups >= PROC_MAX_GROUPS)
			return -E2BIG;
		grown = realloc(st->groups, (st->nr_groups + 1) * sizeof(*st->groups));
		if (!grown)
			return -ENOMEM;
		st->groups = grown;
		st->groups[st->nr_groups++] = gid;
	}
}

/* Fields of /proc/PID/status that must all be present for the creds to be trusted. */
enum {
	STATUS_UMASK = 1 << 0,
	STATUS_UID = 1 << 1,
	STATUS_GID = 1 << 2,
	STATUS_CAPS = 1 << 3,
	STATUS_NNP = 1 << 4,
	STATUS_THREADS = 1 << 5,
	STATUS_GROUPS = 1 << 6,
	STATUS_SIGPND = 1 << 7,
	STATUS_SHDPND = 1 << 8,
	STATUS_ALL = (1 << 9) - 1,
};

static int parse_status_line(const char *line, struct proc_pid_status *st, unsigned int *seen)
{
	int caps = 0;

	if (sscanf(line, "Umask: %o", &st->umask) == 1)
		*seen |= STATUS_UMASK;
	else if (sscanf(line, "Uid: %u %u %u %u", &st->uid[0], &st->uid[1], &st->uid[2],
			&st->uid[3]) == 4)
		*seen |= STATUS_UID;
	else if (sscanf(line, "Gid: %u %u %u %u", &st->gid[0], &st->gid[1], &st->gid[2],
			&st->gid[3]) == 4)
		*seen |= STATUS_GID;
	else if (!strncmp(line, "Groups:", 7)) {
		int ret = parse_groups(line + 7, st);

		if (ret)
			return ret;
		*seen |= STATUS_GROUPS;
	} else if (sscanf(line, "Threads: %d", &st->nr_threads) == 1)
		*seen |= STATUS_THREADS;
	else if (sscanf(line, "CapInh: %" SCNx64, &st->cap_inh) == 1)
		caps = 1;
	else if (sscanf(line, "CapPrm: %" SCNx64, &st->cap_prm) == 1)
		caps = 1;
	else if (sscanf(line, "CapEff: %" SCNx64, &st->cap_eff) == 1)
		caps = 1;
	else if (sscanf(line, "CapBnd: %" SCNx64, &st->cap_bnd) == 1)
		caps = 1;
	else if (sscanf(line, "CapAmb: %" SCNx64, &st->cap_amb) == 1)
		caps = 1;
	else if (sscanf(line, "NoNewPrivs: %u", &st->no_new_privs) == 1)
		*seen |= STATUS_NNP;
	else if (sscanf(line, "SigPnd: %" SCNx64, &st->sig_pending) == 1)
		*seen |= STATUS_SIGPND;
	else if (sscanf(line, "ShdPnd: %" SCNx64, &st->shared_pending) == 1)
		*seen |= STATUS_SHDPND;
	if (caps)
		*seen |= STATUS_CAPS;
	return 0;
}

int parse_pid_status(pid_t pid, struct proc_pid_status *st)
{
	unsigned int seen = 0;
	size_t cap = 0;
	char *line = NULL;
	FILE *f;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	f = open_proc_file(pid, "status");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		ret = parse_status_line(line, st, &seen);
		if (ret) {
			pr_err("/proc/%d/status: cannot parse \"%s\": %s\n", pid, line,
			       strerror(-ret));
			break;
		}
	}
	free(line);
	fclose(f);
	if (!ret && seen != STATUS_ALL) {
		pr_err("/proc/%d/status: fields missing (seen %#x of %#x)\n", pid, seen,
		       STATUS_ALL);
		ret = -EINVAL;
	}
	if (ret)
		free_pid_status(st);
	return ret;
}

void free_pid_status(struct proc_pid_status *st)
{
	free(st->groups);
	st->groups = NULL;
	st->nr_groups = 0;
}

/* The numbers after one of the "NS...:" keys, in order; 0 is a pid outside that level. */
static int parse_ns_ids_line(const char *text, pid_t *ids, unsigned int max, unsigned int *nr)
{
	char *end;

	for (*nr = 0;; (*nr)++) {
		long id = strtol(text, &end, 10);

		if (end == text)
			break;
		if (*nr == max || id < 0)
			return -EINVAL;
		ids[*nr] = id;
		text = end;
	}
	return *nr ? 0 : -EINVAL;
}

int parse_pid_ns_ids(pid_t pid, pid_t tid, const char *key, pid_t *ids, unsigned int max,
		     unsigned int *nr)
{
	char name[48], buf[4096], pattern[16], *line;
	ssize_t len;

	snprintf(name, sizeof(name), "task/%d/status", tid);
	len = read_proc_file(pid, name, buf, sizeof(buf));
	if (len < 0)
		return len;
	snprintf(pattern, sizeof(pattern), "\n%s:", key);
	line = strstr(buf, pattern);
	if (!line || parse_ns_ids_line(line + strlen(pattern), ids, max, nr)) {
		pr_err("/proc/%d/%s: no \"%s:\" line this criu understands\n", pid, name, key);
		return -EINVAL;
	}
	return 0;
}

int parse_pid_nspid(pid_t pid, pid_t tid, pid_t *ids, unsigned int max, unsigned int *nr)
{
	return parse_pid_ns_ids(pid, tid, "NSpid", ids, max, nr);
}

static int parse_limit_value(const char *word, uint64_t *value)
{
	char *end;

	if (!strcmp(word, "unlimited")) {
		*value = RLIM_INFINITY;
		return 0;
	}
	errno = 0;
	*value = strtoull(word, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/*
 * Lines are "Limit  Soft Limit  Hard Limit  Units" with the limit name padded to 25
 * characters, in RLIMIT_* order (the kernel prints its rlimit array in index order).
 */
#define LIMITS_NAME_WIDTH 26

int parse_pid_limits(pid_t pid, struct proc_rlimit lims[PROC_NR_RLIMITS])
{
	char buf[4096], *line, *saveptr = NULL;
	int resource = -1; /* the header line comes first */
	ssize_t len;

	len = read_proc_file(pid, "limits", buf, sizeof(buf));
	if (len < 0)
		return len;
	for (line = strtok_r(buf, "\n", &saveptr); line; line = strtok_r(NULL, "\n", &saveptr)) {
		char soft[32], hard[32];

		if (resource < 0) {
			resource = 0;
			continue;
		}
		if (resource >= PROC_NR_RLIMITS)
			break;
		if (strlen(line) < LIMITS_NAME_WIDTH ||
		    sscanf(line + LIMITS_NAME_WIDTH, "%31s %31s", soft, hard) != 2 ||
		    parse_limit_value(soft, &lims[resource].cur) ||
		    parse_limit_value(hard, &lims[resource].max)) {
			pr_err("/proc/%d/limits: cannot parse \"%s\"\n", pid, line);
			return -EINVAL;
		}
		resource++;
	}
	if (resource != PROC_NR_RLIMITS) {
		pr_err("/proc/%d/limits: %d limits instead of %d\n", pid, resource,
		       PROC_NR_RLIMITS);
		return -EINVAL;
	}
	return 0;
}

int parse_pid_auxv(pid_t pid, uint64_t *words, unsigned int *nr_words)
{
	char path[64];
	ssize_t len;
	unsigned int i;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		pr_perror("cannot open %s", path);
		return -err;
	}
	len = read(fd, words, PROC_AUXV_MAX_WORDS * sizeof(*words));
	if (len < 0) {
		int err = errno;

		pr_err("cannot read %s: %s\n", path, strerror(err));
		close(fd);
		return -err;
	}
	close(fd);
	/* Keep the pairs up to and including the terminating AT_NULL. */
	for (i = 0; i + 1 < len / sizeof(*words); i += 2) {
		if (words[i] == 0) {
			*nr_words = i + 2;
			return 0;
		}
	}
	pr_err("%s: no AT_NULL in %zd bytes\n", path, len);
	return -EINVAL;
}

int parse_pid_personality(pid_t pid, uint32_t *personality)
{
	char buf[32], *end;
	ssize_t len;

	len = read_proc_file(pid, "personality", buf, sizeof(buf));
	if (len < 0)
		return len;
	*personality = strtoul(buf, &end, 16);
	if (end == buf) {
		pr_err("/proc/%d/personality: cannot parse \"%s\"\n", pid, buf);
		return -EINVAL;
	}
	return 0;
}

int parse_pid_comm(pid_t pid, char *comm, size_t size)
{
	ssize_t len;

	len = read_proc_file(pid, "comm", comm, size);
	if (len < 0)
		return len;
	if (len > 0 && comm[len - 1] == '\n')
		comm[len - 1] = '\0';
	return 0;
}

int parse_pid_number(pid_t pid, const char *name, long long *value)
{
	char buf[32], *end;
	ssize_t len;

	len = read_proc_file(pid, name, buf, sizeof(buf));
	if (len < 0)
		return len;
	errno = 0;
	*value = strtoll(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n')) {
		pr_err("/proc/%d/%s: cannot parse \"%s\"\n", pid, name, buf);
		return -EINVAL;
	}
	return 0;
}

/* "notify: signal/pid.1234": how the timer notifies (SIGEV_*) and whom. */
static int parse_timer_notify(const char *value, struct proc_posix_timer *timer)
{
	char how[16], whom[8];
	unsigned int id;

	if (sscanf(value, "%15[a-z]/%7[a-z].%u", how, whom, &id) != 3)
		return -EINVAL;
	if (!strcmp(how, "signal"))
		timer->sigev_notify = SIGEV_SIGNAL;
	else if (!strcmp(how, "none"))
		timer->sigev_notify = SIGEV_NONE;
	else if (!strcmp(how, "thread"))
		timer->sigev_notify = SIGEV_THREAD;
	else
		return -EINVAL;
	if (!strcmp(whom, "tid"))
		timer->sigev_notify |= SIGEV_THREAD_ID;
	timer->notify_tid = id;
	return 0;
}

/*
 * Each timer is a block of lines: "ID: n", "signal: signo/sival_ptr",
 * "notify: how/whom.id", "ClockID: n".
 */
static int parse_timer_line(const char *line, struct proc_posix_timer *timer)
{
	if (sscanf(line, "signal: %u/%" SCNx64, &timer->signo, &timer->sival_ptr) == 2)
		return 0;
	if (!strncmp(line, "notify: ", 8))
		return parse_timer_notify(line + 8, timer);
	if (sscanf(line, "ClockID: %u", &timer->clock_id) == 1)
		return 0;
	return -EINVAL;
}

int parse_pid_timers(pid_t pid, struct proc_posix_timer **timers, unsigned int *nr)
{
	struct proc_posix_timer *all = NULL;
	unsigned int count = 0;
	size_t cap = 0;
	char *line = NULL;
	int ret = 0;
	FILE *f;

	f = open_proc_file(pid, "timers");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned int id;

		if (sscanf(line, "ID: %u", &id) == 1) {
			struct proc_posix_timer *grown = realloc(all, (count + 1) * sizeof(*all));

			if (!grown) {
				ret = -ENOMEM;
				pr_err("no memory for the timers of %d\n", pid);
				break;
			}
			all = grown;
			memset(&all[count], 0, sizeof(all[count]));
			all[count++].id = id;
			continue;
		}
		if (!count || parse_timer_line(line, &all[count - 1])) {
			pr_err("/proc/%d/timers: cannot parse \"%s\"\n", pid, line);
			ret = -EINVAL;
			break;
		}
	}
	free(line);
	fclose(f);
	if (ret) {
		free(all);
		return ret;
	}
	*timers = all;
	*nr = count;
	return 0;
}

static const struct {
	char name[3];
	uint32_t flag;
} vmflag_names[] = {
	{ "gd", VMFLAG_GROWSDOWN },	{ "lo", VMFLAG_LOCKED },     { "io", VMFLAG_IO },
	{ "pf", VMFLAG_PFNMAP },	{ "mw", VMFLAG_MAYWRITE },   { "dc", VMFLAG_DONTFORK },
	{ "dd", VMFLAG_DONTDUMP },	{ "hg", VMFLAG_HUGEPAGE },   { "nh", VMFLAG_NOHUGEPAGE },
	{ "rr", VMFLAG_RANDOM },	{ "sr", VMFLAG_SEQUENTIAL }, { "wf", VMFLAG_WIPEONFORK },
	{ "mg", VMFLAG_MERGEABLE },	{ "sh", VMFLAG_SHARED },     { "ac", VMFLAG_ACCOUNT },
	{ "nr", VMFLAG_NORESERVE },	{ "dp", VMFLAG_DROPPABLE },  { "ht", VMFLAG_HUGETLB },
};

static uint32_t parse_vmflags(const char *list)
{
	uint32_t flags = 0;
	unsigned int i;

	/* Two-letter names separated by single spaces. */
	for (; list[0] && list[1]; list += 3) {
		for (i = 0; i < sizeof(vmflag_names) / sizeof(vmflag_names[0]); i++)
			if (list[0] == vmflag_names[i].name[0] && list[1] == vmflag_names[i].name[1])
				flags |= vmflag_names[i].flag;
		if (list[2] != ' ')
			break;
	}
	return flags;
}

/* "start-end perms offset major:minor inode   path" */
static int parse_vma_header(const char *line, struct proc_vma *vma)
{
	char perms[5];
	int path_at = 0;
	size_t len;

	memset(vma, 0, sizeof(*vma));
	if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &vma->start, &vma->end, perms,
		   &vma->pgoff, &vma->dev_major, &vma->dev_minor, &vma->ino, &path_at) < 7 ||
	    !path_at)
		return -EINVAL;
	if (perms[0] == 'r')
		vma->prot |= PROT_READ;
	if (perms[1] == 'w')
		vma->prot |= PROT_WRITE;
	if (perms[2] == 'x')
		vma->prot |= PROT_EXEC;
	vma->shared = perms[3] == 's';
	vma->path = strdup(line + path_at);
	if (!vma->path)
		return -ENOMEM;
	len = strlen(vma->path);
	if (len && vma->path[len - 1] == '\n')
		vma->path[len - 1] = '\0';
	return 0;
}

/* smaps alternates a header line per VMA with "Key: value" lines; VmFlags ends a VMA. */
static bool is_vma_header(const char *line)
{
	const char *p = line;

	while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
		p++;
	return p != line && *p == '-';
}

void free_proc_vmas(struct proc_vma *vmas, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		free(vmas[i].path);
	free(vmas);
}

int parse_pid_smaps(pid_t pid, struct proc_vma **vmasp, unsigned int *nrp)
{
	struct proc_vma *vmas = NULL;
	unsigned int nr = 0;
	size_t cap = 0;
	char *line = NULL;
	int ret = 0;
	FILE *f;

	f = open_proc_file(pid, "smaps");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		if (is_vma_header(line)) {
			struct proc_vma *grown = realloc(vmas, (nr + 1) * sizeof(*vmas));

			if (!grown) {
				ret = -ENOMEM;
				break;
			}
			vmas = grown;
			ret = parse_vma_header(line, &vmas[nr]);
			if (ret)
				break;
			nr++;
		} else if (nr && !strncmp(line, "VmFlags:", 8)) {
			vmas[nr - 1].vmflags = parse_vmflags(line + 9);
		}
	}
	if (ret)
		pr_err("/proc/%d/smaps: cannot parse \"%s\": %s\n", pid, line, strerror(-ret));
	free(line);
	fclose(f);
	if (ret) {
		free_proc_vmas(vmas, nr);
		return ret;
	}
	*vmasp = vmas;
	*nrp = nr;
	return 0;
}

int parse_fd_fdinfo(pid_t pid, int fd, struct proc_fdinfo *fi)
{
	char name[32];
	ssize_t len;

	fi->pid = pid;
	fi->fd = fd;
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	len = read_proc_file(pid, name, fi->text, sizeof(fi->text));
	if (len < 0)
		return len;
	if ((size_t)len == sizeof(fi->text) - 1) {
		pr_err("/proc/%d/%s: longer than the %zu bytes expected\n", pid, name,
		       sizeof(fi->text) - 1);
		return -EFBIG;
	}
	return 0;
}

int fdinfo_scan(const struct proc_fdinfo *fi, const char *key, int nr, const char *fmt, ...)
{
	size_t key_len = strlen(key);
	const char *line = fi->text;
	va_list args;
	int ret;

	while (strncmp(line, key, key_len)) {
		line = strchr(line, '\n');
		if (!line) {
			pr_err("/proc/%d/fdinfo/%d: no \"%s\" line\n", fi->pid, fi->fd, key);
			return -EINVAL;
		}
		line++;
	}
	va_start(args, fmt);
	ret = vsscanf(line + key_len, fmt, args);
	va_end(args);
	if (ret != nr) {
		pr_err("/proc/%d/fdinfo/%d: cannot parse the \"%s\" line\n", fi->pid, fi->fd, key);
		return -EINVAL;
	}
	return 0;
}
