/*
 * GPU topology of the AMDGPU plugin: read the KFD topology directory
 * (/sys/class/kfd/kfd/topology, or $AMDGPU_TOPOLOGY_DIR, e.g. the emulator's), describe a
 * GPU in the images, and map the dumped GPUs onto this machine's by model, once for the
 * whole restore.
 */
#ifndef AMDGPU_TOPOLOGY_H
#define AMDGPU_TOPOLOGY_H

#include <stdint.h>

#include "amdgpu.pb-c.h"

#define AMDGPU_TOPOLOGY_ENV "AMDGPU_TOPOLOGY_DIR"
#define AMDGPU_NR_MODEL_PROPS 10

struct amdgpu_topo_gpu {
	uint32_t gpu_id;
	uint32_t render_minor; /* its render node: /dev/dri/renderD<minor> */
	uint64_t model[AMDGPU_NR_MODEL_PROPS]; /* values of amdgpu_model_props[] */
};

struct amdgpu_topology {
	struct amdgpu_topo_gpu *gpus;
	unsigned int nr_gpus;
};

extern const char *const amdgpu_model_props[AMDGPU_NR_MODEL_PROPS];

int amdgpu_topology_read(struct amdgpu_topology *topo);
void amdgpu_topology_free(struct amdgpu_topology *topo);
/* The GPU with this gpu_id, or with this render node minor, or NULL. */
const struct amdgpu_topo_gpu *amdgpu_topology_find(const struct amdgpu_topology *topo,
						   uint32_t gpu_id);
const struct amdgpu_topo_gpu *amdgpu_topology_find_minor(const struct amdgpu_topology *topo,
							 uint32_t minor);
/* Describe a GPU for the images: its ids, render node and model (-ENOMEM, logged). */
int amdgpu_gpu_entry_fill(AmdgpuGpuEntry *gpu, uint32_t user_gpu_id,
			  const struct amdgpu_topo_gpu *topo_gpu);

/* A dumped GPU (by its id on the dump machine) and the GPU of this machine it becomes. */
struct amdgpu_gpu_map {
	uint32_t dump_id;
	uint32_t local_id;
	uint32_t local_minor;
};

/*
 * Map every dumped GPU named in gpus[] (repeats allowed: several processes, render nodes)
 * onto a distinct GPU of this machine of the same model, the first unused one, so every
 * process of the tree agrees. map[] has room for nr_gpus entries; *nr_map is filled.
 * Refuses (-ENODEV, with a message naming the GPU) when a model has too few GPUs here.
 */
int amdgpu_topology_map(const struct amdgpu_topology *topo, AmdgpuGpuEntry *const *gpus,
			size_t nr_gpus, struct amdgpu_gpu_map *map, size_t *nr_map);

#endif
