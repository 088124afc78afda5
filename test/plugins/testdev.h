/* Shared by the testdev plugin and its test program: the device and the flag value. */
#ifndef TESTDEV_H
#define TESTDEV_H

/* /dev/full: a character device the core does not dump, so plugins are offered it. */
#define TESTDEV_MAJOR 1
#define TESTDEV_MINOR 7

/* Written by RESUME_DEVICES_LATE into the program's flag. */
#define TESTDEV_MAGIC 0x7e57de7c0ffeeULL

#endif
