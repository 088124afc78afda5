/*
 * Unit test of the AMDGPU plugin's SDMA COPY_LINEAR packets (plugins/amdgpu/
 * amdgpu_sdma_packets.c): the one part of its SDMA path that runs without a GPU. Checks
 * each dword against the packet layout, per GPU family, and the indirect buffer's padding.
 * Prints "N passed, N failed".
 */
#include <stdio.h>
#include <string.h>

#include "amdgpu_sdma.h"

#define MIB (1ULL << 20)

static int failed, passed;

static void expect(int ok, const char *what, unsigned int got, unsigned int want)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s: %#x, expected %#x\n", what, got, want);
}

/* Packet i of a copy: header, count, parameters, source and destination, low then high. */
static void check_packet(const uint32_t *ib, unsigned int i, uint32_t count, uint64_t src,
			 uint64_t dst)
{
	const uint32_t *p = ib + i * AMDGPU_SDMA_COPY_DWORDS;

	expect(p[0] == 0x1, "header: COPY (1), sub-opcode LINEAR (0)", p[0], 0x1);
	expect(p[1] == count, "count", p[1], count);
	expect(p[2] == 0, "parameters", p[2], 0);
	expect(p[3] == (uint32_t)src && p[4] == (uint32_t)(src >> 32), "source", p[3], (uint32_t)src);
	expect(p[5] == (uint32_t)dst && p[6] == (uint32_t)(dst >> 32), "destination", p[5],
	       (uint32_t)dst);
}

int main(void)
{
	uint32_t ib[64];
	uint64_t src = 0x123400000000ULL, dst = 0x7ff000001000ULL;
	unsigned int n, i;

	/* GFX9 on: 2 MiB per packet, count = bytes - 1; 14 dwords padded to 16 with NOPs. */
	memset(ib, 0xaa, sizeof(ib));
	n = amdgpu_sdma_build_copy(ib, 64, src, dst, 4 * MIB, true);
	expect(n == 16, "dwords for 4 MiB (GFX9)", n, 16);
	check_packet(ib, 0, 2 * MIB - 1, src, dst);
	check_packet(ib, 1, 2 * MIB - 1, src + 2 * MIB, dst + 2 * MIB);
	expect(ib[14] == 0 && ib[15] == 0, "NOP padding", ib[14], 0);

	/* Older families: 1 MiB per packet, count = bytes; a short tail packet. */
	n = amdgpu_sdma_build_copy(ib, 64, src, dst, 3 * MIB + 4096, false);
	expect(n == 32, "dwords for 3 MiB + 4 KiB (older)", n, 32);
	for (i = 0; i < 3; i++)
		check_packet(ib, i, MIB, src + i * MIB, dst + i * MIB);
	check_packet(ib, 3, 4096, src + 3 * MIB, dst + 3 * MIB);

	/* Addresses crossing 4 GiB inside a copy keep their high dwords right. */
	n = amdgpu_sdma_build_copy(ib, 64, 0xffe00000ULL, 0x1ffe00000ULL, 4 * MIB, true);
	check_packet(ib, 1, 2 * MIB - 1, 0x100000000ULL, 0x200000000ULL);

	expect(amdgpu_sdma_build_copy(ib, 8, src, dst, 4 * MIB, true) == 0,
	       "an IB too small is refused", 1, 0);
	expect(amdgpu_sdma_build_copy(ib, 64, src, dst, 0, true) == 0, "nothing to copy", 1, 0);
	printf("sdma_packets_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
