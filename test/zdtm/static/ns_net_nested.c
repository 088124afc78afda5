/*
 * Nested network namespaces: the root, in a net namespace of its own (and, with
 * ZDTM_NET_USERNS, a user namespace of its own that owns them all), forks A, which unshares
 * a second net namespace and sets it up (lo up with an address, a bridge with its MAC and
 * an address, namespace sysctls), listens on an abstract name there and forks B, which goes
 * back into the root's namespace holding a second listener of A's namespace.
 * After restore: A's namespace has its links, addresses, routes and sysctls as `ip` and
 * /proc/sys show them, byte for byte; both abstract names answer in A's namespace and
 * nowhere else (each socket is in the namespace it was made in, not its holder's), and B's
 * socket is not in B's namespace (SIOCGSKNS). With ZDTM_NET_NESTED_VETH, A's namespace has
 * a veth whose peer is in the runner's, which the dump refuses; with ZDTM_NET_NESTED_NSFD, A
 * holds an fd of its namespace (/proc/self/ns/net), which the dump refuses too. A veth
 * joins A's namespace and the root's (its MACs, MTU, an address on A's end): both ends come
 * back with their indexes, names and settings (the root's links are compared too).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "zdtmtst.h"

#define SNAPSHOT_MAX (64 << 10)
#define NAME_A	     "zdtm-nested-a"
#define NAME_HELD    "zdtm-nested-held"

static const char *const setup_a[] = {
	"ip link set lo up",
	"ip addr add 10.90.0.1/24 dev lo",
	"ip link add zdtm_nsbr address 02:11:22:33:44:88 type bridge",
	"ip addr add 10.91.0.1/24 dev zdtm_nsbr",
	"ip link set zdtm_nsbr up",
	NULL,
};

/* name, value: set in A's namespace, read back there after restore */
static const char *const sysctls_a[][2] = {
	{"unix/max_dgram_qlen", "55"},
	{"ipv4/conf/all/forwarding", "1"},
	{"ipv4/conf/zdtm_nsbr/arp_ignore", "2"},
};

static int root_ns = -1, runner_ns = -1;

static void run(const char *cmd)
{
	int status = system(cmd);

	if (status)
		test_fail("`%s`: wait status %#x", cmd, status);
}

static void set_sysctl(const char *name, const char *value)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
	write_file(path, value, strlen(value));
}

static void expect_sysctl(const char *name, const char *value)
{
	char path[128], buf[64] = "";
	size_t n;

	snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
	n = read_file(path, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (strcmp(buf, value))
		test_fail("%s is \"%s\", not \"%s\"", path, buf, value);
}

/* The links (a bridge's running timers left out), addresses and routes, as `ip` lists them. */
static char *ip_snapshot(void)
{
	/* A veth end moved in from another namespace says LOWERLAYERDOWN, one made here DOWN. */
	static const char cmd[] = "{ ip -d link show; ip addr show; ip route show table all; "
				  "ip -6 route show table all; } | "
				  "sed -E 's/ [a-z_]+_timer +[0-9.]+//g; "
				  "s/state LOWERLAYERDOWN/state DOWN/'";
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

/* The bridge without ports loses its carrier a moment after it is up (linkwatch). */
static void wait_bridge_settled(void)
{
	for (int i = 0; i < 100; i++) {
		char line[512] = "";
		FILE *out = popen("ip -o link show zdtm_nsbr", "r");
		bool settled;

		if (!out)
			test_fail_errno("popen ip");
		settled = fgets(line, sizeof(line), out) && strstr(line, "NO-CARRIER") &&
			  strstr(line, "state DOWN");
		pclose(out);
		if (settled)
			return;
		usleep(50000);
	}
	test_fail("zdtm_nsbr did not lose its carrier in 5 s");
}

/* A's end of the veth, up, without carrier (the root's end is down). */
static void wait_veth_settled(void)
{
	for (int i = 0; i < 100; i++) {
		char line[512] = "";
		FILE *out = popen("ip -o link show zdtm_nsv", "r");
		bool settled;

		if (!out)
			test_fail_errno("popen ip");
		settled = fgets(line, sizeof(line), out) && strstr(line, "NO-CARRIER") &&
			  (strstr(line, "state DOWN") || strstr(line, "state LOWERLAYERDOWN"));
		pclose(out);
		if (settled)
			return;
		usleep(50000);
	}
	test_fail("zdtm_nsv did not lose its carrier in 5 s");
}

static socklen_t abstract_addr(const char *name, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path + 1, name, strlen(name));
	return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
}

static int listen_abstract(const char *name)
{
	struct sockaddr_un addr;
	socklen_t len = abstract_addr(name, &addr);
	int sk = socket(AF_UNIX, SOCK_STREAM, 0);

	if (sk < 0 || bind(sk, (struct sockaddr *)&addr, len) || listen(sk, 4))
		test_fail("listen on @%s: %s", name, strerror(errno));
	return sk;
}

/* 0 when a connect() to the abstract name succeeds, else its errno. */
static int try_connect(const char *name)
{
	struct sockaddr_un addr;
	socklen_t len = abstract_addr(name, &addr);
	int sk = socket(AF_UNIX, SOCK_STREAM, 0), err = 0;

	if (sk < 0)
		test_fail_errno("socket");
	if (connect(sk, (struct sockaddr *)&addr, len))
		err = errno;
	close(sk);
	return err;
}

static void expect_connect(const char *who, const char *name, int want)
{
	int err = try_connect(name);

	if (err != want)
		test_fail("%s: connect to @%s: %s, not %s", who, name, err ? strerror(err) : "done",
			  want ? strerror(want) : "done");
}

static ino_t sk_netns(int sk, const char *what)
{
	struct stat st;
	int ns = ioctl(sk, SIOCGSKNS);

	if (ns < 0 || fstat(ns, &st))
		test_fail("%s: SIOCGSKNS: %s", what, strerror(errno));
	close(ns);
	return st.st_ino;
}

static ino_t own_netns(void)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st))
		test_fail_errno("stat /proc/self/ns/net");
	return st.st_ino;
}

static int held = -1;

/* B: back in the root's namespace, holding a listener of A's. */
static void b_main(void)
{
	if (setns(root_ns, CLONE_NEWNET))
		test_fail_errno("B: setns into the root's net namespace");
	close(root_ns);
	test_barrier_done();
	test_wait_sigterm();
	expect_connect("B", NAME_HELD, ECONNREFUSED);
	expect_connect("B", NAME_A, ECONNREFUSED);
	if (sk_netns(held, "B's listener") == own_netns())
		test_fail("B's listener is in B's net namespace, not A's");
	exit(0);
}

static void a_main(void)
{
	char *before;
	pid_t b;
	int listener;

	if (unshare(CLONE_NEWNET))
		test_fail_errno("A: unshare(CLONE_NEWNET)");
	for (size_t i = 0; setup_a[i]; i++)
		run(setup_a[i]);
	for (size_t i = 0; i < sizeof(sysctls_a) / sizeof(sysctls_a[0]); i++)
		set_sysctl(sysctls_a[i][0], sysctls_a[i][1]);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd),
			 "ip link add zdtm_nsv address 02:11:22:33:44:99 mtu 1400 type veth peer "
			 "name zdtm_nsp address 02:11:22:33:44:9a netns /proc/self/fd/%d",
			 root_ns);
		run(cmd);
		run("ip addr add 10.92.0.1/24 dev zdtm_nsv");
		run("ip link set zdtm_nsv up");
	}
	if (runner_ns >= 0) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd),
			 "ip link add zdtm_nso type veth peer name zdtm_nsr netns /proc/self/fd/%d",
			 runner_ns);
		run(cmd);
		close(runner_ns);
	}
	/* Kept open: a file of a nested namespace, which the dump refuses. */
	if (getenv("ZDTM_NET_NESTED_NSFD") && open("/proc/self/ns/net", O_RDONLY) < 0)
		test_fail_errno("A: open its /proc/self/ns/net");
	listener = listen_abstract(NAME_A);
	held = listen_abstract(NAME_HELD);
	b = test_fork(b_main);
	close(held);
	close(root_ns);
	wait_bridge_settled();
	wait_veth_settled();
	before = ip_snapshot();
	test_barrier_done();
	test_wait_sigterm();

	wait_bridge_settled();
	wait_veth_settled();
	{
		char *after = ip_snapshot();
		size_t i = 0;

		if (strcmp(before, after)) {
			while (before[i] == after[i])
				i++;
			while (i && before[i - 1] != '\n')
				i--;
			test_fail("A: links, addresses or routes differ from \"%.120s\" (after: "
				  "\"%.120s\")",
				  before + i, after + i);
		}
	}
	for (size_t i = 0; i < sizeof(sysctls_a) / sizeof(sysctls_a[0]); i++)
		expect_sysctl(sysctls_a[i][0], sysctls_a[i][1]);
	expect_connect("A", NAME_A, 0);
	expect_connect("A", NAME_HELD, 0);
	if (sk_netns(listener, "A's listener") != own_netns())
		test_fail("A's listener is not in A's net namespace");
	test_children_verdict(&b, 1, "A");
	exit(0);
}

int main(int argc, char **argv)
{
	char *root_before, *root_after;
	bool userns;
	pid_t a;

	test_init(argc, argv);
	userns = getenv("ZDTM_NET_USERNS");
	if (getenv("ZDTM_NET_NESTED_VETH")) {
		runner_ns = open("/proc/self/ns/net", O_RDONLY);
		if (runner_ns < 0)
			test_fail_errno("open the runner's /proc/self/ns/net");
	}
	test_launch_root(CLONE_NEWPID | CLONE_NEWNET |
			 (userns ? CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWIPC : 0));
	if (userns && (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		test_fail_errno("become root in the user namespace");
	if (setsid() != 1)
		test_fail_errno("setsid");
	run("ip link set lo up");
	root_ns = open("/proc/self/ns/net", O_RDONLY);
	if (root_ns < 0)
		test_fail_errno("open /proc/self/ns/net");
	test_barrier_init();
	a = test_fork(a_main);
	close(root_ns);
	if (runner_ns >= 0)
		close(runner_ns);
	test_barrier_wait();
	root_before = ip_snapshot();
	test_ready();
	test_wait_sigterm();

	root_after = ip_snapshot();
	if (strcmp(root_before, root_after))
		test_fail("the root's links, addresses or routes differ:\n%s\nafter:\n%s",
			  root_before, root_after);
	expect_connect("the root", NAME_A, ECONNREFUSED);
	expect_connect("the root", NAME_HELD, ECONNREFUSED);
	test_children_verdict(&a, 1, "the root");
	test_pass();
}
