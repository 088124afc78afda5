/*
 * tun/tap (drivers/net/tun.c): files opened on /dev/net/tun (file_entry.tunf, written
 * with a REG entry of the same id for the path's flags and owner, as CRIU does) and the
 * tun links of the tree's net namespaces (net_device_entry.tun), which net-links.c dumps
 * and makes through tun_link_dump() and tun_link_create().
 *
 * A device lives in the net namespace its first file was opened in and stays there; it
 * goes away with its last attached (or detached) queue unless it is persistent. Restore
 * makes every device persistent while it fills the namespace, before any task exists, and
 * the first file a task attaches to a device dumped without IFF_PERSIST drops that again.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>

#include "files.h"
#include "kerndat.h"
#include "log.h"
#include "namespaces.h"
#include "tun.h"

#include "tun.pb-c.h"

#define TUN_DEV	      "/dev/net/tun"
#define TUN_DEV_MAJOR 10
#define TUN_DEV_MINOR 200

/* The flags a TUNSETIFF sets on a device: its type and the kernel's TUN_FEATURES. */
#define TUN_SETIFF_FLAGS                                                                           \
	(IFF_TUN | IFF_TAP | IFF_NO_PI | IFF_ONE_QUEUE | IFF_VNET_HDR | IFF_MULTI_QUEUE |          \
	 IFF_NAPI | IFF_NAPI_FRAGS)
/* What TUNGETIFF tells and netlink does not (IFF_NO_PI there is IFF_NOFILTER's bit too). */
#define TUN_IFF_ONLY_FLAGS (IFF_ONE_QUEUE | IFF_NAPI | IFF_NAPI_FRAGS)

static bool tun_owns(const struct fd_parms *p)
{
	return S_ISCHR(p->st.st_mode) && major(p->st.st_rdev) == TUN_DEV_MAJOR &&
	       minor(p->st.st_rdev) == TUN_DEV_MINOR;
}

/* ---------------------------------------------------------------- dump ---- */

/* What a file of the tree tells of its device, for the link's entry (tun_link_dump()). */
struct tun_dev_seen {
	uint32_t ns_id;
	char name[IFNAMSIZ];
	uint32_t iff_flags; /* TUNGETIFF's */
	int vnethdr;
	int sndbuf;
};

static struct tun_dev_seen *devs_seen;
static size_t nr_devs_seen;

static struct tun_dev_seen *find_dev_seen(uint32_t ns_id, const char *name)
{
	for (size_t i = 0; i < nr_devs_seen; i++)
		if (devs_seen[i].ns_id == ns_id && !strcmp(devs_seen[i].name, name))
			return &devs_seen[i];
	return NULL;
}

/* The device's vnethdr and sndbuf through fd, attached to it (a detached queue too). */
static int read_dev_settings(int fd, const char *name, struct tun_dev_seen *dev)
{
	if (ioctl(fd, TUNGETVNETHDRSZ, &dev->vnethdr) || ioctl(fd, TUNGETSNDBUF, &dev->sndbuf)) {
		pr_perror("tun device %s: cannot read its vnethdr size or sndbuf", name);
		return -errno;
	}
	return 0;
}

static int remember_dev(int fd, uint32_t ns_id, const struct ifreq *ifr)
{
	struct tun_dev_seen *grown, dev = {.ns_id = ns_id, .iff_flags = ifr->ifr_flags};
	int ret;

	if (find_dev_seen(ns_id, ifr->ifr_name))
		return 0;
	snprintf(dev.name, sizeof(dev.name), "%s", ifr->ifr_name);
	ret = read_dev_settings(fd, dev.name, &dev);
	if (ret)
		return ret;
	grown = realloc(devs_seen, (nr_devs_seen + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("tun device %s: out of memory\n", dev.name);
		return -ENOMEM;
	}
	devs_seen = grown;
	devs_seen[nr_devs_seen++] = dev;
	return 0;
}

/* The inode of the net namespace behind nsfs fd ns_fd (closed), or 0 after one line. */
static uint64_t netns_inode(int ns_fd, const struct fd_parms *p, const char *what)
{
	struct stat st;

	if (ns_fd < 0 || fstat(ns_fd, &st)) {
		pr_perror("fd %d of task %d: cannot find the net namespace of its %s", p->fd,
			  p->pid, what);
		if (ns_fd >= 0)
			close(ns_fd);
		return 0;
	}
	close(ns_fd);
	return st.st_ino;
}

/*
 * The device of an attached file lives where the file was opened unless it was moved
 * since (`ip link set ... netns`), which restore could not do again: TUNGETDEVNETNS says.
 */
static int check_dev_netns(int fd, const struct fd_parms *p, const char *name)
{
	uint64_t file_ns = netns_inode(ioctl(fd, SIOCGSKNS), p, "tun file"),
		 dev_ns = netns_inode(ioctl(fd, TUNGETDEVNETNS), p, "tun device");

	if (!file_ns || !dev_ns)
		return -EIO;
	if (file_ns == dev_ns)
		return 0;
	pr_err("fd %d of task %d: tun device %s was moved out of the net namespace its file "
	       "was opened in\n",
	       p->fd, p->pid, name);
	return -ENOTSUP;
}

/* The tree's net namespace the file fd was opened in (SIOCGSKNS), by its id. */
static int file_netns_id(int fd, const struct fd_parms *p, uint32_t *ns_id)
{
	uint64_t kid = netns_inode(ioctl(fd, SIOCGSKNS), p, "tun file");

	if (!kid)
		return -EIO;
	for (const struct ns_id *ns = ns_tree_next(NS_NET, NULL); ns;
	     ns = ns_tree_next(NS_NET, ns)) {
		if (ns->kid == kid) {
			*ns_id = ns->id;
			return 0;
		}
	}
	pr_err("fd %d of task %d: its tun file was opened in a net namespace (inode %llu) no task "
	       "of the tree lives in\n",
	       p->fd, p->pid, (unsigned long long)kid);
	return -ENOTSUP;
}

/*
 * The file's device (TUNGETIFF: its name, and whether this queue is detached), or none:
 * a file never attached answers EBADFD.
 */
static int read_tun_file(int fd, const struct fd_parms *p, TunfileEntry *tfe, struct ifreq *ifr)
{
	int ret = file_netns_id(fd, p, &tfe->ns_id);

	if (ret)
		return ret;
	tfe->has_ns_id = true;
	if (ioctl(fd, TUNGETIFF, ifr)) {
		if (errno == EBADFD)
			return 0;
		pr_perror("fd %d of task %d: cannot read its tun device", p->fd, p->pid);
		return -errno;
	}
	ifr->ifr_name[IFNAMSIZ - 1] = '\0';
	ret = check_dev_netns(fd, p, ifr->ifr_name);
	if (ret)
		return ret;
	tfe->netdev = ifr->ifr_name;
	if (ifr->ifr_flags & IFF_DETACH_QUEUE) {
		tfe->has_detached = true;
		tfe->detached = true;
	}
	return remember_dev(fd, tfe->ns_id, ifr);
}

static int tun_dump(const struct fd_parms *p, uint32_t id)
{
	TunfileEntry tfe = TUNFILE_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;
	struct ifreq ifr = {};
	int fd, ret;

	/* As CRIU: a device of criu's own namespace would be restored there, beside criu's. */
	if (!ns_root_own(NS_NET)) {
		pr_err("fd %d of task %d: a tun file is dumped only where the tree has a net "
		       "namespace of its own\n",
		       p->fd, p->pid);
		return -ENOTSUP;
	}
	fd = grab_task_fd(p);
	if (fd < 0)
		return fd;
	ret = read_tun_file(fd, p, &tfe, &ifr);
	close(fd);
	if (!ret)
		ret = dump_reg_file(p, id);
	if (ret)
		return ret;
	tfe.id = id;
	fe.type = FD_TYPES__TUNF;
	fe.id = id;
	fe.tunf = &tfe;
	pr_debug("fd %d of task %d: tun file of net namespace %u, %s%s%s\n", p->fd, p->pid,
		 tfe.ns_id, tfe.netdev ? "device " : "not attached", tfe.netdev ?: "",
		 tfe.detached ? " (detached queue)" : "");
	return write_file_entry(&fe);
}

static void tun_dump_fini(void)
{
	free(devs_seen);
	devs_seen = NULL;
	nr_devs_seen = 0;
}

/* A u8 or u32 attribute of IFLA_INFO_DATA, or dflt where the kernel did not send it. */
static uint32_t tun_attr(struct rtattr **tb, int type, uint32_t dflt)
{
	if (!tb[type])
		return dflt;
	if (RTA_PAYLOAD(tb[type]) == sizeof(uint8_t))
		return *(uint8_t *)RTA_DATA(tb[type]);
	return *(uint32_t *)RTA_DATA(tb[type]);
}

/* The device's flags as its IFLA_TUN_* attributes say. */
static uint32_t tun_netlink_flags(struct rtattr **tb)
{
	uint32_t flags = tun_attr(tb, IFLA_TUN_TYPE, IFF_TUN) & (IFF_TUN | IFF_TAP);

	if (!tun_attr(tb, IFLA_TUN_PI, 1))
		flags |= IFF_NO_PI;
	if (tun_attr(tb, IFLA_TUN_VNET_HDR, 0))
		flags |= IFF_VNET_HDR;
	if (tun_attr(tb, IFLA_TUN_MULTI_QUEUE, 0))
		flags |= IFF_MULTI_QUEUE;
	if (tun_attr(tb, IFLA_TUN_PERSIST, 0))
		flags |= IFF_PERSIST;
	return flags;
}

/*
 * A persistent device no file of the tree (nor any other) holds: a queue of our own,
 * attached with the device's flags (an attach sets them) for the time of the read.
 */
static int read_unheld_dev(const struct ns_id *ns, const char *name, uint32_t flags,
			   struct tun_dev_seen *dev)
{
	struct ifreq ifr = {.ifr_flags = flags & TUN_SETIFF_FLAGS};
	int fd, ret;

	fd = open(TUN_DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("net namespace %u: tun link %s: cannot open " TUN_DEV, ns->id, name);
		return -errno;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ret = ioctl(fd, TUNSETIFF, &ifr) ? -errno : 0;
	if (ret)
		pr_err("net namespace %u: tun link %s: cannot attach to it to read its settings: "
		       "%s\n",
		       ns->id, name, strerror(-ret));
	else
		ret = read_dev_settings(fd, name, dev);
	close(fd);
	return ret;
}

int tun_link_dump(const struct ns_id *ns, struct rtattr *info_data, const char *name,
		  TunLinkEntry *tle)
{
	struct rtattr *tb[IFLA_TUN_MAX + 1] = {};
	struct tun_dev_seen unheld = {}, *dev;
	uint32_t queues;
	int ret;

	if (info_data) {
		int len = RTA_PAYLOAD(info_data);

		for (struct rtattr *a = RTA_DATA(info_data); RTA_OK(a, len); a = RTA_NEXT(a, len))
			if (a->rta_type <= IFLA_TUN_MAX)
				tb[a->rta_type] = a;
	}
	tle->flags = tun_netlink_flags(tb);
	tle->owner = (int32_t)tun_attr(tb, IFLA_TUN_OWNER, (uint32_t)-1);
	tle->group = (int32_t)tun_attr(tb, IFLA_TUN_GROUP, (uint32_t)-1);
	queues = tun_attr(tb, IFLA_TUN_NUM_QUEUES, 0) +
		 tun_attr(tb, IFLA_TUN_NUM_DISABLED_QUEUES, 0);
	dev = find_dev_seen(ns->id, name);
	if (!dev && (queues || !(tle->flags & IFF_PERSIST))) {
		pr_err("net namespace %u: tun link %s has queues held by processes outside the "
		       "dumped tree\n",
		       ns->id, name);
		return -ENOTSUP;
	}
	if (!dev) {
		ret = read_unheld_dev(ns, name, tle->flags, &unheld);
		if (ret)
			return ret;
		dev = &unheld;
	}
	tle->flags |= dev->iff_flags & TUN_IFF_ONLY_FLAGS;
	tle->vnethdr = dev->vnethdr;
	tle->sndbuf = dev->sndbuf;
	pr_info("net namespace %u: tun link %s, flags %#x, owner %d, group %d, vnethdr %u, "
		"sndbuf %u\n",
		ns->id, name, tle->flags, tle->owner, tle->group, tle->vnethdr, tle->sndbuf);
	return 0;
}

/* ------------------------------------------------------------- restore ---- */

/* What collect() found for a file: the link it attaches to (NULL: never attached). */
struct tun_file {
	const NetDeviceEntry *link;
	uint32_t flags; /* the file's status flags (its REG twin's) */
};

static int tun_collect(struct file_desc *d)
{
	const TunfileEntry *tfe = d->fe->tunf;
	const RegFileEntry *reg = d->reg_twin ? d->reg_twin->reg : NULL;
	struct tun_file *tf;

	if (!tfe || tfe->id != d->id) {
		pr_err("files.img: tun file %u has no tun entry of its own\n", d->id);
		return -EINVAL;
	}
	tf = calloc(1, sizeof(*tf));
	if (!tf) {
		pr_err("tun file %u: out of memory\n", d->id);
		return -ENOMEM;
	}
	d->kind = tf;
	tf->flags = reg ? reg->flags : O_RDWR;
	if (tfe->netdev) {
		uint32_t ns_id = tfe->has_ns_id ? tfe->ns_id : 0;

		tf->link = net_find_link(ns_id, tfe->netdev);
		if (!tf->link || tf->link->type != ND_TYPE__TUN || !tf->link->tun) {
			pr_err("files.img: tun file %u: its device %.16s is no tun link of the "
			       "restored net namespace %u\n",
			       d->id, tfe->netdev, ns_id);
			return -EINVAL;
		}
		if (tfe->detached && !(tf->link->tun->flags & IFF_MULTI_QUEUE)) {
			pr_err("files.img: tun file %u: a detached queue of %s, which has one "
			       "queue\n",
			       d->id, tfe->netdev);
			return -EINVAL;
		}
	}
	return reg ? collect_owner(d, reg->fown) : 0;
}

/* /dev/net/tun opened in the namespace the file was: TUNSETIFF looks devices up there. */
static int open_tun_in_ns(const struct file_desc *d)
{
	const TunfileEntry *tfe = d->fe->tunf;
	uint32_t own = netns_current();
	int fd, err, ret;

	ret = netns_enter(tfe->has_ns_id ? tfe->ns_id : 0);
	if (ret)
		return ret;
	fd = open(TUN_DEV, O_RDWR | O_CLOEXEC);
	err = errno;
	if (netns_enter(own)) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	if (fd < 0) {
		pr_err("tun file %u: cannot open " TUN_DEV ": %s\n", d->id, strerror(err));
		return -err;
	}
	return fd;
}

/* The file attached to its device (and detached again, for a detached queue). */
static int attach_tun_file(int fd, const struct file_desc *d, const struct tun_file *tf)
{
	const TunfileEntry *tfe = d->fe->tunf;
	struct ifreq ifr = {.ifr_flags = tf->link->tun->flags & TUN_SETIFF_FLAGS};
	int sndbuf = tf->link->tun->sndbuf;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", tfe->netdev);
	if (ioctl(fd, TUNSETIFF, &ifr)) {
		pr_perror("tun file %u: cannot attach it to %s", d->id, tfe->netdev);
		return -errno;
	}
	/* A queue takes the default sndbuf, not its device's: set again for all of them. */
	if (ioctl(fd, TUNSETSNDBUF, &sndbuf)) {
		pr_perror("tun file %u: cannot set the sndbuf of %s", d->id, tfe->netdev);
		return -errno;
	}
	ifr.ifr_flags = IFF_DETACH_QUEUE;
	if (tfe->detached && ioctl(fd, TUNSETQUEUE, &ifr)) {
		pr_perror("tun file %u: cannot detach its queue of %s", d->id, tfe->netdev);
		return -errno;
	}
	/* The device lives on with this file: it may go with its last one again. */
	if (!(tf->link->tun->flags & IFF_PERSIST) && ioctl(fd, TUNSETPERSIST, 0)) {
		pr_perror("tun file %u: cannot make %s non-persistent again", d->id, tfe->netdev);
		return -errno;
	}
	pr_debug("tun file %u: attached to %s%s\n", d->id, tfe->netdev,
		 tfe->detached ? ", queue detached" : "");
	return 0;
}

static int tun_open(const struct file_desc *d)
{
	const struct tun_file *tf = d->kind;
	int fd = open_tun_in_ns(d), ret;

	if (fd < 0 || !tf->link)
		return fd < 0 ? fd : restore_status_flags(fd, tf->flags, d);
	ret = attach_tun_file(fd, d, tf);
	if (ret) {
		close(fd);
		return ret;
	}
	return restore_status_flags(fd, tf->flags, d);
}

/* An id of the image for TUNSETOWNER/TUNSETGROUP, which read it in the caller's user ns. */
static int tun_id(int32_t id, bool tree_ids, bool gid, uint32_t *host, const char *name)
{
	char what[48];

	*host = id;
	if (tree_ids || id == -1)
		return 0;
	snprintf(what, sizeof(what), "tun link %s's %s", name, gid ? "group" : "owner");
	return gid ? userns_host_gid(id, host, what) : userns_host_uid(id, host, what);
}

/* The device's owner, group, buffer, header size and MAC, through fd, attached to it. */
static int set_dev_settings(int fd, const NetDeviceEntry *nde, bool tree_ids)
{
	const TunLinkEntry *tle = nde->tun;
	int vnethdr = tle->vnethdr, sndbuf = tle->sndbuf;
	uint32_t owner, group;
	struct ifreq ifr = {};
	int ret;

	ret = tun_id(tle->owner, tree_ids, false, &owner, nde->name)
		      ?: tun_id(tle->group, tree_ids, true, &group, nde->name);
	if (ret)
		return ret;
	if ((tle->owner != -1 && ioctl(fd, TUNSETOWNER, (unsigned long)owner)) ||
	    (tle->group != -1 && ioctl(fd, TUNSETGROUP, (unsigned long)group))) {
		pr_perror("tun link %s: cannot set its owner %d or group %d", nde->name, tle->owner,
			  tle->group);
		return -errno;
	}
	if (ioctl(fd, TUNSETSNDBUF, &sndbuf) || ioctl(fd, TUNSETVNETHDRSZ, &vnethdr)) {
		pr_perror("tun link %s: cannot set its sndbuf %d or vnethdr size %d", nde->name,
			  sndbuf, vnethdr);
		return -errno;
	}
	if (!(tle->flags & IFF_TAP) || !nde->has_address)
		return 0;
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, nde->address.data,
	       nde->address.len < sizeof(ifr.ifr_hwaddr.sa_data) ? nde->address.len
								 : sizeof(ifr.ifr_hwaddr.sa_data));
	if (ioctl(fd, SIOCSIFHWADDR, &ifr)) {
		pr_perror("tun link %s: cannot set its MAC", nde->name);
		return -errno;
	}
	return 0;
}

int tun_link_create(const NetDeviceEntry *nde, bool tree_ids)
{
	struct ifreq ifr = {.ifr_flags = nde->tun->flags & TUN_SETIFF_FLAGS};
	unsigned int index = nde->ifindex;
	int fd, ret;

	fd = open(TUN_DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("tun link %s: cannot open " TUN_DEV, nde->name);
		return -errno;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nde->name);
	if (ioctl(fd, TUNSETIFINDEX, &index) || ioctl(fd, TUNSETIFF, &ifr)) {
		pr_perror("tun link %s (index %u): cannot create it", nde->name, nde->ifindex);
		ret = -errno;
	} else {
		ret = set_dev_settings(fd, nde, tree_ids);
	}
	/* Until a restored file holds it (attach_tun_file()); closing fd detaches ours. */
	if (!ret && ioctl(fd, TUNSETPERSIST, 1)) {
		pr_perror("tun link %s: cannot make it persistent", nde->name);
		ret = -errno;
	}
	close(fd);
	return ret;
}

/* ---------------------------------------------------------------- check ---- */

bool tun_has_dev(void)
{
	int fd = open(TUN_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* In a scratch net namespace: a device made there, its file says that namespace. */
static bool file_tells_netns(void)
{
	struct ifreq ifr = {.ifr_flags = IFF_TUN | IFF_NO_PI};
	struct stat own, file_ns;
	int fd, ns_fd;

	if (stat("/proc/self/ns/net", &own))
		return false;
	fd = open(TUN_DEV, O_RDWR | O_CLOEXEC);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "probe0");
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr))
		return false;
	ns_fd = ioctl(fd, SIOCGSKNS);
	return ns_fd >= 0 && !fstat(ns_fd, &file_ns) && file_ns.st_ino == own.st_ino;
}

bool tun_has_netns(void)
{
	return probe_in_scratch_netns(file_tells_netns);
}

const struct fdtype_ops tun_fdtype_ops = {
	.type = FD_TYPES__TUNF,
	.name = "tun",
	.owns = tun_owns,
	.dump = tun_dump,
	.dump_fini = tun_dump_fini,
	.collect = tun_collect,
	.open = tun_open,
	.inheritable = true,
	.reg_twin = true,
};
