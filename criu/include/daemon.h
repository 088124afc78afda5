/*
 * What a long-running criu reports to whoever started it: --status-fd and the daemon's
 * fork and pidfile (daemon.c). Used by the pipelines and the daemons; reads only options.
 */
#ifndef CR_DAEMON_H
#define CR_DAEMON_H

/* --status-fd must name an open descriptor; scripts and restored tasks do not get it. */
int prepare_status_fd(void);

/*
 * --status-fd: the run succeeded (dump: images written and the tree released; restore:
 * the tree runs): writes one \0 and closes it. Called once; no-op without the option.
 */
void report_status_ready(void);

/*
 * The daemons (lazy-pages, page-server), once they listen: -d forks, the caller gets its
 * prompt back; --pidfile names the daemon. 0 in the daemon, -1 after one line.
 */
int daemonize(void);

#endif
