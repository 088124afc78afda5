/*
 * Fault injection for the GPU tests (test/zdtm.py), compiled into the test build of the
 * plugin only (AMDGPU_TEST_HOOKS, test/gpu/plugin/); in the plugin make install ships,
 * every hook is a constant false and the environment is never read.
 * $AMDGPU_PLUGIN_TEST_FAULT: "worker-error" (criu's worker fails every task's BOs) or
 * "task-dies-mid-command[:PID]" (the task, or only the task PID, dies mid-command).
 */
#ifndef AMDGPU_TEST_HOOKS_H
#define AMDGPU_TEST_HOOKS_H

#include <stdbool.h>
#include <sys/types.h>

#ifdef AMDGPU_TEST_HOOKS
bool amdgpu_test_fault(const char *name, pid_t pid);
#else
static inline bool amdgpu_test_fault(const char *name, pid_t pid)
{
	(void)name;
	(void)pid;
	return false;
}
#endif

#endif
