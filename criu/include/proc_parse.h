/*
 * Parsers of /proc/PID files: stat, status, limits, auxv, personality, comm, timers,
 * smaps (VMAs with their VmFlags).
 */
#ifndef CR_PROC_PARSE_H
#define CR_PROC_PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* /proc/PID/stat, the fields the dump needs (numbering as in proc(5)). */
struct proc_pid_stat {
	char state; /* field 3: R, S, D, T, t, Z, ... */
	pid_t ppid, pgid, sid; /* fields 4, 5, 6 */
	unsigned int flags; /* 9: PF_* */
	unsigned long start_code, end_code, start_stack; /* 26, 27, 28 */
	unsigned long start_data, end_data, start_brk; /* 45, 46, 47 */
	unsigned long arg_start, arg_end, env_start, env_end; /* 48..51 */
	int exit_code; /* 52 */
};
int parse_pid_stat(pid_t pid, struct proc_pid_stat *st);

#define PROC_MAX_GROUPS 65536

/* /proc/PID/status: credentials, capabilities and the odd bits only it shows. */
struct proc_pid_status {
	uint32_t uid[4], gid[4]; /* real, effective, saved, filesystem */
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	uint32_t no_new_privs;
	uint32_t umask;
	uint64_t sig_pending, shared_pending; /* SigPnd (the thread's), ShdPnd: bit sig - 1 */
	int nr_threads;
	uint32_t nr_groups;
	uint32_t *groups; /* malloc'ed; free with free_pid_status() */
};
int parse_pid_status(pid_t pid, struct proc_pid_status *st);
void free_pid_status(struct proc_pid_status *st);

/*
 * "NSpid:" of thread tid of process pid (/proc/PID/task/TID/status): its pid in each pid
 * namespace from /proc's down to its own. Up to max of them into ids, *nr set. 0 or -errno.
 */
#define PROC_MAX_PID_LEVELS 33 /* the kernel nests pid namespaces 32 deep */
int parse_pid_nspid(pid_t pid, pid_t tid, pid_t *ids, unsigned int max, unsigned int *nr);
/* The same for another "NS...:" key of that file ("NSsid", "NSpgid"); 0: not seen there. */
int parse_pid_ns_ids(pid_t pid, pid_t tid, const char *key, pid_t *ids, unsigned int max,
		     unsigned int *nr);

/* /proc/PID/limits: RLIM_INFINITY for "unlimited". */
#define PROC_NR_RLIMITS 16
struct proc_rlimit {
	uint64_t cur, max;
};
int parse_pid_limits(pid_t pid, struct proc_rlimit lims[PROC_NR_RLIMITS]);

/* /proc/PID/auxv as 64-bit words, up to and including the AT_NULL pair. */
#define PROC_AUXV_MAX_WORDS 128
int parse_pid_auxv(pid_t pid, uint64_t *words, unsigned int *nr_words);

int parse_pid_personality(pid_t pid, uint32_t *personality);
/* comm is TASK_COMM_LEN (16) bytes in the kernel. */
int parse_pid_comm(pid_t pid, char *comm, size_t size);
/* A file holding one decimal number: loginuid, oom_score_adj. */
int parse_pid_number(pid_t pid, const char *name, long long *value);

/* One POSIX timer from /proc/PID/timers. */
struct proc_posix_timer {
	uint32_t id;
	uint32_t signo;
	uint64_t sival_ptr;
	uint32_t sigev_notify; /* SIGEV_* (with SIGEV_THREAD_ID when "tid") */
	uint32_t notify_tid;
	uint32_t clock_id;
};
int parse_pid_timers(pid_t pid, struct proc_posix_timer **timers, unsigned int *nr);

/* VmFlags of smaps, one bit each for the ones the dump looks at. */
#define VMFLAG_GROWSDOWN (1u << 0) /* gd */
#define VMFLAG_LOCKED (1u << 1) /* lo */
#define VMFLAG_IO (1u << 2) /* io: VM_IO, a device mapping */
#define VMFLAG_PFNMAP (1u << 3) /* pf */
#define VMFLAG_MAYWRITE (1u << 4) /* mw */
#define VMFLAG_DONTFORK (1u << 5) /* dc */
#define VMFLAG_DONTDUMP (1u << 6) /* dd */
#define VMFLAG_HUGEPAGE (1u << 7) /* hg */
#define VMFLAG_NOHUGEPAGE (1u << 8) /* nh */
#define VMFLAG_RANDOM (1u << 9) /* rr */
#define VMFLAG_SEQUENTIAL (1u << 10) /* sr */
#define VMFLAG_WIPEONFORK (1u << 11) /* wf */
#define VMFLAG_MERGEABLE (1u << 12) /* mg */
#define VMFLAG_SHARED (1u << 13) /* sh */
#define VMFLAG_ACCOUNT (1u << 14) /* ac: VM_ACCOUNT, the mapping was once writable and private */
#define VMFLAG_NORESERVE (1u << 15) /* nr: mapped with MAP_NORESERVE */
#define VMFLAG_DROPPABLE (1u << 16) /* dp: MAP_DROPPABLE (Linux 6.11), freed under pressure */
#define VMFLAG_HUGETLB (1u << 17) /* ht: hugetlb pages */

/* One line of /proc/PID/smaps with its VmFlags. */
struct proc_vma {
	unsigned long start, end;
	unsigned long pgoff; /* offset into the file, in bytes, as smaps prints it */
	uint32_t prot; /* PROT_* */
	bool shared; /* 's' in perms */
	unsigned int dev_major, dev_minor;
	unsigned long ino;
	uint32_t vmflags; /* VMFLAG_* */
	char *path; /* malloc'ed; "" for anonymous memory; may end in " (deleted)" */
};
/* All VMAs in address order; *vmas is malloc'ed, free with free_proc_vmas(). */
int parse_pid_smaps(pid_t pid, struct proc_vma **vmas, unsigned int *nr);
void free_proc_vmas(struct proc_vma *vmas, unsigned int nr);

/*
 * /proc/PID/fdinfo/FD, whole. The kernel prints it in one go, so values that change
 * together (a timerfd's expirations and time left) come from one moment.
 */
struct proc_fdinfo {
	pid_t pid;
	int fd;
	char text[4096]; /* NUL-terminated */
};
int parse_fd_fdinfo(pid_t pid, int fd, struct proc_fdinfo *fi);
/*
 * The value after key (which starts a line of fi->text) scanned with fmt, which must fill
 * nr values. 0, or -EINVAL after an error line naming the fd and the key.
 */
int fdinfo_scan(const struct proc_fdinfo *fi, const char *key, int nr, const char *fmt, ...)
	__attribute__((format(scanf, 4, 5)));

#endif
