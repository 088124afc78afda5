/*
 * Turns image files from a dump into fuzz-image corpus entries: the type byte (found from
 * the file name through cr_img_descs, so it follows the enum) and the file, cut short.
 */
#include <ctype.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

/* Corpus entries stay small: the framing repeats itself after a few records or pages. */
#define SEED_MAX 8192

/* Whether name fits fmt, whose one conversion (%lu or %lx) matches a run of digits. */
static bool name_matches(const char *name, const char *fmt)
{
	const char *conv = strchr(fmt, '%');
	size_t pre, post, len = strlen(name);

	if (!conv)
		return !strcmp(name, fmt);
	pre = conv - fmt;
	post = strlen(conv + 3);
	if (len <= pre + post || strncmp(name, fmt, pre) || strcmp(name + len - post, conv + 3))
		return false;
	for (size_t i = pre; i < len - post; i++)
		if (!(conv[2] == 'x' ? isxdigit((unsigned char)name[i]) : isdigit((unsigned char)name[i])))
			return false;
	return true;
}

static int image_type(const char *name)
{
	for (int t = 0; t < CR_IMG_MAX; t++)
		if (name_matches(name, cr_img_descs[t].fmt))
			return t;
	return -1;
}

static int write_seed(const char *out_path, unsigned char type, const char *in_path)
{
	static char buf[SEED_MAX];
	FILE *in = fopen(in_path, "r"), *out;
	size_t n;

	if (!in) {
		perror(in_path);
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	out = fopen(out_path, "w");
	if (!out || fwrite(&type, 1, 1, out) != 1 || fwrite(buf, 1, n, out) != n || fclose(out)) {
		perror(out_path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int ret = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s PREFIX OUTDIR IMAGE...\n", argv[0]);
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		char *name = basename(argv[i]), out_path[4096];
		int type = image_type(name);

		if (type < 0) {
			printf("skipped %s: not an image type criu reads\n", argv[i]);
			continue;
		}
		snprintf(out_path, sizeof(out_path), "%s/%s-%s", argv[2], argv[1], name);
		if (write_seed(out_path, type, argv[i]))
			ret = 1;
	}
	return ret;
}
