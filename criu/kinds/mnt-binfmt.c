/*
 * binfmt_misc mounts: each handler is a file of the mount (its name) whose lines say
 * "enabled"/"disabled", "interpreter PATH", "flags: FLAGS", then "offset N", "magic HEX" and
 * "mask HEX" or "extension .EXT". Dump saves them as CRIU does (binfmt-misc.img, only for an
 * instance that is not criu's own and only when it has handlers); restore writes each as a
 * ":name:type:offset:magic:mask:interpreter:flags" line to the new mount's "register" file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "mnt-binfmt.h"

#include "binfmt-misc.pb-c.h"

/* Kernel 6.7+: an instance per user namespace; older ones have one for all. */
static int criu_binfmt_dev(dev_t *dev)
{
	int fs, mnt = -1;
	struct stat st;

	fs = fsopen("binfmt_misc", FSOPEN_CLOEXEC);
	if (fs >= 0 && !fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
	if (mnt < 0 || fstat(mnt, &st)) {
		pr_perror("binfmt_misc: cannot mount criu's own instance to compare");
		if (fs >= 0)
			close(fs);
		return -EIO;
	}
	*dev = st.st_dev;
	close(mnt);
	close(fs);
	return 0;
}

/* A "key value" line's value into *field (a copy). 1 if the line was key's, 0 if not. */
static int take_field(const char *line, const char *key, char **field)
{
	size_t len = strlen(key);

	if (strncmp(line, key, len))
		return 0;
	*field = strdup(line + len);
	return *field ? 1 : -ENOMEM;
}

static int parse_handler_line(const char *line, BinfmtMiscEntry *e)
{
	int ret;

	if (!strcmp(line, "enabled") || !strcmp(line, "disabled")) {
		e->enabled = line[0] == 'e';
		return 0;
	}
	if (!strncmp(line, "offset ", 7)) {
		e->has_offset = true;
		return sscanf(line + 7, "%d", &e->offset) == 1 ? 0 : -EINVAL;
	}
	ret = take_field(line, "interpreter ", &e->interpreter);
	ret = ret ?: take_field(line, "flags: ", &e->flags);
	ret = ret ?: take_field(line, "extension .", &e->extension);
	ret = ret ?: take_field(line, "magic ", &e->magic);
	ret = ret ?: take_field(line, "mask ", &e->mask);
	return ret == 1 ? 0 : ret ?: -EINVAL;
}

static void free_handler(BinfmtMiscEntry *e)
{
	free(e->interpreter);
	free(e->flags);
	free(e->extension);
	free(e->magic);
	free(e->mask);
}

static int dump_handler(int dir, const char *name, struct cr_img *img)
{
	BinfmtMiscEntry e = BINFMT_MISC_ENTRY__INIT;
	char *line = NULL;
	size_t size = 0;
	ssize_t len;
	int fd, ret = 0;
	FILE *f;

	fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		pr_perror("binfmt_misc: cannot read handler %s", name);
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	while (!ret && (len = getline(&line, &size, f)) > 0) {
		if (line[len - 1] == '\n')
			line[len - 1] = '\0';
		ret = parse_handler_line(line, &e);
		if (ret)
			pr_err("binfmt_misc: handler %s: cannot read line \"%s\"\n", name, line);
	}
	if (!ret && !e.interpreter) {
		pr_err("binfmt_misc: handler %s names no interpreter\n", name);
		ret = -EINVAL;
	}
	e.name = (char *)name;
	if (!ret) {
		pr_info("binfmt_misc: handler %s (%s, interpreter %s)\n", name,
			e.enabled ? "enabled" : "disabled", e.interpreter);
		ret = pb_write_one(img, &e);
	}
	free(line);
	fclose(f);
	free_handler(&e);
	return ret;
}

int binfmt_dump(int mnt, unsigned int mnt_id)
{
	static dev_t dumped_dev;
	struct cr_img *img = NULL;
	struct dirent *de;
	dev_t criu_dev;
	struct stat st;
	int ret = 0;
	DIR *dir;

	if (fstat(mnt, &st) || criu_binfmt_dev(&criu_dev))
		return -EIO;
	if (st.st_dev == criu_dev || st.st_dev == dumped_dev) {
		pr_info("binfmt_misc %u: %s, its handlers are not saved\n", mnt_id,
			st.st_dev == criu_dev ? "criu's own instance" : "saved already");
		return 0;
	}
	/* One image, as CRIU's: a second instance of the tree's would have nowhere to go. */
	if (dumped_dev) {
		pr_err("binfmt_misc %u: a second instance of the tree's own: not supported\n",
		       mnt_id);
		return -ENOTSUP;
	}
	dumped_dev = st.st_dev;
	dir = fdopendir(openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!dir) {
		pr_perror("binfmt_misc %u: cannot list it", mnt_id);
		return -EIO;
	}
	while (!ret && (de = readdir(dir))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "register") ||
		    !strcmp(de->d_name, "status"))
			continue;
		/* Made only when there is a handler, as CRIU makes it. */
		if (!img)
			img = open_image(CR_IMG_BINFMT_MISC, O_WRONLY, 0);
		ret = img ? dump_handler(dirfd(dir), de->d_name, img) : -EIO;
	}
	if (img)
		close_image(img);
	closedir(dir);
	return ret;
}

/* Hex digits as the register line takes them: each byte as \xHH. */
static int put_hex(FILE *out, const char *hex)
{
	size_t len = strlen(hex);

	if (len % 2)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 2)
		fprintf(out, "\\x%c%c", hex[i], hex[i + 1]);
	return 0;
}

/* The register line of e, in a new string, or NULL (a record that names no match). */
static char *register_line(const BinfmtMiscEntry *e)
{
	char *line = NULL;
	size_t size;
	FILE *out;
	int ret;

	if ((!e->magic) == (!e->extension))
		return NULL;
	out = open_memstream(&line, &size);
	if (!out)
		return NULL;
	if (e->magic) {
		fprintf(out, ":%s:M:%d:", e->name, e->offset);
		ret = put_hex(out, e->magic);
		fputc(':', out);
		ret = ret ?: e->mask ? put_hex(out, e->mask) : 0;
	} else {
		fprintf(out, ":%s:E::%s:", e->name, e->extension);
		ret = 0;
	}
	fprintf(out, ":%s:%s", e->interpreter, e->flags ?: "");
	if (fclose(out) || ret) {
		free(line);
		return NULL;
	}
	return line;
}

static int write_file(int dir, const char *name, const char *text)
{
	int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
	ssize_t len = strlen(text);
	int ret = fd >= 0 && write(fd, text, len) == len ? 0 : -errno;

	if (fd >= 0)
		close(fd);
	return ret;
}

static int register_handler(int dir, const BinfmtMiscEntry *e)
{
	char *line = register_line(e);
	int ret;

	if (!line) {
		pr_err("binfmt_misc: handler %s: the image names no magic or extension\n", e->name);
		return -EINVAL;
	}
	pr_debug("binfmt_misc: registering %s\n", line);
	ret = write_file(dir, "register", line);
	free(line);
	if (!ret && !e->enabled)
		ret = write_file(dir, e->name, "0");
	if (ret)
		pr_err("binfmt_misc: cannot register handler %s (interpreter %s): %s\n", e->name,
		       e->interpreter, strerror(-ret));
	return ret;
}

/* Handlers this call registered, removed again ("-1" to a handler's file removes it). */
static void unregister_handlers(int dir, char **names, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		if (write_file(dir, names[i], "-1"))
			pr_warn("binfmt_misc: cannot remove handler %s again\n", names[i]);
}

/* name (a copy) appended to *names. 0 or -ENOMEM. */
static int remember_name(char ***names, size_t *nr, const char *name)
{
	char **more = realloc(*names, (*nr + 1) * sizeof(**names));

	if (!more)
		return -ENOMEM;
	*names = more;
	more[*nr] = strdup(name);
	if (!more[*nr])
		return -ENOMEM;
	(*nr)++;
	return 0;
}

int binfmt_restore(const char *path)
{
	char **added = NULL;
	size_t nr_added = 0;
	struct cr_img *img;
	void *msg;
	int dir, ret;

	if (!img_exists(CR_IMG_BINFMT_MISC, 0))
		return 0;
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		pr_perror("binfmt_misc at %s: cannot open it", path);
		return -errno;
	}
	img = open_image(CR_IMG_BINFMT_MISC, O_RDONLY, 0);
	ret = img ? 0 : -EIO;
	while (!ret && (ret = pb_read_one(img, &msg)) == 1) {
		BinfmtMiscEntry *e = msg;

		if (!faccessat(dir, e->name, F_OK, 0)) {
			/* The instance has it (a host's, or one restored already): kept. */
			pr_info("binfmt_misc at %s: handler %s is there already\n", path, e->name);
			ret = 0;
		} else {
			ret = register_handler(dir, e);
			ret = ret ?: remember_name(&added, &nr_added, e->name);
		}
		pb_free(img, msg);
	}
	if (ret)
		unregister_handlers(dir, added, nr_added);
	for (size_t i = 0; i < nr_added; i++)
		free(added[i]);
	free(added);
	if (img)
		close_image(img);
	close(dir);
	return ret;
}
