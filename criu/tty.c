/*
 * Terminals, as CRIU writes them: a TTY entry per open description (with a REG entry for
 * its path), a tty_info_entry per terminal in tty-info.img, the bytes queued in a pty in
 * tty-data.img. Four roles:
 *  - a pty of the tree: its master (/dev/ptmx, /dev/pts/ptmx) and its slaves (/dev/pts/N),
 *    re-created at the same index with the termios, window size, lock, packet and
 *    exclusive modes, queued bytes (pty-queue.c), owner of the slave node, and as the
 *    controlling terminal of its session with its foreground group;
 *  - a slave whose master was closed (hung up): re-created hung up, at its index;
 *  - /dev/tty of a task whose controlling terminal is such a pty;
 *  - any other terminal, a shell job's (--shell-job): re-opened on the terminal criu runs
 *    on, with the dumped termios.
 * CRIU's tty_info ids: a pty's index << 1, | 1 for the master; /dev/tty 2012 (its index
 * 1006 so shifted); other terminals here 0x80000000 | their device number.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#include "action-scripts.h"
#include "cr_options.h"
#include "fdstore.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "tty.h"

#include "tty.pb-c.h"

#define TTY_MAJOR	4 /* virtual consoles (minor < 64) and serial ports */
#define TTY_SERIAL_MINOR 64
#define TTYAUX_MAJOR	5 /* /dev/tty, /dev/console, /dev/ptmx */
#define CTTY_MINOR	0
#define CONSOLE_MINOR	1
#define PTMX_MINOR	2
#define PTS_MAJOR_FIRST 136 /* UNIX98 pty slaves */
#define PTS_MAJOR_LAST	143
/* CRIU's ids of the terminals that are not ptys: one for /dev/tty, /dev/console, any vt. */
#define CTTY_INFO_ID	(1006 << 1)
#define CONSOLE_INFO_ID (1002 << 1)
#define VT_INFO_ID	(1004 << 1)
#define OTHER_INFO_ID	0x80000000u
#define DELETED_MARK	" (deleted)"
/*
 * CRIU's image carries the kernel's 19 control characters as the bytes of a repeated
 * uint32 (19 words, the characters packed four to a word, little-endian).
 */
#define TERMIOS_NR_WORDS KERNEL_NCCS

static bool is_pts(unsigned int ma)
{
	return ma >= PTS_MAJOR_FIRST && ma <= PTS_MAJOR_LAST;
}

static bool tty_owns(const struct fd_parms *p)
{
	unsigned int ma = major(p->st.st_rdev);

	return S_ISCHR(p->st.st_mode) && (ma == TTY_MAJOR || ma == TTYAUX_MAJOR || is_pts(ma));
}

enum tty_role {
	TTY_PTY_MASTER,
	TTY_PTY_SLAVE,
	TTY_PTY_HUNG, /* a slave whose master was closed */
	TTY_CURRENT,  /* /dev/tty of a task whose controlling terminal is a pty of the tree */
	TTY_SHELL,    /* another terminal: a shell job's */
	TTY_ORPHAN,   /* restore: a pty slave whose master was outside the tree, on a new pty */
	TTY_DEVICE,   /* /dev/console or a virtual console: the system's, opened again by path */
};

static uint32_t pty_info_id(uint32_t index, bool master)
{
	return index << 1 | master;
}

static uint32_t pts_index(dev_t rdev)
{
	return (major(rdev) - PTS_MAJOR_FIRST) * 256 + minor(rdev);
}

/* A copy of entry (size bytes) after the *nr of *table, which grows; -ENOMEM after a line. */
static int append_entry(void **table, size_t *nr, const void *entry, size_t size,
			const char *what)
{
	char *grown = realloc(*table, (*nr + 1) * size);

	if (!grown) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	memcpy(grown + *nr * size, entry, size);
	*table = grown;
	(*nr)++;
	return 0;
}

/* ---------------------------------------------------------------- dump ---- */

static TtyType tty_type_of(dev_t rdev)
{
	unsigned int ma = major(rdev), mi = minor(rdev);

	if (is_pts(ma) || (ma == TTYAUX_MAJOR && mi == PTMX_MINOR))
		return TTY_TYPE__PTY;
	if (ma == TTYAUX_MAJOR)
		return mi == CTTY_MINOR ? TTY_TYPE__CTTY : TTY_TYPE__CONSOLE;
	return mi < TTY_SERIAL_MINOR ? TTY_TYPE__VT : TTY_TYPE__SERIAL;
}

/* Terminals whose tty_info_entry is written, by id: one entry per terminal. */
static uint32_t *dumped_infos;
static size_t nr_dumped_infos;

static bool tty_info_dumped(uint32_t info_id)
{
	for (size_t i = 0; i < nr_dumped_infos; i++)
		if (dumped_infos[i] == info_id)
			return true;
	return false;
}

static int remember_tty_info(uint32_t info_id)
{
	return append_entry((void **)&dumped_infos, &nr_dumped_infos, &info_id, sizeof(info_id),
			    "tty-info.img");
}

/* What a terminal's tty_info_entry says, read through one of its fds. */
struct tty_state {
	bool hung; /* only what the fd and its node say: the terminal's ioctls fail (EIO) */
	struct kernel_termios termios, locked;
	struct winsize ws;
	int exclusive, pty_locked, packet;
	uint32_t sid, pgrp;
	/* restore makes the node again and gives it the owner (a pty's slave), or keeps it */
	bool node_made_again;
};

static void pack_termios(const struct kernel_termios *t, TermiosEntry *te, uint32_t *words)
{
	memset(words, 0, TERMIOS_NR_WORDS * sizeof(*words));
	for (unsigned int i = 0; i < KERNEL_NCCS; i++)
		words[i / 4] |= (uint32_t)t->c_cc[i] << (8 * (i % 4));
	te->c_iflag = t->c_iflag;
	te->c_oflag = t->c_oflag;
	te->c_cflag = t->c_cflag;
	te->c_lflag = t->c_lflag;
	te->c_line = t->c_line;
	/* The kernel's termios has no speed fields: they are bits of c_cflag. */
	te->c_ispeed = 0;
	te->c_ospeed = 0;
	te->n_c_cc = TERMIOS_NR_WORDS;
	te->c_cc = words;
}

static int write_tty_info(const struct fd_parms *p, uint32_t info_id, const struct tty_state *s)
{
	TtyInfoEntry tie = TTY_INFO_ENTRY__INIT;
	TermiosEntry te = TERMIOS_ENTRY__INIT, tle = TERMIOS_ENTRY__INIT;
	WinsizeEntry we = WINSIZE_ENTRY__INIT;
	TtyPtyEntry pte = TTY_PTY_ENTRY__INIT;
	uint32_t cc[TERMIOS_NR_WORDS], locked_cc[TERMIOS_NR_WORDS];
	struct cr_img *img;

	tie.id = info_id;
	tie.type = tty_type_of(p->st.st_rdev);
	tie.locked = s->pty_locked;
	tie.exclusive = s->exclusive;
	tie.packet_mode = s->packet;
	tie.sid = pidns_img_pid(s->sid);
	tie.pgrp = pidns_img_pid(s->pgrp);
	tie.rdev = p->st.st_rdev;
	/* A hung-up terminal has none of these: CRIU writes what it still has. */
	if (!s->hung) {
		pack_termios(&s->termios, &te, cc);
		pack_termios(&s->locked, &tle, locked_cc);
		we.ws_row = s->ws.ws_row;
		we.ws_col = s->ws.ws_col;
		we.ws_xpixel = s->ws.ws_xpixel;
		we.ws_ypixel = s->ws.ws_ypixel;
		tie.termios = &te;
		tie.termios_locked = &tle;
		tie.winsize = &we;
	}
	if (tie.type == TTY_TYPE__PTY) {
		pte.index = info_id >> 1;
		tie.pty = &pte;
	}
	tie.has_dev = tie.has_uid = tie.has_gid = true;
	tie.dev = kernel_dev(p->st.st_dev);
	if (s->node_made_again ?
		    userns_tree_owner(p->st.st_uid, p->st.st_gid, &tie.uid, &tie.gid, p->link) :
		    userns_seen_owner(p->st.st_uid, p->st.st_gid, &tie.uid, &tie.gid))
		return -ENOTSUP;
	img = files_side_image(CR_IMG_TTY_INFO);
	return img ? pb_write_one(img, &tie) : -EIO;
}

/* The termios, locked termios, window size and exclusive mode; EIO: hung up. */
static int read_tty_modes(int fd, const char *what, struct tty_state *s)
{
	if (ioctl(fd, TCGETS, &s->termios)) {
		if (errno == EIO) {
			s->hung = true;
			return 0;
		}
		goto err;
	}
	if (ioctl(fd, TIOCGWINSZ, &s->ws) || ioctl(fd, TIOCGLCKTRMIOS, &s->locked) ||
	    ioctl(fd, TIOCGEXCL, &s->exclusive))
		goto err;
	return 0;
err:
	pr_perror("%s: cannot read the state of the terminal", what);
	return -errno;
}

/*
 * The task's controlling terminal (a dev_t as userspace encodes it, 0: none), its session
 * and the terminal's foreground group, from /proc/PID/stat.
 */
static int read_task_ctty(pid_t pid, uint32_t *tty_nr, uint32_t *sid, uint32_t *tpgid)
{
	char path[64], buf[1024], *p;
	int session, fg;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 1, " %*c %*d %*d %d %u %d", &session, tty_nr, &fg) != 3) {
		pr_err("%s: cannot parse its session and terminal\n", path);
		return -EINVAL;
	}
	*sid = *tty_nr ? session : 0;
	*tpgid = *tty_nr && fg > 0 ? fg : 0;
	return 0;
}

/* ENOTTY: the answer is "none" (no session, not a pty side that has it). */
static int tty_query(int fd, unsigned long req, int *val, const char *what, const char *name)
{
	*val = 0;
	if (ioctl(fd, req, val) && errno != ENOTTY) {
		pr_perror("%s: cannot read its %s", what, name);
		return -errno;
	}
	return 0;
}

/*
 * Restore gives a pty back to the session it controls through the session's leader, and
 * into its foreground group: the leader must be a live task of the tree, the group (0:
 * none) a group of the session with a task in the tree.
 */
static bool is_live_leader(pid_t sid)
{
	const struct pstree_item *leader = pstree_find(sid);

	return leader && leader->sid == sid && !leader->zombie;
}

static bool session_has_group(pid_t sid, pid_t pgrp)
{
	for (struct pstree_item *item = root_item; item && pgrp; item = pstree_next(item))
		if (item->pgid == pgrp && item->sid == sid)
			return true;
	return !pgrp;
}

static int check_ctty_session(uint32_t index, pid_t sid, pid_t pgrp, const char *what)
{
	if (sid && !is_live_leader(sid)) {
		pr_err("%s: pty %u is the controlling terminal of session %d, whose leader is not "
		       "a live task of the dumped tree\n",
		       what, index, sid);
		return -ENOTSUP;
	}
	if (sid && !session_has_group(sid, pgrp)) {
		pr_err("%s: the foreground group %d of pty %u has no task of session %d in the "
		       "dumped tree\n",
		       what, pgrp, index, sid);
		return -ENOTSUP;
	}
	return 0;
}

/* The task holds the master (a "ptmx" fd whose fdinfo says tty-index: index). */
static bool fd_is_master_of(pid_t pid, int fd, uint32_t index)
{
	char path[64], line[128];
	bool found = false;
	unsigned int idx;
	ssize_t len;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	len = readlink(path, line, sizeof(line) - 1);
	if (len < 5)
		return false;
	line[len] = '\0';
	if (strcmp(line + len - 5, "/ptmx") || (len > 5 && line[len - 6] == ' '))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
	f = fopen(path, "re");
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "tty-index: %u", &idx) == 1 && idx == index;
	if (f)
		fclose(f);
	return found;
}

static bool fd_is_slave_of(pid_t pid, int fd, uint32_t index)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	return !stat(path, &st) && S_ISCHR(st.st_mode) && is_pts(major(st.st_rdev)) &&
	       pts_index(st.st_rdev) == index;
}

/* Whether a task of the tree has an fd that is; it is stopped, its fds stay as they are. */
static bool tree_holds(bool (*is)(pid_t pid, int fd, uint32_t index), uint32_t index)
{
	for (struct pstree_item *item = root_item; item; item = pstree_next(item)) {
		char path[64];
		size_t nr;
		int *fds;
		bool found = false;

		snprintf(path, sizeof(path), "/proc/%d/fd", item->pid);
		if (item->zombie || list_fds(path, &fds, &nr))
			continue;
		for (size_t i = 0; i < nr && !found; i++)
			found = is(item->pid, fds[i], index);
		free(fds);
		if (found)
			return true;
	}
	return false;
}

static int write_tty_data(uint32_t info_id, const uint8_t *bytes, size_t len)
{
	TtyDataEntry tde = TTY_DATA_ENTRY__INIT;
	struct cr_img *img;

	if (!len)
		return 0;
	img = files_side_image(CR_IMG_TTY_DATA);
	if (!img)
		return -EIO;
	tde.tty_id = info_id;
	tde.data.data = (uint8_t *)bytes; /* protobuf-c's field is not const; it is only read */
	tde.data.len = len;
	return pb_write_one(img, &tde);
}

/*
 * criu's own opening of the slave, non-blocking: through the master (TIOCGPTPEER), the
 * lock lifted for the moment if it is set.
 */
static int open_peer(int master_fd, bool locked, const char *what)
{
	int unlock = 0, lock = 1, fd;

	if (locked && ioctl(master_fd, TIOCSPTLCK, &unlock)) {
		pr_perror("%s: cannot unlock the pty", what);
		return -errno;
	}
	fd = ioctl(master_fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		pr_perror("%s: cannot open the slave through the master (TIOCGPTPEER)", what);
	if (locked && ioctl(master_fd, TIOCSPTLCK, &lock)) {
		pr_perror("%s: cannot lock the pty again", what);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	return fd < 0 ? -errno : fd;
}

/* The locked termios would keep the queues' termios changes from taking: off meanwhile. */
static int read_queues_unlocked(int master_fd, int slave_fd, const struct tty_state *s,
				struct pty_queues *q, const char *what)
{
	struct kernel_termios none = { 0 };
	bool locked = memcmp(&s->locked, &none, sizeof(none));
	int ret;

	if (locked && ioctl(slave_fd, TIOCSLCKTRMIOS, &none)) {
		pr_perror("%s: cannot lift the locked termios", what);
		return -errno;
	}
	ret = pty_read_queues(master_fd, slave_fd, &s->termios, s->packet, q, what);
	if (locked && ioctl(slave_fd, TIOCSLCKTRMIOS, &s->locked)) {
		pr_perror("%s: cannot lock the termios again", what);
		if (!ret)
			pty_queues_free(q);
		return -errno;
	}
	return ret;
}

/*
 * Both queues of the pty, read through criu's own slave opening. Not when no slave is
 * open and none ever was (the master does not say hung up): opening and closing one
 * would leave the pty as after its slave closed; nothing can be queued for the master
 * then, and what it may have written for a slave never opened stays unseen.
 */
static int dump_pty_queues(int master_fd, uint32_t index, const struct tty_state *s,
			   const char *what)
{
	struct pollfd pfd = { .fd = master_fd, .events = POLLIN };
	struct pty_queues q;
	int slave_fd, ret;

	if (poll(&pfd, 1, 0) < 0) {
		pr_perror("%s: cannot poll the master", what);
		return -errno;
	}
	if (!(pfd.revents & POLLHUP) && !tree_holds(fd_is_slave_of, index)) {
		pr_info("%s: no slave of pty %u is open: its queues are not read\n", what, index);
		return 0;
	}
	slave_fd = open_peer(master_fd, s->pty_locked, what);
	if (slave_fd < 0)
		return slave_fd;
	ret = read_queues_unlocked(master_fd, slave_fd, s, &q, what);
	close(slave_fd);
	if (ret)
		return ret;
	pr_info("%s: pty %u: %zu bytes queued for the master, %zu input keystrokes\n", what, index,
		q.output_len, q.input_len);
	ret = write_tty_data(pty_info_id(index, true), q.output, q.output_len);
	if (!ret)
		ret = write_tty_data(pty_info_id(index, false), q.input, q.input_len);
	pty_queues_free(&q);
	return ret;
}

/*
 * The pty's state as its master sees it: the termios, window size and locked termios are
 * the slave's (the master's ioctls reach the slave), the session and foreground group
 * those the slave controls.
 */
static int dump_master_info(const struct fd_parms *p, int fd, uint32_t index, const char *what)
{
	struct tty_state s = { 0 };
	int sid, pgrp, ret;

	ret = read_tty_modes(fd, what, &s);
	if (!ret && s.hung) {
		pr_err("%s: the master of pty %u is hung up\n", what, index);
		return -EIO;
	}
	if (!ret)
		ret = tty_query(fd, TIOCGPTLCK, &s.pty_locked, what, "lock (TIOCGPTLCK)");
	if (!ret)
		ret = tty_query(fd, TIOCGPKT, &s.packet, what, "packet mode (TIOCGPKT)");
	if (!ret)
		ret = tty_query(fd, TIOCGSID, &sid, what, "session (TIOCGSID)");
	if (!ret)
		ret = tty_query(fd, TIOCGPGRP, &pgrp, what, "foreground group (TIOCGPGRP)");
	if (!ret)
		ret = check_ctty_session(index, sid, pgrp, what);
	if (ret)
		return ret;
	s.sid = sid;
	s.pgrp = sid ? pgrp : 0;
	ret = write_tty_info(p, pty_info_id(index, true), &s);
	return ret ? ret : dump_pty_queues(fd, index, &s, what);
}

/* The session and group are the dumping task's, when the terminal is its controlling one. */
static int dump_terminal_info(const struct fd_parms *p, int fd, uint32_t info_id,
			      bool node_made_again, const char *what)
{
	struct tty_state s = { .node_made_again = node_made_again };
	uint32_t tty_nr;
	int ret;

	ret = read_tty_modes(fd, what, &s);
	if (!ret && !s.hung)
		ret = read_task_ctty(p->pid, &tty_nr, &s.sid, &s.pgrp);
	if (ret)
		return ret;
	if (!s.hung && (dev_t)tty_nr != p->st.st_rdev && info_id != CTTY_INFO_ID)
		s.sid = s.pgrp = 0;
	return write_tty_info(p, info_id, &s);
}

/* What dump found out about one terminal fd. */
struct tty_fd {
	enum tty_role role;
	uint32_t info_id;
	uint32_t index; /* of a pty */
};

static int classify_slave(const struct fd_parms *p, int fd, struct tty_fd *t)
{
	struct kernel_termios termios;

	t->index = pts_index(p->st.st_rdev);
	t->info_id = pty_info_id(t->index, false);
	if (ioctl(fd, TCGETS, &termios) && errno == EIO)
		t->role = TTY_PTY_HUNG;
	else
		t->role = tree_holds(fd_is_master_of, t->index) ? TTY_PTY_SLAVE : TTY_SHELL;
	return 0;
}

/* /dev/tty is the task's controlling terminal: the tree's own when it is a pty of it. */
static int classify_current(const struct fd_parms *p, struct tty_fd *t)
{
	uint32_t tty_nr, sid, pgrp;
	int ret = read_task_ctty(p->pid, &tty_nr, &sid, &pgrp);
	dev_t ctty = tty_nr;

	t->info_id = CTTY_INFO_ID;
	t->role = TTY_SHELL;
	if (!ret && tty_nr && is_pts(major(ctty)) && tree_holds(fd_is_master_of, pts_index(ctty)))
		t->role = TTY_CURRENT;
	return ret;
}

/* CRIU's format has one tty_info id for every virtual console: the tree may hold one. */
static int check_one_vt(dev_t rdev, const char *what)
{
	static dev_t dumped_vt;

	if (dumped_vt && dumped_vt != rdev) {
		pr_err("%s: a second virtual console (tty%u after tty%u): CRIU's images have room for one\n",
		       what, minor(rdev), minor(dumped_vt));
		return -ENOTSUP;
	}
	dumped_vt = rdev;
	return 0;
}

static int classify_tty_fd(const struct fd_parms *p, int fd, struct tty_fd *t, const char *what)
{
	unsigned int ma = major(p->st.st_rdev), mi = minor(p->st.st_rdev);

	*t = (struct tty_fd){ .role = TTY_SHELL };
	if (ma == TTYAUX_MAJOR && mi == PTMX_MINOR) {
		t->role = TTY_PTY_MASTER;
		if (ioctl(fd, TIOCGPTN, &t->index)) {
			pr_perror("%s: cannot read the index of the pty (TIOCGPTN)", what);
			return -errno;
		}
		t->info_id = pty_info_id(t->index, true);
		return 0;
	}
	if (is_pts(ma))
		return classify_slave(p, fd, t);
	if (ma == TTYAUX_MAJOR && mi == CTTY_MINOR)
		return classify_current(p, t);
	t->info_id = OTHER_INFO_ID | kernel_dev(p->st.st_rdev);
	if (ma == TTYAUX_MAJOR && mi == CONSOLE_MINOR) {
		t->role = TTY_DEVICE;
		t->info_id = CONSOLE_INFO_ID;
	} else if (ma == TTY_MAJOR && mi < TTY_SERIAL_MINOR) {
		t->role = TTY_DEVICE;
		t->info_id = VT_INFO_ID;
		return check_one_vt(p->st.st_rdev, what);
	}
	return 0;
}

static int dump_info_once(const struct fd_parms *p, int fd, const struct tty_fd *t,
			  const char *what)
{
	int ret;

	if (tty_info_dumped(t->info_id))
		return 0;
	if (t->role == TTY_PTY_MASTER)
		ret = dump_master_info(p, fd, t->index, what);
	else
		ret = dump_terminal_info(p, fd, t->info_id,
					 t->role == TTY_PTY_SLAVE || t->role == TTY_PTY_HUNG, what);
	return ret ? ret : remember_tty_info(t->info_id);
}

/* A hung-up slave's name left with its master; restore re-creates it at that name. */
static int dump_tty_path(const struct fd_parms *p, const struct tty_fd *t, uint32_t regf_id)
{
	size_t len = strlen(p->link), mark = strlen(DELETED_MARK);
	char path[PATH_MAX];

	if (t->role != TTY_PTY_HUNG || len <= mark || strcmp(p->link + len - mark, DELETED_MARK))
		return dump_reg_file(p, regf_id);
	snprintf(path, sizeof(path), "%.*s", (int)(len - mark), p->link);
	return dump_reg_path(p, regf_id, path);
}

static int tty_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	TtyFileEntry tfe = TTY_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	char what[PATH_MAX + 64];
	struct tty_fd t;
	int fd, ret;

	snprintf(what, sizeof(what), "fd %d of task %d (%s)", p->fd, p->pid, p->link);
	ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	ret = classify_tty_fd(p, fd, &t, what);
	/*
	 * A pty slave whose master is outside the tree (a container's console): CRIU's RPC
	 * option orphan_pts_master has restore make a new pty for it, whose master goes to
	 * the client.
	 */
	if (!ret && t.role == TTY_SHELL && !opts.shell_job &&
	    !(opts.orphan_pts_master && is_pts(major(p->st.st_rdev)))) {
		pr_err("fd %d of task %d is on terminal %s: dumping a process attached to a "
		       "terminal needs --shell-job (-j)\n",
		       p->fd, p->pid, p->link);
		ret = -ENOTSUP;
	}
	if (!ret)
		ret = dump_info_once(p, fd, &t, what);
	close(fd);
	tfe.id = id;
	tfe.tty_info_id = t.info_id;
	tfe.flags = p->flags;
	tfe.fown = &fown;
	tfe.has_regf_id = true;
	tfe.regf_id = files_new_id();
	if (!ret)
		ret = dump_tty_path(p, &t, tfe.regf_id);
	if (ret)
		return ret;
	fe.type = FD_TYPES__TTY;
	fe.id = id;
	fe.tty = &tfe;
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/* tty-info.img: one per terminal, by id. */
struct tty_info {
	uint32_t id;
	TtyType type;
	bool locked, exclusive, packet;
	pid_t sid, pgrp;
	bool has_termios, has_termios_locked, has_winsize, has_owner;
	struct kernel_termios termios, termios_locked;
	struct winsize winsize;
	uint32_t index;
	uid_t uid;
	gid_t gid;
	dev_t rdev;
};

static struct tty_info *tty_infos;
static size_t nr_tty_infos;

/* tty-data.img: bytes queued in a pty, by the tty_info id of the side that reads them. */
struct tty_data {
	uint32_t tty_id;
	uint8_t *bytes;
	size_t len;
};

static struct tty_data *tty_datas;
static size_t nr_tty_datas;

/*
 * One pty of the images. Collected in the main process before forking, so each restored
 * task has its own copy: the fields below "opening" are the opening task's.
 */
struct pty {
	uint32_t index;
	const struct tty_info *master, *slave; /* either may be absent */
	const struct tty_data *output, *input; /* queued for the master, for the slave */
	uint32_t master_file;		       /* its TTY entry; 0: none */
	unsigned int nr_slave_files;
	unsigned int nr_hung_files; /* slaves of a master that was closed */
	uint32_t hung_anchor;	    /* the lowest file id among those */
	/* opening */
	unsigned int nr_hung_opened;
	int fake_master_fd;
	/* TTY_ORPHAN: its slot in orphan_store_ids; -1 for another pty */
	int orphan_slot;
};

/*
 * Restore, orphan_pts_master: the fdstore id of each orphan pty's new master, written by
 * the task that made it and read by criu's main process (tty_tree_ready()); memory shared
 * across the fork, -1 until made.
 */
#define MAX_ORPHAN_PTYS 64
static int *orphan_store_ids;
static int nr_orphan_ptys;

static struct pty *ptys;
static size_t nr_ptys;

/* What a TTY entry decodes to. */
struct tty_end {
	enum tty_role role;
	uint32_t flags;
	const struct tty_info *info;
	const struct reg_file *regf;
	size_t pty; /* index in ptys (pty roles), which grows while entries are collected */
};

static const struct tty_info *find_tty_info(uint32_t id)
{
	for (size_t i = 0; i < nr_tty_infos; i++)
		if (tty_infos[i].id == id)
			return &tty_infos[i];
	return NULL;
}

static const struct tty_data *find_tty_data(uint32_t tty_id)
{
	for (size_t i = 0; i < nr_tty_datas; i++)
		if (tty_datas[i].tty_id == tty_id)
			return &tty_datas[i];
	return NULL;
}

static int unpack_termios(const TermiosEntry *te, struct kernel_termios *t, uint32_t info_id)
{
	if (te->n_c_cc * 4 < KERNEL_NCCS) {
		pr_err("tty-info.img: terminal %u: termios has %zu control character words, "
		       "%d characters need %d\n",
		       info_id, te->n_c_cc, KERNEL_NCCS, (KERNEL_NCCS + 3) / 4);
		return -EINVAL;
	}
	memset(t, 0, sizeof(*t));
	t->c_iflag = te->c_iflag;
	t->c_oflag = te->c_oflag;
	t->c_cflag = te->c_cflag;
	t->c_lflag = te->c_lflag;
	t->c_line = te->c_line;
	for (unsigned int i = 0; i < KERNEL_NCCS; i++)
		t->c_cc[i] = te->c_cc[i / 4] >> (8 * (i % 4));
	return 0;
}

/* A pty's entry carries its index, no other terminal's does (CRIU checks the same). */
static int check_tty_info(const TtyInfoEntry *tie)
{
	if (find_tty_info(tie->id)) {
		pr_err("tty-info.img: terminal %u appears twice\n", tie->id);
		return -EINVAL;
	}
	if ((tie->type == TTY_TYPE__PTY) != !!tie->pty) {
		pr_err("tty-info.img: terminal %u is of type %d %s a pty index\n", tie->id,
		       tie->type, tie->pty ? "with" : "without");
		return -EINVAL;
	}
	if (tie->pty && (tie->pty->index > UINT32_MAX >> 1 || tie->id >> 1 != tie->pty->index)) {
		pr_err("tty-info.img: pty %u has the id %u\n", tie->pty->index, tie->id);
		return -EINVAL;
	}
	return 0;
}

static void unpack_winsize(const WinsizeEntry *we, struct winsize *ws)
{
	*ws = (struct winsize){ .ws_row = we->ws_row, .ws_col = we->ws_col,
				.ws_xpixel = we->ws_xpixel, .ws_ypixel = we->ws_ypixel };
}

static int decode_tty_info(const TtyInfoEntry *tie, struct tty_info *ti)
{
	*ti = (struct tty_info){
		.id = tie->id,
		.type = tie->type,
		.locked = tie->locked,
		.exclusive = tie->exclusive,
		.packet = tie->packet_mode,
		.sid = tie->sid,
		.pgrp = tie->pgrp,
		.has_termios = !!tie->termios,
		.has_termios_locked = !!tie->termios_locked,
		.has_winsize = !!tie->winsize,
		.has_owner = tie->has_uid && tie->has_gid,
		.uid = tie->uid,
		.gid = tie->gid,
		.rdev = tie->rdev,
	};
	if (tie->pty)
		ti->index = tie->pty->index;
	if (tie->winsize)
		unpack_winsize(tie->winsize, &ti->winsize);
	if (tie->termios && unpack_termios(tie->termios, &ti->termios, tie->id))
		return -EINVAL;
	if (tie->termios_locked &&
	    unpack_termios(tie->termios_locked, &ti->termios_locked, tie->id))
		return -EINVAL;
	return 0;
}

static int collect_one_tty_info(void *msg, void *arg)
{
	struct tty_info ti;
	int ret = check_tty_info(msg);

	(void)arg;
	if (!ret)
		ret = decode_tty_info(msg, &ti);
	return ret ? ret : append_entry((void **)&tty_infos, &nr_tty_infos, &ti, sizeof(ti),
					 "tty-info.img");
}

/* Bytes for a pty side: its tty_info, or the slave side of a pty whose master is dumped. */
static int check_tty_data(const TtyDataEntry *tde)
{
	const struct tty_info *ti = find_tty_info(tde->tty_id);

	if (find_tty_data(tde->tty_id)) {
		pr_err("tty-data.img: terminal %u appears twice\n", tde->tty_id);
		return -EINVAL;
	}
	if (!ti && !(tde->tty_id & 1))
		ti = find_tty_info(tde->tty_id | 1);
	if (!ti || ti->type != TTY_TYPE__PTY) {
		pr_err("tty-data.img: bytes for terminal %u, which is no pty of tty-info.img\n",
		       tde->tty_id);
		return -EINVAL;
	}
	return 0;
}

static int collect_one_tty_data(void *msg, void *arg)
{
	const TtyDataEntry *tde = msg;
	struct tty_data td = { .tty_id = tde->tty_id, .len = tde->data.len };
	int ret = check_tty_data(tde);

	(void)arg;
	if (ret)
		return ret;
	td.bytes = malloc(td.len ? td.len : 1);
	if (!td.bytes) {
		pr_err("tty-data.img: out of memory for %zu bytes\n", td.len);
		return -ENOMEM;
	}
	memcpy(td.bytes, tde->data.data, td.len);
	ret = append_entry((void **)&tty_datas, &nr_tty_datas, &td, sizeof(td), "tty-data.img");
	if (ret)
		free(td.bytes);
	return ret;
}

/* The infos first: the data names them. */
static int tty_collect_images(void)
{
	int ret = pb_collect_optional_image(CR_IMG_TTY_INFO, collect_one_tty_info, NULL);

	return ret ? ret : pb_collect_optional_image(CR_IMG_TTY_DATA, collect_one_tty_data, NULL);
}

/* The terminal criu's stdio is on, found before any restored fd can replace it. */
static char criu_tty_path[PATH_MAX];

static int find_criu_tty(void)
{
	for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
		char link[32];
		ssize_t len;

		if (!isatty(fd))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, criu_tty_path, sizeof(criu_tty_path) - 1);
		if (len < 0) {
			pr_perror("cannot read %s", link);
			return -errno;
		}
		criu_tty_path[len] = '\0';
		pr_info("shell job: terminal fds will be re-opened on %s\n", criu_tty_path);
		return 0;
	}
	pr_err("restoring a shell job needs criu's stdin, stdout or stderr on a terminal\n");
	return -ENOTTY;
}

/* The tables are filled again by the next collect, criu's terminal looked for again. */
static void tty_collect_fini(void)
{
	for (size_t i = 0; i < nr_tty_datas; i++)
		free(tty_datas[i].bytes);
	free(tty_datas);
	tty_datas = NULL;
	nr_tty_datas = 0;
	free(tty_infos);
	tty_infos = NULL;
	nr_tty_infos = 0;
	free(ptys);
	ptys = NULL;
	nr_ptys = 0;
	if (orphan_store_ids)
		munmap(orphan_store_ids, MAX_ORPHAN_PTYS * sizeof(int));
	orphan_store_ids = NULL;
	nr_orphan_ptys = 0;
	criu_tty_path[0] = '\0';
}

/* The pty of this index in ptys, added at its first entry; -errno. */
static ssize_t collect_pty(uint32_t index)
{
	struct pty pty;

	for (size_t i = 0; i < nr_ptys; i++)
		if (ptys[i].index == index)
			return i;
	pty = (struct pty){
		.index = index,
		.master = find_tty_info(pty_info_id(index, true)),
		.slave = find_tty_info(pty_info_id(index, false)),
		.output = find_tty_data(pty_info_id(index, true)),
		.input = find_tty_data(pty_info_id(index, false)),
		.fake_master_fd = -1,
		.orphan_slot = -1,
	};
	if (append_entry((void **)&ptys, &nr_ptys, &pty, sizeof(pty), "files.img"))
		return -ENOMEM;
	return nr_ptys - 1;
}

/* The pty whose master's tty_info says it controls session sid, or NULL. */
static const struct pty *pty_of_session(pid_t sid)
{
	for (size_t i = 0; i < nr_ptys; i++)
		if (sid && ptys[i].master_file && ptys[i].master->sid == sid)
			return &ptys[i];
	return NULL;
}

/*
 * A master restores the whole pty: all it needs must be there. The session it controls
 * must be led by a task of the tree, which takes it back (tty_restore_ctty()), and its
 * foreground group must be a group of that session.
 */
static int check_master(const struct file_desc *d, const struct tty_info *ti)
{
	if (!ti->has_termios || !ti->has_termios_locked || !ti->has_winsize) {
		pr_err("files.img: master %u of pty %u: tty-info.img lacks its termios, locked "
		       "termios or window size\n",
		       d->id, ti->index);
		return -EINVAL;
	}
	if (!ti->sid)
		return 0;
	if (pty_of_session(ti->sid)) {
		pr_err("files.img: ptys %u and %u both control session %d\n",
		       pty_of_session(ti->sid)->index, ti->index, ti->sid);
		return -EINVAL;
	}
	if (!is_live_leader(ti->sid)) {
		pr_err("files.img: pty %u controls session %d, whose leader is not a live task of "
		       "the images\n",
		       ti->index, ti->sid);
		return -EINVAL;
	}
	if (!session_has_group(ti->sid, ti->pgrp)) {
		pr_err("files.img: the foreground group %d of pty %u has no task in session %d\n",
		       ti->pgrp, ti->index, ti->sid);
		return -EINVAL;
	}
	return 0;
}

static int collect_master(struct file_desc *d, struct tty_end *end)
{
	ssize_t pty = collect_pty(end->info->index);
	int ret;

	if (pty < 0)
		return pty;
	if (ptys[pty].master_file) {
		pr_err("files.img: pty %u has two masters, files %u and %u\n", end->info->index,
		       ptys[pty].master_file, d->id);
		return -EINVAL;
	}
	ret = check_master(d, end->info);
	if (ret)
		return ret;
	ptys[pty].master_file = d->id;
	end->pty = pty;
	return 0;
}

static int collect_orphan(struct tty_end *end);

/*
 * A slave is the pty's when its master was dumped, hung up when it has no termios (its
 * master was closed), else a shell job's terminal (the master is outside the tree).
 */
static int collect_slave(struct file_desc *d, struct tty_end *end)
{
	const struct tty_info *master = find_tty_info(pty_info_id(end->info->index, true));
	ssize_t pty;

	if (master && !end->info->has_termios) {
		pr_err("files.img: slave %u of pty %u is hung up, but its master is in the "
		       "images\n",
		       d->id, end->info->index);
		return -EINVAL;
	}
	if (!master && end->info->has_termios && !opts.orphan_pts_master) {
		end->role = TTY_SHELL;
		return 0;
	}
	pty = collect_pty(end->info->index);
	if (pty < 0)
		return pty;
	end->pty = pty;
	if (!master && end->info->has_termios)
		return collect_orphan(end);
	end->role = master ? TTY_PTY_SLAVE : TTY_PTY_HUNG;
	if (master) {
		ptys[pty].nr_slave_files++;
	} else {
		if (!ptys[pty].nr_hung_files++ || d->id < ptys[pty].hung_anchor)
			ptys[pty].hung_anchor = d->id;
	}
	return 0;
}

/*
 * A slave whose master was outside the tree, restored on a new pty (orphan_pts_master):
 * the pty gets its slot among the orphans; its openings are one task's (tty_object_key()).
 */
static int collect_orphan(struct tty_end *end)
{
	struct pty *pty = &ptys[end->pty];

	end->role = TTY_ORPHAN;
	if (pty->orphan_slot >= 0)
		return 0;
	if (!orphan_store_ids) {
		orphan_store_ids = mmap(NULL, MAX_ORPHAN_PTYS * sizeof(int), PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (orphan_store_ids == MAP_FAILED) {
			orphan_store_ids = NULL;
			pr_perror("pty %u: cannot map the orphan ptys' table", pty->index);
			return -errno;
		}
		memset(orphan_store_ids, 0xff, MAX_ORPHAN_PTYS * sizeof(int));
	}
	if (nr_orphan_ptys == MAX_ORPHAN_PTYS) {
		pr_err("pty %u: more than %d ptys whose master was outside the tree\n", pty->index,
		       MAX_ORPHAN_PTYS);
		return -ENOTSUP;
	}
	pty->orphan_slot = nr_orphan_ptys++;
	pr_info("pty %u: its master was outside the tree: a new pty, its master for the RPC "
		"client\n",
		pty->index);
	return 0;
}

/* /dev/tty is the tree's when its session is controlled by a pty of the images. */
static void collect_current(struct tty_end *end)
{
	for (size_t i = 0; i < nr_tty_infos; i++) {
		const struct tty_info *ti = &tty_infos[i];

		if (ti->type == TTY_TYPE__PTY && (ti->id & 1) && ti->sid &&
		    ti->sid == end->info->sid)
			end->role = TTY_CURRENT;
	}
}

static int collect_shell(const struct tty_end *end)
{
	if (!opts.shell_job) {
		pr_err("the dumped process was attached to terminal %s: restore it with "
		       "--shell-job (-j)\n",
		       end->regf ? end->regf->path : "(unnamed)");
		return -ENOTSUP;
	}
	return criu_tty_path[0] ? 0 : find_criu_tty();
}

static int decode_tty_end(struct file_desc *d, const TtyFileEntry *tfe, struct tty_end *end)
{
	char user[48];

	/* Opened without O_ASYNC, which tty_open() sets after. */
	*end = (struct tty_end){ .role = TTY_SHELL, .flags = tfe->flags & ~O_ASYNC };
	end->info = find_tty_info(tfe->tty_info_id);
	if (!end->info) {
		pr_err("files.img: terminal file %u names terminal %u, which is not in "
		       "tty-info.img\n",
		       d->id, tfe->tty_info_id);
		return -ENOENT;
	}
	snprintf(user, sizeof(user), "files.img: terminal file %u", d->id);
	if (tfe->has_regf_id && !(end->regf = find_reg_file(tfe->regf_id, user)))
		return -EINVAL;
	return 0;
}

/* Only a shell job's terminal is opened by another name than its own. */
static int check_tty_path(const struct file_desc *d, const struct tty_end *end)
{
	if (end->regf || end->role == TTY_SHELL)
		return 0;
	pr_err("files.img: terminal file %u has no path (regf_id), as only older CRIU wrote it: "
	       "not supported\n",
	       d->id);
	return -ENOTSUP;
}

static int collect_end(struct file_desc *d, struct tty_end *end)
{
	if (end->info->type == TTY_TYPE__PTY && (end->info->id & 1)) {
		end->role = TTY_PTY_MASTER;
		return collect_master(d, end);
	}
	if (end->info->type == TTY_TYPE__PTY)
		return collect_slave(d, end);
	if (end->info->type == TTY_TYPE__CTTY)
		collect_current(end);
	if (end->info->type == TTY_TYPE__CONSOLE || end->info->type == TTY_TYPE__VT)
		end->role = TTY_DEVICE;
	return 0;
}

static int tty_collect(struct file_desc *d)
{
	const TtyFileEntry *tfe = d->fe->tty;
	struct tty_end end, *kept;
	int ret;

	if (!tfe) {
		pr_err("files.img: file %u has type TTY but no tty entry\n", d->id);
		return -EINVAL;
	}
	ret = decode_tty_end(d, tfe, &end);
	if (!ret)
		ret = collect_owner(d, tfe->fown);
	if (!ret)
		ret = collect_end(d, &end);
	if (!ret)
		ret = check_tty_path(d, &end);
	if (!ret && end.role == TTY_SHELL)
		ret = collect_shell(&end);
	if (ret)
		return ret;
	kept = malloc(sizeof(*kept));
	if (!kept) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	*kept = end;
	d->kind = kept;
	return 0;
}

/*
 * The job's terminal modes (echo, canonical input, control characters) go with it, as
 * CRIU restores them; the window size is the terminal's own and stays.
 */
static int restore_termios(int fd, const struct tty_info *ti, const char *path)
{
	if (ti->has_termios && ioctl(fd, TCSETS, &ti->termios)) {
		pr_perror("cannot restore the termios of terminal %u on %s", ti->id, path);
		return -errno;
	}
	return 0;
}

/* O_NOCTTY: which terminal controls the session is the session's business, not ours. */
static int open_shell_tty(const struct file_desc *d, const struct tty_end *end)
{
	int flags = (end->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) | O_NOCTTY;
	int fd = open(criu_tty_path, flags), ret;

	if (fd < 0) {
		pr_perror("cannot open terminal %s for file %u", criu_tty_path, d->id);
		return -errno;
	}
	ret = restore_termios(fd, end->info, criu_tty_path);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The console or virtual console at the dumped path, which must still be that device;
 * its modes as the task left them (the device outlived the task; others may share it).
 */
static int open_device_tty(const struct file_desc *d, const struct tty_end *end)
{
	int fd = open_reg_file(end->regf, end->flags | O_NOCTTY), ret = 0;
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode) || st.st_rdev != end->info->rdev) {
		pr_err("terminal file %u: %s is no longer the device %u:%u\n", d->id,
		       end->regf->path, major(end->info->rdev), minor(end->info->rdev));
		ret = -ENXIO;
	}
	if (!ret)
		ret = restore_termios(fd, end->info, end->regf->path);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * Openings of ptmx in one devpts instance are serialized between the restored tasks, so
 * that one looking for its index does not take another's.
 */
static int lock_ptmx_dir(const char *ptmx, const char *what)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(ptmx, '/');
	int fd;

	/* /dev/ptmx allocates in /dev/pts; a devpts instance's own ptmx in its directory. */
	if (!strcmp(ptmx, "/dev/ptmx") || !slash)
		snprintf(dir, sizeof(dir), "/dev/pts");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - ptmx), ptmx);
	fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		pr_perror("%s: cannot lock %s for opening ptmx", what, dir);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	return fd;
}

static void close_all(int *fds, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		close(fds[i]);
	free(fds);
}

/*
 * devpts gives a new master the lowest free index and has no way to ask for another: the
 * ones below ours are held open until ours comes, then let go. An index above ours means
 * ours is taken.
 */
static int open_ptmx_at(const char *path, uint32_t flags, uint32_t index, const char *what)
{
	int *held = NULL, lock_fd, fd = -1;
	size_t nr_held = 0;
	uint32_t got;

	lock_fd = lock_ptmx_dir(path, what);
	if (lock_fd < 0)
		return lock_fd;
	for (;;) {
		int *grown;

		fd = open(path, (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || ioctl(fd, TIOCGPTN, &got)) {
			pr_perror("%s: cannot open a pty at %s", what, path);
			if (fd >= 0)
				close(fd);
			fd = -errno;
			break;
		}
		if (got == index)
			break;
		if (got > index) {
			pr_err("%s: pty index %u is taken (%s gives %u)\n", what, index, path, got);
			close(fd);
			fd = -EBUSY;
			break;
		}
		grown = realloc(held, (nr_held + 1) * sizeof(*held));
		if (!grown) {
			pr_err("%s: out of memory holding pty %u\n", what, got);
			close(fd);
			fd = -ENOMEM;
			break;
		}
		held = grown;
		held[nr_held++] = fd;
	}
	close_all(held, nr_held);
	close(lock_fd);
	return fd;
}

static int set_pty_lock(int master_fd, int lock, const char *what)
{
	if (ioctl(master_fd, TIOCSPTLCK, &lock)) {
		pr_perror("%s: cannot %s the pty", what, lock ? "lock" : "unlock");
		return -errno;
	}
	return 0;
}

/*
 * Through criu's own slave opening: the queued bytes, in the termios they were read
 * under. Closing it is the pty's last slave close when no slave entry is dumped, which
 * leaves the master as it was: its slave closed (reads fail with EIO).
 */
static int restore_queues(int master_fd, const struct pty *pty, const char *what)
{
	const struct kernel_termios *t = &pty->master->termios;
	int slave_fd, ret;

	if (!pty->input && !pty->output && pty->nr_slave_files)
		return 0;
	slave_fd = ioctl(master_fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (slave_fd < 0) {
		pr_perror("%s: cannot open the slave through the master (TIOCGPTPEER)", what);
		return -errno;
	}
	ret = pty->input ? userns_queue_pty_input(slave_fd, t, pty->input->bytes,
						  pty->input->len, what) :
			   0;
	if (!ret && pty->output)
		ret = pty_queue_output(slave_fd, t, pty->output->bytes, pty->output->len, what);
	close(slave_fd);
	return ret;
}

/*
 * Termios first, then the queues under them, the window size (no group is there yet to
 * get SIGWINCH), the locked termios last: set before, they would hold the bits they lock
 * at the new pty's values. The lock and the slave's exclusive mode wait for the slaves
 * (tty_finish()).
 */
static int restore_pty_state(int master_fd, const struct pty *pty, const char *what)
{
	const struct tty_info *m = pty->master;
	struct kernel_termios none = { 0 };
	/*
	 * A new pty locks nothing. Locking takes CAP_SYS_ADMIN in criu's user namespace,
	 * which the tasks of a tree with a user namespace of its own do not have.
	 */
	bool locked = memcmp(&m->termios_locked, &none, sizeof(none));
	int on = 1, ret;

	if (ioctl(master_fd, TCSETS, &m->termios)) {
		pr_perror("%s: cannot set its termios", what);
		return -errno;
	}
	ret = restore_queues(master_fd, pty, what);
	if (ret)
		return ret;
	if (ioctl(master_fd, TIOCSWINSZ, &m->winsize) ||
	    (locked && ioctl(master_fd, TIOCSLCKTRMIOS, &m->termios_locked)) ||
	    (m->exclusive && ioctl(master_fd, TIOCEXCL)) ||
	    (m->packet && ioctl(master_fd, TIOCPKT, &on))) {
		pr_perror("%s: cannot set its window size, locked termios, exclusive or packet "
			  "mode",
			  what);
		return -errno;
	}
	return 0;
}

static int open_master(const struct file_desc *d, const struct tty_end *end)
{
	const struct pty *pty = &ptys[end->pty];
	char what[64];
	int fd, ret;

	snprintf(what, sizeof(what), "master of pty %u (file %u)", pty->index, d->id);
	fd = open_ptmx_at(end->regf->path, end->flags, pty->index, what);
	if (fd < 0)
		return fd;
	ret = set_pty_lock(fd, 0, what);
	if (!ret)
		ret = restore_pty_state(fd, pty, what);
	if (ret) {
		close(fd);
		return ret;
	}
	pr_info("%s: re-created at %s\n", what, end->regf->path);
	return fd;
}

/* The slave node's owner and mode are the pty's, set on every opening alike. */
static int restore_slave_node(int fd, const struct tty_end *end, const char *what)
{
	int ret = end->info->has_owner ? userns_chown(fd, end->info->uid, end->info->gid, what) : 0;

	if (ret)
		return ret;
	if (end->regf->has_mode && fchmod(fd, end->regf->mode & 07777)) {
		pr_perror("%s: cannot restore the mode of %s", what, end->regf->path);
		return -errno;
	}
	return 0;
}

static int open_slave_node(const struct file_desc *d, const struct tty_end *end, const char *what)
{
	int fd = open_reg_file(end->regf, end->flags), ret;

	if (fd < 0)
		return fd;
	ret = restore_slave_node(fd, end, what);
	if (ret) {
		close(fd);
		return ret;
	}
	pr_debug("%s: file %u opened at %s\n", what, d->id, end->regf->path);
	return fd;
}

/* devpts' own ptmx beside the slave: a master of the same instance. */
static int open_fake_master(const struct pty *pty, const char *slave_path, const char *what)
{
	const char *slash = strrchr(slave_path, '/');
	char ptmx[PATH_MAX];
	int fd, ret;

	snprintf(ptmx, sizeof(ptmx), "%.*s/ptmx", (int)(slash - slave_path), slave_path);
	fd = open_ptmx_at(ptmx, O_RDWR, pty->index, what);
	ret = fd < 0 ? fd : set_pty_lock(fd, 0, what);
	if (ret && fd >= 0)
		close(fd);
	return ret ? ret : fd;
}

/*
 * A master for the moment, while the slaves open (one task opens them all, the first
 * before the others: tty_deps()); closed after the last, which hangs them up as dumped.
 */
static int open_hung_slave(const struct file_desc *d, const struct tty_end *end)
{
	struct pty *pty = &ptys[end->pty];
	char what[64];
	int fd;

	snprintf(what, sizeof(what), "hung-up slave of pty %u", pty->index);
	if (pty->fake_master_fd < 0) {
		pty->fake_master_fd = open_fake_master(pty, end->regf->path, what);
		if (pty->fake_master_fd < 0)
			return pty->fake_master_fd;
	}
	fd = open_slave_node(d, end, what);
	if (fd >= 0 && ++pty->nr_hung_opened == pty->nr_hung_files) {
		close(pty->fake_master_fd);
		pty->fake_master_fd = -1;
		pr_info("%s: %u openings re-created hung up\n", what, pty->nr_hung_files);
	}
	return fd;
}

/*
 * In its session's leader, which has no controlling terminal yet: TIOCSCTTY on the master
 * makes its slave the controlling terminal. Idempotent for a leader that has it already.
 */
static int take_ctty(const struct pty *pty)
{
	int fd = files_dep_fd(pty->master_file);

	if (fd < 0)
		return fd;
	if (ioctl(fd, TIOCSCTTY, 0)) {
		pr_perror("pty %u: cannot make it the controlling terminal of session %d",
			  pty->index, pty->master->sid);
		return -errno;
	}
	return 0;
}

/*
 * /dev/tty needs the controlling terminal. A task of the session inherited it from the
 * leader, unless it is the leader, opening this before it took it (a /dev/tty its
 * children share): then it takes it now.
 */
static int open_current(const struct tty_end *end)
{
	const struct pty *pty = pty_of_session(end->info->sid);
	int ret = 0;

	if (pty && getsid(0) == getpid() && getpid() == end->info->sid)
		ret = take_ctty(pty);
	return ret ? ret : open_reg_file(end->regf, end->flags);
}

/*
 * The first opening makes the new pty at the dumped index, beside the slave's path (the
 * tree's own devpts, a container's), and parks its master in the fdstore for criu's main
 * process (tty_tree_ready()): the task keeps no copy, the store's keeps the pty while the
 * slave opens; each opening restores the slave's termios.
 */
static int open_orphan_slave(const struct file_desc *d, const struct tty_end *end)
{
	struct pty *pty = &ptys[end->pty];
	char what[64];
	int fd, id;

	snprintf(what, sizeof(what), "slave of pty %u (master outside the tree)", pty->index);
	if (orphan_store_ids[pty->orphan_slot] < 0) {
		fd = open_fake_master(pty, end->regf->path, what);
		if (fd < 0)
			return fd;
		id = fdstore_add(fd);
		close(fd);
		if (id < 0) {
			pr_err("%s: cannot park its new master: %s\n", what, strerror(-id));
			return id;
		}
		orphan_store_ids[pty->orphan_slot] = id;
	}
	fd = open_slave_node(d, end, what);
	if (fd >= 0 && restore_termios(fd, end->info, end->regf->path)) {
		close(fd);
		return -EIO;
	}
	/*
	 * The session it controlled (the dump kept sid only then) gets it back through its
	 * leader, which setsid() made before any fd opens (task_stages()).
	 */
	if (fd >= 0 && end->info->sid && getsid(0) == getpid() &&
	    getpid() == (pid_t)end->info->sid && ioctl(fd, TIOCSCTTY, 0)) {
		pr_perror("%s: cannot make it the controlling terminal of session %u", what,
			  end->info->sid);
		close(fd);
		return -errno;
	}
	return fd;
}

static int open_tty_end(const struct file_desc *d)
{
	const struct tty_end *end = d->kind;
	char what[64];

	switch (end->role) {
	case TTY_PTY_MASTER:
		return open_master(d, end);
	case TTY_PTY_SLAVE:
		snprintf(what, sizeof(what), "slave of pty %u", ptys[end->pty].index);
		return open_slave_node(d, end, what);
	case TTY_PTY_HUNG:
		return open_hung_slave(d, end);
	case TTY_ORPHAN:
		return open_orphan_slave(d, end);
	case TTY_CURRENT:
		return open_current(end);
	case TTY_DEVICE:
		return open_device_tty(d, end);
	default:
		return open_shell_tty(d, end);
	}
}

/*
 * O_ASYNC through F_SETFL once open: open(2) would keep the flag without registering the
 * file for the signal. Turning it on makes the terminal's foreground group (or this task)
 * the owner; the image's owner, if any, is set once the whole tree exists
 * (restore_file_owners()), none until then.
 */
static int set_tty_async(int fd, const struct file_desc *d)
{
	int flags = fcntl(fd, F_GETFL), err;

	if (flags >= 0 && !fcntl(fd, F_SETFL, flags | O_ASYNC) && !fcntl(fd, F_SETOWN, 0))
		return fd;
	err = errno;
	pr_err("terminal file %u: cannot set O_ASYNC: %s\n", d->id, strerror(err));
	close(fd);
	return -err;
}

static int tty_open(const struct file_desc *d)
{
	int fd = open_tty_end(d);

	return fd >= 0 && (d->fe->tty->flags & O_ASYNC) ? set_tty_async(fd, d) : fd;
}

/*
 * Once the slaves are open (the task that holds the master first has all its fds, and
 * whoever opened the pty for it did so before): the slave's exclusive mode, through an
 * opening of criu's, then the lock, which keeps further slaves from opening.
 */
static int tty_finish(const struct file_desc *d, int fd, const struct task_fds *fds)
{
	const struct tty_end *end = d->kind;
	const struct pty *pty = &ptys[end->pty];
	char what[64];
	int slave_fd;

	(void)fds;
	if (end->role != TTY_PTY_MASTER)
		return 0;
	snprintf(what, sizeof(what), "pty %u", pty->index);
	if (pty->slave && pty->slave->exclusive) {
		slave_fd = ioctl(fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (slave_fd < 0 || ioctl(slave_fd, TIOCEXCL)) {
			pr_perror("%s: cannot restore the slave's exclusive mode", what);
			if (slave_fd >= 0)
				close(slave_fd);
			return -errno;
		}
		close(slave_fd);
	}
	return pty->master->locked ? set_pty_lock(fd, 1, what) : 0;
}

/*
 * The entries of one pty restore one kernel object: one task opens them all (the master
 * first, tty_deps()), so the pty and its state exist once.
 */
static uint64_t tty_object_key(const struct file_desc *d)
{
	const struct tty_end *end = d->kind;

	switch (end->role) {
	case TTY_PTY_MASTER:
	case TTY_PTY_SLAVE:
	case TTY_PTY_HUNG:
	case TTY_ORPHAN:
		return end->pty + 1;
	default:
		return 0;
	}
}

/*
 * A slave needs its master open first, /dev/tty the master of its controlling terminal
 * (for the leader to take it: open_current()). Hung-up slaves need the first of them:
 * with a dependency they are all opened before any fd is placed, and the master that
 * the first one opens for the moment cannot be replaced by a placed fd meanwhile.
 */
static size_t tty_deps(const struct file_desc *d, uint32_t *ids, size_t max)
{
	const struct tty_end *end = d->kind;
	const struct pty *pty = NULL;
	uint32_t dep = 0;

	if (end->role == TTY_PTY_SLAVE) {
		dep = ptys[end->pty].master_file;
	} else if (end->role == TTY_PTY_HUNG && ptys[end->pty].hung_anchor != d->id) {
		dep = ptys[end->pty].hung_anchor;
	} else if (end->role == TTY_CURRENT) {
		pty = pty_of_session(end->info->sid);
		dep = pty ? pty->master_file : 0;
	}
	if (dep && max)
		ids[0] = dep;
	return dep ? 1 : 0;
}

/* The leader of the session a master controls opens it before its children are forked. */
static const struct pstree_item *tty_needed_by(const struct file_desc *d)
{
	const struct tty_end *end = d->kind;

	if (end->role != TTY_PTY_MASTER || !end->info->sid)
		return NULL;
	return pstree_find(end->info->sid);
}

/*
 * Every fd open: each orphan pty's new master goes to the RPC client (CRIU's
 * orphan-pts-master notification, the master passed with it); criu keeps no copy, so the
 * pty hangs up when the client closes it.
 */
static int tty_tree_ready(void)
{
	for (size_t i = 0; i < nr_ptys; i++) {
		const struct pty *pty = &ptys[i];
		int id = pty->orphan_slot >= 0 ? orphan_store_ids[pty->orphan_slot] : -1, fd, ret;

		if (pty->orphan_slot < 0)
			continue;
		if (id < 0) {
			pr_err("pty %u: no task made its new pty\n", pty->index);
			return -EINVAL;
		}
		fd = fdstore_get(id);
		if (fd < 0)
			return fd;
		ret = run_action_scripts_fd(ACT_ORPHAN_PTS_MASTER, 0, fd);
		close(fd);
		if (ret)
			return -EIO;
		pr_info("pty %u: its new master went to the RPC client\n", pty->index);
	}
	return 0;
}

const struct fdtype_ops tty_fdtype_ops = {
	.type = FD_TYPES__TTY,
	.name = "terminal",
	.owns = tty_owns,
	.dump = tty_dump,
	.collect_images = tty_collect_images,
	.collect = tty_collect,
	.collect_fini = tty_collect_fini,
	.open = tty_open,
	.inheritable = true,
	.object_key = tty_object_key,
	.deps = tty_deps,
	.finish = tty_finish,
	.needed_by = tty_needed_by,
	.tree_ready = tty_tree_ready,
};

/* -------------------------------------------------------- session leader ---- */

static const struct pty *pty_led_by(const struct pstree_item *item)
{
	if (item->sid != item->pid || item->zombie)
		return NULL;
	return pty_of_session(item->sid);
}

int tty_restore_ctty(const struct pstree_item *item)
{
	const struct pty *pty = pty_led_by(item);
	int ret;

	if (!pty)
		return 0;
	ret = take_ctty(pty);
	if (!ret)
		pr_info("task %d: pty %u is its controlling terminal again\n", item->pid,
			pty->index);
	return ret;
}

int tty_restore_foreground(const struct pstree_item *item)
{
	const struct pty *pty = pty_led_by(item);
	pid_t pgrp;
	int fd;

	if (!pty || !pty->master->pgrp)
		return 0;
	pgrp = pty->master->pgrp;
	fd = files_dep_fd(pty->master_file);
	if (fd < 0)
		return fd;
	if (ioctl(fd, TIOCSPGRP, &pgrp)) {
		pr_perror("pty %u: cannot make group %d its foreground group", pty->index, pgrp);
		return -errno;
	}
	pr_info("task %d: group %d is the foreground group of pty %u again\n", item->pid, pgrp,
		pty->index);
	return 0;
}
