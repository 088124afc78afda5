/*
 * Restore, sessions and process groups: the one a task leads or joins, the helpers that
 * re-create a session or group whose leader exited (with the leader's pid) and that fork
 * the orphans of an init or subreaper, a subreaper made one again, and the check that the
 * helpers' pids are free.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kerndat.h"
#include "log.h"
#include "namespaces.h"
#include "pstree.h"
#include "restore-tasks.h"
#include "task-image.h"

/* A session or group whose leader exited is re-created around a helper with its pid. */
int rst_check_helper_pid_free(pid_t id, const char *kind)
{
	char path[32];

	if (!pstree_leader_is_dead(id))
		return 0;
	if (!kerndat_has_clone3_set_tid()) {
		pr_err("%s %d: re-creating its exited leader needs clone3() with set_tid\n", kind,
		       id);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d", id);
	if (access(path, F_OK) == 0) {
		pr_err("pid %d is already in use: cannot re-create the leader of %s %d\n", id, kind,
		       id);
		return -1;
	}
	return 0;
}

/*
 * A group whose leader exited is re-created by its first member in pstree order (the
 * others join after GROUPS). The gone leader of a dead session's own group is the
 * session helper itself (rst_fork_session_helper()).
 */
static bool recreates_dead_group(const struct pstree_item *item)
{
	struct pstree_item *first = root_item;

	if (item->pgid == item->sid || !pstree_leader_is_dead(item->pgid))
		return false;
	while (first->pgid != item->pgid)
		first = pstree_next(first);
	return first == item;
}

/*
 * A helper child with the gone leader's pid, made leader of its own group, which this
 * task joins; then the helper exits and we reap it. The group lives on with its members.
 * The helper waits for EOF on a pipe: it stays until we joined, and goes if we die.
 */
static int recreate_dead_group(const struct pstree_item *item)
{
	int hold[2], status, ret = 0;
	pid_t helper;
	char byte;

	if (pipe2(hold, O_CLOEXEC)) {
		pr_perror("task %d: pipe for the helper of process group %d", item->pid,
			  item->pgid);
		return -1;
	}
	helper = pidns_clone_child(item, item->pgid, 0);
	if (helper == 0) {
		close(hold[1]);
		_exit(read(hold[0], &byte, 1) == 0 ? 0 : 1);
	}
	close(hold[0]);
	if (helper < 0) {
		pr_perror("task %d: cannot create the helper for process group %d", item->pid,
			  item->pgid);
		close(hold[1]);
		return -1;
	}
	/* A parent may move its child: no need to wait for the helper to do it itself. */
	if (setpgid(helper, helper) || setpgid(0, helper)) {
		pr_perror("task %d: cannot re-create process group %d", item->pid, item->pgid);
		ret = -1;
	}
	close(hold[1]);
	if (waitpid(helper, &status, 0) != helper) {
		pr_perror("task %d: cannot reap the helper of process group %d", item->pid,
			  item->pgid);
		return -1;
	}
	pr_info("task %d: process group %d re-created with a helper\n", item->pid, item->pgid);
	return ret;
}

/*
 * Before forking children, which inherit both: a session or group this task leads, or
 * re-creates because its leader exited. setsid() first: it makes the task the leader of
 * a group of its own as well.
 */
int rst_restore_own_leadership(struct pstree_item *item)
{
	if (item->sid == item->pid) {
		if (setsid() < 0) {
			pr_perror("task %d: setsid", item->pid);
			return -1;
		}
	} else if (item->pgid == item->pid) {
		if (setpgid(0, 0) < 0) {
			pr_perror("task %d: setpgid", item->pid);
			return -1;
		}
	} else if (recreates_dead_group(item)) {
		return recreate_dead_group(item);
	}
	return 0;
}

/*
 * After GROUPS, when every leader in the tree has made its group: join the group led by
 * another task (a sibling or cousin may lead it, and may have been forked after us).
 */
int rst_join_session_and_group(struct pstree_item *item)
{
	/* In a nested pid namespace: as the task sees them (0 for a leader above it). */
	pid_t pgid = pidns_seen_by(item, item->pgid), sid = pidns_seen_by(item, item->sid);

	if (item->pgid != item->pid && getpgid(0) != pgid) {
		if (pstree_find(item->pgid) || pstree_leader_is_dead(item->pgid)) {
			/* setpgid(0, 0) would make a group of its own instead. */
			if (!pgid) {
				pr_err("task %d: cannot join process group %d from below its "
				       "leader's pid namespace\n",
				       item->pid, item->pgid);
				return -1;
			}
			if (setpgid(0, pgid) < 0) {
				pr_perror("task %d: cannot join process group %d", item->pid,
					  item->pgid);
				return -1;
			}
		} else {
			/* The root's group led from outside the dumped tree: we stay in criu's. */
			pr_info("task %d: pgid %d was led from outside the tree; inheriting %d\n",
				item->pid, item->pgid, getpgid(0));
		}
	}
	if (getsid(0) != sid) {
		if (pstree_find(item->sid) || pstree_leader_is_dead(item->sid)) {
			pr_err("task %d: cannot get back into session %d (it is in %d)\n",
			       item->pid, item->sid, getsid(0));
			return -1;
		}
		pr_info("task %d: sid %d was led from outside the tree; inheriting %d\n", item->pid,
			item->sid, getsid(0));
	}
	return 0;
}

/* A child born in a session whose leader exited: the session's helper forks it. */
bool rst_in_dead_session(const struct pstree_item *child)
{
	return child->sid != child->parent->sid && pstree_leader_is_dead(child->sid);
}

/* The helper forks all of item's children in that session: only the first asks for it. */
bool rst_first_child_in_session(const struct pstree_item *child)
{
	const struct pstree_item *sibling;

	for (sibling = child->parent->first_child; sibling != child;
	     sibling = sibling->next_sibling)
		if (sibling->sid == child->sid)
			return false;
	return true;
}

/*
 * In the helper: the session, then every member of it among item's children, cloned
 * with CLONE_PARENT so that they are item's children, born in the session.
 */
static int session_helper_main(struct pstree_item *item, pid_t sid)
{
	struct pstree_item *child;
	pid_t pid;

	if (setsid() < 0) {
		pr_perror("helper %d: setsid", sid);
		return -1;
	}
	for (child = item->first_child; child; child = child->next_sibling) {
		if (child->sid != sid)
			continue;
		/* Born in its mount and net namespaces: the helper goes wherever each child is. */
		if (mntns_enter(child->ids.mnt_ns_id) || netns_enter(child->ids.net_ns_id))
			return -1;
		pid = pidns_clone_child(item, child->pid, CLONE_PARENT);
		if (pid < 0) {
			pr_perror("helper %d: cannot create task %d", sid, child->pid);
			return -1;
		}
		if (pid == 0)
			rst_task_main(rst_task_of(child));
	}
	return 0;
}

/*
 * A session whose leader exited: a helper child with the leader's pid re-creates it,
 * forks the members, exits, and we reap it. The session, and the gone leader's group
 * that the members inherited, live on with them; its pid stays taken while they do.
 */
int rst_fork_session_helper(struct pstree_item *item, pid_t sid)
{
	pid_t helper;
	int status;

	helper = pidns_clone_child(item, sid, 0);
	if (helper == 0)
		_exit(session_helper_main(item, sid) ? 1 : 0);
	if (helper < 0) {
		pr_perror("task %d: cannot create the helper for session %d", item->pid, sid);
		return -1;
	}
	if (waitpid(helper, &status, 0) != helper) {
		pr_perror("task %d: cannot reap the helper of session %d", item->pid, sid);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		pr_err("task %d: the helper of session %d failed (wait status %#x)\n", item->pid,
		       sid, status);
		return -1;
	}
	pr_info("task %d: session %d re-created with a helper\n", item->pid, sid);
	return 0;
}

/*
 * In the helper: the orphan, with its pid, in its session leader's session; the helper
 * exits at once and the kernel hands the orphan to the init of the pid namespace.
 */
static void __attribute__((noreturn))
adopted_helper_main(struct pstree_item *leader, struct pstree_item *orphan)
{
	pid_t pid = pidns_clone_child(leader, orphan->pid, 0);

	if (pid == 0)
		rst_task_main(rst_task_of(orphan));
	if (pid < 0)
		pr_perror("helper of task %d: cannot create it", orphan->pid);
	_exit(pid < 0 ? 1 : 0);
}

/* The orphans of the init in item's session (see pstree_session_adopter()). */
int rst_fork_adopted_orphans(struct pstree_item *item)
{
	struct pstree_item *orphan;
	pid_t helper;
	int status;

	for (orphan = root_item; orphan; orphan = pstree_next(orphan)) {
		if (pstree_session_adopter(orphan) != item)
			continue;
		helper = pidns_clone_helper(item, pstree_helper_pid(orphan));
		/* Outside a pid namespace of the tree's own, another process may hold that pid. */
		if (helper < 0 && errno == EEXIST && !pidns_own())
			helper = fork();
		if (helper == 0)
			adopted_helper_main(item, orphan);
		if (helper < 0 || waitpid(helper, &status, 0) != helper) {
			pr_perror("task %d: cannot run the helper that forks task %d", item->pid,
				  orphan->pid);
			return -1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			pr_err("task %d: the helper that forks task %d failed (wait status %#x)\n",
			       item->pid, orphan->pid, status);
			return -1;
		}
		pr_info("task %d: forked task %d for the init through a helper\n", item->pid,
			orphan->pid);
	}
	return 0;
}

/*
 * A subreaper is one before it forks its children: the orphans its subtree's helpers leave
 * (see pstree_session_adopter()) come to it, as they did before the dump. After it forked
 * the orphans of its session for a reaper above it, which must not come to it. The
 * restorer sets it again from the image.
 */
int rst_become_reaper(const struct pstree_item *item)
{
	if (!item->image->has_child_subreaper || !item->image->child_subreaper)
		return 0;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		pr_perror("task %d: cannot become a subreaper", item->pid);
		return -1;
	}
	return 0;
}
