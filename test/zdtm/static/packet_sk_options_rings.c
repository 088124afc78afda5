/*
 * Packet sockets come back bound as they were, with their options, memberships, fanout
 * and rings: a SOCK_RAW one (TPACKET_V2, PACKET_AUXDATA, an rx ring, a promiscuous
 * membership on lo, O_NONBLOCK), a SOCK_DGRAM one for ETH_P_IP bound to lo (PACKET_RESERVE,
 * PACKET_ORIGDEV, a unicast membership, a hash fanout group, a TPACKET_V1 tx ring), a
 * TPACKET_V3 one with an rx ring of blocks, and a SOCK_PACKET one bound to lo by name.
 * A ring's geometry is checked by mapping it: the kernel maps only its exact size. Each
 * membership is checked by leaving it (the kernel refuses to leave one not joined).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdtmtst.h"

#define RAW_FD	 40
#define DGRAM_FD 41
#define V3_FD	 42
#define SPKT_FD	 43
#define FANOUT	 (77 | PACKET_FANOUT_HASH << 16)
#define RESERVE	 24
#define BLOCK	 4096

static const struct tpacket_req raw_rx = { BLOCK, 4, BLOCK / 2, 8 };
static const struct tpacket_req dgram_tx = { BLOCK, 2, BLOCK, 2 };
static const struct tpacket_req3 v3_rx = { 2 * BLOCK, 3, 2 * BLOCK, 3, 60, 16, 0 };
static const unsigned char unicast[ETH_ALEN] = { 0x02, 0x00, 0x5e, 0x10, 0x20, 0x30 };
static int lo;

static void set_opt(int fd, int opt, const void *val, socklen_t len)
{
	if (setsockopt(fd, SOL_PACKET, opt, val, len))
		test_fail("fd %d: setsockopt %d: %s", fd, opt, strerror(errno));
}

static void set_int(int fd, int opt, int val)
{
	set_opt(fd, opt, &val, sizeof(val));
}

static void expect_int(int fd, int opt, int want)
{
	int val = -1;
	socklen_t len = sizeof(val);

	if (getsockopt(fd, SOL_PACKET, opt, &val, &len) || val != want)
		test_fail("fd %d: option %d is %d, expected %d", fd, opt, val, want);
}

static struct packet_mreq membership(int type, const unsigned char *addr)
{
	struct packet_mreq m = { .mr_ifindex = lo, .mr_type = type,
				 .mr_alen = addr ? ETH_ALEN : 0 };

	if (addr)
		memcpy(m.mr_address, addr, ETH_ALEN);
	return m;
}

static void expect_bound(int fd, int ifindex, int protocol)
{
	struct sockaddr_ll addr = {};
	socklen_t len = sizeof(addr);

	if (getsockname(fd, (struct sockaddr *)&addr, &len) || addr.sll_ifindex != ifindex ||
	    addr.sll_protocol != protocol)
		test_fail("fd %d: bound to %d protocol %#x, expected %d %#x", fd, addr.sll_ifindex,
			  addr.sll_protocol, ifindex, protocol);
}

static void expect_ring_size(int fd, size_t size)
{
	void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

	if (map == MAP_FAILED)
		test_fail("fd %d: its rings are not %zu bytes: %s", fd, size, strerror(errno));
	munmap(map, size);
}

static void setup(void)
{
	struct packet_mreq m;
	struct sockaddr_ll addr = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	struct sockaddr spkt = { .sa_family = AF_PACKET, .sa_data = "lo" };

	socket_at(AF_PACKET, SOCK_RAW, 0, RAW_FD);
	set_int(RAW_FD, PACKET_VERSION, TPACKET_V2);
	set_int(RAW_FD, PACKET_AUXDATA, 1);
	set_opt(RAW_FD, PACKET_RX_RING, &raw_rx, sizeof(raw_rx));
	m = membership(PACKET_MR_PROMISC, NULL);
	set_opt(RAW_FD, PACKET_ADD_MEMBERSHIP, &m, sizeof(m));
	if (fcntl(RAW_FD, F_SETFL, O_NONBLOCK))
		test_fail_errno("O_NONBLOCK");

	socket_at(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP), DGRAM_FD);
	addr.sll_ifindex = lo;
	if (bind(DGRAM_FD, (struct sockaddr *)&addr, sizeof(addr)))
		test_fail_errno("bind to lo");
	set_int(DGRAM_FD, PACKET_RESERVE, RESERVE);
	set_int(DGRAM_FD, PACKET_ORIGDEV, 1);
	m = membership(PACKET_MR_UNICAST, unicast);
	set_opt(DGRAM_FD, PACKET_ADD_MEMBERSHIP, &m, sizeof(m));
	set_int(DGRAM_FD, PACKET_FANOUT, FANOUT);
	set_opt(DGRAM_FD, PACKET_TX_RING, &dgram_tx, sizeof(dgram_tx));

	socket_at(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL), V3_FD);
	set_int(V3_FD, PACKET_VERSION, TPACKET_V3);
	set_opt(V3_FD, PACKET_RX_RING, &v3_rx, sizeof(v3_rx));

	socket_at(AF_PACKET, SOCK_PACKET, htons(ETH_P_ALL), SPKT_FD);
	if (bind(SPKT_FD, &spkt, sizeof(spkt)))
		test_fail_errno("bind SOCK_PACKET to lo");
}

int main(int argc, char **argv)
{
	struct sockaddr spkt = {};
	socklen_t len = sizeof(spkt);
	struct packet_mreq m;

	test_init(argc, argv);
	lo = if_nametoindex("lo");
	if (!lo)
		test_fail_errno("if_nametoindex(lo)");
	setup();
	test_ready();
	test_wait_sigterm();

	expect_bound(RAW_FD, 0, 0);
	expect_int(RAW_FD, PACKET_VERSION, TPACKET_V2);
	expect_int(RAW_FD, PACKET_AUXDATA, 1);
	expect_ring_size(RAW_FD, raw_rx.tp_block_size * raw_rx.tp_block_nr);
	if (!(fcntl(RAW_FD, F_GETFL) & O_NONBLOCK))
		test_fail("fd %d lost O_NONBLOCK", RAW_FD);
	m = membership(PACKET_MR_PROMISC, NULL);
	set_opt(RAW_FD, PACKET_DROP_MEMBERSHIP, &m, sizeof(m));

	expect_bound(DGRAM_FD, lo, htons(ETH_P_IP));
	expect_int(DGRAM_FD, PACKET_RESERVE, RESERVE);
	expect_int(DGRAM_FD, PACKET_ORIGDEV, 1);
	expect_int(DGRAM_FD, PACKET_FANOUT, FANOUT);
	expect_ring_size(DGRAM_FD, dgram_tx.tp_block_size * dgram_tx.tp_block_nr);
	m = membership(PACKET_MR_UNICAST, unicast);
	set_opt(DGRAM_FD, PACKET_DROP_MEMBERSHIP, &m, sizeof(m));

	expect_int(V3_FD, PACKET_VERSION, TPACKET_V3);
	expect_ring_size(V3_FD, v3_rx.tp_block_size * v3_rx.tp_block_nr);

	if (getsockname(SPKT_FD, &spkt, &len) || strcmp(spkt.sa_data, "lo"))
		test_fail("SOCK_PACKET socket is bound to \"%.14s\", not lo", spkt.sa_data);
	test_pass();
}
