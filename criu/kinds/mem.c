/*
 * The address space of a seized task: VMAs and mm fields into mm-PID.img (their extra
 * state into mm-ext-PID.img), the private pages worth storing (present or swapped,
 * anonymous) into pagemap-PID.img + pages-ID.img, and the contents of each shared
 * anonymous object, once per dump, into pagemap-shmem-SHMID.img + pages-ID.img.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>

#include "dedup.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "mem-guard.h"
#include "mem.h"
#include "mem-track.h"
#include "memfd.h"
#include "namespaces.h"
#include "page-splice.h"
#include "page-xfer.h"
#include "plugin.h"
#include "proc_parse.h"
#include "sysv-shm.h"
#include "task-image.h"
#include "uffd.h"
#include "vma.h"

#include "ext.pb-c.h"
#include "mm.pb-c.h"

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif

#define PAGE_SIZE 4096UL

/* /proc/PID/pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst). */
#define PME_PRESENT (1ULL << 63)
#define PME_SWAPPED (1ULL << 62)
#define PME_FILE_OR_SHARED (1ULL << 61) /* not an anonymous page */
/* A guard region's page (Linux 6.15; shown as swapped too): no data, mem-guard.c's. */
#define PME_GUARD (1ULL << 58)
#define PME_PFN_MASK ((1ULL << 55) - 1)

/* Pagemap entries read per pread: 512 KiB of pagemap covers 256 MiB of address space. */
#define PAGEMAP_BATCH 65536

void mem_dump_init(struct mem_dump_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->next_pages_id = 1;
	ctx->page_server_sk = -1;
}

void mem_dump_fini(struct mem_dump_ctx *ctx)
{
	free(ctx->shmem_dumped);
	ctx->shmem_dumped = NULL;
	if (ctx->page_server_sk >= 0)
		close(ctx->page_server_sk);
	ctx->page_server_sk = -1;
	mem_lazy_free(ctx);
	ctx->nr_shmem_dumped = 0;
}

/* ------------------------------------------------------------------ VMAs ---- */

/* One VMA as the dump writes it, with what mm-ext-PID.img holds for it. */
struct dump_vma {
	VmaEntry e;
	char *anon_name; /* PR_SET_VMA_ANON_NAME, or NULL */
	bool locked;
};

static bool path_is(const struct proc_vma *vma, const char *name)
{
	return !strcmp(vma->path, name);
}

static bool path_starts(const struct proc_vma *vma, const char *prefix)
{
	return !strncmp(vma->path, prefix, strlen(prefix));
}

static uint64_t vma_madv_bits(uint32_t vmflags)
{
	static const struct {
		uint32_t vmflag;
		uint64_t madv;
	} map[] = {
		{ VMFLAG_DONTFORK, VMA_MADV_DONTFORK },	  { VMFLAG_DONTDUMP, VMA_MADV_DONTDUMP },
		{ VMFLAG_HUGEPAGE, VMA_MADV_HUGEPAGE },	  { VMFLAG_NOHUGEPAGE, VMA_MADV_NOHUGEPAGE },
		{ VMFLAG_RANDOM, VMA_MADV_RANDOM },	  { VMFLAG_SEQUENTIAL, VMA_MADV_SEQUENTIAL },
		{ VMFLAG_WIPEONFORK, VMA_MADV_WIPEONFORK }, { VMFLAG_MERGEABLE, VMA_MADV_MERGEABLE },
	};
	uint64_t madv = 0;
	unsigned int i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (vmflags & map[i].vmflag)
			madv |= map[i].madv;
	return madv;
}

/* The kernel's special mappings: the kernel provides them, no pages are stored. */
static bool classify_special(const struct proc_vma *vma, VmaEntry *ve)
{
	static const struct {
		const char *name;
		uint32_t status;
	} specials[] = {
		{ "[vdso]", VMA_AREA_REGULAR | VMA_AREA_VDSO | VMA_ANON_PRIVATE },
		{ "[vvar]", VMA_AREA_REGULAR | VMA_AREA_VVAR | VMA_ANON_PRIVATE },
		{ "[vsyscall]", VMA_AREA_VSYSCALL | VMA_ANON_PRIVATE },
	};
	unsigned int i;

	for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
		if (path_is(vma, specials[i].name)) {
			ve->status = specials[i].status;
			ve->flags = MAP_PRIVATE | MAP_ANONYMOUS;
			return true;
		}
	}
	return false;
}

/* What restore could not reopen by path (a DRM render node, ...): a plugin's to re-create. */
static bool maps_device_object(const struct proc_vma *vma, const struct stat *st)
{
	return !S_ISREG(st->st_mode) || (vma->vmflags & (VMFLAG_IO | VMFLAG_PFNMAP));
}

/* HANDLE_DEVICE_VMA on criu's own open copy of the mapped object; -ENOTSUP: nobody took it. */
static int offer_device_vma(pid_t pid, const struct proc_vma *vma, const char *map_path)
{
	struct stat st;
	int fd, ret;

	fd = open(map_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		pr_perror("task %d: cannot open the object mapped at %lx-%lx (%s)", pid, vma->start,
			  vma->end, vma->path);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	ret = run_plugins(HANDLE_DEVICE_VMA, fd, &st);
	close(fd);
	return ret;
}

/*
 * The object a plugin took, as a REG file entry named as /proc/PID/map_files shows it:
 * UPDATE_VMA_MAP gets that name at restore to find the object again. Written here, not
 * through dump_mapped_file(): the plugin keeps the contents, nothing of the file is saved.
 */
static int write_device_file_entry(const char *link, uint32_t fdflags, uint32_t *id)
{
	FileEntry fe = FILE_ENTRY__INIT;
	RegFileEntry reg = REG_FILE_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;

	reg.id = files_new_id();
	reg.flags = fdflags;
	reg.fown = &fown;
	reg.name = (char *)link;
	fe.type = FD_TYPES__REG;
	fe.id = reg.id;
	fe.reg = &reg;
	*id = reg.id;
	return write_file_entry(&fe);
}

/* A mapping of the file ve->shmid names, as its VMA's sharing and access say. */
static void set_file_mapping(const struct proc_vma *vma, uint32_t file_id, VmaEntry *ve)
{
	ve->shmid = file_id;
	ve->has_fdflags = true;
	if (vma->shared) {
		ve->status = VMA_AREA_REGULAR | VMA_FILE_SHARED;
		ve->flags = MAP_SHARED;
		/* A file opened read-only cannot be mapped shared-writable, even later. */
		ve->fdflags = (vma->vmflags & VMFLAG_MAYWRITE) ? O_RDWR : O_RDONLY;
	} else {
		ve->status = VMA_AREA_REGULAR | VMA_FILE_PRIVATE;
		ve->flags = MAP_PRIVATE;
		ve->fdflags = O_RDONLY;
	}
}

/*
 * A shared device VMA a plugin took: REGULAR|FILE_SHARED|EXT_PLUGIN, no pages stored,
 * and restore maps whatever fd UPDATE_VMA_MAP returns for the file's name.
 */
static int take_device_vma(pid_t pid, const char *map_path, const struct proc_vma *vma,
			   VmaEntry *ve)
{
	char link[PATH_MAX];
	uint32_t file_id;
	ssize_t len;
	int ret;

	len = readlink(map_path, link, sizeof(link) - 1);
	if (len < 0) {
		ret = -errno;
		pr_perror("task %d: cannot read %s", pid, map_path);
		return ret;
	}
	link[len] = '\0';
	set_file_mapping(vma, 0, ve);
	ve->status |= VMA_EXT_PLUGIN;
	ret = write_device_file_entry(link, ve->fdflags, &file_id);
	ve->shmid = file_id;
	return ret;
}

/* A device VMA: a plugin's (shared ones only), or refused. */
static int classify_device(pid_t pid, const struct proc_vma *vma, const char *map_path,
			   VmaEntry *ve)
{
	int ret = vma->shared ? offer_device_vma(pid, vma, map_path) : -ENOTSUP;

	if (ret == -ENOTSUP)
		pr_err("task %d: VMA %lx-%lx maps %s (%x:%x), a device no plugin takes: it cannot be dumped\n",
		       pid, vma->start, vma->end, vma->path, vma->dev_major, vma->dev_minor);
	if (ret < 0)
		return ret; /* other errors: run_plugins() named the plugin */
	return take_device_vma(pid, map_path, vma, ve);
}

/*
 * A memfd: a plugin may take a shared mapping of one as its device's (the KFD emulator's
 * buffer objects); otherwise it is the memfd object the task's fds may also hold, with
 * VMA_AREA_MEMFD. Its fdflags keep a read-only shared mapping without VM_MAYWRITE, which
 * F_SEAL_WRITE, added once restore has mapped everything, requires.
 */
static int classify_memfd(pid_t pid, const struct proc_vma *vma, const char *map_path,
			  VmaEntry *ve)
{
	uint32_t file_id;
	int ret = vma->shared ? offer_device_vma(pid, vma, map_path) : -ENOTSUP;

	if (ret >= 0)
		return take_device_vma(pid, map_path, vma, ve);
	if (ret != -ENOTSUP)
		return ret;
	ret = memfd_dump_mapped(pid, map_path, &file_id);
	if (ret)
		return ret;
	set_file_mapping(vma, file_id, ve);
	ve->status |= VMA_AREA_MEMFD;
	return 0;
}

/* The lowest fd of task pid on the inode st, or -ENOENT. */
static int task_fd_on(pid_t pid, const struct stat *st)
{
	char path[64];
	size_t nr, i;
	int *fds, ret = -ENOENT;
	struct stat fst;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if (list_fds(path, &fds, &nr))
		return -EIO;
	for (i = 0; i < nr && ret < 0; i++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fds[i]);
		if (!stat(path, &fst) && fst.st_dev == st->st_dev && fst.st_ino == st->st_ino)
			ret = fds[i];
	}
	free(fds);
	return ret;
}

/*
 * A packet socket's ring (VMA_AREA_SOCKET, shmid: the socket's file id, as CRIU writes
 * it): restore maps it from the restored socket, which one of the task's fds must hold.
 * Its frames are not kept, as the packets queued in the socket are not.
 */
static int classify_socket(pid_t pid, const struct proc_vma *vma, const struct stat *st,
			   VmaEntry *ve)
{
	int fd = task_fd_on(pid, st), ret;
	uint32_t id = 0;
	FdTypes type = FD_TYPES__UND;

	if (fd < 0) {
		pr_err("task %d: VMA %lx-%lx maps %s, which none of its fds holds: not "
		       "supported\n",
		       pid, vma->start, vma->end, vma->path);
		return -ENOTSUP;
	}
	ret = files_dump_task_fd(pid, fd, &id, &type);
	if (ret)
		return ret;
	if (type != FD_TYPES__PACKETSK) {
		pr_err("task %d: VMA %lx-%lx maps %s, not a packet socket's ring: not supported\n",
		       pid, vma->start, vma->end, vma->path);
		return -ENOTSUP;
	}
	/* No file kind bit: CRIU's restore would look for a regular file. */
	ve->status = VMA_AREA_REGULAR | VMA_AREA_SOCKET;
	ve->flags = vma->shared ? MAP_SHARED : MAP_PRIVATE;
	ve->shmid = id;
	return 0;
}

static int classify_file(pid_t pid, const struct proc_vma *vma, VmaEntry *ve)
{
	char path[96];
	uint32_t file_id;
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, vma->start, vma->end);
	if (stat(path, &st)) {
		int err = errno;

		pr_perror("task %d: cannot stat the file mapped at %lx-%lx (%s)", pid, vma->start,
			  vma->end, vma->path);
		return -err;
	}
	/* Shared anonymous memory mapped privately (through an fd on it) is one too, for CRIU. */
	if ((path_starts(vma, "/memfd:") || path_is(vma, "/dev/zero (deleted)")) &&
	    S_ISREG(st.st_mode) && !st.st_nlink)
		return classify_memfd(pid, vma, path, ve);
	if (S_ISSOCK(st.st_mode))
		return classify_socket(pid, vma, &st, ve);
	if (maps_device_object(vma, &st))
		return classify_device(pid, vma, path, ve);

	ret = dump_mapped_file(pid, vma->start, vma->end, &file_id);
	if (!ret)
		set_file_mapping(vma, file_id, ve);
	return ret;
}

/*
 * Anonymous memory named with prctl(PR_SET_VMA_ANON_NAME) shows as "[anon:NAME]" or, shared,
 * "[anon_shmem:NAME]"; the kernel refuses ']' in names, so NAME is all up to the last
 * character. The name is per VMA (even for shared memory), so each VMA records its own.
 */
static int take_anon_name(pid_t pid, const struct proc_vma *vma, const char *prefix,
			  struct dump_vma *dv)
{
	size_t prefix_len = strlen(prefix), path_len = strlen(vma->path);

	if (!path_starts(vma, prefix))
		return 0;
	if (path_len < prefix_len + 1 || vma->path[path_len - 1] != ']') {
		pr_err("task %d: VMA %lx-%lx: cannot parse the anonymous name in %s\n", pid,
		       vma->start, vma->end, vma->path);
		return -EINVAL;
	}
	dv->anon_name = strndup(vma->path + prefix_len, path_len - prefix_len - 1);
	if (!dv->anon_name) {
		pr_err("task %d: no memory for the name of VMA %lx-%lx\n", pid, vma->start, vma->end);
		return -ENOMEM;
	}
	return 0;
}

static int classify_anon(pid_t pid, const struct proc_vma *vma, struct dump_vma *dv)
{
	VmaEntry *ve = &dv->e;

	if (vma->shared) {
		pr_err("task %d: shared anonymous VMA %lx-%lx without a shmem object\n", pid,
		       vma->start, vma->end);
		return -ENOTSUP;
	}
	ve->status = VMA_AREA_REGULAR | VMA_ANON_PRIVATE;
	ve->flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (path_is(vma, "[heap]"))
		ve->status |= VMA_AREA_HEAP;
	return take_anon_name(pid, vma, "[anon:", dv);
}

static int classify_vma(pid_t pid, const struct proc_vma *vma, struct dump_vma *dv)
{
	VmaEntry *ve = &dv->e;

	if (classify_special(vma, ve))
		return 0;
	/* An io_setup() ring (the aio filesystem's): CRIU marks it so and nothing else. */
	if (vma->shared && path_is(vma, "/[aio] (deleted)")) {
		ve->status = VMA_AREA_AIORING;
		ve->flags = MAP_SHARED;
		return 0;
	}

	if (vma->shared && (path_is(vma, "/dev/zero (deleted)") || path_starts(vma, "[anon_shmem:"))) {
		/* MAP_SHARED|MAP_ANONYMOUS: a shmem object known by its inode. */
		ve->status = VMA_AREA_REGULAR | VMA_ANON_SHARED;
		ve->flags = MAP_SHARED | MAP_ANONYMOUS;
		ve->shmid = vma->ino;
		return take_anon_name(pid, vma, "[anon_shmem:", dv);
	}
	/*
	 * hugetlb memfds are memfds; anonymous hugetlb memory shows as /anon_hugepage, a file
	 * of the kernel's hugetlbfs: shared, it is an object known by its inode, as shmem is.
	 */
	if ((vma->vmflags & VMFLAG_HUGETLB) && path_starts(vma, "/anon_hugepage")) {
		if (!vma->shared)
			return classify_anon(pid, vma, dv);
		ve->status = VMA_AREA_REGULAR | VMA_ANON_SHARED;
		ve->flags = MAP_SHARED | MAP_ANONYMOUS;
		ve->shmid = vma->ino;
		return 0;
	}
	if (path_starts(vma, "/SYSV") && vma->shared)
		return sysv_shm_dump_vma(pid, vma, ve);
	if (!vma->path[0] || path_is(vma, "[heap]") || path_is(vma, "[stack]") ||
	    path_starts(vma, "[anon:"))
		return classify_anon(pid, vma, dv);
	if (vma->path[0] == '[') {
		pr_err("task %d: unknown special mapping %s at %lx-%lx\n", pid, vma->path,
		       vma->start, vma->end);
		return -ENOTSUP;
	}
	return classify_file(pid, vma, ve);
}

/*
 * A private mapping the kernel does not account (read-only file text, PROT_NONE guards):
 * restore must not make it writable, or it gains VM_ACCOUNT and merges with neighbours.
 */
static bool not_accountable(const struct proc_vma *vma, const VmaEntry *ve)
{
	bool private_regular = (ve->status & VMA_AREA_REGULAR) &&
			       (ve->status & (VMA_ANON_PRIVATE | VMA_FILE_PRIVATE)) &&
			       !(ve->status & (VMA_AREA_VDSO | VMA_AREA_VVAR));

	return private_regular && !(vma->vmflags & VMFLAG_ACCOUNT);
}

/*
 * hugetlb memory (anonymous, SysV, memfd): MAP_HUGETLB and the page size (its log2 in the
 * bits from MAP_HUGE_SHIFT), as CRIU keeps them in vma_entry.flags; the page size is the
 * block size of the hugetlbfs file the VMA maps.
 */
static int hugetlb_map_flags(pid_t pid, const struct proc_vma *vma, uint32_t *flags)
{
	struct statfs sfs;
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, vma->start, vma->end);
	if (statfs(path, &sfs)) {
		int err = errno;

		pr_perror("task %d: hugetlb VMA %lx-%lx: cannot read its page size", pid,
			  vma->start, vma->end);
		return -err;
	}
	if (sfs.f_bsize < (long)PAGE_SIZE || (sfs.f_bsize & (sfs.f_bsize - 1))) {
		pr_err("task %d: hugetlb VMA %lx-%lx has pages of %ld bytes\n", pid, vma->start,
		       vma->end, (long)sfs.f_bsize);
		return -EINVAL;
	}
	*flags = MAP_HUGETLB | (uint32_t)__builtin_ctzl(sfs.f_bsize) << MAP_HUGE_SHIFT;
	return 0;
}

static int fill_dump_vma(pid_t pid, const struct proc_vma *vma, struct dump_vma *dv)
{
	VmaEntry *ve = &dv->e;
	int ret;

	vma_entry__init(ve);
	ve->start = vma->start;
	ve->end = vma->end;
	ve->pgoff = vma->pgoff;
	ve->prot = vma->prot;
	ve->fd = -1;
	ret = classify_vma(pid, vma, dv);
	if (ret)
		return ret;
	if (vma->vmflags & VMFLAG_GROWSDOWN)
		ve->flags |= MAP_GROWSDOWN;
	if (vma->vmflags & VMFLAG_NORESERVE)
		ve->flags |= MAP_NORESERVE;
	if (vma->vmflags & VMFLAG_HUGETLB) {
		uint32_t huge = 0;

		ret = hugetlb_map_flags(pid, vma, &huge);
		if (ret)
			return ret;
		ve->flags |= huge;
	}
	/* A mapping type of its own, private anonymous memory otherwise (but not dumped). */
	if (vma->vmflags & VMFLAG_DROPPABLE)
		ve->flags = (ve->flags & ~MAP_TYPE) | MAP_DROPPABLE;
	if (not_accountable(vma, ve))
		ve->status |= VMA_AREA_NOT_ACCOUNTABLE;
	dv->locked = vma->vmflags & VMFLAG_LOCKED;
	ve->madv = vma_madv_bits(vma->vmflags);
	ve->has_madv = ve->madv != 0;
	pr_debug("task %d: vma %lx-%lx prot %x flags %x status %#x pgoff %lx shmid %#llx %s\n",
		 pid, vma->start, vma->end, ve->prot, ve->flags, ve->status, vma->pgoff,
		 (unsigned long long)ve->shmid, vma->path);
	return 0;
}

/*
 * [vvar] and [vvar_vclock] (6.13+ kernels) are one VMA_AREA_VVAR entry in CRIU's format:
 * the vclock pages right after [vvar]. Anything else is a layout restore cannot rebuild.
 */
static int merge_vvar_vclock(pid_t pid, const struct proc_vma *vma, struct dump_vma *dvmas,
			     unsigned int nr)
{
	VmaEntry *prev = nr ? &dvmas[nr - 1].e : NULL;

	if (!prev || !(prev->status & VMA_AREA_VVAR) || prev->end != vma->start) {
		pr_err("task %d: [vvar_vclock] at %lx-%lx does not follow [vvar]\n", pid,
		       vma->start, vma->end);
		return -ENOTSUP;
	}
	prev->end = vma->end;
	return 0;
}

/* Every VMA of the task as the image holds it; *nr_out may be below nr_vmas. */
static int collect_dump_vmas(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas,
			     struct dump_vma *dvmas, unsigned int *nr_out)
{
	unsigned int i, nr = 0;
	int ret = 0;

	for (i = 0; i < nr_vmas && !ret; i++) {
		if (path_is(&vmas[i], "[vvar_vclock]")) {
			ret = merge_vvar_vclock(pid, &vmas[i], dvmas, nr);
			continue;
		}
		ret = fill_dump_vma(pid, &vmas[i], &dvmas[nr]);
		nr++;
	}
	*nr_out = nr;
	return ret;
}

static void free_dump_vmas(struct dump_vma *dvmas, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		free(dvmas[i].anon_name);
	free(dvmas);
}

/* ------------------------------------------------------------ mm images ---- */

static int fill_mm_fields(pid_t pid, const struct task_mm_misc *misc, MmEntry *mm,
			  uint64_t *auxv, unsigned int *nr_auxv)
{
	struct proc_pid_stat st;
	int ret;

	ret = parse_pid_stat(pid, &st);
	if (ret)
		return ret;
	mm->mm_start_code = st.start_code;
	mm->mm_end_code = st.end_code;
	mm->mm_start_stack = st.start_stack;
	mm->mm_start_data = st.start_data;
	mm->mm_end_data = st.end_data;
	mm->mm_start_brk = st.start_brk;
	mm->mm_brk = misc->brk;
	mm->mm_arg_start = st.arg_start;
	mm->mm_arg_end = st.arg_end;
	mm->mm_env_start = st.env_start;
	mm->mm_env_end = st.env_end;
	mm->has_dumpable = true;
	mm->dumpable = misc->dumpable;
	mm->has_thp_disabled = true;
	mm->thp_disabled = misc->thp_disabled;

	ret = parse_pid_auxv(pid, auxv, nr_auxv);
	if (ret)
		return ret;
	/*
	 * Without the AT_NULL pair, as CRIU stores it (its restore refuses more words than its
	 * AT_VECTOR_SIZE); PR_SET_MM_MAP ends the vector with AT_NULL itself.
	 */
	*nr_auxv -= 2;
	mm->mm_saved_auxv = auxv;
	mm->n_mm_saved_auxv = *nr_auxv;
	return dump_exe_file(pid, &mm->exe_file_id);
}

/* The ring's header at the context's address: how many events it holds (fs/aio.c). */
#define AIO_RING_HEADER 32
#define AIO_EVENT_SIZE 32

/*
 * The request count io_setup() takes that gives a ring of this length again: the kernel
 * raises what it is asked for to 4 per possible CPU, doubles it, adds 2 and rounds the ring
 * up to pages, so (events the ring's pages hold - 2) / 2 comes back to the same pages.
 */
static uint32_t aio_nr_req(uint64_t ring_len)
{
	return ((ring_len - AIO_RING_HEADER) / AIO_EVENT_SIZE - 2) / 2;
}

/* mm's aios: one per AIO ring VMA, its id the context's (the ring's address). */
static int collect_aio_rings(pid_t pid, const struct dump_vma *dvmas, unsigned int nr, MmEntry *mm)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		const VmaEntry *ve = &dvmas[i].e;
		AioRingEntry *a, **grown;

		if (!(ve->status & VMA_AREA_AIORING))
			continue;
		grown = realloc(mm->aios, (mm->n_aios + 1) * sizeof(*grown));
		a = malloc(sizeof(*a));
		if (grown)
			mm->aios = grown;
		if (!grown || !a) {
			free(a);
			pr_err("task %d: no memory for its AIO rings\n", pid);
			return -ENOMEM;
		}
		aio_ring_entry__init(a);
		a->id = ve->start;
		a->ring_len = ve->end - ve->start;
		a->nr_req = aio_nr_req(a->ring_len);
		mm->aios[mm->n_aios++] = a;
	}
	return 0;
}

static void free_aio_rings(MmEntry *mm)
{
	for (size_t i = 0; i < mm->n_aios; i++)
		free(mm->aios[i]);
	free(mm->aios);
	mm->aios = NULL;
	mm->n_aios = 0;
}

static int write_mm_image(pid_t pid, const struct task_mm_misc *misc, struct dump_vma *dvmas,
			  unsigned int nr)
{
	uint64_t auxv[PROC_AUXV_MAX_WORDS];
	MmEntry mm = MM_ENTRY__INIT;
	unsigned int nr_auxv = 0, i;
	VmaEntry **ptrs, **grown, *guards;
	struct cr_img *img;
	size_t nr_guards;
	int ret;

	ret = fill_mm_fields(pid, misc, &mm, auxv, &nr_auxv);
	if (ret)
		return ret;
	ptrs = calloc(nr + 1, sizeof(*ptrs));
	if (!ptrs) {
		pr_err("no memory for the VMA list of %d\n", pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++)
		ptrs[i] = &dvmas[i].e;
	ret = guard_regions_dump(pid, ptrs, nr, &guards, &nr_guards);
	grown = ret ? NULL : realloc(ptrs, (nr + nr_guards + 1) * sizeof(*ptrs));
	if (!grown) {
		if (!ret)
			pr_err("no memory for the guard regions of %d\n", pid);
		free(ptrs);
		free(guards);
		return ret ?: -ENOMEM;
	}
	ptrs = grown;
	/* After the VMAs, as CRIU lists them. */
	for (i = 0; i < nr_guards; i++)
		ptrs[nr + i] = &guards[i];
	mm.vmas = ptrs;
	mm.n_vmas = nr + nr_guards;
	ret = collect_aio_rings(pid, dvmas, nr, &mm);
	if (ret) {
		free_aio_rings(&mm);
		free(ptrs);
		free(guards);
		return ret;
	}

	img = open_image(CR_IMG_MM, O_WRONLY, pidns_img_pid(pid));
	ret = img ? pb_write_one(img, &mm) : -EIO;
	close_image(img);
	free_aio_rings(&mm);
	free(ptrs);
	free(guards);
	return ret;
}

/* mm-ext-PID.img: only when some VMA has a name or is locked (none: no image). */
static int write_mm_ext_image(pid_t pid, const struct dump_vma *dvmas, unsigned int nr)
{
	CrMmExtEntry ext = CR_MM_EXT_ENTRY__INIT;
	CrVmaExtEntry *entries, **ptrs;
	struct cr_img *img;
	unsigned int i;
	int ret;

	entries = calloc(nr ? nr : 1, sizeof(*entries));
	ptrs = calloc(nr ? nr : 1, sizeof(*ptrs));
	if (!entries || !ptrs) {
		free(entries);
		free(ptrs);
		pr_err("no memory for the VMA state of %d\n", pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		CrVmaExtEntry *ve = &entries[ext.n_vmas];

		if (!dvmas[i].anon_name && !dvmas[i].locked)
			continue;
		cr_vma_ext_entry__init(ve);
		ve->start = dvmas[i].e.start;
		ve->anon_name = dvmas[i].anon_name;
		ve->has_locked = dvmas[i].locked;
		ve->locked = dvmas[i].locked;
		ptrs[ext.n_vmas++] = ve;
	}
	ext.vmas = ptrs;
	ret = 0;
	if (ext.n_vmas) {
		img = open_image(CR_IMG_MM_EXT, O_WRONLY, pidns_img_pid(pid));
		ret = img ? pb_write_one(img, &ext) : -EIO;
		close_image(img);
	}
	free(entries);
	free(ptrs);
	return ret;
}

/* ----------------------------------------------------------------- pages ---- */

/*
 * Where pages go: runs recorded in a pagemap image, their data through a page_xfer ring
 * to its pages image. Pages are read from the task's memory (pid) for private memory (at
 * their address), from src_fd, the object itself, for shared memory (at their offset).
 */
struct page_writer {
	const char *what; /* for messages: "task 123", "shared memory 0x1a2b" */
	pid_t pid; /* the task whose private pages are read; 0 for shared memory */
	int src_fd; /* /proc/PID/mem, or the shared memory object */
	struct page_xfer xfer; /* into the images directory, or to the page server */
	struct mem_dump_stats *stats;
	bool shmem; /* a shared memory object: its pages count as shpages */
	struct mem_lazy_task *lazy; /* dump --lazy-pages: where PE_LAZY runs are noted */
	/*
	 * With the task's parasite: entries and pages go through its pipes (page-splice.h),
	 * the pages of splice_vma's VMA at least; other pages (a VMA vmsplice cannot take)
	 * through the ring, once what is queued there is out.
	 */
	struct page_splice *splice;
	bool splice_vma;
};

/* Into pages-pages_id.img, counted in stats (the dump's, or a task's own: mem_task_dump). */
static int open_page_writer(struct page_writer *pw, enum cr_img_type map_type, unsigned long map_id,
			    const struct mem_dump_ctx *ctx, uint32_t pages_id,
			    struct mem_dump_stats *stats)
{
	pw->stats = stats;
	/* A pre-dump's pagemap (protect) stays here too: the next dump reads it. */
	return page_xfer_open(&pw->xfer, ctx->page_server_sk, map_type, map_id, pages_id,
			      ctx->protect ? PAGE_XFER_KEEP_PAGEMAP : 0);
}

static void close_page_writer(struct page_writer *pw)
{
	if (pw->stats)
		pw->stats->write_us += pw->xfer.write_us;
	page_xfer_close(&pw->xfer);
}

static int flush_pages(struct page_writer *pw)
{
	return page_xfer_flush(&pw->xfer);
}

/*
 * Up to len bytes at src_off into buf. A task's pages with process_vm_readv, one copy;
 * what it cannot read (a VMA without PROT_READ) through /proc/PID/mem, which may.
 */
static ssize_t read_source(struct page_writer *pw, char *buf, size_t len, uint64_t src_off)
{
	if (pw->pid) {
		struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)src_off, len };
		ssize_t got = process_vm_readv(pw->pid, &local, 1, &remote, 1, 0);

		if (got > 0)
			return got;
	}
	return pread(pw->src_fd, buf, len, src_off);
}

/* What copy_pages() has left to read. */
struct page_copy {
	struct page_writer *pw;
	uint64_t src_off;
	size_t left;
};

static ssize_t fill_from_source(void *arg, char *buf, size_t len)
{
	struct page_copy *copy = arg;
	ssize_t got = read_source(copy->pw, buf, len, copy->src_off);

	/* A memfd's size need not be a page multiple: its last page ends in zeros. */
	if (got == 0 && copy->pw->shmem && copy->left < PAGE_SIZE) {
		memset(buf, 0, len);
		got = len;
	}
	if (got <= 0) {
		int err = got < 0 ? errno : EIO;

		pr_err("%s: cannot read memory at %llx: %s\n", copy->pw->what,
		       (unsigned long long)copy->src_off, strerror(err));
		return -err;
	}
	copy->src_off += got;
	copy->left -= got;
	return got;
}

static int copy_pages(struct page_writer *pw, uint64_t src_off, size_t len)
{
	struct page_copy copy = { .pw = pw, .src_off = src_off, .left = len };

	return page_xfer_fill(&pw->xfer, len, fill_from_source, &copy);
}

/* A pagemap entry without pages, in order with the runs queued before it. */
static int write_entry(struct page_writer *pw, uint64_t vaddr, unsigned long nr_pages,
		       uint32_t flags)
{
	if (pw->splice)
		return page_splice_entry(pw->splice, vaddr, nr_pages, flags);
	return page_xfer_entry(&pw->xfer, vaddr, nr_pages, flags);
}

/* An entry and its pages, read from src_off of the source into the ring. */
static int copy_page_run(struct page_writer *pw, uint64_t vaddr, uint64_t src_off,
			 unsigned long nr_pages)
{
	int ret = pw->splice ? page_splice_drain(pw->splice) : 0;

	if (!ret)
		ret = page_xfer_entry(&pw->xfer, vaddr, nr_pages, PE_PRESENT);
	return ret ? ret : copy_pages(pw, src_off, nr_pages * PAGE_SIZE);
}

/* A run of nr_pages stored pages at vaddr, read from src_off of the source. */
static int dump_page_run(struct page_writer *pw, uint64_t vaddr, uint64_t src_off,
			 unsigned long nr_pages)
{
	int ret;

	if (pw->splice && pw->splice_vma)
		ret = page_splice_entry(pw->splice, vaddr, nr_pages, PE_PRESENT);
	else
		ret = copy_page_run(pw, vaddr, src_off, nr_pages);
	if (!ret && pw->shmem)
		pw->stats->shpages_written += nr_pages;
	else if (!ret)
		pw->stats->pages_written += nr_pages;
	return ret;
}

/*
 * The kernel's shared zero page backs anonymous memory that was only read: it is
 * present in pagemap but holds nothing worth storing. Its PFN is learnt by reading a
 * fresh page of our own; 0 when PFNs are hidden (no CAP_SYS_ADMIN), then no skipping.
 */
static uint64_t find_zero_page_pfn(void)
{
	uint64_t entry = 0;
	volatile char *page;
	int fd;

	page = mmap(NULL, PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 0;
	(void)page[0];
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (pread(fd, &entry, sizeof(entry), (unsigned long)page / PAGE_SIZE * 8) !=
		    sizeof(entry))
			entry = 0;
		close(fd);
	}
	munmap((void *)page, PAGE_SIZE);
	return (entry & PME_PRESENT) ? entry & PME_PFN_MASK : 0;
}

static bool page_worth_storing(uint64_t pme, bool anon_only, uint64_t zero_pfn)
{
	if (pme & PME_GUARD)
		return false;
	if (pme & PME_SWAPPED)
		return !anon_only || !(pme & PME_FILE_OR_SHARED);
	if (!(pme & PME_PRESENT))
		return false;
	if (anon_only && (pme & PME_FILE_OR_SHARED))
		return false;
	return !zero_pfn || (pme & PME_PFN_MASK) != zero_pfn;
}

/*
 * A COW'ed page of a private file mapping that was never writable (no VM_ACCOUNT) can
 * only come from ptrace pokes, e.g. compel's syscall instruction, put back since. When it
 * equals the file it need not be stored; storing it would make restore map the VMA
 * writable, which gives it VM_ACCOUNT and lets the kernel merge it with a neighbour.
 */
static bool page_equals_file(struct page_writer *pw, int file_fd, const VmaEntry *ve,
			     unsigned long addr)
{
	char mem_page[PAGE_SIZE], file_page[PAGE_SIZE]; /* on the stack: tasks run in parallel */
	ssize_t got;

	if (pread(pw->src_fd, mem_page, PAGE_SIZE, addr) != PAGE_SIZE)
		return false;
	got = pread(file_fd, file_page, PAGE_SIZE, ve->pgoff + (addr - ve->start));
	if (got < 0)
		return false;
	/* Past the end of the file the mapping reads as zeros. */
	memset(file_page + got, 0, PAGE_SIZE - got);
	return memcmp(mem_page, file_page, PAGE_SIZE) == 0;
}

static int open_map_files(pid_t pid, const VmaEntry *ve, int flags)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, (unsigned long)ve->start,
		 (unsigned long)ve->end);
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	return fd;
}

/* What the task's private pages of one VMA need while its pagemap is walked. */
struct private_scan {
	pid_t pid;
	int pagemap_fd;
	uint64_t *pmes;
	uint64_t zero_pfn;
	int file_fd; /* the mapped file, to compare COW'ed pages of unaccounted VMAs; or -1 */
	bool lazy_vma; /* dump --lazy-pages, a VMA restore leaves to the lazy-pages daemon */
	const struct mem_dump_ctx *ctx;
	/* With a parent images directory: its runs of this task, and what was written since. */
	struct page_map parent;
	bool has_parent;
	unsigned int parent_cursor; /* parent_holds(): the run looked at last */
	struct mem_written written; /* of the VMA being walked */
	struct page_dedup dedup; /* --auto-dedup: holes in the parent's pages images */
};

/* How one page is dumped (PAGE_FAILED: logged, the dump fails). */
enum page_kind { PAGE_SKIP, PAGE_STORE, PAGE_IN_PARENT, PAGE_LAZY, PAGE_FAILED };

/* Whether the parent images hold the page at addr; addresses come in increasing order. */
static bool parent_holds(struct private_scan *scan, uint64_t addr)
{
	const struct page_map *parent = &scan->parent;

	while (scan->parent_cursor < parent->nr_runs &&
	       parent->runs[scan->parent_cursor].vaddr + parent->runs[scan->parent_cursor].len <= addr)
		scan->parent_cursor++;
	return scan->parent_cursor < parent->nr_runs &&
	       parent->runs[scan->parent_cursor].vaddr <= addr;
}

/*
 * A page worth storing that was not written since the parent images stored it is only
 * named there (PE_PARENT). [vdso] pages are always stored: CRIU's restore reads them.
 */
static enum page_kind page_kind(struct page_writer *pw, struct private_scan *scan,
				const VmaEntry *ve, uint64_t addr, uint64_t pme)
{
	bool anon_only = ve->status & VMA_FILE_PRIVATE;

	/*
	 * Every page of [vdso], present or not: a forked child has none mapped yet. Every
	 * page of an AIO ring: restore copies the whole ring (its events, head and tail).
	 */
	if (ve->status & (VMA_AREA_VDSO | VMA_AREA_AIORING))
		return PAGE_STORE;
	if (!page_worth_storing(pme, anon_only, scan->zero_pfn) ||
	    (scan->file_fd >= 0 && page_equals_file(pw, scan->file_fd, ve, addr)))
		return PAGE_SKIP;
	/* dump --lazy-pages has no parent images (refused): the page stays in the tree. */
	if (scan->lazy_vma)
		return PAGE_LAZY;
	if (!scan->has_parent || !parent_holds(scan, addr))
		return PAGE_STORE;
	if (!mem_written_has(&scan->written, addr))
		return PAGE_IN_PARENT;
	/* Stored again: the parent's copy, at the run parent_holds() found, is never read. */
	if (scan->ctx->auto_dedup &&
	    page_dedup_add(&scan->dedup, &scan->parent.runs[scan->parent_cursor], addr, PAGE_SIZE))
		return PAGE_FAILED;
	return PAGE_STORE;
}

/* A run of nr_pages at vaddr that the parent images hold. */
static int dump_parent_run(struct page_writer *pw, uint64_t vaddr, unsigned long nr_pages)
{
	int ret = write_entry(pw, vaddr, nr_pages, PE_PARENT);

	if (!ret)
		pw->stats->pages_in_parent += nr_pages;
	return ret;
}

/* A run of nr_pages at vaddr left in the frozen tree for the lazy-pages daemon. */
static int dump_lazy_run(struct page_writer *pw, uint64_t vaddr, unsigned long nr_pages)
{
	int ret = write_entry(pw, vaddr, nr_pages, PE_LAZY);

	if (!ret)
		ret = mem_lazy_add_run(pw->lazy, vaddr, nr_pages);
	if (!ret)
		pw->stats->pages_lazy += nr_pages;
	return ret;
}

static int dump_run(struct page_writer *pw, enum page_kind kind, uint64_t vaddr,
		    unsigned long nr_pages)
{
	if (!nr_pages || kind == PAGE_SKIP)
		return 0;
	if (kind == PAGE_IN_PARENT)
		return dump_parent_run(pw, vaddr, nr_pages);
	if (kind == PAGE_LAZY)
		return dump_lazy_run(pw, vaddr, nr_pages);
	return dump_page_run(pw, vaddr, vaddr, nr_pages);
}

/* Pages written since the last pre-dump (and, pre-dumping, protect them again). */
static int scan_written(struct private_scan *scan, const VmaEntry *ve)
{
	const struct mem_dump_ctx *ctx = scan->ctx;

	mem_written_free(&scan->written);
	if (!scan->has_parent && !ctx->protect)
		return 0;
	return mem_track_scan(scan->pagemap_fd, ve->start, ve->end, ctx->protect, &scan->written);
}

/*
 * Private mappings: walk pagemap and store runs of present/swapped pages; in
 * file-backed ones only anonymous (COW'ed) pages, the rest is in the file.
 */
static int dump_private_vma_pages(struct page_writer *pw, struct private_scan *scan,
				  const VmaEntry *ve)
{
	unsigned long run_start = 0, nr_run = 0, addr = ve->start;
	enum page_kind run_kind = PAGE_SKIP;
	int ret = scan_written(scan, ve);

	while (addr < ve->end && !ret) {
		unsigned long nr = (ve->end - addr) / PAGE_SIZE, i;
		ssize_t got;

		if (nr > PAGEMAP_BATCH)
			nr = PAGEMAP_BATCH;
		got = pread(scan->pagemap_fd, scan->pmes, nr * sizeof(uint64_t),
			    addr / PAGE_SIZE * sizeof(uint64_t));
		if (got != (ssize_t)(nr * sizeof(uint64_t))) {
			pr_err("task %d: cannot read pagemap at %lx: %s\n", scan->pid, addr,
			       got < 0 ? strerror(errno) : "short read");
			return got < 0 ? -errno : -EIO;
		}
		for (i = 0; i < nr && !ret; i++, addr += PAGE_SIZE) {
			enum page_kind kind = page_kind(pw, scan, ve, addr, scan->pmes[i]);

			if (kind == PAGE_FAILED)
				return -EIO;
			if (kind == run_kind) {
				nr_run++;
				continue;
			}
			ret = dump_run(pw, run_kind, run_start, nr_run);
			run_kind = kind;
			run_start = addr;
			nr_run = 1;
		}
	}
	pw->stats->pages_scanned += (ve->end - ve->start) / PAGE_SIZE;
	if (!ret)
		ret = dump_run(pw, run_kind, run_start, nr_run);
	return ret;
}

/*
 * [vdso] too: CRIU's restore checks the dumped vDSO against its own from these pages (ours
 * skips them, the kernel provides the vDSO). [vvar] is never read. Nor is MAP_DROPPABLE
 * memory, which the kernel may free at any time: its program keeps nothing there it cannot
 * lose, and it comes back empty, as it does from CRIU.
 */
static bool vma_has_private_pages(const VmaEntry *ve)
{
	if (ve->status & VMA_AREA_AIORING)
		return true;
	return (ve->status & VMA_AREA_REGULAR) &&
	       (ve->status & (VMA_ANON_PRIVATE | VMA_FILE_PRIVATE)) &&
	       !(ve->status & (VMA_AREA_VVAR | VMA_EXT_PLUGIN)) &&
	       (ve->flags & MAP_TYPE) != MAP_DROPPABLE;
}

/* The VMA as restore will see it: whether restore --lazy-pages leaves it to the daemon. */
static bool dump_vma_is_lazy(const struct dump_vma *dv)
{
	const VmaEntry *ve = &dv->e;
	struct vma_image vma = { .start = ve->start, .end = ve->end, .madv = ve->madv,
				 .prot = ve->prot, .flags = ve->flags, .status = ve->status,
				 .locked = dv->locked };

	return vma_is_lazy(&vma);
}

/*
 * Whether vmsplice() can take the VMA's pages: not without PROT_READ (GUP fails); [vdso]
 * and AIO rings, special mappings whose every page is stored, keep the ring.
 */
static bool vma_splices(const VmaEntry *ve)
{
	return (ve->prot & PROT_READ) && !(ve->status & (VMA_AREA_VDSO | VMA_AREA_AIORING));
}

static int scan_private_vmas(struct page_writer *pw, struct private_scan *scan,
			     const struct dump_vma *dvmas, unsigned int nr)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < nr && !ret; i++) {
		const VmaEntry *ve = &dvmas[i].e;

		if (!vma_has_private_pages(ve))
			continue;
		scan->lazy_vma = pw->lazy && dump_vma_is_lazy(&dvmas[i]);
		pw->splice_vma = vma_splices(ve);
		scan->file_fd = -1;
		if ((ve->status & VMA_FILE_PRIVATE) && (ve->status & VMA_AREA_NOT_ACCOUNTABLE))
			scan->file_fd = open_map_files(scan->pid, ve, O_RDONLY);
		ret = dump_private_vma_pages(pw, scan, ve);
		if (scan->file_fd >= 0)
			close(scan->file_fd);
	}
	return ret;
}

/* One task's memory dump, between mem_dump_task_begin() and mem_dump_task_end(). */
struct mem_task_dump {
	pid_t pid;
	struct dump_vma *dvmas;
	unsigned int nr, nr_alloc;
	const struct mem_dump_ctx *ctx; /* only read by mem_dump_task_pages() */
	struct compel_ctl *parasite;
	uint32_t pages_id;
	struct mem_lazy_task *lazy;
	struct mem_dump_stats stats; /* the private pages', added to the dump's at the end */
};

/*
 * The parent's runs of this task: none when the parent images have no pagemap of it (a
 * task born since), then every page is stored.
 */
static int read_parent_pagemap(pid_t pid, struct private_scan *scan)
{
	int dir_fd = images_chain_dir(1), ret;
	char name[64];

	if (dir_fd < 0)
		return dir_fd;
	img_name(CR_IMG_PAGEMAP, pidns_img_pid(pid), name, sizeof(name));
	ret = faccessat(dir_fd, name, F_OK, 0);
	close(dir_fd);
	if (ret) {
		pr_info("task %d: no %s in the parent images: every page is stored\n", pid, name);
		return 0;
	}
	scan->has_parent = true;
	return page_map_read_parent(CR_IMG_PAGEMAP, pidns_img_pid(pid), &scan->parent);
}

/* The private pages of d's task: only d is written to, so tasks may run in parallel. */
static int dump_private_pages(struct mem_task_dump *d)
{
	const struct mem_dump_ctx *ctx = d->ctx;
	pid_t pid = d->pid;
	struct private_scan scan = { .pid = pid, .pagemap_fd = -1, .zero_pfn = find_zero_page_pfn(),
				     .ctx = ctx };
	struct page_writer pw = { .src_fd = -1, .lazy = d->lazy };
	char path[64], what[32];
	int ret = 0;

	page_dedup_init(&scan.dedup, &scan.parent);
	snprintf(what, sizeof(what), "task %d", pid);
	pw.what = what;
	pw.pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	pw.src_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	scan.pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	scan.pmes = malloc(PAGEMAP_BATCH * sizeof(*scan.pmes));
	if (pw.src_fd < 0 || scan.pagemap_fd < 0) {
		ret = -errno;
		pr_perror("task %d: cannot open its memory or pagemap", pid);
	} else if (!scan.pmes) {
		ret = -ENOMEM;
		pr_err("no memory for pagemap entries\n");
	} else if (ctx->parent) {
		ret = read_parent_pagemap(pid, &scan);
	}
	if (!ret)
		ret = open_page_writer(&pw, CR_IMG_PAGEMAP, pidns_img_pid(pid), ctx, d->pages_id,
				       &d->stats);
	if (!ret && scan.has_parent && ctx->page_server_sk >= 0 && !pw.xfer.server_has_parent) {
		pr_err("task %d: the page server's parent images hold no pagemap of it (start it "
		       "with --prev-images-dir naming the same images)\n",
		       pid);
		ret = -ENOENT;
	}
	if (!ret && d->parasite)
		ret = page_splice_open(&pw.splice, d->parasite, &pw.xfer);
	if (!ret)
		ret = scan_private_vmas(&pw, &scan, d->dvmas, d->nr);
	if (page_dedup_fini(&scan.dedup) && !ret)
		ret = -EIO;
	if (!ret && pw.splice)
		ret = page_splice_drain(pw.splice);
	if (!ret)
		ret = flush_pages(&pw);
	page_splice_close(pw.splice);
	page_map_free(&scan.parent);
	mem_written_free(&scan.written);
	free(scan.pmes);
	if (scan.pagemap_fd >= 0)
		close(scan.pagemap_fd);
	if (pw.src_fd >= 0)
		close(pw.src_fd);
	close_page_writer(&pw);
	return ret;
}

/* ---------------------------------------------------- shared anonymous memory ---- */

bool shmem_already_dumped(const struct mem_dump_ctx *ctx, uint64_t shmid)
{
	unsigned int i;

	for (i = 0; i < ctx->nr_shmem_dumped; i++)
		if (ctx->shmem_dumped[i] == shmid)
			return true;
	return false;
}

static int note_shmem_dumped(struct mem_dump_ctx *ctx, uint64_t shmid)
{
	uint64_t *grown = realloc(ctx->shmem_dumped, (ctx->nr_shmem_dumped + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("no memory for the list of shared memory objects\n");
		return -ENOMEM;
	}
	ctx->shmem_dumped = grown;
	ctx->shmem_dumped[ctx->nr_shmem_dumped++] = shmid;
	return 0;
}

/*
 * The object's pages, wherever they are (in this task's page tables or not, swapped:
 * swapped-out shmem leaves no pagemap trace): SEEK_DATA/SEEK_HOLE on the object finds
 * every page it holds. Entries are by offset in the object.
 */
static int dump_shmem_data(struct page_writer *pw, off_t size)
{
	off_t data, hole;
	int ret = 0;

	for (data = 0; data < size && !ret; data = hole) {
		data = lseek(pw->src_fd, data, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		hole = data < 0 ? -1 : lseek(pw->src_fd, data, SEEK_HOLE);
		if (data < 0 || hole < 0) {
			ret = -errno;
			pr_perror("%s: SEEK_DATA/SEEK_HOLE", pw->what);
			break;
		}
		if (data >= size)
			break;
		if (hole > size)
			hole = size;
		ret = dump_page_run(pw, data, data, (hole - data + PAGE_SIZE - 1) / PAGE_SIZE);
	}
	pw->stats->shpages_scanned += size / PAGE_SIZE;
	return ret;
}

int dump_shmem_fd(int fd, uint64_t shmid, uint64_t size, const char *what,
		  struct mem_dump_ctx *ctx)
{
	struct page_writer pw = { .src_fd = fd, .shmem = true, .what = what };
	int ret;

	if (shmem_already_dumped(ctx, shmid)) {
		pr_err("%s: another shared memory object of this dump has its id %#llx\n", what,
		       (unsigned long long)shmid);
		return -EEXIST;
	}
	ret = open_page_writer(&pw, CR_IMG_SHMEM_PAGEMAP, shmid, ctx, ctx->next_pages_id++,
			       &ctx->stats);
	if (!ret)
		ret = dump_shmem_data(&pw, size);
	if (!ret)
		ret = flush_pages(&pw);
	if (!ret)
		ret = note_shmem_dumped(ctx, shmid);
	close_page_writer(&pw);
	return ret;
}

/* pagemap-shmem-SHMID.img and its pages, read through the VMA's map_files link. */
static int dump_shmem_object(pid_t pid, const VmaEntry *ve, struct mem_dump_ctx *ctx)
{
	char what[48];
	struct stat st;
	int fd, ret;

	snprintf(what, sizeof(what), "shared memory %#llx", (unsigned long long)ve->shmid);
	fd = open_map_files(pid, ve, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		ret = fd < 0 ? fd : -errno;
		pr_err("task %d: cannot open %s mapped at %llx: %s\n", pid, what,
		       (unsigned long long)ve->start, strerror(-ret));
	} else {
		ret = dump_shmem_fd(fd, ve->shmid, st.st_size, what, ctx);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Each object once per dump, whichever task or VMA maps it first. */
static int dump_shmem_objects(pid_t pid, const struct dump_vma *dvmas, unsigned int nr,
			      struct mem_dump_ctx *ctx)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < nr && !ret; i++) {
		const VmaEntry *ve = &dvmas[i].e;

		/* A SysV segment stays in its IPC namespace (sysv-shm.h). */
		if ((ve->status & VMA_ANON_SHARED) && !(ve->status & VMA_AREA_SYSVIPC) &&
		    !shmem_already_dumped(ctx, ve->shmid))
			ret = dump_shmem_object(pid, ve, ctx);
	}
	return ret;
}

int mem_dump_task_collect(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas,
			  struct mem_task_dump **out)
{
	struct mem_task_dump *d = calloc(1, sizeof(*d));

	*out = d;
	if (d)
		d->dvmas = calloc(nr_vmas ? nr_vmas : 1, sizeof(*d->dvmas));
	if (!d || !d->dvmas) {
		pr_err("no memory for the VMAs of %d\n", pid);
		return -ENOMEM;
	}
	d->pid = pid;
	d->nr_alloc = nr_vmas;
	return collect_dump_vmas(pid, vmas, nr_vmas, d->dvmas, &d->nr);
}

int mem_dump_task_begin(struct mem_task_dump *d, const struct task_mm_misc *misc,
			struct mem_dump_ctx *ctx, struct compel_ctl *parasite)
{
	pid_t pid = d->pid;
	int ret;

	d->ctx = ctx;
	d->parasite = parasite;
	ret = write_mm_image(pid, misc, d->dvmas, d->nr);
	if (!ret)
		ret = write_mm_ext_image(pid, d->dvmas, d->nr);
	if (!ret)
		ret = dump_shmem_objects(pid, d->dvmas, d->nr, ctx);
	if (!ret && ctx->lazy)
		ret = mem_lazy_add_task(ctx, pid, &d->lazy);
	d->pages_id = ctx->next_pages_id++;
	return ret;
}

int mem_dump_task_pages(struct mem_task_dump *d)
{
	return dump_private_pages(d);
}

static void add_stats(struct mem_dump_stats *to, const struct mem_dump_stats *from)
{
	to->pages_scanned += from->pages_scanned;
	to->pages_written += from->pages_written;
	to->pages_in_parent += from->pages_in_parent;
	to->shpages_scanned += from->shpages_scanned;
	to->shpages_written += from->shpages_written;
	to->write_us += from->write_us;
	to->pages_lazy += from->pages_lazy;
}

void mem_dump_task_end(struct mem_task_dump *d, struct mem_dump_ctx *ctx)
{
	if (!d)
		return;
	if (ctx)
		add_stats(&ctx->stats, &d->stats);
	if (d->dvmas)
		free_dump_vmas(d->dvmas, d->nr_alloc);
	free(d);
}

int predump_task_mm(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas,
		    struct mem_dump_ctx *ctx, struct compel_ctl *parasite)
{
	struct mem_task_dump d = { .pid = pid, .ctx = ctx, .parasite = parasite };
	unsigned int i;
	int ret = 0;

	d.dvmas = calloc(nr_vmas ? nr_vmas : 1, sizeof(*d.dvmas));
	if (!d.dvmas) {
		pr_err("no memory for the VMAs of %d\n", pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr_vmas && !ret; i++)
		if (mem_track_vma(&vmas[i]))
			ret = fill_dump_vma(pid, &vmas[i], &d.dvmas[d.nr++]);
	d.pages_id = ctx->next_pages_id++;
	if (!ret)
		ret = dump_private_pages(&d);
	add_stats(&ctx->stats, &d.stats);
	free_dump_vmas(d.dvmas, d.nr);
	return ret;
}
