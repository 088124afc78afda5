/*
 * The options of this run (cr_options.h): their defaults, and lookups in the lists they
 * hold. Filled by the command layer (config.c) before a pipeline starts; everything
 * below it only reads them.
 */
#include <string.h>

#include "cr_options.h"
#include "log.h" /* DEFAULT_LOGLEVEL */

struct cr_options opts = {
	.loglevel = DEFAULT_LOGLEVEL,
	.timeout = -1,
	.status_fd = -1,
	.ghost_limit = DEFAULT_GHOST_LIMIT,
	.manage_cgroups = CG_MODE_SOFT,
	.cpu_cap = CPU_CAP_DEFAULT,
};

bool opts_skip_mnt(const char *mountpoint)
{
	for (unsigned int i = 0; i < opts.nr_skip_mnts; i++)
		if (!strcmp(opts.skip_mnts[i], mountpoint))
			return true;
	return false;
}

bool opts_fs_enabled(const char *fstype)
{
	if (opts.enable_fs_all)
		return true;
	for (unsigned int i = 0; i < opts.nr_enable_fs; i++)
		if (!strcmp(opts.enable_fs[i], fstype))
			return true;
	return false;
}

const struct ext_veth *opts_ext_veth(const char *inner)
{
	for (unsigned int i = 0; i < opts.nr_ext_veths; i++)
		if (!strcmp(opts.ext_veths[i].inner, inner))
			return &opts.ext_veths[i];
	return NULL;
}

static const struct ext_link *find_ext_link(const struct ext_link *list, unsigned int nr,
					    const char *inner)
{
	for (unsigned int i = 0; i < nr; i++)
		if (!strcmp(list[i].inner, inner))
			return &list[i];
	return NULL;
}

const struct ext_link *opts_ext_macvlan(const char *inner)
{
	return find_ext_link(opts.ext_macvlans, opts.nr_ext_macvlans, inner);
}

const struct ext_link *opts_ext_netdev(const char *inner)
{
	return find_ext_link(opts.ext_netdevs, opts.nr_ext_netdevs, inner);
}
