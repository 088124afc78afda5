/*
 * The test build's fault injection (amdgpu_test_hooks.h): built only with
 * AMDGPU_TEST_HOOKS, into test/gpu/plugin/amdgpu_plugin.so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_test_hooks.h"

#define FAULT_ENV "AMDGPU_PLUGIN_TEST_FAULT"

bool amdgpu_test_fault(const char *name, pid_t pid)
{
	const char *fault = getenv(FAULT_ENV);
	size_t len = strlen(name);
	int target;

	if (!fault || strncmp(fault, name, len))
		return false;
	if (!fault[len])
		return true;
	return sscanf(fault + len, ":%d", &target) == 1 && target == pid;
}
