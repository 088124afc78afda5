/*
 * A packet socket's ring mapped into memory whose socket no fd holds any more is refused at
 * dump (restore maps a ring from the restored socket), and the test runs on with its ring
 * mapped as it was: the first frame still belongs to the kernel.
 */
#include <linux/if_packet.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

int main(int argc, char **argv)
{
	struct tpacket_req req = { 4096, 2, 2048, 4 };
	int version = TPACKET_V2, fd;
	struct tpacket2_hdr *frame;

	test_init(argc, argv);
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0)
		test_fail_errno("packet socket");
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) ||
	    setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		test_fail_errno("PACKET_RX_RING");
	frame = mmap(NULL, req.tp_block_size * req.tp_block_nr, PROT_READ | PROT_WRITE,
		     MAP_SHARED, fd, 0);
	if (frame == MAP_FAILED)
		test_fail_errno("mmap the ring");
	close(fd);

	test_ready();
	test_wait_sigterm();

	if (frame->tp_status != TP_STATUS_KERNEL)
		test_fail("the first frame's status is %#x after the failed dump",
			  frame->tp_status);
	test_pass();
}
