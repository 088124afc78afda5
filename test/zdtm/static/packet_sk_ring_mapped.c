/*
 * A packet socket whose rx ring is mapped into memory is refused at dump (restore does not
 * map rings), and the test runs on with its ring mapped as it was: the first frame still
 * belongs to the kernel.
 */
#include <linux/if_packet.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define SK_FD 40

int main(int argc, char **argv)
{
	struct tpacket_req req = { 4096, 2, 2048, 4 };
	int version = TPACKET_V2, fd;
	struct tpacket2_hdr *frame;

	test_init(argc, argv);
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0 || dup2(fd, SK_FD) != SK_FD)
		test_fail_errno("packet socket");
	close(fd);
	if (setsockopt(SK_FD, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) ||
	    setsockopt(SK_FD, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		test_fail_errno("PACKET_RX_RING");
	frame = mmap(NULL, req.tp_block_size * req.tp_block_nr, PROT_READ | PROT_WRITE,
		     MAP_SHARED, SK_FD, 0);
	if (frame == MAP_FAILED)
		test_fail_errno("mmap the ring");

	test_ready();
	test_wait_sigterm();

	if (frame->tp_status != TP_STATUS_KERNEL)
		test_fail("the first frame's status is %#x after the failed dump", frame->tp_status);
	test_pass();
}
