/*
 * <linux/kfd_ioctl.h> includes <drm/drm.h>; Debian ships that uapi header as
 * <libdrm/drm.h> (libdrm-dev), so this forwards to it.
 */
#include <libdrm/drm.h>
