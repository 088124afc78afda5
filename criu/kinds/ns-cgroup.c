/*
 * Cgroup namespaces: a root with a cgroup namespace of its own. Its root cgroup is where
 * the root task lived when it unshared it; cgroup.img says which (each path's
 * cgns_prefix, cgroup.c), so the kind has no image of its own. Restore does as the kernel
 * demands: the root task moves into that cgroup, unshares, then moves into its own.
 */
#include <errno.h>
#include <sched.h>

#include "cgroup.h"
#include "cr_options.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"

/* What the root sees as "/" of each hierarchy: the prefix of every set's paths. */
static int cgroup_dump_check(struct ns_id *ns)
{
	if (opts.manage_cgroups == CG_MODE_IGNORE) {
		pr_err("cgroup namespace %u: its root is in cgroup.img, which "
		       "--manage-cgroups=ignore does not write\n",
		       ns->id);
		return -ENOTSUP;
	}
	return cg_dump_ns_root(ns->pid);
}

static int cgroup_collect(struct ns_id *ns)
{
	if (!cg_restore_has_ns_root()) {
		pr_err("cgroup namespace %u: cgroup.img names no root for it (cgns_prefix)%s\n",
		       ns->id,
		       opts.manage_cgroups == CG_MODE_IGNORE ? ", or --manage-cgroups=ignore" : "");
		return -EINVAL;
	}
	return 0;
}

/* In the root, already in its cgroups (cg_restore_task()), before it forks. */
static int cgroup_restore(const struct ns_id *ns)
{
	int ret = cg_restore_enter_ns(root_item);

	if (!ret)
		pr_info("cgroup namespace %u created\n", ns->id);
	return ret;
}

const struct ns_kind cgroup_ns_kind = {
	.name = "cgroup",
	.clone_flag = CLONE_NEWCGROUP,
	.unshared_in_root = true,
	.dump_check = cgroup_dump_check,
	.collect = cgroup_collect,
	.restore = cgroup_restore,
};
