/*
 * The net namespace's sysctls (net/ipv4/conf, net/ipv6/conf, unix, ipv4): those of each
 * link (its netdev entry's conf4, conf6) and the namespace-wide ones (netns-ID.img).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_options.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "ns-net.h"

#include "netdev.pb-c.h"

/*
 * The per-device settings, in the order CRIU's images list them: conf4[i] and conf6[i]
 * are the i-th name's (net/ipv4/conf/DEV/NAME, net/ipv6/conf/DEV/NAME).
 */
static const char *const conf4_names[] = {
	"accept_local",
	"accept_redirects",
	"accept_source_route",
	"arp_accept",
	"arp_announce",
	"arp_filter",
	"arp_ignore",
	"arp_notify",
	"bootp_relay",
	"disable_policy",
	"disable_xfrm",
	"force_igmp_version",
	"forwarding",
	"igmpv2_unsolicited_report_interval",
	"igmpv3_unsolicited_report_interval",
	"log_martians",
	"medium_id",
	"promote_secondaries",
	"proxy_arp",
	"proxy_arp_pvlan",
	"route_localnet",
	"rp_filter",
	"secure_redirects",
	"send_redirects",
	"shared_media",
	"src_valid_mark",
	"tag",
	"ignore_routes_with_linkdown",
	"drop_gratuitous_arp",
	"drop_unicast_in_l2_multicast",
};

static const char *const conf6_names[] = {
	"accept_dad",
	"accept_ra",
	"accept_ra_defrtr",
	"accept_ra_from_local",
	"accept_ra_min_hop_limit",
	"accept_ra_mtu",
	"accept_ra_pinfo",
	"accept_ra_rt_info_max_plen",
	"accept_ra_rtr_pref",
	"accept_redirects",
	"accept_source_route",
	"autoconf",
	"dad_transmits",
	"disable_ipv6",
	"drop_unicast_in_l2_multicast",
	"drop_unsolicited_na",
	"force_mld_version",
	"force_tllao",
	"forwarding",
	"hop_limit",
	"ignore_routes_with_linkdown",
	"keep_addr_on_down",
	"max_addresses",
	"max_desync_factor",
	"mldv1_unsolicited_report_interval",
	"mldv2_unsolicited_report_interval",
	"mtu",
	"ndisc_notify",
	"optimistic_dad",
	"proxy_ndp",
	"regen_max_retry",
	"router_probe_interval",
	"router_solicitation_delay",
	"router_solicitation_interval",
	"router_solicitations",
	"stable_secret",
	"suppress_frag_ndisc",
	"temp_prefered_lft",
	"temp_valid_lft",
	"use_oif_addrs_only",
	"use_optimistic",
	"use_tempaddr",
};

/* The one string among them; the kernel refuses to read it (EIO) until it is set. */
#define STABLE_SECRET "stable_secret"

/* The namespace-wide ones CRIU keeps (netns_entry.unix_conf, .ipv4_sysctl), in order. */
static const char *const unix_names[] = {"unix/max_dgram_qlen"};
static const char *const ipv4_names[] = {"ipv4/ping_group_range"};

#define NR(a) (sizeof(a) / sizeof((a)[0]))

/* Longest sysctl value kept (CRIU's bound for the string ones). */
#define SYSCTL_MAX 200

/* ------------------------------------------------------------- sysctls ---- */

static int sysctl_path(char *path, size_t len, const char *fmt, const char *proto, const char *dev,
		       const char *name)
{
	int n = snprintf(path, len, fmt, proto, dev, name);

	if (n < 0 || (size_t)n >= len) {
		pr_err("sysctl path for %s/%s too long\n", dev ?: "", name);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* One value read into e (type already set); left unset where the kernel has none. */
static int sysctl_read(const char *path, SysctlEntry *e)
{
	char buf[SYSCTL_MAX + 1];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	n = read(fd, buf, SYSCTL_MAX);
	close(fd);
	/* An unset stable_secret reads as EIO: there is nothing to restore. */
	if (n < 0 && errno == EIO && e->type == SYSCTL_TYPE__CTL_STR)
		return 0;
	if (n < 0) {
		pr_perror("cannot read %s", path);
		return -errno;
	}
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (e->type == SYSCTL_TYPE__CTL_STR) {
		e->sarg = strdup(buf);
		if (!e->sarg) {
			pr_err("%s: out of memory\n", path);
			return -ENOMEM;
		}
		return 0;
	}
	e->iarg = strtol(buf, NULL, 10);
	e->has_iarg = true;
	return 0;
}

static int sysctl_write(const char *path, const SysctlEntry *e)
{
	char buf[32];
	const char *val = buf;
	int fd, ret = 0;

	if (e->type == SYSCTL_TYPE__CTL_STR && e->sarg)
		val = e->sarg;
	else if (e->type == SYSCTL_TYPE__CTL_32 && e->has_iarg)
		snprintf(buf, sizeof(buf), "%d", e->iarg);
	else
		return 0; /* the dumping kernel had none */
	fd = open(path, O_WRONLY | O_CLOEXEC);
	/* --weak-sysctls: a kernel without this sysctl (or this link without IPv6) skips it. */
	if (fd < 0 && errno == ENOENT && opts.weak_sysctls) {
		pr_warn("%s: no such sysctl on this kernel, \"%s\" not set (--weak-sysctls)\n",
			path, val);
		return 0;
	}
	if (fd < 0 || write(fd, val, strlen(val)) < 0) {
		pr_perror("cannot set %s to \"%s\"", path, val);
		ret = -errno;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* A freshly allocated list of n entries, each typed as names[i] wants. */
static SysctlEntry **sysctls_new(const char *const *names, size_t n)
{
	SysctlEntry **list = calloc(n, sizeof(*list) + sizeof(SysctlEntry));
	SysctlEntry *entries = (SysctlEntry *)(list + n);

	if (!list) {
		pr_err("out of memory for %zu sysctls\n", n);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		sysctl_entry__init(&entries[i]);
		entries[i].type =
			strcmp(names[i], STABLE_SECRET) && strcmp(names[i], "ipv4/ping_group_range")
				? SYSCTL_TYPE__CTL_32
				: SYSCTL_TYPE__CTL_STR;
		list[i] = &entries[i];
	}
	return list;
}

static void sysctls_free(SysctlEntry **list, size_t n)
{
	if (!list)
		return;
	for (size_t i = 0; i < n; i++)
		free(list[i]->sarg);
	free(list);
}

/*
 * A list of settings read or written: net/PROTO/conf/DEV/NAME for a device's (dev set),
 * net/NAME for the namespace's (proto and dev NULL).
 */
static int sysctls_op(bool write, const char *proto, const char *dev, const char *const *names,
		      SysctlEntry **list, size_t n)
{
	char path[PATH_MAX];
	ssize_t redirects = -1;
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		/* Written last: setting forwarding resets it (kernel's devinet/addrconf). */
		if (write && !strcmp(names[i], "accept_redirects")) {
			redirects = i;
			continue;
		}
		ret = dev ? sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", proto,
					dev, names[i])
			  : sysctl_path(path, sizeof(path), "/proc/sys/net/%s%s%s", "", "",
					names[i]);
		if (!ret)
			ret = write ? sysctl_write(path, list[i]) : sysctl_read(path, list[i]);
	}
	if (!ret && redirects >= 0 &&
	    !(ret = sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", proto, dev,
				names[redirects])))
		ret = sysctl_write(path, list[redirects]);
	return ret;
}

int net_link_sysctls_read(NetDeviceEntry *nde)
{
	int ret;

	nde->n_conf4 = NR(conf4_names);
	nde->n_conf6 = NR(conf6_names);
	nde->conf4 = sysctls_new(conf4_names, nde->n_conf4);
	nde->conf6 = sysctls_new(conf6_names, nde->n_conf6);
	ret = !nde->conf4 || !nde->conf6 ? -ENOMEM : 0;
	if (!ret)
		ret = sysctls_op(false, "ipv4", nde->name, conf4_names, nde->conf4, nde->n_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv6", nde->name, conf6_names, nde->conf6, nde->n_conf6);
	return ret;
}

void net_link_sysctls_free(NetDeviceEntry *nde)
{
	sysctls_free(nde->conf4, nde->n_conf4);
	sysctls_free(nde->conf6, nde->n_conf6);
}

int net_link_sysctls_write(const NetDeviceEntry *nde)
{
	int ret;

	ret = sysctls_op(true, "ipv4", nde->name, conf4_names, nde->conf4,
			 nde->n_conf4 < NR(conf4_names) ? nde->n_conf4 : NR(conf4_names));
	if (!ret)
		ret = sysctls_op(true, "ipv6", nde->name, conf6_names, nde->conf6,
				 nde->n_conf6 < NR(conf6_names) ? nde->n_conf6 : NR(conf6_names));
	return ret;
}

int net_dump_netns_entry(const struct ns_id *ns)
{
	NetnsEntry e = NETNS_ENTRY__INIT;
	struct cr_img *img;
	int ret;

	e.n_def_conf4 = e.n_all_conf4 = NR(conf4_names);
	e.n_def_conf6 = e.n_all_conf6 = NR(conf6_names);
	e.n_unix_conf = NR(unix_names);
	e.n_ipv4_sysctl = NR(ipv4_names);
	e.def_conf4 = sysctls_new(conf4_names, e.n_def_conf4);
	e.all_conf4 = sysctls_new(conf4_names, e.n_all_conf4);
	e.def_conf6 = sysctls_new(conf6_names, e.n_def_conf6);
	e.all_conf6 = sysctls_new(conf6_names, e.n_all_conf6);
	e.unix_conf = sysctls_new(unix_names, e.n_unix_conf);
	e.ipv4_sysctl = sysctls_new(ipv4_names, e.n_ipv4_sysctl);
	ret = e.def_conf4 && e.all_conf4 && e.def_conf6 && e.all_conf6 && e.unix_conf &&
			      e.ipv4_sysctl
		      ? 0
		      : -ENOMEM;
	if (!ret)
		ret = sysctls_op(false, "ipv4", "all", conf4_names, e.all_conf4, e.n_all_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv4", "default", conf4_names, e.def_conf4, e.n_def_conf4);
	if (!ret)
		ret = sysctls_op(false, "ipv6", "all", conf6_names, e.all_conf6, e.n_all_conf6);
	if (!ret)
		ret = sysctls_op(false, "ipv6", "default", conf6_names, e.def_conf6, e.n_def_conf6);
	if (!ret)
		ret = sysctls_op(false, NULL, NULL, unix_names, e.unix_conf, e.n_unix_conf);
	if (!ret)
		ret = sysctls_op(false, NULL, NULL, ipv4_names, e.ipv4_sysctl, e.n_ipv4_sysctl);
	img = ret ? NULL : open_image(CR_IMG_NETNS, O_WRONLY, ns->id);
	if (!ret && !img)
		ret = -EIO;
	if (img) {
		ret = pb_write_one(img, &e);
		close_image(img);
	}
	sysctls_free(e.def_conf4, e.n_def_conf4);
	sysctls_free(e.all_conf4, e.n_all_conf4);
	sysctls_free(e.def_conf6, e.n_def_conf6);
	sysctls_free(e.all_conf6, e.n_all_conf6);
	sysctls_free(e.unix_conf, e.n_unix_conf);
	sysctls_free(e.ipv4_sysctl, e.n_ipv4_sysctl);
	return ret;
}

/*
 * A link going up takes its MTU as its net.ipv6.conf mtu again (addrconf's NETDEV_UP): the
 * image's, written with the others before the flags, goes in once more after them.
 */
int net_link_rewrite_ipv6_mtu(const NetDeviceEntry *nde)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < NR(conf6_names) && i < nde->n_conf6; i++)
		if (!strcmp(conf6_names[i], "mtu"))
			break;
	if (i == NR(conf6_names) || i == nde->n_conf6)
		return 0;
	return sysctl_path(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", "ipv6", nde->name,
			   "mtu")
		       ?: sysctl_write(path, nde->conf6[i]);
}

/* A list of the image's, no longer than the names this criu knows. */
#define CONF_OP(proto, dev, names, list, n)                                                        \
	sysctls_op(true, proto, dev, names, list, (n) < NR(names) ? (n) : NR(names))

/*
 * net.ipv4.ping_group_range holds gids, which the kernel reads as the writer's user
 * namespace sees them: the image's, as the tree sees them, go in as criu sees them (as
 * they are, written by the root task).
 */
static int ping_range_to_host(const SysctlEntry *e, SysctlEntry *host, char *buf, size_t size)
{
	const char *what = "net.ipv4.ping_group_range";
	unsigned int low, high;
	uint32_t host_low, host_high;
	int ret;

	*host = *e;
	if (!e->sarg)
		return 0;
	if (sscanf(e->sarg, "%u %u", &low, &high) != 2) {
		pr_err("netns image: %s \"%.32s\" is not two gids\n", what, e->sarg);
		return -EINVAL;
	}
	if (net_filled_by_tree)
		return 0;
	ret = userns_host_gid(low, &host_low, what) ?: userns_host_gid(high, &host_high, what);
	snprintf(buf, size, "%u\t%u", host_low, host_high);
	host->sarg = buf;
	return ret;
}

int net_restore_netns_sysctls(const NetnsEntry *e)
{
	SysctlEntry ping_range, *ipv4[NR(ipv4_names)];
	char range[32];
	int ret;

	if (e->n_def_conf || e->n_all_conf) {
		pr_err("netns image: settings in CRIU's old format (def_conf): not supported\n");
		return -ENOTSUP;
	}
	ret = CONF_OP("ipv4", "all", conf4_names, e->all_conf4, e->n_all_conf4);
	if (!ret)
		ret = CONF_OP("ipv4", "default", conf4_names, e->def_conf4, e->n_def_conf4);
	if (!ret)
		ret = CONF_OP("ipv6", "all", conf6_names, e->all_conf6, e->n_all_conf6);
	if (!ret)
		ret = CONF_OP("ipv6", "default", conf6_names, e->def_conf6, e->n_def_conf6);
	if (!ret)
		ret = CONF_OP(NULL, NULL, unix_names, e->unix_conf, e->n_unix_conf);
	if (!ret && e->n_ipv4_sysctl) {
		ret = ping_range_to_host(e->ipv4_sysctl[0], &ping_range, range, sizeof(range));
		ipv4[0] = &ping_range;
	}
	if (!ret)
		ret = CONF_OP(NULL, NULL, ipv4_names, ipv4, e->n_ipv4_sysctl);
	return ret;
}
