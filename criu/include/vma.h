/*
 * vma_entry.status and vma_entry.madv bits (images/vma.proto), as CRIU's image format
 * defines them: the values are part of the format, shared with every CRIU tool.
 */
#ifndef CR_VMA_H
#define CR_VMA_H

#define VMA_AREA_REGULAR (1u << 0) /* a mapping restore recreates */
#define VMA_AREA_STACK (1u << 1)
#define VMA_AREA_VSYSCALL (1u << 2) /* the kernel's; never restored */
#define VMA_AREA_VDSO (1u << 3)
#define VMA_AREA_HEAP (1u << 5)
#define VMA_FILE_PRIVATE (1u << 6)
#define VMA_FILE_SHARED (1u << 7)
#define VMA_ANON_SHARED (1u << 8)
#define VMA_ANON_PRIVATE (1u << 9)
#define VMA_AREA_SYSVIPC (1u << 10)
#define VMA_AREA_SOCKET (1u << 11)
#define VMA_AREA_VVAR (1u << 12) /* [vvar] and, right after it, [vvar_vclock]: one entry */
#define VMA_AREA_AIORING (1u << 13)
#define VMA_AREA_MEMFD (1u << 14)
#define VMA_AREA_SHSTK (1u << 15)
#define VMA_AREA_GUARD (1u << 16)
#define VMA_AREA_UPROBES (1u << 17)
/*
 * The VMA lacks VM_ACCOUNT (VmFlags without "ac"). The kernel does not merge neighbours
 * that differ in it, so restore must give VM_ACCOUNT to exactly the VMAs that had it,
 * or /proc/PID/maps comes back with merged lines.
 */
#define VMA_AREA_NOT_ACCOUNTABLE (1u << 18)
#define VMA_EXT_PLUGIN (1u << 27) /* a device mapping a plugin restores (UPDATE_VMA_MAP) */
#define VMA_UNSUPP (1u << 31) /* the dumping criu could not handle it */

/*
 * vma_entry.madv: 1 << MADV_x for each advice VmFlags shows, restored by madvise().
 * Numbers as <linux/mman.h> has them (spelt out: the restorer blob includes this too).
 */
#define VMA_MADV_RANDOM (1ull << 1) /* "rr" */
#define VMA_MADV_SEQUENTIAL (1ull << 2) /* "sr" */
#define VMA_MADV_DONTFORK (1ull << 10) /* "dc" */
#define VMA_MADV_MERGEABLE (1ull << 12) /* "mg" */
#define VMA_MADV_HUGEPAGE (1ull << 14) /* "hg" */
#define VMA_MADV_NOHUGEPAGE (1ull << 15) /* "nh" */
#define VMA_MADV_DONTDUMP (1ull << 16) /* "dd" */
#define VMA_MADV_WIPEONFORK (1ull << 18) /* "wf" */

#endif
