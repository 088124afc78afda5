/*
 * Terminals, for shell jobs only (--shell-job): a task's terminal fds are dumped as TTY
 * entries and restored by re-opening the terminal criu itself runs on, as CRIU does.
 * Pseudo-terminal masters and other terminals of the tree are a later issue.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "log.h"

#define TTY_MAJOR	4 /* virtual consoles and serial ports */
#define TTYAUX_MAJOR	5 /* /dev/tty, /dev/console, /dev/ptmx */
#define PTMX_MINOR	2
#define PTS_MAJOR_FIRST 136 /* UNIX98 pty slaves */
#define PTS_MAJOR_LAST	143

static bool tty_owns(const struct fd_parms *p)
{
	unsigned int ma = major(p->st.st_rdev), mi = minor(p->st.st_rdev);

	if (!S_ISCHR(p->st.st_mode))
		return false;
	/* A pty master is a terminal's other end, not the job's stdio. */
	if (ma == TTYAUX_MAJOR && mi == PTMX_MINOR)
		return false;
	return ma == TTY_MAJOR || ma == TTYAUX_MAJOR ||
	       (ma >= PTS_MAJOR_FIRST && ma <= PTS_MAJOR_LAST);
}

static int tty_dump(const struct fd_parms *p, uint32_t id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	TtyFileEntry tfe = TTY_FILE_ENTRY__INIT;

	if (!opts.shell_job) {
		pr_err("fd %d of task %d is on terminal %s: dumping a process attached to a terminal "
		       "needs --shell-job (-j)\n",
		       p->fd, p->pid, p->link);
		return -ENOTSUP;
	}
	tfe.rdev = p->st.st_rdev;
	tfe.flags = p->flags;
	tfe.name = (char *)p->link;
	fe.type = FD_TYPES__TTY;
	fe.id = id;
	fe.tty = &tfe;
	return write_file_entry(&fe);
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

static int tty_collect(const FileEntry *fe)
{
	if (!fe->tty || !fe->tty->name) {
		pr_err("files.img: terminal file %u has no tty entry\n", fe->id);
		return -EINVAL;
	}
	if (!opts.shell_job) {
		pr_err("the dumped process was attached to terminal %s: restore it with --shell-job (-j)\n",
		       fe->tty->name);
		return -ENOTSUP;
	}
	return criu_tty_path[0] ? 0 : find_criu_tty();
}

/* O_NOCTTY: which terminal controls the session is the session's business, not ours. */
static int tty_open(const FileEntry *fe)
{
	int flags = (fe->tty->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) | O_NOCTTY;
	int fd = open(criu_tty_path, flags);

	if (fd < 0) {
		pr_perror("cannot open terminal %s for %s", criu_tty_path, fe->tty->name);
		return -errno;
	}
	return fd;
}

const struct fdtype_ops tty_fdtype_ops = {
	.type = FD_TYPES__TTY,
	.name = "terminal",
	.owns = tty_owns,
	.dump = tty_dump,
	.collect = tty_collect,
	.open = tty_open,
	.inheritable = true,
};
