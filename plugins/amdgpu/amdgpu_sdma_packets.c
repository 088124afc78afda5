/*
 * SDMA COPY_LINEAR packets, as the amdgpu SDMA engines read them: header dword (opcode
 * COPY = 1 in bits 0-7, sub-opcode LINEAR = 0 in bits 8-15), byte count, parameters
 * (0), source address low/high, destination address low/high. Pure code, shared by the
 * hardware backend and its unit test.
 */
#include "amdgpu_sdma.h"

#define SDMA_OP_NOP 0
#define SDMA_OP_COPY 1
#define SDMA_SUBOP_COPY_LINEAR 0
/* The rings fetch indirect buffers in 8-dword units. */
#define SDMA_IB_ALIGN 8

static uint32_t sdma_header(uint32_t op, uint32_t sub_op)
{
	return (sub_op & 0xff) << 8 | (op & 0xff);
}

unsigned int amdgpu_sdma_build_copy(uint32_t *ib, unsigned int ib_dwords, uint64_t src,
				    uint64_t dst, uint64_t len, bool count_minus_one)
{
	uint64_t max = AMDGPU_SDMA_MAX_PACKET(count_minus_one);
	uint64_t packets = (len + max - 1) / max;
	uint64_t needed = (packets * AMDGPU_SDMA_COPY_DWORDS + SDMA_IB_ALIGN - 1) / SDMA_IB_ALIGN *
			  SDMA_IB_ALIGN;
	unsigned int n = 0;

	if (!len || needed > ib_dwords)
		return 0;
	while (len) {
		uint64_t chunk = len < max ? len : max;

		ib[n++] = sdma_header(SDMA_OP_COPY, SDMA_SUBOP_COPY_LINEAR);
		ib[n++] = (uint32_t)(count_minus_one ? chunk - 1 : chunk);
		ib[n++] = 0;
		ib[n++] = (uint32_t)src;
		ib[n++] = (uint32_t)(src >> 32);
		ib[n++] = (uint32_t)dst;
		ib[n++] = (uint32_t)(dst >> 32);
		src += chunk;
		dst += chunk;
		len -= chunk;
	}
	while (n % SDMA_IB_ALIGN)
		ib[n++] = sdma_header(SDMA_OP_NOP, 0);
	return n;
}
