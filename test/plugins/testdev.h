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

#endif
