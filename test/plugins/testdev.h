/* Shared by the testdev plugin and its test program: the device and the flag value. */
#ifndef TESTDEV_H
#define TESTDEV_H

/*
 * /dev/kmsg: a character device the core does not dump (it takes only the memory
 * devices null, zero, full, random, urandom), so plugins are offered it. Opened
 * read-only, it is harmless: a reader with its own position in the kernel log.
 */
#define TESTDEV_PATH "/dev/kmsg"
#define TESTDEV_MAJOR 1
#define TESTDEV_MINOR 11

/* Written by RESUME_DEVICES_LATE into the program's flag. */
#define TESTDEV_MAGIC 0x7e57de7c0ffeeULL

/*
 * A memfd standing in for a device buffer (like the KFD emulator's BOs): the program maps
 * two windows of it MAP_SHARED and closes the fd, so only the VMAs hold it; testdev takes
 * them (HANDLE_DEVICE_VMA) and re-creates the memfd at restore (UPDATE_VMA_MAP).
 * Page p of the object holds TESTDEV_VMA_BYTE(p, i) at byte i when mapped.
 */
#define TESTDEV_VMA_NAME "testdev-vma"
#define TESTDEV_VMA_PAGES 6
#define TESTDEV_VMA_BYTE(page, i) ((unsigned char)((page) * 37 + (i) * 7 + 1))
/* Window A: pages [2, 5) read-write; window B: page 3 again, read-only. */
#define TESTDEV_VMA_A_PAGE 2
#define TESTDEV_VMA_A_PAGES 3
#define TESTDEV_VMA_B_PAGE 3
/* Set in criu's environment: testdev declines UPDATE_VMA_MAP (the restore must fail). */
#define TESTDEV_DECLINE_VMA_ENV "CRIU_TESTDEV_DECLINE_VMA"

#endif
