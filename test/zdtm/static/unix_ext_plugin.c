/*
 * A plugin's Unix socket (DUMP_UNIX_SK, RESTORE_UNIX_SK): a stream connected to the
 * listening socket of W, a process outside the dumped tree (forked by a child that
 * exited: W went to the runner, a subreaper). The runner loads test/plugins' test_unixsk,
 * which saves the peer's name and connects a new socket to it on restore; W accepts it
 * and answers. W echoes what each connection sends and exits on "bye" (or after a minute
 * without a word).
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define OURS 121

static struct sockaddr_un listen_addr = { .sun_family = AF_UNIX };

static void run_w(int ready, void *arg)
{
	struct timeval idle = { .tv_sec = 60 };
	char buf[64], reply[80];
	int lsk = socket(AF_UNIX, SOCK_STREAM, 0), sk;

	(void)arg;
	if (lsk < 0 || bind(lsk, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) ||
	    listen(lsk, 2) || setsockopt(lsk, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle)) ||
	    write(ready, "r", 1) != 1)
		_exit(1);
	while ((sk = accept(lsk, NULL, NULL)) >= 0) {
		ssize_t n;

		setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
		while ((n = read(sk, buf, sizeof(buf) - 1)) > 0) {
			if (n == 3 && !memcmp(buf, "bye", 3)) {
				unlink(listen_addr.sun_path);
				_exit(0);
			}
			buf[n] = '\0';
			if (write(sk, reply, snprintf(reply, sizeof(reply), "echo:%s", buf)) < 0)
				break;
		}
		close(sk);
	}
	unlink(listen_addr.sun_path);
	_exit(0);
}

static void exchange(const char *msg)
{
	struct pollfd pfd = { .fd = OURS, .events = POLLIN };
	char want[80], got[80];
	ssize_t n;

	if (write(OURS, msg, strlen(msg)) != (ssize_t)strlen(msg))
		test_fail_errno("write");
	snprintf(want, sizeof(want), "echo:%s", msg);
	n = poll(&pfd, 1, 10000) == 1 ? read(OURS, got, sizeof(got)) : -1;
	if (n != (ssize_t)strlen(want) || memcmp(got, want, n))
		test_fail("W answered %zd bytes, not '%s'", n, want);
}

int main(int argc, char **argv)
{
	struct sockaddr_un peer;
	socklen_t len = sizeof(peer);
	char cwd[80];
	pid_t w;
	int fd;

	test_init(argc, argv);
	if (!getcwd(cwd, sizeof(cwd)))
		test_fail_errno("getcwd");
	snprintf(listen_addr.sun_path, sizeof(listen_addr.sun_path), "%s/ext-listen.sock", cwd);
	unlink(listen_addr.sun_path);
	w = test_fork_outside(run_w, NULL);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || dup2(fd, OURS) != OURS ||
	    connect(OURS, (struct sockaddr *)&listen_addr, sizeof(listen_addr)))
		test_fail_errno("connect");
	close(fd);
	exchange("before");

	test_ready();
	test_wait_sigterm();

	if (getpeername(OURS, (struct sockaddr *)&peer, &len) ||
	    strcmp(peer.sun_path, listen_addr.sun_path))
		test_fail("not connected to %s", listen_addr.sun_path);
	exchange("after");
	if (write(OURS, "bye", 3) != 3)
		test_fail_errno("write bye");
	test_wait_outside_exited(w);
	test_pass();
}
