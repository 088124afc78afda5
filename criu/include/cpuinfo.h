/*
 * The CPU's capabilities in cpuinfo.img (cpuinfo.c), as CRIU's `cpuinfo dump|check` and
 * --cpu-cap use them.
 */
#ifndef CR_CPUINFO_H
#define CR_CPUINFO_H

/* cpuinfo.img in the images directory, from this CPU. 0, or a negative errno (logged). */
int cpuinfo_dump(void);
/*
 * cpuinfo.img against this CPU for caps_wanted (CPU_CAP_FPU, _INS, _CPU of cr_options.h):
 * 0 when it can run what the image's CPU ran, else -1 after one error line.
 */
int cpuinfo_check(unsigned int caps_wanted);

#endif
