/*
 * Mount propagation at restore: the peer groups and slaves of every mount namespace of the
 * tree set up once their trees are built, and external mounts that receive from or are
 * peers of criu's own mounts.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "ns-mnt.h"

/*
 * Main process: an external mount that receives from outside is a clone of criu's mount at
 * its path (a peer of it, OPEN_TREE_CLONE), which the root task moves into place and makes a
 * slave: the root task's own copy of criu's mounts is private, it receives from nothing.
 */
int mnt_clone_ext_master(struct mount *m)
{
	m->src_fd = syscall(SYS_open_tree, AT_FDCWD, m->ext_path, OPEN_TREE_CLONE | O_CLOEXEC);
	if (m->src_fd < 0) {
		pr_perror("mount %u at %s: cannot clone %s (open_tree), which it receives from",
			  m->e->mnt_id, m->e->mountpoint, m->ext_path);
		return -errno;
	}
	return 0;
}

/* The peer group of criu's mount mnt_id (shared:N in its mountinfo); 0: none, or no line. */
static uint32_t criu_peer_group(uint64_t mnt_id)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *tag;
	uint32_t group = 0;
	size_t size = 0;
	uint64_t id;

	while (f && getline(&line, &size, f) > 0) {
		if (sscanf(line, "%" SCNu64, &id) != 1 || id != mnt_id)
			continue;
		/* The optional fields come after the six fixed ones, up to "-". */
		tag = strstr(line, " shared:");
		if (tag && tag < strstr(line, " - "))
			sscanf(tag, " shared:%u", &group);
		break;
	}
	free(line);
	if (f)
		fclose(f);
	return group;
}

/*
 * Main process: an external mount that was a peer of criu's mount at its path (in the
 * peer group criu's mount still is in: --external mnt[]:s found it so at dump, or it was
 * given) joins that group again (mnt_restore_propagation()), from a clone of criu's mount (a
 * peer too, OPEN_TREE_CLONE keeps the group). Bound and private until then: nothing
 * mounted under it while the tree is built reaches criu's. Where criu's mount is in
 * another group now (another boot), the mount is shared in a group of its own.
 */
int mnt_find_ext_peer(struct mount *m)
{
	struct statx stx;
	uint32_t group;

	if (!m->e->shared_id || statx(AT_FDCWD, m->ext_path, 0, STATX_MNT_ID, &stx) ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return 0; /* the bind says what is wrong with the path */
	group = criu_peer_group(stx.stx_mnt_id);
	if (group != m->e->shared_id) {
		pr_info("mount %u at %s: criu's mount at %s is not in its peer group %u: shared "
			"in a group of its own\n",
			m->e->mnt_id, m->e->mountpoint, m->ext_path, m->e->shared_id);
		return 0;
	}
	m->src_fd = syscall(SYS_open_tree, AT_FDCWD, m->ext_path, OPEN_TREE_CLONE | O_CLOEXEC);
	if (m->src_fd < 0) {
		pr_perror("mount %u at %s: cannot clone %s (open_tree), whose peer group it joins",
			  m->e->mnt_id, m->e->mountpoint, m->ext_path);
		return -errno;
	}
	/* Its master, where it has one, is criu's mount's too: the join gives it. */
	m->ext_peer = true;
	m->ext_master = false;
	pr_info("mount %u at %s: a peer of criu's mount at %s (group %u)\n", m->e->mnt_id,
		m->e->mountpoint, m->ext_path, group);
	return 0;
}

/*
 * Through the mount's fd (mount_setattr(), Linux 5.12): it runs after pivot_root, when
 * /proc may not be mounted.
 */
int mnt_set_propagation(const struct mount *m, unsigned long type, const char *what)
{
	struct mount_attr attr = {.propagation = type};

	if (syscall(SYS_mount_setattr, m->fd, "", AT_EMPTY_PATH, &attr, sizeof(attr))) {
		pr_perror("mount %u at %s: cannot make it %s", m->e->mnt_id, m->path, what);
		return -errno;
	}
	return 0;
}

/* to joins from's peer group, and receives from what from receives from. */
static int join_group(const struct mount *from, const struct mount *to)
{
	if (syscall(SYS_move_mount, from->fd, "", to->fd, "",
		    MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) {
		pr_perror("mount %u at %s: cannot join the peer group of mount %u (%s)",
			  to->e->mnt_id, to->path, from->e->mnt_id, from->path);
		return -errno;
	}
	return 0;
}

/* m joins the peer group of criu's mount it is bound from (mnt_find_ext_peer()). */
static int join_criu_group(const struct mount *m)
{
	if (syscall(SYS_move_mount, m->src_fd, "", m->fd, "",
		    MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)) {
		pr_perror("mount %u at %s: cannot join the peer group of criu's mount at %s",
			  m->e->mnt_id, m->path, m->ext_path);
		return -errno;
	}
	return 0;
}

/*
 * A mount of peer group id, in any of the namespaces (groups span them), already given its
 * propagation, whose root holds m's; or NULL.
 */
static struct mount *peer_group_mount(uint32_t id, const struct mount *m)
{
	for (size_t n = 0; n < nr_mntns && id; n++) {
		for (size_t i = 0; i < all_mntns[n]->nr; i++) {
			struct mount *p = &all_mntns[n]->mounts[i];

			if (p->done && p->e->shared_id == id && p->e->root_dev == m->e->root_dev &&
			    mnt_path_holds(p->e->root, m->e->root))
				return p;
		}
	}
	return NULL;
}

/* The root task into mount namespace mns (mount_setattr() acts on its own mounts only). */
int mnt_enter_ns(const struct mount_ns *mns)
{
	if (setns(mns->ns_fd, CLONE_NEWNS)) {
		pr_perror("cannot enter mount namespace %u", mns->id);
		return -errno;
	}
	return 0;
}

/*
 * One mount's propagation, once the group it receives from is set up: a peer of a member
 * of its group already done (MOVE_MOUNT_SET_GROUP copies the master too); or a slave of
 * its master's group, then shared in a group of its own. 1: not yet (its master's group
 * is not set up); 0 or -errno.
 */
static int propagate_one(struct mount *m)
{
	/* The root mount's master is outside the namespace (classify_mounts()). */
	uint32_t master_id = m == all_mntns[0]->root ? 0 : m->e->master_id;
	struct mount *peer = peer_group_mount(m->e->shared_id, m);
	struct mount *master = peer_group_mount(master_id, m);
	int ret = 0;

	if (peer)
		return join_group(peer, m);
	/* A slave of its outside master since it was mounted (move_ext_master()). */
	if (m->ext_master)
		master_id = 0;
	else if (master_id && !master)
		return 1;
	if (m->mns != all_mntns[0] && (ret = mnt_enter_ns(m->mns)))
		return ret;
	if (master) {
		ret = join_group(master, m);
		ret = ret ?: mnt_set_propagation(m, MS_SLAVE, "a slave");
	}
	if (!ret && m->e->shared_id)
		ret = mnt_set_propagation(m, MS_SHARED, "shared");
	if (m->mns != all_mntns[0])
		ret = mnt_enter_ns(all_mntns[0]) ?: ret;
	return ret;
}

/* The n-th mount of all the namespaces, the root's first; NULL past the last. */
static struct mount *nth_mount(size_t n)
{
	for (size_t i = 0; i < nr_mntns; n -= all_mntns[i++]->nr)
		if (n < all_mntns[i]->nr)
			return &all_mntns[i]->mounts[n];
	return NULL;
}

/*
 * Peer groups and slaves of all the namespaces, on trees all private until now (nothing
 * propagated while they were built); then unbindable mounts, which nothing could have
 * bound from after. The root task is in the root's namespace before and after.
 */
int mnt_restore_propagation(void)
{
	size_t left = 0, before;
	struct mount *m;
	int ret = 0;

	for (size_t i = 0; (m = nth_mount(i)); i++) {
		m->done = !m->e->shared_id && (m == all_mntns[0]->root || !m->e->master_id);
		left += !m->done;
	}
	/* Peers of criu's mounts first: the tree's other mounts of their groups join them. */
	for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
		if (!m->ext_peer)
			continue;
		ret = join_criu_group(m);
		m->done = true;
		left--;
	}
	do {
		before = left;
		for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
			if (m->done)
				continue;
			ret = propagate_one(m);
			if (ret == 0) {
				m->done = true;
				left--;
			}
			ret = ret < 0 ? ret : 0;
		}
	} while (!ret && left && left < before);
	if (!ret && left) {
		pr_err("%zu mounts cannot get their propagation: no mount of their peer group or "
		       "master's group has a root that holds theirs\n",
		       left);
		return -EINVAL;
	}
	for (size_t i = 0; (m = nth_mount(i)) && !ret; i++) {
		if (!(m->e->flags & MS_UNBINDABLE))
			continue;
		ret = m->mns != all_mntns[0] ? mnt_enter_ns(m->mns) : 0;
		ret = ret ?: mnt_set_propagation(m, MS_UNBINDABLE, "unbindable");
		if (m->mns != all_mntns[0])
			ret = mnt_enter_ns(all_mntns[0]) ?: ret;
	}
	return ret;
}
