/*
 * User namespaces: the uid and gid maps of a root with a user namespace of its own
 * (userns-ID.img, as CRIU writes it), and the ids the images hold as the tree sees them.
 *
 * The images keep every id (creds, file owners, SysV owners) as the tree sees it, inside its
 * namespace, as CRIU does: restore sets them from inside. Dump reads them from /proc and
 * stat() as criu sees them, so it maps each one through the root's maps
 * (userns_tree_uid(), userns_tree_gid()); an id the namespace has no mapping for cannot be
 * given back and fails the dump. The tree's namespace must be a child of criu's: the maps
 * are then relative to criu's ids (nested user namespaces are refused).
 *
 * Restore clones the root with CLONE_NEWUSER (with the root's other new namespaces, which
 * the new user namespace then owns) and criu writes the maps from outside, before the root
 * takes its first step (user_born()). The tasks keep criu's ids, and every capability in
 * the namespace, until the restorer sets the images' creds: they read criu's images
 * (owned by an id the namespace does not map) to the end. What restore creates (deleted
 * files made again, memfds, bound Unix sockets' files, ptys' slaves) is then owned by
 * criu's ids, which the namespace cannot give another owner: an owner service, a child of
 * criu outside the namespace, does it for the tasks (userns_chown()).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "fhandle.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "servicefd.h"
#include "tty.h"

#include "userns.pb-c.h"

/* The kernel takes at most this many lines in a uid_map or gid_map. */
#define MAX_EXTENTS 340

struct id_map {
	UidGidExtent ext[MAX_EXTENTS];
	size_t n;
};

/* Dump: the maps of the root's namespace, once dump_check() read them. */
static struct {
	bool own;
	struct id_map uid, gid;
} dumped;

static const char *const map_names[] = { "uid_map", "gid_map" };

/* One of /proc/PID/{uid,gid}_map, as criu (in the parent namespace) reads it. */
static int read_map(pid_t pid, const char *name, struct id_map *map)
{
	unsigned int first, lower, count;
	char path[64];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "re");
	if (!f) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	map->n = 0;
	while (fscanf(f, "%u %u %u", &first, &lower, &count) == 3) {
		if (map->n == MAX_EXTENTS) {
			pr_err("%s: more than %d lines\n", path, MAX_EXTENTS);
			ret = -E2BIG;
			break;
		}
		uid_gid_extent__init(&map->ext[map->n]);
		map->ext[map->n].first = first;
		map->ext[map->n].lower_first = lower;
		map->ext[map->n].count = count;
		map->n++;
	}
	fclose(f);
	return ret;
}

/* The inode of the user namespace that owns the one at fd's. */
static int parent_userns_inode(int fd, ino_t *ino)
{
	struct stat st;
	int parent = ioctl(fd, NS_GET_PARENT);

	if (parent < 0)
		return -errno;
	if (fstat(parent, &st)) {
		close(parent);
		return -errno;
	}
	close(parent);
	*ino = st.st_ino;
	return 0;
}

/* The tree's user namespace must be a child of criu's: its maps then name criu's ids. */
static int check_parent_is_criu(const struct ns_id *ns)
{
	struct stat own;
	char path[64];
	ino_t parent = 0;
	int fd, ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", ns->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pr_perror("cannot open %s", path);
		return -errno;
	}
	ret = parent_userns_inode(fd, &parent);
	close(fd);
	if (ret) {
		pr_err("%s: cannot find the namespace it was created in: %s\n", path,
		       strerror(-ret));
		return ret;
	}
	if (stat("/proc/self/ns/user", &own)) {
		pr_perror("cannot stat criu's user namespace");
		return -errno;
	}
	if (own.st_ino != parent) {
		pr_err("the tree's user namespace %u (task %d) is not a child of criu's: nested "
		       "user namespaces are not supported\n",
		       ns->id, ns->pid);
		return -ENOTSUP;
	}
	return 0;
}

static int user_dump_check(struct ns_id *ns)
{
	int ret = check_parent_is_criu(ns);

	if (!ret)
		ret = read_map(ns->pid, map_names[0], &dumped.uid);
	if (!ret)
		ret = read_map(ns->pid, map_names[1], &dumped.gid);
	if (ret)
		return ret;
	dumped.own = true;
	pr_info("user namespace %u: %zu uid and %zu gid extents\n", ns->id, dumped.uid.n,
		dumped.gid.n);
	return 0;
}

/* id, as criu sees it, as the tree sees it; -ENOENT where the namespace cannot name it. */
static int to_tree(const struct id_map *map, uint32_t id, uint32_t *tree)
{
	if (!dumped.own) {
		*tree = id;
		return 0;
	}
	for (size_t i = 0; i < map->n; i++) {
		const UidGidExtent *e = &map->ext[i];

		if (id >= e->lower_first && id - e->lower_first < e->count) {
			*tree = e->first + (id - e->lower_first);
			return 0;
		}
	}
	return -ENOENT;
}

int userns_tree_uid(uint32_t uid, uint32_t *tree, const char *what)
{
	int ret = to_tree(&dumped.uid, uid, tree);

	if (ret)
		pr_err("%s: uid %u has no mapping in the tree's user namespace\n", what, uid);
	return ret;
}

int userns_tree_gid(uint32_t gid, uint32_t *tree, const char *what)
{
	int ret = to_tree(&dumped.gid, gid, tree);

	if (ret)
		pr_err("%s: gid %u has no mapping in the tree's user namespace\n", what, gid);
	return ret;
}

int userns_tree_owner(uint32_t uid, uint32_t gid, uint32_t *tree_uid, uint32_t *tree_gid,
		      const char *what)
{
	return userns_tree_uid(uid, tree_uid, what) ?: userns_tree_gid(gid, tree_gid, what);
}

int userns_join_tree(pid_t pid)
{
	char path[64];
	int fd, ret = 0;

	if (!dumped.own)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWUSER)) {
		ret = -errno;
		pr_perror("cannot join the user namespace of task %d", pid);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The kernel's stand-in for an id a user namespace does not map, from its sysctl. */
static int overflow_id(const char *name, uint32_t *id)
{
	char path[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	f = fopen(path, "r");
	ok = f && fscanf(f, "%u", id) == 1;
	if (f)
		fclose(f);
	if (!ok) {
		pr_perror("cannot read %s", path);
		return -EIO;
	}
	return 0;
}

int userns_seen_owner(uint32_t uid, uint32_t gid, uint32_t *tree_uid, uint32_t *tree_gid)
{
	if (to_tree(&dumped.uid, uid, tree_uid) && overflow_id("overflowuid", tree_uid))
		return -EIO;
	if (to_tree(&dumped.gid, gid, tree_gid) && overflow_id("overflowgid", tree_gid))
		return -EIO;
	return 0;
}

/* In a child joined to the namespace (the maps read the same from there). */
static int user_dump(const struct ns_id *ns)
{
	UidGidExtent *uids[MAX_EXTENTS], *gids[MAX_EXTENTS];
	UsernsEntry e = USERNS_ENTRY__INIT;
	struct cr_img *img;
	int ret;

	for (size_t i = 0; i < dumped.uid.n; i++)
		uids[i] = &dumped.uid.ext[i];
	for (size_t i = 0; i < dumped.gid.n; i++)
		gids[i] = &dumped.gid.ext[i];
	e.n_uid_map = dumped.uid.n;
	e.uid_map = uids;
	e.n_gid_map = dumped.gid.n;
	e.gid_map = gids;
	img = open_image(CR_IMG_USERNS, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &e);
	close_image(img);
	return ret;
}

static int check_map(const char *img_name, const char *name, UidGidExtent **ext, size_t n)
{
	if (!n || n > MAX_EXTENTS) {
		pr_err("%s: %zu lines in the %s (1 to %d)\n", img_name, n, name, MAX_EXTENTS);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (!ext[i]->count || ext[i]->first + (uint64_t)ext[i]->count > 1ULL << 32 ||
		    ext[i]->lower_first + (uint64_t)ext[i]->count > 1ULL << 32) {
			pr_err("%s: %s line %zu maps %u ids from %u to %u: out of range\n",
			       img_name, name, i, ext[i]->count, ext[i]->first,
			       ext[i]->lower_first);
			return -EINVAL;
		}
	return 0;
}

/* Restore: the maps of the root's namespace, once collected; NULL where it has none. */
static const UsernsEntry *restored;

/* id, as the tree sees it, as criu sees it; -EOVERFLOW where the namespace does not map it. */
static int to_host(UidGidExtent **ext, size_t n, uint32_t id, uint32_t *host)
{
	for (size_t i = 0; i < n; i++)
		if (id >= ext[i]->first && id - ext[i]->first < ext[i]->count) {
			*host = ext[i]->lower_first + (id - ext[i]->first);
			return 0;
		}
	return -EOVERFLOW;
}

static int host_id(bool gid, uint32_t id, uint32_t *host, const char *what)
{
	int ret;

	if (!restored) {
		*host = id;
		return 0;
	}
	ret = gid ? to_host(restored->gid_map, restored->n_gid_map, id, host)
		  : to_host(restored->uid_map, restored->n_uid_map, id, host);
	if (ret)
		pr_err("%s: %s %u is not mapped by the tree's user namespace\n", what,
		       gid ? "gid" : "uid", id);
	return ret;
}

int userns_host_uid(uint32_t uid, uint32_t *host, const char *what)
{
	return host_id(false, uid, host, what);
}

int userns_host_gid(uint32_t gid, uint32_t *host, const char *what)
{
	return host_id(true, gid, host, what);
}

/* id, as criu sees it, as the tree sees it; -EOVERFLOW where the namespace does not map it. */
static int from_host(UidGidExtent **ext, size_t n, uint32_t id, uint32_t *tree)
{
	for (size_t i = 0; i < n; i++)
		if (id >= ext[i]->lower_first && id - ext[i]->lower_first < ext[i]->count) {
			*tree = ext[i]->first + (id - ext[i]->lower_first);
			return 0;
		}
	return -EOVERFLOW;
}

int userns_tree_uid_of_host(uint32_t host, uint32_t *uid, const char *what)
{
	if (!restored) {
		*uid = host;
		return 0;
	}
	if (!from_host(restored->uid_map, restored->n_uid_map, host, uid))
		return 0;
	pr_err("%s: uid %u is not mapped by the tree's user namespace\n", what, host);
	return -EOVERFLOW;
}

/* One option of a mount's: "uid=N" and "gid=N" with N the tree's id, others as they are. */
static int mount_opt_to_tree(const char *opt, char *out, size_t size, const char *what)
{
	bool uid = !strncmp(opt, "uid=", 4), gid = !strncmp(opt, "gid=", 4);
	uint32_t host, tree;
	char *end;

	if (!uid && !gid)
		return snprintf(out, size, "%s", opt) < (int)size ? 0 : -E2BIG;
	host = strtoul(opt + 4, &end, 10);
	if (*end || end == opt + 4 ||
	    (uid ? from_host(restored->uid_map, restored->n_uid_map, host, &tree) :
		   from_host(restored->gid_map, restored->n_gid_map, host, &tree))) {
		pr_err("%s: option %s names no id the tree's user namespace maps\n", what, opt);
		return -EOVERFLOW;
	}
	return snprintf(out, size, "%.4s%u", opt, tree) < (int)size ? 0 : -E2BIG;
}

int userns_mount_opts(const char *opts, char **tree_opts, const char *what)
{
	/* an id grows to 10 digits at most, in "uid=" and "gid=" alike */
	size_t size, len = 0;
	char *copy, *save = NULL, *opt;
	int ret = 0;

	*tree_opts = NULL;
	if (!opts)
		return 0;
	size = strlen(opts) + 1 + 2 * 10;
	copy = strdup(opts);
	*tree_opts = copy && restored ? calloc(1, size) : copy;
	if (!*tree_opts) {
		free(copy);
		pr_err("%s: out of memory for its options\n", what);
		return -ENOMEM;
	}
	if (!restored)
		return 0;
	for (opt = strtok_r(copy, ",", &save); opt && !ret; opt = strtok_r(NULL, ",", &save)) {
		if (len)
			(*tree_opts)[len++] = ',';
		ret = mount_opt_to_tree(opt, *tree_opts + len, size - len, what);
		len += strlen(*tree_opts + len);
	}
	free(copy);
	if (ret) {
		free(*tree_opts);
		*tree_opts = NULL;
	}
	return ret;
}

/* Restore: an owner from the images (ids inside the tree's namespace), as criu names it. */
static int host_owner(uint32_t uid, uint32_t gid, uint32_t *host_uid, uint32_t *host_gid)
{
	if (!restored) {
		*host_uid = uid;
		*host_gid = gid;
		return 0;
	}
	return to_host(restored->uid_map, restored->n_uid_map, uid, host_uid) ?:
		       to_host(restored->gid_map, restored->n_gid_map, gid, host_gid);
}

static int user_collect(struct ns_id *ns)
{
	struct cr_img *img;
	UsernsEntry *e;
	int ret;

	img = open_image(CR_IMG_USERNS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&e);
	if (!ret)
		ret = check_map(img->name, map_names[0], e->uid_map, e->n_uid_map) ?:
			      check_map(img->name, map_names[1], e->gid_map, e->n_gid_map);
	if (ret && e)
		pb_free(img, e);
	close_image(img);
	if (!ret)
		ns->priv = e;
	restored = ns->priv;
	return ret;
}

/* "first lower count" lines, written at once as the kernel wants them. */
static int write_map(pid_t pid, const char *name, UidGidExtent **ext, size_t n)
{
	char path[64], *text = malloc(n * 36 + 1);
	size_t len = 0;
	int fd, ret = 0;

	if (!text) {
		pr_err("no memory for the %s of the root %d\n", name, pid);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		len += sprintf(text + len, "%u %u %u\n", ext[i]->first, ext[i]->lower_first,
			       ext[i]->count);
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
		ret = -errno;
		pr_perror("cannot write the %s of the root %d (%zu lines)", name, pid, n);
	}
	if (fd >= 0)
		close(fd);
	free(text);
	return ret;
}

static int user_born(const struct ns_id *ns, pid_t root_host)
{
	const UsernsEntry *e = ns->priv;
	int ret;

	ret = write_map(root_host, map_names[0], e->uid_map, e->n_uid_map);
	if (!ret)
		ret = write_map(root_host, map_names[1], e->gid_map, e->n_gid_map);
	if (!ret)
		pr_info("user namespace %u: %zu uid and %zu gid extents written\n", ns->id,
			e->n_uid_map, e->n_gid_map);
	return ret;
}

/* ------------------------------------------------ files made as their owner ---- */

/*
 * In the tree's user namespace, where the task has every capability: setfsuid() keeps them
 * (the kernel drops the filesystem ones only when leaving the namespace's root id). The
 * answer goes through answer_fd, the fd table being the caller's.
 */
static void __attribute__((noreturn)) tree_owner_child(int (*make)(void *arg), void *arg,
							uint32_t uid, uint32_t gid, int answer_fd)
{
	int ret;

	setfsgid(gid);
	setfsuid(uid);
	/* Both answer the previous id, and change nothing for an invalid one: read them back. */
	if ((uint32_t)setfsgid(-1) != gid || (uint32_t)setfsuid(-1) != uid)
		ret = -EOVERFLOW;
	else
		ret = make(arg);
	_exit(write(answer_fd, &ret, sizeof(ret)) == sizeof(ret) ? 0 : 1);
}

int make_as_tree_owner(int (*make)(void *arg), void *arg, uint32_t uid, uint32_t gid)
{
	struct clone_args args = { .flags = CLONE_FILES, .exit_signal = SIGCHLD };
	int answer[2], ret = -ECHILD, status;
	pid_t want, child;

	if (get_service_fd(USERNS_SFD) < 0)
		return make(arg);
	if (pipe2(answer, O_CLOEXEC))
		return -errno;
	want = pidns_helper_pid(getpid());
	if (want) {
		args.set_tid = (uintptr_t)&want;
		args.set_tid_size = 1;
	}
	child = syscall(SYS_clone3, &args, sizeof(args));
	/* Above pid_max (EINVAL) or taken (EEXIST): any pid, as a helper outside one gets. */
	if (child < 0 && want && (errno == EINVAL || errno == EEXIST)) {
		args.set_tid = 0;
		args.set_tid_size = 0;
		child = syscall(SYS_clone3, &args, sizeof(args));
	}
	if (child == 0)
		tree_owner_child(make, arg, uid, gid, answer[1]);
	if (child < 0) {
		ret = -errno;
		pr_perror("cannot start a child to make a file as uid %u gid %u", uid, gid);
	}
	while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (child > 0 && read(answer[0], &ret, sizeof(ret)) != sizeof(ret))
		ret = -ECHILD;
	close(answer[0]);
	close(answer[1]);
	return ret;
}

/* ------------------------------------------------------- the owner service ---- */

/*
 * A request, with the file and the requester's reply socket (SCM_RIGHTS): give the file
 * an owner, queue keystrokes in the pty whose slave it is (TIOCSTI, on a terminal not the
 * caller's, takes CAP_SYS_ADMIN in the initial user namespace, which tasks of the tree
 * lack), or open a file handle on the file's filesystem (CAP_DAC_READ_SEARCH, likewise);
 * size a socket's buffer past the system's limit (SO_SNDBUFFORCE, SO_RCVBUFFORCE: CAP_NET_ADMIN
 * in the initial user namespace), or make a ping socket in the tree's net namespace (the
 * kernel lets only the gids of net.ipv4.ping_group_range make one, and the tasks still
 * have criu's, which the tree's namespace does not map).
 */
enum owner_op {
	OWNER_CHOWN,
	OWNER_QUEUE_INPUT,
	OWNER_OPEN_HANDLE, /* the file is a mount's, a file_handle follows: the reply has the fd */
	OWNER_SOCK_BUF, /* the file is a socket */
	OWNER_PING_SOCKET, /* the file is a net namespace: the reply has the socket */
};

struct owner_request {
	uint32_t op;
	uint32_t uid, gid; /* OWNER_CHOWN: as criu sees them */
	uint32_t len; /* OWNER_QUEUE_INPUT: this many keystrokes follow the request */
	struct kernel_termios termios; /* OWNER_QUEUE_INPUT: the slave's */
	int32_t opt, val; /* OWNER_SOCK_BUF: SO_SNDBUFFORCE or SO_RCVBUFFORCE, its value */
	int32_t family; /* OWNER_PING_SOCKET: AF_INET or AF_INET6 */
};

static pid_t owner_service;

/* Sends a request and what follows it as one message, with the nr_fds descriptors fds. */
static int send_with_fds(int sk, const struct owner_request *req, const void *more,
			 const int *fds, int nr_fds)
{
	char control[CMSG_SPACE(2 * sizeof(int))] = { 0 };
	struct iovec iov[2] = { { .iov_base = (void *)req, .iov_len = sizeof(*req) },
				{ .iov_base = (void *)more, .iov_len = req->len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control,
			     .msg_controllen = CMSG_SPACE(nr_fds * sizeof(int)) };
	struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);

	ch->cmsg_level = SOL_SOCKET;
	ch->cmsg_type = SCM_RIGHTS;
	ch->cmsg_len = CMSG_LEN(nr_fds * sizeof(int));
	memcpy(CMSG_DATA(ch), fds, nr_fds * sizeof(int));
	return sendmsg(sk, &mh, MSG_NOSIGNAL) == (ssize_t)(sizeof(*req) + req->len) ? 0 : -errno;
}

/*
 * A ping socket made in the net namespace netns_fd with a gid of its ping_group_range, which
 * the kernel checks against the creator's effective gid (ping_init_sock()): the service's
 * are criu's ids, which may be outside it. The service goes back to its own net namespace
 * and gid afterwards. The socket, or -errno.
 */
static int ping_socket_in(int netns_fd, int family)
{
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), fd = -EBADF;
	gid_t egid = getegid();
	unsigned int low, high;
	FILE *f = NULL;

	if (own < 0)
		return -errno;
	if (setns(netns_fd, CLONE_NEWNET)) {
		close(own);
		return -errno;
	}
	/* /proc/sys/net is the opener's net namespace: now the tree's. */
	f = fopen("/proc/sys/net/ipv4/ping_group_range", "re");
	if (!f || fscanf(f, "%u %u", &low, &high) != 2 || low > high)
		fd = -EACCES;
	else if (setresgid(-1, low, -1))
		fd = -errno;
	else {
		fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC,
			    family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
		if (fd < 0)
			fd = -errno;
		if (setresgid(-1, egid, -1))
			_exit(1); /* the service must not go on with another gid */
	}
	if (f)
		fclose(f);
	if (setns(own, CLONE_NEWNET))
		_exit(1); /* nor in another namespace */
	close(own);
	return fd;
}

/* 0 or -errno; *opened: the fd OWNER_OPEN_HANDLE opened, sent back with the answer. */
static int serve_request(const struct owner_request *req, uint8_t *more, int fd, int *opened)
{
	struct file_handle *fh = (struct file_handle *)more;
	const char *why;

	switch (req->op) {
	case OWNER_QUEUE_INPUT:
		return pty_queue_input(fd, &req->termios, more, req->len,
				       "pty input (owner service)");
	case OWNER_OPEN_HANDLE:
		if (req->len < sizeof(*fh) || fh->handle_bytes > req->len - sizeof(*fh))
			return -EINVAL;
		*opened = open_handle_in_mount(fd, fh, &why);
		return *opened < 0 ? *opened : 0;
	case OWNER_SOCK_BUF:
		if (req->opt != SO_SNDBUFFORCE && req->opt != SO_RCVBUFFORCE)
			return -EINVAL;
		return setsockopt(fd, SOL_SOCKET, req->opt, &req->val, sizeof(req->val)) ? -errno :
											    0;
	case OWNER_PING_SOCKET:
		if (req->family != AF_INET && req->family != AF_INET6)
			return -EINVAL;
		*opened = ping_socket_in(fd, req->family);
		return *opened < 0 ? *opened : 0;
	default:
		return fchownat(fd, "", req->uid, req->gid, AT_EMPTY_PATH) ? -errno : 0;
	}
}

/* The answer, with the fd opened for it if any. */
static void answer(int reply_sk, int ret, int opened)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &ret, .iov_len = sizeof(ret) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *ch;

	if (opened >= 0) {
		mh.msg_control = control;
		mh.msg_controllen = sizeof(control);
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(ch), &opened, sizeof(int));
	}
	/* A requester gone meanwhile waits for no answer: nothing to do if this fails. */
	sendmsg(reply_sk, &mh, MSG_NOSIGNAL);
	if (opened >= 0)
		close(opened);
}

/* One request: 0 (all its senders are gone), 1 (served), or -1 (malformed, dropped). */
static int serve_one(int sk)
{
	static uint8_t keys[PTY_QUEUE_MAX] __attribute__((aligned(8)));
	char control[CMSG_SPACE(2 * sizeof(int))];
	struct owner_request req;
	struct iovec iov[2] = { { .iov_base = &req, .iov_len = sizeof(req) },
				{ .iov_base = keys, .iov_len = sizeof(keys) } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	struct cmsghdr *ch;
	int fds[2], ret, opened = -1;
	ssize_t n;

	n = recvmsg(sk, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n == 0 || errno != EINTR ? 0 : 1;
	ch = CMSG_FIRSTHDR(&mh);
	if (n < (ssize_t)sizeof(req) || !ch || ch->cmsg_type != SCM_RIGHTS ||
	    ch->cmsg_len != CMSG_LEN(sizeof(fds)))
		return -1;
	memcpy(fds, CMSG_DATA(ch), sizeof(fds));
	ret = n == (ssize_t)(sizeof(req) + req.len) ? serve_request(&req, keys, fds[0], &opened) :
						       -EINVAL;
	answer(fds[1], ret, opened);
	close(fds[0]);
	close(fds[1]);
	return 1;
}

int userns_owner_service_start(void)
{
	int socks[2];

	if (!restored)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks)) {
		pr_perror("cannot make the user namespace's owner service socket");
		return -errno;
	}
	owner_service = fork();
	if (owner_service < 0) {
		pr_perror("cannot fork the user namespace's owner service");
		close(socks[0]);
		close(socks[1]);
		return -errno;
	}
	if (owner_service == 0) {
		close(socks[1]);
		while (serve_one(socks[0]))
			;
		_exit(0);
	}
	close(socks[0]);
	if (install_service_fd(USERNS_SFD, socks[1]) < 0) {
		userns_owner_service_stop();
		return -EBADF;
	}
	pr_info("user namespace owner service: process %d\n", owner_service);
	return 0;
}

void userns_owner_service_stop(void)
{
	close_service_fd(USERNS_SFD);
	if (owner_service <= 0)
		return;
	kill(owner_service, SIGKILL);
	while (waitpid(owner_service, NULL, 0) < 0 && errno == EINTR)
		;
	owner_service = 0;
}

/* An answer: 0 or -errno; *opened the fd that came with it, if any (else -1). */
static int read_answer(int reply_sk, int *opened)
{
	char control[CMSG_SPACE(sizeof(int))];
	int ret;
	struct iovec iov = { .iov_base = &ret, .iov_len = sizeof(ret) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	struct cmsghdr *ch;

	*opened = -1;
	if (recvmsg(reply_sk, &mh, MSG_CMSG_CLOEXEC) != sizeof(ret))
		return -EPIPE;
	ch = CMSG_FIRSTHDR(&mh);
	if (ch && ch->cmsg_type == SCM_RIGHTS && ch->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(opened, CMSG_DATA(ch), sizeof(int));
	return ret;
}

/*
 * From criu or a task: the service does it, from outside the namespace; its answer, and in
 * *opened the fd it sent with it (-1 if none; opened may be NULL where none is expected).
 */
static int ask_service(int sk, int fd, const struct owner_request *req, const void *more,
		       int *opened)
{
	int reply[2], ret, got = -1;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, reply))
		return -errno;
	ret = send_with_fds(sk, req, more, (int[]){ fd, reply[1] }, 2);
	close(reply[1]);
	if (!ret)
		ret = read_answer(reply[0], &got);
	close(reply[0]);
	if (opened)
		*opened = got;
	else if (got >= 0)
		close(got);
	return ret;
}

int userns_chown(int fd, uint32_t uid, uint32_t gid, const char *what)
{
	int sk = get_service_fd(USERNS_SFD);
	uint32_t host_uid, host_gid;
	int ret;

	if (host_owner(uid, gid, &host_uid, &host_gid)) {
		pr_err("%s: uid %u or gid %u is not mapped by the tree's user namespace\n", what,
		       uid, gid);
		return -EOVERFLOW;
	}
	if (sk >= 0)
		ret = ask_service(sk, fd,
				  &(struct owner_request){ .op = OWNER_CHOWN, .uid = host_uid,
							   .gid = host_gid },
				  NULL, NULL);
	else
		ret = fchownat(fd, "", host_uid, host_gid, AT_EMPTY_PATH) ? -errno : 0;
	if (ret)
		pr_err("%s: cannot give it to uid %u gid %u: %s\n", what, uid, gid, strerror(-ret));
	return ret;
}

int userns_chown_path(const char *path, uint32_t uid, uint32_t gid)
{
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC), ret;

	if (fd < 0) {
		pr_perror("cannot open %s to give it its owner", path);
		return -errno;
	}
	ret = userns_chown(fd, uid, gid, path);
	close(fd);
	return ret;
}

int userns_queue_pty_input(int slave_fd, const struct kernel_termios *termios,
			   const uint8_t *keys, size_t len, const char *what)
{
	struct owner_request req = { .op = OWNER_QUEUE_INPUT, .len = len, .termios = *termios };
	int sk = get_service_fd(USERNS_SFD), ret;

	if (sk < 0)
		return pty_queue_input(slave_fd, termios, keys, len, what);
	if (len > PTY_QUEUE_MAX) {
		pr_err("%s: more than %d bytes of input queued\n", what, PTY_QUEUE_MAX);
		return -EFBIG;
	}
	ret = ask_service(sk, slave_fd, &req, keys, NULL);
	if (ret)
		pr_err("%s: the owner service cannot queue its %zu input bytes: %s\n", what, len,
		       strerror(-ret));
	return ret;
}

int userns_open_handle(int mnt_fd, struct file_handle *fh, const char **why)
{
	struct owner_request req = { .op = OWNER_OPEN_HANDLE,
				     .len = sizeof(*fh) + fh->handle_bytes };
	int sk = get_service_fd(USERNS_SFD), fd, ret;

	if (sk < 0)
		return open_handle_in_mount(mnt_fd, fh, why);
	ret = ask_service(sk, mnt_fd, &req, fh, &fd);
	if (!ret && fd < 0)
		ret = -EPIPE;
	if (ret)
		*why = "open_by_handle_at (through the owner service)";
	return ret ? ret : fd;
}

int userns_sock_buf(int fd, int opt, int val)
{
	struct owner_request req = { .op = OWNER_SOCK_BUF, .opt = opt, .val = val };
	int sk = get_service_fd(USERNS_SFD);

	return sk < 0 ? -EPERM : ask_service(sk, fd, &req, NULL, NULL);
}

int userns_ping_socket(int family)
{
	struct owner_request req = { .op = OWNER_PING_SOCKET, .family = family };
	int sk = get_service_fd(USERNS_SFD), netns, fd = -1, ret;

	if (sk < 0)
		return -EACCES;
	netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (netns < 0)
		return -errno;
	ret = ask_service(sk, netns, &req, NULL, &fd);
	close(netns);
	if (!ret && fd < 0)
		ret = -EPIPE;
	return ret ? ret : fd;
}

static void user_fini(struct ns_id *ns)
{
	pb_free(NULL, ns->priv);
	ns->priv = NULL;
	restored = NULL;
	dumped.own = false;
}

const struct ns_kind user_ns_kind = {
	.name = "user",
	.clone_flag = CLONE_NEWUSER,
	.dump_check = user_dump_check,
	.dump = user_dump,
	.collect = user_collect,
	.born = user_born,
	.fini = user_fini,
};
