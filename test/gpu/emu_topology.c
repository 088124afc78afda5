/*
 * The KFD EMULATOR's fake topology: a directory laid out like /sys/class/kfd/kfd/topology
 * (generation_id, system_properties, nodes/N/{gpu_id,name,properties,mem_banks,io_links}),
 * node 0 the CPU, one node per emulated GPU, so a plugin can map GPUs by properties.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "emu.h"

#define EMU_VENDOR_AMD 0x1002U

/* Build a path; topology paths are short, an overlong --topology is refused. */
static int __attribute__((format(printf, 3, 4))) build_path(char *path, size_t size,
							     const char *fmt, ...)
{
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(path, size, fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= size) {
		emu_err("topology: path too long under %s", path);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int make_dir(const char *path)
{
	if (mkdir(path, 0755) && errno != EEXIST) {
		emu_err("topology: cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

static int write_file(const char *path, const char *text)
{
	FILE *file = fopen(path, "w");
	int ret = 0;

	if (!file) {
		emu_err("topology: cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	if (fputs(text, file) < 0)
		ret = -EIO;
	if (fclose(file) && !ret)
		ret = -errno;
	if (ret)
		emu_err("topology: cannot write %s: %s", path, strerror(-ret));
	return ret;
}

static int write_node_file(const char *node_dir, const char *name, const char *text)
{
	char path[4096];

	if (build_path(path, sizeof(path), "%s/%s", node_dir, name))
		return -ENAMETOOLONG;
	return write_file(path, text);
}

static int make_node_subdir(const char *node_dir, const char *name, char *path, size_t size)
{
	int ret;

	ret = build_path(path, size, "%s/%s", node_dir, name);
	if (!ret)
		ret = make_dir(path);
	if (!ret)
		ret = build_path(path, size, "%s/%s/0", node_dir, name);
	if (!ret)
		ret = make_dir(path);
	return ret;
}

/* One memory bank: the GPU's VRAM (heap type 1, frame buffer private) or system RAM. */
static int write_mem_bank(const char *node_dir, uint64_t size, int heap_type)
{
	char path[4096];
	char text[512];
	int ret;

	ret = make_node_subdir(node_dir, "mem_banks", path, sizeof(path));
	if (ret)
		return ret;
	snprintf(text, sizeof(text),
		 "heap_type %d\nsize_in_bytes %llu\nflags 0\nwidth 4096\nmem_clk_max 1600\n",
		 heap_type, (unsigned long long)size);
	return write_node_file(path, "properties", text);
}

/* A PCIe link from a GPU node to the CPU node. */
static int write_io_link(const char *node_dir, uint32_t node_from)
{
	char path[4096];
	char text[512];
	int ret;

	ret = make_node_subdir(node_dir, "io_links", path, sizeof(path));
	if (ret)
		return ret;
	snprintf(text, sizeof(text),
		 "type 2\nversion_major 0\nversion_minor 0\nnode_from %u\nnode_to 0\n"
		 "weight 20\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\n"
		 "max_bandwidth 64000\nrecommended_transfer_size 0\nflags 1\n",
		 node_from);
	return write_node_file(path, "properties", text);
}

static int write_cpu_node(const char *nodes_dir)
{
	char node_dir[4096];
	int ret;

	ret = build_path(node_dir, sizeof(node_dir), "%s/0", nodes_dir);
	if (!ret)
		ret = make_dir(node_dir);
	if (!ret)
		ret = write_node_file(node_dir, "gpu_id", "0\n");
	if (!ret)
		ret = write_node_file(node_dir, "name", "\n");
	if (!ret)
		ret = write_node_file(node_dir, "properties",
				      "cpu_cores_count 2\nsimd_count 0\nmem_banks_count 1\n"
				      "caches_count 0\nio_links_count 0\np2p_links_count 0\n"
				      "cpu_core_id_base 0\nsimd_id_base 0\nmax_waves_per_simd 0\n"
				      "lds_size_in_kb 0\ngds_size_in_kb 0\nnum_gws 0\n"
				      "wave_front_size 0\narray_count 0\nsimd_arrays_per_engine 0\n"
				      "cu_per_simd_array 0\nsimd_per_cu 0\nmax_slots_scratch_cu 0\n"
				      "gfx_target_version 0\nvendor_id 0\ndevice_id 0\n"
				      "location_id 0\ndomain 0\ndrm_render_minor 0\nhive_id 0\n"
				      "num_sdma_engines 0\nnum_sdma_xgmi_engines 0\n"
				      "num_sdma_queues_per_engine 0\nnum_cp_queues 0\n"
				      "max_engine_clk_ccompute 3000\n");
	if (!ret)
		ret = write_mem_bank(node_dir, 8ULL << 30, 0);
	return ret;
}

/*
 * Properties that identify a GPU model (the same for two GPUs of one model) come first,
 * then the ones that identify an instance (location_id, drm_render_minor, unique_id).
 */
static void format_gpu_properties(const struct emu_gpu *gpu, char *text, size_t size)
{
	snprintf(text, size,
		 "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 1\ncaches_count 0\n"
		 "io_links_count 1\np2p_links_count 0\ncpu_core_id_base 0\nsimd_id_base %u\n"
		 "max_waves_per_simd 8\nlds_size_in_kb 64\ngds_size_in_kb 0\nnum_gws 64\n"
		 "wave_front_size 64\narray_count 8\nsimd_arrays_per_engine 1\n"
		 "cu_per_simd_array 13\nsimd_per_cu 4\nmax_slots_scratch_cu 32\n"
		 "gfx_target_version 90010\nvendor_id %u\ndevice_id %u\nlocation_id %u\n"
		 "domain 0\ndrm_render_minor %u\nhive_id 0\nnum_sdma_engines 2\n"
		 "num_sdma_xgmi_engines 0\nnum_sdma_queues_per_engine 8\nnum_cp_queues 24\n"
		 "max_engine_clk_fcompute 1700\nlocal_mem_size %llu\nfw_version 55\n"
		 "capability 671588992\ndebug_prop 0\nsdma_fw_version 10\n"
		 "unique_id %llu\nnum_xcc 1\nmax_engine_clk_ccompute 3000\n",
		 0x80000000U + gpu->node_id * 0x1000U, EMU_VENDOR_AMD, gpu->device_id,
		 (gpu->node_id + 2) << 8, gpu->render_minor,
		 (unsigned long long)gpu->vram_size,
		 0x4b46444500000000ULL | gpu->gpu_id);
}

static int write_gpu_node(const char *nodes_dir, const struct emu_gpu *gpu)
{
	char node_dir[4096];
	char text[2048];
	int ret;

	ret = build_path(node_dir, sizeof(node_dir), "%s/%u", nodes_dir, gpu->node_id);
	if (!ret)
		ret = make_dir(node_dir);
	if (ret)
		return ret;
	snprintf(text, sizeof(text), "%u\n", gpu->gpu_id);
	ret = write_node_file(node_dir, "gpu_id", text);
	if (!ret)
		ret = write_node_file(node_dir, "name", "kfdemu\n");
	format_gpu_properties(gpu, text, sizeof(text));
	if (!ret)
		ret = write_node_file(node_dir, "properties", text);
	if (!ret)
		ret = write_mem_bank(node_dir, gpu->vram_size, 1);
	if (!ret)
		ret = write_io_link(node_dir, gpu->node_id);
	return ret;
}

int emu_write_topology(const char *dir)
{
	char path[4096];
	int ret;

	ret = make_dir(dir);
	if (!ret)
		ret = write_node_file(dir, "generation_id", "1\n");
	if (!ret)
		ret = write_node_file(dir, "system_properties",
				      "platform_oem 0\nplatform_id 0\nplatform_rev 0\n");
	if (!ret)
		ret = build_path(path, sizeof(path), "%s/nodes", dir);
	if (!ret)
		ret = make_dir(path);
	if (!ret)
		ret = write_cpu_node(path);
	for (unsigned int i = 0; i < emu_nr_gpus && !ret; i++)
		ret = write_gpu_node(path, &emu_gpus[i]);
	if (!ret)
		emu_info("topology with %u emulated GPUs written to %s", emu_nr_gpus, dir);
	return ret;
}
