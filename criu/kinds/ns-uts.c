/*
 * UTS namespaces: the host and domain names of a root with a UTS namespace of its own
 * (utsns-ID.img). Restore clones the root with CLONE_NEWUTS and sets both before it forks.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "namespaces.h"

#include "utsns.pb-c.h"

/* In a child joined to the namespace: its names as uname() gives them. */
static int uts_dump(const struct ns_id *ns)
{
	UtsnsEntry e = UTSNS_ENTRY__INIT;
	struct utsname names;
	struct cr_img *img;
	int ret;

	if (uname(&names)) {
		pr_perror("uts namespace %u: uname", ns->id);
		return -errno;
	}
	e.nodename = names.nodename;
	e.domainname = names.domainname;
	img = open_image(CR_IMG_UTSNS, O_WRONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_write_one(img, &e);
	close_image(img);
	pr_info("uts namespace %u: host name \"%s\", domain name \"%s\"\n", ns->id, e.nodename,
		e.domainname);
	return ret;
}

static int uts_collect(struct ns_id *ns)
{
	struct utsname names;
	struct cr_img *img;
	UtsnsEntry *e;
	int ret;

	img = open_image(CR_IMG_UTSNS, O_RDONLY, ns->id);
	if (!img)
		return -EIO;
	ret = pb_read_one_required(img, (void **)&e);
	if (!ret && (strlen(e->nodename) >= sizeof(names.nodename) ||
		     strlen(e->domainname) >= sizeof(names.domainname))) {
		pr_err("%s: a name longer than the kernel's %zu bytes\n", img->name,
		       sizeof(names.nodename) - 1);
		pb_free(img, e);
		ret = -EINVAL;
	}
	close_image(img);
	if (!ret)
		ns->priv = e;
	return ret;
}

static int uts_restore(const struct ns_id *ns)
{
	const UtsnsEntry *e = ns->priv;

	if (sethostname(e->nodename, strlen(e->nodename)) ||
	    setdomainname(e->domainname, strlen(e->domainname))) {
		pr_perror("uts namespace %u: cannot set its names (\"%s\", \"%s\")", ns->id,
			  e->nodename, e->domainname);
		return -errno;
	}
	pr_info("uts namespace %u: host name \"%s\", domain name \"%s\"\n", ns->id, e->nodename,
		e->domainname);
	return 0;
}

static void uts_fini(struct ns_id *ns)
{
	pb_free(NULL, ns->priv);
	ns->priv = NULL;
}

const struct ns_kind uts_ns_kind = {
	.name = "uts",
	.clone_flag = CLONE_NEWUTS,
	.dump = uts_dump,
	.collect = uts_collect,
	.restore = uts_restore,
	.fini = uts_fini,
};
