/*
 * The mm fields survive: code/data/brk/stack/arg/env boundaries in /proc/self/stat,
 * the program break, the auxv, /proc/self/exe, and the argv/environ strings.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "zdtmtst.h"

struct mm_snapshot {
	char stat_fields[512]; /* the mm fields of /proc/self/stat, as text */
	char auxv[4096];
	size_t auxv_len;
	char exe[PATH_MAX];
	char cmdline[4096];
	size_t cmdline_len;
	char environ[16384];
	size_t environ_len;
	void *brk;
};

static struct mm_snapshot before, after;

/* stat fields 26-28 (startcode endcode startstack) and 45-51 (data, brk, arg, env) */
static void read_stat_fields(char *out, size_t size)
{
	static char stat_text[4096];
	char *field;
	int field_no = 3; /* after ") " comes field 3 */
	size_t used = 0;

	read_file("/proc/self/stat", stat_text, sizeof(stat_text));
	field = strrchr(stat_text, ')') + 2;
	for (; field && *field; field_no++) {
		size_t len = strcspn(field, " \n");

		if ((field_no >= 26 && field_no <= 28) || (field_no >= 45 && field_no <= 51))
			used += snprintf(out + used, size - used, "%d=%.*s ", field_no, (int)len,
					 field);
		field += len;
		field += strspn(field, " \n");
	}
	if (!strstr(out, "51="))
		test_fail("/proc/self/stat has no field 51: %s", out);
}

static void snapshot(struct mm_snapshot *snap)
{
	ssize_t len;

	read_stat_fields(snap->stat_fields, sizeof(snap->stat_fields));
	snap->auxv_len = read_file("/proc/self/auxv", snap->auxv, sizeof(snap->auxv));
	len = readlink("/proc/self/exe", snap->exe, sizeof(snap->exe) - 1);
	if (len < 0)
		test_fail_errno("readlink /proc/self/exe");
	snap->exe[len] = '\0';
	snap->cmdline_len = read_file("/proc/self/cmdline", snap->cmdline, sizeof(snap->cmdline));
	snap->environ_len = read_file("/proc/self/environ", snap->environ, sizeof(snap->environ));
	snap->brk = sbrk(0);
}

int main(int argc, char **argv)
{
	test_init(argc, argv);

	/* move the break away from where a fresh process would have it */
	if (sbrk(5 * 4096) == (void *)-1)
		test_fail_errno("sbrk");
	snapshot(&before);

	test_ready();
	test_wait_sigterm();

	snapshot(&after);
	if (strcmp(before.stat_fields, after.stat_fields))
		test_fail("stat mm fields '%s' -> '%s'", before.stat_fields, after.stat_fields);
	if (before.brk != after.brk)
		test_fail("program break %p -> %p", before.brk, after.brk);
	if (before.auxv_len != after.auxv_len || memcmp(before.auxv, after.auxv, before.auxv_len))
		test_fail("auxv differs (%zu -> %zu bytes)", before.auxv_len, after.auxv_len);
	if (strcmp(before.exe, after.exe))
		test_fail("exe link '%s' -> '%s'", before.exe, after.exe);
	if (before.cmdline_len != after.cmdline_len ||
	    memcmp(before.cmdline, after.cmdline, before.cmdline_len))
		test_fail("cmdline differs");
	if (before.environ_len != after.environ_len ||
	    memcmp(before.environ, after.environ, before.environ_len))
		test_fail("environ differs");
	test_pass();
}
