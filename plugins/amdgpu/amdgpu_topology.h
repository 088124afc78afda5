/*
 * GPU topology of the AMDGPU plugin: read the KFD topology directory
 * (/sys/class/kfd/kfd/topology, or $AMDGPU_TOPOLOGY_DIR, e.g. the emulator's) and map the
 * dumped GPUs onto this machine's by their model properties.
 */
#ifndef AMDGPU_TOPOLOGY_H
#define AMDGPU_TOPOLOGY_H

#include <stdint.h>

#include "amdgpu.pb-c.h"

#define AMDGPU_TOPOLOGY_ENV "AMDGPU_TOPOLOGY_DIR"
#define AMDGPU_NR_MODEL_PROPS 10

struct amdgpu_topo_gpu {
	uint32_t gpu_id;
	uint64_t model[AMDGPU_NR_MODEL_PROPS]; /* values of amdgpu_model_props[] */
};

struct amdgpu_topology {
	struct amdgpu_topo_gpu *gpus;
	unsigned int nr_gpus;
};

extern const char *const amdgpu_model_props[AMDGPU_NR_MODEL_PROPS];

int amdgpu_topology_read(struct amdgpu_topology *topo);
void amdgpu_topology_free(struct amdgpu_topology *topo);
/* The GPU with this gpu_id, or NULL. */
const struct amdgpu_topo_gpu *amdgpu_topology_find(const struct amdgpu_topology *topo, uint32_t gpu_id);
/*
 * actual_ids[i]: this machine's GPU for the dump's gpus[i], same model, each used once.
 * Refuses (-ENODEV, with a message) when the GPU counts or models differ.
 */
int amdgpu_topology_map(const struct amdgpu_topology *topo, const AmdgpuKfdEntry *kfd,
			uint32_t *actual_ids);

#endif
