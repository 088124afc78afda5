/*
 * nftables of a tree's net namespaces, as CRIU keeps them: nftables-NSID.img holds the
 * text `nft list ruleset` prints, loaded again with `nft -f` in the new namespace before
 * the tasks run. The tables iptables-nft made are net-tables.c's (its iptables images), so
 * that no table is saved twice; which those are is told by iptables-nft-save itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "image.h"
#include "kerndat.h"
#include "log.h"
#include "namespaces.h"
#include "net-nft.h"
#include "netlock-nft.h"
#include "tool.h"

/* One table of the namespace, as the kernel names it. */
struct nft_table {
	uint8_t family; /* NFPROTO_* */
	char name[NFT_TABLE_MAXNAMELEN];
	/*
	 * Why the image leaves it out (NULL: saved): iptables-nft-save lists it (the iptables
	 * images hold it), or it is the network lock's (netlock-nft.c), saved nowhere.
	 */
	const char *left_out;
};

struct nft_tables {
	struct nft_table *tables;
	size_t nr;
};

/* nft's name of a table family, as its listings print it. */
static const char *family_name(uint8_t family)
{
	switch (family) {
	case NFPROTO_INET:
		return "inet";
	case NFPROTO_IPV4:
		return "ip";
	case NFPROTO_ARP:
		return "arp";
	case NFPROTO_NETDEV:
		return "netdev";
	case NFPROTO_BRIDGE:
		return "bridge";
	case NFPROTO_IPV6:
		return "ip6";
	}
	return "unknown";
}

/* A NEWTABLE message of a GETTABLE dump: its family and name appended to list. */
static int add_table(struct nft_tables *list, const struct nlmsghdr *h)
{
	const struct nfgenmsg *g = NLMSG_DATA(h);
	const struct nlattr *a = (const void *)((const char *)g + NLMSG_ALIGN(sizeof(*g)));
	int left = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(*g)));
	struct nft_table *t;

	t = realloc(list->tables, (list->nr + 1) * sizeof(*t));
	if (!t) {
		pr_err("out of memory listing nftables tables\n");
		return -ENOMEM;
	}
	list->tables = t;
	t += list->nr;
	memset(t, 0, sizeof(*t));
	t->family = g->nfgen_family;
	for (; left >= (int)sizeof(*a) && a->nla_len >= sizeof(*a) && a->nla_len <= left;
	     left -= NLA_ALIGN(a->nla_len),
	     a = (const void *)((const char *)a + NLA_ALIGN(a->nla_len))) {
		if ((a->nla_type & NLA_TYPE_MASK) == NFTA_TABLE_NAME)
			snprintf(t->name, sizeof(t->name), "%.*s", (int)(a->nla_len - NLA_HDRLEN),
				 (const char *)a + NLA_HDRLEN);
	}
	list->nr++;
	return 0;
}

/*
 * The tables of the caller's net namespace, from the kernel (NFT_MSG_GETTABLE): what there
 * is to save is known without nft, which a namespace with no tables does not need. A
 * kernel without nf_tables has none.
 */
static int list_kernel_tables(struct nft_tables *list)
{
	struct {
		struct nlmsghdr h;
		struct nfgenmsg g;
	} req = {
		.h = {.nlmsg_len = sizeof(req),
		      .nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE,
		      .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		      .nlmsg_seq = 1},
		.g = {.nfgen_family = NFPROTO_UNSPEC, .version = NFNETLINK_V0},
	};
	static char buf[32768];
	int sk, ret = 0;
	bool done = false;

	sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (sk < 0) {
		pr_perror("cannot open a netfilter netlink socket");
		return -errno;
	}
	if (send(sk, &req, sizeof(req), 0) != sizeof(req)) {
		pr_perror("cannot ask the kernel for the nftables tables");
		close(sk);
		return -errno;
	}
	while (!done && !ret) {
		ssize_t n = recv(sk, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n < 0) {
			pr_perror("cannot read the nftables tables");
			ret = -errno;
			break;
		}
		for (; NLMSG_OK(h, n) && !done && !ret; h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
			} else if (h->nlmsg_type == NLMSG_ERROR) {
				int err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;

				done = true;
				if (err == -EOPNOTSUPP || err == -EPROTONOSUPPORT || err == -ENOENT)
					continue; /* no nf_tables: no tables */
				pr_err("cannot list the nftables tables: %s\n", strerror(-err));
				ret = err;
			} else if (h->nlmsg_type ==
				   ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE)) {
				ret = add_table(list, h);
			}
		}
	}
	close(sk);
	return ret;
}

struct nft_table_query {
	uint8_t family;
	const char *name;
};

/* In the child, in the namespace asked about: exit status 0 the table is there, 1 not, 2 error. */
static int nft_table_listed(void *arg)
{
	const struct nft_table_query *query = arg;
	struct nft_tables list = {};

	if (list_kernel_tables(&list))
		return 2;
	for (size_t i = 0; i < list.nr; i++)
		if (list.tables[i].family == query->family && !strcmp(list.tables[i].name, query->name))
			return 0;
	return 1;
}

int nft_has_table(int ns_fd, uint8_t family, const char *name)
{
	struct nft_table_query query = { .family = family, .name = name };
	int ret;

	/* In a child: the question is asked in ns_fd's namespace (-1: the caller's). */
	ret = tool_run((struct tool_run){ .child_fn = nft_table_listed,
					  .child_arg = &query,
					  .name = "the nftables tables' listing",
					  .net_ns_fd = ns_fd,
					  .in_fd = -1,
					  .out_fd = -1 });
	if (ret < 0 || ret > 1) {
		pr_err("cannot tell whether nftables table %s %s exists\n", family_name(family),
		       name);
		return -EIO;
	}
	return ret == 0;
}

/*
 * How nft and iptables-nft-save run here: in criu's current namespaces (the root task's, when
 * it fills a nested one), as that user namespace's root, stdin from in_fd, stdout collected
 * into *output (NULL: to the log), a non-zero exit status an error.
 */
static struct tool_run nft_tool(const char *const argv[], int in_fd, char **output,
				size_t *output_len)
{
	return (struct tool_run){ .argv = argv,
				  .net_ns_fd = -1,
				  .in_fd = in_fd,
				  .out_fd = -1,
				  .output = output,
				  .output_len = output_len,
				  .must_succeed = true,
				  .as_ns_root = true };
}

/* The names of the xtables tables iptables-nft makes (and its save tool knows). */
static bool xtables_name(const char *name)
{
	static const char *const names[] = {"filter", "nat", "mangle", "raw", "security"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/*
 * Marks the tables of family that save_tool (iptables-nft-save, ip6tables-nft-save) lists,
 * a "*NAME" line each: the iptables images hold those. nft cannot tell who made a table
 * (nft 1.0.6 prints an iptables-nft table as any other, with native expressions where it
 * can; its JSON has no owner), and the save tool lists whichever table of its names there
 * is, made by whom it may be: asking it is the one way to know what the iptables images
 * hold, so that every table is saved exactly once. Not installed: it saves nothing.
 */
static int mark_iptables_nft(struct nft_tables *list, uint8_t family, const char *save_tool)
{
	const char *const argv[] = {save_tool, NULL};
	char *out, *line;
	bool candidates = false;
	size_t len;

	for (size_t i = 0; i < list->nr; i++)
		candidates |=
			list->tables[i].family == family && xtables_name(list->tables[i].name);
	if (!candidates || !tool_installed(save_tool))
		return 0;
	if (tool_run(nft_tool(argv, -1, &out, &len)))
		return -EIO;
	for (line = out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		size_t name_len = strcspn(line + 1, "\n");

		if (line[0] != '*')
			continue;
		for (size_t i = 0; i < list->nr; i++) {
			struct nft_table *t = &list->tables[i];

			if (t->family == family && strlen(t->name) == name_len &&
			    !strncmp(t->name, line + 1, name_len))
				t->left_out = "iptables-nft's";
		}
	}
	free(out);
	return 0;
}

/* Whether a ruleset's line opens the block of a table the image leaves out. */
static bool opens_left_out_table(const struct nft_tables *list, const char *line, size_t len)
{
	char header[NFT_TABLE_MAXNAMELEN + 32];

	for (size_t i = 0; i < list->nr; i++) {
		const struct nft_table *t = &list->tables[i];
		int n;

		if (!t->left_out)
			continue;
		n = snprintf(header, sizeof(header), "table %s %s {", family_name(t->family),
			     t->name);
		if ((size_t)n == len && !memcmp(header, line, len))
			return true;
	}
	return false;
}

/*
 * `nft list ruleset` less the left-out tables' blocks, into img_fd: nft prints each table
 * as a block from a "table FAMILY NAME {" line to a "}" line, both unindented.
 */
static int write_ruleset(const struct nft_tables *list, int img_fd, const char *img_name)
{
	static const char *const argv[] = {"nft", "list", "ruleset", NULL};
	bool keep = true;
	char *out, *line, *end;
	size_t len;
	int ret = 0;

	if (tool_run(nft_tool(argv, -1, &out, &len)))
		return -EIO;
	for (line = out; line < out + len && !ret; line = end + 1) {
		size_t line_len;

		end = strchr(line, '\n') ?: out + len;
		line_len = end - line;
		if (!strncmp(line, "table ", 6))
			keep = !opens_left_out_table(list, line, line_len);
		if (keep && (write(img_fd, line, line_len) != (ssize_t)line_len ||
			     (end < out + len && write(img_fd, "\n", 1) != 1))) {
			pr_perror("%s: cannot write it", img_name);
			ret = -EIO;
		}
	}
	free(out);
	return ret;
}

int nft_dump_ruleset(const struct ns_id *ns)
{
	struct nft_tables list = {};
	struct cr_img *img;
	size_t nr_saved = 0;
	int ret;

	ret = list_kernel_tables(&list);
	if (!ret)
		ret = mark_iptables_nft(&list, NFPROTO_IPV4, "iptables-nft-save");
	if (!ret)
		ret = mark_iptables_nft(&list, NFPROTO_IPV6, "ip6tables-nft-save");
	for (size_t i = 0; i < list.nr; i++) {
		struct nft_table *t = &list.tables[i];

		if (netlock_nft_is_lock_table(family_name(t->family), t->name))
			t->left_out = "the network lock's";
		pr_debug("net namespace %u: nftables table %s %s: %s\n", ns->id,
			 family_name(t->family), t->name, t->left_out ?: "saved");
		nr_saved += !t->left_out;
	}
	/*
	 * None to save: no image, as CRIU's where nft is not there to ask (a CRIU built
	 * without libnftables refuses to restore any nftables image, even an empty one).
	 */
	if (!ret && nr_saved) {
		img = open_image(CR_IMG_NFTABLES, O_WRONLY, ns->id);
		ret = img ? write_ruleset(&list, img->fd, img->name) : -EIO;
		if (img)
			close_image(img);
	}
	free(list.tables);
	return ret;
}

/*
 * The script nft loads: for each table of the image, "table T" and "delete table T" first,
 * so that the image's table replaces one the iptables images made already. Ours never
 * overlap, CRIU's do (it saves both iptables-save's and nft's view of iptables-nft's
 * tables): nft's listing is then the exact one, where loading both would double rules.
 */
static int write_nft_script(int fd, const char *ruleset, size_t len)
{
	const char *line, *end;

	for (line = ruleset; line < ruleset + len; line = end + 1) {
		size_t header_len;

		end = memchr(line, '\n', ruleset + len - line) ?: ruleset + len;
		header_len = end - line;
		if (strncmp(line, "table ", 6) || header_len < 8 || memcmp(end - 2, " {", 2))
			continue;
		header_len -= 2;
		if (dprintf(fd, "%.*s\ndelete %.*s\n", (int)header_len, line, (int)header_len,
			    line) < 0)
			return -errno;
	}
	return write(fd, ruleset, len) == (ssize_t)len ? 0 : -EIO;
}

int nft_restore_ruleset(const struct ns_id *ns)
{
	static const char *const argv[] = {"nft", "-f", "-", NULL};
	struct cr_img *img;
	char *ruleset = NULL;
	int ret, fd = -1;

	if (!img_exists(CR_IMG_NFTABLES, ns->id))
		return 0;
	img = open_image(CR_IMG_NFTABLES, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	if (!img->size) {
		close_image(img);
		return 0;
	}
	ruleset = malloc(img->size);
	ret = ruleset ? img_read_raw(img, ruleset, img->size) : -ENOMEM;
	if (!ret) {
		fd = memfd_create("nftables", MFD_CLOEXEC);
		if (fd < 0 || write_nft_script(fd, ruleset, img->size) || lseek(fd, 0, SEEK_SET)) {
			pr_perror("%s: cannot pass it on to nft", img->name);
			ret = -EIO;
		}
	}
	/* nft's own error on the ruleset is in the log, then tool_run()'s line. */
	if (!ret)
		ret = tool_run(nft_tool(argv, fd, NULL, NULL));
	if (!ret)
		pr_info("net namespace %u: nftables ruleset loaded\n", ns->id);
	if (fd >= 0)
		close(fd);
	free(ruleset);
	close_image(img);
	return ret;
}

/* In a scratch net namespace: nft loads a table and lists it back. */
static bool nft_loads_and_lists(void)
{
	static const char table[] = "table inet criu_probe {\n"
				    "\tchain output {\n"
				    "\t\ttype filter hook output priority filter; policy accept;\n"
				    "\t}\n"
				    "}\n";
	static const char *const load[] = {"nft", "-f", "-", NULL};
	static const char *const list[] = {"nft", "list", "ruleset", NULL};
	int fd = memfd_create("nft-probe", MFD_CLOEXEC);
	char *listed;
	size_t len;
	bool ok;

	if (fd < 0 || write(fd, table, sizeof(table) - 1) < 0 ||
	    lseek(fd, 0, SEEK_SET) || tool_run(nft_tool(load, fd, NULL, NULL)))
		return false;
	tool_run(nft_tool(list, -1, &listed, &len));
	ok = listed && len == sizeof(table) - 1 && !memcmp(listed, table, len);
	free(listed);
	return ok;
}

bool nft_usable(void)
{
	return tool_installed("nft") && probe_in_scratch_netns(nft_loads_and_lists);
}
