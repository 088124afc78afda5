/*
 * compel's own view of an infected task, shared by infect.c (remote syscalls) and
 * infect-parasite.c (the parasite blob).
 */
#ifndef COMPEL_INFECT_PRIV_H
#define COMPEL_INFECT_PRIV_H

#include "compel.h"

struct compel_parasite;

struct compel_ctl {
	pid_t pid;
	unsigned long syscall_ip;
	long orig_code; /* the word at syscall_ip before we wrote over it */
	bool code_written;
	uint64_t orig_sigmask;
	bool sigmask_changed;
	/* Registers as seized, restart fixup applied: see compel_cure(). */
	struct user_regs_struct orig_regs;
	bool regs_saved;
	unsigned long scratch; /* 0: not mapped */
	struct compel_parasite *parasite; /* NULL: none started */
	/* The parasite's area in the task (0: not mapped), unmapped last by compel_cure(). */
	unsigned long parasite_area;
	size_t parasite_area_size;
};

/* Puts the original code word back at syscall_ip. 0 or -errno (logged). */
int compel_restore_code(struct compel_ctl *ctl);
/*
 * compel_cure()'s part for a started parasite: stop it, close the fds it used in the task
 * and criu's; the area stays mapped for compel_parasite_unmap(), compel_cure()'s last
 * injected syscall.
 */
int compel_parasite_cure(struct compel_ctl *ctl);
int compel_parasite_unmap(struct compel_ctl *ctl);

#endif
