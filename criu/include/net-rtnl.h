/*
 * rtnetlink as the net namespace's files speak it (net-rtnl.c): one request built in a
 * fixed buffer and acknowledged, a dump read to its end, attributes parsed by type.
 */
#ifndef CR_NET_RTNL_H
#define CR_NET_RTNL_H

#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

struct ns_id;

/* A link request (RTM_NEWLINK...): its header, its ifinfomsg and room for its attributes. */
struct nl_msg {
	struct nlmsghdr h;
	struct ifinfomsg i;
	char attrs[1024];
};

/* m's next attribute (a nest's start where len is 0), returned for nl_nest_end(). */
struct rtattr *nl_add(struct nl_msg *m, int type, const void *data, size_t len);
/* The nest that nl_add() started ends with what was added since. */
void nl_nest_end(struct nl_msg *m, struct rtattr *nest);
/* A request of type for link ifindex, acknowledged (NLM_F_ACK), with flags. */
void nl_init(struct nl_msg *m, int type, int flags, int ifindex);

/* A rtnetlink socket in criu's current net namespace: the fd or -errno, logged. */
int rtnl_open(void);
/* A request and its acknowledgement: 0 or -errno, logged unless it is quiet_err. */
int rtnl_talk_quiet(int fd, struct nl_msg *m, const char *what, int quiet_err);
/* The same, every error logged. */
int rtnl_talk(int fd, struct nl_msg *m, const char *what);
/* rtnl_talk(), tried again for 5 s while the kernel answers busy_err (a dying namespace). */
int rtnl_talk_dying_ns(int rtnl, struct nl_msg *m, const char *what, int busy_err);
/* The attributes of one nested (or top-level) list, by type; the rest NULL. */
void rta_parse(struct rtattr **tb, int max, struct rtattr *rta, int len);
/*
 * A dump request (RTM_GETLINK...) of one family in criu's current namespace, ns naming it
 * in the log: cb(arg, message) for each answer. 0 or the first failure's -errno.
 */
int rtnl_dump(const struct ns_id *ns, int type, int family,
	      int (*cb)(void *arg, struct nlmsghdr *h), void *arg);
/*
 * The nsid the namespace of socket rtnl has for the one of target_fd (RTM_GETNSID):
 * NETNSA_NSID_NOT_ASSIGNED where it has none. 0 or -errno.
 */
int rtnl_get_nsid(int rtnl, int target_fd, int32_t *nsid);

#endif
