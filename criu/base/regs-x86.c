/*
 * x86_64 registers between the kernel's layouts and core_entry.thread_info: general
 * registers, the XSAVE buffer (legacy area, header, components at the offsets CPUID leaf
 * 0xD gives) and the GDT TLS slots.
 */
#include <cpuid.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <asm/ldt.h>
#include <sys/user.h>

#include "log.h"
#include "regs-x86.h"

/* ---- general purpose registers ---- */

void gpregs_to_image(const struct user_regs_struct *r, UserX86RegsEntry *re)
{
	user_x86_regs_entry__init(re);
	re->r15 = r->r15;
	re->r14 = r->r14;
	re->r13 = r->r13;
	re->r12 = r->r12;
	re->bp = r->rbp;
	re->bx = r->rbx;
	re->r11 = r->r11;
	re->r10 = r->r10;
	re->r9 = r->r9;
	re->r8 = r->r8;
	re->ax = r->rax;
	re->cx = r->rcx;
	re->dx = r->rdx;
	re->si = r->rsi;
	re->di = r->rdi;
	re->orig_ax = r->orig_rax;
	re->ip = r->rip;
	re->cs = r->cs;
	re->flags = r->eflags;
	re->sp = r->rsp;
	re->ss = r->ss;
	re->fs_base = r->fs_base;
	re->gs_base = r->gs_base;
	re->ds = r->ds;
	re->es = r->es;
	re->fs = r->fs;
	re->gs = r->gs;
	re->has_mode = true;
	re->mode = USER_X86_REGS_MODE__NATIVE;
}

int gpregs_from_image(const UserX86RegsEntry *re, struct rst_gpregs *r, const char *who)
{
	if (re->has_mode && re->mode != USER_X86_REGS_MODE__NATIVE) {
		pr_err("%s: 32-bit (compat) registers, which are not supported\n", who);
		return -EINVAL;
	}
	*r = (struct rst_gpregs){
		.r15 = re->r15, .r14 = re->r14, .r13 = re->r13, .r12 = re->r12,
		.bp = re->bp, .bx = re->bx, .r11 = re->r11, .r10 = re->r10,
		.r9 = re->r9, .r8 = re->r8, .ax = re->ax, .cx = re->cx,
		.dx = re->dx, .si = re->si, .di = re->di, .orig_ax = re->orig_ax,
		.ip = re->ip, .cs = re->cs, .flags = re->flags, .sp = re->sp,
		.ss = re->ss, .fs_base = re->fs_base, .gs_base = re->gs_base,
	};
	return 0;
}

/* ---- the XSAVE layout ---- */

/* The legacy FXSAVE area (Intel SDM vol. 1, 10.5.1), then the XSAVE header. */
#define FX_CWD 0
#define FX_SWD 2
#define FX_TWD 4
#define FX_FOP 6
#define FX_RIP 8
#define FX_RDP 16
#define FX_MXCSR 24
#define FX_MXCSR_MASK 28
#define FX_ST_SPACE 32
#define FX_XMM_SPACE 160
#define FX_PADDING 416
#define XSAVE_HDR_OFF 512
#define XSAVE_HDR_SIZE 64
#define XSAVE_MIN_SIZE (XSAVE_HDR_OFF + XSAVE_HDR_SIZE)

/* XSAVE components (state-component bitmap numbers). */
#define XFEATURE_FP 0
#define XFEATURE_SSE 1
#define XFEATURE_XTILE_DATA 18 /* AMX: enabled per process on request, not in the default size */
#define XFEATURE_LEGACY_MASK ((1ull << XFEATURE_FP) | (1ull << XFEATURE_SSE))

/*
 * The components with a field in user_x86_xsave_entry: which array holds each, and how
 * many elements of which width. The field's element count times its width is the
 * component's size in the standard format.
 */
struct xsave_component {
	int feature;
	const char *name;
	size_t elem_size; /* 4 or 8 */
	size_t nr_elems;
	size_t xsave_off; /* offsetof the n_ field in UserX86XsaveEntry (the array follows) */
	size_t storage_off; /* the array in struct x86_fpregs_image */
};

#define XCOMP(feat, nm, type, field)                                                       \
	{                                                                                  \
		feat, nm, sizeof(type), sizeof(((struct x86_fpregs_image *)0)->field) / sizeof(type), \
		offsetof(UserX86XsaveEntry, n_##field), offsetof(struct x86_fpregs_image, field) \
	}

static const struct xsave_component xsave_components[] = {
	XCOMP(2, "YMM_Hi128", uint32_t, ymmh_space),
	XCOMP(3, "BNDREGS", uint64_t, bndreg_state),
	XCOMP(4, "BNDCSR", uint64_t, bndcsr_state),
	XCOMP(5, "opmask", uint64_t, opmask_reg),
	XCOMP(6, "ZMM_Hi256", uint64_t, zmm_upper),
	XCOMP(7, "Hi16_ZMM", uint64_t, hi16_zmm),
	XCOMP(9, "PKRU", uint32_t, pkru),
};
#define NR_XSAVE_COMPONENTS (sizeof(xsave_components) / sizeof(xsave_components[0]))

/* The n_ field and the array pointer of a component in an xsave entry. */
static size_t *comp_count(UserX86XsaveEntry *xs, const struct xsave_component *c)
{
	return (size_t *)((char *)xs + c->xsave_off);
}

static void **comp_array(UserX86XsaveEntry *xs, const struct xsave_component *c)
{
	return (void **)((char *)xs + c->xsave_off + sizeof(size_t));
}

static uint64_t read_xcr0(void)
{
	uint32_t lo, hi;

	asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static bool cpu_has_xsave(void)
{
	unsigned int eax, ebx, ecx, edx;

	/* CPUID.1:ECX.OSXSAVE[bit 27]: XGETBV works and XCR0 says what the OS enabled. */
	return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 27));
}

uint64_t xsave_user_features(void)
{
	if (!cpu_has_xsave())
		return XFEATURE_LEGACY_MASK;
	return read_xcr0() & ~(1ull << XFEATURE_XTILE_DATA);
}

/* Where component feature lies in the standard format on this CPU; false if it has none. */
static bool comp_location(int feature, size_t *off, size_t *size)
{
	unsigned int eax, ebx, ecx, edx;

	if (!(xsave_user_features() & (1ull << feature)))
		return false;
	__cpuid_count(0xd, feature, eax, ebx, ecx, edx);
	*size = eax;
	*off = ebx;
	return eax != 0;
}

size_t xsave_user_size(void)
{
	uint64_t features = xsave_user_features();
	size_t size = XSAVE_MIN_SIZE, off, len;
	int feature;

	for (feature = 2; feature < 64; feature++)
		if ((features & (1ull << feature)) && comp_location(feature, &off, &len) &&
		    off + len > size)
			size = off + len;
	return size;
}

static uint16_t get_u16(const uint8_t *buf, size_t off)
{
	uint16_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *buf, size_t off)
{
	uint32_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static uint64_t get_u64(const uint8_t *buf, size_t off)
{
	uint64_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static void put_u16(uint8_t *buf, size_t off, uint16_t v)
{
	memcpy(buf + off, &v, sizeof(v));
}

static void put_u32(uint8_t *buf, size_t off, uint32_t v)
{
	memcpy(buf + off, &v, sizeof(v));
}

static void put_u64(uint8_t *buf, size_t off, uint64_t v)
{
	memcpy(buf + off, &v, sizeof(v));
}

/* ---- buffer -> fields (dump) ---- */

static void legacy_to_image(const uint8_t *buf, struct x86_fpregs_image *img)
{
	UserX86FpregsEntry *fp = &img->fpregs;

	user_x86_fpregs_entry__init(fp);
	fp->cwd = get_u16(buf, FX_CWD);
	fp->swd = get_u16(buf, FX_SWD);
	fp->twd = get_u16(buf, FX_TWD);
	fp->fop = get_u16(buf, FX_FOP);
	fp->rip = get_u64(buf, FX_RIP);
	fp->rdp = get_u64(buf, FX_RDP);
	fp->mxcsr = get_u32(buf, FX_MXCSR);
	fp->mxcsr_mask = get_u32(buf, FX_MXCSR_MASK);
	memcpy(img->st_space, buf + FX_ST_SPACE, sizeof(img->st_space));
	memcpy(img->xmm_space, buf + FX_XMM_SPACE, sizeof(img->xmm_space));
	memcpy(img->padding, buf + FX_PADDING, sizeof(img->padding));
	fp->n_st_space = 32;
	fp->st_space = img->st_space;
	fp->n_xmm_space = 64;
	fp->xmm_space = img->xmm_space;
	fp->n_padding = 24;
	fp->padding = img->padding;
}

/* Every component in use must have a field here, or restore would silently lose it. */
static int check_storable(uint64_t xstate_bv, const char *who)
{
	uint64_t storable = XFEATURE_LEGACY_MASK;
	unsigned int i;

	for (i = 0; i < NR_XSAVE_COMPONENTS; i++)
		storable |= 1ull << xsave_components[i].feature;
	if (xstate_bv & ~storable) {
		pr_err("%s: XSAVE state %#llx in use (xstate_bv %#llx), which the image format cannot hold\n",
		       who, (unsigned long long)(xstate_bv & ~storable), (unsigned long long)xstate_bv);
		return -ENOTSUP;
	}
	return 0;
}

int xsave_to_image(const void *buf, size_t len, struct x86_fpregs_image *img, const char *who)
{
	const uint8_t *b = buf;
	unsigned int i;
	size_t off, size;
	int ret;

	if (len < XSAVE_MIN_SIZE) {
		pr_err("%s: XSAVE buffer of %zu bytes, at least %d expected\n", who, len, XSAVE_MIN_SIZE);
		return -EINVAL;
	}
	legacy_to_image(b, img);
	user_x86_xsave_entry__init(&img->xsave);
	img->xsave.xstate_bv = get_u64(b, XSAVE_HDR_OFF);
	ret = check_storable(img->xsave.xstate_bv, who);
	if (ret)
		return ret;
	for (i = 0; i < NR_XSAVE_COMPONENTS; i++) {
		const struct xsave_component *c = &xsave_components[i];

		/* Components this CPU has are stored whether in use or not, as CRIU does. */
		if (!comp_location(c->feature, &off, &size))
			continue;
		if (size != c->elem_size * c->nr_elems || off + size > len) {
			pr_err("%s: XSAVE component %s is %zu bytes at %zu in a %zu-byte buffer, not %zu\n",
			       who, c->name, size, off, len, c->elem_size * c->nr_elems);
			return -EINVAL;
		}
		memcpy((char *)img + c->storage_off, b + off, size);
		*comp_count(&img->xsave, c) = c->nr_elems;
		*comp_array(&img->xsave, c) = (char *)img + c->storage_off;
	}
	img->fpregs.xsave = &img->xsave;
	return 0;
}

/* ---- fields -> buffer (restore) ---- */

static int legacy_from_image(const UserX86FpregsEntry *fp, uint8_t *buf, const char *who)
{
	if (fp->n_st_space != 32 || fp->n_xmm_space != 64 || (fp->n_padding && fp->n_padding != 24)) {
		pr_err("%s: fpregs with %zu st_space, %zu xmm_space, %zu padding words (32, 64, 24 expected)\n",
		       who, fp->n_st_space, fp->n_xmm_space, fp->n_padding);
		return -EINVAL;
	}
	put_u16(buf, FX_CWD, fp->cwd);
	put_u16(buf, FX_SWD, fp->swd);
	put_u16(buf, FX_TWD, fp->twd);
	put_u16(buf, FX_FOP, fp->fop);
	put_u64(buf, FX_RIP, fp->rip);
	put_u64(buf, FX_RDP, fp->rdp);
	put_u32(buf, FX_MXCSR, fp->mxcsr);
	put_u32(buf, FX_MXCSR_MASK, fp->mxcsr_mask);
	memcpy(buf + FX_ST_SPACE, fp->st_space, 32 * sizeof(uint32_t));
	memcpy(buf + FX_XMM_SPACE, fp->xmm_space, 64 * sizeof(uint32_t));
	if (fp->n_padding)
		memcpy(buf + FX_PADDING, fp->padding, 24 * sizeof(uint32_t));
	return 0;
}

/* One component into its place; *written gets its bit when the image had it. */
static int comp_from_image(const UserX86XsaveEntry *xs, const struct xsave_component *c,
			   uint8_t *buf, size_t len, uint64_t *written, const char *who)
{
	size_t nr = *comp_count((UserX86XsaveEntry *)xs, c), off, size;
	bool in_use = xs->xstate_bv & (1ull << c->feature);

	if (!nr) {
		if (in_use) {
			pr_err("%s: XSAVE component %s is in use (xstate_bv %#llx) but has no field\n",
			       who, c->name, (unsigned long long)xs->xstate_bv);
			return -EINVAL;
		}
		return 0;
	}
	if (nr != c->nr_elems) {
		pr_err("%s: XSAVE component %s has %zu elements, %zu expected\n", who, c->name, nr,
		       c->nr_elems);
		return -EINVAL;
	}
	if (!comp_location(c->feature, &off, &size) || off + size > len) {
		/* Not in use: its state is the initial one, which this CPU has anyway. */
		if (!in_use)
			return 0;
		pr_err("%s: XSAVE component %s is in use, but this CPU does not have it\n", who,
		       c->name);
		return -EINVAL;
	}
	memcpy(buf + off, *comp_array((UserX86XsaveEntry *)xs, c), size);
	*written |= 1ull << c->feature;
	return 0;
}

int xsave_from_image(const UserX86FpregsEntry *fp, void *buf, size_t len, const char *who)
{
	const UserX86XsaveEntry *xs = fp->xsave;
	uint64_t written = XFEATURE_LEGACY_MASK;
	uint8_t *b = buf;
	unsigned int i;
	int ret;

	if (len < XSAVE_MIN_SIZE) {
		pr_err("%s: XSAVE buffer of %zu bytes is too short\n", who, len);
		return -EINVAL;
	}
	memset(b, 0, len);
	ret = legacy_from_image(fp, b, who);
	if (ret)
		return ret;
	if (!xs) {
		/* An FXSAVE-only image: the x87 and SSE state is all there is. */
		put_u64(b, XSAVE_HDR_OFF, XFEATURE_LEGACY_MASK);
		return 0;
	}
	ret = check_storable(xs->xstate_bv, who);
	for (i = 0; i < NR_XSAVE_COMPONENTS && !ret; i++)
		ret = comp_from_image(xs, &xsave_components[i], b, len, &written, who);
	if (ret)
		return ret;
	put_u64(b, XSAVE_HDR_OFF, xs->xstate_bv & written);
	return 0;
}

int xsave_check_round_trip(const void *buf, size_t len, const struct x86_fpregs_image *img,
			   const char *who)
{
	uint8_t *rebuilt = malloc(len);
	size_t off;
	int ret;

	if (!rebuilt) {
		pr_err("%s: no memory to check the XSAVE state\n", who);
		return -ENOMEM;
	}
	ret = xsave_from_image(&img->fpregs, rebuilt, len, who);
	for (off = 0; !ret && off < len; off++) {
		if (rebuilt[off] != ((const uint8_t *)buf)[off]) {
			pr_err("%s: XSAVE byte %zu (of %zu) is %#x, the image gives back %#x\n", who,
			       off, len, ((const uint8_t *)buf)[off], rebuilt[off]);
			ret = -EIO;
		}
	}
	free(rebuilt);
	return ret;
}

/* ---- TLS descriptors ---- */

void tls_to_image(const struct user_desc *descs, struct x86_tls_image *img)
{
	unsigned int i;

	for (i = 0; i < X86_GDT_TLS_NUM; i++) {
		const struct user_desc *d = &descs[i];
		UserDescT *ud = &img->desc[i];

		user_desc_t__init(ud);
		ud->entry_number = d->entry_number;
		ud->base_addr = d->base_addr;
		ud->limit = d->limit;
		ud->seg_32bit = d->seg_32bit;
		ud->contents_h = (d->contents >> 1) & 1;
		ud->contents_l = d->contents & 1;
		ud->read_exec_only = d->read_exec_only;
		ud->limit_in_pages = d->limit_in_pages;
		ud->seg_not_present = d->seg_not_present;
		ud->usable = d->useable;
		img->ptrs[i] = ud;
	}
}

/* An empty slot as get_thread_area() shows it: all zero but these two flags. */
static bool tls_slot_empty(const UserDescT *ud)
{
	return !ud->base_addr && !ud->limit && !ud->seg_32bit && !ud->contents_h &&
	       !ud->contents_l && ud->read_exec_only && !ud->limit_in_pages &&
	       ud->seg_not_present && !ud->usable;
}

int tls_check_unused(const ThreadInfoX86 *ti, const char *who)
{
	size_t i;

	for (i = 0; i < ti->n_tls; i++) {
		if (!tls_slot_empty(ti->tls[i])) {
			pr_err("%s: GDT TLS slot %u is in use (set_thread_area), which is not supported\n",
			       who, ti->tls[i]->entry_number);
			return -ENOTSUP;
		}
	}
	return 0;
}
