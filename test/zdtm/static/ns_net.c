/*
 * A tree in network and pid namespaces of its own: the loopback up with addresses of both
 * families added, routes in the main table and in table 100, rules of both families (the
 * IPv6 rule and the table 100 route, which upstream criu loses, not with
 * ZDTM_NET_UPSTREAM_DUMP), sysctls changed at every level (all, default, a device's, unix,
 * ping_group_range), and, with ZDTM_NET_VETH, a veth link whose other end is in the
 * runner's namespace (restore makes that one with --external veth[zdtm_nin]:zdtm_nout),
 * with its MAC, MTU and address; with ZDTM_NET_BRIDGE too, restore puts the outer end into
 * the runner's bridge zdtm_nbr. With ZDTM_NET_MACVLAN, a macvlan link made on the
 * runner's bridge zdtm_mvbr and moved in, with its MAC, MTU, mode and address (restore
 * makes it again with --external macvlan[zdtm_nmv]:zdtm_mvbr). A bridge of the
 * namespace's own, with its MAC and an address, and a UDP socket bound to a link-local
 * IPv6 address of lo (its scope lo's index), not with ZDTM_NET_UPSTREAM_DUMP or
 * ZDTM_NET_UPSTREAM_RESTORE. With ZDTM_NET_EMPTY only the loopback is up: dumped with
 * --empty-ns net, the restored tree's new namespace gets it up from an action script; with
 * ZDTM_NET_JOINED the tree is restored into criu's (the runner's) with --join-ns. With
 * ZDTM_NET_SMALL_MTU (and ZDTM_NET_VETH) the veth's MTU is 1000, so that it has no
 * net.ipv6.conf (the runner gives its image some: --weak-sysctls). With
 * ZDTM_NET_USERNS the namespace is made with a user namespace of the tree's own (with UTS
 * and IPC ones, as ns_user), which owns it, and the root sets it up as root there (a helper
 * outside makes its veth, with ZDTM_NET_VETH).
 * After restore: the links, addresses, routes and rules as `ip` lists them, every
 * net.ipv4.conf / net.ipv6.conf value of every device, the values set, and the abstract
 * unix socket the init listens on, reachable inside the namespace but not outside, and it
 * and a socketpair (its queued message kept) in the tree's namespace; with ZDTM_NET_USERNS
 * the root still administers its network (an address added, lo down and up, a sysctl set),
 * which only the namespace's owner may, and, joined to the runner's, may not change that.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/sockios.h>

#include "zdtmtst.h"

#define INNER	     "zdtm_nin"
#define OUTER	     "zdtm_nout"
#define SNAPSHOT_MAX (256 << 10)
#define ABSTRACT     "zdtm-ns-net-abstract"
#define BRIDGE	     "zdtm_nbr"
#define MACVLAN	     "zdtm_nmv"
#define MV_LOWER     "zdtm_mvbr"
#define LINK_LOCAL   "fe80:4577::1"

static const char *const setup[] = {
	"ip link set lo up",
	"ip addr add 10.77.0.1/24 dev lo",
	"ip addr add 10.77.1.1/32 dev lo label lo:zdtm",
	"ip -6 addr add fd77::1/64 dev lo nodad",
	"ip route add 10.78.0.0/16 dev lo",
	"ip -6 route add fd78::/64 dev lo metric 77",
	"ip rule add from 10.77.0.1 table 100 prio 1000",
	NULL,
};

static const char *const setup_veth[] = {
	"ip link set " INNER " address 02:11:22:33:44:55 mtu 1400 up",
	"ip addr add 10.80.0.1/24 dev " INNER,
	"ip route add 10.81.0.0/16 via 10.80.0.2",
	NULL,
};

/* name, value written (and read back after restore) */
static const char *const sysctls[][2] = {
	{"ipv4/conf/all/forwarding", "1"},	 {"ipv4/conf/default/rp_filter", "2"},
	/* lo is up: going up again at restore takes its link MTU as this one. */
	{"ipv6/conf/lo/mtu", "1280"},
	{"ipv4/conf/lo/arp_ignore", "2"},	 {"ipv4/conf/all/log_martians", "1"},
	{"ipv6/conf/default/hop_limit", "44"},	 {"ipv6/conf/lo/hop_limit", "33"},
	{"ipv6/conf/all/accept_redirects", "0"}, {"unix/max_dgram_qlen", "77"},
	{"ipv4/ping_group_range", "100\t200"},
};

static char *before_ip, *before_conf;
static pid_t runner;
static bool with_veth, empty, bridge, joined, userns, macvlan, small_mtu;

static void run(const char *cmd)
{
	int status = system(cmd);

	if (status)
		test_fail("`%s`: wait status %#x", cmd, status);
}

/*
 * Making the veth pair: the previous test's namespace may still hold a link of the same
 * name in the runner's while the kernel tears it down (asynchronously), so "File exists"
 * is retried for up to 5 s before it fails the test.
 */
static void run_make_link(const char *cmd)
{
	int status = system(cmd);

	for (int i = 0; i < 50 && status; i++) {
		usleep(100 * 1000);
		status = system(cmd);
	}
	if (status)
		test_fail("`%s`: wait status %#x", cmd, status);
}

static void set_sysctl(const char *name, const char *value)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, value, strlen(value)) < 0)
		test_fail("set %s to %s: %s", path, value, strerror(errno));
	close(fd);
}

static void expect_sysctl(const char *name, const char *value)
{
	char path[128], buf[64] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
	fd = open(path, O_RDONLY);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (n < 0 || strcmp(buf, value))
		test_fail("%s is \"%s\", not \"%s\" (%s)", path, buf, value, strerror(errno));
	close(fd);
}

/*
 * The kernel says a link has no carrier a moment after it is up (linkwatch): until then
 * its state is UNKNOWN. The veth's outer end is down before the dump and after restore
 * (ip_snapshot() on LOWERLAYERDOWN).
 */
static void wait_state(const char *link, bool up)
{
	for (int i = 0; i < 100; i++) {
		char cmd[64], line[512] = "";
		FILE *out;
		bool settled, got, down;

		snprintf(cmd, sizeof(cmd), "ip -o link show %s", link);
		out = popen(cmd, "r");
		if (!out)
			test_fail_errno("popen ip");
		got = fgets(line, sizeof(line), out) != NULL;
		down = strstr(line, "state DOWN") || strstr(line, "state LOWERLAYERDOWN");
		settled = got && (up ? strstr(line, "state UP") != NULL
				     : strstr(line, "NO-CARRIER") && down);
		pclose(out);
		if (settled)
			return;
		usleep(50000);
	}
	test_fail("%s did not %s in 5 s", link, up ? "come up" : "lose its carrier");
}

static void wait_no_carrier(const char *link)
{
	wait_state(link, false);
}

static bool inner_bridge;

/* The links without carrier (the kernel tells the state a moment later: linkwatch). */
static void wait_settled(void)
{
	if (with_veth)
		wait_no_carrier(INNER);
	if (inner_bridge)
		wait_no_carrier("zdtm_brin");
	/* A macvlan has a carrier on a lower link without one (the runner's empty bridge). */
	if (macvlan)
		wait_state(MACVLAN, true);
}

/*
 * What `ip` lists, without the veth peer's index (another namespace's, made anew), and
 * with a link without carrier DOWN: the kernel says LOWERLAYERDOWN for one moved in from
 * another namespace (ZDTM_NET_USERNS's veth), DOWN for one made here, as restore does; and
 * without a bridge's running timers (gc_timer and the like, which count down).
 */
static char *ip_snapshot(void)
{
	static const char cmd[] = "{ ip -d link show; ip addr show; ip route show table all; "
				  "ip -6 route show table all; ip rule show; ip -6 rule show; } "
				  "| sed -E 's/@if[0-9]+//; s/state LOWERLAYERDOWN/state DOWN/; "
				  "s/ [a-z_]+_timer +[0-9.]+//g'";
	char *buf = calloc(1, SNAPSHOT_MAX);
	FILE *out = popen(cmd, "r");
	size_t n;

	if (!buf || !out)
		test_fail_errno("popen ip");
	n = fread(buf, 1, SNAPSHOT_MAX - 1, out);
	if (pclose(out) || n == 0 || n == SNAPSHOT_MAX - 1)
		test_fail("ip snapshot: %zu bytes", n);
	return buf;
}

/* Every readable net.ipv4.conf.* and net.ipv6.conf.* value: "proto/dev/name=value". */
static void conf_dir(char *buf, size_t *len, const char *proto, const char *dev)
{
	char path[512], value[256];
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s", proto, dev);
	dir = opendir(path);
	if (!dir)
		test_fail("opendir %s: %s", path, strerror(errno));
	while ((de = readdir(dir))) {
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", proto, dev, de->d_name);
		fd = open(path, O_RDONLY);
		n = fd < 0 ? -1 : read(fd, value, sizeof(value) - 1);
		if (fd >= 0)
			close(fd);
		if (n < 0)
			continue; /* stable_secret, unset; write-only ones */
		value[n] = '\0';
		*len += snprintf(buf + *len, SNAPSHOT_MAX - *len, "%s/%s/%s=%s", proto, dev,
				 de->d_name, value);
	}
	closedir(dir);
}

static char *conf_snapshot(void)
{
	const char *devs[] = {"all", "default", "lo", with_veth ? INNER : "lo",
			      macvlan ? MACVLAN : NULL};
	char *buf = calloc(1, SNAPSHOT_MAX);
	size_t len = 0;

	if (!buf)
		test_fail_errno("calloc");
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]) && devs[i]; i++) {
		conf_dir(buf, &len, "ipv4", devs[i]);
		if (!small_mtu || strcmp(devs[i], INNER))
			conf_dir(buf, &len, "ipv6", devs[i]);
	}
	return buf;
}

static void expect_same(const char *what, const char *before, const char *after)
{
	size_t i = 0;

	if (!strcmp(before, after))
		return;
	while (before[i] == after[i])
		i++;
	while (i && before[i - 1] != '\n')
		i--;
	test_fail("%s differ from the line \"%.120s\" (after: \"%.120s\")", what, before + i,
		  after + i);
}

static socklen_t abstract_addr(struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path + 1, ABSTRACT, strlen(ABSTRACT));
	return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ABSTRACT);
}

/* 0 when a connect() to the abstract name succeeds, else its errno. */
static int try_connect(void)
{
	struct sockaddr_un addr;
	socklen_t len = abstract_addr(&addr);
	int sk = socket(AF_UNIX, SOCK_STREAM, 0), err = 0;

	if (sk < 0)
		test_fail_errno("socket");
	if (connect(sk, (struct sockaddr *)&addr, len))
		err = errno;
	close(sk);
	return err;
}

/* check() in a child joined to the runner's namespace: its exit status, 2 if it cannot join. */
static int outside(int (*check)(void))
{
	char path[64];
	int status;
	pid_t child;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", runner);
	child = fork();
	if (child < 0)
		test_fail_errno("fork");
	if (child == 0) {
		int fd = open(path, O_RDONLY);

		if (fd < 0 || setns(fd, CLONE_NEWNET))
			_exit(2);
		_exit(check());
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
		test_fail("a child in %s: wait status %#x", path, status);
	return WEXITSTATUS(status);
}

static int unreachable(void)
{
	return try_connect() == ECONNREFUSED ? 0 : 1;
}

/* From the runner's namespace the name is unknown. */
static void expect_unreachable_outside(const char *when)
{
	int ret = outside(unreachable);

	if (ret)
		test_fail("%s: the abstract socket is reachable from outside, or the runner's "
			  "namespace cannot be joined (%d)",
			  when, ret);
}

/* The socket lives in the tree's net namespace (SIOCGSKNS), not in the runner's. */
static void expect_own_netns(int sk, const char *what)
{
	struct stat own, its;
	int ns = ioctl(sk, SIOCGSKNS);

	if (ns < 0 || fstat(ns, &its) || stat("/proc/self/ns/net", &own))
		test_fail("%s: SIOCGSKNS: %s", what, strerror(errno));
	close(ns);
	if (its.st_ino != own.st_ino)
		test_fail("%s: in net namespace %lu, not the tree's %lu", what,
			  (unsigned long)its.st_ino, (unsigned long)own.st_ino);
}

/* In the runner's namespace: the outer end is in the bridge; the bridge goes. */
static int outer_in_bridge(void)
{
	int in = system("ip -o link show " OUTER " | grep -q 'master " BRIDGE " '");

	return system("ip link del " BRIDGE) || in ? 1 : 0;
}

static int remove_lower(void)
{
	return system("ip link del " MV_LOWER) ? 1 : 0;
}

static void expect_outer_in_bridge(void)
{
	if (outside(outer_in_bridge))
		test_fail(OUTER " is not in " BRIDGE " after the restore, or " BRIDGE
				" could not be removed");
}

/*
 * Restored with --join-ns net:/proc/self/ns/net: in criu's, the runner's, namespace, the
 * launcher's before it made the tree's (a task in a user namespace of its own may not look
 * at the runner's).
 */
static void expect_joined(ino_t runner_ns)
{
	struct stat own;

	if (stat("/proc/self/ns/net", &own))
		test_fail("stat the net namespace: %s", strerror(errno));
	if (own.st_ino != runner_ns)
		test_fail("in net namespace %lu, not the joined one %lu", (unsigned long)own.st_ino,
			  (unsigned long)runner_ns);
}

static void expect_reachable(int listener, const char *when)
{
	int err = try_connect(), sk;

	if (err)
		test_fail("%s: connect to the abstract socket inside: %s", when, strerror(err));
	sk = accept(listener, NULL, NULL);
	if (sk < 0)
		test_fail("%s: accept: %s", when, strerror(errno));
	close(sk);
}

/*
 * The tree's user namespace owns its net namespace: its root (uid 0 there, no capability
 * in criu's) may change it. lo goes down and up last: that drops its routes.
 */
static void expect_administered(void)
{
	run("ip addr add 10.77.2.1/32 dev lo");
	run("ip -o addr show dev lo | grep -q 10.77.2.1/32");
	set_sysctl("unix/max_dgram_qlen", "78");
	expect_sysctl("unix/max_dgram_qlen", "78");
	run("ip link set lo down && ip link set lo up");
}

/* Joined, the runner's namespace is criu's user namespace's: the tree may not change it. */
static void expect_not_administered(void)
{
	if (!system("ip addr add 10.77.2.1/32 dev lo 2>/dev/null"))
		test_fail("the tree could add an address in the joined namespace");
}

#define MACVLAN_ADD                                                                                \
	"ip link add " MACVLAN " link " MV_LOWER " address 02:11:22:33:44:77 mtu 1300 type "   \
	"macvlan mode private"

/* In the runner's namespace (host_ns), a macvlan on its bridge, moved into this one. */
static void macvlan_from_runner(int host_ns)
{
	int own = open("/proc/self/ns/net", O_RDONLY);
	char cmd[256];

	if (own < 0 || setns(host_ns, CLONE_NEWNET))
		test_fail_errno("join the runner's net namespace");
	snprintf(cmd, sizeof(cmd), MACVLAN_ADD " && ip link set " MACVLAN " netns /proc/self/fd/%d",
		 own);
	run(cmd);
	if (setns(own, CLONE_NEWNET))
		test_fail_errno("back into the tree's net namespace");
	close(own);
}

/*
 * A UDP socket bound to a link-local address of the loopback (a link with a carrier, whose
 * routes do not depend on when the address came): its scope is lo's index, which the bind
 * makes its bound device too.
 */
static int bind_link_local(void)
{
	struct sockaddr_in6 addr = {.sin6_family = AF_INET6, .sin6_port = htons(7788)};
	int sk = socket(AF_INET6, SOCK_DGRAM, 0);

	if (sk < 0 || inet_pton(AF_INET6, LINK_LOCAL, &addr.sin6_addr) != 1)
		test_fail_errno("a link-local socket");
	addr.sin6_scope_id = if_nametoindex("lo");
	if (!addr.sin6_scope_id || bind(sk, (struct sockaddr *)&addr, sizeof(addr)))
		test_fail_errno("bind to " LINK_LOCAL "%%lo");
	return sk;
}

/* Its address, scope (lo's index) and bound device as the bind left them. */
static void expect_link_local(int sk)
{
	struct sockaddr_in6 addr;
	socklen_t len = sizeof(addr);
	char dev[IFNAMSIZ + 1] = "", text[64] = "";
	socklen_t dev_len = IFNAMSIZ;
	unsigned int index = if_nametoindex("lo");

	if (getsockname(sk, (struct sockaddr *)&addr, &len) ||
	    getsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, dev, &dev_len))
		test_fail_errno("the link-local socket's address or device");
	inet_ntop(AF_INET6, &addr.sin6_addr, text, sizeof(text));
	if (strcmp(text, LINK_LOCAL) || ntohs(addr.sin6_port) != 7788 ||
	    addr.sin6_scope_id != index || strcmp(dev, "lo"))
		test_fail("the link-local socket is bound to %s%%%u port %u on \"%s\", not "
			  LINK_LOCAL "%%%u port 7788 on lo",
			  text, addr.sin6_scope_id, ntohs(addr.sin6_port), dev, index);
}

/*
 * A task in a user namespace of its own cannot put a link's end into the runner's
 * namespace: a helper left outside (reparented at once, so nothing waits for it) makes
 * the pair there and moves the inner end into the launcher's new namespace when told.
 * The returned fds: tell it, then hear it is done.
 */
static void veth_helper(int *go, int *done)
{
	int to_helper[2], from_helper[2];
	pid_t launcher = getpid(), child;
	char cmd[160], byte;

	if (pipe(to_helper) || pipe(from_helper))
		test_fail_errno("pipes for the veth helper");
	child = fork();
	if (child < 0)
		test_fail_errno("fork the veth helper");
	if (child == 0) {
		if (fork())
			_exit(0);
		if (read(to_helper[0], &byte, 1) != 1)
			_exit(1);
		if (macvlan)
			snprintf(cmd, sizeof(cmd),
				 MACVLAN_ADD " && ip link set " MACVLAN " netns %d", launcher);
		else
			snprintf(cmd, sizeof(cmd),
				 "ip link add " INNER " type veth peer name " OUTER
				 " && ip link set " INNER " netns %d",
				 launcher);
		byte = system(cmd) ? 'F' : 'D';
		_exit(write(from_helper[1], &byte, 1) == 1 ? 0 : 1);
	}
	if (waitpid(child, NULL, 0) != child)
		test_fail_errno("wait for the veth helper's parent");
	close(to_helper[0]);
	close(from_helper[1]);
	*go = to_helper[1];
	*done = from_helper[0];
}

static void veth_from_helper(int go, int done)
{
	char byte = 'G';

	if (write(go, &byte, 1) != 1 || read(done, &byte, 1) != 1 || byte != 'D')
		test_fail("the veth helper could not make " INNER " (%c)", byte);
	close(go);
	close(done);
}

int main(int argc, char **argv)
{
	struct sockaddr_un addr;
	socklen_t len;
	int listener, pair[2], host_ns = -1, helper_go = -1, helper_done = -1, link_local = -1;
	struct stat runner_ns;
	char msg[8] = "";
	char cmd[160];

	test_init(argc, argv);
	with_veth = getenv("ZDTM_NET_VETH");
	joined = getenv("ZDTM_NET_JOINED");
	empty = joined || getenv("ZDTM_NET_EMPTY");
	bridge = getenv("ZDTM_NET_BRIDGE");
	userns = getenv("ZDTM_NET_USERNS");
	macvlan = getenv("ZDTM_NET_MACVLAN");
	small_mtu = getenv("ZDTM_NET_SMALL_MTU");
	/* The runner's bridge the macvlan is made on: removed at the end. */
	if (macvlan)
		run("ip link del " MV_LOWER " 2>/dev/null; ip link add " MV_LOWER " type bridge");
	/* The runner's bridge restore puts the outer end into: removed at the end. */
	if (bridge)
		run("ip link del " BRIDGE " 2>/dev/null; ip link add " BRIDGE " type bridge");
	runner = getppid();
	if (stat("/proc/self/ns/net", &runner_ns))
		test_fail_errno("stat /proc/self/ns/net");
	if ((with_veth || macvlan) && userns)
		veth_helper(&helper_go, &helper_done);
	else if (with_veth || macvlan) {
		host_ns = open("/proc/self/ns/net", O_RDONLY);
		if (host_ns < 0)
			test_fail_errno("open /proc/self/ns/net");
	}
	test_launch_root(CLONE_NEWPID | CLONE_NEWNET |
			 (userns ? CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWIPC : 0));
	expect_ns_pid(1, ns_pid_levels(), "init");
	/* root inside (uid 0, host uid 100000), with every capability of the namespace */
	if (userns && (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		test_fail_errno("become root in the user namespace");
	/* As a container's init: upstream criu dumps no session led from outside. */
	if (setsid() != 1)
		test_fail_errno("setsid");
	for (size_t i = 0; setup[i] && (!i || !empty); i++)
		run(setup[i]);
	/* Upstream criu saves the main table's routes and IPv4 rules only. */
	if (!empty && !getenv("ZDTM_NET_UPSTREAM_DUMP")) {
		run("ip route add 10.79.1.0/24 dev lo table 100");
		run("ip -6 rule add to fd78::/64 table 100 prio 1001");
	}
	if ((with_veth || macvlan) && userns) {
		veth_from_helper(helper_go, helper_done);
	} else if (macvlan) {
		macvlan_from_runner(host_ns);
		close(host_ns);
	} else if (with_veth) {
		/* /proc is the runner's: self is this task there too. */
		snprintf(cmd, sizeof(cmd),
			 "ip link add " INNER " type veth peer name " OUTER
			 " netns /proc/self/fd/%d",
			 host_ns);
		run_make_link(cmd);
		close(host_ns);
	}
	if (with_veth) {
		for (size_t i = 0; setup_veth[i]; i++)
			run(setup_veth[i]);
	}
	if (macvlan) {
		run("ip addr add 10.83.0.1/24 dev " MACVLAN);
		run("ip link set " MACVLAN " up");
	}
	inner_bridge = !empty && !getenv("ZDTM_NET_UPSTREAM_DUMP") &&
		       !getenv("ZDTM_NET_UPSTREAM_RESTORE");
	if (inner_bridge) {
		run("ip link add zdtm_brin address 02:11:22:33:44:66 type bridge");
		run("ip addr add 10.82.0.1/24 dev zdtm_brin");
		run("ip link set zdtm_brin up");

	}
	for (size_t i = 0; i < sizeof(sysctls) / sizeof(sysctls[0]) && !empty; i++)
		set_sysctl(sysctls[i][0], sysctls[i][1]);
	/* An MTU under IPv6's minimum: the kernel takes the veth's net.ipv6.conf away. */
	if (small_mtu) {
		run("ip link set " INNER " mtu 1000");
		set_sysctl("ipv4/conf/" INNER "/forwarding", "1");
	}
	if (inner_bridge) {
		run("ip -6 addr add " LINK_LOCAL "/64 dev lo nodad");
		link_local = bind_link_local();
	}
	listener = socket(AF_UNIX, SOCK_STREAM, 0);
	len = abstract_addr(&addr);
	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, len) || listen(listener, 4))
		test_fail_errno("abstract listener");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) || write(pair[0], "queued", 7) != 7)
		test_fail_errno("socketpair");
	expect_reachable(listener, "before the dump");
	/* The runner's namespace is out of reach of a task in a user namespace of its own. */
	if (!userns)
		expect_unreachable_outside("before the dump");
	wait_settled();
	before_ip = ip_snapshot();
	before_conf = conf_snapshot();
	test_ready();
	test_wait_sigterm();

	if (joined)
		expect_joined(runner_ns.st_ino);
	wait_settled();
	if (!joined) {
		expect_same("links, addresses, routes or rules", before_ip, ip_snapshot());
		expect_same("net.ipv4.conf / net.ipv6.conf values", before_conf, conf_snapshot());
	}
	for (size_t i = 0; i < sizeof(sysctls) / sizeof(sysctls[0]) && !empty; i++)
		expect_sysctl(sysctls[i][0], sysctls[i][1]);
	if (small_mtu) {
		expect_sysctl("ipv4/conf/" INNER "/forwarding", "1");
		if (access("/proc/sys/net/ipv6/conf/" INNER, F_OK) == 0 || errno != ENOENT)
			test_fail("%s has net.ipv6.conf after restore, with its MTU of 1000", INNER);
	}
	/* SIOCGSKNS takes CAP_NET_ADMIN in the user namespace that owns the socket's. */
	if (!joined || !userns) {
		expect_own_netns(listener, "the abstract listener");
		expect_own_netns(pair[0], "a socketpair's end");
		expect_own_netns(pair[1], "a socketpair's other end");
	}
	if (read(pair[1], msg, sizeof(msg)) != 7 || strcmp(msg, "queued"))
		test_fail("the socketpair's queued message: \"%s\" (%s)", msg, strerror(errno));
	expect_reachable(listener, "after the restore");
	if (link_local >= 0)
		expect_link_local(link_local);
	if (bridge)
		expect_outer_in_bridge();
	/* The runner's namespace is out of reach of a task in a user namespace of its own. */
	if (macvlan && !userns && outside(remove_lower))
		test_fail(MV_LOWER " could not be removed from the runner's namespace");
	if (!joined && !userns)
		expect_unreachable_outside("after the restore");
	if (userns && !joined)
		expect_administered();
	if (userns && joined)
		expect_not_administered();
	test_pass();
}
