/*
 * The CRIU version whose libcriu interface (criu.h, the RPC requests) this library
 * implements; installed beside criu.h, which includes it, as CRIU installs its own.
 */
#ifndef __CRIU_LIB_VERSION_H__
#define __CRIU_LIB_VERSION_H__

#define CRIU_VERSION	   "4.2"
#define CRIU_VERSION_MAJOR 4
#define CRIU_VERSION_MINOR 2

#endif /* __CRIU_LIB_VERSION_H__ */
