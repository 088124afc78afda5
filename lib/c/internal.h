/*
 * What libcriu's two halves share and nothing else sees: the options object (opts.c sets
 * it up, criu.c turns it into requests). Hidden from the shared library's symbol table.
 */
#ifndef __CRIU_LIB_INTERNAL_H__
#define __CRIU_LIB_INTERNAL_H__

#include "criu.h"

#define LIBCRIU_HIDDEN __attribute__((visibility("hidden")))

/* The defaults of the three ways to reach criu (enum criu_service_comm). */
#define CR_DEFAULT_SERVICE_BIN	   "criu"
#define CR_DEFAULT_SERVICE_ADDRESS "./criu_service.socket"

struct criu_opts {
	/* The request's options, sent as they are with every request made from this object. */
	CriuOpts *rpc;
	int (*notify)(char *action, criu_notify_arg_t na);
	enum criu_service_comm comm;
	/* Each mode keeps its own setting, so that switching modes loses none. */
	char *service_address;
	char *service_binary;
	int service_fd;
};

/* The object behind the calls without criu_local_ (criu_init_opts()). */
extern LIBCRIU_HIDDEN criu_opts *libcriu_global_opts;

#endif /* __CRIU_LIB_INTERNAL_H__ */
