/*
 * Listening sockets come back bound to their names and listening, with their connections:
 * a stream listener on an absolute path (its file's mode kept), a seqpacket one on an
 * abstract name, one on a relative path. Each has an accepted connection whose server end
 * has the listener's name again and whose queues hold what was sent both ways, and a
 * connection not accepted yet that accept() still returns (then carries data). A server
 * end whose client closed keeps the listener's name, the data and the end of its stream.
 * An unbound, unconnected socket stays so. ZDTM_UNIX_UPSTREAM_RESTORE in the environment
 * accepts server ends that come back unnamed (upstream criu restores a connection as a
 * socketpair).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "zdtmtst.h"

#define L_PATH	  50 /* stream, on an absolute path, backlog 7 */
#define S_PATH	  51 /* accepted from it */
#define C_PATH	  52 /* its client */
#define P_PATH	  53 /* a client not accepted yet */
#define L_ABS	  54 /* seqpacket, on an abstract name */
#define S_ABS	  55
#define C_ABS	  56
#define P_ABS	  57
#define L_REL	  58 /* stream, on a relative path */
#define UNBOUND	  59
#define ORPHAN	  60 /* accepted from L_PATH; its client sent "bye" and closed */
#define FILE_MODE 0640
#define REL_NAME  "rel.sock"

static struct sockaddr_un path_addr, abs_addr, rel_addr;
static socklen_t path_len, abs_len, rel_len;
static bool upstream_restore;

static void place(int fd, int at)
{
	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("socket");
	close(fd);
}

static void listen_at(int type, const struct sockaddr_un *addr, socklen_t len, int backlog,
		      int at)
{
	int fd = socket(AF_UNIX, type, 0);

	if (fd < 0 || bind(fd, (const struct sockaddr *)addr, len) || listen(fd, backlog))
		test_fail_errno("bind and listen");
	place(fd, at);
}

static void connect_at(int type, const struct sockaddr_un *addr, socklen_t len, int at)
{
	int fd = socket(AF_UNIX, type, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)addr, len))
		test_fail_errno("connect");
	place(fd, at);
}

static void send_all(int fd, const char *msg)
{
	if (send(fd, msg, strlen(msg), 0) != (ssize_t)strlen(msg))
		test_fail_errno("send");
}

static void setup(void)
{
	char cwd[80];

	if (!getcwd(cwd, sizeof(cwd)))
		test_fail_errno("getcwd");
	path_addr.sun_family = abs_addr.sun_family = rel_addr.sun_family = AF_UNIX;
	snprintf(path_addr.sun_path, sizeof(path_addr.sun_path), "%s/listen.sock", cwd);
	path_len = offsetof(struct sockaddr_un, sun_path) + strlen(path_addr.sun_path) + 1;
	/* An abstract name: a NUL, then bytes (a NUL among them too). */
	abs_len = offsetof(struct sockaddr_un, sun_path) + 1 +
		  snprintf(abs_addr.sun_path + 1, sizeof(abs_addr.sun_path) - 1,
			   "zdtm-usk-%d_abs", getpid());
	abs_addr.sun_path[10] = '\0';
	strcpy(rel_addr.sun_path, REL_NAME);
	rel_len = offsetof(struct sockaddr_un, sun_path) + sizeof(REL_NAME);
	unlink(path_addr.sun_path);
	unlink(REL_NAME);

	listen_at(SOCK_STREAM, &path_addr, path_len, 7, L_PATH);
	if (chmod(path_addr.sun_path, FILE_MODE))
		test_fail_errno("chmod");
	connect_at(SOCK_STREAM, &path_addr, path_len, C_PATH);
	place(accept(L_PATH, NULL, NULL), S_PATH);
	connect_at(SOCK_STREAM, &path_addr, path_len, ORPHAN);
	send_all(ORPHAN, "bye");
	close(ORPHAN);
	place(accept(L_PATH, NULL, NULL), ORPHAN);
	connect_at(SOCK_STREAM, &path_addr, path_len, P_PATH);
	send_all(C_PATH, "from the path client");
	send_all(S_PATH, "from the path server");

	listen_at(SOCK_SEQPACKET, &abs_addr, abs_len, 3, L_ABS);
	connect_at(SOCK_SEQPACKET, &abs_addr, abs_len, C_ABS);
	place(accept(L_ABS, NULL, NULL), S_ABS);
	connect_at(SOCK_SEQPACKET, &abs_addr, abs_len, P_ABS);
	send_all(C_ABS, "record one");
	send_all(C_ABS, "record two");
	send_all(S_ABS, "record back");

	listen_at(SOCK_STREAM, &rel_addr, rel_len, 1, L_REL);
	place(socket(AF_UNIX, SOCK_STREAM, 0), UNBOUND);
}

static void expect_unnamed(int fd, bool peer)
{
	struct sockaddr_un unnamed = { .sun_family = AF_UNIX };

	expect_sock_name(fd, peer, &unnamed, sizeof(sa_family_t));
}

/* The name of a server end that was accepted from a listening socket. */
static void expect_accepted_name(int fd, const struct sockaddr_un *want, socklen_t want_len)
{
	if (upstream_restore)
		expect_unnamed(fd, false);
	else
		expect_sock_name(fd, false, want, want_len);
}

static void expect_recv(int fd, const char *want)
{
	char got[64];
	ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);

	if (n != (ssize_t)strlen(want) || memcmp(got, want, n))
		test_fail("fd %d: received %zd bytes, expected '%s'", fd, n, want);
}

static void expect_int(int fd, int opt, int want, const char *name)
{
	socklen_t len = sizeof(int);
	int val;

	if (getsockopt(fd, SOL_SOCKET, opt, &val, &len) || val != want)
		test_fail("fd %d: %s is %d, not %d", fd, name, val, want);
}

/* The connection that waited: accepted now, it carries data both ways. */
static void accept_waiting(int listener, int client, const struct sockaddr_un *addr,
			   socklen_t len)
{
	struct pollfd pfd = { .fd = listener, .events = POLLIN };
	int server = poll(&pfd, 1, 0) == 1 ? accept(listener, NULL, NULL) : -1;

	if (server < 0)
		test_fail("fd %d: the waiting connection cannot be accepted: %s", listener,
			  strerror(errno));
	expect_sock_name(server, false, addr, len);
	expect_sock_name(client, true, addr, len);
	send_all(client, "late");
	expect_recv(server, "late");
	send_all(server, "reply");
	expect_recv(client, "reply");
	if (poll(&pfd, 1, 0))
		test_fail("fd %d: another connection waits to be accepted", listener);
	close(server);
}

static void check(void)
{
	struct stat st;

	expect_sock_name(L_PATH, false, &path_addr, path_len);
	expect_int(L_PATH, SO_ACCEPTCONN, 1, "SO_ACCEPTCONN");
	if (stat(path_addr.sun_path, &st) || !S_ISSOCK(st.st_mode) ||
	    (st.st_mode & 07777) != FILE_MODE)
		test_fail("%s: not a socket of mode %o", path_addr.sun_path, FILE_MODE);
	expect_accepted_name(S_PATH, &path_addr, path_len);
	expect_unnamed(S_PATH, true);
	expect_unnamed(C_PATH, false);
	if (!upstream_restore)
		expect_sock_name(C_PATH, true, &path_addr, path_len);
	expect_recv(S_PATH, "from the path client");
	expect_recv(C_PATH, "from the path server");
	accept_waiting(L_PATH, P_PATH, &path_addr, path_len);
	expect_accepted_name(ORPHAN, &path_addr, path_len);
	expect_recv(ORPHAN, "bye");
	expect_recv(ORPHAN, "");
	/* The closed client, unnamed, is still its peer for getpeername(). */
	expect_unnamed(ORPHAN, true);

	expect_sock_name(L_ABS, false, &abs_addr, abs_len);
	expect_int(L_ABS, SO_TYPE, SOCK_SEQPACKET, "SO_TYPE");
	expect_accepted_name(S_ABS, &abs_addr, abs_len);
	if (!upstream_restore)
		expect_sock_name(C_ABS, true, &abs_addr, abs_len);
	expect_recv(S_ABS, "record one");
	expect_recv(S_ABS, "record two");
	expect_recv(C_ABS, "record back");
	accept_waiting(L_ABS, P_ABS, &abs_addr, abs_len);

	expect_sock_name(L_REL, false, &rel_addr, rel_len);
	expect_int(L_REL, SO_ACCEPTCONN, 1, "SO_ACCEPTCONN");
	expect_unnamed(UNBOUND, false);
	expect_int(UNBOUND, SO_ACCEPTCONN, 0, "SO_ACCEPTCONN");
	if (connect(UNBOUND, (struct sockaddr *)&rel_addr, rel_len))
		test_fail_errno("the unbound socket cannot connect to the relative listener");
}

int main(int argc, char **argv)
{
	test_init(argc, argv);
	upstream_restore = getenv("ZDTM_UNIX_UPSTREAM_RESTORE");
	setup();

	test_ready();
	test_wait_sigterm();

	check();
	test_pass();
}
