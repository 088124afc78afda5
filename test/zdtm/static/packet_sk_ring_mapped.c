/*
 * Packet socket rings mapped into memory come back mapped at their addresses from the
 * restored sockets (the maps line names the socket's inode), the rx ring shared and the
 * tx ring of another socket private, with their geometry (the kernel maps only a ring's
 * exact size: a new mapping of that size works) and their frames the kernel's again.
 */
#include <errno.h>
#include <linux/if_packet.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RX_FD 40
#define TX_FD 41
#define BLOCK 4096

static const struct tpacket_req rx_req = { BLOCK, 2, 2048, 4 };
static const struct tpacket_req tx_req = { BLOCK, 1, 2048, 2 };

static void *ring_socket(int at, const struct tpacket_req *req, int opt, int type)
{
	int version = TPACKET_V2, fd = socket(AF_PACKET, SOCK_RAW, 0);
	void *map;

	if (fd < 0 || dup2(fd, at) != at)
		test_fail_errno("packet socket");
	close(fd);
	if (setsockopt(at, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) ||
	    setsockopt(at, SOL_PACKET, opt, req, sizeof(*req)))
		test_fail_errno("ring");
	map = mmap(NULL, req->tp_block_size * req->tp_block_nr, PROT_READ | PROT_WRITE, type, at,
		   0);
	if (map == MAP_FAILED)
		test_fail_errno("mmap the ring");
	return map;
}

static void expect_maps_socket(void *map, int fd, const char *what)
{
	char line[512], want[64];
	struct stat st;

	if (fstat(fd, &st))
		test_fail_errno("fstat");
	maps_line(map, line, sizeof(line));
	snprintf(want, sizeof(want), " %02x:%02x %lu ", major(st.st_dev), minor(st.st_dev),
		 (unsigned long)st.st_ino);
	if (!strstr(line, want))
		test_fail("%s: maps line \"%s\" does not map socket %s", what, line, want);
}

int main(int argc, char **argv)
{
	struct tpacket2_hdr *rx, *tx;

	test_init(argc, argv);
	rx = ring_socket(RX_FD, &rx_req, PACKET_RX_RING, MAP_SHARED);
	tx = ring_socket(TX_FD, &tx_req, PACKET_TX_RING, MAP_PRIVATE);

	test_ready();
	test_wait_sigterm();

	expect_maps_socket(rx, RX_FD, "rx ring");
	expect_maps_socket(tx, TX_FD, "tx ring");
	for (unsigned int i = 0; i < rx_req.tp_frame_nr; i++) {
		struct tpacket2_hdr *h = (void *)((char *)rx + i * rx_req.tp_frame_size);

		if (h->tp_status != TP_STATUS_KERNEL)
			test_fail("rx frame %u has status %#x", i, h->tp_status);
	}
	if (tx->tp_status != TP_STATUS_AVAILABLE)
		test_fail("tx frame 0 has status %#x", tx->tp_status);
	for (int fd = RX_FD; fd <= TX_FD; fd++) {
		const struct tpacket_req *req = fd == RX_FD ? &rx_req : &tx_req;
		size_t size = req->tp_block_size * req->tp_block_nr;
		void *again = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

		if (again == MAP_FAILED)
			test_fail("fd %d: its ring is not %zu bytes: %s", fd, size,
				  strerror(errno));
		munmap(again, size);
	}
	test_pass();
}
