/*
 * IPC namespaces: the SysV objects and the sysctls of a root with an IPC namespace of its
 * own, in CRIU's images: ipcns-var-ID.img (kernel/sem, kernel/msg*, kernel/shm*, the
 * fs/mqueue sysctls), ipcns-shm-ID.img (each segment and its contents), ipcns-msg-ID.img
 * (each queue and its messages in order), ipcns-sem-ID.img (each set and its values);
 * and its POSIX message queues in ipcns-mq-ID.img, an image of our own (ipc-mqueue.c).
 *
 * Restore clones the root with CLONE_NEWIPC; the root re-creates every object with its id
 * (kernel/shm_next_id and the like) before it forks anything, so that the objects exist
 * before any task restores its memory and attaches a segment again (task_stages()).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "ipc-mqueue.h"
#include "log.h"
#include "namespaces.h"
#include "shmem.h"

#include "ipc-msg.pb-c.h"
#include "ipc-sem.pb-c.h"
#include "ipc-shm.pb-c.h"
#include "ipc-var.pb-c.h"

#ifndef MSG_COPY
#define MSG_COPY 040000
#endif
#ifndef SHM_HUGE_SHIFT
#define SHM_HUGE_SHIFT 26
#endif
#define SHM_HUGE_BITS	(SHM_HUGETLB | (0x3fu << SHM_HUGE_SHIFT))

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define IPC_MODE_PERMS 0777

/* ---------------------------------------------------------------- sysctls ---- */

/* One sysctl of ipc_var_entry: a u32 (kernel/sem: four), or a u64. */
struct ipc_sysctl {
	const char *path; /* under /proc/sys */
	size_t off;	  /* of the value in IpcVarEntry */
	size_t has_off;	  /* of its has_ flag; 0: a required field */
	bool u64;
	bool next_id; /* kernel/msg_next_id and the like: -1 reads as "none asked for" */
};

/* clang-format off */
#define VAR(p, f) { p, offsetof(IpcVarEntry, f), 0, false, false }
#define VAR64(p, f) { p, offsetof(IpcVarEntry, f), 0, true, false }
#define VAR_OPT(p, f) { p, offsetof(IpcVarEntry, f), offsetof(IpcVarEntry, has_##f), false, false }
#define VAR_ID(p, f) { p, offsetof(IpcVarEntry, f), offsetof(IpcVarEntry, has_##f), false, true }
/* clang-format on */

/*
 * Limits before defaults (fs/mqueue checks one against the other); the next ids last: on
 * restore they are set once the objects, which each take one, exist.
 */
static const struct ipc_sysctl ipc_sysctls[] = {
	VAR("kernel/msgmax", msg_ctlmax),
	VAR("kernel/msgmnb", msg_ctlmnb),
	VAR("kernel/msgmni", msg_ctlmni),
	VAR("kernel/auto_msgmni", auto_msgmni),
	VAR64("kernel/shmmax", shm_ctlmax),
	VAR64("kernel/shmall", shm_ctlall),
	VAR("kernel/shmmni", shm_ctlmni),
	VAR("kernel/shm_rmid_forced", shm_rmid_forced),
	VAR("fs/mqueue/queues_max", mq_queues_max),
	VAR("fs/mqueue/msg_max", mq_msg_max),
	VAR("fs/mqueue/msgsize_max", mq_msgsize_max),
	VAR_OPT("fs/mqueue/msg_default", mq_msg_default),
	VAR_OPT("fs/mqueue/msgsize_default", mq_msgsize_default),
	VAR_ID("kernel/msg_next_id", msg_next_id),
	VAR_ID("kernel/sem_next_id", sem_next_id),
	VAR_ID("kernel/shm_next_id", shm_next_id),
};
#define NR_IPC_SYSCTLS (sizeof(ipc_sysctls) / sizeof(ipc_sysctls[0]))
#define NR_SEM_CTLS    4 /* kernel/sem: SEMMSL SEMMNS SEMOPM SEMMNI */

static int read_sysctl(const char *path, char *buf, size_t size)
{
	char full[96];
	ssize_t len;
	int fd;

	snprintf(full, sizeof(full), "/proc/sys/%s", path);
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("cannot open %s", full);
		return -errno;
	}
	len = read(fd, buf, size - 1);
	close(fd);
	if (len < 0) {
		pr_perror("cannot read %s", full);
		return -errno;
	}
	buf[len] = '\0';
	return 0;
}

static int write_sysctl(const char *path, const char *text)
{
	char full[96];
	ssize_t len = strlen(text);
	int fd;

	snprintf(full, sizeof(full), "/proc/sys/%s", path);
	fd = open(full, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && opts.weak_sysctls) {
		pr_warn("%s: no such sysctl on this kernel, not set (--weak-sysctls)\n", full);
		return 0;
	}
	if (fd < 0 || write(fd, text, len) != len) {
		pr_perror("cannot write \"%s\" to %s", text, full);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	close(fd);
	return 0;
}

/* The sysctl's text as this field holds it: a number, unsigned as the image has it. */
static void sysctl_text(const struct ipc_sysctl *s, const IpcVarEntry *e, char *buf, size_t size)
{
	const char *field = (const char *)e + s->off;

	if (s->u64)
		snprintf(buf, size, "%" PRIu64 "\n", *(const uint64_t *)field);
	else
		snprintf(buf, size, "%u\n", *(const uint32_t *)field);
}

static int dump_one_sysctl(const struct ipc_sysctl *s, IpcVarEntry *e)
{
	char *field = (char *)e + s->off, buf[64], *end;
	long long value;
	int ret;

	ret = read_sysctl(s->path, buf, sizeof(buf));
	if (ret)
		return ret;
	errno = 0;
	value = s->u64 ? (long long)strtoull(buf, &end, 10) : strtoll(buf, &end, 10);
	if (errno || end == buf) {
		pr_err("/proc/sys/%s: not a number: %s\n", s->path, buf);
		return -EINVAL;
	}
	if (s->has_off)
		*(protobuf_c_boolean *)((char *)e + s->has_off) = !(s->next_id && value == -1);
	if (s->u64)
		*(uint64_t *)field = value;
	else
		*(uint32_t *)field = value;
	return 0;
}

static int dump_ipc_var(uint32_t ns_id)
{
	IpcVarEntry e = IPC_VAR_ENTRY__INIT;
	uint32_t sem[NR_SEM_CTLS];
	struct cr_img *img;
	char buf[128];
	int ret;

	ret = read_sysctl("kernel/sem", buf, sizeof(buf));
	if (!ret && sscanf(buf, "%u %u %u %u", &sem[0], &sem[1], &sem[2], &sem[3]) != NR_SEM_CTLS) {
		pr_err("/proc/sys/kernel/sem: not four numbers: %s\n", buf);
		ret = -EINVAL;
	}
	for (size_t i = 0; i < NR_IPC_SYSCTLS && !ret; i++)
		ret = dump_one_sysctl(&ipc_sysctls[i], &e);
	if (ret)
		return ret;
	e.n_sem_ctls = NR_SEM_CTLS;
	e.sem_ctls = sem;
	img = open_image(CR_IMG_IPC_VAR, O_WRONLY, ns_id);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &e);
	close_image(img);
	return ret;
}

/* ------------------------------------------------------------------- dump ---- */

static void fill_desc(IpcDescEntry *desc, int id, const struct ipc_perm *perm)
{
	desc->id = id;
	desc->key = perm->__key;
	desc->uid = perm->uid;
	desc->gid = perm->gid;
	desc->cuid = perm->cuid;
	desc->cgid = perm->cgid;
	desc->mode = perm->mode;
}

/* Data after an entry, zeros up to align. */
static int write_padded(struct cr_img *img, const void *data, size_t len, size_t align)
{
	static const char zeros[8];
	int ret = img_write_raw(img, data, len);

	if (!ret && len % align)
		ret = img_write_raw(img, zeros, align - len % align);
	return ret;
}

/*
 * The page size of the mapping that starts at addr, as /proc/self/smaps gives it (read,
 * unlike map_files, without privilege over criu's own user namespace: the dumper may be in
 * the tree's).
 */
static int mapping_page_kb(const void *addr, unsigned long *page_kb)
{
	unsigned long start, end;
	bool in_it = false;
	char line[512];
	FILE *f;

	f = fopen("/proc/self/smaps", "re");
	if (!f) {
		pr_perror("cannot open /proc/self/smaps");
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			in_it = start == (unsigned long)addr;
		else if (in_it && sscanf(line, "KernelPageSize: %lu kB", page_kb) == 1) {
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	pr_err("no mapping at %p in /proc/self/smaps\n", addr);
	return -ENOENT;
}

/* SHM_HUGETLB with the page size, as shmget() takes it, for a hugetlbfs segment; or 0. */
static int shm_hugetlb_flag(const void *addr, uint32_t *flag)
{
	unsigned long page_kb;
	int ret;

	*flag = 0;
	ret = mapping_page_kb(addr, &page_kb);
	if (ret)
		return ret;
	if (page_kb * 1024 != (unsigned long)sysconf(_SC_PAGESIZE))
		*flag = SHM_HUGETLB | ((uint32_t)__builtin_ctzl(page_kb * 1024) << SHM_HUGE_SHIFT);
	return 0;
}

/* The contents follow the entry (in_pagemaps unset), padded to 4 bytes as CRIU pads them. */
static int dump_shm_seg(struct cr_img *img, uint32_t ns_id, int id, const void *stat)
{
	const struct shmid_ds *ds = stat;
	IpcShmEntry e = IPC_SHM_ENTRY__INIT;
	IpcDescEntry desc = IPC_DESC_ENTRY__INIT;
	void *addr;
	int ret;

	/* A segment removed while attached keeps SHM_DEST in its mode (ipc_restore_late()). */
	fill_desc(&desc, id, &ds->shm_perm);
	e.desc = &desc;
	e.size = ds->shm_segsz;
	addr = shmat(id, NULL, SHM_RDONLY);
	if (addr == (void *)-1) {
		pr_perror("ipc namespace %u: cannot attach shared memory segment %d", ns_id, id);
		return -errno;
	}
	ret = shm_hugetlb_flag(addr, &e.hugetlb_flag);
	e.has_hugetlb_flag = e.hugetlb_flag != 0;
	if (!ret)
		ret = pb_write_one(img, &e);
	if (!ret)
		ret = write_padded(img, addr, e.size, 4);
	shmdt(addr);
	pr_info("ipc namespace %u: shm %d key %#x mode %#o size %" PRIu64 "%s\n", ns_id, id,
		desc.key, desc.mode, e.size, e.hugetlb_flag ? " (hugetlb)" : "");
	return ret;
}

static int dump_msg_queue(struct cr_img *img, uint32_t ns_id, int id, const void *stat)
{
	const struct msqid_ds *ds = stat;
	IpcMsgEntry e = IPC_MSG_ENTRY__INIT;
	IpcDescEntry desc = IPC_DESC_ENTRY__INIT;
	/* No message is longer than the bytes the queue holds. */
	size_t max = ds->__msg_cbytes;
	struct msgbuf *buf;
	int ret;

	fill_desc(&desc, id, &ds->msg_perm);
	e.desc = &desc;
	e.qbytes = ds->msg_qbytes;
	e.qnum = ds->msg_qnum;
	ret = pb_write_one(img, &e);
	buf = malloc(sizeof(*buf) + max);
	if (!buf) {
		pr_err("no memory for the messages of queue %d\n", id);
		return -ENOMEM;
	}
	/* MSG_COPY: the n-th message, left in the queue. */
	for (uint32_t n = 0; n < e.qnum && !ret; n++) {
		IpcMsg msg = IPC_MSG__INIT;
		ssize_t len = msgrcv(id, buf, max, n, IPC_NOWAIT | MSG_COPY);

		if (len < 0) {
			pr_perror("ipc namespace %u: cannot copy message %u of queue %d", ns_id, n,
				  id);
			ret = -errno;
			break;
		}
		msg.mtype = buf->mtype;
		msg.msize = len;
		ret = pb_write_one(img, &msg) ?: write_padded(img, buf->mtext, len, 8);
	}
	free(buf);
	pr_info("ipc namespace %u: msg queue %d key %#x mode %#o, %u messages\n", ns_id, id,
		desc.key, desc.mode, e.qnum);
	return ret;
}

static int dump_sem_set(struct cr_img *img, uint32_t ns_id, int id, const void *stat)
{
	const struct semid_ds *ds = stat;
	IpcSemEntry e = IPC_SEM_ENTRY__INIT;
	IpcDescEntry desc = IPC_DESC_ENTRY__INIT;
	unsigned short *values;
	int ret;

	fill_desc(&desc, id, &ds->sem_perm);
	e.desc = &desc;
	e.nsems = ds->sem_nsems;
	values = calloc(e.nsems ? e.nsems : 1, sizeof(*values));
	if (!values) {
		pr_err("no memory for the values of semaphore set %d\n", id);
		return -ENOMEM;
	}
	if (semctl(id, 0, GETALL, values) < 0) {
		pr_perror("ipc namespace %u: cannot read the values of semaphore set %d", ns_id,
			  id);
		ret = -errno;
	} else {
		ret = pb_write_one(img, &e)
			      ?: write_padded(img, values, e.nsems * sizeof(*values), 8);
	}
	free(values);
	pr_info("ipc namespace %u: sem set %d key %#x mode %#o, %u semaphores\n", ns_id, id,
		desc.key, desc.mode, e.nsems);
	return ret;
}

/*
 * One kind of object: *_INFO gives the highest index in use, *_STAT by index gives the
 * object's id and state; stat and dump are that kind's.
 */
struct ipc_walk {
	const char *what;
	enum cr_img_type img_type;
	int (*stat)(int index, void *ds);
	int (*dump)(struct cr_img *img, uint32_t ns_id, int id, const void *ds);
	int (*max_index)(void);
};

static int shm_max_index(void)
{
	struct shm_info info;

	return shmctl(0, SHM_INFO, (struct shmid_ds *)&info);
}

static int shm_stat(int index, void *ds)
{
	return shmctl(index, SHM_STAT, ds);
}

static int msg_max_index(void)
{
	struct msginfo info;

	return msgctl(0, MSG_INFO, (struct msqid_ds *)&info);
}

static int msg_stat(int index, void *ds)
{
	return msgctl(index, MSG_STAT, ds);
}

static int sem_max_index(void)
{
	struct seminfo info;

	return semctl(0, 0, SEM_INFO, &info);
}

static int sem_stat(int index, void *ds)
{
	return semctl(index, 0, SEM_STAT, ds);
}

static const struct ipc_walk ipc_walks[] = {
	{ "shared memory segments", CR_IMG_IPCNS_SHM, shm_stat, dump_shm_seg, shm_max_index },
	{ "message queues", CR_IMG_IPCNS_MSG, msg_stat, dump_msg_queue, msg_max_index },
	{ "semaphore sets", CR_IMG_IPCNS_SEM, sem_stat, dump_sem_set, sem_max_index },
};

static int dump_objects(const struct ipc_walk *w, uint32_t ns_id)
{
	union {
		struct shmid_ds shm;
		struct msqid_ds msg;
		struct semid_ds sem;
	} ds;
	struct cr_img *img;
	int max, ret = 0;

	max = w->max_index();
	if (max < 0) {
		pr_perror("ipc namespace %u: cannot list its %s", ns_id, w->what);
		return -errno;
	}
	img = open_image(w->img_type, O_WRONLY, ns_id);
	if (!img)
		return -EIO;
	for (int i = 0; i <= max && !ret; i++) {
		int id = w->stat(i, &ds);

		if (id >= 0) {
			ret = w->dump(img, ns_id, id, &ds);
		} else if (errno != EINVAL) { /* EINVAL: an index no object has */
			pr_perror("ipc namespace %u: cannot read its %s at index %d", ns_id,
				  w->what, i);
			ret = -errno;
		}
	}
	close_image(img);
	return ret;
}

static int ipc_dump(const struct ns_id *ns)
{
	int ret = dump_ipc_var(ns->id);

	for (size_t i = 0; i < sizeof(ipc_walks) / sizeof(ipc_walks[0]) && !ret; i++)
		ret = dump_objects(&ipc_walks[i], ns->id);
	return ret ?: posix_mq_dump(ns->id);
}

/* --------------------------------------------------------------- restore ---- */

struct ipc_shm {
	IpcShmEntry *e;
	off_t data_off; /* its contents in ipcns-shm-ID.img, unless in_pagemaps */
};

struct ipc_msgq {
	IpcMsgEntry *e;
	IpcMsg **msgs; /* e->qnum of them, and their texts */
	char **texts;
};

struct ipc_sem {
	IpcSemEntry *e;
	unsigned short *values;
};

/* An IPC namespace's images, decoded by the main process for the root to restore. */
struct ipc_ns_image {
	IpcVarEntry *var;
	struct ipc_shm *shms;
	size_t nr_shms;
	struct ipc_msgq *msgqs;
	size_t nr_msgqs;
	struct ipc_sem *sems;
	size_t nr_sems;
	CrPosixMqEntry **mqs;
	size_t nr_mqs;
};

/* Past len bytes of data and their padding to align, checking the image holds them. */
static int skip_padded(struct cr_img *img, uint64_t len, size_t align, off_t *data_off)
{
	uint64_t padded = ALIGN_UP(len, align);
	off_t left = img_bytes_left(img);

	if (left < 0)
		return left;
	if (padded > (uint64_t)left) {
		pr_err("%s: truncated image (%" PRIu64 " bytes of data, %lld left)\n", img->name,
		       padded, (long long)left);
		return -EINVAL;
	}
	*data_off = lseek(img->fd, 0, SEEK_CUR);
	if (*data_off < 0 || lseek(img->fd, padded, SEEK_CUR) < 0) {
		pr_perror("%s: cannot seek", img->name);
		return -errno;
	}
	return 0;
}

/* len bytes of data into buf (malloc'ed), then past their padding to align. */
static int read_padded(struct cr_img *img, uint64_t len, size_t align, void **buf)
{
	off_t off;
	int ret = skip_padded(img, len, align, &off);

	if (ret)
		return ret;
	*buf = malloc(len ? len : 1);
	if (!*buf) {
		pr_err("%s: no memory for %" PRIu64 " bytes\n", img->name, len);
		return -ENOMEM;
	}
	if (pread(img->fd, *buf, len, off) != (ssize_t)len) {
		pr_perror("%s: cannot read %" PRIu64 " bytes", img->name, len);
		return -EIO;
	}
	return 0;
}

static void *grow(void *array, size_t nr, size_t size, const char *what)
{
	void *grown = realloc(array, (nr + 1) * size);

	if (!grown)
		pr_err("no memory for %zu %s\n", nr + 1, what);
	else
		memset((char *)grown + nr * size, 0, size);
	return grown;
}

static int check_shm(const struct cr_img *img, const IpcShmEntry *e)
{
	if (e->has_hugetlb_flag && e->hugetlb_flag &&
	    (!(e->hugetlb_flag & SHM_HUGETLB) || (e->hugetlb_flag & ~SHM_HUGE_BITS))) {
		pr_err("%s: segment %u: hugetlb flag %#x is not SHM_HUGETLB with a page size\n",
		       img->name, e->desc->id, e->hugetlb_flag);
		return -EINVAL;
	}
	if (!e->size) {
		pr_err("%s: segment %u has no size\n", img->name, e->desc->id);
		return -EINVAL;
	}
	return 0;
}

static int collect_shm(struct ipc_ns_image *im, struct cr_img *img, IpcShmEntry *e)
{
	struct ipc_shm *grown = grow(im->shms, im->nr_shms, sizeof(*grown), "shm segments");
	struct ipc_shm *s;

	if (!grown) {
		pb_free(img, e);
		return -ENOMEM;
	}
	im->shms = grown;
	s = &im->shms[im->nr_shms++];
	s->e = e;
	if (check_shm(img, e))
		return -EINVAL;
	/* Upstream criu puts the contents in pagemap-shmem-ID.img: read when restored. */
	return e->has_in_pagemaps && e->in_pagemaps ? 0
						    : skip_padded(img, e->size, 4, &s->data_off);
}

static int collect_msgq(struct ipc_ns_image *im, struct cr_img *img, IpcMsgEntry *e)
{
	struct ipc_msgq *grown = grow(im->msgqs, im->nr_msgqs, sizeof(*grown), "msg queues");
	struct ipc_msgq *q;
	int ret = 0;

	if (!grown) {
		pb_free(img, e);
		return -ENOMEM;
	}
	im->msgqs = grown;
	q = &im->msgqs[im->nr_msgqs++];
	q->e = e;
	if (e->qnum > (uint64_t)img_bytes_left(img)) {
		pr_err("%s: queue %u: %u messages, more than the image holds\n", img->name,
		       e->desc->id, e->qnum);
		return -EINVAL;
	}
	q->msgs = calloc(e->qnum + 1, sizeof(*q->msgs));
	q->texts = calloc(e->qnum + 1, sizeof(*q->texts));
	if (!q->msgs || !q->texts) {
		pr_err("no memory for %u messages\n", e->qnum);
		return -ENOMEM;
	}
	for (uint32_t n = 0; n < e->qnum && !ret; n++) {
		ret = pb_read_one_required_as(img, &ipc_msg__descriptor, (void **)&q->msgs[n]);
		if (!ret && (q->msgs[n]->mtype < 1 || q->msgs[n]->mtype > LONG_MAX)) {
			pr_err("%s: queue %u: message %u has type %" PRIu64 ", not one msgsnd() "
			       "takes\n",
			       img->name, e->desc->id, n, q->msgs[n]->mtype);
			ret = -EINVAL;
		}
		if (!ret)
			ret = read_padded(img, q->msgs[n]->msize, 8, (void **)&q->texts[n]);
	}
	return ret;
}

#define SEMVMX 32767 /* the largest value a semaphore holds */

static int collect_sem(struct ipc_ns_image *im, struct cr_img *img, IpcSemEntry *e)
{
	struct ipc_sem *grown = grow(im->sems, im->nr_sems, sizeof(*grown), "semaphore sets");
	struct ipc_sem *s;
	int ret;

	if (!grown) {
		pb_free(img, e);
		return -ENOMEM;
	}
	im->sems = grown;
	s = &im->sems[im->nr_sems++];
	s->e = e;
	if (!e->nsems) {
		pr_err("%s: semaphore set %u has no semaphores\n", img->name, e->desc->id);
		return -EINVAL;
	}
	ret = read_padded(img, (uint64_t)e->nsems * sizeof(*s->values), 8, (void **)&s->values);
	for (uint32_t n = 0; n < e->nsems && !ret; n++) {
		if (s->values[n] > SEMVMX) {
			pr_err("%s: semaphore %u of set %u has value %u, above SEMVMX\n", img->name,
			       n, e->desc->id, s->values[n]);
			ret = -EINVAL;
		}
	}
	return ret;
}

/* Every entry of one objects image, with what follows each. A missing image: no object. */
static int collect_objects(struct ipc_ns_image *im, enum cr_img_type type, uint32_t ns_id)
{
	struct cr_img *img;
	void *e;
	int ret;

	if (!img_exists(type, ns_id))
		return 0;
	img = open_image(type, O_RDONLY, ns_id);
	if (!img)
		return -EIO;
	/* Each entry joins im first (ipc_fini() frees it), then what follows it is read. */
	while ((ret = pb_read_one(img, &e)) > 0) {
		if (type == CR_IMG_IPCNS_SHM)
			ret = collect_shm(im, img, e);
		else if (type == CR_IMG_IPCNS_MSG)
			ret = collect_msgq(im, img, e);
		else
			ret = collect_sem(im, img, e);
		if (ret)
			break;
	}
	close_image(img);
	return ret;
}

static void ipc_fini(struct ns_id *ns)
{
	struct ipc_ns_image *im = ns->priv;

	if (!im)
		return;
	pb_free(NULL, im->var);
	for (size_t i = 0; i < im->nr_shms; i++)
		pb_free(NULL, im->shms[i].e);
	for (size_t i = 0; i < im->nr_msgqs; i++) {
		for (uint32_t n = 0; im->msgqs[i].msgs && im->msgqs[i].msgs[n]; n++) {
			pb_free(NULL, im->msgqs[i].msgs[n]);
			free(im->msgqs[i].texts[n]);
		}
		free(im->msgqs[i].msgs);
		free(im->msgqs[i].texts);
		pb_free(NULL, im->msgqs[i].e);
	}
	for (size_t i = 0; i < im->nr_sems; i++) {
		free(im->sems[i].values);
		pb_free(NULL, im->sems[i].e);
	}
	posix_mq_free(im->mqs, im->nr_mqs);
	free(im->shms);
	free(im->msgqs);
	free(im->sems);
	free(im);
	ns->priv = NULL;
}

static int collect_var(struct ipc_ns_image *im, uint32_t ns_id)
{
	struct cr_img *img = open_image(CR_IMG_IPC_VAR, O_RDONLY, ns_id);
	int ret;

	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&im->var);
	if (!ret && im->var->n_sem_ctls != NR_SEM_CTLS) {
		pr_err("%s: %zu values for kernel/sem, not %d\n", img->name, im->var->n_sem_ctls,
		       NR_SEM_CTLS);
		ret = -EINVAL;
	}
	close_image(img);
	return ret;
}

static int ipc_collect(struct ns_id *ns)
{
	struct ipc_ns_image *im = calloc(1, sizeof(*im));
	int ret;

	if (!im) {
		pr_err("no memory for ipc namespace %u\n", ns->id);
		return -ENOMEM;
	}
	ns->priv = im;
	ret = collect_var(im, ns->id) ?: collect_objects(im, CR_IMG_IPCNS_SHM, ns->id) ?:
	      collect_objects(im, CR_IMG_IPCNS_MSG, ns->id) ?:
	      collect_objects(im, CR_IMG_IPCNS_SEM, ns->id) ?:
	      posix_mq_collect(ns->id, &im->mqs, &im->nr_mqs);
	if (ret) {
		ipc_fini(ns);
		return ret;
	}
	pr_info("ipc namespace %u: %zu shm segments, %zu msg queues, %zu semaphore sets, %zu POSIX message queues\n",
		ns->id, im->nr_shms, im->nr_msgqs, im->nr_sems, im->nr_mqs);
	return 0;
}

/* ---- in the root task, in the new namespace ---- */

/* The sysctls of ipc_var_entry that differ from the new namespace's (the limits, or the ids). */
static int restore_sysctls(const IpcVarEntry *e, bool next_ids)
{
	char text[64], cur[64];
	int ret = 0;

	if (!next_ids) {
		snprintf(text, sizeof(text), "%u %u %u %u\n", e->sem_ctls[0], e->sem_ctls[1],
			 e->sem_ctls[2], e->sem_ctls[3]);
		ret = read_sysctl("kernel/sem", cur, sizeof(cur));
		/* The kernel separates them with tabs. */
		for (char *c = cur; !ret && *c; c++)
			*c = *c == '\t' ? ' ' : *c;
		if (!ret && strcmp(cur, text))
			ret = write_sysctl("kernel/sem", text);
	}
	for (size_t i = 0; i < NR_IPC_SYSCTLS && !ret; i++) {
		const struct ipc_sysctl *s = &ipc_sysctls[i];
		IpcVarEntry now = IPC_VAR_ENTRY__INIT;

		if (s->next_id != next_ids ||
		    (s->has_off && !*(const protobuf_c_boolean *)((const char *)e + s->has_off)))
			continue;
		ret = dump_one_sysctl(s, &now);
		if (ret)
			break;
		if (memcmp((const char *)e + s->off, (char *)&now + s->off, s->u64 ? 8 : 4)) {
			sysctl_text(s, e, text, sizeof(text));
			ret = write_sysctl(s->path, text);
		}
	}
	return ret;
}

static int set_next_id(const char *path, uint32_t id)
{
	char text[16];

	snprintf(text, sizeof(text), "%u", id);
	return write_sysctl(path, text);
}

/* What *get() cannot give: the owner, and the permissions past the creating umask-free mode. */
static void set_perm(struct ipc_perm *perm, const IpcDescEntry *desc)
{
	perm->uid = desc->uid;
	perm->gid = desc->gid;
	perm->mode = desc->mode & IPC_MODE_PERMS;
}

static int check_id(const char *what, int id, const IpcDescEntry *desc)
{
	if (id < 0) {
		pr_perror("cannot create %s %u (key %#x)", what, desc->id, desc->key);
		return -errno;
	}
	if ((uint32_t)id != desc->id) {
		pr_err("%s %u (key %#x) was created as %d\n", what, desc->id, desc->key, id);
		return -EEXIST;
	}
	return 0;
}

/* The attached segment's contents: after its entry, or in pagemap-shmem-ID.img. */
static int fill_shm(const struct ipc_shm *s, void *addr, int data_fd)
{
	const IpcShmEntry *e = s->e;
	char what[64];
	uint64_t pages;

	snprintf(what, sizeof(what), "shm segment %u", e->desc->id);
	if (e->has_in_pagemaps && e->in_pagemaps)
		return shmem_fill_mem(addr, e->desc->id, e->size, what, &pages);
	if (pread(data_fd, addr, e->size, s->data_off) != (ssize_t)e->size) {
		pr_perror("%s: cannot read its %" PRIu64 " bytes", what, e->size);
		return -EIO;
	}
	return 0;
}

static int restore_shm(const struct ipc_shm *s, int data_fd)
{
	const IpcDescEntry *desc = s->e->desc;
	uint32_t huge = s->e->has_hugetlb_flag ? s->e->hugetlb_flag : 0;
	struct shmid_ds ds;
	void *addr;
	int id, ret;

	ret = set_next_id("kernel/shm_next_id", desc->id);
	if (ret)
		return ret;
	id = shmget(desc->key, s->e->size,
		    huge | (desc->mode & IPC_MODE_PERMS) | IPC_CREAT | IPC_EXCL);
	ret = check_id("shm segment", id, desc);
	if (ret)
		return ret;
	if (shmctl(id, IPC_STAT, &ds) < 0) {
		pr_perror("shm segment %d: IPC_STAT", id);
		return -errno;
	}
	set_perm(&ds.shm_perm, desc);
	if (shmctl(id, IPC_SET, &ds)) {
		pr_perror("shm segment %d: cannot set its owner %u:%u", id, desc->uid, desc->gid);
		return -errno;
	}
	addr = shmat(id, NULL, 0);
	if (addr == (void *)-1) {
		pr_perror("shm segment %d: cannot attach it", id);
		return -errno;
	}
	ret = fill_shm(s, addr, data_fd);
	shmdt(addr);
	if (!ret && (desc->mode & SHM_LOCKED) && shmctl(id, SHM_LOCK, NULL)) {
		pr_perror("shm segment %d: cannot lock it (SHM_LOCK)", id);
		ret = -errno;
	}
	return ret;
}

static int restore_msgq(const struct ipc_msgq *q)
{
	const IpcDescEntry *desc = q->e->desc;
	struct msqid_ds ds;
	int id, ret;

	ret = set_next_id("kernel/msg_next_id", desc->id);
	if (ret)
		return ret;
	id = msgget(desc->key, (desc->mode & IPC_MODE_PERMS) | IPC_CREAT | IPC_EXCL);
	ret = check_id("msg queue", id, desc);
	if (ret)
		return ret;
	if (msgctl(id, IPC_STAT, &ds) < 0) {
		pr_perror("msg queue %d: IPC_STAT", id);
		return -errno;
	}
	set_perm(&ds.msg_perm, desc);
	ds.msg_qbytes = q->e->qbytes;
	if (msgctl(id, IPC_SET, &ds)) {
		pr_perror("msg queue %d: cannot set its owner %u:%u and size %u", id, desc->uid,
			  desc->gid, q->e->qbytes);
		return -errno;
	}
	for (uint32_t n = 0; n < q->e->qnum && !ret; n++) {
		const IpcMsg *m = q->msgs[n];
		struct msgbuf *buf = malloc(sizeof(*buf) + m->msize);

		if (!buf) {
			pr_err("no memory for message %u of queue %d\n", n, id);
			return -ENOMEM;
		}
		buf->mtype = m->mtype;
		memcpy(buf->mtext, q->texts[n], m->msize);
		if (msgsnd(id, buf, m->msize, IPC_NOWAIT)) {
			pr_perror("msg queue %d: cannot queue message %u (%u bytes) again", id, n,
				  m->msize);
			ret = -errno;
		}
		free(buf);
	}
	return ret;
}

static int restore_sem(const struct ipc_sem *s)
{
	const IpcDescEntry *desc = s->e->desc;
	struct semid_ds ds;
	int id, ret;

	ret = set_next_id("kernel/sem_next_id", desc->id);
	if (ret)
		return ret;
	id = semget(desc->key, s->e->nsems, (desc->mode & IPC_MODE_PERMS) | IPC_CREAT | IPC_EXCL);
	ret = check_id("semaphore set", id, desc);
	if (ret)
		return ret;
	if (semctl(id, 0, IPC_STAT, &ds) < 0) {
		pr_perror("semaphore set %d: IPC_STAT", id);
		return -errno;
	}
	set_perm(&ds.sem_perm, desc);
	if (semctl(id, 0, IPC_SET, &ds)) {
		pr_perror("semaphore set %d: cannot set its owner %u:%u", id, desc->uid, desc->gid);
		return -errno;
	}
	if (semctl(id, 0, SETALL, s->values)) {
		pr_perror("semaphore set %d: cannot set its %u values", id, s->e->nsems);
		return -errno;
	}
	return 0;
}

static int restore_objects(const struct ipc_ns_image *im, uint32_t ns_id)
{
	struct cr_img *img = NULL;
	int ret = 0;

	if (im->nr_shms && img_exists(CR_IMG_IPCNS_SHM, ns_id)) {
		img = open_image(CR_IMG_IPCNS_SHM, O_RDONLY, ns_id);
		if (!img)
			return -EIO;
	}
	for (size_t i = 0; i < im->nr_shms && !ret; i++)
		ret = restore_shm(&im->shms[i], img ? img->fd : -1);
	close_image(img);
	for (size_t i = 0; i < im->nr_msgqs && !ret; i++)
		ret = restore_msgq(&im->msgqs[i]);
	for (size_t i = 0; i < im->nr_sems && !ret; i++)
		ret = restore_sem(&im->sems[i]);
	return ret;
}

static int ipc_restore(const struct ns_id *ns)
{
	const struct ipc_ns_image *im = ns->priv;
	int ret;

	/* Limits before the objects, which they bound; the ids the objects took, after. */
	ret = restore_sysctls(im->var, false) ?: restore_objects(im, ns->id) ?:
	      posix_mq_restore(im->mqs, im->nr_mqs) ?: restore_sysctls(im->var, true);
	if (!ret)
		pr_info("ipc namespace %u: %zu shm segments, %zu msg queues, %zu semaphore sets "
			"restored\n",
			ns->id, im->nr_shms, im->nr_msgqs, im->nr_sems);
	return ret;
}

/*
 * Segments removed (IPC_RMID) while attached: re-created, attached again by the tasks,
 * and only now removed again, so that they go with their last detach as they would have.
 */
static int ipc_restore_late(const struct ns_id *ns)
{
	const struct ipc_ns_image *im = ns->priv;

	for (size_t i = 0; i < im->nr_shms; i++) {
		const IpcDescEntry *desc = im->shms[i].e->desc;

		if (!(desc->mode & SHM_DEST))
			continue;
		if (shmctl(desc->id, IPC_RMID, NULL)) {
			pr_perror("ipc namespace %u: cannot remove shm segment %u again", ns->id,
				  desc->id);
			return -errno;
		}
		pr_info("ipc namespace %u: shm segment %u removed again (IPC_RMID)\n", ns->id,
			desc->id);
	}
	return 0;
}

const struct ns_kind ipc_ns_kind = {
	.name = "ipc",
	.clone_flag = CLONE_NEWIPC,
	.dump = ipc_dump,
	.collect = ipc_collect,
	.restore = ipc_restore,
	.restore_late = ipc_restore_late,
	.fini = ipc_fini,
};
