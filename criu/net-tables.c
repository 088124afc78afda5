/*
 * The net namespace's tables as CRIU keeps them, raw images the tools write and read:
 * addresses, routes and rules (ip ... save/restore), iptables (iptables-*-save/restore).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "net-lock.h"
#include "net-nft.h"
#include "net-rtnl.h"
#include "ns-net.h"
#include "tool.h"

/* One of the kernel's own rules of a new namespace (lookup local at 0, main at 32766). */
static bool rule_is_default(struct nlmsghdr *h)
{
	struct fib_rule_hdr *frh = NLMSG_DATA(h);
	struct rtattr *tb[FRA_MAX + 1];
	uint32_t prio = 0;

	rta_parse(tb, FRA_MAX, (struct rtattr *)((char *)frh + NLMSG_ALIGN(sizeof(*frh))),
		  h->nlmsg_len - NLMSG_LENGTH(sizeof(*frh)));
	if (tb[FRA_PRIORITY])
		prio = *(uint32_t *)RTA_DATA(tb[FRA_PRIORITY]);
	/* The selectors a rule of the user's would have (the kernel's have none). */
	if (tb[FRA_SRC] || tb[FRA_DST] || tb[FRA_IIFNAME] || tb[FRA_OIFNAME] || tb[FRA_FWMARK] ||
	    frh->src_len || frh->dst_len)
		return false;
	return (prio == 0 && frh->table == RT_TABLE_LOCAL) ||
	       (prio == 32766 && frh->table == RT_TABLE_MAIN);
}

/*
 * How ip and the iptables tools run here: in criu's current namespaces (the root task's, when
 * it fills a nested one), as that user namespace's root, stdin from in_fd, stdout to out_fd
 * (-1: /dev/null and the log), a non-zero exit status an error.
 */
static struct tool_run ns_net_tool(const char *const argv[], int in_fd, int out_fd)
{
	return (struct tool_run){.argv = argv,
				 .net_ns_fd = -1,
				 .in_fd = in_fd,
				 .out_fd = out_fd,
				 .must_succeed = true,
				 .as_ns_root = true};
}

/* A raw image filled by a tool's output. */
static int dump_tool_output(enum cr_img_type type, const struct ns_id *ns, const char *const argv[])
{
	struct cr_img *img = open_image(type, O_WRONLY, ns->id);
	int ret;

	if (!img)
		return -EIO;
	ret = tool_run(ns_net_tool(argv, -1, img->fd));
	close_image(img);
	return ret;
}

/*
 * Routes as `ip route save` wrote them (a magic, then RTM_NEWROUTE messages), made
 * restorable, in place: the kernel's own (proto kernel, and the local table) go, as adding
 * the addresses makes them again, and so do the flags a link without carrier gives a route
 * (DEAD, LINKDOWN), which the kernel refuses in a request. The length kept.
 */
static size_t routes_restorable(char *buf, size_t len)
{
	size_t kept = sizeof(uint32_t), at = sizeof(uint32_t);

	if (len < sizeof(uint32_t))
		return len;
	while (NLMSG_OK((struct nlmsghdr *)(buf + at), len - at)) {
		struct nlmsghdr *h = (struct nlmsghdr *)(buf + at);
		struct rtmsg *rtm = NLMSG_DATA(h);
		size_t size = NLMSG_ALIGN(h->nlmsg_len);

		at += size;
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*rtm)) ||
		    rtm->rtm_protocol == RTPROT_KERNEL || rtm->rtm_table == RT_TABLE_LOCAL)
			continue;
		rtm->rtm_flags &= ~(RTNH_F_DEAD | RTNH_F_LINKDOWN);
		memmove(buf + kept, h, size);
		kept += size;
	}
	return kept;
}

/* The routes image just written, made restorable (the image is open for writing only). */
static int filter_routes(struct cr_img *img)
{
	char *buf = NULL, path[64];
	struct stat st;
	size_t kept;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", img->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		pr_perror("%s: cannot open it again to read it", img->name);
		ret = -errno;
		goto out;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		pr_err("%s: out of memory\n", img->name);
		ret = -ENOMEM;
		goto out;
	}
	if (pread(fd, buf, st.st_size, 0) != st.st_size) {
		pr_perror("%s: cannot read it back", img->name);
		ret = -EIO;
		goto out;
	}
	kept = routes_restorable(buf, st.st_size);
	if (ftruncate(fd, 0) || pwrite(fd, buf, kept, 0) != (ssize_t)kept) {
		pr_perror("%s: cannot rewrite it", img->name);
		ret = -EIO;
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Every table's routes of one family (`ip [-6] route save table all`), filtered. */
static int dump_routes(const struct ns_id *ns, enum cr_img_type type, const char *const argv[])
{
	struct cr_img *img = open_image(type, O_WRONLY, ns->id);
	int ret;

	if (!img)
		return -EIO;
	ret = tool_run(ns_net_tool(argv, -1, img->fd)) ?: filter_routes(img);
	close_image(img);
	return ret;
}

/*
 * The rules: `ip rule save` writes the IPv4 ones only, as CRIU keeps them; the IPv6 ones of
 * `ip -6 rule save` but the kernel's own follow in the same image, without their magic,
 * so that `ip rule restore` (upstream's too, which flushes the IPv4 defaults only) adds
 * them without making the kernel's twice.
 */
static int dump_rules(const struct ns_id *ns)
{
	static const char *const rule[] = {"ip", "rule", "save", NULL};
	static const char *const rule6[] = {"ip", "-6", "rule", "save", NULL};
	struct cr_img *img = open_image(CR_IMG_RULE, O_WRONLY, ns->id);
	char *buf = NULL;
	struct stat st;
	int ret, fd;

	if (!img)
		return -EIO;
	fd = memfd_create("rules6", MFD_CLOEXEC);
	ret = fd < 0 ? -errno :
		       tool_run(ns_net_tool(rule, -1, img->fd)) ?: tool_run(ns_net_tool(rule6, -1, fd));
	if (!ret && (fstat(fd, &st) || !(buf = malloc(st.st_size + 1)) ||
		     pread(fd, buf, st.st_size, 0) != st.st_size)) {
		pr_perror("%s: cannot read the IPv6 rules back", img->name);
		ret = -EIO;
	}
	for (size_t at = sizeof(uint32_t);
	     !ret && NLMSG_OK((struct nlmsghdr *)(buf + at), st.st_size - at);) {
		struct nlmsghdr *h = (struct nlmsghdr *)(buf + at);

		at += NLMSG_ALIGN(h->nlmsg_len);
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct fib_rule_hdr)) || rule_is_default(h))
			continue;
		ret = img_write_raw(img, h, NLMSG_ALIGN(h->nlmsg_len));
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	close_image(img);
	return ret;
}

/* Whether the kernel has a table of this family in the namespace (/proc/net/NAME). */
static int has_tables(const char *names, bool *has)
{
	char path[64], c;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/net/%s", names);
	*has = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : (pr_perror("cannot open %s", path), -errno);
	n = read(fd, &c, 1);
	close(fd);
	*has = n > 0;
	return 0;
}

/*
 * A tool's output, as it printed it, into img: its lines but the network lock's own (the
 * dump saves the tables while the namespace is locked, net-lock.c), and with skip_filter
 * not its filter table (the lock made it: net-lock.c), through a memfd.
 */
static int save_tool_output(struct cr_img *img, const char *const argv[], bool skip_filter)
{
	int fd = memfd_create(argv[0], MFD_CLOEXEC), ret;
	bool in_filter = false;
	char *buf = NULL;
	off_t size;

	if (fd < 0) {
		pr_perror("%s: cannot make a memfd for its output", argv[0]);
		return -errno;
	}
	ret = tool_run(ns_net_tool(argv, -1, fd));
	size = ret ? 0 : lseek(fd, 0, SEEK_END);
	if (size > 0) {
		buf = malloc(size);
		if (!buf || pread(fd, buf, size, 0) != size) {
			pr_perror("%s: cannot read its output back", argv[0]);
			ret = -EIO;
		}
	}
	for (off_t at = 0; !ret && buf && at < size;) {
		char *nl = memchr(buf + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (buf + at)) : (size_t)(size - at);
		bool skip = in_filter;

		if (skip_filter && len == 7 && !memcmp(buf + at, "*filter", 7))
			skip = in_filter = true;
		else if (in_filter && len == 6 && !memcmp(buf + at, "COMMIT", 6))
			in_filter = false;
		if (!skip && !netlock_is_lock_rule(buf + at, len))
			ret = img_write_raw(img, buf + at, len + (nl ? 1 : 0));
		at += len + 1;
	}
	free(buf);
	close(fd);
	return ret;
}

/*
 * iptables, whichever backend holds them, one after the other in CRIU's raw image as the
 * tools print them: the legacy tables (iptables-legacy-save, only where the kernel has
 * some: /proc/net/ip_tables_names, so that a namespace without needs no legacy tool), then
 * those made through iptables-nft (iptables-nft-save prints nothing where there are none).
 * Each part starts with its tool's "# Generated by" line, by which restore_iptables()
 * picks the tool that loads it. nftables tables that iptables-nft-save does not print are
 * not iptables' and not saved here.
 */
static int dump_iptables(const struct ns_id *ns, enum cr_img_type type, bool v6)
{
	const char *const legacy[] = {v6 ? "ip6tables-legacy-save" : "iptables-legacy-save", NULL};
	const char *const nft[] = {v6 ? "ip6tables-nft-save" : "iptables-nft-save", NULL};
	struct cr_img *img;
	bool has_legacy;
	int ret;

	ret = has_tables(v6 ? "ip6_tables_names" : "ip_tables_names", &has_legacy);
	if (ret)
		return ret;
	img = open_image(type, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	if (has_legacy)
		ret = save_tool_output(img, legacy, false);
	if (!ret)
		ret = save_tool_output(img, nft, netlock_made_filter_table(v6));
	close_image(img);
	return ret;
}

int net_dump_tables(const struct ns_id *ns)
{
	static const char *const addr[] = {"ip", "addr", "save", NULL};
	static const char *const route[] = {"ip", "route", "save", "table", "all", NULL};
	static const char *const route6[] = {"ip", "-6", "route", "save", "table", "all", NULL};
	int ret;

	ret = dump_tool_output(CR_IMG_IFADDR, ns, addr);
	if (!ret)
		ret = dump_routes(ns, CR_IMG_ROUTE, route);
	if (!ret)
		ret = dump_routes(ns, CR_IMG_ROUTE6, route6);
	if (!ret)
		ret = dump_rules(ns);
	if (!ret)
		ret = dump_iptables(ns, CR_IMG_IPTABLES, false);
	if (!ret)
		ret = dump_iptables(ns, CR_IMG_IP6TABLES, true);
	if (!ret)
		ret = nft_dump_ruleset(ns);
	return ret;
}

/* A raw image fed to a tool's stdin; an empty (or, for optional ones, missing) one skipped. */
static int restore_tool_input(enum cr_img_type type, const struct ns_id *ns, bool optional,
			      const char *const argv[])
{
	struct cr_img *img;
	int ret;

	if (optional && !img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = img->size ? tool_run(ns_net_tool(argv, img->fd, -1)) : 0;
	close_image(img);
	return ret;
}

/*
 * The restore tool of the part of an iptables image that header starts ("# Generated by
 * TOOL vX.Y (BACKEND) on DATE", as iptables-*-save print it): iptables-nft's names
 * nf_tables, iptables-legacy-save calls itself iptables-save; a part without one (an image
 * made by hand) goes to the system's iptables-restore.
 */
static const char *iptables_restore_tool(const char *header, size_t len, bool v6)
{
	static const char generated[] = "# Generated by ";

	if (len < sizeof(generated) - 1 || memcmp(header, generated, sizeof(generated) - 1))
		return v6 ? "ip6tables-restore" : "iptables-restore";
	if (memmem(header, len, "nf_tables", 9) || memmem(header, len, "-nft-", 5))
		return v6 ? "ip6tables-nft-restore" : "iptables-nft-restore";
	return v6 ? "ip6tables-legacy-restore" : "iptables-legacy-restore";
}

/* Lines [from, to) of an iptables image's part into fd, but the network lock's. */
static int write_ipt_lines(int fd, const char *from, const char *to)
{
	while (from < to) {
		const char *end = memchr(from, '\n', to - from);
		size_t len = end ? (size_t)(end - from) + 1 : (size_t)(to - from);

		if (!netlock_is_lock_rule(from, end ? len - 1 : len) &&
		    write(fd, from, len) != (ssize_t)len)
			return -errno;
		from += len;
	}
	return 0;
}

/* One part of an iptables image, without the network lock's lines, fed to its tool. */
static int restore_iptables_part(const char *part, size_t size, bool v6)
{
	const char *nl = memchr(part, '\n', size);
	size_t header_len = nl ? (size_t)(nl - part) : size;
	const char *const argv[] = {iptables_restore_tool(part, header_len, v6), "-w", NULL};
	int fd = memfd_create("iptables", MFD_CLOEXEC), ret = 0;

	if (fd < 0) {
		pr_perror("%s: cannot make a memfd for its input", argv[0]);
		return -errno;
	}
	if (write_ipt_lines(fd, part, part + size)) {
		pr_perror("%s: cannot pass its input", argv[0]);
		ret = -EIO;
	}
	if (!ret && lseek(fd, 0, SEEK_SET)) {
		pr_perror("%s: cannot pass its input", argv[0]);
		ret = -EIO;
	}
	ret = ret ?: tool_run(ns_net_tool(argv, fd, -1));
	close(fd);
	return ret;
}

/*
 * The next part of an iptables image from at (iptables-*-save print a "# Generated by"
 * line before each table), as [*part, return).
 */
static size_t next_ipt_part(const char *buf, size_t size, size_t at)
{
	static const char generated[] = "\n# Generated by ";
	const char *next = memmem(buf + at, size - at, generated, sizeof(generated) - 1);

	return next ? (size_t)(next - buf) + 1 : size;
}

static bool is_legacy_part(const char *part, size_t size, bool v6)
{
	const char *nl = memchr(part, '\n', size);

	return strstr(iptables_restore_tool(part, nl ? (size_t)(nl - part) : size, v6), "-legacy-");
}

/*
 * An iptables image (dump_iptables()), each part by its own restore tool: each loads (and
 * flushes first) its own backend's table only. The legacy ones in the reverse of their
 * order: the kernel lists a namespace's legacy tables (and iptables-legacy-save prints
 * them) newest first, so made in this order they are listed as dumped. The network lock's
 * lines an image of CRIU's may have (it saves the tables while they are locked) are left
 * out: the restore locks the namespace itself (net-lock.c).
 */
static int restore_iptables(enum cr_img_type type, const struct ns_id *ns, bool v6)
{
	size_t starts[64], nr = 0, size;
	struct cr_img *img;
	char *buf = NULL;
	int ret;

	if (!img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	size = img->size;
	buf = malloc(size + 1);
	ret = buf ? img_read_raw(img, buf, size) : -ENOMEM;
	if (ret)
		pr_err("%s: cannot read it: %s\n", img->name, strerror(-ret));
	for (size_t at = 0; !ret && at < size; at = next_ipt_part(buf, size, at)) {
		if (nr == sizeof(starts) / sizeof(starts[0])) {
			pr_err("%s: more than %zu tables\n", img->name, nr);
			ret = -E2BIG;
		}
		starts[nr++] = at;
	}
	for (size_t i = 0; !ret && i < nr; i++) {
		size_t len = next_ipt_part(buf, size, starts[i]) - starts[i];

		if (!is_legacy_part(buf + starts[i], len, v6))
			ret = restore_iptables_part(buf + starts[i], len, v6);
	}
	for (size_t i = nr; !ret && i-- > 0;) {
		size_t len = next_ipt_part(buf, size, starts[i]) - starts[i];

		if (is_legacy_part(buf + starts[i], len, v6))
			ret = restore_iptables_part(buf + starts[i], len, v6);
	}
	free(buf);
	close_image(img);
	return ret;
}

/*
 * A routes image fed to `ip route restore` made restorable first (CRIU's own dumps keep
 * what the kernel makes and a link without carrier's flags), through a memfd.
 */
static int restore_routes(enum cr_img_type type, const struct ns_id *ns, bool optional,
			  const char *const argv[])
{
	struct cr_img *img;
	char *buf = NULL;
	size_t kept;
	int ret, fd = -1;

	if (optional && !img_exists(type, ns->id))
		return 0;
	img = open_image(type, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	buf = malloc(img->size + 1);
	ret = buf ? img_read_raw(img, buf, img->size) : -ENOMEM;
	if (ret)
		pr_err("%s: cannot read it: %s\n", img->name, strerror(-ret));
	if (!ret && img->size) {
		kept = routes_restorable(buf, img->size);
		fd = memfd_create("routes", MFD_CLOEXEC);
		if (fd < 0 || write(fd, buf, kept) != (ssize_t)kept || lseek(fd, 0, SEEK_SET)) {
			pr_perror("%s: cannot pass it on", img->name);
			ret = -EIO;
		}
		ret = ret ?: tool_run(ns_net_tool(argv, fd, -1));
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	close_image(img);
	return ret;
}

/* In the new namespace: addresses, routes, rules, iptables and nftables, as CRIU does. */
int net_restore_tables(const struct ns_id *ns)
{
	static const char *const addr[] = {"ip", "addr", "restore", NULL};
	static const char *const route[] = {"ip", "route", "restore", NULL};
	static const char *const rule_flush[] = {"ip", "rule", "flush", NULL};
	static const char *const rule_local[] = {"ip", "rule", "delete", "table", "local", NULL};
	static const char *const rule[] = {"ip", "rule", "restore", NULL};
	int ret;

	ret = restore_tool_input(CR_IMG_IFADDR, ns, false, addr);
	if (!ret)
		ret = restore_routes(CR_IMG_ROUTE, ns, false, route);
	if (!ret)
		ret = restore_routes(CR_IMG_ROUTE6, ns, true, route);
	/* A new namespace has the kernel's default rules: the image has them too. */
	if (!ret && img_exists(CR_IMG_RULE, ns->id))
		ret = tool_run(ns_net_tool(rule_flush, -1, -1))
			      ?: tool_run(ns_net_tool(rule_local, -1, -1));
	if (!ret)
		ret = restore_tool_input(CR_IMG_RULE, ns, true, rule);
	if (!ret)
		ret = restore_iptables(CR_IMG_IPTABLES, ns, false);
	if (!ret)
		ret = restore_iptables(CR_IMG_IP6TABLES, ns, true);
	/* After the iptables: an image of CRIU's may have their tables again (net-nft.c). */
	if (!ret)
		ret = nft_restore_ruleset(ns);
	return ret;
}
