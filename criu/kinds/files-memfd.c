/*
 * memfds: the objects (memfd.img, contents in pagemap-shmem-SHMID.img keyed by the
 * object's inode number, as CRIU keys them), the open descriptions on them
 * (file_entry.memfd) and the VMAs that map them (VMA_AREA_MEMFD, naming a file entry).
 * Restore re-creates each object once in criu's main process and parks it in fdstore;
 * fds and mappings reopen it through /proc/self/fd, and its seals come last.
 *
 * CRIU also dumps shared anonymous memory held as a file (an fd on it, a private mapping
 * of it) as a memfd named "/dev/zero", and so do we; upstream's dump names even its shared
 * VMAs so. Such an object is restored as the shared anonymous memory it is (shmem.c), and
 * its fds and private mappings reopen that.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "fdstore.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "mem.h"
#include "memfd.h"
#include "servicefd.h"
#include "shmem.h"

#include "memfd.pb-c.h"

#define MEMFD_PREFIX   "/memfd:"
#define DELETED_SUFFIX " (deleted)"
/* The name the kernel gives shared anonymous memory ("/dev/zero (deleted)" in maps). */
#define SHMEM_MEMFD_NAME "/dev/zero"
/* The kernel's limit: "memfd:" and the name fit in NAME_MAX. */
#define MEMFD_NAME_MAX (255 - 6)

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif
#define MEMFD_KNOWN_SEALS                                                                          \
	(F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE |          \
	 F_SEAL_EXEC)

#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#define MFD_HUGE_MASK  0x3f
#endif
#define MEMFD_HUGETLB_BITS (MFD_HUGETLB | ((uint32_t)MFD_HUGE_MASK << MFD_HUGE_SHIFT))

/* Flags open() must not see again: they would create or truncate, not reopen. */
#define REOPEN_DROP_FLAGS (O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC | (O_TMPFILE & ~O_DIRECTORY))

/* ---------------------------------------------------------------- dump ---- */

/* One memfd object named by the dump so far. */
struct dumped_memfd {
	dev_t dev;
	ino_t ino;
	uint32_t inode_id;  /* memfd_inode_entry.inode_id: 1, 2, ... in order of discovery */
	uint32_t mapped_id; /* the file entry its VMAs name; 0 until a VMA maps it */
	int fd;		    /* criu's own copy: its seals and contents are read at the end */
	char *name;
};

static struct dumped_memfd *dumped_memfds;
static size_t nr_dumped_memfds;

/*
 * NAME of a "/memfd:NAME (deleted)" link, or "/dev/zero" for shared anonymous memory, into
 * name (MEMFD_NAME_MAX + 1 bytes); false if link is neither.
 */
static bool memfd_link_name(const char *link, char *name)
{
	size_t len = strlen(link), pre = strlen(MEMFD_PREFIX), sfx = strlen(DELETED_SUFFIX);

	if (!strcmp(link, SHMEM_MEMFD_NAME DELETED_SUFFIX)) {
		strcpy(name, SHMEM_MEMFD_NAME);
		return true;
	}
	if (len < pre + sfx || strncmp(link, MEMFD_PREFIX, pre) ||
	    strcmp(link + len - sfx, DELETED_SUFFIX) || len - pre - sfx > MEMFD_NAME_MAX)
		return false;
	memcpy(name, link + pre, len - pre - sfx);
	name[len - pre - sfx] = '\0';
	return true;
}

/* On the kernel's internal tmpfs (as shared anonymous memory), or on hugetlbfs. */
static bool on_memfd_fs(const char *path)
{
	struct statfs sfs;

	return !statfs(path, &sfs) &&
	       (sfs.f_type == TMPFS_MAGIC || sfs.f_type == (typeof(sfs.f_type))HUGETLBFS_MAGIC);
}

static bool memfd_owns(const struct fd_parms *p)
{
	char name[MEMFD_NAME_MAX + 1], path[64];

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->fd);
	return S_ISREG(p->st.st_mode) && !p->st.st_nlink && memfd_link_name(p->link, name) &&
	       on_memfd_fs(path);
}

static struct dumped_memfd *find_dumped_memfd(const struct stat *st)
{
	for (size_t i = 0; i < nr_dumped_memfds; i++)
		if (dumped_memfds[i].dev == st->st_dev && dumped_memfds[i].ino == st->st_ino)
			return &dumped_memfds[i];
	return NULL;
}

/*
 * The object fd (criu's copy, which this takes) is open on, link being how /proc shows
 * it; each object is recorded once, by its inode.
 */
static int note_memfd(int fd, const struct stat *st, const char *link, const char *what,
		      struct dumped_memfd **out)
{
	char name[MEMFD_NAME_MAX + 1];
	struct dumped_memfd *grown;

	*out = find_dumped_memfd(st);
	if (*out) {
		close(fd);
		return 0;
	}
	if (!memfd_link_name(link, name)) {
		pr_err("%s: %s is not a memfd's name\n", what, link);
		close(fd);
		return -EINVAL;
	}
	grown = realloc(dumped_memfds, (nr_dumped_memfds + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("%s: out of memory for memfd %s\n", what, link);
		close(fd);
		return -ENOMEM;
	}
	dumped_memfds = grown;
	*out = &dumped_memfds[nr_dumped_memfds];
	**out = (struct dumped_memfd){.dev = st->st_dev,
				      .ino = st->st_ino,
				      .fd = fd,
				      .inode_id = nr_dumped_memfds + 1,
				      .name = strdup(name)};
	nr_dumped_memfds++;
	if (!(*out)->name) {
		pr_err("%s: out of memory for memfd %s\n", what, link);
		return -ENOMEM;
	}
	pr_debug("%s: memfd \"%s\" (inode %lu) is memfd inode %u\n", what, name,
		 (unsigned long)st->st_ino, (*out)->inode_id);
	return 0;
}

/* fown: the owner of an fd's I/O signals; NULL for the entry of the mappings. */
static int write_memfd_entry(uint32_t id, uint32_t flags, uint64_t pos, uint32_t inode_id,
			     FownEntry *fown)
{
	MemfdFileEntry mfe = MEMFD_FILE_ENTRY__INIT;
	FownEntry no_owner = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;

	mfe.id = id;
	mfe.flags = flags;
	mfe.pos = pos;
	mfe.fown = fown ? fown : &no_owner;
	mfe.inode_id = inode_id;
	fe.type = FD_TYPES__MEMFD;
	fe.id = id;
	fe.memfd = &mfe;
	return write_file_entry(&fe);
}

static int memfd_dump(const struct fd_parms *p, uint32_t id)
{
	struct dumped_memfd *m;
	FownEntry fown;
	char what[64];
	int fd, ret;

	snprintf(what, sizeof(what), "fd %d of task %d", p->fd, p->pid);
	ret = dump_fown(p, &fown);
	if (ret)
		return ret;
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	ret = note_memfd(fd, &p->st, p->link, what, &m);
	return ret ? ret : write_memfd_entry(id, p->flags, p->pos, m->inode_id, &fown);
}

/* As CRIU writes it: one entry per object for all its VMAs, which carry their own access. */
int memfd_dump_mapped(pid_t pid, const char *map_path, uint32_t *file_id)
{
	char link[PATH_MAX], what[PATH_MAX + 32];
	struct dumped_memfd *m;
	struct stat st;
	ssize_t len;
	int fd, ret;

	snprintf(what, sizeof(what), "task %d: %s", pid, map_path);
	fd = open(map_path, O_RDONLY | O_CLOEXEC);
	len = fd < 0 ? -1 : readlink(map_path, link, sizeof(link) - 1);
	if (len < 0 || fstat(fd, &st)) {
		ret = -errno;
		pr_perror("%s: cannot open the mapped memfd", what);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	link[len] = '\0';
	ret = note_memfd(fd, &st, link, what, &m);
	if (ret)
		return ret;
	if (!m->mapped_id) {
		m->mapped_id = files_new_id();
		ret = write_memfd_entry(m->mapped_id, O_RDONLY, 0, m->inode_id, NULL);
	}
	*file_id = m->mapped_id;
	return ret;
}

/* MFD_HUGETLB with the page size, as memfd_create() takes it; 0 for a tmpfs memfd. */
static uint32_t hugetlb_flag(const struct statfs *sfs)
{
	if (sfs->f_type != (typeof(sfs->f_type))HUGETLBFS_MAGIC)
		return 0;
	return MFD_HUGETLB | ((uint32_t)__builtin_ctzl(sfs->f_bsize) << MFD_HUGE_SHIFT);
}

static int dump_memfd_object(const struct dumped_memfd *m, struct mem_dump_ctx *ctx)
{
	MemfdInodeEntry mie = MEMFD_INODE_ENTRY__INIT;
	struct cr_img *img;
	struct statfs sfs;
	struct stat st;
	char what[MEMFD_NAME_MAX + 32];
	int seals, ret;

	snprintf(what, sizeof(what), "memfd \"%s\"", m->name);
	seals = fcntl(m->fd, F_GET_SEALS);
	if (seals < 0 || fstat(m->fd, &st) || fstatfs(m->fd, &sfs)) {
		ret = -errno;
		pr_perror("%s: cannot read its seals or attributes", what);
		return ret;
	}
	ret = userns_tree_owner(st.st_uid, st.st_gid, &mie.uid, &mie.gid, what);
	if (ret)
		return ret;
	mie.name = m->name;
	mie.size = st.st_size;
	mie.shmid = st.st_ino;
	mie.seals = seals;
	mie.inode_id = m->inode_id;
	mie.hugetlb_flag = hugetlb_flag(&sfs);
	mie.has_hugetlb_flag = mie.hugetlb_flag != 0;
	mie.has_mode = true;
	mie.mode = st.st_mode;
	pr_info("%s: inode %u, %llu bytes, seals %#x, shmid %lu\n", what, m->inode_id,
		(unsigned long long)st.st_size, seals, (unsigned long)st.st_ino);

	/* Shared anonymous memory: its pages are stored already where a VMA maps it shared. */
	if (!strcmp(m->name, SHMEM_MEMFD_NAME) && shmem_already_dumped(ctx, st.st_ino))
		ret = 0;
	else
		ret = dump_shmem_fd(m->fd, st.st_ino, st.st_size, what, ctx);
	if (ret)
		return ret;
	img = files_side_image(CR_IMG_MEMFD_INODE);
	return img ? pb_write_one(img, &mie) : -EIO;
}

int memfd_dump_objects(struct mem_dump_ctx *ctx)
{
	int ret = 0;

	for (size_t i = 0; i < nr_dumped_memfds && !ret; i++)
		ret = dump_memfd_object(&dumped_memfds[i], ctx);
	return ret;
}

void memfd_dump_fini(void)
{
	for (size_t i = 0; i < nr_dumped_memfds; i++) {
		close(dumped_memfds[i].fd);
		free(dumped_memfds[i].name);
	}
	free(dumped_memfds);
	dumped_memfds = NULL;
	nr_dumped_memfds = 0;
}

/* ------------------------------------------------------------- restore ---- */

/* One memfd object of memfd.img. Filled before forking: every task inherits the table. */
struct memfd_inode {
	MemfdInodeEntry *mie;
	int store_id; /* fdstore id of the re-created object; -1: none (shared anonymous memory) */
	uint32_t original_id; /* the description that gets memfd_create()'s own file, or 0 */
};

static struct memfd_inode *memfd_inodes;
static size_t nr_memfd_inodes;

static bool stands_for_shmem(const MemfdInodeEntry *mie)
{
	return !strcmp(mie->name, SHMEM_MEMFD_NAME);
}

static struct memfd_inode *find_memfd_inode(uint64_t inode_id)
{
	for (size_t i = 0; i < nr_memfd_inodes; i++)
		if (memfd_inodes[i].mie->inode_id == inode_id)
			return &memfd_inodes[i];
	return NULL;
}

/* What memfd_create() and F_ADD_SEALS will be given: refused here, before anything exists. */
static int check_memfd_inode(const MemfdInodeEntry *mie)
{
	const char *why = NULL;

	if (find_memfd_inode(mie->inode_id))
		why = "appears twice";
	else if (stands_for_shmem(mie))
		return 0;
	else if (strlen(mie->name) > MEMFD_NAME_MAX)
		why = "has a name longer than memfd_create() takes";
	else if (mie->seals & ~MEMFD_KNOWN_SEALS)
		why = "has seals this criu does not know";
	else if (mie->has_hugetlb_flag &&
		 (!(mie->hugetlb_flag & MFD_HUGETLB) || (mie->hugetlb_flag & ~MEMFD_HUGETLB_BITS)))
		why = "has a hugetlb flag that is not MFD_HUGETLB with a page size";
	if (!why)
		return 0;
	pr_err("memfd.img: inode %llu (\"%s\", seals %#x, hugetlb %#x) %s\n",
	       (unsigned long long)mie->inode_id, mie->name, mie->seals, mie->hugetlb_flag, why);
	return -EINVAL;
}

/* Kept: the table holds the records. */
static int add_memfd_inode(void *msg, void *arg)
{
	MemfdInodeEntry *mie = msg;
	struct memfd_inode *grown;
	int ret;

	(void)arg;
	ret = check_memfd_inode(mie);
	if (ret)
		return ret;
	grown = realloc(memfd_inodes, (nr_memfd_inodes + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("memfd.img: out of memory (%zu entries)\n", nr_memfd_inodes);
		return -ENOMEM;
	}
	memfd_inodes = grown;
	memfd_inodes[nr_memfd_inodes++] = (struct memfd_inode){.mie = mie, .store_id = -1};
	return 1;
}

/* memfd.img is there only when the dump had memfds. */
static int memfd_collect_images(void)
{
	return pb_collect_optional_image(CR_IMG_MEMFD_INODE, add_memfd_inode, NULL);
}

/*
 * d->kind stays NULL: the entry's inode is in memfd_inodes, found again by its id.
 *
 * The file memfd_create() returns is not counted as a writer of the inode, a reopened
 * O_RDWR one is, and execveat() of a memfd fails (ETXTBSY) while it has writers. So, as
 * CRIU does, the first read-write description of each object is that file itself.
 */
static int memfd_collect(struct file_desc *d)
{
	const MemfdFileEntry *mfe = d->fe->memfd;
	struct memfd_inode *inode;

	if (!mfe || mfe->id != d->id) {
		pr_err("files.img: memfd file %u has no memfd entry of its own\n", d->id);
		return -EINVAL;
	}
	inode = find_memfd_inode(mfe->inode_id);
	if (!inode) {
		pr_err("files.img: memfd file %u names inode %u, which is not in memfd.img\n",
		       d->id, mfe->inode_id);
		return -EINVAL;
	}
	if ((mfe->flags & O_ACCMODE) == O_RDWR && !inode->original_id &&
	    !stands_for_shmem(inode->mie))
		inode->original_id = d->id;
	return collect_owner(d, mfe->fown);
}

static void memfd_collect_fini(void)
{
	for (size_t i = 0; i < nr_memfd_inodes; i++)
		memfd_inode_entry__free_unpacked(memfd_inodes[i].mie, NULL);
	free(memfd_inodes);
	memfd_inodes = NULL;
	nr_memfd_inodes = 0;
}

static const struct memfd_inode *inode_of_file(uint32_t file_id, const char *user)
{
	const struct file_desc *d = find_file_desc(file_id);

	if (!d || d->ops != &memfd_fdtype_ops) {
		pr_err("%s names file %u, which is not a memfd in files.img\n", user, file_id);
		return NULL;
	}
	return find_memfd_inode(d->fe->memfd->inode_id); /* there: memfd_collect() checked */
}

int memfd_vma_shmem(uint32_t file_id, uint64_t *shmid, const char *img)
{
	char user[PATH_MAX];
	const struct memfd_inode *inode;

	snprintf(user, sizeof(user), "%s: a memfd VMA", img);
	inode = inode_of_file(file_id, user);
	if (!inode)
		return -EINVAL;
	if (!stands_for_shmem(inode->mie))
		return 0;
	*shmid = inode->mie->shmid;
	return 1;
}

/* Size, contents, owner and mode: all before the seals, which may forbid them. */
static int fill_memfd(int fd, const MemfdInodeEntry *mie, const char *what, uint64_t *nr_pages)
{
	uint64_t pages = 0;
	int ret;

	if (ftruncate(fd, mie->size)) {
		ret = -errno;
		pr_perror("%s: cannot set its size to %llu", what, (unsigned long long)mie->size);
		return ret;
	}
	ret = shmem_fill_fd(fd, mie->shmid, mie->size, what, &pages);
	*nr_pages += pages;
	if (ret)
		return ret;
	ret = userns_chown(fd, mie->uid, mie->gid, what);
	if (ret)
		return ret;
	if (mie->has_mode && fchmod(fd, mie->mode & 07777)) {
		ret = -errno;
		pr_perror("%s: cannot set its mode %#o", what, mie->mode & 07777);
		return ret;
	}
	return 0;
}

/* A memfd created without MFD_ALLOW_SEALING has exactly F_SEAL_SEAL: it gets the same. */
static int create_memfd(struct memfd_inode *inode, uint64_t *nr_pages)
{
	const MemfdInodeEntry *mie = inode->mie;
	unsigned int flags = MFD_CLOEXEC;
	char what[MEMFD_NAME_MAX + 48];
	int fd, ret;

	snprintf(what, sizeof(what), "memfd \"%s\" (inode %llu)", mie->name,
		 (unsigned long long)mie->inode_id);
	if (mie->seals != F_SEAL_SEAL)
		flags |= MFD_ALLOW_SEALING;
	if (mie->has_hugetlb_flag)
		flags |= mie->hugetlb_flag;
	fd = memfd_create(mie->name, flags);
	if (fd < 0) {
		ret = -errno;
		pr_perror("%s: memfd_create(flags %#x)", what, flags);
		return ret;
	}
	ret = fill_memfd(fd, mie, what, nr_pages);
	if (!ret) {
		inode->store_id = fdstore_add(fd);
		ret = inode->store_id < 0 ? inode->store_id : 0;
	}
	close(fd);
	if (!ret)
		pr_debug("%s: %llu bytes, re-created\n", what, (unsigned long long)mie->size);
	return ret;
}

int memfd_restore_objects(uint64_t *nr_pages)
{
	int ret = 0;

	for (size_t i = 0; i < nr_memfd_inodes && !ret; i++) {
		const MemfdInodeEntry *mie = memfd_inodes[i].mie;

		if (stands_for_shmem(mie))
			ret = shmem_note_file(mie->shmid, mie->size);
		else
			ret = create_memfd(&memfd_inodes[i], nr_pages);
	}
	return ret;
}

/* memfd_create()'s own file of the object (fdstore's copy), or shmem.c's; the fd or -errno. */
static int original_memfd(const struct memfd_inode *inode)
{
	if (stands_for_shmem(inode->mie))
		return shmem_open(inode->mie->shmid);
	return fdstore_get(inode->store_id);
}

/* A new description of the object, as open() with flags would have made it. */
static int reopen_memfd(const struct memfd_inode *inode, uint32_t flags, uint32_t file_id)
{
	char path[64];
	int obj, fd;

	obj = original_memfd(inode);
	if (obj < 0)
		return obj;
	snprintf(path, sizeof(path), "self/fd/%d", obj);
	fd = proc_open(path, flags & ~REOPEN_DROP_FLAGS);
	if (fd < 0) {
		fd = -errno;
		pr_perror("memfd file %u: cannot reopen \"%s\" with flags %#o", file_id,
			  inode->mie->name, flags);
	}
	close(obj);
	return fd;
}

/* A description for file file_id: the original file (memfd_collect()) or a reopening. */
static int open_description(const struct memfd_inode *inode, uint32_t flags, uint32_t file_id)
{
	int fd;

	if (inode->original_id != file_id)
		return reopen_memfd(inode, flags, file_id);
	fd = original_memfd(inode);
	if (fd < 0 || !fcntl(fd, F_SETFL, flags & ~REOPEN_DROP_FLAGS))
		return fd;
	pr_warn("memfd file %u: cannot set flags %#o on \"%s\" itself (%s): reopened instead\n",
		file_id, flags, inode->mie->name, strerror(errno));
	close(fd);
	return reopen_memfd(inode, flags, file_id);
}

static int memfd_open(const struct file_desc *d)
{
	const MemfdFileEntry *mfe = d->fe->memfd;
	int fd = open_description(find_memfd_inode(mfe->inode_id), mfe->flags, d->id);

	/* An O_PATH fd has no offset (lseek fails with EBADF). */
	if (fd < 0 || (mfe->flags & O_PATH))
		return fd;
	if (lseek(fd, mfe->pos, SEEK_SET) < 0) {
		int err = errno;

		pr_err("memfd file %u: cannot restore offset %llu: %s\n", d->id,
		       (unsigned long long)mfe->pos, strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}

/*
 * No mapping of a memfd with F_SEAL_WRITE could be written through at dump, and none may
 * be able to when the seal is added: it is opened read-only whatever the VMA says (CRIU
 * writes O_RDWR for every memfd mapping). A read-write mapping maps the original file:
 * a mapping keeps its file, and a reopened writer would keep execveat() failing.
 */
int memfd_open_mapped(uint32_t file_id, uint32_t fdflags)
{
	const struct memfd_inode *inode = inode_of_file(file_id, "a VMA");

	if (!inode)
		return -EINVAL;
	if (inode->mie->seals & F_SEAL_WRITE)
		fdflags = (fdflags & ~O_ACCMODE) | O_RDONLY;
	if ((fdflags & O_ACCMODE) == O_RDWR)
		return original_memfd(inode);
	return reopen_memfd(inode, fdflags, file_id);
}

int memfd_apply_seals(void)
{
	for (size_t i = 0; i < nr_memfd_inodes; i++) {
		const struct memfd_inode *inode = &memfd_inodes[i];
		uint32_t seals = inode->mie->seals;
		int fd, ret;

		/* No seals, or exactly F_SEAL_SEAL, which memfd_create() gave it. */
		if (inode->store_id < 0 || !seals || seals == F_SEAL_SEAL)
			continue;
		fd = fdstore_get(inode->store_id);
		if (fd < 0)
			return fd;
		ret = fcntl(fd, F_ADD_SEALS, seals) ? -errno : 0;
		close(fd);
		if (ret) {
			pr_err("memfd \"%s\" (inode %llu): cannot add seals %#x: %s\n",
			       inode->mie->name, (unsigned long long)inode->mie->inode_id, seals,
			       strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Each description opened once serves all its tasks: every reopening shares the object. */
const struct fdtype_ops memfd_fdtype_ops = {
	.type = FD_TYPES__MEMFD,
	.name = "memfd",
	.owns = memfd_owns,
	.dump = memfd_dump,
	.collect_images = memfd_collect_images,
	.collect = memfd_collect,
	.collect_fini = memfd_collect_fini,
	.open = memfd_open,
	.inheritable = true,
};
