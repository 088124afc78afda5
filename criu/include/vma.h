/* VMA status and madvise bits stored in vma_entry (images/mm.proto). */
#ifndef CR_VMA_H
#define CR_VMA_H

#define VMA_AREA_REGULAR (1u << 0) /* a mapping restore recreates */
#define VMA_ANON_PRIVATE (1u << 1)
#define VMA_ANON_SHARED (1u << 2)
#define VMA_FILE_PRIVATE (1u << 3)
#define VMA_FILE_SHARED (1u << 4)
#define VMA_AREA_STACK (1u << 5)
#define VMA_AREA_HEAP (1u << 6)
#define VMA_AREA_VDSO (1u << 7)
#define VMA_AREA_VVAR (1u << 8)
#define VMA_AREA_VVAR_VCLOCK (1u << 9)
#define VMA_AREA_VSYSCALL (1u << 10) /* not restored: the kernel provides it */
#define VMA_LOCKED (1u << 11) /* mlock()ed (VmFlags "lo") */
#define VMA_DEVICE (1u << 12) /* backed by a device object a plugin owns */
/*
 * VmFlags "ac": VM_ACCOUNT, set on private mappings that were ever writable. The kernel
 * does not merge neighbours that differ in it, so restore must give it to exactly the
 * VMAs that had it, or /proc/PID/maps comes back with merged lines.
 */
#define VMA_ACCOUNT (1u << 13)

/* madvise state visible in VmFlags, restored by madvise() */
#define VMA_MADV_DONTFORK (1u << 0) /* "dc" */
#define VMA_MADV_DONTDUMP (1u << 1) /* "dd" */
#define VMA_MADV_HUGEPAGE (1u << 2) /* "hg" */
#define VMA_MADV_NOHUGEPAGE (1u << 3) /* "nh" */
#define VMA_MADV_RANDOM (1u << 4) /* "rr" */
#define VMA_MADV_SEQUENTIAL (1u << 5) /* "sr" */
#define VMA_MADV_WIPEONFORK (1u << 6) /* "wf" */
#define VMA_MADV_MERGEABLE (1u << 7) /* "mg" */

#endif
