/*
 * The address space of a seized task: VMAs and mm fields into mm-PID.img, and the
 * pages worth storing (present or swapped, anonymous) into pagemap/pages-PID.img.
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

#include "files.h"
#include "image.h"
#include "log.h"
#include "mem.h"
#include "plugin.h"
#include "proc_parse.h"
#include "vma.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"

#define PAGE_SIZE 4096UL

/* /proc/PID/pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst). */
#define PME_PRESENT (1ULL << 63)
#define PME_SWAPPED (1ULL << 62)
#define PME_FILE_OR_SHARED (1ULL << 61) /* not an anonymous page */
#define PME_PFN_MASK ((1ULL << 55) - 1)

/* Pagemap entries read per pread: 512 KiB of pagemap covers 256 MiB of address space. */
#define PAGEMAP_BATCH 65536
/*
 * Page data go out in writes this big: writing the image is what bounds dump time,
 * and fewer, larger writes keep the page cache path streaming.
 */
#define PAGES_BUF_SIZE (8UL << 20)

/* ------------------------------------------------------------------ VMAs ---- */

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
	uint64_t madv = 0;

	if (vmflags & VMFLAG_DONTFORK)
		madv |= VMA_MADV_DONTFORK;
	if (vmflags & VMFLAG_DONTDUMP)
		madv |= VMA_MADV_DONTDUMP;
	if (vmflags & VMFLAG_HUGEPAGE)
		madv |= VMA_MADV_HUGEPAGE;
	if (vmflags & VMFLAG_NOHUGEPAGE)
		madv |= VMA_MADV_NOHUGEPAGE;
	if (vmflags & VMFLAG_RANDOM)
		madv |= VMA_MADV_RANDOM;
	if (vmflags & VMFLAG_SEQUENTIAL)
		madv |= VMA_MADV_SEQUENTIAL;
	if (vmflags & VMFLAG_WIPEONFORK)
		madv |= VMA_MADV_WIPEONFORK;
	if (vmflags & VMFLAG_MERGEABLE)
		madv |= VMA_MADV_MERGEABLE;
	return madv;
}

/* The kernel's special mappings: recreated by the kernel, never by us, no pages stored. */
static bool classify_special(const struct proc_vma *vma, VmaEntry *ve)
{
	static const struct {
		const char *name;
		uint32_t status;
	} specials[] = {
		{ "[vdso]", VMA_AREA_VDSO },
		{ "[vvar]", VMA_AREA_VVAR },
		{ "[vvar_vclock]", VMA_AREA_VVAR_VCLOCK },
		{ "[vsyscall]", VMA_AREA_VSYSCALL },
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

/*
 * What restore could not reopen by path: a device (a DRM render node, ...) or a memfd
 * (the KFD emulator's buffer objects): only a plugin can re-create the object.
 */
static bool maps_device_object(const struct proc_vma *vma, const struct stat *st)
{
	return !S_ISREG(st->st_mode) || (vma->vmflags & (VMFLAG_IO | VMFLAG_PFNMAP)) ||
	       path_starts(vma, "/memfd:");
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
 * A shared device VMA a plugin takes becomes VMA_DEVICE: no pages are stored (the plugin
 * keeps the contents), and restore maps whatever fd UPDATE_VMA_MAP returns for
 * device_path. Private device mappings, and shared ones nobody takes, are refused.
 */
static int classify_device(pid_t pid, const struct proc_vma *vma, const char *map_path, VmaEntry *ve)
{
	char link[PATH_MAX];
	ssize_t len;
	int ret;

	ret = vma->shared ? offer_device_vma(pid, vma, map_path) : -ENOTSUP;
	if (ret == -ENOTSUP) {
		pr_err("task %d: VMA %lx-%lx maps %s (%x:%x), a device or memfd no plugin takes: it cannot be dumped\n",
		       pid, vma->start, vma->end, vma->path, vma->dev_major, vma->dev_minor);
		return -ENOTSUP;
	}
	if (ret < 0)
		return ret; /* run_plugins() named the plugin */

	len = readlink(map_path, link, sizeof(link) - 1);
	if (len < 0) {
		ret = -errno;
		pr_perror("task %d: cannot read %s", pid, map_path);
		return ret;
	}
	link[len] = '\0';
	ve->device_path = strdup(link);
	if (!ve->device_path) {
		pr_err("task %d: no memory for the path of VMA %lx-%lx\n", pid, vma->start, vma->end);
		return -ENOMEM;
	}
	ve->status = VMA_AREA_REGULAR | VMA_DEVICE;
	ve->flags = MAP_SHARED;
	ve->has_fdflags = true;
	/* Only an object opened for writing can be mapped shared-writable, even later. */
	ve->fdflags = (vma->vmflags & VMFLAG_MAYWRITE) ? O_RDWR : O_RDONLY;
	return 0;
}

static int classify_file(pid_t pid, const struct proc_vma *vma, VmaEntry *ve)
{
	char path[96];
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, vma->start, vma->end);
	if (stat(path, &st)) {
		int err = errno;

		pr_perror("task %d: cannot stat the file mapped at %lx-%lx (%s)", pid, vma->start,
			  vma->end, vma->path);
		return -err;
	}
	if (maps_device_object(vma, &st))
		return classify_device(pid, vma, path, ve);

	ret = dump_mapped_file(pid, vma->start, vma->end, &ve->file_id);
	if (ret)
		return ret;
	ve->has_file_id = true;
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
	return 0;
}

/*
 * Anonymous memory named with prctl(PR_SET_VMA_ANON_NAME) shows as "[anon:NAME]" or, shared,
 * "[anon_shmem:NAME]"; the kernel refuses ']' in names, so NAME is all up to the last
 * character. The name is per VMA (even for shared memory), so each VMA records its own.
 */
static int take_anon_name(pid_t pid, const struct proc_vma *vma, const char *prefix, VmaEntry *ve)
{
	size_t prefix_len = strlen(prefix), path_len = strlen(vma->path);

	if (!path_starts(vma, prefix))
		return 0;
	if (path_len < prefix_len + 1 || vma->path[path_len - 1] != ']') {
		pr_err("task %d: VMA %lx-%lx: cannot parse the anonymous name in %s\n", pid,
		       vma->start, vma->end, vma->path);
		return -EINVAL;
	}
	ve->anon_name = strndup(vma->path + prefix_len, path_len - prefix_len - 1);
	if (!ve->anon_name) {
		pr_err("task %d: no memory for the name of VMA %lx-%lx\n", pid, vma->start, vma->end);
		return -ENOMEM;
	}
	return 0;
}

static int classify_vma(pid_t pid, const struct proc_vma *vma, VmaEntry *ve)
{
	if (classify_special(vma, ve))
		return 0;

	if (vma->shared && (path_is(vma, "/dev/zero (deleted)") || path_starts(vma, "[anon_shmem:"))) {
		/* MAP_SHARED|MAP_ANONYMOUS: a shmem object known by its inode. */
		ve->status = VMA_AREA_REGULAR | VMA_ANON_SHARED;
		ve->flags = MAP_SHARED | MAP_ANONYMOUS;
		ve->has_shmid = true;
		ve->shmid = vma->ino;
		return take_anon_name(pid, vma, "[anon_shmem:", ve);
	}
	if (path_starts(vma, "/SYSV")) {
		pr_err("task %d: VMA %lx-%lx is SysV shared memory, which is not supported yet\n",
		       pid, vma->start, vma->end);
		return -ENOTSUP;
	}
	if (!vma->path[0] || path_is(vma, "[heap]") || path_is(vma, "[stack]") ||
	    path_starts(vma, "[anon:")) {
		if (vma->shared) {
			pr_err("task %d: shared anonymous VMA %lx-%lx without a shmem object\n",
			       pid, vma->start, vma->end);
			return -ENOTSUP;
		}
		ve->status = VMA_AREA_REGULAR | VMA_ANON_PRIVATE;
		ve->flags = MAP_PRIVATE | MAP_ANONYMOUS;
		if (path_is(vma, "[heap]"))
			ve->status |= VMA_AREA_HEAP;
		if (path_is(vma, "[stack]"))
			ve->status |= VMA_AREA_STACK;
		return take_anon_name(pid, vma, "[anon:", ve);
	}
	if (vma->path[0] == '[') {
		pr_err("task %d: unknown special mapping %s at %lx-%lx\n", pid, vma->path,
		       vma->start, vma->end);
		return -ENOTSUP;
	}
	return classify_file(pid, vma, ve);
}

static int fill_vma_entry(pid_t pid, const struct proc_vma *vma, VmaEntry *ve)
{
	int ret;

	vma_entry__init(ve);
	ve->start = vma->start;
	ve->end = vma->end;
	ve->pgoff = vma->pgoff;
	ve->prot = vma->prot;
	ret = classify_vma(pid, vma, ve);
	if (ret)
		return ret;
	if (vma->vmflags & VMFLAG_GROWSDOWN)
		ve->flags |= MAP_GROWSDOWN;
	if (vma->vmflags & VMFLAG_LOCKED)
		ve->status |= VMA_LOCKED;
	if (vma->vmflags & VMFLAG_ACCOUNT)
		ve->status |= VMA_ACCOUNT;
	ve->madv = vma_madv_bits(vma->vmflags);
	ve->has_madv = ve->madv != 0;
	pr_debug("task %d: vma %lx-%lx prot %x flags %x status %#x pgoff %lx %s\n", pid,
		 vma->start, vma->end, ve->prot, ve->flags, ve->status, vma->pgoff, vma->path);
	return 0;
}

/* ------------------------------------------------------------- mm fields ---- */

static int fill_mm_fields(pid_t pid, unsigned long brk, MmEntry *mm, uint64_t *auxv,
			  unsigned int *nr_auxv)
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
	mm->mm_brk = brk;
	mm->mm_arg_start = st.arg_start;
	mm->mm_arg_end = st.arg_end;
	mm->mm_env_start = st.env_start;
	mm->mm_env_end = st.env_end;

	ret = parse_pid_auxv(pid, auxv, nr_auxv);
	if (ret)
		return ret;
	mm->mm_saved_auxv = auxv;
	mm->n_mm_saved_auxv = *nr_auxv;

	ret = dump_exe_file(pid, &mm->exe_file_id);
	if (ret)
		return ret;
	mm->has_exe_file_id = true;
	return 0;
}

static int write_mm_image(pid_t pid, unsigned int nr_vmas, unsigned long brk, VmaEntry *entries)
{
	uint64_t auxv[PROC_AUXV_MAX_WORDS];
	unsigned int nr_auxv = 0, i;
	MmEntry mm = MM_ENTRY__INIT;
	VmaEntry **ptrs;
	struct cr_img *img;
	int ret;

	ret = fill_mm_fields(pid, brk, &mm, auxv, &nr_auxv);
	if (ret)
		return ret;
	ptrs = calloc(nr_vmas, sizeof(*ptrs));
	if (!ptrs) {
		pr_err("no memory for the VMA list of %d\n", pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr_vmas; i++)
		ptrs[i] = &entries[i];
	mm.vmas = ptrs;
	mm.n_vmas = nr_vmas;

	img = open_image(CR_IMG_MM, O_WRONLY, pid);
	if (!img) {
		free(ptrs);
		return -EIO;
	}
	ret = pb_write_one(img, &mm);
	close_image(img);
	free(ptrs);
	return ret;
}

/* ----------------------------------------------------------------- pages ---- */

/* Where pages go: runs recorded in pagemap-PID.img, data batched into big writes. */
struct page_writer {
	pid_t pid;
	int mem_fd; /* /proc/PID/mem: reads PROT_NONE and read-only pages too */
	struct cr_img *pagemap_img;
	struct cr_img *pages_img;
	char *buf;
	size_t buf_used;
	uint64_t next_off; /* file offset of the next page in pages-PID.img */
	struct mem_dump_stats *stats;
};

static int flush_pages(struct page_writer *pw)
{
	int ret;

	if (!pw->buf_used)
		return 0;
	ret = img_write_raw(pw->pages_img, pw->buf, pw->buf_used);
	if (ret)
		return ret;
	pw->buf_used = 0;
	return 0;
}

static int copy_task_memory(struct page_writer *pw, unsigned long vaddr, size_t len)
{
	while (len) {
		size_t room = PAGES_BUF_SIZE - pw->buf_used;
		size_t chunk = len < room ? len : room;
		ssize_t got = pread(pw->mem_fd, pw->buf + pw->buf_used, chunk, vaddr);

		if (got <= 0) {
			int err = got < 0 ? errno : EIO;

			pr_err("task %d: cannot read memory at %lx: %s\n", pw->pid, vaddr,
			       strerror(err));
			return -err;
		}
		pw->buf_used += got;
		vaddr += got;
		len -= got;
		if (pw->buf_used == PAGES_BUF_SIZE) {
			int ret = flush_pages(pw);

			if (ret)
				return ret;
		}
	}
	return 0;
}

static int dump_page_run(struct page_writer *pw, unsigned long vaddr, unsigned long nr_pages)
{
	PagemapEntry pe = PAGEMAP_ENTRY__INIT;
	int ret;

	pe.vaddr = vaddr;
	pe.nr_pages = nr_pages;
	pe.pages_off = pw->next_off;
	ret = pb_write_one(pw->pagemap_img, &pe);
	if (ret)
		return ret;
	ret = copy_task_memory(pw, vaddr, nr_pages * PAGE_SIZE);
	if (ret)
		return ret;
	pw->next_off += nr_pages * PAGE_SIZE;
	pw->stats->pages_written += nr_pages;
	return 0;
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
	static char mem_page[PAGE_SIZE], file_page[PAGE_SIZE];
	ssize_t got;

	if (pread(pw->mem_fd, mem_page, PAGE_SIZE, addr) != PAGE_SIZE)
		return false;
	got = pread(file_fd, file_page, PAGE_SIZE, ve->pgoff + (addr - ve->start));
	if (got < 0)
		return false;
	/* Past the end of the file the mapping reads as zeros. */
	memset(file_page + got, 0, PAGE_SIZE - got);
	return memcmp(mem_page, file_page, PAGE_SIZE) == 0;
}

static int open_mapped_file(pid_t pid, const VmaEntry *ve)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, (unsigned long)ve->start,
		 (unsigned long)ve->end);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/*
 * Private mappings: walk pagemap and store runs of present/swapped pages; in
 * file-backed ones only anonymous (COW'ed) pages, the rest is in the file.
 */
static int dump_private_vma_pages(struct page_writer *pw, int pagemap_fd, const VmaEntry *ve,
				  uint64_t *pmes, uint64_t zero_pfn)
{
	bool anon_only = ve->status & VMA_FILE_PRIVATE;
	unsigned long run_start = 0, nr_run = 0;
	unsigned long addr = ve->start;
	int file_fd = -1, ret = 0;

	if (anon_only && !(ve->status & VMA_ACCOUNT))
		file_fd = open_mapped_file(pw->pid, ve);

	while (addr < ve->end) {
		unsigned long nr = (ve->end - addr) / PAGE_SIZE, i;
		ssize_t got;

		if (nr > PAGEMAP_BATCH)
			nr = PAGEMAP_BATCH;
		got = pread(pagemap_fd, pmes, nr * sizeof(*pmes), addr / PAGE_SIZE * sizeof(*pmes));
		if (got != (ssize_t)(nr * sizeof(*pmes))) {
			pr_err("task %d: cannot read pagemap at %lx: %s\n", pw->pid, addr,
			       got < 0 ? strerror(errno) : "short read");
			ret = got < 0 ? -errno : -EIO;
			goto out;
		}
		for (i = 0; i < nr; i++, addr += PAGE_SIZE) {
			if (page_worth_storing(pmes[i], anon_only, zero_pfn) &&
			    (file_fd < 0 || !page_equals_file(pw, file_fd, ve, addr))) {
				if (!nr_run)
					run_start = addr;
				nr_run++;
				continue;
			}
			if (nr_run) {
				ret = dump_page_run(pw, run_start, nr_run);
				if (ret)
					goto out;
				nr_run = 0;
			}
		}
	}
	pw->stats->pages_scanned += (ve->end - ve->start) / PAGE_SIZE;
	if (nr_run)
		ret = dump_page_run(pw, run_start, nr_run);
out:
	if (file_fd >= 0)
		close(file_fd);
	return ret;
}

/*
 * Shared anonymous memory: the pages are those of the shmem object, whether this task
 * has them mapped in its page tables or not (swapped-out shmem leaves no pagemap
 * trace). SEEK_DATA/SEEK_HOLE on the object through map_files finds them.
 */
static int dump_shared_anon_pages(struct page_writer *pw, const VmaEntry *ve)
{
	off_t obj_start = ve->pgoff, obj_end = ve->pgoff + (ve->end - ve->start);
	off_t data, hole;
	char path[96];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pw->pid,
		 (unsigned long)ve->start, (unsigned long)ve->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		pr_perror("task %d: cannot open shared memory %s", pw->pid, path);
		return -err;
	}
	for (data = obj_start; data < obj_end; data = hole) {
		data = lseek(fd, data, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			ret = -errno;
			pr_perror("task %d: SEEK_DATA in %s", pw->pid, path);
			break;
		}
		if (data >= obj_end)
			break;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0) {
			ret = -errno;
			pr_perror("task %d: SEEK_HOLE in %s", pw->pid, path);
			break;
		}
		if (hole > obj_end)
			hole = obj_end;
		ret = dump_page_run(pw, ve->start + (data - obj_start), (hole - data) / PAGE_SIZE);
		if (ret)
			break;
	}
	close(fd);
	pw->stats->pages_scanned += (ve->end - ve->start) / PAGE_SIZE;
	return ret;
}

static int open_page_writer(struct page_writer *pw, pid_t pid, struct mem_dump_stats *stats)
{
	PagemapHead head = PAGEMAP_HEAD__INIT;
	char path[64];

	memset(pw, 0, sizeof(*pw));
	pw->pid = pid;
	pw->mem_fd = -1;
	pw->stats = stats;
	pw->next_off = PAGES_IMG_HDR_SIZE;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	pw->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pw->mem_fd < 0) {
		int err = errno;

		pr_perror("cannot open %s", path);
		return -err;
	}
	pw->buf = malloc(PAGES_BUF_SIZE);
	if (!pw->buf) {
		pr_err("no memory for the page buffer\n");
		return -ENOMEM;
	}
	pw->pagemap_img = open_image(CR_IMG_PAGEMAP, O_WRONLY, pid);
	if (!pw->pagemap_img)
		return -EIO;
	pw->pages_img = open_image(CR_IMG_PAGES, O_WRONLY, pid);
	if (!pw->pages_img)
		return -EIO;
	head.pages_id = pid;
	return pb_write_one(pw->pagemap_img, &head);
}

static void close_page_writer(struct page_writer *pw)
{
	if (pw->pages_img)
		close_image(pw->pages_img);
	if (pw->pagemap_img)
		close_image(pw->pagemap_img);
	free(pw->buf);
	if (pw->mem_fd >= 0)
		close(pw->mem_fd);
}

static bool vma_has_pages(const VmaEntry *ve)
{
	return (ve->status & VMA_AREA_REGULAR) &&
	       (ve->status & (VMA_ANON_PRIVATE | VMA_ANON_SHARED | VMA_FILE_PRIVATE));
}

static int dump_pages(pid_t pid, const VmaEntry *entries, unsigned int nr_vmas,
		      struct mem_dump_stats *stats)
{
	uint64_t zero_pfn = find_zero_page_pfn();
	struct page_writer pw;
	uint64_t *pmes = NULL;
	char path[64];
	int pagemap_fd = -1, ret;
	unsigned int i;

	ret = open_page_writer(&pw, pid, stats);
	if (ret)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0) {
		ret = -errno;
		pr_perror("cannot open %s", path);
		goto out;
	}
	pmes = malloc(PAGEMAP_BATCH * sizeof(*pmes));
	if (!pmes) {
		ret = -ENOMEM;
		pr_err("no memory for pagemap entries\n");
		goto out;
	}
	for (i = 0; i < nr_vmas && !ret; i++) {
		if (!vma_has_pages(&entries[i]))
			continue;
		if (entries[i].status & VMA_ANON_SHARED)
			ret = dump_shared_anon_pages(&pw, &entries[i]);
		else
			ret = dump_private_vma_pages(&pw, pagemap_fd, &entries[i], pmes, zero_pfn);
	}
	if (!ret)
		ret = flush_pages(&pw);
out:
	free(pmes);
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	close_page_writer(&pw);
	return ret;
}

int dump_task_mm(pid_t pid, const struct proc_vma *vmas, unsigned int nr_vmas, unsigned long brk,
		 struct mem_dump_stats *stats)
{
	VmaEntry *entries;
	unsigned int i;
	int ret = 0;

	entries = calloc(nr_vmas ? nr_vmas : 1, sizeof(*entries));
	if (!entries) {
		pr_err("no memory for the VMAs of %d\n", pid);
		return -ENOMEM;
	}
	for (i = 0; i < nr_vmas && !ret; i++)
		ret = fill_vma_entry(pid, &vmas[i], &entries[i]);
	if (!ret)
		ret = write_mm_image(pid, nr_vmas, brk, entries);
	if (!ret)
		ret = dump_pages(pid, entries, nr_vmas, stats);
	for (i = 0; i < nr_vmas; i++) {
		free(entries[i].device_path);
		free(entries[i].anon_name);
	}
	free(entries);
	return ret;
}
