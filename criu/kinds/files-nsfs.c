/*
 * Namespace files (nsfs, file_entry.nsf): an fd on /proc/PID/ns/NAME, which readlink shows
 * as "NAME:[INODE]". Every task of the tree lives in its root's namespaces, so the file
 * names one of those (or criu's, shared with the tree); restore opens the restored task's
 * own namespace file of that kind, /proc/self/ns/NAME.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "namespaces.h"
#include "servicefd.h"

#include "ns-file.pb-c.h"

#define NS_NAME_MAX 16

/* "NAME:[INODE]" for the nsfs inode p->st itself; name filled. */
static bool parse_ns_link(const struct fd_parms *p, char name[NS_NAME_MAX])
{
	uint64_t ino;
	int end = 0;

	if (sscanf(p->link, "%15[a-z_]:[%" SCNu64 "]%n", name, &ino, &end) != 2 || p->link[end])
		return false;
	return ino == p->st.st_ino && S_ISREG(p->st.st_mode);
}

/* pipe:[N] and socket:[N] look alike: only the names of namespace kinds are taken. */
static bool nsfs_owns(const struct fd_parms *p)
{
	static const char *const kinds[] = { "pid", "net", "ipc", "uts",
					     "mnt", "user", "cgroup", "time" };
	char name[NS_NAME_MAX];

	if (!parse_ns_link(p, name))
		return false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(name, kinds[i]))
			return true;
	return false;
}

/* ---------------------------------------------------------------- dump ---- */

static int nsfs_dump(const struct fd_parms *p, uint32_t id)
{
	NsFileEntry nfe = NS_FILE_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	char name[NS_NAME_MAX];
	int ret;

	parse_ns_link(p, name);
	ret = ns_dump_file_id(name, p->st.st_ino, &nfe.ns_id, &nfe.ns_cflag);
	if (ret == -ENOENT)
		pr_err("fd %d of task %d: %s is a namespace no task of the tree lives in, which "
		       "is not supported\n",
		       p->fd, p->pid, p->link);
	if (ret)
		return -ENOTSUP;
	nfe.id = id;
	nfe.flags = p->flags;
	fe.type = FD_TYPES__NS;
	fe.id = id;
	fe.nsf = &nfe;
	pr_debug("fd %d of task %d: %s, namespace %u\n", p->fd, p->pid, p->link, nfe.ns_id);
	return write_file_entry(&fe);
}

/* ------------------------------------------------------------- restore ---- */

/* d->kind: the kind's name in /proc/self/ns (a constant string, not to be freed). */
static int nsfs_collect(struct file_desc *d)
{
	const NsFileEntry *nfe = d->fe->nsf;

	if (!nfe || nfe->id != d->id) {
		pr_err("files.img: namespace file %u has no ns_file entry of its own\n", d->id);
		return -EINVAL;
	}
	if ((nfe->flags & O_ACCMODE) != O_RDONLY) {
		pr_err("files.img: namespace file %u has open flags %#o: nsfs files open "
		       "read-only\n",
		       d->id, nfe->flags);
		return -EINVAL;
	}
	return ns_restore_file_name(nfe->ns_id, nfe->ns_cflag, d->id) ? 0 : -EINVAL;
}

static int nsfs_open(const struct file_desc *d)
{
	const NsFileEntry *nfe = d->fe->nsf;
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "self/ns/%s",
		 ns_restore_file_name(nfe->ns_id, nfe->ns_cflag, d->id));
	fd = proc_open(path, O_RDONLY);
	if (fd < 0) {
		pr_perror("namespace file %u: cannot open %s", d->id, path);
		return -errno;
	}
	return restore_status_flags(fd, nfe->flags, d);
}

const struct fdtype_ops nsfs_fdtype_ops = {
	.type = FD_TYPES__NS,
	.name = "namespace",
	.owns = nsfs_owns,
	.dump = nsfs_dump,
	.collect = nsfs_collect,
	.open = nsfs_open,
	.inheritable = true,
};
