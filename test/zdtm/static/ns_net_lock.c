/*
 * A tree in a net namespace of its own (NETNS, which outlives it: restore joins it with
 * --join-ns) with an established TCP connection whose peer is a process outside the tree
 * in that namespace, dumped with the default network lock (iptables; nftables where the
 * test says so: the same checks, and no nftables table of the lock's either). The peer writes
 * PEER_BYTES, more than both ends' buffers hold, so it is still writing when the dump
 * starts and through the dump and restore (its segments dropped by the lock and sent
 * again); the tree reads nothing before the dump. After the restore the tree reads exactly
 * the peer's bytes, in order, once each, sends its own, which the peer checks; and neither
 * backend's tables (legacy, nft) of either family have the lock's chain CRIU.
 * With ZDTM_NETLOCK_DUMP_FAILS the tree also holds a socket the dump refuses, after the
 * namespace was locked: the failed dump must have unlocked it (the same checks follow).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define NETNS	   "zdtm_nlock"
#define CONN	   70
#define CHUNK	   (64 << 10)
#define PEER_BYTES (16 << 20)
#define TREE_BYTES 100000

static void peer_run(int ready_fd, void *arg)
{
	struct sockaddr_in *to = arg;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char *buf = malloc(PEER_BYTES);
	size_t done = 0;

	if (!buf || fd < 0 || connect(fd, (struct sockaddr *)to, sizeof(*to)))
		_exit(2);
	pattern_fill(buf, PEER_BYTES, 21);
	while (done < PEER_BYTES) {
		ssize_t n = write(fd, buf + done, CHUNK);

		if (n <= 0)
			_exit(3);
		/* Once some bytes are on their way: the rest goes on through the dump. */
		if (!done && write(ready_fd, "r", 1) != 1)
			_exit(3);
		done += n;
	}
	read_exact(fd, buf, TREE_BYTES, "the peer outside the tree");
	if (pattern_check(buf, TREE_BYTES, 22) >= 0 || write(fd, "k", 1) != 1)
		_exit(4);
	_exit(0);
}

/*
 * Whether any table of either family and backend has the lock's chain, or nftables the
 * lock's table (--network-lock nftables: "table inet CRIU-PID").
 */
static bool lock_chain_left(void)
{
	FILE *f = popen("{ iptables-nft-save; ip6tables-nft-save; iptables-legacy-save; "
			"ip6tables-legacy-save; nft list tables; } 2>/dev/null",
			"r");
	char line[512];
	bool found = false;

	if (!f)
		test_fail_errno("popen iptables-save");
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "CRIU") != NULL;
	pclose(f);
	return found;
}

static void join_netns(void)
{
	int fd;

	if (system("ip netns delete " NETNS " 2>/dev/null; ip netns add " NETNS) ||
	    system("ip -n " NETNS " link set lo up"))
		test_fail("cannot make net namespace " NETNS);
	fd = open("/run/netns/" NETNS, O_RDONLY);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		test_fail_errno("join " NETNS);
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	static struct unsupported_socket refused;
	char *tree = malloc(TREE_BYTES), *got = malloc(PEER_BYTES), byte;
	int listener, fd;

	test_init(argc, argv);
	join_netns();
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, len) || listen(listener, 1) ||
	    getsockname(listener, (struct sockaddr *)&addr, &len))
		test_fail_errno("listen");
	test_fork_outside(peer_run, &addr);
	fd = accept(listener, NULL, NULL);
	if (fd < 0 || dup2(fd, CONN) != CONN)
		test_fail_errno("accept");
	close(fd);
	close(listener);
	if (getenv("ZDTM_NETLOCK_DUMP_FAILS"))
		test_unsupported_socket(&refused);

	test_ready();
	test_wait_sigterm();

	if (lock_chain_left())
		test_fail("the network lock's chain CRIU is left in the tree's net namespace");
	read_exact(CONN, got, PEER_BYTES, "the peer's bytes");
	pattern_expect(got, PEER_BYTES, 21, "the peer's bytes");
	pattern_fill(tree, TREE_BYTES, 22);
	if (write(CONN, tree, TREE_BYTES) != TREE_BYTES)
		test_fail_errno("write after the restore");
	if (read(CONN, &byte, 1) != 1 || byte != 'k')
		test_fail("the peer outside the tree did not get the tree's %d bytes", TREE_BYTES);
	test_pass();
}
