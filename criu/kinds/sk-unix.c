/*
 * Unix sockets (file_entry.usk, queued data in sk-queues.img). Dump reads each socket's
 * type, state, name, peer, pending connections and shutdown from the kernel's sock_diag
 * table of Unix sockets (NETLINK_SOCK_DIAG), its options and queue through criu's copy
 * of the fd; sockets are tied together by inode. Restore re-creates each socket with its
 * name, listens, connects and accepts again, refills the queues from the sending side,
 * then sets options, shutdown and file flags.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cr_options.h"
#include "files.h"
#include "log.h"
#include "servicefd.h"
#include "namespaces.h"
#include "plugin.h"
#include "pstree.h"
#include "sk-opts.h"
#include "sk-queue.h"
#include "sk-unix.h"
#include "rpc-wire.h"

#include "sk-unix.pb-c.h"

#ifndef SIOCUNIXFILE
#define SIOCUNIXFILE (SIOCPROTOPRIVATE + 0) /* an O_PATH fd of a bound socket's file */
#endif

#define UNIX_NAME_MAX sizeof(((struct sockaddr_un *)0)->sun_path)
#define DELETED_MARK " (deleted)"

/* CRIU's unix_sk_entry.uflags. */
#define USK_EXTERN 0x1
#define USK_SERVICE 0x2
#define USK_CALLBACK 0x4
#define USK_INHERIT 0x8

static bool is_connection_type(uint32_t type)
{
	return type == SOCK_STREAM || type == SOCK_SEQPACKET;
}

/* ---------------------------------------------------------------- dump ---- */

/*
 * A dumped socket's entry. Written once every fd is dumped, when its peer is known to be
 * in the images or is dealt with as external (a plugin's, or --ext-unix-sk).
 */
struct usk_entry {
	UnixSkEntry ue;
	SkOptsEntry opts;
	FilePermsEntry perms;
	FownEntry fown;
	int lfd; /* criu's copy of the socket, for DUMP_UNIX_SK */
	int nr_packets; /* in its queue, as dumped */
};

/* One Unix socket of the system as sock_diag shows it, and where it was dumped. */
struct usk_diag {
	uint32_t ino;
	uint32_t ns_id; /* its net namespace's image id (0: criu's) */
	uint8_t type, state, shutdown;
	uint32_t peer; /* 0: none (or a connection not accepted yet: its peer has no inode) */
	uint32_t rqlen, wqlen;
	bool has_vfs;
	uint32_t vfs_ino;
	uint32_t namelen;
	uint8_t name[UNIX_NAME_MAX];
	uint32_t nr_icons; /* listening: the clients of the connections not accepted yet */
	uint32_t *icons;
	/* Once dumped: its file id, the fd that named it first, the peer written. */
	uint32_t id;
	pid_t pid;
	int fd;
	uint32_t img_peer;
	struct usk_entry *entry; /* until written */
	uint32_t extern_id; /* outside the tree: the id of the entry standing for it */
};

static struct usk_diag *diag_sks;
static size_t nr_diag_sks;
static int diag_state; /* 0: not read yet, 1: read, < 0: reading failed */

/* The inodes of the sockets the tasks of the dump hold, sorted; read with the table. */
static uint32_t *tree_sks;
static size_t nr_tree_sks;

static int cmp_diag_ino(const void *a, const void *b)
{
	uint32_t x = ((const struct usk_diag *)a)->ino, y = ((const struct usk_diag *)b)->ino;

	return (x > y) - (x < y);
}

static struct usk_diag *find_diag(uint32_t ino)
{
	struct usk_diag key = { .ino = ino };

	if (!nr_diag_sks)
		return NULL;
	return bsearch(&key, diag_sks, nr_diag_sks, sizeof(*diag_sks), cmp_diag_ino);
}

static int diag_attr(struct usk_diag *sk, const struct rtattr *rta)
{
	size_t len = RTA_PAYLOAD(rta);

	switch (rta->rta_type) {
	case UNIX_DIAG_NAME:
		if (len > UNIX_NAME_MAX)
			return -EINVAL;
		sk->namelen = len;
		memcpy(sk->name, RTA_DATA(rta), len);
		break;
	case UNIX_DIAG_VFS:
		if (len < sizeof(struct unix_diag_vfs))
			return -EINVAL;
		sk->has_vfs = true;
		sk->vfs_ino = ((const struct unix_diag_vfs *)RTA_DATA(rta))->udiag_vfs_ino;
		break;
	case UNIX_DIAG_PEER:
		if (len < sizeof(uint32_t))
			return -EINVAL;
		memcpy(&sk->peer, RTA_DATA(rta), sizeof(uint32_t));
		break;
	case UNIX_DIAG_ICONS:
		sk->icons = malloc(len ? len : 1);
		if (!sk->icons)
			return -ENOMEM;
		memcpy(sk->icons, RTA_DATA(rta), len);
		sk->nr_icons = len / sizeof(uint32_t);
		break;
	case UNIX_DIAG_RQLEN:
		if (len < sizeof(struct unix_diag_rqlen))
			return -EINVAL;
		sk->rqlen = ((const struct unix_diag_rqlen *)RTA_DATA(rta))->udiag_rqueue;
		sk->wqlen = ((const struct unix_diag_rqlen *)RTA_DATA(rta))->udiag_wqueue;
		break;
	case UNIX_DIAG_SHUTDOWN:
		if (len < 1)
			return -EINVAL;
		sk->shutdown = *(const uint8_t *)RTA_DATA(rta);
		break;
	}
	return 0;
}

static int add_diag_sk(const struct nlmsghdr *h, uint32_t ns_id, size_t *cap)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	struct usk_diag sk = { 0 };
	int ret = 0;

	if (len < 0) {
		pr_err("sock_diag: a short unix socket message\n");
		return -EINVAL;
	}
	sk.ino = m->udiag_ino;
	sk.ns_id = ns_id;
	sk.type = m->udiag_type;
	sk.state = m->udiag_state;
	for (const struct rtattr *rta = (const void *)((const char *)m + NLMSG_ALIGN(sizeof(*m)));
	     RTA_OK(rta, len) && !ret; rta = RTA_NEXT(rta, len))
		ret = diag_attr(&sk, rta);
	if (!ret && nr_diag_sks == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 64;
		struct usk_diag *grown = realloc(diag_sks, grown_cap * sizeof(*grown));

		if (grown) {
			diag_sks = grown;
			*cap = grown_cap;
		} else {
			ret = -ENOMEM;
		}
	}
	if (ret) {
		pr_err("sock_diag: cannot read unix socket %u: %s\n", sk.ino, strerror(-ret));
		free(sk.icons);
		return ret;
	}
	diag_sks[nr_diag_sks++] = sk;
	return 0;
}

/* One recv() of the dump's answer; *done at its end. */
static int read_diag_answer(int nl, uint32_t ns_id, char *buf, size_t size, size_t *cap,
			    bool *done)
{
	ssize_t n = recv(nl, buf, size, 0), left = n;
	int ret = 0;

	if (n < 0) {
		pr_perror("sock_diag: cannot read the unix socket table");
		return -errno;
	}
	for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, left) && !ret && !*done;
	     h = NLMSG_NEXT(h, left)) {
		if (h->nlmsg_type == NLMSG_DONE) {
			*done = true;
		} else if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			pr_err("sock_diag: the unix socket table: %s\n", strerror(-e->error));
			ret = e->error ? e->error : -EIO;
		} else if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
			ret = add_diag_sk(h, ns_id, cap);
		}
	}
	if (!ret && !*done && n == 0) {
		pr_err("sock_diag: the unix socket table ended early\n");
		ret = -EIO;
	}
	return ret;
}

static int send_diag_request(int nl)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.r = { .sdiag_family = AF_UNIX, .udiag_states = -1,
		       /* The shutdown state (UNIX_DIAG_SHUTDOWN) comes without asking. */
		       .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_PEER |
				     UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN },
	};
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		pr_perror("sock_diag: cannot ask for the unix socket table");
		return -errno;
	}
	return 0;
}

/* The Unix sockets of one net namespace of the tree (NULL: criu's, the tree's too). */
static int read_diag_ns(const struct ns_id *ns, char *buf, size_t size, size_t *cap)
{
	bool done = false;
	int nl, ret;

	nl = net_ns_socket(ns, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0) {
		pr_perror("sock_diag: cannot open a NETLINK_SOCK_DIAG socket");
		return -errno;
	}
	ret = send_diag_request(nl);
	while (!ret && !done)
		ret = read_diag_answer(nl, ns ? ns->id : 0, buf, size, cap, &done);
	close(nl);
	return ret;
}

/*
 * Every Unix socket of the tree's network namespaces (sock_diag lists those of its
 * socket's), read once the tree is frozen: a socket's peer may be in another task, dumped
 * later, or outside the tree. Inodes are the system's: one table for all.
 */
static int read_diag_table(void)
{
	size_t cap = 0, size = 64 << 10;
	const struct ns_id *ns = ns_tree_next(NS_NET, NULL);
	char *buf = malloc(size);
	int ret;

	if (!buf) {
		pr_err("sock_diag: out of memory\n");
		return -ENOMEM;
	}
	ret = read_diag_ns(ns, buf, size, &cap);
	while (!ret && ns && (ns = ns_tree_next(NS_NET, ns)))
		ret = read_diag_ns(ns, buf, size, &cap);
	free(buf);
	if (!ret && nr_diag_sks)
		qsort(diag_sks, nr_diag_sks, sizeof(*diag_sks), cmp_diag_ino);
	if (!ret)
		pr_info("sock_diag: %zu unix sockets\n", nr_diag_sks);
	return ret;
}

static void free_entry(struct usk_entry *e)
{
	if (!e)
		return;
	if (e->lfd >= 0)
		close(e->lfd);
	sk_opts_free(&e->opts);
	free(e->ue.name_dir);
	free(e);
}

static void unix_sk_dump_fini(void)
{
	free(tree_sks);
	tree_sks = NULL;
	nr_tree_sks = 0;
	for (size_t i = 0; i < nr_diag_sks; i++) {
		free(diag_sks[i].icons);
		free_entry(diag_sks[i].entry);
	}
	free(diag_sks);
	diag_sks = NULL;
	nr_diag_sks = 0;
	diag_state = 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static int add_tree_socket(uint32_t ino, size_t *cap)
{
	if (nr_tree_sks == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 64;
		uint32_t *grown = realloc(tree_sks, grown_cap * sizeof(*grown));

		if (!grown) {
			pr_err("out of memory listing the sockets of the tree\n");
			return -ENOMEM;
		}
		tree_sks = grown;
		*cap = grown_cap;
	}
	tree_sks[nr_tree_sks++] = ino;
	return 0;
}

/* The sockets among the fds of task pid (frozen: the list cannot change). */
static int read_task_sockets(pid_t pid, size_t *cap)
{
	char path[64], link[64];
	size_t nr_fds;
	int *fds, ret;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	ret = list_fds(path, &fds, &nr_fds);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_fds && !ret; i++) {
		unsigned int ino;
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fds[i]);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%u]", &ino) == 1)
			ret = add_tree_socket(ino, cap);
	}
	free(fds);
	return ret;
}

static int read_tree_sockets(void)
{
	size_t cap = 0;
	int ret = 0;

	for (struct pstree_item *item = root_item; item && !ret; item = pstree_next(item))
		if (!item->zombie)
			ret = read_task_sockets(item->pid, &cap);
	if (!ret && nr_tree_sks)
		qsort(tree_sks, nr_tree_sks, sizeof(*tree_sks), cmp_u32);
	return ret;
}

static bool tree_holds(uint32_t ino)
{
	return nr_tree_sks && bsearch(&ino, tree_sks, nr_tree_sks, sizeof(*tree_sks), cmp_u32);
}

static const struct usk_diag *listener_of(uint32_t client_ino);

/*
 * A socket whose peer no task of the dump holds is left, as a file of its own, to a
 * plugin that takes files the core does not (DUMP_EXT_FILE: the AMDGPU plugin's
 * connection to its KFD emulator), when one is loaded and neither --ext-unix-sk nor a
 * plugin for Unix sockets (DUMP_UNIX_SK) says how to dump such peers. A peer only in
 * flight in some queue looks outside the tree to this test.
 */
/*
 * The RPC service's end of its client's connection (unix_sk_set_service()): a client that
 * dumps itself holds the other end, which is dumped with USK_SERVICE and comes back, as
 * CRIU's does, connected to nothing but the dump's answer (unix_sk_open()).
 */
static uint32_t service_sk_ino;

void unix_sk_set_service(uint32_t ino)
{
	service_sk_ino = ino;
}

static bool left_to_ext_plugins(const struct usk_diag *sk)
{
	const struct usk_diag *listener = listener_of(sk->ino);
	uint32_t peer = sk->peer ? sk->peer : listener ? listener->ino : 0;

	return peer && !tree_holds(peer) && !opts.ext_unix_sk &&
	       cr_plugin_has_hook(CR_PLUGIN_HOOK__DUMP_EXT_FILE) &&
	       !cr_plugin_has_hook(CR_PLUGIN_HOOK__DUMP_UNIX_SK);
}

/* A socket the table has: a Unix socket of the namespace criu reads. */
static bool unix_sk_owns(const struct fd_parms *p)
{
	const struct usk_diag *sk;

	if (!S_ISSOCK(p->st.st_mode))
		return false;
	if (!diag_state) {
		int ret = read_diag_table();

		if (!ret)
			ret = read_tree_sockets();
		diag_state = ret ? ret : 1;
	}
	sk = diag_state > 0 ? find_diag(p->st.st_ino) : NULL;
	return sk && !left_to_ext_plugins(sk);
}

static bool is_path_name(const uint8_t *name, uint32_t len)
{
	return len && name[0];
}

/*
 * The directory a relative name was bound in: the file's path (link) ends with it. Names
 * with . or .. in them do not match and are refused.
 */
static int relative_name_dir(const char *link, const char *name, UnixSkEntry *ue,
			     const char *what)
{
	size_t link_len = strlen(link), name_len = strlen(name);

	if (link_len <= name_len + 1 || link[link_len - name_len - 1] != '/' ||
	    strcmp(link + link_len - name_len, name)) {
		pr_err("%s: cannot tell which directory its relative name %s is in: its file is "
		       "%s (moved?), which is not supported\n",
		       what, name, link);
		return -ENOTSUP;
	}
	ue->name_dir = strndup(link, link_len - name_len - 1);
	if (!ue->name_dir) {
		pr_err("%s: out of memory\n", what);
		return -ENOMEM;
	}
	return 0;
}

/*
 * A path-bound socket's file, through the socket itself (SIOCUNIXFILE): it must be at the
 * path the name says, as seen from criu's root (so not under a chroot of the task's), or
 * have been removed from there (deleted: restore binds it there and removes it again).
 */
static int dump_path_name(int lfd, const struct usk_diag *sk, UnixSkEntry *ue,
			  FilePermsEntry *perms, const char *what)
{
	char name[UNIX_NAME_MAX + 1], link[PATH_MAX], proc[64];
	int ofd = ioctl(lfd, SIOCUNIXFILE), ret = 0;
	struct stat st;
	ssize_t len;

	memcpy(name, sk->name, sk->namelen);
	name[sk->namelen] = '\0';
	if (ofd < 0) {
		pr_perror("%s: cannot open the file of %s (SIOCUNIXFILE)", what, name);
		return -errno;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ofd);
	len = readlink(proc, link, sizeof(link) - 1);
	if (len < 0 || fstat(ofd, &st)) {
		ret = -errno;
		pr_perror("%s: cannot read the file of %s", what, name);
		goto out;
	}
	link[len] = '\0';
	ret = mntns_file_mnt_id(proc, &ue->mnt_id);
	if (ret)
		goto out;
	ue->has_mnt_id = ue->mnt_id >= 0;
	if (st.st_nlink == 0) {
		/* The kernel marks the link of a removed file so. */
		if ((size_t)len > strlen(DELETED_MARK) &&
		    !strcmp(link + len - strlen(DELETED_MARK), DELETED_MARK))
			link[len - strlen(DELETED_MARK)] = '\0';
		ue->has_deleted = ue->deleted = true;
	}
	if (name[0] == '/' && strcmp(link, name)) {
		pr_err("%s: bound to %s, whose file is now %s (moved, or under a chroot), which "
		       "is not supported\n",
		       what, name, link);
		ret = -ENOTSUP;
	} else if (name[0] != '/') {
		ret = relative_name_dir(link, name, ue, what);
	}
	perms->mode = st.st_mode;
	if (!ret)
		ret = userns_tree_owner(st.st_uid, st.st_gid, &perms->uid, &perms->gid, what);
	ue->file_perms = perms;
out:
	close(ofd);
	return ret;
}

static const struct usk_diag *listener_of(uint32_t client_ino)
{
	for (size_t i = 0; i < nr_diag_sks; i++) {
		const struct usk_diag *sk = &diag_sks[i];

		for (uint32_t k = 0; sk->state == TCP_LISTEN && k < sk->nr_icons; k++)
			if (sk->icons[k] == client_ino)
				return sk;
	}
	return NULL;
}

/*
 * The peer the image names. A connection not accepted yet has a peer without an inode
 * (the server's end exists only in the listening socket's queue): the image names the
 * listening socket, as CRIU's do, and restore connects to it again. What such a client
 * sent is queued on that server end, out of reach: refused.
 */
static int image_peer(const struct usk_diag *sk, uint32_t *peer, const char *what)
{
	const struct usk_diag *listener;

	*peer = sk->peer;
	if (sk->peer || sk->state != TCP_ESTABLISHED || !is_connection_type(sk->type))
		return 0;
	listener = listener_of(sk->ino);
	if (listener && sk->wqlen) {
		pr_err("%s: a connection not accepted yet with %u bytes sent on it, which is not "
		       "supported\n",
		       what, sk->wqlen);
		return -ENOTSUP;
	}
	if (listener) {
		*peer = listener->ino;
		return 0;
	}
	/* A closed peer shuts its survivor down both ways. */
	if (sk->shutdown != SK_SHUTDOWN__BOTH) {
		pr_err("%s: connected, without a peer, and not shut down: not supported\n", what);
		return -ENOTSUP;
	}
	return 0;
}

static int check_dumpable(const struct fd_parms *p, const struct usk_diag *sk, const char *what)
{
	if (sk->type != SOCK_STREAM && sk->type != SOCK_DGRAM && sk->type != SOCK_SEQPACKET) {
		pr_err("%s: socket type %u is not supported\n", what, sk->type);
		return -ENOTSUP;
	}
	if (sk->state != TCP_ESTABLISHED && sk->state != TCP_CLOSE && sk->state != TCP_LISTEN) {
		pr_err("%s: state %u is not supported\n", what, sk->state);
		return -ENOTSUP;
	}
	if (p->flags & O_ASYNC) {
		pr_err("%s has O_ASYNC set, which is not supported\n", what);
		return -ENOTSUP;
	}
	for (uint32_t k = 0; sk->state == TCP_LISTEN && k < sk->nr_icons; k++) {
		if (!sk->icons[k]) {
			pr_err("%s: a connection waiting to be accepted was closed by its client, "
			       "which is not supported\n",
			       what);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Listening sockets queue connections, not data; an unconnected stream has no queue. */
static bool has_queue(const struct usk_diag *sk)
{
	return sk->type == SOCK_DGRAM || sk->state == TCP_ESTABLISHED;
}

static void fill_unix_entry(const struct fd_parms *p, struct usk_diag *sk, uint32_t id,
			    struct usk_entry *e)
{
	UnixSkEntry *ue = &e->ue;

	ue->id = id;
	ue->ino = sk->ino;
	ue->type = sk->type;
	ue->state = sk->state;
	ue->flags = p->flags;
	/* As CRIU writes it: listen()'s backlog, or the bytes sent and not read yet. */
	ue->backlog = sk->wqlen;
	ue->peer = sk->img_peer;
	ue->fown = &e->fown;
	ue->opts = &e->opts;
	ue->name.len = sk->namelen;
	ue->name.data = sk->name;
	ue->shutdown = sk->shutdown;
	ue->has_shutdown = sk->shutdown != SK_SHUTDOWN__NONE;
	/* Where tasks live in nested net namespaces, a socket may be another's than its task's. */
	ue->has_ns_id = net_has_nested();
	ue->ns_id = sk->ns_id;
}

static struct usk_entry *new_entry(const char *what)
{
	struct usk_entry *e = calloc(1, sizeof(*e));

	if (!e) {
		pr_err("%s: out of memory\n", what);
		return NULL;
	}
	unix_sk_entry__init(&e->ue);
	sk_opts_entry__init(&e->opts);
	file_perms_entry__init(&e->perms);
	fown_entry__init(&e->fown);
	e->lfd = -1;
	return e;
}

/* The entry waits in sk->entry until every fd is dumped (unix_sk_dump_check()). */
static int unix_sk_dump(const struct fd_parms *p, uint32_t id)
{
	struct usk_diag *sk = find_diag(p->st.st_ino);
	struct usk_entry *e;
	char what[96];
	int ret;

	snprintf(what, sizeof(what), "fd %d of task %d (unix socket %u)", p->fd, p->pid, sk->ino);
	ret = check_dumpable(p, sk, what);
	if (!ret)
		ret = image_peer(sk, &sk->img_peer, what);
	if (ret)
		return ret;
	e = new_entry(what);
	if (!e)
		return -ENOMEM;
	e->lfd = ret = grab_task_fd(p);
	if (ret >= 0 && is_path_name(sk->name, sk->namelen))
		ret = dump_path_name(e->lfd, sk, &e->ue, &e->perms, what);
	if (ret >= 0)
		ret = sk_opts_dump(e->lfd, &e->opts, what);
	if (ret >= 0)
		ret = dump_fown(p, &e->fown);
	if (ret >= 0 && has_queue(sk))
		ret = e->nr_packets = sk_queue_dump(e->lfd, id, sk->type, what);
	if (ret < 0) {
		free_entry(e);
		return ret;
	}
	fill_unix_entry(p, sk, id, e);
	sk->entry = e;
	sk->id = id;
	sk->pid = p->pid;
	sk->fd = p->fd;
	return 0;
}

/* What stands in the images for a datagram socket outside the tree: its name. */
static int write_extern_entry(struct usk_diag *peer)
{
	UnixSkEntry ue = UNIX_SK_ENTRY__INIT;
	SkOptsEntry opts = SK_OPTS_ENTRY__INIT;
	FownEntry fown = FOWN_ENTRY__INIT;
	FileEntry fe = FILE_ENTRY__INIT;

	peer->extern_id = files_new_id();
	/* As CRIU writes it: a listening datagram socket. */
	ue.id = peer->extern_id;
	ue.ino = peer->ino;
	ue.type = SOCK_DGRAM;
	ue.state = TCP_LISTEN;
	ue.uflags = USK_EXTERN;
	ue.fown = &fown;
	ue.opts = &opts;
	ue.name.len = peer->namelen;
	ue.name.data = peer->name;
	fe.type = FD_TYPES__UNIXSK;
	fe.id = ue.id;
	fe.usk = &ue;
	pr_info("unix socket %u, outside the tree, is file %u\n", peer->ino, ue.id);
	return write_file_entry(&fe);
}

/*
 * A peer outside the tree: a plugin may take the socket (DUMP_UNIX_SK, as CRIU calls it,
 * with the socket's inode) and restore it (RESTORE_UNIX_SK); or, with --ext-unix-sk, a
 * datagram socket connected to a bound one connects to it again by its name, as CRIU
 * does. Anything else is refused.
 */
static int external_peer(struct usk_diag *sk, struct usk_diag *peer)
{
	struct usk_entry *e = sk->entry;
	int ret = run_plugins(DUMP_UNIX_SK, e->lfd, sk->ino);
	const char *why = NULL;

	if (ret == 0 && e->nr_packets)
		why = "its queue is not empty, and the plugin that took it does not restore it";
	else if (ret == 0)
		e->ue.uflags |= USK_CALLBACK;
	if (ret != -ENOTSUP)
		goto out;
	if (!opts.ext_unix_sk)
		why = "which is not supported (but for a bound datagram peer, with "
		      "--ext-unix-sk)";
	else if (!peer || peer->type != SOCK_DGRAM || sk->type != SOCK_DGRAM)
		why = "and --ext-unix-sk covers datagram sockets only";
	else if (!peer->namelen)
		why = "and has no name to connect to again";
	else if (peer->name[0] && peer->name[0] != '/')
		why = "and has a relative name, which --ext-unix-sk does not cover";
	else if (!peer->extern_id)
		ret = write_extern_entry(peer);
	else
		ret = 0;
out:
	if (why) {
		pr_err("fd %d of task %d (unix socket %u): its peer, socket %u, is outside the "
		       "dumped tree, %s\n",
		       sk->fd, sk->pid, sk->ino, sk->img_peer, why);
		return -ENOTSUP;
	}
	return ret;
}

/*
 * Once every fd is dumped: a socket's peer, and the clients waiting on a listening
 * socket, must be dumped sockets too (or restore would connect to nothing; but see
 * external_peer()); a datagram socket connected to one that is not connected back needs
 * its name to connect to.
 */
static int check_dumped_peers(struct usk_diag *sk)
{
	struct usk_diag *peer = find_diag(sk->img_peer);

	if (service_sk_ino && sk->img_peer == service_sk_ino) {
		if (sk->entry->nr_packets) {
			pr_err("fd %d of task %d (unix socket %u): connected to criu's service, "
			       "with data queued, which is not supported\n",
			       sk->fd, sk->pid, sk->ino);
			return -ENOTSUP;
		}
		sk->entry->ue.uflags |= USK_SERVICE;
		return 0;
	}
	if (sk->img_peer && (!peer || !peer->id))
		return external_peer(sk, peer);
	if (peer && peer != sk && peer->img_peer != sk->ino && peer->state != TCP_LISTEN &&
	    !peer->namelen) {
		pr_err("fd %d of task %d (unix socket %u): connected to socket %u, which has no "
		       "name to connect to again, which is not supported\n",
		       sk->fd, sk->pid, sk->ino, peer->ino);
		return -ENOTSUP;
	}
	for (uint32_t k = 0; sk->state == TCP_LISTEN && k < sk->nr_icons; k++) {
		const struct usk_diag *client = find_diag(sk->icons[k]);

		if (!client || !client->id) {
			pr_err("fd %d of task %d (unix socket %u): a connection from socket %u, "
			       "outside the dumped tree, waits to be accepted, which is not "
			       "supported\n",
			       sk->fd, sk->pid, sk->ino, sk->icons[k]);
			return -ENOTSUP;
		}
	}
	return 0;
}

static int write_waiting_entry(struct usk_diag *sk)
{
	FileEntry fe = FILE_ENTRY__INIT;
	int ret = check_dumped_peers(sk);

	fe.type = FD_TYPES__UNIXSK;
	fe.id = sk->id;
	fe.usk = &sk->entry->ue;
	if (!ret)
		ret = write_file_entry(&fe);
	free_entry(sk->entry);
	sk->entry = NULL;
	return ret;
}

static int unix_sk_dump_check(void)
{
	for (size_t i = 0; i < nr_diag_sks; i++) {
		int ret = diag_sks[i].entry ? write_waiting_entry(&diag_sks[i]) : 0;

		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------- restore ---- */

/* One socket of the images, as collect() decoded it. */
struct unix_sk {
	uint32_t id;
	const UnixSkEntry *ue;
	struct unix_sk *peer; /* resolved ue->peer; NULL: none */
	/*
	 * A connection end bound to a listening socket's name: the server end of a connection
	 * that listening socket accepted, made again by connecting to it and accepting.
	 */
	const struct unix_sk *via;
	char what[64];
};

/* Every socket collected; the entries themselves are the file table's (d->kind). */
static struct unix_sk **usks;
static size_t nr_usks;

static bool is_listening(const struct unix_sk *sk)
{
	return sk->ue->state == TCP_LISTEN;
}

/* Made together with its peer: a socketpair, or both ends of a connection. */
static bool is_pair(const struct unix_sk *sk)
{
	return sk->peer && sk->peer != sk && sk->peer->peer == sk;
}

/* A client whose connection waits in a listening socket's queue. */
static bool is_pending(const struct unix_sk *sk)
{
	return is_connection_type(sk->ue->type) && sk->peer && is_listening(sk->peer);
}

/* An entry standing for a socket outside the tree, connected to by name (--ext-unix-sk). */
static bool is_extern(const struct unix_sk *sk)
{
	return sk->ue->uflags & USK_EXTERN;
}

/* The client's end of a connection to criu's RPC service (its peer is not in the images). */
static bool to_service(const struct unix_sk *sk)
{
	return sk->ue->uflags & USK_SERVICE;
}

/* A socket a plugin dumped (DUMP_UNIX_SK) and restores (RESTORE_UNIX_SK). */
static bool by_plugin(const struct unix_sk *sk)
{
	return sk->ue->uflags & USK_CALLBACK;
}

static const char *uflag_name(uint32_t uflags)
{
	if (uflags & USK_INHERIT)
		return "was given by --inherit-fd";
	return "has unknown flags";
}

/* As CRIU writes it: a bound datagram socket, "listening", without a peer. */
static int check_extern(const UnixSkEntry *ue, const char *what)
{
	if (!opts.ext_unix_sk) {
		pr_err("%s stands for a socket outside the dumped tree: restore with "
		       "--ext-unix-sk to connect to it again\n",
		       what);
		return -ENOTSUP;
	}
	if (ue->type != SOCK_DGRAM || ue->peer || !ue->name.len ||
	    (ue->name.data[0] && ue->name.data[0] != '/')) {
		pr_err("%s stands for a socket outside the dumped tree, but is not a datagram "
		       "socket with an absolute or abstract name and no peer\n",
		       what);
		return -EINVAL;
	}
	return 0;
}

static int check_name(const UnixSkEntry *ue, const char *what)
{
	bool path = is_path_name(ue->name.data, ue->name.len);

	if (ue->name.len > UNIX_NAME_MAX) {
		pr_err("%s: a %zu-byte name does not fit a socket address\n", what, ue->name.len);
		return -EINVAL;
	}
	if (path && ue->name.data[0] != '/' && (!ue->name_dir || ue->name_dir[0] != '/')) {
		pr_err("%s: a relative name without the absolute directory it is in\n", what);
		return -EINVAL;
	}
	if (ue->name_dir && (!path || ue->name.data[0] == '/')) {
		pr_err("%s: a name directory for a name that is not a relative path\n", what);
		return -EINVAL;
	}
	if (ue->file_perms && !path) {
		pr_err("%s: file permissions for a socket not bound to a path\n", what);
		return -EINVAL;
	}
	if (ue->has_deleted && ue->deleted && !path) {
		pr_err("%s: a deleted file for a socket not bound to a path\n", what);
		return -EINVAL;
	}
	/* Bound in the tree's mount namespace: the path is the same in the restored one. */
	if (ue->has_mnt_id && ue->mnt_id >= 0 && !mntns_restored()) {
		pr_err("%s: bound on mount %d of a mount namespace, which is not supported\n", what,
		       ue->mnt_id);
		return -ENOTSUP;
	}
	return 0;
}

static int check_kind_and_state(const UnixSkEntry *ue, const char *what)
{
	if (ue->uflags & ~(USK_EXTERN | USK_CALLBACK | USK_SERVICE) ||
	    __builtin_popcount(ue->uflags) > 1) {
		pr_err("%s %s, which is not supported\n", what,
		       uflag_name(ue->uflags & ~(USK_EXTERN | USK_CALLBACK | USK_SERVICE)));
		return -ENOTSUP;
	}
	if (ue->uflags & USK_SERVICE &&
	    (ue->type != SOCK_SEQPACKET || ue->state != TCP_ESTABLISHED)) {
		pr_err("%s was connected to criu's service, but is no connected seqpacket socket\n",
		       what);
		return -EINVAL;
	}
	if (ue->uflags & USK_EXTERN)
		return check_extern(ue, what);
	if (ue->type != SOCK_STREAM && ue->type != SOCK_DGRAM && ue->type != SOCK_SEQPACKET) {
		pr_err("%s: socket type %u is not supported\n", what, ue->type);
		return -ENOTSUP;
	}
	if (ue->state != TCP_ESTABLISHED && ue->state != TCP_CLOSE &&
	    !(ue->state == TCP_LISTEN && is_connection_type(ue->type))) {
		pr_err("%s: state %u is not one a socket of type %u has\n", what, ue->state,
		       ue->type);
		return -EINVAL;
	}
	if (ue->state == TCP_LISTEN && !ue->name.len) {
		pr_err("%s: listening without a name\n", what);
		return -EINVAL;
	}
	if (ue->has_shutdown && ue->shutdown > SK_SHUTDOWN__BOTH) {
		pr_err("%s: shutdown %d is not one of none, read, write, both\n", what,
		       ue->shutdown);
		return -EINVAL;
	}
	if (ue->flags & O_ASYNC) {
		pr_err("%s has O_ASYNC set, which is not supported\n", what);
		return -ENOTSUP;
	}
	return 0;
}

static int add_usk(struct unix_sk *sk)
{
	struct unix_sk **grown = realloc(usks, (nr_usks + 1) * sizeof(*grown));

	if (!grown) {
		pr_err("%s: out of memory\n", sk->what);
		return -ENOMEM;
	}
	usks = grown;
	usks[nr_usks++] = sk;
	return 0;
}

static int unix_sk_collect(struct file_desc *d)
{
	const UnixSkEntry *ue = d->fe->usk;
	struct unix_sk *sk;
	int ret;

	if (!ue || ue->id != d->id || !ue->ino) {
		pr_err("files.img: file %u has type UNIXSK but no unix_sk_entry of its own\n",
		       d->id);
		return -EINVAL;
	}
	sk = calloc(1, sizeof(*sk));
	if (!sk) {
		pr_err("files.img: out of memory collecting file %u\n", d->id);
		return -ENOMEM;
	}
	d->kind = sk;
	sk->id = d->id;
	sk->ue = ue;
	snprintf(sk->what, sizeof(sk->what), "unix socket %u (file %u)", ue->ino, d->id);
	ret = check_kind_and_state(ue, sk->what);
	if (!ret)
		ret = check_name(ue, sk->what);
	if (!ret)
		ret = sk_opts_check(ue->opts, sk->what);
	if (!ret)
		ret = collect_owner(d, ue->fown);
	return ret ? ret : add_usk(sk);
}

static struct unix_sk *find_usk_by_ino(uint32_t ino)
{
	for (size_t i = 0; i < nr_usks; i++)
		if (usks[i]->ue->ino == ino)
			return usks[i];
	return NULL;
}

static bool is_unix_sk_id(uint32_t id)
{
	for (size_t i = 0; i < nr_usks; i++)
		if (usks[i]->id == id)
			return true;
	return false;
}

static bool same_name(const UnixSkEntry *a, const UnixSkEntry *b)
{
	return a->name.len == b->name.len && !memcmp(a->name.data, b->name.data, a->name.len) &&
	       !strcmp(a->name_dir ? a->name_dir : "", b->name_dir ? b->name_dir : "");
}

/* The listening socket of the images whose name an established connection end has. */
static const struct unix_sk *listener_named_as(const struct unix_sk *sk)
{
	if (!is_connection_type(sk->ue->type) || sk->ue->state != TCP_ESTABLISHED ||
	    !sk->ue->name.len || is_pending(sk))
		return NULL;
	for (size_t i = 0; i < nr_usks; i++)
		if (is_listening(usks[i]) && usks[i]->ue->type == sk->ue->type &&
		    same_name(usks[i]->ue, sk->ue))
			return usks[i];
	return NULL;
}

static int check_connection(const struct unix_sk *sk)
{
	const UnixSkEntry *ue = sk->ue;

	if (ue->state != TCP_ESTABLISHED && sk->peer) {
		pr_err("%s: not connected, yet it has peer %u\n", sk->what, ue->peer);
		return -EINVAL;
	}
	if (ue->state != TCP_ESTABLISHED)
		return 0;
	if (!sk->peer && (!ue->has_shutdown || ue->shutdown != SK_SHUTDOWN__BOTH)) {
		pr_err("%s: connected without a peer and not shut down\n", sk->what);
		return -EINVAL;
	}
	if (sk->peer && !is_pair(sk) && !is_pending(sk)) {
		pr_err("%s: its peer, %s, is not connected to it\n", sk->what, sk->peer->what);
		return -EINVAL;
	}
	return 0;
}

/*
 * A datagram socket connects to its peer by name again, unless the two are connected
 * to each other (a socketpair) and made together.
 */
static int check_datagram_peer(const struct unix_sk *sk)
{
	const struct unix_sk *peer = sk->peer;

	if (!peer || is_pair(sk) || is_extern(peer))
		return 0;
	if (!peer->ue->name.len) {
		pr_err("%s: connected to %s, which has no name to connect to\n", sk->what,
		       peer->what);
		return -EINVAL;
	}
	if (peer != sk && peer->ue->state == TCP_LISTEN) {
		pr_err("%s: connected to %s, which listens\n", sk->what, peer->what);
		return -EINVAL;
	}
	return 0;
}

/* Listening sockets and connections not accepted yet have no queue of data. */
static int check_queue_owner(const struct unix_sk *sk)
{
	bool may_queue = !by_plugin(sk) && !is_extern(sk) && !to_service(sk) &&
			 (sk->ue->type == SOCK_DGRAM ||
			  (sk->ue->state == TCP_ESTABLISHED && !is_pending(sk)));

	if (!may_queue && sk_queue_packets(sk->id)) {
		pr_err("sk-queues.img: data queued for %s, which cannot have any\n", sk->what);
		return -EINVAL;
	}
	return 0;
}

static int resolve_peer(struct unix_sk *sk)
{
	uint32_t peer_ino = sk->ue->peer;

	/* A plugin's socket names its peer outside the tree, as the service's client does. */
	if (!peer_ino || by_plugin(sk) || to_service(sk))
		return 0;
	sk->peer = find_usk_by_ino(peer_ino);
	if (!sk->peer) {
		pr_err("%s: its peer, socket %u, is not in the images (external peers are not "
		       "supported)\n",
		       sk->what, peer_ino);
		return -ENOTSUP;
	}
	if (sk->peer->ue->type != sk->ue->type) {
		pr_err("%s: its peer, %s, is of another type\n", sk->what, sk->peer->what);
		return -EINVAL;
	}
	return 0;
}

static int check_unique_inos(void)
{
	for (size_t i = 0; i < nr_usks; i++) {
		if (find_usk_by_ino(usks[i]->ue->ino) != usks[i]) {
			pr_err("files.img: %s and another socket have the same inode\n",
			       usks[i]->what);
			return -EINVAL;
		}
	}
	return 0;
}

/* Peers by inode, then what each socket's state needs of them, then the queues. */
static int unix_sk_collect_done(void)
{
	int ret = check_unique_inos();

	for (size_t i = 0; i < nr_usks && !ret; i++)
		ret = resolve_peer(usks[i]);
	for (size_t i = 0; i < nr_usks && !ret; i++) {
		struct unix_sk *sk = usks[i];

		if (by_plugin(sk) || is_extern(sk) || to_service(sk))
			ret = 0;
		else if (sk->ue->type == SOCK_DGRAM)
			ret = check_datagram_peer(sk);
		else
			ret = check_connection(sk);
		if (!ret)
			ret = check_queue_owner(sk);
		sk->via = listener_named_as(sk);
	}
	return ret ? ret : sk_queue_check_owners(is_unix_sk_id);
}

static int unix_sk_collect_images(void)
{
	return sk_queue_collect();
}

static void unix_sk_collect_fini(void)
{
	free(usks);
	usks = NULL;
	nr_usks = 0;
	sk_queue_fini();
}

/* The two ends of a connection, or of a socketpair, are one object. */
static uint64_t unix_sk_object_key(const struct file_desc *d)
{
	const struct unix_sk *sk = d->kind;

	if (!is_pair(sk))
		return 0;
	return sk->ue->ino < sk->peer->ue->ino ? sk->ue->ino : sk->peer->ue->ino;
}

/* The listening socket an end of sk's connection is made through, or NULL. */
static const struct unix_sk *connection_listener(const struct unix_sk *sk)
{
	if (sk->via)
		return sk->via;
	return is_pair(sk) ? sk->peer->via : NULL;
}

static size_t add_dep(uint32_t *ids, size_t max, size_t nr, uint32_t id)
{
	if (nr < max)
		ids[nr] = id;
	return nr + 1;
}

/* The sockets sk's open() connects to, or through. */
static size_t connection_deps(const struct unix_sk *sk, uint32_t *ids, size_t max)
{
	const struct unix_sk *listener = connection_listener(sk);
	size_t nr = 0;

	if (listener)
		return add_dep(ids, max, nr, listener->id);
	if (is_pending(sk)) {
		nr = add_dep(ids, max, nr, sk->peer->id);
		for (size_t i = 0; i < nr_usks; i++)
			if (usks[i]->via == sk->peer)
				nr = add_dep(ids, max, nr, usks[i]->id);
		return nr;
	}
	if (sk->ue->type == SOCK_DGRAM && sk->peer && sk->peer != sk && !is_pair(sk) &&
	    !is_extern(sk->peer))
		return add_dep(ids, max, nr, sk->peer->id);
	return 0;
}

/* Made by the same open() as sk: itself, and its peer when the two are made together. */
static bool made_with(const struct unix_sk *sk, uint32_t id)
{
	return id == sk->id || (is_pair(sk) && id == sk->peer->id);
}

/* The files in flight in the queue of owner that sk's open() fills, but those it makes. */
static size_t rights_deps(const struct unix_sk *sk, uint32_t owner, uint32_t *ids, size_t max,
			  size_t nr)
{
	uint32_t right;

	for (size_t i = 0; sk_queue_right(owner, i, &right); i++)
		if (!made_with(sk, right))
			nr = add_dep(ids, max, nr, right);
	return nr;
}

/*
 * What must be open before sk's open(): the socket it connects to, the listening socket
 * its connection is made through, the files in flight in the queues it fills (its own,
 * and its peer's when the two are made together). A client waiting to be accepted
 * connects after the connections its listening socket accepted were made again (they
 * depend on it), so that each accept() takes the connection just made, and it stays in
 * the queue.
 */
static size_t unix_sk_deps(const struct file_desc *d, uint32_t *ids, size_t max)
{
	const struct unix_sk *sk = d->kind;
	size_t nr = rights_deps(sk, sk->id, ids, max, connection_deps(sk, ids, max));

	return is_pair(sk) ? rights_deps(sk, sk->peer->id, ids, max, nr) : nr;
}

/*
 * A socket's address. A relative path name is bound from the directory it was relative
 * to: enter_name_dir() goes there, leave_name_dir() back.
 */
static socklen_t sk_address(const struct unix_sk *sk, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path, sk->ue->name.data, sk->ue->name.len);
	return offsetof(struct sockaddr_un, sun_path) + sk->ue->name.len;
}

/*
 * The directory is entered in a copy of the mount the socket's file was on where another
 * mount covers the name's directory since (the name then reaches the covered one; the
 * socket holds the copy).
 */
static int enter_name_dir(const struct unix_sk *sk, int *saved_cwd)
{
	char name[UNIX_NAME_MAX + 1];
	int uncovered = -ENOENT, ret;

	*saved_cwd = -1;
	if (!sk->ue->name_dir)
		return 0;
	*saved_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*saved_cwd < 0) {
		pr_perror("%s: cannot open the current directory", sk->what);
		return -errno;
	}
	if (sk->ue->has_mnt_id && is_path_name(sk->ue->name.data, sk->ue->name.len) &&
	    sk->ue->name.data[0] != '/') {
		memcpy(name, sk->ue->name.data, sk->ue->name.len);
		name[sk->ue->name.len] = '\0';
		uncovered = mntns_uncovered_dir(sk->ue->mnt_id, sk->ue->name_dir, name);
	}
	if (uncovered >= 0) {
		ret = fchdir(uncovered) ? -errno : 0;
		close(uncovered);
	} else {
		ret = uncovered != -ENOENT ? uncovered : chdir(sk->ue->name_dir) ? -errno : 0;
	}
	if (ret) {
		if (uncovered >= 0 || uncovered == -ENOENT)
			pr_err("%s: cannot enter %s, where its name is: %s\n", sk->what,
			       sk->ue->name_dir, strerror(-ret));
		close(*saved_cwd);
		return ret;
	}
	return 0;
}

static int leave_name_dir(const struct unix_sk *sk, int saved_cwd)
{
	int ret = 0;

	if (saved_cwd < 0)
		return 0;
	if (fchdir(saved_cwd)) {
		ret = -errno;
		pr_perror("%s: cannot go back to the directory it left", sk->what);
	}
	close(saved_cwd);
	return ret;
}

/*
 * A file left at the path by the dumped socket (sockets do not remove theirs) would make
 * bind() fail: it goes if it is a socket; anything else there is not ours to remove.
 */
static int remove_stale_file(const struct unix_sk *sk, const char *path)
{
	struct stat st;

	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		pr_perror("%s: cannot look at %s", sk->what, path);
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		pr_err("%s: %s exists and is not a socket\n", sk->what, path);
		return -EEXIST;
	}
	if (unlink(path)) {
		pr_perror("%s: cannot remove the old socket file %s", sk->what, path);
		return -errno;
	}
	return 0;
}

static int restore_file_perms(const struct unix_sk *sk, const char *path)
{
	const FilePermsEntry *perms = sk->ue->file_perms;
	int ret;

	if (!perms)
		return 0;
	/* Owner first: chown() clears the set-id bits chmod() sets. */
	ret = userns_chown_path(path, perms->uid, perms->gid);
	if (ret)
		return ret;
	if (fchmodat(AT_FDCWD, path, perms->mode & 07777, 0)) {
		pr_perror("%s: cannot give %s its mode %#o", sk->what, path, perms->mode & 07777);
		return -errno;
	}
	return 0;
}

struct bind_req {
	int fd;
	struct sockaddr_un addr;
	socklen_t len;
};

static int bind_as_owner(void *arg)
{
	const struct bind_req *req = arg;

	return bind(req->fd, (const struct sockaddr *)&req->addr, req->len) ? -errno : 0;
}

/* A bound name's file is made by its owner where known, else by the namespace's root. */
static int bind_to_name(int fd, const struct unix_sk *sk, const char *path)
{
	const FilePermsEntry *perms = sk->ue->file_perms;
	struct bind_req req = { .fd = fd };
	uint32_t host;
	int ret;

	/* An owner the tree's namespace does not map can own nothing there. */
	if (perms && path[0] && (userns_host_uid(perms->uid, &host, sk->what) ||
				 userns_host_gid(perms->gid, &host, sk->what)))
		return -EOVERFLOW;
	req.len = sk_address(sk, &req.addr);
	ret = path[0] ? make_as_tree_owner(bind_as_owner, &req, perms ? perms->uid : 0,
					   perms ? perms->gid : 0) :
			bind_as_owner(&req);
	if (ret) {
		pr_err("%s: cannot bind it to %s%s: %s\n", sk->what, path[0] ? "" : "@",
		       path[0] ? path : (const char *)sk->ue->name.data + 1, strerror(-ret));
		return ret;
	}
	return path[0] ? restore_file_perms(sk, path) : 0;
}

/* path without its last `levels` components. */
static void path_up(const char *path, int levels, char *dir)
{
	strcpy(dir, path);
	for (int i = 0; i < levels; i++)
		*strrchr(dir, '/') = '\0';
}

static int mkdir_for_name(void *dir)
{
	return mkdir(dir, 0755) ? -errno : 0;
}

/*
 * The directories of path that do not exist, made top down; *made: how many. Made by the
 * socket file's owner: it is bound in them as that owner (bind_to_name()).
 */
static int make_missing_dirs(const struct unix_sk *sk, const char *path, int *made)
{
	const FilePermsEntry *perms = sk->ue->file_perms;
	char dir[UNIX_NAME_MAX + 1];
	int missing = 0, ret;
	struct stat st;
	char *slash;

	*made = 0;
	strcpy(dir, path);
	while ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		if (!stat(dir, &st))
			break;
		if (errno != ENOENT) {
			pr_perror("%s: cannot look at %s", sk->what, dir);
			return -errno;
		}
		missing++;
	}
	for (; missing; missing--, (*made)++) {
		path_up(path, missing, dir);
		ret = make_as_tree_owner(mkdir_for_name, dir, perms ? perms->uid : 0,
					 perms ? perms->gid : 0);
		if (ret) {
			pr_err("%s: cannot make %s for the while it is bound: %s\n", sk->what, dir,
			       strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int remove_made_dirs(const struct unix_sk *sk, const char *path, int made)
{
	char dir[UNIX_NAME_MAX + 1];

	for (int levels = 1; levels <= made; levels++) {
		path_up(path, levels, dir);
		if (rmdir(dir)) {
			pr_perror("%s: cannot remove %s again", sk->what, dir);
			return -errno;
		}
	}
	return 0;
}

/*
 * A socket whose file was removed after bind(): bound at its name again, its file then
 * removed, as at dump. What is at the path now (another file, a socket bound there since)
 * is moved aside meanwhile, and directories that are gone are made and removed again.
 * Sockets reach it through its file (connect_sk()), not by name. Tasks restore their fds
 * at the same time: two that bind removed sockets at one path could meet.
 */
static int bind_removed(int fd, const struct unix_sk *sk, const char *path)
{
	char aside[UNIX_NAME_MAX + 32];
	bool moved = false;
	struct stat st;
	int made, ret = make_missing_dirs(sk, path, &made);

	snprintf(aside, sizeof(aside), "%s.criu-ghost-%u", path, sk->ue->ino);
	if (!ret && !lstat(path, &st)) {
		moved = !rename(path, aside);
		if (!moved) {
			ret = -errno;
			pr_perror("%s: cannot move %s aside", sk->what, path);
		}
	}
	if (!ret)
		ret = bind_to_name(fd, sk, path);
	if (!ret && unlink(path)) {
		ret = -errno;
		pr_perror("%s: cannot remove %s again", sk->what, path);
	}
	if (moved && rename(aside, path) && !ret) {
		ret = -errno;
		pr_perror("%s: cannot move %s back to %s", sk->what, aside, path);
	}
	return remove_made_dirs(sk, path, made) ?: ret;
}

static int bind_in_dir(int fd, const struct unix_sk *sk)
{
	char path[UNIX_NAME_MAX + 1] = "";
	int ret;

	if (!is_path_name(sk->ue->name.data, sk->ue->name.len))
		return bind_to_name(fd, sk, path);
	memcpy(path, sk->ue->name.data, sk->ue->name.len);
	if (sk->ue->has_deleted && sk->ue->deleted)
		return bind_removed(fd, sk, path);
	ret = remove_stale_file(sk, path);
	return ret ?: bind_to_name(fd, sk, path);
}

static int bind_sk(int fd, const struct unix_sk *sk)
{
	int saved_cwd, ret;

	if (!sk->ue->name.len)
		return 0;
	ret = enter_name_dir(sk, &saved_cwd);
	if (ret)
		return ret;
	ret = bind_in_dir(fd, sk);
	return leave_name_dir(sk, saved_cwd) ?: ret;
}

struct connect_to {
	int fd;
	struct sockaddr_un *addr;
};

/* connect() to a path of proc: relative where the tasks' proc is a service fd (cwd). */
static int connect_proc_path(const char *path, void *arg)
{
	struct connect_to *to = arg;
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 +
			snprintf(to->addr->sun_path, sizeof(to->addr->sun_path), "%s", path);

	return connect(to->fd, (struct sockaddr *)to->addr, len);
}

/*
 * Connect fd (of socket who) to target, bound and open at target_fd: by its abstract name,
 * or through its file, which reaches it wherever that file is now, even removed (by its
 * fd's proc link: the task's mount namespace need have no /proc, so through PROC_SFD). A
 * socket outside the tree, not opened, is reached by its name.
 */
static int connect_sk(int fd, const struct unix_sk *target, int target_fd, const char *who)
{
	struct sockaddr_un addr;
	socklen_t len = sk_address(target, &addr);
	struct connect_to to = { fd, &addr };
	char path[32];
	int file_fd = -1, ret = 0, err;

	if (target_fd < 0 && !is_extern(target))
		return target_fd;
	if (is_path_name(target->ue->name.data, target->ue->name.len) && !is_extern(target)) {
		file_fd = ioctl(target_fd, SIOCUNIXFILE);
		if (file_fd < 0) {
			pr_perror("%s: cannot open the file of %s (SIOCUNIXFILE)", who,
				  target->what);
			return -errno;
		}
		snprintf(path, sizeof(path), "self/fd/%d", file_fd);
		err = proc_path_call(path, connect_proc_path, &to);
	} else {
		err = connect(fd, (struct sockaddr *)&addr, len);
	}
	if (err) {
		ret = -errno;
		pr_perror("%s: cannot connect to %s", who, target->what);
	}
	if (file_fd >= 0)
		close(file_fd);
	return ret;
}

/*
 * A socket lives in the net namespace it was made in, which need not be its task's
 * (ns_id, where the tree has nested ones): made there, the task back in its own after.
 */
static int new_socket(const struct unix_sk *sk)
{
	uint32_t own = netns_current();
	int fd, ret = netns_enter(sk->ue->has_ns_id ? sk->ue->ns_id : 0);

	if (ret)
		return ret;
	fd = socket(AF_UNIX, sk->ue->type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		pr_perror("%s: cannot create it", sk->what);
	ret = fd < 0 ? -errno : fd;
	if (netns_enter(own)) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	return ret;
}

static int new_socketpair(const struct unix_sk *sk, int fds[2])
{
	uint32_t own = netns_current();
	int ret = netns_enter(sk->ue->has_ns_id ? sk->ue->ns_id : 0);

	if (ret)
		return ret;
	if (socketpair(AF_UNIX, sk->ue->type | SOCK_CLOEXEC, 0, fds)) {
		pr_perror("%s: cannot create a socketpair", sk->what);
		ret = -errno;
	}
	if (netns_enter(own)) {
		if (!ret) {
			close(fds[0]);
			close(fds[1]);
		}
		return -EIO;
	}
	return ret;
}

/* Options, shutdown and file flags: after the queues, which the shutdown would refuse. */
static int finish_socket(int fd, const struct unix_sk *sk)
{
	const UnixSkEntry *ue = sk->ue;
	int ret = sk_opts_restore(fd, ue->opts, sk->what);

	/* sk_shutdown is SHUT_RD + 1, SHUT_WR + 1, SHUT_RDWR + 1. */
	if (!ret && ue->has_shutdown && ue->shutdown != SK_SHUTDOWN__NONE &&
	    shutdown(fd, ue->shutdown - 1)) {
		ret = -errno;
		pr_perror("%s: cannot shut it down (%d)", sk->what, ue->shutdown);
	}
	if (!ret && fcntl(fd, F_SETFL, ue->flags)) {
		ret = -errno;
		pr_perror("%s: cannot set its file flags %#o", sk->what, ue->flags);
	}
	return ret;
}

/*
 * The sockets the open() in progress makes, at their fds: a socket in flight in its own
 * queue or its peer's is one of them, not a dependency (see made_with()).
 */
static struct {
	const struct unix_sk *sks[2];
	int fds[2];
} making;

static int in_flight_fd(uint32_t id)
{
	for (int i = 0; i < 2; i++)
		if (making.sks[i] && making.sks[i]->id == id)
			return making.fds[i];
	return files_dep_fd(id);
}

/* The packets queued for sk, sent from writer_fd; peer at peer_fd is made with it. */
static int refill_queue(const struct unix_sk *sk, int sk_fd, int writer_fd,
			const struct unix_sk *peer, int peer_fd)
{
	int ret;

	if (!sk_queue_packets(sk->id))
		return 0;
	making.sks[0] = sk;
	making.fds[0] = sk_fd;
	making.sks[1] = peer;
	making.fds[1] = peer_fd;
	ret = sk_opts_widen_sndbuf(writer_fd, sk->what) ?:
	      sk_queue_restore(sk->id, writer_fd, sk->ue->type, in_flight_fd, sk->what);
	making.sks[0] = making.sks[1] = NULL;
	return ret;
}

/*
 * A connection through listening socket listener: a client connects to it, and the
 * server end is accepted, with the listener's name as the one it was accepted from had.
 * client: the image's client end (bound first, when it has a name), or NULL for one that
 * exists only to be closed.
 */
static int connect_through(const struct unix_sk *listener, const struct unix_sk *client,
			   const struct unix_sk *server, int *client_fd, int *server_fd)
{
	int lfd = files_dep_fd(listener->id), cfd, sfd, ret;

	if (lfd < 0)
		return lfd;
	cfd = new_socket(server);
	if (cfd < 0)
		return cfd;
	ret = client ? bind_sk(cfd, client) : 0;
	if (!ret)
		ret = connect_sk(cfd, listener, lfd, client ? client->what : server->what);
	if (ret) {
		close(cfd);
		return ret;
	}
	sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (sfd < 0) {
		ret = -errno;
		pr_perror("%s: cannot accept its connection from %s", server->what, listener->what);
		close(cfd);
		return ret;
	}
	*client_fd = cfd;
	*server_fd = sfd;
	return 0;
}

/* Both ends, connected; fds[0] is sk's, fds[1] its peer's. */
static int make_connected_ends(const struct unix_sk *sk, int fds[2])
{
	const struct unix_sk *peer = sk->peer, *listener = connection_listener(sk);
	int ret;

	if (listener && sk->via)
		return connect_through(listener, peer, sk, &fds[1], &fds[0]);
	if (listener)
		return connect_through(listener, sk, peer, &fds[0], &fds[1]);
	ret = new_socketpair(sk, fds);
	if (ret)
		return ret;
	/* A socketpair's ends take their names after they are connected. */
	ret = bind_sk(fds[0], sk) ?: bind_sk(fds[1], peer);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
	}
	return ret;
}

/*
 * Both ends of a connection or socketpair in one open(): each end's queue is sent again
 * by the other; the peer's end is kept for the peer's own open().
 */
static int open_pair(const struct unix_sk *sk)
{
	const struct unix_sk *peer = sk->peer;
	int fds[2], ret = make_connected_ends(sk, fds);

	if (ret)
		return ret;
	ret = refill_queue(sk, fds[0], fds[1], peer, fds[1]) ?:
	      refill_queue(peer, fds[1], fds[0], sk, fds[0]);
	if (!ret)
		ret = finish_socket(fds[0], sk) ?: finish_socket(fds[1], peer);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	ret = files_keep_for(peer->id, fds[1]);
	if (ret) {
		close(fds[0]);
		return ret;
	}
	pr_debug("%s and %s made together\n", sk->what, peer->what);
	return fds[0];
}

/*
 * fds[0] for sk, with a socket of criu's at fds[1] as its peer: the queue is sent from
 * there, then fds[1] is closed. fds[0], or -errno with both closed.
 */
static int fill_from_own_peer(const struct unix_sk *sk, int fds[2])
{
	int ret = refill_queue(sk, fds[0], fds[1], NULL, -1);

	close(fds[1]);
	if (ret) {
		close(fds[0]);
		return ret;
	}
	return fds[0];
}

/*
 * A connection end whose peer is gone: made with a peer of criu's that sends the queue
 * and then closes, which shuts it down both ways as the dumped one was.
 */
static int open_orphan_end(const struct unix_sk *sk)
{
	int fds[2], ret;

	if (sk->via) {
		ret = connect_through(sk->via, NULL, sk, &fds[1], &fds[0]);
	} else {
		ret = new_socketpair(sk, fds);
		if (!ret && (ret = bind_sk(fds[0], sk))) {
			close(fds[0]);
			close(fds[1]);
		}
	}
	return ret ?: fill_from_own_peer(sk, fds);
}

/*
 * A datagram socket that is not part of a socketpair. Its queue is sent by a socket of
 * criu's before it connects anywhere: the new socket starts as one end of a socketpair
 * whose own peer is cleared (connect() to AF_UNSPEC, while its queue is still empty, as
 * the kernel empties a queue on such a connect), so that the other end may still send
 * to it. Only a peer escapes net.unix.max_dgram_qlen, so as many datagrams as that
 * allows go in this way.
 */
static int new_datagram_socket(const struct unix_sk *sk)
{
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	int fds[2], ret;

	if (!sk_queue_packets(sk->id))
		return new_socket(sk);
	ret = new_socketpair(sk, fds);
	if (ret)
		return ret;
	if (connect(fds[0], &unspec, sizeof(unspec))) {
		ret = -errno;
		pr_perror("%s: cannot disconnect the new socket", sk->what);
		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	return fill_from_own_peer(sk, fds);
}

static int open_datagram(const struct unix_sk *sk)
{
	int fd = new_datagram_socket(sk), ret;

	if (fd < 0)
		return fd;
	ret = bind_sk(fd, sk);
	/* Its peer (a dependency) is bound by now; a socket may be its own peer. */
	if (!ret && sk->peer && is_extern(sk->peer))
		ret = connect_sk(fd, sk->peer, -1, sk->what);
	else if (!ret && sk->peer)
		ret = connect_sk(fd, sk->peer, sk->peer == sk ? fd : files_dep_fd(sk->peer->id),
				 sk->what);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

static int open_stream(const struct unix_sk *sk)
{
	int fd, ret;

	if (sk->ue->state == TCP_ESTABLISHED && !sk->peer)
		return open_orphan_end(sk);
	fd = new_socket(sk);
	if (fd < 0)
		return fd;
	ret = bind_sk(fd, sk);
	if (!ret && is_listening(sk) && listen(fd, sk->ue->backlog)) {
		ret = -errno;
		pr_perror("%s: cannot listen (backlog %u)", sk->what, sk->ue->backlog);
	}
	/* A client waiting to be accepted: its listening socket is a dependency. */
	if (!ret && is_pending(sk))
		ret = connect_sk(fd, sk->peer, files_dep_fd(sk->peer->id), sk->what);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The client's end of its connection to criu's service, which dumped it: a socketpair
 * whose other end sent the dump's answer as the client sees it after a restore (success,
 * restored) and went away.
 */
static int open_to_service(const struct unix_sk *sk)
{
	int fds[2], ret = new_socketpair(sk, fds);
	uint8_t buf[64];
	ssize_t len;

	if (ret)
		return ret;
	len = rpc_pack_restored_answer(buf, sizeof(buf));
	if (len < 0 || send(fds[1], buf, len, MSG_NOSIGNAL) != len) {
		ret = len < 0 ? (int)len : -errno;
		pr_err("%s: cannot queue the service's answer: %s\n", sk->what, strerror(-ret));
		close(fds[0]);
		fds[0] = ret;
	}
	close(fds[1]);
	return fds[0];
}

/* As CRIU asks for it: by the socket's inode. */
static int open_by_plugin(const struct unix_sk *sk)
{
	int fd = run_plugins(RESTORE_UNIX_SK, sk->ue->ino);

	if (fd == -ENOTSUP)
		pr_err("%s was dumped by a plugin, and no loaded plugin restores it\n", sk->what);
	return fd;
}

static int unix_sk_open(const struct file_desc *d)
{
	const struct unix_sk *sk = d->kind;
	int fd = files_take_kept(d->id), ret;

	if (fd != -ENOENT)
		return fd; /* made with its peer */
	if (is_extern(sk)) {
		pr_err("%s stands for a socket outside the dumped tree, which no fd holds\n",
		       sk->what);
		return -EINVAL;
	}
	if (is_pair(sk))
		return open_pair(sk);
	if (to_service(sk))
		fd = open_to_service(sk);
	else if (by_plugin(sk))
		fd = open_by_plugin(sk);
	else
		fd = sk->ue->type == SOCK_DGRAM ? open_datagram(sk) : open_stream(sk);
	if (fd < 0)
		return fd;
	ret = finish_socket(fd, sk);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

const struct fdtype_ops unix_sk_fdtype_ops = {
	.type = FD_TYPES__UNIXSK,
	.name = "unix socket",
	.owns = unix_sk_owns,
	.dump = unix_sk_dump,
	.dump_check = unix_sk_dump_check,
	.dump_fini = unix_sk_dump_fini,
	.collect_images = unix_sk_collect_images,
	.collect = unix_sk_collect,
	.collect_done = unix_sk_collect_done,
	.collect_fini = unix_sk_collect_fini,
	.open = unix_sk_open,
	.inheritable = true,
	.object_key = unix_sk_object_key,
	.opens_object = true,
	.deps = unix_sk_deps,
};
