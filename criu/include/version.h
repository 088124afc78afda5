/* The version criu -V prints. */
#ifndef CR_VERSION_H
#define CR_VERSION_H
#define CRIU_VERSION "0.1"
#endif
