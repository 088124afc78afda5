/*
 * The inode reverse map of --force-irmap (irmap.h): a depth-first walk of a few directory
 * trees, comparing each entry's dev/ino with the inode sought. It stays on the inode's
 * filesystem below each root, and the walk of one root stops at the first match.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cr_options.h"
#include "irmap.h"
#include "log.h"

/* Where a watched file of a system service usually is, after the user's paths. */
static const char *const default_roots[] = { "/etc", "/var/spool", "/var/log", "/lib/udev",
					     "/usr/share/dbus-1" };

/* A walk is bounded: a loop through bind mounts or a huge tree must not hang the dump. */
#define IRMAP_MAX_DEPTH 16

static int walk(const char *dir, dev_t dev, ino_t ino, int depth, char **path);

/* One entry of dir: itself the inode, or a directory on its filesystem to walk into. */
static int visit(const char *dir, const char *name, dev_t dev, ino_t ino, int depth, char **path)
{
	char child[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(child, sizeof(child), "%s/%s", strcmp(dir, "/") ? dir : "", name) >=
	    sizeof(child))
		return -ENOENT;
	if (lstat(child, &st))
		return -ENOENT;
	if (st.st_dev == dev && st.st_ino == ino) {
		*path = strdup(child);
		return *path ? 0 : -ENOMEM;
	}
	if (S_ISDIR(st.st_mode) && st.st_dev == dev && depth < IRMAP_MAX_DEPTH)
		return walk(child, dev, ino, depth + 1, path);
	return -ENOENT;
}

static int walk(const char *dir, dev_t dev, ino_t ino, int depth, char **path)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int ret = -ENOENT;

	if (!d)
		return -ENOENT; /* unreadable or gone: nothing to find there */
	while (ret == -ENOENT && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ret = visit(dir, de->d_name, dev, ino, depth, path);
	}
	closedir(d);
	return ret;
}

static int find_under(const char *root, dev_t dev, ino_t ino, char **path)
{
	struct stat st;

	if (lstat(root, &st)) {
		pr_debug("irmap: %s: %s, not scanned\n", root, strerror(errno));
		return -ENOENT;
	}
	if (st.st_dev == dev && st.st_ino == ino) {
		*path = strdup(root);
		return *path ? 0 : -ENOMEM;
	}
	return S_ISDIR(st.st_mode) ? walk(root, dev, ino, 0, path) : -ENOENT;
}

int irmap_find_path(dev_t dev, ino_t ino, char **path)
{
	int ret = -ENOENT;

	for (unsigned int i = 0; i < opts.nr_irmap_scan_paths && ret == -ENOENT; i++)
		ret = find_under(opts.irmap_scan_paths[i], dev, ino, path);
	for (size_t i = 0; i < sizeof(default_roots) / sizeof(default_roots[0]) && ret == -ENOENT; i++)
		ret = find_under(default_roots[i], dev, ino, path);
	if (!ret)
		pr_debug("irmap: inode %#llx on %u:%u is %s\n", (unsigned long long)ino,
			 major(dev), minor(dev), *path);
	return ret;
}
