/*
 * A packet mode master with a status waiting to be read (TIOCPKT_FLUSHREAD, from a flush
 * of the slave's input): reading it is the only way to see it, and it cannot be put
 * back, so a dump must refuse the pty and leave it as it was. The test checks that the
 * status is still there, and nothing else is queued.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	struct pollfd pfd = { .events = POLLIN | POLLPRI };
	char slave_path[PATH_MAX], status[4];
	int master, slave, on = 1;

	test_init(argc, argv);
	master = pty_open_master(O_NONBLOCK, slave_path, sizeof(slave_path));
	slave = open(slave_path, O_RDWR | O_NOCTTY);
	if (slave < 0 || ioctl(master, TIOCPKT, &on) || tcflush(slave, TCIFLUSH))
		test_fail_errno("a pending packet mode status");

	test_ready();
	test_wait_sigterm();

	pfd.fd = master;
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLPRI))
		test_fail("no packet mode status waits (revents %#x)", pfd.revents);
	if (read(master, status, sizeof(status)) != 1 || !(status[0] & TIOCPKT_FLUSHREAD))
		test_fail("the status read is not TIOCPKT_FLUSHREAD alone");
	if (read(master, status, sizeof(status)) >= 0)
		test_fail("more than the status was queued");
	test_pass();
}
