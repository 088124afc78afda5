/*
 * Datagram sockets by name: a server bound to a path, not connected, with datagrams queued
 * from a client connected to it; that client, bound to an abstract name, with datagrams
 * the server sent it; an unbound client connected to the server; a socket connected to
 * itself. Each comes back with its name, its peer, its queue in order, and works.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SERVER	 70 /* bound to a path */
#define CLIENT	 71 /* bound to an abstract name, connected to SERVER */
#define UNNAMED	 72 /* connected to SERVER */
#define SELF	 73 /* bound to an abstract name, connected to itself */
#define TO_SERVER 5
#define TO_CLIENT 3
#define TO_SELF	  2

static struct sockaddr_un server_addr, client_addr, self_addr;
static socklen_t server_len, client_len, self_len;

static void abstract_name(struct sockaddr_un *addr, socklen_t *len, const char *what)
{
	addr->sun_family = AF_UNIX;
	*len = offsetof(struct sockaddr_un, sun_path) + 1 +
	       snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "zdtm-usk-%s-%d", what,
			getpid());
}

static int dgram_at(int at, const struct sockaddr_un *name, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (fd < 0 || (name && bind(fd, (const struct sockaddr *)name, len)) ||
	    dup2(fd, at) != at)
		test_fail_errno("socket");
	close(fd);
	return at;
}

static void connect_to(int fd, const struct sockaddr_un *addr, socklen_t len)
{
	if (connect(fd, (const struct sockaddr *)addr, len))
		test_fail_errno("connect");
}

static void send_numbered(int fd, const struct sockaddr_un *to, socklen_t len, int nr,
			  const char *tag)
{
	char msg[32];

	for (int i = 0; i < nr; i++) {
		int n = snprintf(msg, sizeof(msg), "%s %d", tag, i);

		if (sendto(fd, msg, n, 0, (const struct sockaddr *)to, to ? len : 0) != n)
			test_fail_errno("send");
	}
}

static void setup(void)
{
	char cwd[80];

	if (!getcwd(cwd, sizeof(cwd)))
		test_fail_errno("getcwd");
	server_addr.sun_family = AF_UNIX;
	snprintf(server_addr.sun_path, sizeof(server_addr.sun_path), "%s/dgram.sock", cwd);
	server_len = offsetof(struct sockaddr_un, sun_path) + strlen(server_addr.sun_path) + 1;
	unlink(server_addr.sun_path);
	abstract_name(&client_addr, &client_len, "client");
	abstract_name(&self_addr, &self_len, "self");

	dgram_at(SERVER, &server_addr, server_len);
	dgram_at(CLIENT, &client_addr, client_len);
	connect_to(CLIENT, &server_addr, server_len);
	dgram_at(UNNAMED, NULL, 0);
	connect_to(UNNAMED, &server_addr, server_len);
	dgram_at(SELF, &self_addr, self_len);
	connect_to(SELF, &self_addr, self_len);

	send_numbered(CLIENT, NULL, 0, TO_SERVER, "to server");
	send_numbered(SERVER, &client_addr, client_len, TO_CLIENT, "to client");
	send_numbered(SELF, NULL, 0, TO_SELF, "to self");
}

static void expect_numbered(int fd, int nr, const char *tag)
{
	char want[32], got[32];

	for (int i = 0; i < nr; i++) {
		int n = snprintf(want, sizeof(want), "%s %d", tag, i);
		ssize_t len = recv(fd, got, sizeof(got), MSG_DONTWAIT);

		if (len != n || memcmp(got, want, n))
			test_fail("fd %d: datagram %d has %zd bytes, expected '%s'", fd, i, len,
				  want);
	}
	if (recv(fd, got, sizeof(got), MSG_DONTWAIT) != -1 || errno != EAGAIN)
		test_fail("fd %d: more than %d datagrams queued", fd, nr);
}

static void check(void)
{
	struct sockaddr_un unnamed = { .sun_family = AF_UNIX };
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);

	expect_sock_name(SERVER, false, &server_addr, server_len);
	if (getpeername(SERVER, (struct sockaddr *)&addr, &len) != -1 || errno != ENOTCONN)
		test_fail("the server is connected");
	expect_sock_name(CLIENT, false, &client_addr, client_len);
	expect_sock_name(CLIENT, true, &server_addr, server_len);
	expect_sock_name(UNNAMED, false, &unnamed, sizeof(sa_family_t));
	expect_sock_name(UNNAMED, true, &server_addr, server_len);
	expect_sock_name(SELF, false, &self_addr, self_len);
	expect_sock_name(SELF, true, &self_addr, self_len);

	expect_numbered(SERVER, TO_SERVER, "to server");
	expect_numbered(CLIENT, TO_CLIENT, "to client");
	expect_numbered(SELF, TO_SELF, "to self");

	send_numbered(CLIENT, NULL, 0, 1, "again");
	expect_numbered(SERVER, 1, "again");
	send_numbered(UNNAMED, NULL, 0, 1, "unnamed");
	expect_numbered(SERVER, 1, "unnamed");
	send_numbered(SERVER, &client_addr, client_len, 1, "again");
	expect_numbered(CLIENT, 1, "again");
	send_numbered(SELF, NULL, 0, 1, "again");
	expect_numbered(SELF, 1, "again");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	setup();

	test_ready();
	test_wait_sigterm();

	check();
	test_pass();
}
