/*
 * A dump that must be refused: one end of a datagram socketpair is bound to a path whose
 * file was renamed since (restore could not bind it at its name and leave its file at the
 * other). The dump fails naming the socket; the process runs on, the socket keeps its name
 * and its queued datagram, and the pair works.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define BOUND 81
#define OTHER 82

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX }, name;
	socklen_t len = sizeof(name);
	char got[8];
	int sk[2];

	test_init(argc, argv);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "bound.sock");
	unlink(addr.sun_path);
	unlink("moved.sock");
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk) || dup2(sk[0], BOUND) != BOUND ||
	    dup2(sk[1], OTHER) != OTHER)
		test_fail_errno("socketpair");
	close(sk[0]);
	close(sk[1]);
	if (bind(BOUND, (struct sockaddr *)&addr, sizeof(addr)) ||
	    rename(addr.sun_path, "moved.sock"))
		test_fail_errno("bind and rename");
	if (send(OTHER, "q", 1, 0) != 1)
		test_fail_errno("send");

	test_ready();
	test_wait_sigterm();

	if (getsockname(BOUND, (struct sockaddr *)&name, &len) ||
	    strcmp(name.sun_path, "bound.sock"))
		test_fail("the socket lost its name");
	if (recv(BOUND, got, sizeof(got), MSG_DONTWAIT) != 1 || got[0] != 'q')
		test_fail("the queued datagram is gone");
	if (send(OTHER, "r", 1, 0) != 1 || recv(BOUND, got, sizeof(got), 0) != 1 || got[0] != 'r')
		test_fail("the pair no longer works");
	test_pass();
}
