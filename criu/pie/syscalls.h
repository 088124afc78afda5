/*
 * Raw x86_64 system calls for the restorer blob: the only way the freestanding code
 * in criu/pie talks to the kernel. Each returns the kernel's value: >= 0, or -errno.
 */
#ifndef CR_PIE_SYSCALLS_H
#define CR_PIE_SYSCALLS_H

#include <asm/unistd.h>

typedef unsigned long ulong;

static inline long sys_call6(long nr, ulong a1, ulong a2, ulong a3, ulong a4, ulong a5, ulong a6)
{
	register ulong r10 asm("r10") = a4;
	register ulong r8 asm("r8") = a5;
	register ulong r9 asm("r9") = a6;
	long ret;

	asm volatile("syscall"
		     : "=a"(ret)
		     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
		     : "rcx", "r11", "memory");
	return ret;
}

#define sys_call(nr, a1, a2, a3, a4, a5, a6)                                                    \
	sys_call6(nr, (ulong)(a1), (ulong)(a2), (ulong)(a3), (ulong)(a4), (ulong)(a5), (ulong)(a6))

#define sys_read(fd, buf, len) sys_call(__NR_read, fd, buf, len, 0, 0, 0)
#define sys_write(fd, buf, len) sys_call(__NR_write, fd, buf, len, 0, 0, 0)
#define sys_close(fd) sys_call(__NR_close, fd, 0, 0, 0, 0, 0)
#define sys_fcntl(fd, cmd, arg) sys_call(__NR_fcntl, fd, cmd, arg, 0, 0, 0)
#define sys_flock(fd, op) sys_call(__NR_flock, fd, op, 0, 0, 0, 0)
#define sys_preadv(fd, iov, nr, off) sys_call(__NR_preadv, fd, iov, nr, off, 0, 0)
#define sys_mmap(addr, len, prot, flags, fd, off) sys_call(__NR_mmap, addr, len, prot, flags, fd, off)
#define sys_munmap(addr, len) sys_call(__NR_munmap, addr, len, 0, 0, 0, 0)
#define sys_ioctl(fd, cmd, arg) sys_call(__NR_ioctl, fd, cmd, arg, 0, 0, 0)
#define sys_sendmsg(fd, msg, flags) sys_call(__NR_sendmsg, fd, msg, flags, 0, 0, 0)
#define sys_mprotect(addr, len, prot) sys_call(__NR_mprotect, addr, len, prot, 0, 0, 0)
#define sys_openat(dirfd, path, flags, mode) sys_call(__NR_openat, dirfd, path, flags, mode, 0, 0)
#define sys_rt_sigtimedwait(set, info, timeout, setsize)                                         \
	sys_call(__NR_rt_sigtimedwait, set, info, timeout, setsize, 0, 0)
#define sys_seccomp(op, flags, args) sys_call(__NR_seccomp, op, flags, args, 0, 0, 0)
#define sys_shmat(id, addr, flags) sys_call(__NR_shmat, id, addr, flags, 0, 0, 0)
#define sys_mremap(old, old_len, new_len, flags, new_addr)                                      \
	sys_call(__NR_mremap, old, old_len, new_len, flags, new_addr, 0)
#define sys_io_setup(nr, ctxp) sys_call(__NR_io_setup, nr, ctxp, 0, 0, 0, 0)
#define sys_io_destroy(ctx) sys_call(__NR_io_destroy, ctx, 0, 0, 0, 0, 0)
#define sys_io_submit(ctx, nr, iocbpp) sys_call(__NR_io_submit, ctx, nr, iocbpp, 0, 0, 0)
#define sys_io_getevents(ctx, min, max, events, timeout)                                        \
	sys_call(__NR_io_getevents, ctx, min, max, events, timeout, 0)
#define sys_madvise(addr, len, advice) sys_call(__NR_madvise, addr, len, advice, 0, 0, 0)
#define sys_mlock(addr, len) sys_call(__NR_mlock, addr, len, 0, 0, 0, 0)
#define sys_prctl(opt, a2, a3, a4, a5) sys_call(__NR_prctl, opt, a2, a3, a4, a5, 0)
#define sys_arch_prctl(code, addr) sys_call(__NR_arch_prctl, code, addr, 0, 0, 0, 0)
#define sys_rt_sigaction(sig, act, oact, size) sys_call(__NR_rt_sigaction, sig, act, oact, size, 0, 0)
#define sys_setitimer(which, val, old) sys_call(__NR_setitimer, which, val, old, 0, 0, 0)
#define sys_timer_create(clock, sev, id) sys_call(__NR_timer_create, clock, sev, id, 0, 0, 0)
#define sys_timer_settime(id, flags, val, old) sys_call(__NR_timer_settime, id, flags, val, old, 0, 0)
#define sys_rseq(ptr, len, flags, sig) sys_call(__NR_rseq, ptr, len, flags, sig, 0, 0)
#define sys_set_tid_address(addr) sys_call(__NR_set_tid_address, addr, 0, 0, 0, 0, 0)
#define sys_set_robust_list(head, len) sys_call(__NR_set_robust_list, head, len, 0, 0, 0, 0)
#define sys_rt_tgsigqueueinfo(tgid, tid, sig, info)                                             \
	sys_call(__NR_rt_tgsigqueueinfo, tgid, tid, sig, info, 0, 0)
#define sys_rt_sigqueueinfo(tgid, sig, info) sys_call(__NR_rt_sigqueueinfo, tgid, sig, info, 0, 0, 0)
#define sys_kill(pid, sig) sys_call(__NR_kill, pid, sig, 0, 0, 0, 0)
#define sys_tgkill(tgid, tid, sig) sys_call(__NR_tgkill, tgid, tid, sig, 0, 0, 0)
#define sys_sched_yield() sys_call(__NR_sched_yield, 0, 0, 0, 0, 0, 0)
#define sys_setgroups(nr, list) sys_call(__NR_setgroups, nr, list, 0, 0, 0, 0)
#define sys_setresuid(r, e, s) sys_call(__NR_setresuid, r, e, s, 0, 0, 0)
#define sys_setresgid(r, e, s) sys_call(__NR_setresgid, r, e, s, 0, 0, 0)
#define sys_setfsuid(id) sys_call(__NR_setfsuid, id, 0, 0, 0, 0, 0)
#define sys_setfsgid(id) sys_call(__NR_setfsgid, id, 0, 0, 0, 0, 0)
#define sys_capset(hdr, data) sys_call(__NR_capset, hdr, data, 0, 0, 0, 0)
#define sys_futex(uaddr, op, val, timeout) sys_call(__NR_futex, uaddr, op, val, timeout, 0, 0)
#define sys_gettid() sys_call(__NR_gettid, 0, 0, 0, 0, 0, 0)
#define sys_exit(code) sys_call(__NR_exit, code, 0, 0, 0, 0, 0)
#define sys_exit_group(code) sys_call(__NR_exit_group, code, 0, 0, 0, 0, 0)

#endif
