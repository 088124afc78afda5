/*
 * KFD topology: nodes/N/gpu_id and nodes/N/properties ("name value" lines) of each GPU
 * node (gpu_id 0 is a CPU). GPUs of one model differ only in ids and locations, so the
 * dump's GPUs are matched to this machine's by the properties that describe the model.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_topology.h"

#define KFD_TOPOLOGY_DIR "/sys/class/kfd/kfd/topology"

/* What makes two GPUs interchangeable for a process's BOs and code objects. */
const char *const amdgpu_model_props[AMDGPU_NR_MODEL_PROPS] = {
	"vendor_id",	    "device_id",	 "gfx_target_version", "simd_count",
	"array_count",	    "cu_per_simd_array", "wave_front_size",    "num_sdma_engines",
	"local_mem_size",   "num_xcc",
};

static const char *topology_dir(void)
{
	const char *dir = getenv(AMDGPU_TOPOLOGY_ENV);

	return dir && dir[0] ? dir : KFD_TOPOLOGY_DIR;
}

/* Reads one "name value" file; keys not in the model are skipped. */
static int read_node_props(const char *node_dir, struct amdgpu_topo_gpu *gpu)
{
	char path[4096], name[64];
	unsigned long long value;
	FILE *f;
	int i;

	if (snprintf(path, sizeof(path), "%s/properties", node_dir) >= (int)sizeof(path)) {
		pr_err("topology: path too long under %s\n", node_dir);
		return -ENAMETOOLONG;
	}
	f = fopen(path, "re");
	if (!f) {
		pr_perror("topology: cannot open %s", path);
		return -errno;
	}
	while (fscanf(f, "%63s %llu", name, &value) == 2) {
		for (i = 0; i < AMDGPU_NR_MODEL_PROPS; i++) {
			if (!strcmp(name, amdgpu_model_props[i]))
				gpu->model[i] = value;
		}
		if (!strcmp(name, "drm_render_minor"))
			gpu->render_minor = value;
	}
	fclose(f);
	return 0;
}

static int read_node_gpu_id(const char *node_dir, uint32_t *gpu_id)
{
	char path[4096];
	FILE *f;
	int ok;

	if (snprintf(path, sizeof(path), "%s/gpu_id", node_dir) >= (int)sizeof(path)) {
		pr_err("topology: path too long under %s\n", node_dir);
		return -ENAMETOOLONG;
	}
	f = fopen(path, "re");
	if (!f) {
		pr_perror("topology: cannot open %s", path);
		return -errno;
	}
	ok = fscanf(f, "%" SCNu32, gpu_id) == 1;
	fclose(f);
	if (!ok) {
		pr_err("topology: %s is not a number\n", path);
		return -EINVAL;
	}
	return 0;
}

static int add_node(struct amdgpu_topology *topo, const char *node_dir)
{
	struct amdgpu_topo_gpu gpu = { 0 }, *grown;
	int ret = read_node_gpu_id(node_dir, &gpu.gpu_id);

	if (ret || gpu.gpu_id == 0)
		return ret;
	ret = read_node_props(node_dir, &gpu);
	if (ret)
		return ret;
	grown = realloc(topo->gpus, (topo->nr_gpus + 1) * sizeof(*grown));
	if (!grown) {
		pr_err("topology: out of memory\n");
		return -ENOMEM;
	}
	topo->gpus = grown;
	topo->gpus[topo->nr_gpus++] = gpu;
	return 0;
}

int amdgpu_topology_read(struct amdgpu_topology *topo)
{
	char nodes[4096], node_dir[4096];
	struct dirent **entries;
	int nr, i, ret = 0;

	*topo = (struct amdgpu_topology){ 0 };
	snprintf(nodes, sizeof(nodes), "%s/nodes", topology_dir());
	/* versionsort: node 10 after node 9, the order KFD numbers them. */
	nr = scandir(nodes, &entries, NULL, versionsort);
	if (nr < 0) {
		pr_perror("topology: cannot read %s", nodes);
		return -errno;
	}
	for (i = 0; i < nr; i++) {
		if (!ret && entries[i]->d_name[0] != '.') {
			if (snprintf(node_dir, sizeof(node_dir), "%s/%s", nodes, entries[i]->d_name) >=
			    (int)sizeof(node_dir)) {
				pr_err("topology: path too long under %s\n", nodes);
				ret = -ENAMETOOLONG;
			} else {
				ret = add_node(topo, node_dir);
			}
		}
		free(entries[i]);
	}
	free(entries);
	if (ret)
		amdgpu_topology_free(topo);
	else
		pr_debug("topology: %u GPUs in %s\n", topo->nr_gpus, nodes);
	return ret;
}

void amdgpu_topology_free(struct amdgpu_topology *topo)
{
	free(topo->gpus);
	*topo = (struct amdgpu_topology){ 0 };
}

const struct amdgpu_topo_gpu *amdgpu_topology_find(const struct amdgpu_topology *topo,
						   uint32_t gpu_id)
{
	unsigned int i;

	for (i = 0; i < topo->nr_gpus; i++) {
		if (topo->gpus[i].gpu_id == gpu_id)
			return &topo->gpus[i];
	}
	return NULL;
}

const struct amdgpu_topo_gpu *amdgpu_topology_find_minor(const struct amdgpu_topology *topo,
							 uint32_t minor)
{
	unsigned int i;

	for (i = 0; i < topo->nr_gpus; i++) {
		if (topo->gpus[i].render_minor == minor)
			return &topo->gpus[i];
	}
	return NULL;
}

int amdgpu_gpu_entry_fill(AmdgpuGpuEntry *gpu, uint32_t user_gpu_id,
			  const struct amdgpu_topo_gpu *topo_gpu)
{
	int i;

	gpu->user_gpu_id = user_gpu_id;
	gpu->actual_gpu_id = topo_gpu->gpu_id;
	gpu->render_minor = topo_gpu->render_minor;
	gpu->model = calloc(AMDGPU_NR_MODEL_PROPS, sizeof(*gpu->model));
	if (!gpu->model)
		goto nomem;
	for (i = 0; i < AMDGPU_NR_MODEL_PROPS; i++) {
		AmdgpuTopoProp *prop = malloc(sizeof(*prop));

		if (!prop)
			goto nomem;
		amdgpu_topo_prop__init(prop);
		gpu->model[gpu->n_model++] = prop;
		prop->name = strdup(amdgpu_model_props[i]);
		if (!prop->name)
			goto nomem;
		prop->value = topo_gpu->model[i];
	}
	return 0;
nomem:
	pr_err("out of memory describing GPU %#x\n", topo_gpu->gpu_id);
	return -ENOMEM;
}

static uint64_t saved_prop(const AmdgpuGpuEntry *gpu, const char *name)
{
	size_t i;

	for (i = 0; i < gpu->n_model; i++) {
		if (!strcmp(gpu->model[i]->name, name))
			return gpu->model[i]->value;
	}
	return UINT64_MAX;
}

static int same_model(const AmdgpuGpuEntry *saved, const struct amdgpu_topo_gpu *local)
{
	int i;

	for (i = 0; i < AMDGPU_NR_MODEL_PROPS; i++) {
		if (saved_prop(saved, amdgpu_model_props[i]) != local->model[i])
			return 0;
	}
	return 1;
}

static bool mapped(const struct amdgpu_gpu_map *map, size_t nr_map, uint32_t dump_id)
{
	size_t i;

	for (i = 0; i < nr_map; i++)
		if (map[i].dump_id == dump_id)
			return true;
	return false;
}

int amdgpu_topology_map(const struct amdgpu_topology *topo, AmdgpuGpuEntry *const *gpus,
			size_t nr_gpus, struct amdgpu_gpu_map *map, size_t *nr_map)
{
	uint64_t used = 0;
	unsigned int j;
	size_t i;

	*nr_map = 0;
	/* The first unused GPU of the same model: same-model GPUs are interchangeable. */
	for (i = 0; i < nr_gpus; i++) {
		if (mapped(map, *nr_map, gpus[i]->actual_gpu_id))
			continue;
		for (j = 0; j < topo->nr_gpus && j < 64; j++) {
			if (!(used & (1ULL << j)) && same_model(gpus[i], &topo->gpus[j]))
				break;
		}
		if (j == topo->nr_gpus || j == 64) {
			pr_err("GPU %#x of the dump (device id %#" PRIx64 "): no unused GPU of the same model here (topology %s)\n",
			       gpus[i]->actual_gpu_id, saved_prop(gpus[i], "device_id"), topology_dir());
			return -ENODEV;
		}
		used |= 1ULL << j;
		map[(*nr_map)++] =
			(struct amdgpu_gpu_map){.dump_id = gpus[i]->actual_gpu_id,
						.local_id = topo->gpus[j].gpu_id,
						.local_minor = topo->gpus[j].render_minor};
		pr_info("GPU %#x of the dump -> GPU %#x here (renderD%u)\n", gpus[i]->actual_gpu_id,
			topo->gpus[j].gpu_id, topo->gpus[j].render_minor);
	}
	return 0;
}
