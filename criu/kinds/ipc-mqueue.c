/*
 * POSIX message queues of an IPC namespace (ipc-mqueue.h), in ipcns-mq-ID.img (ext.proto:
 * CRIU has no image for them). A queue lives in its IPC namespace whether or not a task
 * holds it open, so the namespace's queues are dumped with it: names, modes, owners,
 * sizes and messages. A queue with a notification registered (mq_notify) is refused: the
 * registration belongs to a process, and only that process could make it again.
 *
 * Dump runs in the child of criu that joined the tree's namespaces (ns-ipc.c). It lists
 * the queues on a detached mount of the namespace's mqueue filesystem (fsmount: nothing
 * is mounted where anyone sees it), takes each queue's messages out with mq_receive() and
 * puts them back at once, in the same order with the same priorities, so the queue holds
 * what it held. Restore, in the root task in the new namespace, makes each queue again.
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "ipc-mqueue.h"
#include "log.h"

/* ---------------------------------------------------------------- dump ---- */

/* The namespace's mqueue filesystem, mounted nowhere; a directory fd on it. */
static int open_mqueue_fs(uint32_t ns_id)
{
	int fs, mnt, dir;

	/* fsmount() wants CAP_SYS_ADMIN over our mount namespace: one of our own. */
	if (unshare(CLONE_NEWNS)) {
		pr_perror("ipc namespace %u: cannot unshare a mount namespace", ns_id);
		return -errno;
	}
	fs = fsopen("mqueue", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0)) {
		pr_perror("ipc namespace %u: cannot make its mqueue filesystem", ns_id);
		if (fs >= 0)
			close(fs);
		return -errno;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
	close(fs);
	if (mnt < 0) {
		pr_perror("ipc namespace %u: cannot mount its mqueue filesystem", ns_id);
		return -errno;
	}
	dir = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		pr_perror("ipc namespace %u: cannot open its mqueue filesystem", ns_id);
	close(mnt);
	return dir < 0 ? -errno : dir;
}

/* The queue file's "QSIZE:.. NOTIFY:.. SIGNO:.. NOTIFY_PID:.." line: who is notified. */
static int notify_pid_of(int dir, const char *name, int *pid)
{
	char text[160] = "";
	ssize_t n;
	int fd;

	fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("POSIX message queue /%s: cannot open its file", name);
		return -errno;
	}
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0 || !strstr(text, "NOTIFY_PID:") ||
	    sscanf(strstr(text, "NOTIFY_PID:"), "NOTIFY_PID:%d", pid) != 1) {
		pr_err("POSIX message queue /%s: cannot read its state (\"%.80s\")\n", name, text);
		return -EIO;
	}
	return 0;
}

static void free_msgs(CrPosixMqEntry *e)
{
	for (size_t i = 0; i < e->n_msgs; i++) {
		free(e->msgs[i]->data.data);
		free(e->msgs[i]);
	}
	free(e->msgs);
	e->msgs = NULL;
	e->n_msgs = 0;
}

/* Every message out, in the order they come, then all back in that order. */
static int take_messages(mqd_t mq, CrPosixMqEntry *e, long curmsgs)
{
	int ret = 0;

	e->msgs = calloc(curmsgs ? curmsgs : 1, sizeof(*e->msgs));
	if (!e->msgs)
		return -ENOMEM;
	for (long i = 0; i < curmsgs && !ret; i++) {
		CrPosixMqMsg *m = malloc(sizeof(*m));
		char *buf = malloc(e->msgsize ? e->msgsize : 1);
		unsigned int prio;
		ssize_t n = -1;

		if (m && buf)
			n = mq_receive(mq, buf, e->msgsize, &prio);
		if (n < 0) {
			ret = m && buf ? -errno : -ENOMEM;
			free(m);
			free(buf);
			pr_err("POSIX message queue /%s: cannot take message %ld of %ld: %s\n",
			       e->name, i, curmsgs, strerror(-ret));
			break;
		}
		cr_posix_mq_msg__init(m);
		m->prio = prio;
		m->data.data = (uint8_t *)buf;
		m->data.len = n;
		e->msgs[e->n_msgs++] = m;
	}
	/* Put back what was taken, even after a failure: the tree keeps its messages. */
	for (size_t i = 0; i < e->n_msgs; i++) {
		if (mq_send(mq, (char *)e->msgs[i]->data.data, e->msgs[i]->data.len,
			    e->msgs[i]->prio)) {
			pr_perror("POSIX message queue /%s: cannot put message %zu back", e->name, i);
			ret = ret ?: -errno;
		}
	}
	return ret;
}

static int dump_one_queue(int dir, const char *name, struct cr_img *img)
{
	CrPosixMqEntry e = CR_POSIX_MQ_ENTRY__INIT;
	char path[NAME_MAX + 2];
	struct mq_attr attr;
	struct stat st;
	int notify_pid, ret;
	mqd_t mq;

	ret = notify_pid_of(dir, name, &notify_pid);
	if (ret)
		return ret;
	if (notify_pid) {
		pr_err("POSIX message queue /%s: process %d registered a notification (mq_notify), which cannot be restored\n",
		       name, notify_pid);
		return -ENOTSUP;
	}
	if (fstatat(dir, name, &st, 0)) {
		pr_perror("POSIX message queue /%s: cannot stat it", name);
		return -errno;
	}
	snprintf(path, sizeof(path), "/%s", name);
	mq = mq_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (mq == (mqd_t)-1 || mq_getattr(mq, &attr)) {
		pr_perror("POSIX message queue %s: cannot open it", path);
		if (mq != (mqd_t)-1)
			mq_close(mq);
		return -errno;
	}
	e.name = (char *)name;
	e.mode = st.st_mode & 07777;
	e.uid = st.st_uid;
	e.gid = st.st_gid;
	e.maxmsg = attr.mq_maxmsg;
	e.msgsize = attr.mq_msgsize;
	ret = take_messages(mq, &e, attr.mq_curmsgs);
	mq_close(mq);
	if (!ret)
		ret = pb_write_one(img, &e);
	if (!ret)
		pr_info("POSIX message queue %s: %zu messages of up to %llu bytes\n", path,
			e.n_msgs, (unsigned long long)e.msgsize);
	free_msgs(&e);
	return ret;
}

int posix_mq_dump(uint32_t ns_id)
{
	struct cr_img *img;
	struct dirent *de;
	int dir_fd, ret = 0;
	DIR *dir;

	dir_fd = open_mqueue_fs(ns_id);
	if (dir_fd < 0)
		return dir_fd;
	dir = fdopendir(dir_fd);
	if (!dir) {
		pr_perror("ipc namespace %u: cannot list its message queues", ns_id);
		close(dir_fd);
		return -errno;
	}
	/* Opened at the first queue: a namespace without any has no image. */
	img = NULL;
	while (!ret && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		if (!img && !(img = open_image(CR_IMG_IPCNS_MQ, O_WRONLY, ns_id)))
			ret = -EIO;
		if (!ret)
			ret = dump_one_queue(dirfd(dir), de->d_name, img);
	}
	if (img)
		close_image(img);
	closedir(dir);
	return ret;
}

/* --------------------------------------------------------------- restore ---- */

int posix_mq_collect(uint32_t ns_id, CrPosixMqEntry ***mqs, size_t *nr)
{
	struct cr_img *img;
	void *e;
	int ret;

	*mqs = NULL;
	*nr = 0;
	if (!img_exists(CR_IMG_IPCNS_MQ, ns_id))
		return 0;
	img = open_image(CR_IMG_IPCNS_MQ, O_RDONLY, ns_id);
	if (!img)
		return -EIO;
	while ((ret = pb_read_one(img, &e)) > 0) {
		const CrPosixMqEntry *q = e;
		CrPosixMqEntry **grown = NULL;

		if (!q->name[0] || strchr(q->name, '/') || strlen(q->name) > NAME_MAX) {
			pr_err("%s: \"%.80s\" is no queue name\n", img->name, q->name);
			ret = -EINVAL;
		} else if (!(grown = realloc(*mqs, (*nr + 1) * sizeof(*grown)))) {
			ret = -ENOMEM;
		}
		if (ret < 0) {
			pb_free(NULL, e);
			break;
		}
		*mqs = grown;
		(*mqs)[(*nr)++] = e;
	}
	close_image(img);
	return ret;
}

void posix_mq_free(CrPosixMqEntry **mqs, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		pb_free(NULL, mqs[i]);
	free(mqs);
}

static int restore_one_queue(const CrPosixMqEntry *e)
{
	struct mq_attr attr = { .mq_maxmsg = e->maxmsg, .mq_msgsize = e->msgsize };
	char path[NAME_MAX + 2];
	int ret = 0;
	mqd_t mq;

	snprintf(path, sizeof(path), "/%s", e->name);
	mq = mq_open(path, O_CREAT | O_EXCL | O_WRONLY | O_NONBLOCK | O_CLOEXEC, 0600, &attr);
	if (mq == (mqd_t)-1) {
		pr_perror("POSIX message queue %s: cannot make it (%llu messages of %llu bytes)",
			  path, (unsigned long long)e->maxmsg, (unsigned long long)e->msgsize);
		return -errno;
	}
	for (size_t i = 0; i < e->n_msgs && !ret; i++) {
		if (mq_send(mq, (char *)e->msgs[i]->data.data, e->msgs[i]->data.len,
			    e->msgs[i]->prio)) {
			pr_perror("POSIX message queue %s: cannot queue message %zu", path, i);
			ret = -errno;
		}
	}
	/* The mode mq_open() took went through the umask; the owner is the tree's. */
	if (!ret && (fchown(mq, e->uid, e->gid) || fchmod(mq, e->mode))) {
		pr_perror("POSIX message queue %s: cannot give it owner %u:%u and mode %#o", path,
			  e->uid, e->gid, e->mode);
		ret = -errno;
	}
	mq_close(mq);
	return ret;
}

int posix_mq_restore(CrPosixMqEntry *const *mqs, size_t nr)
{
	int ret = 0;

	for (size_t i = 0; i < nr && !ret; i++)
		ret = restore_one_queue(mqs[i]);
	return ret;
}
