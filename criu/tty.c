/*
 * Terminals, for shell jobs only (--shell-job): a task's terminal fds are dumped as CRIU
 * does (a TTY entry, a REG entry naming the device, a tty_info_entry per terminal in
 * tty-info.img) and restored by opening the terminal criu itself runs on, with the dumped
 * termios. Pseudo-terminal masters and other terminals of the tree are a later issue.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "image.h"
#include "log.h"

#include "tty.pb-c.h"

#define TTY_MAJOR	4 /* virtual consoles (minor < 64) and serial ports */
#define TTY_SERIAL_MINOR 64
#define TTYAUX_MAJOR	5 /* /dev/tty, /dev/console, /dev/ptmx */
#define CTTY_MINOR	0
#define CONSOLE_MINOR	1
#define PTMX_MINOR	2
#define PTS_MAJOR_FIRST 136 /* UNIX98 pty slaves */
#define PTS_MAJOR_LAST	143
/*
 * The kernel's termios has 19 control characters; CRIU's image carries them as the bytes
 * of a repeated uint32 (19 words, the characters packed four to a word, little-endian).
 */
#define KERNEL_NCCS	19
#define TERMIOS_NR_WORDS KERNEL_NCCS

static bool is_pts(unsigned int ma)
{
	return ma >= PTS_MAJOR_FIRST && ma <= PTS_MAJOR_LAST;
}

static bool tty_owns(const struct fd_parms *p)
{
	unsigned int ma = major(p->st.st_rdev), mi = minor(p->st.st_rdev);

	if (!S_ISCHR(p->st.st_mode))
		return false;
	/* A pty master is a terminal's other end, not the job's stdio. */
	if (ma == TTYAUX_MAJOR && mi == PTMX_MINOR)
		return false;
	return ma == TTY_MAJOR || ma == TTYAUX_MAJOR || is_pts(ma);
}

/* ---------------------------------------------------------------- dump ---- */

static TtyType tty_type_of(dev_t rdev)
{
	unsigned int ma = major(rdev), mi = minor(rdev);

	if (is_pts(ma))
		return TTY_TYPE__PTY;
	if (ma == TTYAUX_MAJOR)
		return mi == CTTY_MINOR ? TTY_TYPE__CTTY : TTY_TYPE__CONSOLE;
	return mi < TTY_SERIAL_MINOR ? TTY_TYPE__VT : TTY_TYPE__SERIAL;
}

/*
 * CRIU names a pty by its index, the low bit telling master (1) from slave (0); other
 * terminals get ids above every pty's, from their device number.
 */
static uint32_t tty_info_id_of(dev_t rdev)
{
	if (is_pts(major(rdev)))
		return ((major(rdev) - PTS_MAJOR_FIRST) * 256 + minor(rdev)) << 1;
	return 0x80000000u | kernel_dev(rdev);
}

/* Terminals whose tty_info_entry is written: one per terminal. */
static dev_t *dumped_ttys;
static size_t nr_dumped_ttys;

static bool tty_info_dumped(dev_t rdev)
{
	for (size_t i = 0; i < nr_dumped_ttys; i++)
		if (dumped_ttys[i] == rdev)
			return true;
	return false;
}

static int remember_dumped_tty(dev_t rdev)
{
	dev_t *grown = realloc(dumped_ttys, (nr_dumped_ttys + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("out of memory remembering terminal %u:%u\n", major(rdev), minor(rdev));
		return -ENOMEM;
	}
	dumped_ttys = grown;
	dumped_ttys[nr_dumped_ttys++] = rdev;
	return 0;
}

static void pack_termios(const struct termios *t, TermiosEntry *te, uint32_t *words)
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

/*
 * The session that has this terminal as its controlling one and its foreground group,
 * from the task's stat (tty_nr, tpgid): 0 and 0 when it is nobody's there.
 */
static void read_ctty_ids(pid_t pid, dev_t rdev, uint32_t *sid, uint32_t *pgrp)
{
	unsigned int tty_nr;
	int session, tpgid;
	char path[64], buf[1024], *p;
	FILE *f;

	*sid = *pgrp = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (p && sscanf(p + 1, " %*c %*d %*d %d %u %d", &session, &tty_nr, &tpgid) == 3 &&
	    tty_nr == kernel_dev(rdev) && tpgid > 0) {
		*sid = session;
		*pgrp = tpgid;
	}
}

static int read_tty_state(int fd, const struct fd_parms *p, struct termios *t,
			  struct termios *locked, struct winsize *ws, int *exclusive)
{
	memset(locked, 0, sizeof(*locked));
	if (tcgetattr(fd, t) || ioctl(fd, TIOCGWINSZ, ws) || ioctl(fd, TIOCGLCKTRMIOS, locked) ||
	    ioctl(fd, TIOCGEXCL, exclusive)) {
		pr_perror("fd %d of task %d: cannot read the state of terminal %s", p->fd, p->pid,
			  p->link);
		return -errno;
	}
	return 0;
}

static int write_tty_info(const struct fd_parms *p, int fd, uint32_t info_id)
{
	TtyInfoEntry tie = TTY_INFO_ENTRY__INIT;
	TermiosEntry te = TERMIOS_ENTRY__INIT, tle = TERMIOS_ENTRY__INIT;
	WinsizeEntry we = WINSIZE_ENTRY__INIT;
	TtyPtyEntry pte = TTY_PTY_ENTRY__INIT;
	uint32_t cc[TERMIOS_NR_WORDS], locked_cc[TERMIOS_NR_WORDS];
	struct termios t, locked;
	struct winsize ws;
	struct cr_img *img;
	int exclusive, ret;

	ret = read_tty_state(fd, p, &t, &locked, &ws, &exclusive);
	if (ret)
		return ret;
	pack_termios(&t, &te, cc);
	pack_termios(&locked, &tle, locked_cc);
	we.ws_row = ws.ws_row;
	we.ws_col = ws.ws_col;
	we.ws_xpixel = ws.ws_xpixel;
	we.ws_ypixel = ws.ws_ypixel;
	tie.id = info_id;
	tie.type = tty_type_of(p->st.st_rdev);
	tie.exclusive = exclusive;
	read_ctty_ids(p->pid, p->st.st_rdev, &tie.sid, &tie.pgrp);
	tie.rdev = p->st.st_rdev;
	tie.termios = &te;
	tie.termios_locked = &tle;
	tie.winsize = &we;
	if (tie.type == TTY_TYPE__PTY) {
		pte.index = info_id >> 1;
		tie.pty = &pte;
	}
	tie.has_dev = tie.has_uid = tie.has_gid = true;
	tie.dev = kernel_dev(p->st.st_dev);
	tie.uid = p->st.st_uid;
	tie.gid = p->st.st_gid;
	img = files_side_image(CR_IMG_TTY_INFO);
	return img ? pb_write_one(img, &tie) : -EIO;
}

static int dump_tty_info_once(const struct fd_parms *p, uint32_t info_id)
{
	int fd, ret;

	if (tty_info_dumped(p->st.st_rdev))
		return 0;
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	ret = write_tty_info(p, fd, info_id);
	close(fd);
	return ret ? ret : remember_dumped_tty(p->st.st_rdev);
}

static int tty_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	TtyFileEntry tfe = TTY_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	int ret;

	if (!opts.shell_job) {
		pr_err("fd %d of task %d is on terminal %s: dumping a process attached to a terminal "
		       "needs --shell-job (-j)\n",
		       p->fd, p->pid, p->link);
		return -ENOTSUP;
	}
	tfe.id = id;
	tfe.tty_info_id = tty_info_id_of(p->st.st_rdev);
	tfe.flags = p->flags;
	tfe.fown = &fown;
	tfe.has_regf_id = true;
	tfe.regf_id = files_new_id();
	ret = dump_tty_info_once(p, tfe.tty_info_id);
	if (!ret)
		ret = dump_reg_file(p, tfe.regf_id);
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
	bool has_termios;
	struct termios termios; /* only the fields restore sets */
};

static struct tty_info *tty_infos;
static size_t nr_tty_infos;

/* What a TTY entry decodes to. */
struct tty_end {
	uint32_t flags;
	const struct tty_info *info;
};

static const struct tty_info *find_tty_info(uint32_t id)
{
	for (size_t i = 0; i < nr_tty_infos; i++)
		if (tty_infos[i].id == id)
			return &tty_infos[i];
	return NULL;
}

static int unpack_termios(const TermiosEntry *te, struct termios *t, uint32_t info_id)
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

static int collect_one_tty_info(void *msg, void *arg)
{
	const TtyInfoEntry *tie = msg;
	struct tty_info *grown, *ti;

	(void)arg;
	if (find_tty_info(tie->id)) {
		pr_err("tty-info.img: terminal %u appears twice\n", tie->id);
		return -EINVAL;
	}
	grown = realloc(tty_infos, (nr_tty_infos + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("tty-info.img: out of memory\n");
		return -ENOMEM;
	}
	tty_infos = grown;
	ti = &tty_infos[nr_tty_infos];
	*ti = (struct tty_info){ .id = tie->id, .type = tie->type, .has_termios = !!tie->termios };
	if (tie->termios && unpack_termios(tie->termios, &ti->termios, tie->id))
		return -EINVAL;
	nr_tty_infos++;
	return 0;
}

static int tty_collect_images(void)
{
	if (img_exists(CR_IMG_TTY_DATA, 0))
		pr_warn("tty-data.img: bytes queued in terminals are not restored\n");
	return pb_collect_optional_image(CR_IMG_TTY_INFO, collect_one_tty_info, NULL);
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

/* The terminal is looked for again by the next collect, as by the first. */
static void tty_collect_fini(void)
{
	free(tty_infos);
	tty_infos = NULL;
	nr_tty_infos = 0;
	criu_tty_path[0] = '\0';
}

/* Only the job's side of a terminal can be the terminal criu runs on. */
static int check_tty_side(const struct file_desc *d, const struct tty_info *ti,
			  const struct reg_file *regf)
{
	if (ti->type == TTY_TYPE__PTY && ((ti->id & 1) || (regf && !strcmp(regf->path, "/dev/ptmx")))) {
		pr_err("files.img: file %u is the master side of pty %u, which is not supported\n",
		       d->id, ti->id >> 1);
		return -ENOTSUP;
	}
	return 0;
}

static int tty_collect(struct file_desc *d)
{
	const TtyFileEntry *tfe = d->fe->tty;
	const struct reg_file *regf = NULL;
	const struct tty_info *ti;
	struct tty_end *end;
	char user[48];
	int ret;

	if (!tfe) {
		pr_err("files.img: file %u has type TTY but no tty entry\n", d->id);
		return -EINVAL;
	}
	ti = find_tty_info(tfe->tty_info_id);
	if (!ti) {
		pr_err("files.img: terminal file %u names terminal %u, which is not in tty-info.img\n",
		       d->id, tfe->tty_info_id);
		return -ENOENT;
	}
	snprintf(user, sizeof(user), "files.img: terminal file %u", d->id);
	if (tfe->has_regf_id && !(regf = find_reg_file(tfe->regf_id, user)))
		return -EINVAL;
	ret = check_tty_side(d, ti, regf);
	if (!ret)
		ret = collect_owner(d, tfe->fown);
	if (ret)
		return ret;
	if (!opts.shell_job) {
		pr_err("the dumped process was attached to terminal %s: restore it with --shell-job (-j)\n",
		       regf ? regf->path : "(unnamed)");
		return -ENOTSUP;
	}
	end = malloc(sizeof(*end));
	if (!end) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	*end = (struct tty_end){ .flags = tfe->flags, .info = ti };
	d->kind = end;
	return criu_tty_path[0] ? 0 : find_criu_tty();
}

/*
 * The job's terminal modes (echo, canonical input, control characters) go with it, as
 * CRIU restores them; the window size is the terminal's own and stays.
 */
static int restore_termios(int fd, const struct tty_info *ti)
{
	struct termios t;

	if (!ti->has_termios)
		return 0;
	if (tcgetattr(fd, &t))
		goto err;
	t.c_iflag = ti->termios.c_iflag;
	t.c_oflag = ti->termios.c_oflag;
	t.c_cflag = ti->termios.c_cflag;
	t.c_lflag = ti->termios.c_lflag;
	t.c_line = ti->termios.c_line;
	memcpy(t.c_cc, ti->termios.c_cc, KERNEL_NCCS);
	if (tcsetattr(fd, TCSANOW, &t))
		goto err;
	return 0;
err:
	pr_perror("cannot restore the termios of terminal %u on %s", ti->id, criu_tty_path);
	return -errno;
}

/* O_NOCTTY: which terminal controls the session is the session's business, not ours. */
static int tty_open(const struct file_desc *d)
{
	const struct tty_end *end = d->kind;
	int flags = (end->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) | O_NOCTTY;
	int fd = open(criu_tty_path, flags), ret;

	if (fd < 0) {
		pr_perror("cannot open terminal %s for file %u", criu_tty_path, d->id);
		return -errno;
	}
	ret = restore_termios(fd, end->info);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
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
};
