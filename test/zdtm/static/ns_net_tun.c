/*
 * tun/tap devices and their files: the root, in a net namespace of its own, forks A, which
 * (with ZDTM_TUN_NESTED, in a second net namespace it unshares) holds a file never attached,
 * a tun with an address (zdtm_tun0), a multiqueue tun with its second queue detached
 * (zdtm_mq0), a tap with a set MAC and MTU (zdtm_tap0), and leaves a persistent tun with an
 * owner, group and vnethdr size and no file (zdtm_tunp).
 * After restore: `ip -d link` lists the same links with the same settings (queues, persist,
 * owner, group); TUNGETIFF names each file's device with its flags and the detached queue
 * as detached; the queues attach and detach again; the persistent device keeps its vnethdr
 * size, zdtm_tun0's file its sndbuf (not when upstream criu restores); the tap's MAC is read
 * through its file; a UDP packet to a peer of zdtm_tun0 is read from its file, and one written into
 * the file reaches a socket bound to the device's address, byte for byte. The never-attached file
 * attaches to a new device. With ZDTM_TUN_NO_NETNS the tree shares criu's net namespace (and A
 * makes no device): the dump refuses the file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>
#include <linux/if_tun.h>

#include "zdtmtst.h"

#define SNAPSHOT_MAX (64 << 10)
#define TUN_ADDR     "10.93.0.1"
#define TUN_PEER     "10.93.0.2"
#define UDP_PORT     4793

static const unsigned char tap_mac[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
static const char payload_out[] = "from the task, out through zdtm_tun0";
static const char payload_in[] = "written into the tun file, to the task";

static void run(const char *cmd)
{
	int status = system(cmd);

	if (status)
		test_fail("`%s`: wait status %#x", cmd, status);
}

static int tun_attach(int fd, const char *name, int flags)
{
	struct ifreq ifr = {.ifr_flags = flags};

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	return ioctl(fd, TUNSETIFF, &ifr);
}

static int tun_open(const char *name, int flags)
{
	int fd = open("/dev/net/tun", O_RDWR);

	if (fd < 0)
		test_fail_errno("open /dev/net/tun");
	if (name && tun_attach(fd, name, flags))
		test_fail("TUNSETIFF %s: %s", name, strerror(errno));
	return fd;
}

static void set_queue(int fd, int flags, const char *what)
{
	struct ifreq ifr = {.ifr_flags = flags};

	if (ioctl(fd, TUNSETQUEUE, &ifr))
		test_fail("%s: TUNSETQUEUE %#x: %s", what, flags, strerror(errno));
}

/* TUNGETIFF: the device and its flags, IFF_DETACH_QUEUE for a detached queue. */
static void expect_iff(int fd, const char *name, int flags, const char *what)
{
	/* IFF_NOFILTER (no filter attached) shares IFF_NO_PI's bit: left out. */
	const int seen = IFF_TUN | IFF_TAP | IFF_MULTI_QUEUE | IFF_DETACH_QUEUE | IFF_VNET_HDR;
	struct ifreq ifr = {};

	if (ioctl(fd, TUNGETIFF, &ifr))
		test_fail("%s: TUNGETIFF: %s", what, strerror(errno));
	if (strcmp(ifr.ifr_name, name) || (ifr.ifr_flags & seen) != flags)
		test_fail("%s: attached to %s with flags %#x, not %s with %#x", what, ifr.ifr_name,
			  ifr.ifr_flags & seen, name, flags);
}

/*
 * A tun's operstate stays UNKNOWN until its carrier first goes off and on again: restore
 * detaches the queue that made the device before the task's file attaches (as CRIU's), so
 * it comes back UP; "state UP" is read as "state UNKNOWN". With ZDTM_TUN_UPSTREAM_RESTORE
 * (restored by upstream criu, which raises zdtm_tun0 before it writes its disable_ipv6: the
 * kernel gives a device without a link-layer address that comes up with IPv6 the random
 * address generation mode), "addrgenmode random" is read as "addrgenmode eui64".
 */
static char *ip_snapshot(void)
{
	const char *cmd = getenv("ZDTM_TUN_UPSTREAM_RESTORE")
				  ? "{ ip -d link show; ip addr show; ip route show table all; } | "
				    "sed 's/ state UP / state UNKNOWN /; "
				    "s/ addrgenmode random / addrgenmode eui64 /'"
				  : "{ ip -d link show; ip addr show; ip route show table all; } | "
				    "sed 's/ state UP / state UNKNOWN /'";
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

static void expect_same(const char *before, const char *after)
{
	size_t i = 0;

	if (!strcmp(before, after))
		return;
	while (before[i] == after[i])
		i++;
	while (i && before[i - 1] != '\n')
		i--;
	test_fail("links, addresses or routes differ from \"%.200s\" (after: \"%.200s\")",
		  before + i, after + i);
}

static uint16_t ip_checksum(const void *data, size_t len)
{
	const uint16_t *w = data;
	uint32_t sum = 0;

	for (; len > 1; len -= 2)
		sum += *w++;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* A UDP datagram to zdtm_tun0's peer, sent by the task, read from the tun file. */
static void expect_packet_out(int tun_fd)
{
	struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(UDP_PORT)};
	unsigned char pkt[2048];
	struct pollfd pfd = {.fd = tun_fd, .events = POLLIN};
	const struct iphdr *ip = (const void *)pkt;
	int sk = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	inet_pton(AF_INET, TUN_PEER, &peer.sin_addr);
	if (sk < 0 || sendto(sk, payload_out, sizeof(payload_out), 0, (struct sockaddr *)&peer,
			     sizeof(peer)) != sizeof(payload_out))
		test_fail_errno("send to zdtm_tun0's peer");
	close(sk);
	if (poll(&pfd, 1, 10000) != 1)
		test_fail("nothing to read from zdtm_tun0's file in 10 s");
	n = read(tun_fd, pkt, sizeof(pkt));
	if (n != (ssize_t)(sizeof(*ip) + sizeof(struct udphdr) + sizeof(payload_out)) ||
	    ip->version != 4 || ip->protocol != IPPROTO_UDP || ip->daddr != peer.sin_addr.s_addr ||
	    memcmp(pkt + sizeof(*ip) + sizeof(struct udphdr), payload_out, sizeof(payload_out)))
		test_fail("zdtm_tun0's file read %zd bytes, not our datagram to " TUN_PEER, n);
}

/* A UDP datagram from the peer written into the tun file reaches a socket on TUN_ADDR. */
static void expect_packet_in(int tun_fd)
{
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(UDP_PORT)};
	unsigned char pkt[sizeof(struct iphdr) + sizeof(struct udphdr) + sizeof(payload_in)] = {};
	struct iphdr *ip = (void *)pkt;
	struct udphdr *udp = (void *)(pkt + sizeof(*ip));
	char got[sizeof(payload_in) + 16];
	struct pollfd pfd;
	int sk = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	inet_pton(AF_INET, TUN_ADDR, &addr.sin_addr);
	if (sk < 0 || bind(sk, (struct sockaddr *)&addr, sizeof(addr)))
		test_fail_errno("bind a UDP socket to " TUN_ADDR);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(sizeof(pkt));
	inet_pton(AF_INET, TUN_PEER, &ip->saddr);
	ip->daddr = addr.sin_addr.s_addr;
	ip->check = ip_checksum(ip, sizeof(*ip));
	udp->source = htons(UDP_PORT + 1);
	udp->dest = htons(UDP_PORT);
	udp->len = htons(sizeof(*udp) + sizeof(payload_in));
	memcpy(pkt + sizeof(*ip) + sizeof(*udp), payload_in, sizeof(payload_in));
	if (write(tun_fd, pkt, sizeof(pkt)) != sizeof(pkt))
		test_fail_errno("write a datagram into zdtm_tun0's file");
	pfd = (struct pollfd){.fd = sk, .events = POLLIN};
	if (poll(&pfd, 1, 10000) != 1)
		test_fail("the datagram written into zdtm_tun0's file did not arrive in 10 s");
	n = recv(sk, got, sizeof(got), 0);
	if (n != sizeof(payload_in) || memcmp(got, payload_in, sizeof(payload_in)))
		test_fail("the socket on " TUN_ADDR " received %zd bytes, not the datagram", n);
	close(sk);
}

/* A's files: made by A, or, in a user namespace, by the helper outside (make_files()). */
struct tun_files {
	int unattached; /* never attached: attached after restore */
	int spare;	/* never attached: attached to zdtm_tunp after restore */
	int tun0;
	int mq[2]; /* zdtm_mq0's queues, the second detached */
	int tap;
};
#define NR_TUN_FILES (sizeof(struct tun_files) / sizeof(int))

/* The devices and their files; owner and group as the caller's user namespace names them. */
static void make_files(struct tun_files *f, uint32_t owner, uint32_t group)
{
	struct ifreq ifr = {};
	int fd, vnethdr = 12;

	f->unattached = tun_open(NULL, 0);
	f->spare = tun_open(NULL, 0);
	f->tun0 = tun_open("zdtm_tun0", IFF_TUN | IFF_NO_PI);
	if (ioctl(f->tun0, TUNSETSNDBUF, &(int){65536}))
		test_fail_errno("set zdtm_tun0's sndbuf");
	f->mq[0] = tun_open("zdtm_mq0", IFF_TUN | IFF_NO_PI | IFF_MULTI_QUEUE);
	f->mq[1] = tun_open("zdtm_mq0", IFF_TUN | IFF_NO_PI | IFF_MULTI_QUEUE);
	set_queue(f->mq[1], IFF_DETACH_QUEUE, "zdtm_mq0's second queue");
	f->tap = tun_open("zdtm_tap0", IFF_TAP);
	ifr.ifr_hwaddr.sa_family = 1; /* ARPHRD_ETHER */
	memcpy(ifr.ifr_hwaddr.sa_data, tap_mac, sizeof(tap_mac));
	if (ioctl(f->tap, SIOCSIFHWADDR, &ifr))
		test_fail_errno("set zdtm_tap0's MAC");
	fd = tun_open("zdtm_tunp", IFF_TUN | IFF_NO_PI);
	if (ioctl(fd, TUNSETOWNER, (unsigned long)owner) ||
	    ioctl(fd, TUNSETGROUP, (unsigned long)group) || ioctl(fd, TUNSETVNETHDRSZ, &vnethdr) ||
	    ioctl(fd, TUNSETPERSIST, 1))
		test_fail_errno("set up zdtm_tunp");
	close(fd);
}

/*
 * In a user namespace of the tree's own the tasks cannot open /dev/net/tun (root's, 0600):
 * a helper left outside joins the namespace's network when told, makes the files, with
 * zdtm_tunp's owner 1000 and group 1001 as the tree sees them, and sends them through sk.
 */
static void files_helper(int sk)
{
	pid_t launcher = getpid(), child = fork();
	struct tun_files f;
	char path[64], byte;
	struct iovec iov = {.iov_base = "F", .iov_len = 1};
	char control[CMSG_SPACE(sizeof(f))] = {};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = sizeof(control)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int ns;

	if (child < 0)
		test_fail_errno("fork the files helper");
	if (child) {
		if (waitpid(child, NULL, 0) != child)
			test_fail_errno("wait for the files helper's parent");
		return;
	}
	if (fork())
		_exit(0);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", launcher);
	if (read(sk, &byte, 1) != 1 || (ns = open(path, O_RDONLY)) < 0 || setns(ns, CLONE_NEWNET))
		_exit(1);
	make_files(&f, TEST_USERNS_HOST_ID + 1000, TEST_USERNS_HOST_ID + 1001);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(f));
	memcpy(CMSG_DATA(c), &f, sizeof(f));
	_exit(sendmsg(sk, &msg, 0) == 1 ? 0 : 2);
}

static void files_from_helper(int sk, struct tun_files *f)
{
	char control[CMSG_SPACE(sizeof(*f))], byte = 'G';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = sizeof(control)};
	struct cmsghdr *c;

	if (write(sk, &byte, 1) != 1 || recvmsg(sk, &msg, 0) != 1)
		test_fail("the files helper sent no files");
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(*f)))
		test_fail("the files helper sent no %zu files", NR_TUN_FILES);
	memcpy(f, CMSG_DATA(c), sizeof(*f));
	close(sk);
}

/*
 * ZDTM_TUN_OUTSIDE: a helper left outside the tree holds the only queue of zdtm_tunx, a
 * device of the tree's net namespace, which the dump refuses. Told through go (a pipe the
 * root keeps open until it exits), it joins the launcher's namespace, makes the device and
 * says so through done; it exits when go reads EOF.
 */
static void outside_holder(int go_rd, int go_wr, int done_wr)
{
	pid_t launcher = getpid(), child = fork();
	char path[64], byte;
	int ns;

	if (child < 0)
		test_fail_errno("fork the outside holder");
	if (child) {
		if (waitpid(child, NULL, 0) != child)
			test_fail_errno("wait for the outside holder's parent");
		return;
	}
	if (fork())
		_exit(0);
	close(go_wr); /* the root's alone: EOF once it exits */
	snprintf(path, sizeof(path), "/proc/%d/ns/net", launcher);
	if (read(go_rd, &byte, 1) != 1 || (ns = open(path, O_RDONLY)) < 0 ||
	    setns(ns, CLONE_NEWNET))
		_exit(1);
	tun_open("zdtm_tunx", IFF_TUN);
	if (write(done_wr, "H", 1) != 1)
		_exit(2);
	while (read(go_rd, &byte, 1) > 0)
		;
	_exit(0);
}

static void check_persistent_tun(int fd)
{
	int vnethdr = 0;

	if (tun_attach(fd, "zdtm_tunp", IFF_TUN | IFF_NO_PI | IFF_TUN_EXCL) == 0 || errno != EBUSY)
		test_fail("zdtm_tunp is gone (TUNSETIFF with IFF_TUN_EXCL: %s)", strerror(errno));
	if (tun_attach(fd, "zdtm_tunp", IFF_TUN | IFF_NO_PI))
		test_fail_errno("attach to zdtm_tunp");
	if (ioctl(fd, TUNGETVNETHDRSZ, &vnethdr))
		test_fail_errno("read zdtm_tunp's vnethdr size");
	if (vnethdr != 12)
		test_fail("zdtm_tunp: vnethdr size %d, not 12", vnethdr);
}

/* The files: the helper's (in a user namespace), made here (else). */
static struct tun_files files;
static int moved_ready[2];

/* ZDTM_TUN_MOVED: B, in a net namespace of its own, where A moves zdtm_tunm. */
static void b_moved_main(void)
{
	if (unshare(CLONE_NEWNET) || write(moved_ready[1], "U", 1) != 1)
		test_fail_errno("B: unshare(CLONE_NEWNET)");
	test_barrier_done();
	test_wait_sigterm();
	exit(0);
}

/* zdtm_tunm, made here with its file kept, moved into B's namespace: the dump refuses it. */
static void move_tun_out(void)
{
	char cmd[96], byte;
	pid_t b;

	tun_open("zdtm_tunm", IFF_TUN);
	if (pipe(moved_ready))
		test_fail_errno("pipe for B");
	b = test_fork(b_moved_main);
	if (read(moved_ready[0], &byte, 1) != 1)
		test_fail("B did not unshare its net namespace");
	snprintf(cmd, sizeof(cmd), "ip link set zdtm_tunm netns %d", b);
	run(cmd);
}

static void a_main(void)
{
	struct ifreq ifr = {};
	int sndbuf = 0;
	char *before;

	if (getenv("ZDTM_TUN_NESTED") && unshare(CLONE_NEWNET))
		test_fail_errno("A: unshare(CLONE_NEWNET)");
	if (getenv("ZDTM_TUN_NO_NETNS")) {
		files.unattached = tun_open(NULL, 0);
		test_barrier_done();
		test_wait_sigterm();
		exit(0);
	}
	run("ip link set lo up");
	if (!getenv("ZDTM_TUN_USERNS"))
		make_files(&files, 1000, 1001);
	if (getenv("ZDTM_TUN_MOVED"))
		move_tun_out();
	run("echo 1 > /proc/sys/net/ipv6/conf/zdtm_tun0/disable_ipv6");
	run("ip addr add " TUN_ADDR "/24 dev zdtm_tun0");
	run("ip link set zdtm_tun0 up");
	run("ip link set zdtm_tap0 mtu 1400");
	before = ip_snapshot();
	test_barrier_done();
	test_wait_sigterm();

	expect_same(before, ip_snapshot());
	expect_iff(files.tun0, "zdtm_tun0", IFF_TUN, "zdtm_tun0's file");
	expect_iff(files.mq[0], "zdtm_mq0", IFF_TUN | IFF_MULTI_QUEUE, "zdtm_mq0's first queue");
	expect_iff(files.mq[1], "zdtm_mq0", IFF_TUN | IFF_MULTI_QUEUE | IFF_DETACH_QUEUE,
		   "zdtm_mq0's second queue");
	expect_iff(files.tap, "zdtm_tap0", IFF_TAP, "zdtm_tap0's file");
	if (ioctl(files.tap, SIOCGIFHWADDR, &ifr) || memcmp(ifr.ifr_hwaddr.sa_data, tap_mac, 6))
		test_fail("zdtm_tap0's MAC is not 02:aa:bb:cc:dd:ee");
	set_queue(files.mq[1], IFF_ATTACH_QUEUE, "zdtm_mq0's second queue");
	set_queue(files.mq[0], IFF_DETACH_QUEUE, "zdtm_mq0's first queue");
	check_persistent_tun(files.spare);
	/* Upstream criu sets it on the device before the file attaches, which takes the default. */
	if (!getenv("ZDTM_TUN_UPSTREAM_RESTORE") &&
	    (ioctl(files.tun0, TUNGETSNDBUF, &sndbuf) || sndbuf != 65536))
		test_fail("zdtm_tun0's file: sndbuf %d, not 65536", sndbuf);
	expect_packet_out(files.tun0);
	expect_packet_in(files.tun0);
	if (tun_attach(files.unattached, "zdtm_tun9", IFF_TUN))
		test_fail("the never-attached file: TUNSETIFF zdtm_tun9: %s", strerror(errno));
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t a;

	int helper[2], go[2], done[2];
	bool userns, outside;

	test_init(argc, argv);
	userns = getenv("ZDTM_TUN_USERNS");
	if (userns) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, helper))
			test_fail_errno("socketpair for the files helper");
		files_helper(helper[1]);
		close(helper[1]);
	}
	outside = getenv("ZDTM_TUN_OUTSIDE");
	if (outside) {
		if (pipe(go) || pipe(done))
			test_fail_errno("pipes for the outside holder");
		outside_holder(go[0], go[1], done[1]);
		close(go[0]);
		close(done[1]);
	}
	test_launch_root(CLONE_NEWPID | (getenv("ZDTM_TUN_NO_NETNS") ? 0 : CLONE_NEWNET) |
			 (userns ? CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWIPC : 0));
	if (userns && (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0)))
		test_fail_errno("become root in the user namespace");
	if (setsid() != 1)
		test_fail_errno("setsid");
	if (userns)
		files_from_helper(helper[0], &files);
	if (outside && (write(go[1], "G", 1) != 1 || read(done[0], &(char){0}, 1) != 1))
		test_fail("the outside holder made no zdtm_tunx");
	test_barrier_init();
	a = test_fork(a_main);
	test_barrier_wait();
	test_ready();
	test_wait_sigterm();
	test_children_verdict(&a, 1, "the root");
	test_pass();
}
