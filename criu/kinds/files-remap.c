/*
 * remap-fpath.img of the regular-file kind: which file id is a ghost (files-ghost.c), a file
 * linked back, or one in /proc/PID of a process gone. --link-remap links a file whose name
 * was removed while other names remain back as link_remap.ID beside it (a LINKED remap);
 * restore links that to the old name, opens it, unlinks the name, and removes the
 * link_remap file once the tree runs. A dead process's /proc file is opened while a helper
 * holds its pid.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "files-reg-internal.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"

#include "remap-file-path.pb-c.h"

/* Old images mark a ghost remap by this bit of remap_id and carry no remap_type. */
#define REMAP_GHOST_BIT (1u << 31)

/* ---------------------------------------------------------------- dump ---- */

/*
 * --link-remap: each inode linked back once per mount it is open through, in its directory
 * (or the nearest one above that exists, when that was removed too) (a hard link
 * cannot cross mounts, and restore links it back to a path of that mount), removed again
 * if the dump fails.
 */
struct dumped_link_remap {
	dev_t dev;
	ino_t ino;
	int32_t mnt_id;
	uint32_t id; /* its REG entry */
	char *path;  /* where criu made it (mntns_dump_path()) */
};

static struct dumped_link_remap *dumped_link_remaps;
static size_t nr_dumped_link_remaps;

/* link_remap.ID beside path: a new name of the file behind src, and its REG entry. */
/*
 * The length of the directory of path that still exists (its own, or the nearest one above
 * that was not removed with it): restore makes the others again around its open.
 */
static int existing_dir_len(const char *src, const char *path)
{
	char dir[PATH_MAX], buf[PATH_MAX + 32];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	do {
		slash = strrchr(dir, '/');
		*slash = '\0';
	} while (slash != dir && lstat(mntns_dump_path(src, dir, buf, sizeof(buf)), &st) &&
		 errno == ENOENT);
	return slash - dir;
}

/*
 * linkat() of the file behind src as made, as the root of the tree's user namespace where
 * it has one of its own: a filesystem mounted in there refuses ids it does not map
 * (EOVERFLOW), criu's among them. In a child, whose exit status is the errno. 0 or -errno.
 */
static int link_in_tree(const char *src, const char *made)
{
	const struct ns_id *user = ns_root_own(NS_USER);
	int status;
	pid_t child;

	if (!user)
		return linkat(AT_FDCWD, src, AT_FDCWD, made, AT_SYMLINK_FOLLOW) ? -errno : 0;
	child = fork();
	if (child == 0) {
		if (userns_join_tree(user->pid) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
			_exit(EPERM);
		_exit(linkat(AT_FDCWD, src, AT_FDCWD, made, AT_SYMLINK_FOLLOW) ? errno : 0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return -errno;
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
}

int remap_link_back(const char *src, const char *path, const struct stat *st, uint32_t *link_id)
{
	struct dumped_link_remap *grown, *lr;
	int dir_len = existing_dir_len(src, path);
	char *lpath, *made, buf[PATH_MAX + 32];
	int32_t mnt_id;
	int ret;

	ret = mntns_file_mnt_id(src, &mnt_id);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_dumped_link_remaps; i++) {
		lr = &dumped_link_remaps[i];
		if (lr->dev == st->st_dev && lr->ino == st->st_ino && lr->mnt_id == mnt_id) {
			*link_id = lr->id;
			return 0;
		}
	}
	*link_id = files_new_id();
	grown = realloc(dumped_link_remaps, (nr_dumped_link_remaps + 1) * sizeof(*grown));
	if (!grown || asprintf(&lpath, "%.*s/link_remap.%u", dir_len, path, *link_id) < 0) {
		pr_err("out of memory linking back %s\n", path);
		if (grown)
			dumped_link_remaps = grown;
		return -ENOMEM;
	}
	dumped_link_remaps = grown;
	/* Through the /proc link: the inode itself, whatever names it has left. */
	made = strdup(mntns_dump_path(src, lpath, buf, sizeof(buf)));
	ret = made ? link_in_tree(src, made) : -ENOMEM;
	if (ret) {
		pr_err("cannot link %s back as %s (--link-remap): %s\n", path, lpath,
		       strerror(-ret));
		free(made);
		free(lpath);
		return ret;
	}
	dumped_link_remaps[nr_dumped_link_remaps++] =
		(struct dumped_link_remap){st->st_dev, st->st_ino, mnt_id, *link_id, made};
	pr_info("%s linked back as %s (file %u)\n", path, lpath, *link_id);
	ret = reg_write_entry(*link_id, lpath, st, O_RDONLY, 0, NULL, src);
	free(lpath);
	return ret;
}

void reg_dump_undo(void)
{
	for (size_t i = 0; i < nr_dumped_link_remaps; i++) {
		if (unlink(dumped_link_remaps[i].path) && errno != ENOENT)
			pr_warn("cannot remove %s: %s\n", dumped_link_remaps[i].path,
				strerror(errno));
		free(dumped_link_remaps[i].path);
	}
	free(dumped_link_remaps);
	dumped_link_remaps = NULL;
	nr_dumped_link_remaps = 0;
}

/* remap-fpath.img: file id -> the file holding its contents (a ghost, a link). */
int remap_write(uint32_t file_id, uint32_t remap_id, RemapType type)
{
	RemapFilePathEntry rpe = REMAP_FILE_PATH_ENTRY__INIT;
	struct cr_img *img = files_side_image(CR_IMG_REMAP_FPATH);

	if (!img)
		return -EIO;
	rpe.orig_id = file_id;
	rpe.remap_id = remap_id;
	rpe.has_remap_type = true;
	rpe.remap_type = type;
	return pb_write_one(img, &rpe);
}

/* ------------------------------------------------------------- restore ---- */

/*
 * remap-fpath.img: which file id is reached through which link_remap file (LINKED: its
 * REG id), or lies in /proc/PID of a process gone at dump (PROCFS: the pid).
 */
struct linked_remap {
	uint32_t file_id;
	RemapType type;
	uint32_t target;
};

static struct linked_remap *linked_remaps;
size_t nr_linked_remaps;

static const struct linked_remap *linked_remap_of(uint32_t file_id)
{
	for (size_t i = 0; i < nr_linked_remaps; i++)
		if (linked_remaps[i].file_id == file_id)
			return &linked_remaps[i];
	return NULL;
}

/* The target of file_id's remap of type type, or 0. */
uint32_t remap_target(uint32_t file_id, RemapType type)
{
	const struct linked_remap *lr = linked_remap_of(file_id);

	return lr && lr->type == type ? lr->target : 0;
}

static RemapType remap_type_of(const RemapFilePathEntry *rpe)
{
	if (rpe->has_remap_type)
		return rpe->remap_type;
	return (rpe->remap_id & REMAP_GHOST_BIT) ? REMAP_TYPE__GHOST : REMAP_TYPE__LINKED;
}

/* The ghost an entry names. */
static int remap_ghost_id(const RemapFilePathEntry *rpe, uint32_t *ghost_id)
{
	if (remap_type_of(rpe) != REMAP_TYPE__GHOST) {
		pr_err("remap-fpath.img: file %u has remap type %d, which is not supported\n",
		       rpe->orig_id, remap_type_of(rpe));
		return -ENOTSUP;
	}
	*ghost_id = rpe->has_remap_type ? rpe->remap_id : rpe->remap_id & ~REMAP_GHOST_BIT;
	return 0;
}

/*
 * A process gone at dump: restore gives a helper its pid while the file is opened, so
 * the pid must be free now.
 */
static int check_dead_pid(const RemapFilePathEntry *rpe)
{
	if (rpe->remap_id == 0 || rpe->remap_id > INT32_MAX) {
		pr_err("remap-fpath.img: file %u lies in /proc of pid %u\n", rpe->orig_id,
		       rpe->remap_id);
		return -EINVAL;
	}
	if (!kill(rpe->remap_id, 0) || errno != ESRCH) {
		pr_err("remap-fpath.img: file %u lies in /proc/%u of a process gone at dump, but "
		       "pid %u is in use now\n",
		       rpe->orig_id, rpe->remap_id, rpe->remap_id);
		return -EBUSY;
	}
	return 0;
}

/*
 * A file linked back by --link-remap (its REG entry is checked once all are collected),
 * or one in /proc/PID of a process gone.
 */
static int collect_linked_remap(const RemapFilePathEntry *rpe)
{
	struct linked_remap *grown;

	if (remap_type_of(rpe) == REMAP_TYPE__PROCFS && check_dead_pid(rpe))
		return -EINVAL;
	if (ghost_of_file(rpe->orig_id) || linked_remap_of(rpe->orig_id)) {
		pr_err("remap-fpath.img: file %u is remapped twice\n", rpe->orig_id);
		return -EINVAL;
	}
	grown = realloc(linked_remaps, (nr_linked_remaps + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("remap-fpath.img: out of memory\n");
		return -ENOMEM;
	}
	linked_remaps = grown;
	linked_remaps[nr_linked_remaps++] =
		(struct linked_remap){rpe->orig_id, remap_type_of(rpe), rpe->remap_id};
	return 0;
}

int remap_collect_one(void *msg, void *arg)
{
	const RemapFilePathEntry *rpe = msg;
	uint32_t ghost_id;
	int ret;

	(void)arg;
	if (remap_type_of(rpe) == REMAP_TYPE__LINKED || remap_type_of(rpe) == REMAP_TYPE__PROCFS)
		return collect_linked_remap(rpe);
	ret = remap_ghost_id(rpe, &ghost_id);
	if (ret)
		return ret;
	if (ghost_of_file(rpe->orig_id) || linked_remap_of(rpe->orig_id)) {
		pr_err("remap-fpath.img: file %u is remapped twice\n", rpe->orig_id);
		return -EINVAL;
	}
	return ghost_collect_remap(rpe->orig_id, ghost_id);
}

void remap_collect_fini(void)
{
	free(linked_remaps);
	linked_remaps = NULL;
	nr_linked_remaps = 0;
}

/* The link_remap file a linked-back file is reached through, and its inode. */
static const struct reg_file *find_link(const struct reg_file *rf, struct stat *st)
{
	const struct reg_file *lf = find_reg_file(rf->link_id, rf->path);

	if (!lf)
		return NULL;
	if (!reg_is_plain_path(lf->path)) {
		pr_err("%s: its link %s is not a plain absolute path\n", rf->path, lf->path);
		return NULL;
	}
	if (stat(lf->path, st)) {
		pr_perror("%s: cannot find its link %s (--link-remap)", rf->path, lf->path);
		return NULL;
	}
	return lf;
}

struct link_names {
	const char *from, *to;
};

static int link_as_owner(void *arg)
{
	const struct link_names *names = arg;

	return link(names->from, names->to) ? -errno : 0;
}

/*
 * A file linked back at dump (--link-remap): its old name is given back for the open, so
 * /proc shows "PATH (deleted)" as at dump, then removed again (and the directories above
 * it that were removed too, made again for it). Tasks opening it at the same time may
 * find the name given back already (the same inode: fine) or removed again before their
 * open (retried); the second unlink finds nothing.
 */
int remap_open_linked(const struct reg_file *rf, int flags)
{
	struct ghost_parents parents;
	struct link_names names;
	const struct reg_file *lf;
	struct stat lst, st;
	int fd = -ENOENT, ret;

	lf = find_link(rf, &lst);
	if (!lf)
		return -ENOENT;
	names = (struct link_names){.from = lf->path, .to = rf->path};
	fd = ghost_make_parents(rf->path, lst.st_uid, lst.st_gid, &parents) ?: -ENOENT;
	if (fd != -ENOENT) {
		ghost_remove_parents(&parents);
		return fd;
	}
	for (int tries = 0; tries < 100 && fd == -ENOENT; tries++) {
		ret = make_as_tree_owner(link_as_owner, &names, lst.st_uid, lst.st_gid);
		if (ret && ret != -EEXIST) {
			fd = ret;
			pr_err("cannot link %s back to %s: %s\n", lf->path, rf->path,
			       strerror(-ret));
			break;
		}
		if (stat(rf->path, &st))
			continue;
		if (st.st_dev != lst.st_dev || st.st_ino != lst.st_ino) {
			pr_err("%s: the path exists again and is another file\n", rf->path);
			ghost_remove_parents(&parents);
			return -EEXIST;
		}
		fd = open(rf->path, flags);
		if (fd < 0) {
			fd = -errno;
			if (fd != -ENOENT)
				pr_err("cannot open %s through its link: %s\n", rf->path,
				       strerror(-fd));
		}
	}
	if (unlink(rf->path) && errno != ENOENT)
		pr_warn("cannot remove %s again: %s\n", rf->path, strerror(errno));
	ghost_remove_parents(&parents);
	if (fd == -ENOENT)
		pr_err("cannot open %s through its link: its name kept being removed\n", rf->path);
	return fd;
}

/*
 * A file in /proc/PID of a process gone at dump: a helper child gets PID while the file
 * is opened (and, with chdir_too, made the cwd: a dead process's directory cannot be
 * entered), then exits and is reaped, and the opened directory or file is a dead
 * process's again. The helper waits for EOF on a pipe: it goes if we die.
 */
int remap_open_dead_proc(const struct reg_file *rf, int flags, bool chdir_too)
{
	int hold[2], fd, status;
	pid_t helper;
	char c;

	if (pipe2(hold, O_CLOEXEC)) {
		pr_perror("%s: pipe for the helper of dead pid %d", rf->path, rf->dead_pid);
		return -errno;
	}
	helper = clone_with_pid(rf->dead_pid, 0);
	if (helper == 0) {
		close(hold[1]);
		_exit(read(hold[0], &c, 1) == 0 ? 0 : 1);
	}
	close(hold[0]);
	if (helper < 0) {
		pr_perror("%s: cannot create a helper with the dead pid %d", rf->path,
			  rf->dead_pid);
		close(hold[1]);
		return -EBUSY;
	}
	fd = open(rf->path, flags);
	if (fd < 0) {
		fd = -errno;
		pr_perror("cannot open %s (flags %#o) of helper %d", rf->path, flags, helper);
	} else if (chdir_too && fchdir(fd)) {
		pr_perror("cannot chdir to %s of helper %d", rf->path, helper);
		close(fd);
		fd = -errno;
	}
	close(hold[1]);
	if (waitpid(helper, &status, 0) != helper)
		pr_warn("%s: cannot reap helper %d: %s\n", rf->path, helper, strerror(errno));
	return fd;
}

void reg_remove_links(void)
{
	for (size_t i = 0; i < nr_linked_remaps; i++) {
		const struct file_desc *d = linked_remaps[i].type == REMAP_TYPE__LINKED
						    ? find_file_desc(linked_remaps[i].target)
						    : NULL;
		const struct reg_file *lf = d && d->fe->type == FD_TYPES__REG ? d->kind : NULL;
		char buf[PATH_MAX + 32];

		if (lf && unlink(mntns_restore_path(lf->mnt_id, lf->path, buf, sizeof(buf))) &&
		    errno != ENOENT)
			pr_warn("cannot remove %s: %s\n", lf->path, strerror(errno));
	}
}
