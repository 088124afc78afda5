/*
 * --ext-unix-sk: a datagram socket connected to a bound socket of W, a process outside the
 * dumped tree (forked by a child that exited: W went to the runner, a subreaper). It comes
 * back with its own name, connected to W's socket again, with W's reply queued at the
 * dump; W answers it after the restore. W echoes every datagram to its sender and exits
 * on "bye" (or after a minute without one).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define OURS 120

static struct sockaddr_un ext_addr = { .sun_family = AF_UNIX }, our_addr;
static socklen_t our_len;

static void run_w(int ready, void *arg)
{
	struct timeval idle = { .tv_sec = 60 };
	struct sockaddr_un from;
	char buf[64], reply[80];
	int sk = socket(AF_UNIX, SOCK_DGRAM, 0);

	(void)arg;
	if (sk < 0 || bind(sk, (struct sockaddr *)&ext_addr, sizeof(ext_addr)) ||
	    setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle)) ||
	    write(ready, "r", 1) != 1)
		_exit(1);
	for (;;) {
		socklen_t len = sizeof(from);
		ssize_t n = recvfrom(sk, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&from, &len);
		int m;

		if (n < 0 || (n == 3 && !memcmp(buf, "bye", 3)))
			break;
		buf[n] = '\0';
		m = snprintf(reply, sizeof(reply), "echo:%s", buf);
		sendto(sk, reply, m, 0, (struct sockaddr *)&from, len);
	}
	unlink(ext_addr.sun_path);
	_exit(0);
}

static void expect_recv(const char *want)
{
	struct pollfd pfd = { .fd = OURS, .events = POLLIN };
	char got[80];
	ssize_t n = poll(&pfd, 1, 10000) == 1 ? recv(OURS, got, sizeof(got), MSG_DONTWAIT) : -1;

	if (n != (ssize_t)strlen(want) || memcmp(got, want, n))
		test_fail("received %zd bytes, expected '%s'", n, want);
}

int main(int argc, char **argv)
{
	struct sockaddr_un peer;
	socklen_t len = sizeof(peer);
	char cwd[80];
	int fd;
	pid_t w;

	test_init(argc, argv);
	if (!getcwd(cwd, sizeof(cwd)))
		test_fail_errno("getcwd");
	snprintf(ext_addr.sun_path, sizeof(ext_addr.sun_path), "%s/ext.sock", cwd);
	unlink(ext_addr.sun_path);
	our_addr.sun_family = AF_UNIX;
	our_len = offsetof(struct sockaddr_un, sun_path) + 1 +
		  snprintf(our_addr.sun_path + 1, sizeof(our_addr.sun_path) - 1,
			   "zdtm-usk-ext-%d", getpid());
	w = test_fork_outside(run_w, NULL);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || dup2(fd, OURS) != OURS)
		test_fail_errno("socket");
	close(fd);
	if (bind(OURS, (struct sockaddr *)&our_addr, our_len) ||
	    connect(OURS, (struct sockaddr *)&ext_addr, sizeof(ext_addr)) ||
	    send(OURS, "queued", 6, 0) != 6)
		test_fail_errno("bind, connect and send");
	/* W's reply is in our queue at the dump. */
	if (poll(&(struct pollfd){ .fd = OURS, .events = POLLIN }, 1, 10000) != 1)
		test_fail("W does not answer");

	test_ready();
	test_wait_sigterm();

	expect_recv("echo:queued");
	if (getpeername(OURS, (struct sockaddr *)&peer, &len) ||
	    strcmp(peer.sun_path, ext_addr.sun_path))
		test_fail("not connected to %s again", ext_addr.sun_path);
	if (send(OURS, "after", 5, 0) != 5)
		test_fail_errno("send after the restore");
	expect_recv("echo:after");
	if (send(OURS, "bye", 3, 0) != 3)
		test_fail_errno("send bye");
	test_wait_outside_exited(w);
	test_pass();
}
