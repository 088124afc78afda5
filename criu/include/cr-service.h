/*
 * CRIU's RPC service (cr-service.c): the commands `criu swrk FD` and `criu service`, which
 * serve clients such as runc (go-criu), crun (libcriu) and pycriu.
 */
#ifndef CR_SERVICE_H
#define CR_SERVICE_H

/*
 * criu swrk FD: the requests of the client at the other end of the SOCK_SEQPACKET socket
 * FD, one after another while each says keep_open. The exit status: 0 when every request
 * succeeded.
 */
int cr_swrk(const char *fd);

/*
 * criu service: listens on --address (default /var/run/criu_service.socket; -W: relative
 * names there), -d in the background, --pidfile, --status-fd once it listens; serves each
 * connection in a child of its own. Returns only on failure (1).
 */
int cr_service(void);

#endif
