/*
 * SDMA copies through libdrm_amdgpu: the hardware backend's copy engine. BO contents
 * move between a BO (imported from its dma-buf) and host memory the GPU can read and
 * write (a userptr BO over a staging buffer), by COPY_LINEAR packets on the GPU's SDMA
 * ring, each submission waited for on its fence. NEVER RUN ON AMD HARDWARE: these
 * machines have no GPU; it compiles and links against libdrm_amdgpu, and the packet
 * layout is unit-tested (test/gpu/sdma_packets_test.c).
 */
#ifndef AMDGPU_SDMA_H
#define AMDGPU_SDMA_H

#include <stdbool.h>
#include <stdint.h>

struct amdgpu_sdma;

/* An SDMA engine on the GPU behind render_fd (the caller keeps the fd open meanwhile). */
int amdgpu_sdma_open(int render_fd, struct amdgpu_sdma **sdma);
void amdgpu_sdma_close(struct amdgpu_sdma *sdma);
/* len bytes between a BO's dma-buf at bo_off and a file at file_off (to_bo: file -> BO). */
int amdgpu_sdma_copy(struct amdgpu_sdma *sdma, int dmabuf_fd, uint64_t bo_off, int file_fd,
		     uint64_t file_off, uint64_t len, bool to_bo);

/* The packets themselves (amdgpu_sdma_packets.c, no libdrm): see there. */
#define AMDGPU_SDMA_COPY_DWORDS 7
/*
 * Bytes one COPY_LINEAR packet moves: its count field has 21 bits on GFX9 on (where it
 * holds bytes - 1, so 2 MiB fit); older families count bytes, so 1 MiB keeps them inside
 * the field and every packet's addresses aligned.
 */
#define AMDGPU_SDMA_MAX_PACKET(count_minus_one) ((count_minus_one) ? 1ULL << 21 : 1ULL << 20)
/*
 * Write COPY_LINEAR packets moving len bytes from GPU address src to dst into ib
 * (capacity ib_dwords), padded with NOPs to a multiple of 8 dwords as the SDMA rings
 * want. count_minus_one: GFX9 on (AMDGPU_FAMILY_AI and later). Returns the dwords
 * written, or 0 if ib is too small.
 */
unsigned int amdgpu_sdma_build_copy(uint32_t *ib, unsigned int ib_dwords, uint64_t src,
				    uint64_t dst, uint64_t len, bool count_minus_one);

#endif
