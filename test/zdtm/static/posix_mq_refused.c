/*
 * A POSIX message queue fd (mq_open) is refused at dump, as CRIU refuses it (its images
 * have no record for one), and the test runs on with its queue and the message queued in
 * it as they were.
 */
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

#define MESSAGE "zdtm mqueue"

int main(int argc, char **argv)
{
	struct mq_attr attr = { .mq_maxmsg = 4, .mq_msgsize = 64 };
	char name[64], buf[64];
	mqd_t mq;

	test_init(argc, argv);
	snprintf(name, sizeof(name), "/zdtm-posix-mq-%d", getpid());
	mq = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
	if (mq == (mqd_t)-1)
		test_fail_errno("mq_open");
	mq_unlink(name);
	if (mq_send(mq, MESSAGE, sizeof(MESSAGE), 3))
		test_fail_errno("mq_send");

	test_ready();
	test_wait_sigterm();

	if (mq_receive(mq, buf, sizeof(buf), NULL) != sizeof(MESSAGE) || strcmp(buf, MESSAGE))
		test_fail("the queued message is gone or changed after the failed dump");
	test_pass();
}
