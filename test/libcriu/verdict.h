/*
 * The libcriu tests' verdicts: one line per check, "ok NAME" or "FAIL NAME: why"; the
 * program exits with the number of failures.
 */
#ifndef LIBCRIU_TEST_VERDICT_H
#define LIBCRIU_TEST_VERDICT_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

/* fmt NULL: the check passed; else why it failed. */
static void __attribute__((format(printf, 2, 3))) result(const char *name, const char *fmt, ...)
{
	va_list args;

	if (!fmt) {
		printf("ok %s\n", name);
		return;
	}
	printf("FAIL %s: ", name);
	va_start(args, fmt);
	vprintf(fmt, args);
	va_end(args);
	printf("\n");
	failures++;
}

#endif
