/*
 * Sockets bound to paths whose files were removed since: a datagram server in a directory
 * that was removed too, with a client connected to it and datagrams queued; one end of a
 * socketpair whose path now holds a regular file; a listening socket with a connection
 * waiting. Each comes back with its name and its connections, and the files stay as they
 * were: no socket file, no directory, the regular file untouched. ZDTM_UNIX_UPSTREAM_RESTORE
 * in the environment accepts the directory back (upstream criu leaves the one it made to
 * bind a socket with a relative name in it).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SERVER	   90 /* gone/srv.sock, dgram */
#define CLIENT	   91 /* connected to SERVER */
#define PAIR_BOUND 92 /* replaced.sock, now a regular file */
#define PAIR_OTHER 93
#define LISTENER   94 /* listen.sock, stream */
#define WAITING	   95 /* connected to LISTENER, not accepted */
#define OTHER_FILE "a regular file took its place"

static struct sockaddr_un srv_addr = { AF_UNIX, "gone/srv.sock" };
static struct sockaddr_un pair_addr = { AF_UNIX, "replaced.sock" };
static struct sockaddr_un listen_addr = { AF_UNIX, "listen.sock" };

static void at(int fd, int num)
{
	if (fd < 0 || dup2(fd, num) != num)
		test_fail_errno("socket");
	close(fd);
}

static void bind_to(int fd, struct sockaddr_un *addr)
{
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)))
		test_fail_errno("bind");
}

static void setup(void)
{
	int sk[2];

	unlink(srv_addr.sun_path);
	rmdir("gone");
	unlink(pair_addr.sun_path);
	unlink(listen_addr.sun_path);
	if (mkdir("gone", 0700))
		test_fail_errno("mkdir");
	at(socket(AF_UNIX, SOCK_DGRAM, 0), SERVER);
	bind_to(SERVER, &srv_addr);
	at(socket(AF_UNIX, SOCK_DGRAM, 0), CLIENT);
	if (connect(CLIENT, (struct sockaddr *)&srv_addr, sizeof(srv_addr)) ||
	    send(CLIENT, "one", 3, 0) != 3 || send(CLIENT, "two", 3, 0) != 3)
		test_fail_errno("connect and send");
	if (unlink(srv_addr.sun_path) || rmdir("gone"))
		test_fail_errno("remove the server's file and directory");

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sk))
		test_fail_errno("socketpair");
	at(sk[0], PAIR_BOUND);
	at(sk[1], PAIR_OTHER);
	bind_to(PAIR_BOUND, &pair_addr);
	if (send(PAIR_OTHER, "q", 1, 0) != 1 || unlink(pair_addr.sun_path))
		test_fail_errno("send and unlink");
	write_file(pair_addr.sun_path, OTHER_FILE, strlen(OTHER_FILE));

	at(socket(AF_UNIX, SOCK_STREAM, 0), LISTENER);
	bind_to(LISTENER, &listen_addr);
	if (listen(LISTENER, 2))
		test_fail_errno("listen");
	at(socket(AF_UNIX, SOCK_STREAM, 0), WAITING);
	if (connect(WAITING, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) ||
	    unlink(listen_addr.sun_path))
		test_fail_errno("connect and unlink");
}

static void expect_recv(int fd, const char *want)
{
	char got[16];
	ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);

	if (n != (ssize_t)strlen(want) || memcmp(got, want, n))
		test_fail("fd %d: received %zd bytes, expected '%s'", fd, n, want);
}

static void check_files(void)
{
	char content[64];
	struct stat st;

	if ((!getenv("ZDTM_UNIX_UPSTREAM_RESTORE") && !stat("gone", &st)) ||
	    !stat(srv_addr.sun_path, &st) || !stat(listen_addr.sun_path, &st))
		test_fail("a removed socket file or directory is back");
	if (lstat(pair_addr.sun_path, &st) || !S_ISREG(st.st_mode))
		test_fail("%s is no longer the regular file", pair_addr.sun_path);
	read_file(pair_addr.sun_path, content, sizeof(content));
	if (strcmp(content, OTHER_FILE))
		test_fail("%s holds '%s'", pair_addr.sun_path, content);
}

static void check(void)
{
	struct pollfd pfd = { .fd = LISTENER, .events = POLLIN };
	int server;

	check_files();
	expect_sock_name(SERVER, false, &srv_addr, SUN_LEN(&srv_addr) + 1);
	expect_sock_name(CLIENT, true, &srv_addr, SUN_LEN(&srv_addr) + 1);
	expect_recv(SERVER, "one");
	expect_recv(SERVER, "two");
	if (send(CLIENT, "three", 5, 0) != 5)
		test_fail_errno("the client cannot send");
	expect_recv(SERVER, "three");

	expect_sock_name(PAIR_BOUND, false, &pair_addr, SUN_LEN(&pair_addr) + 1);
	expect_recv(PAIR_BOUND, "q");
	if (send(PAIR_BOUND, "r", 1, 0) != 1)
		test_fail_errno("the pair cannot send");
	expect_recv(PAIR_OTHER, "r");

	expect_sock_name(LISTENER, false, &listen_addr, SUN_LEN(&listen_addr) + 1);
	expect_sock_name(WAITING, true, &listen_addr, SUN_LEN(&listen_addr) + 1);
	server = poll(&pfd, 1, 0) == 1 ? accept(LISTENER, NULL, NULL) : -1;
	if (server < 0 || send(WAITING, "x", 1, 0) != 1)
		test_fail("the waiting connection is gone");
	expect_recv(server, "x");
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
