/*
 * rtnetlink for the net namespace's files: requests built and acknowledged, dumps read
 * to their end, attributes parsed, and the nsid and IFLA_NEW_IFINDEX probes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "log.h"
#include "namespaces.h"
#include "net-rtnl.h"

struct rtattr *nl_add(struct nl_msg *m, int type, const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)m + NLMSG_ALIGN(m->h.nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

void nl_nest_end(struct nl_msg *m, struct rtattr *nest)
{
	nest->rta_len = (char *)m + m->h.nlmsg_len - (char *)nest;
}

void nl_init(struct nl_msg *m, int type, int flags, int ifindex)
{
	memset(m, 0, sizeof(*m));
	m->h.nlmsg_len = NLMSG_LENGTH(sizeof(m->i));
	m->h.nlmsg_type = type;
	m->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	m->i.ifi_family = AF_UNSPEC;
	m->i.ifi_index = ifindex;
}

int rtnl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		pr_perror("cannot open a rtnetlink socket");
	return fd < 0 ? -errno : fd;
}

/* Sends a request and waits for its acknowledgement: 0 or the kernel's -errno. */
/* A request and its acknowledgement: 0 or -errno, logged unless it is quiet_err. */
int rtnl_talk_quiet(int fd, struct nl_msg *m, const char *what, int quiet_err)
{
	char buf[4096];
	ssize_t n;

	if (send(fd, m, m->h.nlmsg_len, 0) < 0) {
		pr_perror("%s: cannot send the request", what);
		return -errno;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		pr_perror("%s: no answer", what);
		return -errno;
	}
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		const struct nlmsgerr *err = NLMSG_DATA(h);

		if (h->nlmsg_type != NLMSG_ERROR)
			continue;
		if (err->error && err->error != quiet_err)
			pr_err("%s: %s\n", what, strerror(-err->error));
		return err->error;
	}
	pr_err("%s: no acknowledgement\n", what);
	return -EIO;
}

int rtnl_talk(int fd, struct nl_msg *m, const char *what)
{
	return rtnl_talk_quiet(fd, m, what, 0);
}

/*
 * How long a link's name or MAC may stay taken by a link of a namespace going away (the
 * dumped tree's): 5 s.
 */
#define DYING_NS_WAIT_TRIES 100
#define DYING_NS_WAIT_US    50000

/* A request the kernel may refuse with busy_err while a dying namespace holds a link. */
int rtnl_talk_dying_ns(int rtnl, struct nl_msg *m, const char *what, int busy_err)
{
	for (int tries = 0; tries < DYING_NS_WAIT_TRIES; tries++) {
		int ret = rtnl_talk_quiet(rtnl, m, what, busy_err);

		if (ret != busy_err)
			return ret;
		usleep(DYING_NS_WAIT_US);
	}
	return rtnl_talk(rtnl, m, what);
}

/* The attributes of one nested (or top-level) list, by type; the rest NULL. */
void rta_parse(struct rtattr **tb, int max, struct rtattr *rta, int len)
{
	memset(tb, 0, sizeof(*tb) * (max + 1));
	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type <= max)
			tb[rta->rta_type] = rta;
}

/*
 * A dump request (RTM_GETLINK, RTM_GETRULE, ...) of one family: cb(arg, message) for each
 * answer, until one fails (its -errno returned) or the kernel is done.
 */
int rtnl_dump(const struct ns_id *ns, int type, int family,
	      int (*cb)(void *arg, struct nlmsghdr *h), void *arg)
{
	struct {
		struct nlmsghdr h;
		struct rtgenmsg g;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = type,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		 .g = {.rtgen_family = family}};
	static char buf[32768];
	bool done = false;
	int fd, ret = 0;

	fd = rtnl_open();
	if (fd < 0)
		return fd;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		pr_perror("net namespace %u: cannot send netlink dump request %d", ns->id, type);
		ret = -errno;
	}
	while (!ret && !done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0) {
			pr_perror("net namespace %u: reading netlink dump %d", ns->id, type);
			ret = -EIO;
		}
		for (; !ret && !done && n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
			} else if (h->nlmsg_type == NLMSG_ERROR) {
				pr_err("net namespace %u: netlink dump %d: %s\n", ns->id, type,
				       strerror(-((struct nlmsgerr *)NLMSG_DATA(h))->error));
				ret = -EIO;
			} else {
				ret = cb(arg, h);
			}
		}
	}
	close(fd);
	return ret;
}

/*
 * The nsid the namespace of socket rtnl has for the one of target_fd (RTM_GETNSID):
 * NETNSA_NSID_NOT_ASSIGNED where it has none. 0 or -errno.
 */
int rtnl_get_nsid(int rtnl, int target_fd, int32_t *nsid)
{
	struct {
		struct nlmsghdr h;
		struct rtgenmsg g;
		char pad[3];
		struct rtattr fd_attr;
		uint32_t fd;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETNSID,
		       .nlmsg_flags = NLM_F_REQUEST},
		 .g = {.rtgen_family = AF_UNSPEC},
		 .fd_attr = {.rta_len = RTA_LENGTH(sizeof(uint32_t)), .rta_type = NETNSA_FD},
		 .fd = target_fd};
	char buf[512];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rtattr *rta;
	ssize_t n;
	int len;

	if (send(rtnl, &req, sizeof(req), 0) < 0 || (n = recv(rtnl, buf, sizeof(buf), 0)) < 0) {
		pr_perror("RTM_GETNSID");
		return -errno;
	}
	if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_type != RTM_NEWNSID) {
		pr_err("RTM_GETNSID: %s\n",
		       h->nlmsg_type == NLMSG_ERROR
			       ? strerror(-((struct nlmsgerr *)NLMSG_DATA(h))->error)
			       : "no answer");
		return -EIO;
	}
	*nsid = NETNSA_NSID_NOT_ASSIGNED;
	len = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct rtgenmsg)));
	for (rta = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct rtgenmsg)));
	     RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type == NETNSA_NSID)
			*nsid = *(int32_t *)RTA_DATA(rta);
	return 0;
}

bool net_has_nsid(void)
{
	int rtnl = rtnl_open(), self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int32_t nsid;
	bool has = rtnl >= 0 && self >= 0 && !rtnl_get_nsid(rtnl, self, &nsid);

	if (rtnl >= 0)
		close(rtnl);
	if (self >= 0)
		close(self);
	return has;
}

/*
 * IFLA_NEW_IFINDEX (Linux 6.2) in a request that changes nothing: a kernel that knows it
 * refuses the index -1 (its policy wants one from 1), an older one ignores the attribute
 * and answers 0. Asked of the loopback of criu's namespace (CAP_NET_ADMIN).
 */
bool net_has_new_ifindex(void)
{
	int32_t bad_index = -1;
	struct nl_msg m;
	int fd = rtnl_open(), ret;

	if (fd < 0)
		return false;
	nl_init(&m, RTM_NEWLINK, 0, 1);
	nl_add(&m, IFLA_NEW_IFINDEX, &bad_index, sizeof(bad_index));
	ret = rtnl_talk_quiet(fd, &m, "probing IFLA_NEW_IFINDEX", -ERANGE);
	close(fd);
	return ret == -ERANGE;
}
