/*
 * The CPU's capabilities (cpuinfo.h): cpuinfo.img as CRIU writes it on x86 (vendor,
 * family, model, the CPUID feature bits in CRIU's 19 words, the xsave features and
 * sizes), written by `criu cpuinfo dump` and by dump --cpu-cap, and compared with this
 * CPU by `criu cpuinfo check` and restore --cpu-cap, for what --cpu-cap asks: fpu, ins,
 * cpu.
 */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"
#include "cr_options.h"
#include "image.h"
#include "log.h"

#include "cpuinfo.pb-c.h"

/*
 * CRIU's words of feature bits (capability_ver 2): word i holds the register of the CPUID
 * leaf below; word 3 holds flags of Linux's own (linux_flags()); the Transmeta and VIA
 * words (2, 5) and Linux's others (7, 8) stay 0, as CRIU's images on x86_64 have them.
 */
#define NR_CAP_WORDS 19
#define CAP_VERSION  2

static const struct cap_word {
	uint32_t leaf, subleaf;
	char reg;	   /* 'a', 'b', 'c', 'd'; 0: not read */
	bool instructions; /* its bits name instructions (ins compares them) */
} cap_words[NR_CAP_WORDS] = {
	[0] = {1, 0, 'd', true},
	[1] = {0x80000001, 0, 'd', true},
	[4] = {1, 0, 'c', true},
	[6] = {0x80000001, 0, 'c', true},
	[9] = {7, 0, 'b', true},
	[10] = {0xd, 1, 'a', true},
	[11] = {7, 0, 'c', true},
	[12] = {0xf, 1, 'd', false},
	[13] = {0x80000008, 0, 'b', true},
	[14] = {6, 0, 'a', false},
	[15] = {0x8000000a, 0, 'd', false},
	[16] = {0xf, 0, 'd', false},
	[17] = {0x80000007, 0, 'b', false},
	[18] = {7, 0, 'd', true},
};

/* Bits of the instruction words that say what the OS or the machine does, not the CPU. */
#define BIT(word, bit) ((word)*32 + (bit))
static const unsigned int not_instructions[] = {
	BIT(4, 27), /* OSXSAVE: the kernel enabled xsave */
	BIT(4, 31), /* HYPERVISOR: running in a VM */
	BIT(11, 4), /* OSPKE: the kernel enabled protection keys */
};

/* The FPU's bits (fpu compares them): fpu, fxsr, xsave enabled, xsaves. */
static const unsigned int fpu_bits[] = {BIT(0, 0), BIT(0, 24), BIT(4, 27), BIT(10, 3)};

struct cpu_caps {
	CpuinfoX86Entry__Vendor vendor;
	uint32_t family, model, stepping;
	uint32_t words[NR_CAP_WORDS];
	uint64_t xfeatures;
	uint32_t xsave_size, xsave_size_max;
	char model_id[49];
};

static bool has_bit(const uint32_t *words, size_t nr, unsigned int bit)
{
	return bit / 32 < nr && (words[bit / 32] >> (bit % 32)) & 1;
}

static uint32_t cpuid_reg(uint32_t leaf, uint32_t subleaf, char reg)
{
	uint32_t max = __get_cpuid_max(leaf & 0x80000000, NULL), a, b, c, d;

	if (leaf > max)
		return 0;
	__cpuid_count(leaf, subleaf, a, b, c, d);
	return reg == 'a' ? a : reg == 'b' ? b : reg == 'c' ? c : d;
}

/*
 * Word 3, as CRIU's images have it on x86_64: CPUID (the instruction exists), NOPL (every
 * 64-bit CPU has it) and REP_GOOD (fast string moves: AMD from family 0x10, Intel family 6),
 * which the kernel sets from the same facts.
 */
static void linux_flags(struct cpu_caps *caps)
{
	caps->words[3] |= 1u << 25 | 1u << 20;
	if ((caps->vendor == CPUINFO_X86_ENTRY__VENDOR__AMD && caps->family >= 0x10) ||
	    (caps->vendor == CPUINFO_X86_ENTRY__VENDOR__INTEL && caps->family == 6))
		caps->words[3] |= 1u << 16;
}

static void read_caps(struct cpu_caps *caps)
{
	uint32_t sig[3], a, b, c, d, family, model;

	memset(caps, 0, sizeof(*caps));
	__cpuid(0, a, sig[0], sig[2], sig[1]);
	caps->vendor = !memcmp(sig, "GenuineIntel", 12)	  ? CPUINFO_X86_ENTRY__VENDOR__INTEL
		       : !memcmp(sig, "AuthenticAMD", 12) ? CPUINFO_X86_ENTRY__VENDOR__AMD
							  : CPUINFO_X86_ENTRY__VENDOR__UNKNOWN;
	/* Family and model as the kernel shows them: the extended fields added where used. */
	__cpuid(1, a, b, c, d);
	family = (a >> 8) & 0xf;
	model = (a >> 4) & 0xf;
	if (family == 0xf)
		family += (a >> 20) & 0xff;
	if (family >= 0x6)
		model += ((a >> 16) & 0xf) << 4;
	caps->family = family;
	caps->model = model;
	caps->stepping = a & 0xf;
	for (size_t i = 0; i < NR_CAP_WORDS; i++)
		if (cap_words[i].reg)
			caps->words[i] = cpuid_reg(cap_words[i].leaf, cap_words[i].subleaf,
						   cap_words[i].reg);
	linux_flags(caps);
	/*
	 * The xsave features, less SSE (bit 1): CRIU's images leave it out and CRIU's check
	 * refuses an image that has it.
	 */
	if (has_bit(caps->words, NR_CAP_WORDS, BIT(4, 26))) {
		__cpuid_count(0xd, 0, a, b, c, d);
		caps->xfeatures = ((uint64_t)d << 32 | a) & ~(uint64_t)(1u << 1);
		caps->xsave_size = b;
		caps->xsave_size_max = c;
	}
	if (__get_cpuid_max(0x80000000, NULL) >= 0x80000004) {
		uint32_t *brand = (uint32_t *)caps->model_id;

		for (uint32_t leaf = 0x80000002; leaf <= 0x80000004; leaf++, brand += 4)
			__cpuid(leaf, brand[0], brand[1], brand[2], brand[3]);
	}
}

int cpuinfo_dump(void)
{
	CpuinfoEntry entry = CPUINFO_ENTRY__INIT;
	CpuinfoX86Entry x86 = CPUINFO_X86_ENTRY__INIT, *list = &x86;
	struct cpu_caps caps;
	struct cr_img *img;
	int ret;

	read_caps(&caps);
	x86.vendor_id = caps.vendor;
	x86.cpu_family = caps.family;
	x86.model = caps.model;
	x86.stepping = caps.stepping;
	x86.capability_ver = CAP_VERSION;
	x86.n_capability = NR_CAP_WORDS;
	x86.capability = caps.words;
	x86.model_id = caps.model_id[0] ? caps.model_id : NULL;
	x86.has_xfeatures_mask = x86.has_xsave_size = x86.has_xsave_size_max = true;
	x86.xfeatures_mask = caps.xfeatures;
	x86.xsave_size = caps.xsave_size;
	x86.xsave_size_max = caps.xsave_size_max;
	entry.n_x86_entry = 1;
	entry.x86_entry = &list;
	img = open_image(CR_IMG_CPUINFO, O_WRONLY, 0);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &entry);
	close_image(img);
	if (!ret)
		pr_info("cpuinfo.img: %s, family %u model %u, xsave features %#llx\n",
			caps.model_id[0] ? caps.model_id : "x86", caps.family, caps.model,
			(unsigned long long)caps.xfeatures);
	return ret;
}

/* --cpu-cap fpu: the FPU state the image's CPU saved must be restorable here. */
static int check_fpu(const CpuinfoX86Entry *img, const struct cpu_caps *here)
{
	for (size_t i = 0; i < sizeof(fpu_bits) / sizeof(fpu_bits[0]); i++) {
		if (has_bit(img->capability, img->n_capability, fpu_bits[i]) &&
		    !has_bit(here->words, NR_CAP_WORDS, fpu_bits[i])) {
			pr_err("cpuinfo.img: the dumped CPU has FPU feature bit %u (word %u bit "
			       "%u), "
			       "this one does not (--cpu-cap fpu)\n",
			       fpu_bits[i], fpu_bits[i] / 32, fpu_bits[i] % 32);
			return -1;
		}
	}
	if (img->has_xfeatures_mask && (img->xfeatures_mask & ~here->xfeatures)) {
		pr_err("cpuinfo.img: xsave features %#llx of the dumped CPU are missing here (it "
		       "has "
		       "%#llx, this one %#llx; --cpu-cap fpu)\n",
		       (unsigned long long)(img->xfeatures_mask & ~here->xfeatures),
		       (unsigned long long)img->xfeatures_mask,
		       (unsigned long long)here->xfeatures);
		return -1;
	}
	if (img->has_xsave_size && img->xsave_size > here->xsave_size_max) {
		pr_err("cpuinfo.img: the dumped CPU's xsave area is %u bytes, this one holds at "
		       "most "
		       "%u (--cpu-cap fpu)\n",
		       img->xsave_size, here->xsave_size_max);
		return -1;
	}
	return 0;
}

static bool not_an_instruction(unsigned int bit)
{
	for (size_t i = 0; i < sizeof(not_instructions) / sizeof(not_instructions[0]); i++)
		if (not_instructions[i] == bit)
			return true;
	return false;
}

/* --cpu-cap ins: every instruction-set bit of the dumped CPU must be set here. */
static int check_ins(const CpuinfoX86Entry *img, const struct cpu_caps *here)
{
	for (unsigned int bit = 0; bit < NR_CAP_WORDS * 32 && bit / 32 < img->n_capability; bit++) {
		if (!cap_words[bit / 32].instructions || not_an_instruction(bit) ||
		    !has_bit(img->capability, img->n_capability, bit) ||
		    has_bit(here->words, NR_CAP_WORDS, bit))
			continue;
		pr_err("cpuinfo.img: the dumped CPU has instruction feature bit %u (word %u bit "
		       "%u, "
		       "CPUID %#x.%u %c%cx), this one does not (--cpu-cap ins)\n",
		       bit, bit / 32, bit % 32, cap_words[bit / 32].leaf,
		       cap_words[bit / 32].subleaf, 'e', cap_words[bit / 32].reg);
		return -1;
	}
	return 0;
}

/* --cpu-cap cpu: the same CPU: vendor, family, model and every feature word. */
static int check_cpu(const CpuinfoX86Entry *img, const struct cpu_caps *here)
{
	if (img->vendor_id != here->vendor || img->cpu_family != here->family ||
	    img->model != here->model) {
		pr_err("cpuinfo.img: the dumped CPU is vendor %d family %u model %u, this one "
		       "vendor "
		       "%d family %u model %u (--cpu-cap cpu)\n",
		       img->vendor_id, img->cpu_family, img->model, here->vendor, here->family,
		       here->model);
		return -1;
	}
	for (size_t i = 0; i < NR_CAP_WORDS; i++) {
		uint32_t theirs = i < img->n_capability ? img->capability[i] : 0;

		if (theirs != here->words[i]) {
			pr_err("cpuinfo.img: feature word %zu is %#x, here %#x (--cpu-cap cpu)\n",
			       i, theirs, here->words[i]);
			return -1;
		}
	}
	return 0;
}

int cpuinfo_check(unsigned int caps_wanted)
{
	CpuinfoEntry *entry = NULL;
	struct cpu_caps here;
	struct cr_img *img;
	int ret;

	img = open_image(CR_IMG_CPUINFO, O_RDONLY, 0);
	if (!img)
		return -1;
	ret = pb_read_one_required(img, (void **)&entry);
	close_image(img);
	if (ret)
		return -1;
	if (entry->n_x86_entry != 1 || entry->x86_entry[0]->capability_ver != CAP_VERSION) {
		pr_err("cpuinfo.img: %zu x86 entries (version %u): one of version %d is read\n",
		       entry->n_x86_entry,
		       entry->n_x86_entry ? entry->x86_entry[0]->capability_ver : 0, CAP_VERSION);
		pb_free(NULL, entry);
		return -1;
	}
	read_caps(&here);
	ret = 0;
	if (caps_wanted & CPU_CAP_FPU)
		ret = check_fpu(entry->x86_entry[0], &here);
	if (!ret && (caps_wanted & CPU_CAP_INS))
		ret = check_ins(entry->x86_entry[0], &here);
	if (!ret && (caps_wanted & CPU_CAP_CPU))
		ret = check_cpu(entry->x86_entry[0], &here);
	pb_free(NULL, entry);
	return ret;
}
