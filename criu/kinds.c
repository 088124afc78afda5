/*
 * The resource kinds the pipelines work through: every kind of fd (files.c asks them)
 * and of namespace (namespaces.c). The engines get the tables from here, so that they
 * never name a kind: each kind calls its engine, never the other way round.
 */
#include <stddef.h>

#include "files.h"
#include "kinds.h"
#include "namespaces.h"

/*
 * Dump asks each kind in turn whether it owns an fd; restore collects the kinds in this
 * order, so a kind may look up entries of the kinds before it (FIFOs and terminals name
 * their paths by REG entries).
 */
static const struct fdtype_ops *const fd_kinds[] = {
	&memfd_fdtype_ops, /* before reg: a memfd is a regular file too */
	&nsfs_fdtype_ops, /* before reg: an nsfs file is a regular file too */
	&tun_fdtype_ops, /* before reg: /dev/net/tun is a device file */
	&reg_fdtype_ops,
	&tty_fdtype_ops,
	&pipe_fdtype_ops,
	&fifo_fdtype_ops,
	&epoll_fdtype_ops,
	&inotify_fdtype_ops,
	&fanotify_fdtype_ops,
	&eventfd_fdtype_ops,
	&signalfd_fdtype_ops,
	&timerfd_fdtype_ops,
	&netlink_sk_fdtype_ops,
	&packet_sk_fdtype_ops,
	&unix_sk_fdtype_ops,
	&pidfd_fdtype_ops,
	&bpfmap_fdtype_ops,
	&inet_sk_fdtype_ops,
	&ext_fdtype_ops, /* last: it owns everything */
};


static const struct ns_kind *const ns_kinds[NS_KINDS] = {
	[NS_PID] = &pid_ns_kind,       [NS_NET] = &net_ns_kind,	  [NS_IPC] = &ipc_ns_kind,
	[NS_UTS] = &uts_ns_kind,       [NS_MNT] = &mnt_ns_kind,	  [NS_USER] = &user_ns_kind,
	[NS_CGROUP] = &cgroup_ns_kind, [NS_TIME] = &time_ns_kind,
};

void register_kinds(void)
{
	files_set_kinds(fd_kinds, sizeof(fd_kinds) / sizeof(fd_kinds[0]));
	ns_set_kinds(ns_kinds);
}
