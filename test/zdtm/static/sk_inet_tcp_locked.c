/*
 * An established TCP connection whose peer is a process outside the dumped tree, dumped
 * with --tcp-established under the network lock (iptables, the default, or nftables with
 * --network-lock nftables): the peer sent
 * PEER_BYTES the tree has not read, and reads what the tree sends, half of it before the
 * dump, half after the restore (or after a dump with -R). After it each end has exactly
 * the other's bytes, in order; and no rule of the lock (mark 0xc114) is left in the filter
 * table, nor the nftables lock's table.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define CONN	   70
#define PEER_BYTES 50000
#define TREE_BYTES 60000 /* half before the dump, half after */

static void peer_run(int ready_fd, void *arg)
{
	struct sockaddr_in *to = arg;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char *buf = malloc(PEER_BYTES > TREE_BYTES ? PEER_BYTES : TREE_BYTES);

	if (fd < 0 || connect(fd, (struct sockaddr *)to, sizeof(*to)))
		_exit(2);
	pattern_fill(buf, PEER_BYTES, 5);
	if (write(fd, buf, PEER_BYTES) != PEER_BYTES || write(ready_fd, "r", 1) != 1)
		_exit(3);
	read_exact(fd, buf, TREE_BYTES, "the peer outside the tree");
	if (pattern_check(buf, TREE_BYTES, 6) >= 0 || write(fd, "k", 1) != 1)
		_exit(4);
	_exit(0);
}

/*
 * Whether the filter table has a rule with the lock's mark, or nftables one (the lock's
 * table, --network-lock nftables, accepts the marked packets).
 */
static bool lock_rules_left(void)
{
	FILE *f = popen("{ iptables -w -S; ip6tables -w -S; nft list ruleset; } 2>/dev/null", "r");
	char line[512];
	bool found = false;

	if (!f)
		test_fail_errno("popen iptables");
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "0xc114") != NULL || strstr(line, "0x0000c114") != NULL;
	pclose(f);
	return found;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	char *tree = malloc(TREE_BYTES), *got = malloc(PEER_BYTES), byte;
	int listener, fd;

	test_init(argc, argv);
	if (lock_rules_left())
		test_fail("the filter table has lock rules before the test");
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
	pattern_fill(tree, TREE_BYTES, 6);
	if (write(CONN, tree, TREE_BYTES / 2) != TREE_BYTES / 2)
		test_fail_errno("write before the dump");

	test_ready();
	test_wait_sigterm();

	if (lock_rules_left())
		test_fail("the network lock's rules are left after the restore");
	read_exact(CONN, got, PEER_BYTES, "the peer's bytes");
	pattern_expect(got, PEER_BYTES, 5, "the peer's bytes");
	if (write(CONN, tree + TREE_BYTES / 2, TREE_BYTES / 2) != TREE_BYTES / 2)
		test_fail_errno("write after the restore");
	if (read(CONN, &byte, 1) != 1 || byte != 'k')
		test_fail("the peer outside the tree did not get the tree's %d bytes", TREE_BYTES);
	test_pass();
}
